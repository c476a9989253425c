/* The event handlers (preload/events.h): one place where every intercepted call is turned into
 * registry, allocation-map, engine, trace and statistics updates. Runs with the re-entrancy guard
 * set (the wrappers set it), so CUDA/NCCL calls made from here are not recorded as the program's. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/invariant.h"
#include "common/log.h"
#include "common/path.h"
#include "planner/site.h"
#include "planner/trace.h"
#include "preload/banner.h"
#include "preload/comm.h"
#include "preload/config.h"
#include "preload/engine.h"
#include "preload/events.h"
#include "preload/host.h"
#include "preload/nvtx.h"
#include "preload/preload.h"
#include "preload/stats.h"
#include "preload/tracefile.h"
#include "preload/watch.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static _Atomic int enabled = -1; /* -1 before initialisation */
static bool stats_on;
static symmpin_allocmap *allocs;
static _Atomic int exited;
static _Atomic int first_rank = -1; /* rank of the process's first communicator: names files */
/* The process has created (or tried to create) a communicator: until then symmpin logs nothing
 * (but at TRACE), writes no file and starts no thread (docs/config.md). */
static _Atomic int had_comm;

static __thread int group_depth __attribute__((tls_model("initial-exec")));
/* Outermost groups this thread has opened: with the thread's address, a token that tells one
 * group's calls from the next group's (planner/record.h renumbers tokens per communicator). */
static __thread uint64_t group_seq __attribute__((tls_model("initial-exec")));
/* Communicators whose engine holds this thread's calls for its group's launch (each with a
 * reference), launched at the outermost ncclGroupEnd, or wants the group's end (engine.h
 * group_end), told after the real one. Grows as needed: launching one
 * communicator's calls early while another's wait for the group's end could order them
 * differently on two GPUs that one thread drives (a cycle NCCL alone would not have). */
static __thread symmpin_comm **group_comms __attribute__((tls_model("initial-exec")));
static __thread int ngroup_comms, group_comms_cap __attribute__((tls_model("initial-exec")));

/* State carried from symmpin_event_collective to its _result on the same thread. */
typedef struct pending_collective {
  const symmpin_coll_call *call;
  symmpin_comm *comm;
  symmpin_engine_call ec;
  symmpin_reason reason;
  uint64_t send_off, recv_off;
} pending_collective;
static __thread pending_collective pending_call __attribute__((tls_model("initial-exec")));

/* From symmpin_event_comm_split_key to the split's comm_init; from comm_end to its _result. */
typedef struct pending_split {
  bool valid, parent_known; /* parent_known: an entry with a key its ranks share */
  bool parent_keyless;      /* an entry symmpin passes through (no such key) */
  int parent_ordinal, parent_device, color;
} pending_split;
static __thread pending_split pending_sp __attribute__((tls_model("initial-exec")));
static __thread symmpin_comm *pending_end __attribute__((tls_model("initial-exec")));
static __thread uint64_t pending_free_id __attribute__((tls_model("initial-exec")));

/* The first rank learned names the trace and statistics files. */
static void note_rank(int rank) {
  if (rank < 0) return;
  int none = -1;
  atomic_compare_exchange_strong(&first_rank, &none, rank);
  symmpin_tracefile_set_rank(atomic_load(&first_rank));
}

static void init_from(const symmpin_config *cfg) {
  if (cfg->disable) {
    SYMMPIN_TRACE("disabled (SYMMPIN_DISABLE): pure pass-through");
    atomic_store(&enabled, 0);
    return;
  }
  allocs = symmpin_allocmap_create(); /* NULL (logged there): buffers are reported as unknown */
  stats_on = cfg->stats || cfg->stats_file[0];
  if (cfg->trace[0]) (void)symmpin_tracefile_start(cfg->trace, 0);
  atomic_store(&enabled, 1);
}

/* A forked child (data-loader workers, a subprocess before its exec) inherits the parent's
 * communicators, boards, pools and trace buffer, none of which it may touch: NCCL communicators
 * do not work in a child, and closing, unlinking or freeing the parent's boards and pools (as the
 * exit path would) breaks the parent's job. The child is a pure pass-through from the fork on, and
 * its exit releases and writes nothing. */
static void after_fork_in_child(void) {
  atomic_store(&enabled, 0);
  atomic_store(&exited, 1);
}

static void init(void) {
  pthread_atfork(NULL, NULL, after_fork_in_child);
  init_from(symmpin_config_get());
}

void symmpin_preload_test_init(const symmpin_config *cfg) {
  symmpin_preload_exit();
  symmpin_watch_stop(); /* also when the last preload never exited */
  pthread_once(&init_once, init); /* so that a later first use cannot re-initialise */
  symmpin_comm_registry_reset();
  pending_call = (pending_collective){0}; /* their references went with the reset */
  pending_end = NULL;
  symmpin_stats_reset();
  if (allocs) symmpin_allocmap_destroy(allocs);
  allocs = NULL;
  atomic_store(&first_rank, -1);
  atomic_store(&had_comm, 0);
  atomic_store(&exited, 0);
  group_depth = 0;
  ngroup_comms = 0; /* their references went with the reset */
  symmpin_config_set_for_tests(cfg);
  init_from(symmpin_config_get());
}

bool symmpin_events_enabled(void) {
  int e = atomic_load_explicit(&enabled, memory_order_acquire);
  if (e < 0) {
    pthread_once(&init_once, init);
    e = atomic_load(&enabled);
  }
  return e > 0;
}

symmpin_allocmap *symmpin_preload_allocmap(void) { return allocs; }
int symmpin_preload_group_depth(void) { return group_depth; }

/* ---- allocations ---- */

static const symmpin_trace_call alloc_calls[] = {SYMMPIN_TRACE_CUDA_MALLOC,
                                                 SYMMPIN_TRACE_CUDA_MALLOC_ASYNC,
                                                 SYMMPIN_TRACE_NCCL_MEM_ALLOC};
static const symmpin_trace_call free_calls[] = {SYMMPIN_TRACE_CUDA_FREE,
                                                SYMMPIN_TRACE_CUDA_FREE_ASYNC,
                                                SYMMPIN_TRACE_NCCL_MEM_FREE};

void symmpin_event_alloc(symmpin_alloc_kind kind, void *ptr, size_t size, void *stream,
                         uint64_t stack, int rc) {
  if (!symmpin_events_enabled()) return;
  uint64_t id = 0;
  int dev = -1;
  if (rc == 0 && ptr && size) {
    dev = symmpin_host_device();
    if (allocs)
      (void)symmpin_allocmap_insert(allocs, (uintptr_t)ptr, size, (int)kind, dev, stack, &id);
  }
  if (symmpin_tracefile_on()) {
    symmpin_trace_event ev;
    symmpin_tracefile_event_init(&ev, alloc_calls[kind]);
    ev.rc = rc;
    ev.device = dev >= 0 ? dev : symmpin_host_device();
    ev.ptr = (uintptr_t)ptr;
    ev.size = size;
    ev.alloc = id;
    ev.stack = stack;
    ev.stream = (uintptr_t)stream;
    symmpin_tracefile_add(&ev);
  }
}

void symmpin_event_free(symmpin_alloc_kind kind, void *ptr, void *stream) {
  (void)kind;
  (void)stream;
  pending_free_id = 0;
  if (!symmpin_events_enabled() || !ptr || !allocs) return;
  symmpin_alloc removed;
  if (symmpin_allocmap_remove(allocs, (uintptr_t)ptr, &removed) == SYMMPIN_OK)
    pending_free_id = removed.id;
}

void symmpin_event_free_result(symmpin_alloc_kind kind, void *ptr, int rc) {
  if (!symmpin_events_enabled() || !symmpin_tracefile_on()) return;
  symmpin_trace_event ev;
  symmpin_tracefile_event_init(&ev, free_calls[kind]);
  ev.rc = rc;
  ev.device = symmpin_host_device();
  ev.ptr = (uintptr_t)ptr;
  ev.alloc = pending_free_id;
  symmpin_tracefile_add(&ev);
}

/* ---- communicators ---- */

static const symmpin_trace_call init_calls[] = {SYMMPIN_TRACE_COMM_INIT_RANK,
                                                SYMMPIN_TRACE_COMM_INIT_RANK_CONFIG,
                                                SYMMPIN_TRACE_COMM_INIT_RANK_SCALABLE,
                                                SYMMPIN_TRACE_COMM_INIT_ALL,
                                                SYMMPIN_TRACE_COMM_SPLIT,
                                                SYMMPIN_TRACE_COMM_SHRINK,
                                                SYMMPIN_TRACE_COMM_GROW};
static const symmpin_trace_call end_calls[] = {SYMMPIN_TRACE_COMM_DESTROY, SYMMPIN_TRACE_COMM_ABORT,
                                               SYMMPIN_TRACE_COMM_FINALIZE};

/* A handle NCCL gave out again while symmpin still holds its old communicator (whose end never
 * reached symmpin, so it is gone): its kernels are told to give up, as at an abort (they may wait
 * for peers that are gone too), and its pool goes to its keep, freed once they have, before a new
 * entry replaces it. */
static void drop_stale(void *comm) {
  symmpin_comm *stale = symmpin_comm_acquire(comm);
  if (!stale) return;
  symmpin_comm_signal_abort(stale);
  symmpin_comm_lock(stale);
  atomic_store(&stale->ended, 1);
  symmpin_engine_comm_abandon(stale);
  symmpin_comm_unlock(stale);
  symmpin_comm_put(stale);
}

/* The entry of a communicator symmpin passes through for good (comm.h), with its statistics. */
static symmpin_comm *register_passthrough(void *comm, int rank, int nranks, int device,
                                          bool blocking, const char *why) {
  drop_stale(comm);
  symmpin_comm *c = symmpin_comm_register_passthrough(comm, rank, nranks, device, blocking, why);
  if (!c) return NULL;
  if (stats_on) {
    c->stats = symmpin_stats_comm_open(c->ordinal, rank, nranks, device);
    symmpin_stats_comm_set_nccl_only(c->stats, why);
  }
  SYMMPIN_INFO("comm %p: %s: left to NCCL", comm, why);
  note_rank(rank);
  return c;
}

void symmpin_event_comm_split_key(void *parent, int color, uint64_t *hi, uint64_t *lo) {
  pending_split sp = {.valid = true, .parent_ordinal = -1, .parent_device = -1, .color = color};
  symmpin_comm_key key = {0x53504c4954ULL /* "SPLIT": parent unknown */, 0};
  symmpin_comm *p = symmpin_events_enabled() ? symmpin_comm_acquire(parent) : NULL;
  if (p && p->keyless) { /* a communicator symmpin passes through: no key to derive from */
    sp.parent_keyless = true;
    sp.parent_ordinal = p->ordinal;
    sp.parent_device = p->device;
    symmpin_comm_put(p);
    p = NULL;
  }
  if (p) {
    symmpin_comm_lock(p);
    uint32_t counter = p->splits++;
    symmpin_comm_unlock(p);
    key = symmpin_comm_key_split(p->key, counter, color);
    sp.parent_known = true;
    sp.parent_ordinal = p->ordinal;
    sp.parent_device = p->device;
    symmpin_comm_put(p);
  }
  *hi = key.hi;
  *lo = key.lo;
  pending_sp = sp;
}

void symmpin_event_comm_init(symmpin_comm_call call, void *comm, uint64_t key_hi, uint64_t key_lo,
                             int rank, int nranks, int device, bool blocking, int rc) {
  if (!symmpin_events_enabled()) return;
  /* The process's first communicator: what symmpin says about itself starts here. */
  if (!atomic_exchange(&had_comm, 1)) symmpin_config_log_once();
  symmpin_banner_once(
      device); /* once per process: versions, GPU, P2P; the NCCL and CUDA verdicts */
  pending_split sp = {0};
  if (call == SYMMPIN_COMM_SPLIT) {
    sp = pending_sp;
    pending_sp.valid = false;
    if (sp.valid && sp.parent_device >= 0) device = sp.parent_device; /* NCCL: parent's device */
  }
  symmpin_comm *c = NULL;
  /* A split whose parent symmpin does not know (or passes through) has no key derived alike on
   * every rank: it passes through too. */
  bool registrable = comm && (call != SYMMPIN_COMM_SPLIT || (sp.valid && sp.parent_known));
  if (registrable) {
    drop_stale(comm);
    symmpin_comm_key key = {key_hi, key_lo};
    c = symmpin_comm_register(comm, key, rank, nranks, device, blocking);
    if (c && stats_on) c->stats = symmpin_stats_comm_open(c->ordinal, rank, nranks, device);
    if (c) {
      symmpin_log_set_device(device);
      SYMMPIN_INFO("comm %p: ordinal %d rank %d/%d device %d%s key %016llx%016llx", comm,
                   c->ordinal, rank, nranks, device, blocking ? "" : " non-blocking",
                   (unsigned long long)key_hi, (unsigned long long)key_lo);
      note_rank(rank);
      /* A communicator symmpin may redirect for: watch it (one thread for all, started once),
       * and load the kernels now rather than at its first collective call. */
      if (nranks != 1 && !atomic_load(&exited)) symmpin_watch_start(symmpin_config_get()->watch_ms);
      if ((nranks != 1 || symmpin_config_get()->test_one_rank) && !atomic_load(&exited))
        symmpin_engine_prepare(device);
    }
  } else if (comm) {
    c = register_passthrough(comm, rank, nranks, device, blocking,
                             sp.valid && sp.parent_keyless
                                 ? "a split of a communicator symmpin passes through"
                                 : "a split of a communicator symmpin does not know");
  }
  /* After note_rank: the trace file, if its rank is still unknown, may now open with rank "u". */
  symmpin_tracefile_allow_open();
  if (symmpin_tracefile_on()) {
    symmpin_trace_event ev;
    symmpin_tracefile_event_init(&ev, init_calls[call]);
    ev.rc = rc;
    ev.device = device;
    ev.comm = c ? c->ordinal : -1;
    ev.key_hi = key_hi;
    ev.key_lo = key_lo;
    ev.rank = rank;
    ev.nranks = nranks;
    if (call == SYMMPIN_COMM_SPLIT) {
      ev.color = sp.color;
      ev.parent = sp.parent_ordinal;
    }
    symmpin_tracefile_add(&ev);
  }
}

void symmpin_event_comm_child(symmpin_comm_call call, void *parent, void *child, int device,
                              bool blocking, int rc) {
  if (!symmpin_events_enabled()) return;
  symmpin_banner_once(device);
  int parent_ordinal = -1;
  symmpin_comm *p = parent ? symmpin_comm_acquire(parent) : NULL;
  if (p) {
    parent_ordinal = p->ordinal;
    if (p->device >= 0) device = p->device; /* NCCL: the parent's device */
    symmpin_comm_put(p);
  }
  symmpin_comm *c = NULL;
  if (child)
    c = register_passthrough(child, -1, -1, device, blocking,
                             call == SYMMPIN_COMM_SHRINK
                                 ? "made by ncclCommShrink (the excluded ranks never call it: no "
                                   "key every rank derives alike)"
                                 : "made by ncclCommGrow (its old ranks but one pass no id: no "
                                   "key every rank derives alike)");
  if (symmpin_tracefile_on()) {
    symmpin_trace_event ev;
    symmpin_tracefile_event_init(&ev, init_calls[call]);
    ev.rc = rc;
    ev.device = device;
    ev.comm = c ? c->ordinal : -1;
    ev.rank = ev.nranks = -1;
    ev.parent = parent_ordinal;
    symmpin_tracefile_add(&ev);
  }
}

/* Calls that change a live communicator's life (events.h): from before the real call to its
 * result, the entry (a reference) and whether symmpin stopped its kernels. */
typedef struct pending_life {
  symmpin_comm *comm;
  bool stopped;
} pending_life;
static __thread pending_life pending_lf __attribute__((tls_model("initial-exec")));

static const char *life_reason(symmpin_comm_life what) {
  switch (what) {
  case SYMMPIN_COMM_REVOKE: return "revoked (ncclCommRevoke)";
  case SYMMPIN_COMM_SUSPEND: return "suspended (ncclCommSuspend), never resumed by symmpin";
  case SYMMPIN_COMM_SHRINK_ABORT:
    return "its operations aborted by ncclCommShrink(NCCL_SHRINK_ABORT)";
  case SYMMPIN_COMM_RESUME: break;
  }
  return "";
}

void symmpin_event_comm_life(symmpin_comm_life what, void *comm, bool acts) {
  symmpin_comm_put(pending_lf.comm); /* a previous call whose _result never came */
  pending_lf = (pending_life){0};
  if (!symmpin_events_enabled()) return;
  symmpin_comm *c = symmpin_comm_acquire(comm);
  pending_lf.comm = c;
  if (!c || !acts || what == SYMMPIN_COMM_RESUME) return;
  /* Ended (destroyed, finalized: its kernels were left to finish) or already left: nothing more.
   * Read again under the lock below. */
  if (atomic_load(&c->ended)) return;
  bool stop = what != SYMMPIN_COMM_SUSPEND;
  /* Revoke and an aborting shrink stop NCCL's operations first thing (its abort flags); symmpin's
   * kernels stop the same way, before anything waits (a thread inside symmpin may hold the lock,
   * and NCCL may wait for its streams). A suspend lets them finish: NCCL synchronizes the device
   * and meets every rank there, so the calls issued before it complete. */
  if (stop) symmpin_comm_signal_abort(c);
  pending_lf.stopped = stop;
  symmpin_comm_lock(c);
  if (!atomic_load(&c->ended)) {
    atomic_store(&c->ended, 1); /* never set up again: NCCL takes its calls from now on */
    c->passthrough = life_reason(what);
    if (stop)
      symmpin_engine_comm_abandon(c); /* the pool goes once the kernels have given up */
    else
      symmpin_engine_comm_release(c); /* ... once they are done */
    symmpin_stats_comm_set_nccl_only(c->stats, c->passthrough);
    symmpin_nvtx_mark_comm(c, SYMMPIN_REASON_COMM, c->passthrough);
    SYMMPIN_INFO("comm %d rank %d: %s: symmpin leaves it to NCCL for good", c->ordinal, c->rank,
                 c->passthrough);
  }
  symmpin_comm_unlock(c);
}

static const symmpin_trace_call life_calls[] = {
    SYMMPIN_TRACE_COMM_REVOKE, SYMMPIN_TRACE_COMM_SUSPEND, SYMMPIN_TRACE_COMM_RESUME};

void symmpin_event_comm_life_result(symmpin_comm_life what, void *comm, int rc) {
  pending_life lf = pending_lf;
  pending_lf = (pending_life){0};
  symmpin_comm *c = lf.comm && lf.comm->handle == comm ? lf.comm : NULL;
  if (symmpin_events_enabled()) {
    /* 0 or ncclInProgress (7, a non-blocking communicator): NCCL took the call. Otherwise NCCL
     * did not revoke, but symmpin's kernels were told to stop: their calls' results may be wrong,
     * so the communicator is in error (what the program sees instead of wrong data). */
    if (c && lf.stopped && rc != 0 && rc != 7)
      symmpin_comm_fail(c, SYMMPIN_NCCL_REMOTE_ERROR,
                        "NCCL refused the call after symmpin had stopped the kernels");
    /* After a suspend NCCL has synchronized the device: the kernels are done, their pool can go. */
    if (what == SYMMPIN_COMM_SUSPEND) symmpin_engine_drain();
    if (what == SYMMPIN_COMM_RESUME && c && c->passthrough)
      SYMMPIN_INFO("comm %d rank %d: resumed; symmpin leaves it to NCCL (%s)", c->ordinal, c->rank,
                   c->passthrough);
    if (what != SYMMPIN_COMM_SHRINK_ABORT && symmpin_tracefile_on()) {
      symmpin_trace_event ev;
      symmpin_tracefile_event_init(&ev, life_calls[what]);
      ev.rc = rc;
      ev.device = c ? c->device : -1;
      ev.comm = c ? c->ordinal : -1;
      symmpin_tracefile_add(&ev);
    }
  }
  symmpin_comm_put(lf.comm);
}

void symmpin_event_comm_end(symmpin_comm_end call, void *comm) {
  symmpin_comm_put(pending_end); /* a previous end whose _result never came */
  pending_end = NULL;
  if (!symmpin_events_enabled()) return;
  /* Held until the _result: another thread may end the same communicator meanwhile (PyTorch's
   * watchdog aborts while the main thread destroys). */
  symmpin_comm *c = symmpin_comm_acquire(comm);
  if (c && call == SYMMPIN_COMM_ABORT) {
    /* First, without the lock (a thread blocked in symmpin may hold it): every symmpin wait of
     * this communicator, on the host and in the kernels, gives up now. */
    symmpin_comm_signal_abort(c);
  }
  if (c) {
    /* Before the real call: the engine may still need the communicator's device and streams. */
    symmpin_comm_lock(c);
    atomic_store(&c->ended, 1); /* a thread still holding c must not set the engine up again */
    if (call == SYMMPIN_COMM_ABORT)
      symmpin_engine_comm_abandon(c);
    else
      symmpin_engine_comm_release(c);
    symmpin_comm_unlock(c);
  }
  pending_end = c;
}

void symmpin_event_comm_end_result(symmpin_comm_end call, void *comm, int rc) {
  symmpin_comm *held = pending_end; /* the reference symmpin_event_comm_end took */
  pending_end = NULL;
  if (!symmpin_events_enabled()) {
    symmpin_comm_put(held);
    return;
  }
  symmpin_comm *c = held && held->handle == comm ? held : NULL;
  if (symmpin_tracefile_on()) {
    symmpin_trace_event ev;
    symmpin_tracefile_event_init(&ev, end_calls[call]);
    ev.rc = rc;
    ev.device = c ? c->device : -1;
    ev.comm = c ? c->ordinal : -1;
    ev.rank = c ? c->rank : -1;
    ev.nranks = c ? c->nranks : 0;
    symmpin_tracefile_add(&ev);
    symmpin_tracefile_flush();
  }
  /* Finalize leaves the handle valid (ncclCommDestroy follows); destroy and abort end it. */
  if (c && call != SYMMPIN_COMM_FINALIZE) symmpin_comm_unregister(c);
  symmpin_comm_put(held); /* after the unregister: the last reference frees c */
}

int symmpin_event_comm_async_error(void *comm) {
  if (!symmpin_events_enabled()) return 0;
  symmpin_comm *c = symmpin_comm_acquire(comm);
  if (!c) return 0;
  /* The program's watchdog (PyTorch's polls this) is how ranks blocked behind a divergent call
   * learn of it: compare route logs and read the alarm here too. Never wait for the lock: a
   * thread inside a collective call holds it and does the same check itself. */
  if (symmpin_comm_trylock(c)) {
    symmpin_engine_comm_poll(c);
    symmpin_comm_unlock(c);
  }
  int err = symmpin_comm_async_error(c);
  symmpin_comm_put(c);
  return err;
}

/* ---- groups ---- */

static void group_trace(symmpin_trace_call call, int rc) {
  if (!symmpin_tracefile_on()) return;
  symmpin_trace_event ev;
  symmpin_tracefile_event_init(&ev, call);
  ev.rc = rc;
  ev.depth = group_depth;
  symmpin_tracefile_add(&ev);
}

void symmpin_event_group_start(int rc) {
  if (!symmpin_events_enabled()) return;
  if (rc == 0 && group_depth++ == 0) group_seq++;
  group_trace(SYMMPIN_TRACE_GROUP_START, rc);
}

/* Whether cm may hold calls of this thread's group: it does, or the list has room for it (made
 * now: an engine that holds a call must be flushed at the group's end). Out of memory: no. */
static bool group_may_hold(const symmpin_comm *cm) {
  if (group_depth == 0) return false;
  for (int i = 0; i < ngroup_comms; i++)
    if (group_comms[i] == cm) return true;
  if (ngroup_comms < group_comms_cap) return true;
  int cap = group_comms_cap ? 2 * group_comms_cap : 8;
  symmpin_comm **v = realloc(group_comms, (size_t)cap * sizeof *v);
  if (!v) return false;
  group_comms = v;
  group_comms_cap = cap;
  return true;
}

static void group_note_held(symmpin_comm *cm) {
  for (int i = 0; i < ngroup_comms; i++)
    if (group_comms[i] == cm) return;
  SYMMPIN_ASSERT(ngroup_comms < group_comms_cap); /* group_may_hold made room */
  symmpin_comm *ref = symmpin_comm_acquire(cm->handle);
  if (ref && ngroup_comms < group_comms_cap) group_comms[ngroup_comms++] = ref;
  else
    symmpin_comm_put(ref);
}

/* The list stays until the group's end (symmpin_event_group_end), which tells each engine. */
int symmpin_event_group_flush(void) {
  if (!symmpin_events_enabled() || group_depth != 1) return 0; /* only the outermost end */
  int rc = 0;
  for (int i = 0; i < ngroup_comms; i++) {
    symmpin_comm *cm = group_comms[i];
    symmpin_comm_lock(cm);
    /* An ended communicator dropped what it held with its engine state. */
    int r = atomic_load(&cm->ended) ? 0 : symmpin_engine_group_flush(cm);
    symmpin_comm_unlock(cm);
    if (r && !rc) rc = r;
  }
  return rc;
}

void symmpin_event_group_drop(void) {
  if (!symmpin_events_enabled() || group_depth != 1) return;
  for (int i = 0; i < ngroup_comms; i++) {
    symmpin_comm *cm = group_comms[i];
    symmpin_comm_lock(cm);
    if (!atomic_load(&cm->ended)) symmpin_engine_group_drop(cm);
    symmpin_comm_unlock(cm);
  }
}

void symmpin_event_group_end(int rc) {
  if (!symmpin_events_enabled()) return;
  if (group_depth == 1) { /* the outermost end, after the real one: the list's engines and refs */
    for (int i = 0; i < ngroup_comms; i++) {
      symmpin_comm *cm = group_comms[i];
      symmpin_comm_lock(cm);
      if (!atomic_load(&cm->ended)) symmpin_engine_group_end(cm, rc);
      symmpin_comm_unlock(cm);
      symmpin_comm_put(cm);
    }
    ngroup_comms = 0;
  }
  /* NCCL leaves the group on any result (errors included). */
  if (group_depth > 0) group_depth--;
  group_trace(SYMMPIN_TRACE_GROUP_END, rc);
}

/* ---- the collectives ---- */

static void collective_finish(const pending_collective *p, int rc, symmpin_trace_path path) {
  const symmpin_coll_call *c = p->call;
  symmpin_comm *cm = p->comm;
  if (cm && cm->stats)
    symmpin_stats_record_at(cm->stats, p->ec.site, &c->where, c->coll, c->count, c->dtype, c->op,
                            p->reason);
  if (!symmpin_tracefile_on()) return;
  symmpin_trace_event ev;
  symmpin_tracefile_event_init(&ev, symmpin_trace_coll_call(c->coll));
  ev.rc = rc;
  ev.device = cm ? cm->device : symmpin_host_device();
  ev.comm = cm ? cm->ordinal : -1;
  ev.rank = cm ? cm->rank : -1;
  ev.nranks = cm ? cm->nranks : 0;
  ev.stack = c->stack;
  ev.stream = (uintptr_t)c->stream;
  ev.site = p->ec.site;
  ev.count = c->count;
  ev.dtype = c->dtype;
  ev.op = c->op;
  ev.send_alloc = p->ec.send_alloc;
  ev.send_off = p->send_off;
  ev.recv_alloc = p->ec.recv_alloc;
  ev.recv_off = p->recv_off;
  ev.send_ptr = (uintptr_t)c->send;
  ev.recv_ptr = (uintptr_t)c->recv;
  ev.stream_ord = p->ec.stream_ord;
  ev.capturing = p->ec.capturing;
  ev.path = path;
  ev.reason = p->reason;
  symmpin_tracefile_add_at(&ev, &c->where); /* with a "#where=" line for a new stack */
}

static void buffer_of(const void *addr, uint64_t *id, uint64_t *off) {
  symmpin_alloc a;
  *id = 0;
  *off = 0;
  if (allocs && addr && symmpin_allocmap_lookup(allocs, (uintptr_t)addr, &a)) {
    *id = a.id;
    *off = (uintptr_t)addr - a.base;
  }
}

/* The pending collective call of this thread is over: drop its communicator reference. */
static void pending_done(pending_collective *p) {
  symmpin_comm_put(p->comm);
  p->comm = NULL;
  p->call = NULL;
}

bool symmpin_event_collective(const symmpin_coll_call *c, int *rc) {
  pending_collective *p = &pending_call;
  pending_done(p); /* a previous call whose _result never came */
  /* Once the exit has begun, NCCL takes every call: the exit is releasing the communicators (and
   * a thread that went on calling would keep their locks from it). */
  if (!symmpin_events_enabled() || atomic_load(&exited)) return false;
  /* Held until the call is finished (here or in the _result): a destroy or abort on another
   * thread must not free cm under us. */
  symmpin_comm *cm = symmpin_comm_acquire(c->comm);
  p->call = c;
  p->comm = cm;
  p->ec = (symmpin_engine_call){.call = c, .stream_ord = -1, .timing = -1, .group_depth = group_depth,
                                .group_token = group_depth > 0
                                                   ? ((uint64_t)(uintptr_t)&group_seq << 16) ^ group_seq
                                                   : 0};
  buffer_of(c->send, &p->ec.send_alloc, &p->send_off);
  buffer_of(c->recv, &p->ec.recv_alloc, &p->recv_off);
  /* Unknown counts as capturing: the engine then does nothing that capture would forbid. */
  p->ec.capturing = symmpin_host_capture_id(c->stream, &p->ec.capture_id) != 0;
  if (!cm) {
    p->ec.site = symmpin_site_id(c->stack, -1, c->coll, c->count, c->dtype, c->op);
    p->reason = SYMMPIN_REASON_COMM;
    return false;
  }
  symmpin_log_set_device(cm->device);
  p->ec.site = symmpin_site_id(c->stack, cm->ordinal, c->coll, c->count, c->dtype, c->op);
  symmpin_comm_lock(cm);
  if (atomic_load(&cm->ended)) {
    /* Destroyed or aborted by another thread since the lookup, or left to NCCL for good (revoked,
     * suspended): NCCL answers for the handle. */
    symmpin_comm_unlock(cm);
    p->reason = SYMMPIN_REASON_COMM;
    return false;
  }
  if (cm->rank < 0 || cm->nranks < 0) {
    /* Splits and non-blocking inits: ask NCCL now; ncclInProgress means ask again next time. */
    int r, n;
    if (symmpin_host_comm_rank(cm->handle, &r, &n) == 0) {
      cm->rank = r;
      cm->nranks = n;
      symmpin_stats_comm_set_rank(cm->stats, r, n);
      note_rank(r);
      SYMMPIN_INFO("comm %p (ordinal %d): rank %d/%d", cm->handle, cm->ordinal, r, n);
    }
  }
  if (cm->passthrough) { /* passed through from the start (comm.h): never an engine */
    symmpin_comm_unlock(cm);
    p->reason = SYMMPIN_REASON_COMM;
    return false;
  }
  int failed = symmpin_comm_async_error(cm);
  if (failed) {
    /* A symmpin kernel of this communicator gave up (its result was wrong, and the ranks' calls
     * may no longer pair up): every later collective call reports the error instead of running. */
    symmpin_engine_comm_report_failure(cm);
    symmpin_comm_unlock(cm);
    *rc = failed;
    p->reason = SYMMPIN_REASON_ERROR;
    collective_finish(p, *rc, SYMMPIN_PATH_SYMMPIN);
    pending_done(p);
    return true;
  }
  cm->collectives++;
  p->ec.stream_ord = symmpin_comm_stream_ordinal(cm, c->stream);
  symmpin_reason reason = SYMMPIN_REASON_ERROR;
  p->ec.may_batch = group_may_hold(cm);
  bool taken = symmpin_engine_collective(cm, &p->ec, rc, &reason);
  symmpin_comm_unlock(cm);
  if ((taken && p->ec.batched) || p->ec.group_end) group_note_held(cm);
  p->reason = taken ? SYMMPIN_REASON_NONE : reason;
  symmpin_nvtx_call_routed(cm, &p->ec, p->reason);
  if (taken) {
    collective_finish(p, *rc, SYMMPIN_PATH_SYMMPIN);
    pending_done(p);
  }
  return taken;
}

void symmpin_event_collective_result(const symmpin_coll_call *c, int rc) {
  pending_collective *p = &pending_call;
  if (p->call != c) return;
  if (p->ec.timing >= 0 && p->comm) { /* a sampled NCCL call (SYMMPIN_MEASURE): end its timing */
    symmpin_comm_lock(p->comm);
    symmpin_engine_nccl_done(p->comm, &p->ec, rc);
    symmpin_comm_unlock(p->comm);
  }
  collective_finish(p, rc, SYMMPIN_PATH_NCCL);
  pending_done(p);
}

/* ---- process start and exit ---- */

/* How long the exit waits, in all, for communicator locks that other threads hold. Every abort
 * word is set before, so a thread in an agreement wait lets go within one of its wait slices
 * (20 ms); a communicator whose holder takes longer (a CUDA call, a peer's fd that takes up to its
 * 2 s limit) is left as it is: the process is ending, and its memory, mappings and descriptors go
 * with it (a board name that stays in /dev/shm is removed by a later process's sweep). */
#define EXIT_LOCK_WAIT_MS 200

typedef struct exit_release {
  struct timespec deadline; /* CLOCK_MONOTONIC */
  int left;                 /* communicators left as they were */
} exit_release;

static void signal_one(symmpin_comm *c, void *arg) {
  (void)arg;
  symmpin_comm_signal_abort(c);
}

/* Never blocks on a lock: the exiting thread itself may hold c's (exit() from a signal handler
 * that interrupted it inside symmpin), and another holder gets until the deadline. */
static void release_one(symmpin_comm *c, void *arg) {
  exit_release *x = arg;
  /* Released by its own end (or visited twice), or never had an engine (passed through). */
  if (atomic_load(&c->ended) || c->keyless) return;
  if (symmpin_comm_locked_here(c)) {
    x->left++;
    return;
  }
  if (!symmpin_comm_lock_by(c, &x->deadline)) {
    x->left++;
    return;
  }
  atomic_store(&c->ended, 1);
  symmpin_engine_comm_release(c);
  symmpin_comm_unlock(c);
}

static void stats_report(const symmpin_config *cfg) {
  if (cfg->stats) { /* where the log goes: stderr, or SYMMPIN_DEBUG_FILE */
    int fd = dup(symmpin_log_fd());
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f) {
      symmpin_stats_print(f);
      fclose(f);
    } else if (fd >= 0) {
      close(fd);
    }
  }
  if (!cfg->stats_file[0]) return;
  char host[64], path[SYMMPIN_CONFIG_PATH_MAX], why[160];
  symmpin_host_short_name(host, sizeof host);
  /* The rank in the name is the trace's rule: the process's first communicator. */
  if (symmpin_path_expand(cfg->stats_file, atomic_load(&first_rank), (int)getpid(), host, path,
                          sizeof path, why, sizeof why) != SYMMPIN_OK) {
    SYMMPIN_WARN("cannot expand SYMMPIN_STATS_FILE=%s: %s", cfg->stats_file, why);
    return;
  }
  /* Never through a link another local user planted at a predictable name. */
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f && fd >= 0) close(fd);
  if (!f) {
    SYMMPIN_WARN("cannot write statistics to %s", path);
    return;
  }
  symmpin_stats_write_json(f);
  fclose(f);
  SYMMPIN_INFO("statistics written to %s", path);
}

/* The exit may run on any thread at any point: exit() from a signal handler that interrupted a
 * thread inside symmpin (holding a communicator's lock, or the registry's), or from one thread
 * while another waits in an agreement. So, as ncclCommAbort: first, without any lock, every wait
 * of every communicator gives up (host and kernels); then the watch stops (bounded); then each
 * communicator is released if its lock can be had in time, else left as it is. */
void symmpin_preload_exit(void) {
  if (atomic_load(&enabled) <= 0 || atomic_exchange(&exited, 1)) return;
  symmpin_comm_for_each_unlocked(signal_one, NULL);
  exit_release x = {.left = 0};
  clock_gettime(CLOCK_MONOTONIC, &x.deadline);
  x.deadline.tv_nsec += (long)EXIT_LOCK_WAIT_MS * 1000000L;
  x.deadline.tv_sec += x.deadline.tv_nsec / 1000000000L;
  x.deadline.tv_nsec %= 1000000000L;
  symmpin_watch_stop_by(&x.deadline); /* before the communicators go */
  symmpin_comm_for_each_unlocked(release_one, &x);
  if (x.left)
    SYMMPIN_INFO("exit: %d communicator(s) left as they were (a thread inside symmpin holds "
                 "them); the process's end frees what they hold",
                 x.left);
  symmpin_tracefile_stop();
  if (atomic_load(&had_comm)) stats_report(symmpin_config_get()); /* none without a communicator */
}

__attribute__((constructor)) static void symmpin_preload_constructor(void) {
  (void)symmpin_events_enabled();
}
