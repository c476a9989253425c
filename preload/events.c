/* The event handlers (preload/events.h): one place where every intercepted call is turned into
 * registry, allocation-map, engine, trace and statistics updates. Runs with the re-entrancy guard
 * set (the wrappers set it), so CUDA/NCCL calls made from here are not recorded as the program's. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static __thread int group_depth __attribute__((tls_model("initial-exec")));
/* Outermost groups this thread has opened: with the thread's address, a token that tells one
 * group's calls from the next group's (planner/record.h renumbers tokens per communicator). */
static __thread uint64_t group_seq __attribute__((tls_model("initial-exec")));
/* Communicators whose engine holds this thread's calls for its group's launch (each with a
 * reference), launched at the outermost ncclGroupEnd. Grows as needed: launching one
 * communicator's calls early while another's wait for the group's end could order them
 * differently on two GPUs that one thread drives (a cycle NCCL alone would not have). */
static __thread symmpin_comm **group_comms __attribute__((tls_model("initial-exec")));
static __thread int ngroup_comms, group_comms_cap __attribute__((tls_model("initial-exec")));

/* State carried from symmpin_event_allreduce to its _result on the same thread. */
typedef struct pending_allreduce {
  const symmpin_allreduce_call *call;
  symmpin_comm *comm;
  symmpin_engine_call ec;
  symmpin_reason reason;
  uint64_t send_off, recv_off;
} pending_allreduce;
static __thread pending_allreduce pending_ar __attribute__((tls_model("initial-exec")));

/* From symmpin_event_comm_split_key to the split's comm_init; from comm_end to its _result. */
typedef struct pending_split {
  bool valid, parent_known;
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
    SYMMPIN_INFO("disabled (SYMMPIN_DISABLE): pure pass-through");
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
  pending_ar = (pending_allreduce){0}; /* their references went with the reset */
  pending_end = NULL;
  symmpin_stats_reset();
  if (allocs) symmpin_allocmap_destroy(allocs);
  allocs = NULL;
  atomic_store(&first_rank, -1);
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

static const symmpin_trace_call init_calls[] = {
    SYMMPIN_TRACE_COMM_INIT_RANK, SYMMPIN_TRACE_COMM_INIT_RANK_CONFIG,
    SYMMPIN_TRACE_COMM_INIT_RANK_SCALABLE, SYMMPIN_TRACE_COMM_INIT_ALL, SYMMPIN_TRACE_COMM_SPLIT};
static const symmpin_trace_call end_calls[] = {SYMMPIN_TRACE_COMM_DESTROY, SYMMPIN_TRACE_COMM_ABORT,
                                               SYMMPIN_TRACE_COMM_FINALIZE};

void symmpin_event_comm_split_key(void *parent, int color, uint64_t *hi, uint64_t *lo) {
  pending_split sp = {.valid = true, .parent_ordinal = -1, .parent_device = -1, .color = color};
  symmpin_comm_key key = {0x53504c4954ULL /* "SPLIT": parent unknown */, 0};
  symmpin_comm *p = symmpin_events_enabled() ? symmpin_comm_acquire(parent) : NULL;
  if (p) {
    pthread_mutex_lock(&p->lock);
    uint32_t counter = p->splits++;
    pthread_mutex_unlock(&p->lock);
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
  symmpin_banner_once(device); /* once per process: versions, GPU, P2P; the NCCL verdict */
  pending_split sp = {0};
  if (call == SYMMPIN_COMM_SPLIT) {
    sp = pending_sp;
    pending_sp.valid = false;
    if (sp.valid && sp.parent_device >= 0) device = sp.parent_device; /* NCCL: parent's device */
  }
  symmpin_comm *c = NULL;
  /* A split whose parent symmpin does not know gets no entry: its key could not be derived alike
   * on every rank, so its calls go to NCCL. */
  bool registrable = comm && (call != SYMMPIN_COMM_SPLIT || (sp.valid && sp.parent_known));
  if (registrable) {
    /* A handle NCCL gave out again while symmpin still holds its old communicator (whose end
     * never reached symmpin, so it is gone): its kernels are told to give up, as at an abort
     * (they may wait for peers that are gone too), and its pool goes to its keep, freed once
     * they have, before the new entry replaces it. */
    symmpin_comm *stale = symmpin_comm_acquire(comm);
    if (stale) {
      atomic_store(&stale->aborting, 1);
      volatile uint32_t *kernels = atomic_load(&stale->kernel_abort);
      if (kernels) *kernels = 1;
      pthread_mutex_lock(&stale->lock);
      atomic_store(&stale->ended, 1);
      symmpin_engine_comm_abandon(stale);
      pthread_mutex_unlock(&stale->lock);
      symmpin_comm_put(stale);
    }
    symmpin_comm_key key = {key_hi, key_lo};
    c = symmpin_comm_register(comm, key, rank, nranks, device, blocking);
    if (c && stats_on) c->stats = symmpin_stats_comm_open(c->ordinal, rank, nranks, device);
    if (c) {
      symmpin_log_set_device(device);
      SYMMPIN_INFO("comm %p: ordinal %d rank %d/%d device %d%s key %016llx%016llx", comm,
                   c->ordinal, rank, nranks, device, blocking ? "" : " non-blocking",
                   (unsigned long long)key_hi, (unsigned long long)key_lo);
      note_rank(rank);
      /* A communicator symmpin may redirect for: watch it (one thread for all, started once). */
      if (nranks != 1 && !atomic_load(&exited)) symmpin_watch_start(symmpin_config_get()->watch_ms);
    }
  } else if (comm) {
    SYMMPIN_INFO("comm %p: split of an unknown parent: left to NCCL", comm);
  }
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
    atomic_store(&c->aborting, 1);
    volatile uint32_t *kernels = atomic_load(&c->kernel_abort);
    if (kernels) *kernels = 1;
  }
  if (c) {
    /* Before the real call: the engine may still need the communicator's device and streams. */
    pthread_mutex_lock(&c->lock);
    atomic_store(&c->ended, 1); /* a thread still holding c must not set the engine up again */
    if (call == SYMMPIN_COMM_ABORT)
      symmpin_engine_comm_abandon(c);
    else
      symmpin_engine_comm_release(c);
    pthread_mutex_unlock(&c->lock);
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

/* The error symmpin holds for c (0 = none); sticky once set. Lock-free: one atomic load when the
 * engine has no kernels yet, two more otherwise (it is on every all-reduce's path). */
static int comm_async_error(symmpin_comm *c) {
  const volatile uint32_t *failed = atomic_load_explicit(&c->kernel_failed, memory_order_acquire);
  if (failed && *failed && !atomic_load(&c->aborting)) {
    int none = 0;
    atomic_compare_exchange_strong(&c->async_error, &none, SYMMPIN_NCCL_REMOTE_ERROR);
  }
  return atomic_load(&c->async_error);
}

int symmpin_event_comm_async_error(void *comm) {
  if (!symmpin_events_enabled()) return 0;
  symmpin_comm *c = symmpin_comm_acquire(comm);
  if (!c) return 0;
  /* The program's watchdog (PyTorch's polls this) is how ranks blocked behind a divergent call
   * learn of it: compare route logs and read the alarm here too. Never wait for the lock: a
   * thread inside an all-reduce holds it and does the same check itself. */
  if (pthread_mutex_trylock(&c->lock) == 0) {
    symmpin_engine_comm_poll(c);
    pthread_mutex_unlock(&c->lock);
  }
  int err = comm_async_error(c);
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

int symmpin_event_group_flush(void) {
  if (!symmpin_events_enabled() || group_depth != 1) return 0; /* only the outermost end */
  int rc = 0;
  for (int i = 0; i < ngroup_comms; i++) {
    symmpin_comm *cm = group_comms[i];
    pthread_mutex_lock(&cm->lock);
    /* An ended communicator dropped what it held with its engine state. */
    int r = atomic_load(&cm->ended) ? 0 : symmpin_engine_group_flush(cm);
    pthread_mutex_unlock(&cm->lock);
    if (r && !rc) rc = r;
    symmpin_comm_put(cm);
  }
  ngroup_comms = 0;
  return rc;
}

void symmpin_event_group_drop(void) {
  if (!symmpin_events_enabled() || group_depth != 1) return;
  for (int i = 0; i < ngroup_comms; i++) {
    symmpin_comm *cm = group_comms[i];
    pthread_mutex_lock(&cm->lock);
    if (!atomic_load(&cm->ended)) symmpin_engine_group_drop(cm);
    pthread_mutex_unlock(&cm->lock);
    symmpin_comm_put(cm);
  }
  ngroup_comms = 0;
}

void symmpin_event_group_end(int rc) {
  if (!symmpin_events_enabled()) return;
  /* NCCL leaves the group on any result (errors included). */
  if (group_depth > 0) group_depth--;
  group_trace(SYMMPIN_TRACE_GROUP_END, rc);
}

/* ---- all-reduce ---- */

static void allreduce_finish(const pending_allreduce *p, int rc, symmpin_trace_path path) {
  const symmpin_allreduce_call *c = p->call;
  symmpin_comm *cm = p->comm;
  if (cm && cm->stats)
    symmpin_stats_record_at(cm->stats, p->ec.site, &c->where, c->count, c->dtype, c->op,
                            p->reason);
  if (!symmpin_tracefile_on()) return;
  symmpin_trace_event ev;
  symmpin_tracefile_event_init(&ev, SYMMPIN_TRACE_ALL_REDUCE);
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

/* The pending all-reduce of this thread is over: drop its communicator reference. */
static void pending_done(pending_allreduce *p) {
  symmpin_comm_put(p->comm);
  p->comm = NULL;
  p->call = NULL;
}

bool symmpin_event_allreduce(const symmpin_allreduce_call *c, int *rc) {
  pending_allreduce *p = &pending_ar;
  pending_done(p); /* a previous call whose _result never came */
  if (!symmpin_events_enabled()) return false;
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
    p->ec.site = symmpin_site_id(c->stack, -1, c->count, c->dtype, c->op);
    p->reason = SYMMPIN_REASON_COMM;
    return false;
  }
  symmpin_log_set_device(cm->device);
  p->ec.site = symmpin_site_id(c->stack, cm->ordinal, c->count, c->dtype, c->op);
  pthread_mutex_lock(&cm->lock);
  if (atomic_load(&cm->ended)) {
    /* Destroyed or aborted by another thread since the lookup: NCCL answers for the handle. */
    pthread_mutex_unlock(&cm->lock);
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
  int failed = comm_async_error(cm);
  if (failed) {
    /* A symmpin kernel of this communicator gave up (its result was wrong, and the ranks' calls
     * may no longer pair up): every later all-reduce reports the error instead of running. */
    symmpin_engine_comm_report_failure(cm);
    pthread_mutex_unlock(&cm->lock);
    *rc = failed;
    p->reason = SYMMPIN_REASON_ERROR;
    allreduce_finish(p, *rc, SYMMPIN_PATH_SYMMPIN);
    pending_done(p);
    return true;
  }
  cm->allreduces++;
  p->ec.stream_ord = symmpin_comm_stream_ordinal(cm, c->stream);
  symmpin_reason reason = SYMMPIN_REASON_ERROR;
  p->ec.may_batch = group_may_hold(cm);
  bool taken = symmpin_engine_allreduce(cm, &p->ec, rc, &reason);
  pthread_mutex_unlock(&cm->lock);
  if (taken && p->ec.batched) group_note_held(cm);
  p->reason = taken ? SYMMPIN_REASON_NONE : reason;
  if (taken) {
    allreduce_finish(p, *rc, SYMMPIN_PATH_SYMMPIN);
    pending_done(p);
  }
  return taken;
}

void symmpin_event_allreduce_result(const symmpin_allreduce_call *c, int rc) {
  pending_allreduce *p = &pending_ar;
  if (p->call != c) return;
  if (p->ec.timing >= 0 && p->comm) { /* a sampled NCCL call (SYMMPIN_MEASURE): end its timing */
    pthread_mutex_lock(&p->comm->lock);
    symmpin_engine_nccl_done(p->comm, &p->ec, rc);
    pthread_mutex_unlock(&p->comm->lock);
  }
  allreduce_finish(p, rc, SYMMPIN_PATH_NCCL);
  pending_done(p);
}

/* ---- process start and exit ---- */

static void release_one(symmpin_comm *c, void *arg) {
  (void)arg;
  pthread_mutex_lock(&c->lock);
  atomic_store(&c->ended, 1);
  symmpin_engine_comm_release(c);
  pthread_mutex_unlock(&c->lock);
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

void symmpin_preload_exit(void) {
  if (atomic_load(&enabled) <= 0 || atomic_exchange(&exited, 1)) return;
  symmpin_watch_stop(); /* before the communicators go */
  symmpin_comm_for_each(release_one, NULL);
  symmpin_tracefile_stop();
  stats_report(symmpin_config_get());
}

__attribute__((constructor)) static void symmpin_preload_constructor(void) {
  (void)symmpin_events_enabled();
}
