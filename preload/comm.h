/* The communicator registry: what symmpin knows about each NCCL communicator of this process.
 * Keyed by the ncclComm_t handle. Entries are created by the comm-init events, looked up on every
 * all-reduce (read-mostly: lock-free lookups of a fixed-capacity open-addressed table), and
 * released by the comm-end events and at exit. */
#ifndef SYMMPIN_PRELOAD_COMM_H
#define SYMMPIN_PRELOAD_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/commkey.h"

#define SYMMPIN_MAX_STREAMS_PER_COMM 64

struct symmpin_engine_comm; /* the engine's per-communicator state (preload/engine.c) */
struct symmpin_stats_comm;  /* the statistics of this communicator (preload/stats.h) */

typedef struct symmpin_comm {
  void *handle;            /* ncclComm_t */
  symmpin_comm_key key;   /* identity shared by every rank of the communicator */
  int ordinal;             /* index of key among keys seen by this process (docs/design.md) */
  int rank, nranks;        /* -1 until known (splits and non-blocking inits learn them lazily) */
  int device;              /* CUDA device of this rank */
  bool blocking;           /* false for non-blocking communicators (config.blocking = 0) */
  uint32_t splits;         /* ncclCommSplit calls on this communicator so far (child keys) */
  uint64_t allreduces;     /* all-reduce calls seen on this communicator, counting the current
                              one: preload increments it (under lock) before the engine sees
                              the call, so the engine's call index is allreduces - 1 */
  pthread_mutex_t lock;    /* guards the fields below and the engine state. preload holds it
                              while it calls symmpin_engine_allreduce and
                              symmpin_engine_comm_release: the engine must not take it again */
  void *streams[SYMMPIN_MAX_STREAMS_PER_COMM]; /* stream ordinal -> handle, in order of first use */
  int nstreams;
  struct symmpin_engine_comm *engine; /* NULL until the engine attaches state */
  struct symmpin_stats_comm *stats;   /* NULL when statistics are off */
  /* Read and written without the lock (an abort must not wait behind a thread that holds it): */
  _Atomic int aborting;               /* ncclCommAbort is under way: every wait gives up */
  _Atomic int async_error;            /* the ncclResult_t of a failure symmpin could not hide
                                         (a kernel gave up waiting): reported by
                                         ncclCommGetAsyncError and every later all-reduce */
  _Atomic(volatile uint32_t *) kernel_abort;        /* host word the kernels poll (engine) */
  _Atomic(const volatile uint32_t *) kernel_failed; /* host word a kernel sets on giving up */
} symmpin_comm;

/* Stream ordinal of `stream` on comm c (assigning the next one on first use); -1 when the table
 * is full. Caller holds c->lock. */
int symmpin_comm_stream_ordinal(symmpin_comm *c, void *stream);

/* Lookup by handle; NULL if unknown. Lock-free. */
symmpin_comm *symmpin_comm_find(void *handle);

/* --- the registry's writers (preload.c); not on the per-call path --- */

/* The communicator ordinal of key (docs/design.md "Identities"): its index among the keys this
 * process has seen, assigning the next one on first sight. */
int symmpin_comm_ordinal(symmpin_comm_key key);

/* Create and publish the entry for a new handle (rank/nranks may be -1 = learn later). A live
 * entry with the same handle (its destroy was missed) is replaced and freed. NULL when the table
 * is full or memory runs out (logged): the communicator's calls then go to NCCL. */
symmpin_comm *symmpin_comm_register(void *handle, symmpin_comm_key key, int rank, int nranks,
                                    int device, bool blocking);
/* Unpublish c and free it (the handle is dead: destroy/abort). A no-op for the table if c was
 * already replaced by a newer entry of the same handle. The caller must be the only user of c. */
void symmpin_comm_unregister(symmpin_comm *c);

/* Call fn on every live entry, under the registry's lock (no register/unregister meanwhile). */
void symmpin_comm_for_each(void (*fn)(symmpin_comm *c, void *arg), void *arg);
size_t symmpin_comm_live(void);

/* Forget everything (entries freed, ordinals restart at 0). Tests only. */
void symmpin_comm_registry_reset(void);

#endif
