/* What a communicator's kernels touch outlives the communicator until they are done with it.
 *
 * A communicator's kernels use its symmetric pool and write its error record (host-mapped
 * memory). At ncclCommDestroy some of them may still be queued, at ncclCommAbort some may still be
 * giving up, and CUDA graphs that captured them may be replayed later. NCCL's contract lets the
 * program destroy a communicator without synchronizing first, so the engine hands these
 * resources to a "keep" that frees them once
 *   - every eager kernel is done: the per-slot events recorded after them have completed
 *     (queried, never waited for), and
 *   - every graph that captured a kernel is gone: each such graph holds a reference through a
 *     CUDA user object, dropped by CUDA after the graph is destroyed and its launches are done.
 * Nothing here synchronizes a device or a stream, and nothing waits for a peer: the pool's
 * mappings hold the memory a peer's kernel may still use (symmem/pool.h).
 *
 * Freeing happens in symmpin_keep_drain(), which the engine calls where CUDA calls are allowed
 * (communicator setup and teardown, the async-error query, the watch thread's every tick); a keep
 * that is not done then waits for the next drain, or for process exit.
 *
 * The error record has a second owner: the communicator's registry entry (errrec.h). */
#ifndef SYMMPIN_PRELOAD_RETIRE_H
#define SYMMPIN_PRELOAD_RETIRE_H

#include <stdbool.h>

#include "preload/errrec.h"
#include "symmem/pool.h"

typedef struct symmpin_keep symmpin_keep;

/* A keep for `pool` (may be NULL: taken over now, freed by the keep) of the communicator on
 * `device`, with a fresh error record (*err, two references: the caller passes one to the
 * communicator). NULL if no record can be had (the host allocation failed; logged). */
symmpin_keep *symmpin_keep_new(symmpin_pool *pool, int device, symmpin_errrec **err);

/* A graph being captured on `stream` holds the keep until the graph is gone. false (logged once
 * per keep) if CUDA refused: the caller must not capture the kernel then (the graph could outlive
 * the pool). The engine treats that as a failed launch: the call fails (ncclUnhandledCudaError)
 * and the communicator enters its error state, since the peers already route the call to
 * symmpin's kernel and NCCL could not pair it. */
bool symmpin_keep_hold_for_graph(symmpin_keep *k, void *stream);

/* The communicator is done with the keep: `events` (n CUevent, recorded after its latest
 * eager kernels, possibly never recorded) are taken over and destroyed by the keep. Frees at once
 * when everything is done; else at a later drain. Safe on NULL. */
void symmpin_keep_retire(symmpin_keep *k, void *const *events, int n);

/* Free every retired keep that is done. Never waits; does nothing while another thread drains. */
void symmpin_keep_drain(void);

/* Retired keeps not freed yet (tests, stats). */
int symmpin_keep_pending(void);

#endif
