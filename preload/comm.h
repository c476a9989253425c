/* The communicator registry: what symmpin knows about each NCCL communicator of this process.
 * Keyed by the ncclComm_t handle. Entries are created by the comm-init events, looked up on every
 * collective call (read-mostly: lock-free lookups of a fixed-capacity open-addressed table), and
 * released by the comm-end events and at exit.
 *
 * Lifetime: an entry is reference counted. The registry holds one reference while the entry is
 * registered; every symmpin_comm_acquire holds one more until its symmpin_comm_put. The entry is
 * freed by whichever comes last: symmpin_comm_unregister or the last put. So a thread inside a
 * collective keeps its entry valid while another thread destroys or aborts the communicator. */
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
  uint64_t collectives;    /* collective calls (all three, common/types.h) seen on this
                              communicator, counting the current one: preload increments it
                              (under lock) before the engine sees the call, so collectives is
                              the call's index n = 1, 2, ... */
  pthread_mutex_t lock;    /* guards the fields below and the engine state. preload holds it
                              while it calls symmpin_engine_collective and
                              symmpin_engine_comm_release: the engine must not take it again */
  void *streams[SYMMPIN_MAX_STREAMS_PER_COMM]; /* stream ordinal -> handle, in order of first use */
  /* For the per-thread default stream (symmpin_comm_stream_is_per_thread), the thread that named
   * it: the one handle is a different stream on every thread. 0 for every other handle. */
  unsigned long stream_thread[SYMMPIN_MAX_STREAMS_PER_COMM];
  int nstreams;
  struct symmpin_engine_comm *engine; /* NULL until the engine attaches state */
  struct symmpin_stats_comm *stats;   /* NULL when statistics are off */
  /* Read and written without the lock (an abort must not wait behind a thread that holds it): */
  _Atomic int aborting;               /* ncclCommAbort is under way: every wait gives up */
  _Atomic int async_error;            /* the ncclResult_t of a failure symmpin could not hide
                                         (a kernel gave up waiting): reported by
                                         ncclCommGetAsyncError and every later collective */
  _Atomic(volatile uint32_t *) kernel_abort;        /* host word the kernels poll (engine) */
  _Atomic(const volatile uint32_t *) kernel_failed; /* host word a kernel sets on giving up */
  struct symmpin_errrec *err_rec; /* the record both words lie in: this entry's reference, dropped
                                     when the entry is freed (no reader can hold it then) */
  _Atomic int ended; /* destroy/abort/finalize has released the engine state (preload sets it,
                        under lock, with the release): a holder must not create it again */
  /* Why symmpin never serves this communicator (its calls pass through to NCCL), or NULL: it may.
   * A static string, written under the lock: a child of ncclCommShrink or ncclCommGrow from the
   * start, a communicator after ncclCommRevoke or ncclCommSuspend (docs/compatibility.md). */
  const char *passthrough;
  bool keyless; /* registered without a key its ranks share (symmpin_comm_register_passthrough):
                   a split of it has none either, so it passes through too */
  _Atomic unsigned long lock_owner; /* symmpin_comm_thread_id() of the holder of `lock` taken by
                                       symmpin_comm_lock/trylock, 0 if none (exit asks) */
} symmpin_comm;

/* ---- the communicator's failure and abort: one owner each (NCCL's ncclCommSetAsyncError) ---- */

/* Enter c's error state with `code` (an ncclResult_t, nonzero) unless it is in one already: the
 * first code stands, and is what ncclCommGetAsyncError and every later collective call on c report.
 * Entering it also sets the kernels' abort word: this rank's waiting kernels give up (their
 * peers' calls no longer pair up with theirs). Returns the code that stands. `why` (may be NULL)
 * goes into one INFO line when this call entered the state; the caller logs its own WARN.
 * Lock-free: any thread, with or without c->lock. */
int symmpin_comm_fail(symmpin_comm *c, int code, const char *why);

/* Every wait of c gives up now, on the host (the agreement's waits: c->aborting) and in the
 * kernels (their abort word, once the engine has made it; engine.c sets it at creation when
 * c->aborting is already set). What ncclCommAbort, ncclCommRevoke, a handle NCCL gives out again
 * and the process's exit do first. Lock-free and allocation-free: safe while another thread (or
 * this one, interrupted) holds c->lock. Failures of kernels that gave up for this reason are not
 * errors (symmpin_comm_async_error). */
void symmpin_comm_signal_abort(symmpin_comm *c);

/* The error c is in (0 = none); a kernel that gave up waiting (its error record's word) enters
 * ncclRemoteError here, unless the kernels were told to abort. Lock-free: one atomic load when
 * the engine has no kernels yet, two more otherwise (it is on every collective call's path). */
int symmpin_comm_async_error(symmpin_comm *c);

/* ---- the entry's lock, with its holder known (the exit must never wait for its own thread) ----
 */

/* A number for the calling thread: never 0, never reused (not pthread_self(), which glibc hands
 * to the next thread at once). */
unsigned long symmpin_comm_thread_id(void);
void symmpin_comm_lock(symmpin_comm *c);
bool symmpin_comm_trylock(symmpin_comm *c); /* true: locked */
/* Lock, waiting at most until `deadline` (CLOCK_MONOTONIC); true: locked. */
bool symmpin_comm_lock_by(symmpin_comm *c, const struct timespec *deadline);
void symmpin_comm_unlock(symmpin_comm *c);
/* Whether the calling thread holds c->lock (taken through the functions above). */
bool symmpin_comm_locked_here(const symmpin_comm *c);

/* Stream ordinal of `stream` on comm c (assigning the next one on first use); -1 when the table
 * is full. The per-thread default stream gets one ordinal per thread that uses it. Caller holds
 * c->lock. */
int symmpin_comm_stream_ordinal(symmpin_comm *c, void *stream);

/* Whether `stream` is cudaStreamPerThread (the handle 0x2, cuda_runtime_api.h): one handle that
 * names a different stream on every thread. */
bool symmpin_comm_stream_is_per_thread(const void *stream);

/* The entry of handle with a reference taken, or NULL if the handle is not registered. Lock-free
 * (never waits for a writer); on the hit path one atomic read-modify-write on the entry. The
 * entry stays valid (not freed, fields not reused) until the matching symmpin_comm_put, even if
 * the communicator is unregistered meanwhile. Every caller that may race with the handle's
 * destroy/abort on another thread (all per-call paths: collectives, async error, split parent,
 * comm end) must use this, not symmpin_comm_find. */
symmpin_comm *symmpin_comm_acquire(void *handle);

/* Drop a reference from symmpin_comm_acquire (NULL: nothing). The last one, after unregister,
 * frees c: call it after unlocking c->lock, and never use c after it. Lock-free; may be called
 * from anywhere, including a symmpin_comm_for_each callback. */
void symmpin_comm_put(symmpin_comm *c);

/* Lookup by handle without a reference; NULL if unknown. Lock-free. The result is only safe to use
 * while the caller otherwise knows the entry stays registered: it is the only thread that can
 * unregister it, or it holds a reference already (tests, writers). Per-call paths use acquire. */
symmpin_comm *symmpin_comm_find(void *handle);

/* --- the registry's writers (events.c); not on the per-call path --- */

/* The communicator ordinal of key (docs/design.md "Identities"): its index among the keys this
 * process has seen, assigning the next one on first sight. */
int symmpin_comm_ordinal(symmpin_comm_key key);

/* Create and publish the entry for a new handle (rank/nranks may be -1 = learn later). A live
 * entry with the same handle (its destroy was missed) is replaced: unpublished and its registry
 * reference dropped (freed once its holders put it). NULL when the table is full or memory runs
 * out (logged): the communicator's calls then go to NCCL. The result is the registry's: the
 * caller may use it without a reference only while no other thread can unregister it. */
symmpin_comm *symmpin_comm_register(void *handle, symmpin_comm_key key, int rank, int nranks,
                                    int device, bool blocking);
/* Unpublish c and drop the registry's reference (the handle is dead: destroy/abort); c is freed
 * now if no thread holds it, else by the last symmpin_comm_put. A no-op if c was already
 * unregistered or replaced by a newer entry of the same handle. A caller that uses c after this
 * call (or calls it on an entry another thread may unregister) must hold a reference. */
void symmpin_comm_unregister(symmpin_comm *c);

/* Like symmpin_comm_register, for a communicator symmpin passes through for good (`why`, a static
 * string: c->passthrough): no key its ranks share, so it takes no communicator ordinal (-1: the
 * ordinals of the communicators symmpin serves stay the same on every rank, whether or not a rank
 * made this one) and splits of it pass through too (c->keyless). Registered all the same, so that
 * its calls are counted and shown with the reason, and a stale entry of a reused handle is
 * replaced rather than served. */
symmpin_comm *symmpin_comm_register_passthrough(void *handle, int rank, int nranks, int device,
                                                bool blocking, const char *why);

/* Call fn on every live entry, under the registry's lock (no register/unregister meanwhile). */
void symmpin_comm_for_each(void (*fn)(symmpin_comm *c, void *arg), void *arg);
/* The same without the registry's lock (the exit: its thread may be holding it): fn gets each
 * entry with a reference held for the call. An entry registered or removed meanwhile may be
 * missed, and one that a rebuild moved under the walk visited twice (fn must not mind).
 * Allocation-free. */
void symmpin_comm_for_each_unlocked(void (*fn)(symmpin_comm *c, void *arg), void *arg);
size_t symmpin_comm_live(void);

/* Forget everything (entries freed, held or not; ordinals restart at 0). Tests only. */
void symmpin_comm_registry_reset(void);

/* The registry's shape, for tests of its bounds (not on any per-call path). */
typedef struct symmpin_comm_registry_stats {
  uint32_t slots;      /* slots of one table */
  uint32_t live;       /* registered entries */
  uint32_t tombstones; /* removed slots of the current table not yet reclaimed */
  uint32_t tables;     /* slot arrays that exist (fixed: 2, whatever the churn) */
  uint64_t rebuilds;   /* times the live entries were moved into a fresh table */
  uint64_t entries;    /* entry allocations that exist: live + held after unregister + kept free */
} symmpin_comm_registry_stats;
void symmpin_comm_registry_probe_stats(symmpin_comm_registry_stats *out);
/* Slots a lookup of handle examines in the current table right now (1 = its home slot decides). */
uint32_t symmpin_comm_registry_probes(void *handle);

#ifdef SYMMPIN_COMM_TEST_HOOKS
/* Only in a test build of comm.c (tests/preload/test_comm_races.c): called, when set, at the
 * points where a race with another thread matters, so a test can stop a thread exactly there. */
enum symmpin_comm_test_point {
  SYMMPIN_COMM_AT_TABLE,   /* a lookup has read the table and its generation, not probed yet */
  SYMMPIN_COMM_AT_PROBED,  /* a lookup has probed, before it takes a reference or trusts a miss */
  SYMMPIN_COMM_AT_CLEARED, /* a rebuild has cleared its target array (reg_lock held) */
};
extern void (*symmpin_comm_test_hook)(enum symmpin_comm_test_point at);
#endif

#endif
