/* A symmetric pool: device memory of the same size on every rank of a communicator, where byte
 * offset o is the same slot on every rank, and every rank can load and store every peer's pool
 * (NVLink peer access). Pools grow by chunks; a slot never straddles two chunks, and existing
 * chunks never move, so a planned offset stays valid forever.
 *
 * Sharing: chunks of device memory made with the driver's virtual memory API (cuMemCreate),
 * offered to peer processes as file descriptors (symmem/fdpass.h; the record a rank posts on the
 * board names the offer). Every rank maps every rank's chunk itself, in another process or in
 * this one, and each mapping holds the physical memory: a chunk's memory goes when its last
 * mapping in any process goes. So a rank frees its pool when its own kernels are done with it,
 * never waiting for its peers, and never frees memory a peer's kernel may still use.
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

/* Chunks are whole multiples of this and of the driver's allocation granularity: a chunk never
 * shares its pages with anything else, so exporting it exposes nothing else. */
#define SYMMPIN_POOL_CHUNK_ALIGN ((size_t)2 << 20)

/* Create an empty pool for `rank` of `nranks` on CUDA device `device`. No CUDA call yet.
 * A pool belongs to one rank; its caller serializes calls on it (not thread-safe). */
symmpin_status symmpin_pool_create(int rank, int nranks, int device, symmpin_pool **out);
/* Unmap every mapping this rank holds (its own chunks and its peers') and release its chunks.
 * Safe on NULL. The caller guarantees that no kernel of this rank uses the pool any more (the
 * preload waits for its events first: preload/keep.h); peers need nothing: their own mappings
 * keep what they still use. Never synchronizes the device. */
void symmpin_pool_destroy(symmpin_pool *p);

/* Step 1 of growing to `bytes`: allocate (zeroed) the local chunk that covers exactly
 * [current size, bytes) (the allocation itself is rounded up, so it shares no pages with anything
 * else; the next chunk starts at `bytes`, where a planner that appends puts its next slot), offer
 * it to peer processes, and write this rank's export record into export_rec
 * (SYMMPIN_POOL_EXPORT_BYTES, any alignment). If the pool is already big enough, writes an empty
 * record. A reserve whose epoch failed stays reserved: reserving the same size again re-exports
 * it; another size releases it (a peer that mapped it keeps its own mapping until it settles) and
 * allocates a new chunk, so a failed epoch never blocks later growth. SYMMPIN_ERR_UNSUPPORTED
 * where the CUDA driver lacks the virtual memory API. */
symmpin_status symmpin_pool_reserve(symmpin_pool *p, size_t bytes, void *export_rec);
/* Step 2: map every peer's chunk from their export records (records[r] for rank r, records[rank]
 * is ignored; any alignment). After it, symmpin_pool_size() is the new size on this rank, but only
 * provisionally. SYMMPIN_ERR_DISAGREE if the records do not describe the same chunk as this rank's
 * reserve; SYMMPIN_ERR_UNSUPPORTED if a peer's device is not P2P-reachable; SYMMPIN_ERR_IO if a
 * peer process does not hand over its chunk (fdpass.h: ended, or in another network namespace).
 * Peers in other processes are asked for their chunks (fdpass.h), whose server threads answer at
 * once: attach never waits for a peer to reach some step. On error the pool
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

/* Whether pools can live on CUDA device `device`: the driver has the virtual memory API and the
 * device exports memory as POSIX file descriptors. SYMMPIN_ERR_UNSUPPORTED with the reason in why
 * otherwise (an expected outcome: the caller logs it at INFO, and stays on NCCL). No side effect. */
symmpin_status symmpin_pool_device_check(int device, char *why, size_t why_len);

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
 * CUDA_VISIBLE_DEVICES) cannot be queried here and are left to attach(), where granting this
 * device access to the mapping either works or fails. Returns SYMMPIN_OK or SYMMPIN_ERR_UNSUPPORTED
 * (with the reason in why, if why_len > 0) and logs nothing: this is an expected outcome, which
 * the caller logs at INFO. Same answer on every rank that sees the same GPUs. */
symmpin_status symmpin_pool_check_peers(const symmpin_pool_facts *facts, int nranks, char *why,
                                        size_t why_len);

#endif
