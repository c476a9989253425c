/* A symmetric pool: device memory of the same size on every rank of a communicator, where byte
 * offset o is the same slot on every rank, and every rank can load and store every peer's pool
 * (NVLink peer access). Pools grow by chunks; a slot never straddles two chunks, and existing
 * chunks never move, so a planned offset stays valid forever.
 *
 * Sharing: chunks of cudaMalloc memory (from the device allocator below) exported with CUDA IPC
 * handles posted on the communicator's board (board.h); a peer in another process opens them with
 * cudaIpcOpenMemHandle, a peer in this process (one thread or one thread per GPU driving several
 * ranks) uses the pointer directly.
 *
 * Growing is collective and split in two steps so that a thread driving several ranks never blocks
 * on itself: every rank calls symmpin_pool_reserve() (allocates its chunk, returns the bytes to
 * post), everyone posts, every rank calls symmpin_pool_attach() with all ranks' posts, everyone
 * posts whether it attached, and every rank settles the grow as agreed (symmpin_pool_settle()).
 * None of these may run during CUDA-graph capture in global mode (the caller relaxes it). */
#ifndef SYMMPIN_SYMMEM_POOL_H
#define SYMMPIN_SYMMEM_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/types.h"

typedef struct symmpin_pool symmpin_pool;

#define SYMMPIN_POOL_EXPORT_BYTES 128 /* one rank's export record for one chunk */

/* Chunks are whole multiples of this (the granularity of cudaMalloc's own large allocations):
 * a chunk never shares its pages with the program's memory, so exporting it exposes nothing else. */
#define SYMMPIN_POOL_CHUNK_ALIGN ((size_t)2 << 20)

/* Where chunks come from. Inside libsymmpin.so a call of cudaMalloc/cudaFree by name binds to the
 * library's own exported wrappers (interpose/symmpin.map), which would record the pool as one of
 * the program's allocations and tie this module to the interposition layer; so the preload hands
 * in the real runtime functions it resolved. Both return a cudaError_t as int (0 = success);
 * alloc sets *ptr only on success and must return memory of the kind cudaMalloc returns
 * (exportable with cudaIpcGetMemHandle: not cudaMallocAsync, managed or host memory). They are
 * called with the pool's device current and the thread's capture mode relaxed, from whichever
 * thread drives the rank, so they must be thread-safe. Every chunk allocation and free of a pool
 * goes through them; the pool's other runtime calls (zeroing, IPC, peer access) are none that
 * libsymmpin wraps. */
typedef struct symmpin_device_allocator {
  int (*alloc)(void **ptr, size_t bytes);
  int (*free)(void *ptr);
} symmpin_device_allocator;

/* Process-wide, copied: set it once at start, before the first pool is created (the preload, with
 * the real cudaMalloc/cudaFree). A pool keeps the allocator in force when it was created, so every
 * chunk is freed by the allocator that made it, even if the setting changes later. NULL or never
 * set: cudaMalloc/cudaFree by name, which is right for tests and tools that are not preloaded.
 * An allocator missing either function is refused with a warning and the current one stays. */
void symmpin_pool_set_allocator(const symmpin_device_allocator *a);

/* Create an empty pool for `rank` of `nranks` on CUDA device `device`. No CUDA call yet.
 * A pool belongs to one rank; its caller serializes calls on it (not thread-safe). */
symmpin_status symmpin_pool_create(int rank, int nranks, int device, symmpin_pool **out);
/* Free every chunk and unmap every peer mapping. Safe on NULL. Synchronizes the device first. */
void symmpin_pool_destroy(symmpin_pool *p);
/* Optional first step of a clean teardown: close this rank's mappings of its peers' chunks (after
 * synchronizing the device), keeping its own chunks. CUDA leaves freeing exported memory that a
 * peer still maps undefined, so a clean teardown is: every rank unmap_peers(), a barrier (board
 * round), every rank destroy(). Afterwards addr() of a peer is NULL and the pool cannot grow. */
symmpin_status symmpin_pool_unmap_peers(symmpin_pool *p);

/* Step 1 of growing to `bytes`: allocate (zeroed) the local chunk that covers exactly
 * [current size, bytes) (the allocation itself is rounded up to SYMMPIN_POOL_CHUNK_ALIGN, so it
 * shares no pages with the program's memory; the next chunk starts at `bytes`, where a planner that
 * appends puts its next slot) and write this rank's export
 * record into export_rec (SYMMPIN_POOL_EXPORT_BYTES, any alignment). If the pool is already big
 * enough, writes an empty record. A reserve whose epoch failed stays reserved: reserving the same
 * size again re-exports it; another size sets it aside until destroy() (a peer may still map it)
 * and allocates a new chunk, so a failed epoch never blocks later growth (up to four set-aside
 * chunks; then SYMMPIN_ERR_UNSUPPORTED: the pool stops growing). */
symmpin_status symmpin_pool_reserve(symmpin_pool *p, size_t bytes, void *export_rec);
/* Step 2: map every peer's chunk from their export records (records[r] for rank r, records[rank]
 * is ignored; any alignment). After it, symmpin_pool_size() is the new size on this rank, but only
 * provisionally. SYMMPIN_ERR_DISAGREE if the records do not describe the same chunk as this rank's
 * reserve; SYMMPIN_ERR_UNSUPPORTED if a peer's device is not P2P-reachable. On error the pool
 * keeps its old size. Attach can fail on one rank only: the caller agrees on the outcome (posts
 * it) before anyone uses the new chunk, and then settles. */
symmpin_status symmpin_pool_attach(symmpin_pool *p, const void *const records[]);
/* Step 3, on every rank that attached: the outcome every rank agreed on. agreed: the new size is
 * final. Not agreed: back to the old size (the peers' new chunks unmapped, this rank's own chunk
 * reserved again), so every rank's pool has the same size again. No-op when nothing is pending. */
void symmpin_pool_settle(symmpin_pool *p, bool agreed);

size_t symmpin_pool_size(const symmpin_pool *p);
/* Device address of byte `offset` of rank r's pool as seen from this process, or NULL if
 * out of range. Slot [offset, offset + bytes) must lie inside one chunk: see fits(). */
void *symmpin_pool_addr(const symmpin_pool *p, int r, size_t offset);
bool symmpin_pool_fits(const symmpin_pool *p, size_t offset, size_t bytes);
/* Whether addr lies in this rank's own pool; *offset receives its offset. */
bool symmpin_pool_contains(const symmpin_pool *p, const void *addr, size_t *offset);

/* Whether device a can load/store device b's memory (P2P), or a == b. CUDA query, no side effect. */
bool symmpin_pool_p2p_ok(int device_a, int device_b);

/* Eligibility facts one rank posts (round 1 of the agreement) so that every rank can check the
 * device pairs. Plain bytes, same layout in every process. */
typedef struct symmpin_pool_facts {
  uint64_t proc_token; /* random per process: with pid, "same process" even across pid namespaces */
  int32_t pid;
  int32_t device;      /* CUDA ordinal in the posting process */
  uint8_t uuid[16];    /* the device's UUID: names the GPU across processes */
} symmpin_pool_facts;

/* This process's facts for CUDA device `device`. */
symmpin_status symmpin_pool_facts_get(int device, symmpin_pool_facts *out);
/* Whether a pool can span these ranks' devices (facts[r] for rank r): every pair of devices must
 * be the same GPU or P2P-capable (both ways). The caller knows all ranks are on one host (they all
 * posted on one board). Pairs involving a GPU this process cannot see (per-process
 * CUDA_VISIBLE_DEVICES) cannot be queried here and are left to attach(), where CUDA IPC with
 * lazy peer access either maps them or fails. Returns SYMMPIN_OK or SYMMPIN_ERR_UNSUPPORTED
 * (with the reason in why, if why_len > 0) and logs nothing: this is an expected outcome, which
 * the caller logs at INFO. Same answer on every rank that sees the same GPUs. */
symmpin_status symmpin_pool_check_peers(const symmpin_pool_facts *facts, int nranks, char *why,
                                        size_t why_len);

#endif
