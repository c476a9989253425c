/* What interpose/ tells the rest of the library: one function per intercepted call.
 *
 * interpose/ resolves the real symbols, guards against re-entrancy, computes the caller's stack
 * hash and forwards here; preload/ owns what happens (allocation map, trace, planner, redirect).
 * Types are plain (void pointers for NCCL and CUDA handles) so this header needs neither SDK. */
#ifndef SYMMPIN_PRELOAD_EVENTS_H
#define SYMMPIN_PRELOAD_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/site.h" /* symmpin_site_where */

/* Whether the wrappers report at all: false under SYMMPIN_DISABLE (the wrappers then call the
 * real function and nothing else). Reads the configuration on first use, so it is valid even for
 * calls made before the library's constructor ran. */
bool symmpin_events_enabled(void);

typedef enum symmpin_alloc_kind {
  SYMMPIN_ALLOC_CUDA_MALLOC = 0,
  SYMMPIN_ALLOC_CUDA_MALLOC_ASYNC = 1,
  SYMMPIN_ALLOC_NCCL_MEM = 2,
} symmpin_alloc_kind;

/* An allocation call returned `rc` (0 = success); recorded after the real call succeeded. */
void symmpin_event_alloc(symmpin_alloc_kind kind, void *ptr, size_t size, void *stream,
                         uint64_t stack, int rc);
/* A free is recorded before the real call (the address may be reused at once afterwards). */
void symmpin_event_free(symmpin_alloc_kind kind, void *ptr, void *stream);
void symmpin_event_free_result(symmpin_alloc_kind kind, void *ptr, int rc);

/* Communicator creation. `key` is the 128-bit identity every rank of the communicator derives
 * alike (see docs/design.md), `comm` the new handle (NULL if the call failed). */
typedef enum symmpin_comm_call {
  SYMMPIN_COMM_INIT_RANK,
  SYMMPIN_COMM_INIT_RANK_CONFIG,
  SYMMPIN_COMM_INIT_RANK_SCALABLE,
  SYMMPIN_COMM_INIT_ALL,
  SYMMPIN_COMM_SPLIT,
  SYMMPIN_COMM_SHRINK, /* ncclCommShrink's child (NCCL 2.27+): symmpin_event_comm_child */
  SYMMPIN_COMM_GROW,   /* ncclCommGrow's (NCCL 2.29+): symmpin_event_comm_child */
} symmpin_comm_call;
void symmpin_event_comm_init(symmpin_comm_call call, void *comm, uint64_t key_hi, uint64_t key_lo,
                             int rank, int nranks, int device, bool blocking, int rc);
/* Key for a split: the parent's key, its split counter and the color; rank/nranks of the child
 * are learned lazily. Returns the key in *hi and *lo. Called before the real ncclCommSplit, on every
 * rank (also with NCCL_SPLIT_NOCOLOR, so that split counters stay aligned); the split's
 * symmpin_event_comm_init(SYMMPIN_COMM_SPLIT, ..) follows on the same thread and takes the
 * parent and color from it. */
void symmpin_event_comm_split_key(void *parent, int color, uint64_t *hi, uint64_t *lo);

/* After the real ncclCommShrink or ncclCommGrow (`call`): `child` is the new handle (NULL if the
 * call failed or made none), `parent` the communicator it came from (NULL: a new rank of a Grow).
 * The ranks of such a child share no key symmpin could derive alike (Shrink's excluded ranks never
 * call it and Grow's non-root ranks pass no id), so symmpin passes it through for good: an entry
 * with the reason (comm.h symmpin_comm_register_passthrough), never an engine. */
void symmpin_event_comm_child(symmpin_comm_call call, void *parent, void *child, int device,
                              bool blocking, int rc);

/* Calls that change a live communicator's life (NCCL 2.27+; docs/compatibility.md). Before the
 * real call; `acts`: NCCL acts on the call as its flags say (a revoke with a flag NCCL refuses, a
 * suspend without NCCL_SUSPEND_MEM change nothing, in NCCL and in symmpin; they are traced): */
typedef enum symmpin_comm_life {
  SYMMPIN_COMM_REVOKE,       /* ncclCommRevoke: as NCCL's abort flags, symmpin's kernels of comm
                                stop; symmpin lets go of it (its pool goes once they have) and
                                NCCL takes (and refuses) its later calls */
  SYMMPIN_COMM_SUSPEND,      /* ncclCommSuspend(NCCL_SUSPEND_MEM), collective in NCCL (it waits
                                for the device): symmpin's kernels finish, symmpin lets go of comm
                                (its pool goes with NCCL's memory) and leaves it to NCCL for good */
  SYMMPIN_COMM_RESUME,       /* ncclCommResume: nothing comes back (comm stays with NCCL) */
  SYMMPIN_COMM_SHRINK_ABORT, /* ncclCommShrink(NCCL_SHRINK_ABORT) on its parent `comm`: as at a
                                revoke, the parent's kernels stop and it stays with NCCL */
} symmpin_comm_life;
void symmpin_event_comm_life(symmpin_comm_life what, void *comm, bool acts);
/* After it, with its result. */
void symmpin_event_comm_life_result(symmpin_comm_life what, void *comm, int rc);

typedef enum symmpin_comm_end {
  SYMMPIN_COMM_DESTROY,
  SYMMPIN_COMM_ABORT,
  SYMMPIN_COMM_FINALIZE,
} symmpin_comm_end;
/* Before the real call: symmpin releases what it holds for `comm`. */
void symmpin_event_comm_end(symmpin_comm_end call, void *comm);
void symmpin_event_comm_end_result(symmpin_comm_end call, void *comm, int rc);

/* The ncclResult_t symmpin reports for a kernel that gave up waiting for a peer: ncclRemoteError
 * (interpose/nccl_wrap.c checks the number against nccl.h). */
#define SYMMPIN_NCCL_REMOTE_ERROR 6
/* ncclUnhandledCudaError: this rank could not launch a kernel its peers run. */
#define SYMMPIN_NCCL_UNHANDLED_CUDA_ERROR 1

/* ncclCommGetAsyncError: the error symmpin holds for `comm` (an ncclResult_t; 0 = none), which
 * the wrapper reports when NCCL itself reports none. */
int symmpin_event_comm_async_error(void *comm);

/* Group depth per thread. Inside a group symmpin holds the calls it takes and launches them at the
 * outermost ncclGroupEnd, as NCCL does, in one kernel per stream and datatype (each call keeps
 * its slot and its bits); each rank's kernel waits only for its peers' symmpin kernels, never for
 * NCCL's, so the order against NCCL's part of a mixed group does not matter. */
void symmpin_event_group_start(int rc);
/* Before the real ncclGroupEnd: at the outermost one, launch the calls held for the group. 0, or
 * the ncclResult_t ncclGroupEnd must report (a launch failed: the communicator is in error). */
int symmpin_event_group_flush(void);
/* Before the real ncclGroupSimulateEnd (which runs nothing): at the outermost one, drop the calls
 * held for the group. */
void symmpin_event_group_drop(void);
/* After the real ncclGroupEnd or ncclGroupSimulateEnd (rc: its result): at the outermost one,
 * tell the engines that held calls or asked for it (the choice times a group whole, engine.h
 * symmpin_engine_group_end), then leave the group. */
void symmpin_event_group_end(int rc);

/* One collective call as the wrappers pass it. */
typedef struct symmpin_coll_call {
  const void *send;
  void *recv;
  size_t count;  /* NCCL's count argument (common/types.h) */
  int dtype, op; /* op: 0 for an all-gather */
  int coll;      /* common/types.h's SYMMPIN_COLLS; 0 (a zeroed call's) = all-reduce */
  void *comm;
  void *stream;
  uint64_t stack; /* module-relative hash of the caller's return addresses */
  symmpin_site_where where; /* where the caller is, for reports (interpose/callsite.h); not hashed */
} symmpin_coll_call;

/* Decide a collective call. Returns true if symmpin took it (then *rc is the ncclResult_t to
 * return); false: the wrapper calls the real NCCL function and then reports with _result(). */
bool symmpin_event_collective(const symmpin_coll_call *c, int *rc);
void symmpin_event_collective_result(const symmpin_coll_call *c, int rc);

#endif
