/* A symmetric pool: device memory of the same size on every rank of a communicator, where byte
 * offset o is the same slot on every rank, and every rank can load and store every peer's pool
 * (NVLink peer access). Pools grow by chunks; a slot never straddles two chunks, and existing
 * chunks never move, so a planned offset stays valid forever.
 *
 * Sharing: cudaMalloc'd chunks exported with CUDA IPC handles posted on the communicator's board
 * (board.h); a peer in another process opens them with cudaIpcOpenMemHandle, a peer in this process
 * (one thread or one thread per GPU driving several ranks) uses the pointer directly.
 *
 * Growing is collective and split in two steps so that a thread driving several ranks never blocks
 * on itself: every rank calls symmpin_pool_reserve() (allocates its chunk, returns the bytes to
 * post), everyone posts, and every rank calls symmpin_pool_attach() with all ranks' posts.
 * Neither step may run during CUDA-graph capture (the caller postpones it). */
#ifndef SYMMPIN_SYMMEM_POOL_H
#define SYMMPIN_SYMMEM_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/types.h"

typedef struct symmpin_pool symmpin_pool;

#define SYMMPIN_POOL_EXPORT_BYTES 128 /* one rank's export record for one chunk */

/* Create an empty pool for `rank` of `nranks` on CUDA device `device`. No CUDA call yet. */
symmpin_status symmpin_pool_create(int rank, int nranks, int device, symmpin_pool **out);
/* Free every chunk and unmap every peer mapping. Safe on NULL. Synchronizes the device first. */
void symmpin_pool_destroy(symmpin_pool *p);

/* Step 1 of growing to at least `bytes`: allocate (zeroed) the local chunk that covers
 * [current size, bytes) and write this rank's export record into export_rec
 * (SYMMPIN_POOL_EXPORT_BYTES). If the pool is already big enough, writes an empty record. */
symmpin_status symmpin_pool_reserve(symmpin_pool *p, size_t bytes, void *export_rec);
/* Step 2: map every peer's chunk from their export records (records[r] for rank r, records[rank]
 * is ignored). After it, symmpin_pool_size() is the new size on every rank. */
symmpin_status symmpin_pool_attach(symmpin_pool *p, const void *const records[]);

size_t symmpin_pool_size(const symmpin_pool *p);
/* Device address of byte `offset` of rank r's pool as seen from this process, or NULL if
 * out of range. Slot [offset, offset + bytes) must lie inside one chunk: see fits(). */
void *symmpin_pool_addr(const symmpin_pool *p, int r, size_t offset);
bool symmpin_pool_fits(const symmpin_pool *p, size_t offset, size_t bytes);
/* Whether addr lies in this rank's own pool; *offset receives its offset. */
bool symmpin_pool_contains(const symmpin_pool *p, const void *addr, size_t *offset);

/* Whether device a can load/store device b's memory (P2P), or a == b. CUDA query, no side effect. */
bool symmpin_pool_p2p_ok(int device_a, int device_b);

#endif
