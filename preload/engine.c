/* The engine: the GPU side of symmpin for one communicator. It owns the symmetric pool and the
 * kernels' error record, gives the agreement (agree/agree.h, CUDA-free) its GPU operations, and
 * launches the kernels for calls whose sites the agreed plan pins: setup, the per-call path (route,
 * slot order, launch, groups, the error state) and teardown. Its parts of their own: the timing
 * pairs of the choice by measurement and the statistics (timing.h) and the capture arena
 * (arena.h). docs/design.md ("Per-communicator life") is the whole protocol in prose.
 *
 * Everything runs under the communicator's lock (preload holds it) and the re-entrancy guard. */
#include "preload/engine.h"

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/invariant.h"
#include "common/log.h"
#include "kernels/allreduce.h"
#include "agree/agree.h"
#include "preload/arena.h"
#include "preload/banner.h"
#include "agree/choice.h"
#include "preload/config.h"
#include "preload/host.h"
#include "preload/keep.h"
#include "preload/nvtx.h"
#include "preload/stats.h"
#include "preload/timing.h"
#include "driver/check.h"
#include "symmem/devscope.h"
#include "symmem/pool.h"

/* SYMMPIN_TEST_FAULT: one injected fault for the GPU suite (docs/config.md). */
typedef enum fault_kind { FAULT_NONE, FAULT_SKIP, FAULT_DIVERGE } fault_kind;
typedef struct test_fault {
  fault_kind kind;
  int rank;
  uint64_t call;
} test_fault;

static test_fault fault_parse(const char *s) {
  test_fault f = {FAULT_NONE, -1, 0};
  char kind[16];
  int rank = -1;
  unsigned long long call = 0;
  if (!s[0]) return f;
  if (sscanf(s, "%15[a-z]:%d:%llu", kind, &rank, &call) == 3 && rank >= 0 && call > 0 &&
      (!strcmp(kind, "skip") || !strcmp(kind, "diverge"))) {
    f = (test_fault){!strcmp(kind, "skip") ? FAULT_SKIP : FAULT_DIVERGE, rank, call};
    SYMMPIN_WARN("SYMMPIN_TEST_FAULT=%s: rank %d %s its collective call %llu on each "
                 "communicator (a test)",
                 s, rank, f.kind == FAULT_SKIP ? "fails to launch" : "sends to NCCL", call);
  } else {
    SYMMPIN_WARN("SYMMPIN_TEST_FAULT=%s: not skip:RANK:CALL or diverge:RANK:CALL; ignored", s);
  }
  return f;
}

static test_fault the_fault;
static void fault_init(void) { the_fault = fault_parse(symmpin_config_get()->test_fault); }

static test_fault fault_get(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, fault_init);
  return the_fault;
}

static bool fault_hits(const symmpin_comm *c, fault_kind kind, uint64_t n) {
  test_fault f = fault_get();
  return f.kind == kind && f.rank == c->rank && f.call == n;
}

/* How many route-log entries per peer a call compares, and an async-error query (which has time:
 * the program's watchdog polls it). */
#define ROUTE_CHECK_BUDGET_CALL 8u
#define ROUTE_CHECK_BUDGET_QUERY 1024u

/* The order of eager kernels on one slot (docs/design.md "Routing"): an event recorded after the
 * latest kernel on the slot, and the stream ordinal it ran on. A kernel on another stream waits
 * for that event first, so a slot is never used by two unordered streams; nothing else is
 * ordered (no stream waits for a whole other stream). One per distinct slot offset, in an
 * open-addressing table that only grows (offsets never move). */
typedef struct slot_order {
  uint64_t offset;
  bool used;           /* the table entry holds a slot */
  CUevent done;        /* created at the slot's first eager kernel */
  int last_ord;        /* stream ordinal of the latest kernel; NO_KERNEL_YET before the first */
} slot_order;
#define NO_KERNEL_YET (-2)

/* Calls of one ncclGroupStart/End held for one launch (symmpin_kernel_launch_group) at the
 * group's end: one stream, datatype, op and capture state, each call on its own slot. A call that
 * does not fit launches what is held first; the launches keep the calls' order. */
typedef struct group_batch {
  int n;
  void *stream;
  int stream_ord;
  bool capturing;
  int dtype, op;
  pthread_t owner;                 /* the thread whose group it is */
  uint64_t first_call;             /* the communicator call index of calls[0] (for logs) */
  symmpin_kernel_call calls[SYMMPIN_KERNEL_GROUP_MAX];
  uint64_t offsets[SYMMPIN_KERNEL_GROUP_MAX];
} group_batch;

/* The group in progress on the communicator, for the choice by measurement (choice.h: a group is
 * probed and timed whole): whether it is a probe, decided at its first call, its unit and its
 * timing pair, from its first call to after the real ncclGroupEnd. */
typedef struct group_unit {
  uint64_t token;     /* its group token (engine.h); 0 before the first group */
  bool probe;         /* the calls symmpin would take go to NCCL */
  bool probed, taken; /* some call went to NCCL as a probe / to symmpin's kernel */
  bool untimed;       /* a call on another stream or captured, or a dropped group: no sample */
  int pair;           /* its timing pair (timing.h), -1 none */
  void *stream;       /* its first call's */
  symmpin_choice_unit unit;
} group_unit;

struct symmpin_engine_comm {
  symmpin_agree *agree;      /* NULL when setup failed (then off_reason says why) */
  symmpin_reason off_reason;
  symmpin_pool *pool;         /* owned by `keep` once that exists */
  symmpin_keep *keep;         /* the pool and error record, until the kernels are done with them */
  symmpin_kernel_error *err_host, *err_dev; /* the keep's error record */
  unsigned long long held_captures[8]; /* capture sequences whose graphs hold the keep (a ring) */
  unsigned held_next;
  uint64_t timeout_cycles;
  bool timeout_reported;
  slot_order *orders;        /* the eager slots' order (slot_order above) */
  size_t norders, orders_cap; /* used entries, table size (a power of two, or 0) */
  symmpin_arena arena;        /* the captured calls' slots (arena.h) */
  group_batch batch;         /* calls held for one launch at the group's end */
  /* Whether the first collective call has completed (agree.h ops.first_call_done): its stream, then
   * an event recorded on it at the second call. */
  void *first_stream;
  CUevent first_ev;
  enum { FIRST_NONE, FIRST_STREAM, FIRST_RECORDED, FIRST_DONE } first;
  bool first_tried;          /* the first call with data was looked at */
  bool capturing_now;        /* the call being handled is captured (agreement callbacks ask) */
  symmpin_timing *timing;    /* the timing pairs (timing.h), NULL until a call may be sampled */
  symmpin_choice *choice;    /* this rank's samples per shape (SYMMPIN_CHOOSE=measure) */
  group_unit grp;            /* the group in progress (choice.h) */
};

/* ---- the agreement's GPU operations (ctx is the communicator) ---- */

/* Symmpin's own allocations and mappings must not break a capture that another stream of this
 * thread (or, in global mode, another thread) has in progress: relaxed mode for their duration. */
static CUstreamCaptureMode capture_mode_relax(void) {
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
  (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.ThreadExchangeStreamCaptureMode(&m));
  return m;
}

static void capture_mode_restore(CUstreamCaptureMode m) {
  (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.ThreadExchangeStreamCaptureMode(&m));
}

/* The communicator's device current for a few CUDA calls, and the thread put back exactly as it
 * was after them (symmpin_devscope_leave). Not a hand-made current-device pair:
 * restoring by device number gives a thread without a context one on GPU 0, and replaces a
 * context the program made current itself (symmem/devscope.h). false: the device cannot be made
 * current (the failing CUDA call is logged); nothing to leave then. */
static bool device_enter(const symmpin_comm *c, symmpin_devscope *s) {
  if (symmpin_devscope_enter(c->device, s, NULL) == SYMMPIN_OK) return true;
  symmpin_devscope_abandon(s);
  return false;
}

/* CUDA resources, made at the first plan (never during capture): the keep of the pool and the
 * kernels' error record (host-mapped memory; the communicator holds it too: keep.h), and the
 * timeout in GPU clocks. */
static symmpin_status engine_cuda_setup(symmpin_comm *c, struct symmpin_engine_comm *e) {
  if (e->keep) return SYMMPIN_OK;
  symmpin_errrec *rec = NULL;
  /* The record's host memory belongs to the context current at its allocation: the device's
   * primary one (retained for good), never none (the driver makes none implicitly) nor a context
   * of the program's, which the program may destroy. */
  symmpin_devscope s;
  if (symmpin_devscope_enter_primary(c->device, &s) != SYMMPIN_OK) {
    symmpin_devscope_abandon(&s);
    SYMMPIN_WARN("comm %d: device %d cannot be made current for the kernels' error record",
                 c->ordinal, c->device);
    return SYMMPIN_ERR_CUDA;
  }
  e->keep = symmpin_keep_new(e->pool, c->device, &rec);
  symmpin_devscope_leave(&s);
  if (!e->keep) {
    SYMMPIN_WARN("comm %d: cannot allocate the kernels' error record", c->ordinal);
    return SYMMPIN_ERR_CUDA;
  }
  c->err_rec = rec; /* the communicator's reference, dropped when its entry is freed */
  e->err_host = rec->host;
  e->err_dev = rec->dev;
  /* What an abort sets and what the async-error query reads, without the communicator's lock. */
  atomic_store(&c->kernel_abort, &e->err_host->abort);
  atomic_store(&c->kernel_failed, &e->err_host->timed_out);
  if (atomic_load(&c->aborting) || atomic_load(&c->async_error)) e->err_host->abort = 1;
  int khz = 0;
  CUdevice dev;
  if (SYMMPIN_CUDA_IGNORE(symmpin_cu.DeviceGet(&dev, c->device)) != CUDA_SUCCESS ||
      SYMMPIN_CUDA_IGNORE(symmpin_cu.DeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE,
                                                        dev)) != CUDA_SUCCESS ||
      khz <= 0)
    khz = 2000000; /* H100/H200 boost clock, kHz */
  e->timeout_cycles = symmpin_config_get()->kernel_timeout_ms * (uint64_t)khz; /* 0: no deadline */
  return SYMMPIN_OK;
}

/* The communicator's call 1, if it made every rank take part (count > 0: NCCL completes an empty
 * collective without its peers) and every rank's engine saw it as its call 1 (a blocking
 * communicator: its rank is known from the start, so every rank opened the board at call 1,
 * before that call reached NCCL; a non-blocking one may learn its rank calls later, on one rank
 * and not another). Then, at a later call never during a capture, an event on that call's
 * stream, on the communicator's device (the legacy stream is per device). Once the event has
 * completed, so has call 1, on every rank. One try: never knowing is only slower (a timeout). */
static void first_call_note(symmpin_comm *c, struct symmpin_engine_comm *e, uint64_t n,
                            const symmpin_coll_call *a, bool capturing) {
  if (!e->first_tried) {
    e->first_tried = true;
    if (n == 1 && c->blocking && a->count > 0 && !capturing) {
      e->first_stream = a->stream;
      e->first = FIRST_STREAM;
    }
  } else if (e->first == FIRST_STREAM && !capturing) {
    e->first = FIRST_NONE;
    symmpin_devscope s;
    if (!device_enter(c, &s)) return;
    if (symmpin_host_capturing(e->first_stream) == 0 &&
        SYMMPIN_CUDA_IGNORE(symmpin_cu.EventCreate(&e->first_ev, CU_EVENT_DISABLE_TIMING)) ==
            CUDA_SUCCESS) {
      if (SYMMPIN_CUDA_IGNORE(symmpin_cu.EventRecord(e->first_ev, (CUstream)e->first_stream)) ==
          CUDA_SUCCESS)
        e->first = FIRST_RECORDED;
      else
        (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.EventDestroy(e->first_ev));
    }
    symmpin_devscope_leave(&s);
  }
}

static bool op_first_call_done(void *ctx) {
  symmpin_comm *c = ctx;
  struct symmpin_engine_comm *e = c->engine;
  /* an event query is "unsafe" during a capture: never from a capturing call, and in relaxed mode
   * so that another thread's global-mode capture is not invalidated. */
  if (e->first == FIRST_RECORDED && !e->capturing_now) {
    CUstreamCaptureMode mode = capture_mode_relax();
    CUresult q = SYMMPIN_CUDA_QUERY(symmpin_cu.EventQuery(e->first_ev));
    capture_mode_restore(mode);
    if (q == CUDA_SUCCESS) e->first = FIRST_DONE;
  }
  return e->first == FIRST_DONE;
}

static size_t op_shape_times(void *ctx, symmpin_choice_entry *out, size_t cap) {
  symmpin_comm *c = ctx;
  return symmpin_choice_export(c->engine->choice, out, cap);
}

static size_t op_group_times(void *ctx, symmpin_choice_group_entry *out, size_t cap) {
  symmpin_comm *c = ctx;
  return symmpin_choice_group_export(c->engine->choice, out, cap);
}

static symmpin_status op_gpu_facts(void *ctx, symmpin_pool_facts *out) {
  symmpin_comm *c = ctx;
  return symmpin_pool_facts_get(c->device, out);
}

static symmpin_status op_check_peers(void *ctx, const symmpin_pool_facts *facts, int nranks,
                                     char *why, size_t why_len) {
  (void)ctx;
  return symmpin_pool_check_peers(facts, nranks, why, why_len);
}

static symmpin_status op_reserve(void *ctx, uint64_t bytes, void *export_rec) {
  symmpin_comm *c = ctx;
  struct symmpin_engine_comm *e = c->engine;
  CUstreamCaptureMode mode = capture_mode_relax();
  symmpin_status st = engine_cuda_setup(c, e);
  if (st == SYMMPIN_OK) st = symmpin_pool_reserve(e->pool, bytes, export_rec);
  capture_mode_restore(mode);
  return st;
}

static void op_settle(void *ctx, bool agreed) {
  symmpin_comm *c = ctx;
  CUstreamCaptureMode mode = capture_mode_relax();
  symmpin_pool_settle(c->engine->pool, agreed);
  capture_mode_restore(mode);
}

static symmpin_status op_attach(void *ctx, const void *const exports[], const symmpin_plan *plan) {
  symmpin_comm *c = ctx;
  struct symmpin_engine_comm *e = c->engine;
  CUstreamCaptureMode mode = capture_mode_relax();
  symmpin_status st = symmpin_pool_attach(e->pool, exports);
  capture_mode_restore(mode);
  if (st != SYMMPIN_OK) return st; /* symmem logged why (no P2P is INFO, a failure WARN) */
  /* Every slot must lie inside one chunk (peers' chunks are separate mappings). The chunks follow
   * the plans' pool sizes, the same on every rank, so every rank reaches the same answer. */
  for (size_t i = 0; i < plan->nsites; i++) {
    const symmpin_plan_site *ps = &plan->sites[i];
    if (ps->pinned && !symmpin_pool_fits(e->pool, ps->offset, ps->slot_bytes)) {
      SYMMPIN_BUG("comm %d rank %d: planned slot [%llu, +%llu) crosses a pool chunk; staying on "
                  "NCCL",
                  c->ordinal, c->rank, (unsigned long long)ps->offset,
                  (unsigned long long)ps->slot_bytes);
      op_settle(ctx, false); /* this rank posts "not attached": back to the agreed size */
      return SYMMPIN_ERR_INTERNAL;
    }
  }
  return SYMMPIN_OK;
}

/* ---- setup ---- */

static void engine_off(symmpin_comm *c, struct symmpin_engine_comm *e, symmpin_reason why,
                       const char *what) {
  e->off_reason = why;
  SYMMPIN_INFO("comm %d rank %d/%d: symmpin stays out of this communicator: %s", c->ordinal,
               c->rank, c->nranks, what);
  symmpin_nvtx_mark_comm(c, why, what);
}

/* Engine state for c on its first collective. A failure leaves a state without agreement (off). */
static struct symmpin_engine_comm *engine_get(symmpin_comm *c) {
  if (c->engine) return c->engine;
  symmpin_nvtx_init();
  symmpin_keep_drain(); /* what communicators that ended left for their kernels to finish */
  struct symmpin_engine_comm *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  c->engine = e;
  e->grp.pair = -1;
  const symmpin_config *cfg = symmpin_config_get();
  symmpin_agree_params p = {
      .key = c->key, .comm = c->ordinal, .rank = c->rank, .nranks = c->nranks,
      .warmup = (uint32_t)cfg->warmup, .mode = cfg->planner, .max_bytes = cfg->max_bytes,
      .capture_bytes = cfg->capture_bytes,
      .timeout_ms = cfg->timeout_ms, .aborting = &c->aborting,
      .ops = {.ctx = c, .gpu_facts = op_gpu_facts, .check_peers = op_check_peers,
              .reserve = op_reserve, .attach = op_attach, .settle = op_settle,
              .first_call_done = op_first_call_done},
  };
  p.group_max_bytes = cfg->group_max_bytes;
  p.colls_off = symmpin_config_colls_off(cfg);
  if (cfg->choose == SYMMPIN_CHOOSE_MEASURE) {
    e->choice = symmpin_choice_new(); /* without memory: the static choice */
    if (e->choice) {
      p.ops.shape_times = op_shape_times;
      p.ops.group_times = op_group_times;
    }
  }
  if (!symmpin_banner_cuda_supported()) {
    /* The driver cannot serve symmpin: no CUDA call at all, and no line per communicator (the
     * process's one INFO line said why: preload/banner.h). */
    e->off_reason = SYMMPIN_REASON_COMM;
    return e;
  }
  char why[200];
  symmpin_status kernels_ok = SYMMPIN_ERR_CUDA;
  symmpin_devscope s;
  if (device_enter(c, &s)) {
    kernels_ok = symmpin_kernel_device_check(why, sizeof why);
    symmpin_devscope_leave(&s);
  } else {
    snprintf(why, sizeof why, "device %d cannot be made current", c->device);
  }
  if (c->nranks > SYMMPIN_KERNEL_MAX_RANKS) {
    engine_off(c, e, SYMMPIN_REASON_COMM, "more ranks than the kernels support");
  } else if (c->nranks < 2 && !cfg->test_one_rank) {
    engine_off(c, e, SYMMPIN_REASON_COMM, "one rank (NCCL's collective is a copy at most)");
  } else if (!symmpin_banner_nccl_supported()) {
    engine_off(c, e, SYMMPIN_REASON_COMM, "this NCCL version is not supported (see the WARN line)");
  } else if (kernels_ok != SYMMPIN_OK) {
    engine_off(c, e, SYMMPIN_REASON_COMM, why);
  } else if (symmpin_pool_device_check(c->device, why, sizeof why) != SYMMPIN_OK) {
    engine_off(c, e, SYMMPIN_REASON_COMM, why);
  } else if (symmpin_pool_create(c->rank, c->nranks, c->device, &e->pool) != SYMMPIN_OK ||
             symmpin_agree_open(&p, &e->agree) != SYMMPIN_OK) { /* no CUDA call yet */
    engine_off(c, e, SYMMPIN_REASON_ERROR, "setup failed (see the warning above)");
  }
  return e;
}

void symmpin_engine_prepare(int device) {
  if (device < 0 || !symmpin_banner_cuda_supported()) return;
  symmpin_devscope s;
  if (symmpin_devscope_enter(device, &s, NULL) != SYMMPIN_OK) {
    symmpin_devscope_abandon(&s);
    return;
  }
  char why[8];
  (void)symmpin_kernel_device_check(why, sizeof why); /* kept per device by kernels/ */
  symmpin_devscope_leave(&s);
}

static void stats_publish(symmpin_comm *c, struct symmpin_engine_comm *e, const symmpin_plan *p) {
  for (size_t i = 0; i < p->nsites; i++) {
    /* A plan entry's key is its call site (planner/record.h); its calls go to the slot of the
     * pinned site of their shape (symmpin_plan_for_shape), also when it is not pinned itself. */
    const symmpin_plan_site *s = &p->sites[i];
    const symmpin_plan_site *to = symmpin_plan_for_shape(p, s->coll, s->count, s->dtype, s->op);
    if (to) symmpin_stats_set_slot(c, s->site, to->offset, to->slot_bytes);
  }
  symmpin_stats_set_pool(c, (uint32_t)p->npinned, p->dedicated_bytes, p->lower_bound_bytes,
                         symmpin_pool_size(e->pool));
  symmpin_stats_set_capture(c, p->capture_bytes, e->arena.used);
}

/* ---- timing (timing.h) ---- */

void symmpin_engine_nccl_done(symmpin_comm *c, const symmpin_engine_call *ec, int rc) {
  if (!c->engine) return;
  symmpin_timing_end_on_device(c->engine->timing, c, ec->timing, ec->call->stream, rc == 0);
}

/* ---- the per-call path ---- */

static symmpin_reason reason_of(symmpin_plan_reason r) {
  switch (r) {
  case SYMMPIN_PLAN_PINNED: return SYMMPIN_REASON_NONE;
  case SYMMPIN_PLAN_TOO_LARGE: return SYMMPIN_REASON_TOO_LARGE;
  case SYMMPIN_PLAN_UNSUPPORTED: return SYMMPIN_REASON_TYPE_OP;
  case SYMMPIN_PLAN_STREAM_OFF_PLAN:
  case SYMMPIN_PLAN_NO_STREAM: return SYMMPIN_REASON_STREAM;
  case SYMMPIN_PLAN_UNPLANNED: return SYMMPIN_REASON_WARMUP;
  case SYMMPIN_PLAN_NCCL_FASTER: return SYMMPIN_REASON_MEASURED;
  case SYMMPIN_PLAN_GROUP_TOO_LARGE: return SYMMPIN_REASON_GROUP;
  case SYMMPIN_PLAN_GROUP_NCCL_FASTER: return SYMMPIN_REASON_GROUP_MEASURED;
  default: return SYMMPIN_REASON_DISAGREE;
  }
}

/* SYMMPIN_ALLGATHER=0 / SYMMPIN_REDUCESCATTER=0. */
static bool coll_off(int coll) {
  return symmpin_config_colls_off(symmpin_config_get()) >> coll & 1u;
}

static symmpin_reason stop_reason(symmpin_agree_stop s) {
  return s == SYMMPIN_AGREE_ERROR ? SYMMPIN_REASON_ERROR : SYMMPIN_REASON_COMM;
}

/* The communicator's error state (comm.h async_error), entered once: `code` is what
 * ncclCommGetAsyncError and every later collective call report. Waiting kernels give up (their
 * peers' calls no longer pair up with theirs), through the word an abort also uses. */
static void enter_error(symmpin_comm *c, struct symmpin_engine_comm *e, int code) {
  (void)e;
  symmpin_comm_fail(c, code, NULL); /* the caller logged why */
  symmpin_nvtx_mark_error(c, code);
}

static void report_kernel_timeout(symmpin_comm *c, struct symmpin_engine_comm *e) {
  if (e->timeout_reported || !e->err_host || !e->err_host->timed_out || e->err_host->aborted)
    return;
  e->timeout_reported = true;
  if (e->err_host->mismatch) {
    SYMMPIN_WARN(
        "comm %d rank %d: a collective at site %016llx met rank %d's data of another call "
        "on its slot (the ranks' calls on that slot are out of step: a rank skipped or "
        "repeated one) and gave up; its result is wrong, so this communicator is now in "
        "error (ncclCommGetAsyncError and every later collective call report ncclRemoteError)",
        c->ordinal, c->rank, (unsigned long long)e->err_host->site, (int)e->err_host->peer);
    if (e->agree) (void)symmpin_agree_raise(e->agree, SYMMPIN_ALARM_KERNEL_FAILED, c->collectives);
    return;
  }
  SYMMPIN_WARN(
      "comm %d rank %d: a collective at site %016llx gave up waiting for rank %d after "
      "SYMMPIN_KERNEL_TIMEOUT_MS; its result is wrong, so this communicator is now in "
      "error (ncclCommGetAsyncError and every later collective call report ncclRemoteError). "
      "The ranks called different collectives at that point, or rank %d stopped.",
      c->ordinal, c->rank, (unsigned long long)e->err_host->site, (int)e->err_host->peer,
      (int)e->err_host->peer);
  /* The peers' kernels may wait for this rank's next call on that slot: tell them. */
  if (e->agree) (void)symmpin_agree_raise(e->agree, SYMMPIN_ALARM_KERNEL_FAILED, c->collectives);
}

void symmpin_engine_comm_report_failure(symmpin_comm *c) {
  if (c->engine) report_kernel_timeout(c, c->engine);
}

/* Read the board's alarm and compare route logs (the async-error query's share of the check). */
void symmpin_engine_drain(void) { symmpin_keep_drain(); }

void symmpin_engine_comm_poll(symmpin_comm *c) {
  struct symmpin_engine_comm *e = c->engine;
  if (e) report_kernel_timeout(c, e); /* a kernel of this rank gave up: tell the peers too */
  symmpin_alarm al;
  if (e && e->agree && symmpin_agree_route_check(e->agree, ROUTE_CHECK_BUDGET_QUERY, &al))
    enter_error(c, e, SYMMPIN_NCCL_REMOTE_ERROR);
}

/* ---- the order of eager kernels on a slot ---- */

static uint64_t offset_hash(uint64_t o) { return (o >> 8) * 0x9e3779b97f4a7c15ull; }

static slot_order *order_find(struct symmpin_engine_comm *e, uint64_t offset) {
  size_t mask = e->orders_cap - 1;
  for (size_t i = offset_hash(offset) & mask;; i = (i + 1) & mask) {
    slot_order *so = &e->orders[i];
    if (!so->used || so->offset == offset) return so;
  }
}

/* The slot's entry, added if new; NULL without memory. Never during a capture (only eager calls
 * come here), so creating its event is allowed. */
static slot_order *order_of(struct symmpin_engine_comm *e, uint64_t offset) {
  if ((e->norders + 1) * 2 > e->orders_cap) { /* grow: at most half full */
    size_t cap = e->orders_cap ? e->orders_cap * 2 : 64;
    slot_order *old = e->orders, *t = calloc(cap, sizeof *t);
    if (!t) return NULL;
    size_t old_cap = e->orders_cap;
    e->orders = t;
    e->orders_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i].used) *order_find(e, old[i].offset) = old[i];
    free(old);
  }
  slot_order *so = order_find(e, offset);
  if (!so->used) {
    if (SYMMPIN_CUDA_CHECK(symmpin_cu.EventCreate(&so->done, CU_EVENT_DISABLE_TIMING)) !=
        CUDA_SUCCESS)
      return NULL;
    *so = (slot_order){.offset = offset, .used = true, .done = so->done, .last_ord = NO_KERNEL_YET};
    e->norders++;
  }
  return so;
}

/* The slots' events go to the keep (keep.h), which frees the pool once they have completed;
 * with no keep (nothing was ever launched) they are destroyed here, which never waits. */
static void orders_free(struct symmpin_engine_comm *e) {
  void **events = malloc((e->norders ? e->norders : 1) * sizeof *events);
  int n = 0;
  for (size_t i = 0; i < e->orders_cap; i++) {
    if (!e->orders[i].used) continue;
    if (events) {
      events[n++] = e->orders[i].done;
    } else { /* no memory to hand them over: wait here rather than free under a kernel */
      if (e->keep) (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.EventSynchronize(e->orders[i].done));
      (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.EventDestroy(e->orders[i].done));
    }
  }
  if (e->keep) {
    symmpin_keep_retire(e->keep, events, n); /* owns the pool from now on */
  } else {
    for (int i = 0; i < n; i++) (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.EventDestroy(events[i]));
    symmpin_pool_destroy(e->pool); /* never grown: no chunk, no CUDA call */
  }
  e->keep = NULL;
  e->pool = NULL;
  free(events);
  free(e->orders);
  e->orders = NULL;
  e->orders_cap = e->norders = 0;
}

/* ---- the launch ---- */

/* The kernels' view of call n on `slot`; false if a rank's slot is not mapped. The call's
 * identity is n, the communicator's collective-call index: the same on every rank for the same call
 * (NCCL pairs calls by order), so the kernels can tell a peer's data of another call. */
static bool kernel_call_of(symmpin_comm *c, struct symmpin_engine_comm *e,
                           const symmpin_engine_call *ec, const symmpin_plan_site *slot,
                           uint64_t n, symmpin_kernel_call *k) {
  const symmpin_coll_call *a = ec->call;
  *k = (symmpin_kernel_call){
      .slot_bytes = slot->slot_bytes,
      .rank = c->rank,
      .nranks = c->nranks,
      .coll = a->coll,
      .send = a->send,
      .recv = a->recv,
      .count = a->count,
      .dtype = a->dtype,
      .op = a->op,
      .input = SYMMPIN_INPUT_STAGED,
      .site = ec->site,
      .timeout_cycles = e->timeout_cycles,
      .error = e->err_dev,
      .call_id = (uint32_t)n,
  };
  SYMMPIN_ASSERT(c->nranks <= SYMMPIN_KERNEL_MAX_RANKS); /* larger ones stay off (engine_get) */
  for (int r = 0; r < c->nranks; r++) {
    k->slot[r] = symmpin_pool_addr(e->pool, r, slot->offset);
    if (!k->slot[r]) return false;
  }
  return true;
}

/* The graph being captured on `stream` holds the keep, once per capture sequence (a few recent
 * ones remembered; a graph held twice is only released twice). */
static bool graph_hold(struct symmpin_engine_comm *e, void *stream) {
  CUstreamCaptureStatus status;
  cuuint64_t id = 0;
  if (!e->keep || SYMMPIN_CUDA_CHECK(symmpin_cu.StreamGetCaptureInfo(
                      (CUstream)stream, &status, &id, NULL, NULL, NULL)) != CUDA_SUCCESS)
    return false;
  size_t ring = sizeof e->held_captures / sizeof e->held_captures[0];
  for (size_t i = 0; i < ring; i++)
    if (e->held_captures[i] == id && id != 0) return true;
  if (!symmpin_keep_hold_for_graph(e->keep, stream)) return false;
  e->held_captures[e->held_next++ % ring] = id;
  return true;
}

/* Enqueue n calls (one launch; n > 1: a group) on `stream`, the communicator's device current.
 * Eager calls are ordered after the latest eager kernel on each of their slots when that ran on
 * another stream, and leave their slots' events for the next; captured calls use arena slots no
 * other work touches and need neither. `timed`: the call to time if it is sampled (NULL: none). */
static bool launch_ordered(symmpin_comm *c, struct symmpin_engine_comm *e,
                           const symmpin_kernel_call *k, const uint64_t *offsets, int n,
                           void *stream, int ord, bool capturing, const symmpin_engine_call *timed) {
  CUstream s = (CUstream)stream;
  slot_order *so[SYMMPIN_KERNEL_GROUP_MAX] = {0};
  bool ok = true;
  /* Every slot's entry first (adding one may move the table), then pointers into it. */
  for (int i = 0; ok && i < n && !capturing; i++) ok = order_of(e, offsets[i]) != NULL;
  for (int i = 0; ok && i < n && !capturing; i++) {
    so[i] = order_find(e, offsets[i]);
    /* An unknown ordinal (-1) may be any stream: wait. */
    if (so[i]->last_ord != NO_KERNEL_YET && (so[i]->last_ord != ord || ord < 0))
      ok = SYMMPIN_CUDA_CHECK(symmpin_cu.StreamWaitEvent(s, so[i]->done, 0)) == CUDA_SUCCESS;
  }
  /* A captured kernel's graph holds the pool until the graph is gone (keep.h). */
  if (capturing) ok = graph_hold(e, stream);
  int timing = ok && timed ? symmpin_timing_start(&e->timing, c, e->choice, timed, true, true) : -1;
  if (ok) {
    ok = (n == 1 ? symmpin_kernel_launch(k, stream) : symmpin_kernel_launch_group(k, n, stream)) ==
         SYMMPIN_OK; /* a failed launch logged itself */
  }
  symmpin_timing_end(e->timing, timing, stream, ok);
  for (int i = 0; ok && i < n && !capturing; i++) {
    ok = SYMMPIN_CUDA_CHECK(symmpin_cu.EventRecord(so[i]->done, s)) == CUDA_SUCCESS;
    so[i]->last_ord = ord;
  }
  return ok;
}

/* Call n, now. */
static bool launch(symmpin_comm *c, struct symmpin_engine_comm *e, const symmpin_engine_call *ec,
                   const symmpin_plan_site *slot, uint64_t n) {
  symmpin_kernel_call k;
  if (!kernel_call_of(c, e, ec, slot, n, &k)) return false;
  symmpin_devscope s;
  if (!device_enter(c, &s)) return false;
  symmpin_nvtx_call_push(&k, ec->capturing, &ec->call->where);
  bool ok = launch_ordered(c, e, &k, &slot->offset, 1, ec->call->stream, ec->stream_ord,
                           ec->capturing, ec);
  symmpin_nvtx_pop();
  symmpin_devscope_leave(&s);
  return ok;
}

/* Launch the calls held for the group (nothing if none). */
static bool batch_flush(symmpin_comm *c, struct symmpin_engine_comm *e) {
  group_batch *b = &e->batch;
  if (b->n == 0) return true;
  if (symmpin_comm_stream_is_per_thread(b->stream) && !pthread_equal(b->owner, pthread_self())) {
    /* cudaStreamPerThread names this thread's stream here, not the owner's: no launch on it. */
    SYMMPIN_WARN("comm %d rank %d: another thread used the communicator while a group of "
                 "cudaStreamPerThread calls was held; the group cannot be launched",
                 c->ordinal, c->rank);
    b->n = 0;
    return false;
  }
  symmpin_devscope s;
  bool ok = device_enter(c, &s);
  if (ok) {
    symmpin_nvtx_group_push(b->calls, b->n, b->capturing);
    ok = launch_ordered(c, e, b->calls, b->offsets, b->n, b->stream, b->stream_ord, b->capturing,
                        NULL);
    symmpin_nvtx_pop();
    symmpin_devscope_leave(&s);
  }
  if (!ok)
    SYMMPIN_WARN("comm %d rank %d: launching the %d collective(s) of a group from call %llu "
                 "failed",
                 c->ordinal, c->rank, b->n, (unsigned long long)b->first_call);
  b->n = 0;
  return ok;
}

/* Hold call n for the group's launch, launching what is held first if it cannot join it. */
static bool batch_add(symmpin_comm *c, struct symmpin_engine_comm *e, const symmpin_engine_call *ec,
                      const symmpin_plan_site *slot, uint64_t n) {
  const symmpin_coll_call *a = ec->call;
  group_batch *b = &e->batch;
  symmpin_kernel_call k;
  if (!kernel_call_of(c, e, ec, slot, n, &k)) return false;
  bool joins = b->n > 0 && b->n < SYMMPIN_KERNEL_GROUP_MAX && b->stream == a->stream &&
               b->stream_ord == ec->stream_ord && b->capturing == ec->capturing &&
               b->dtype == a->dtype && b->op == a->op;
  for (int i = 0; joins && i < b->n; i++) joins = b->offsets[i] != slot->offset;
  if (!joins && !batch_flush(c, e)) return false;
  if (b->n == 0)
    *b = (group_batch){.stream = a->stream, .stream_ord = ec->stream_ord,
                       .capturing = ec->capturing, .dtype = a->dtype, .op = a->op,
                       .owner = pthread_self(), .first_call = n};
  b->calls[b->n] = k;
  b->offsets[b->n++] = slot->offset;
  return true;
}

void symmpin_engine_group_drop(symmpin_comm *c) {
  struct symmpin_engine_comm *e = c->engine;
  if (e) e->grp.untimed = true; /* NCCL runs nothing of it: no time to take */
  if (e && e->batch.n && pthread_equal(e->batch.owner, pthread_self())) e->batch.n = 0;
}

/* ---- groups for the choice by measurement (choice.h) ---- */

/* The group's end (ran: NCCL ran it): its time is a sample of its unit on the path it took, where
 * it took one (a probe group with a call NCCL took in symmpin's place, another group with a call
 * symmpin took) and the unit still wants it; else its pair is given up. */
static void group_unit_close(symmpin_comm *c, struct symmpin_engine_comm *e, bool ran) {
  group_unit *g = &e->grp;
  if (g->pair < 0) return;
  bool redirected = !g->probe;
  bool sample = ran && !g->untimed && (g->probe ? g->probed : g->taken) &&
                symmpin_choice_group_want(e->choice, &g->unit, redirected);
  symmpin_timing_group_end(e->timing, c, g->pair, g->stream, g->unit.sig, redirected, sample);
  g->pair = -1;
}

/* A grouped call while every rank measures and groups alike: the group's first call (a new
 * token) decides whether the group is a probe and starts its timing (only where the caller will
 * call symmpin_engine_group_end: may_batch); every call adds its shape to the unit. */
static void group_unit_note(symmpin_comm *c, struct symmpin_engine_comm *e, symmpin_engine_call *ec,
                            const symmpin_plan_shape *shape) {
  group_unit *g = &e->grp;
  if (g->token != ec->group_token) {
    group_unit_close(c, e, false); /* a group whose end never came here: no sample */
    bool timed = false;
    g->token = ec->group_token;
    g->probe = symmpin_choice_group_probe(e->choice, shape, &timed);
    g->probed = g->taken = g->untimed = false;
    g->stream = ec->call->stream;
    symmpin_choice_unit_init(&g->unit);
    if (timed && ec->may_batch) g->pair = symmpin_timing_group_start(&e->timing, c, g->stream);
    ec->group_end = g->pair >= 0;
  } else if (ec->call->stream != g->stream) {
    g->untimed = true; /* NCCL's part on two streams: no one pair spans it */
  }
  symmpin_choice_unit_add(&g->unit, shape);
}

void symmpin_engine_group_end(symmpin_comm *c, int rc) {
  if (c->engine) group_unit_close(c, c->engine, rc == 0);
}

int symmpin_engine_group_flush(symmpin_comm *c) {
  struct symmpin_engine_comm *e = c->engine;
  if (!e || e->batch.n == 0) return 0;
  uint64_t first = e->batch.first_call;
  if (batch_flush(c, e)) return 0;
  /* The peers run these calls: as for any failed launch, the communicator enters its error state
   * and the alarm tells the peers, whose kernels then give up. */
  if (e->agree) (void)symmpin_agree_raise(e->agree, SYMMPIN_ALARM_LAUNCH_FAILED, first);
  enter_error(c, e, SYMMPIN_NCCL_UNHANDLED_CUDA_ERROR);
  return SYMMPIN_NCCL_UNHANDLED_CUDA_ERROR;
}

bool symmpin_engine_collective(symmpin_comm *c, symmpin_engine_call *ec, int *rc,
                               symmpin_reason *reason) {
  ec->timing = -1;
  if (c->rank < 0 || c->nranks < 1) {
    *reason = SYMMPIN_REASON_COMM; /* not known yet (non-blocking init in progress) */
    return false;
  }
  struct symmpin_engine_comm *e = engine_get(c);
  if (!e) {
    *reason = SYMMPIN_REASON_ERROR;
    return false;
  }
  if (!e->agree) {
    *reason = e->off_reason;
    return false;
  }
  const symmpin_coll_call *a = ec->call;
  uint64_t n = c->collectives;
  ec->batched = false;
  ec->group_end = false;
  /* Calls held for a group's launch go first when a call outside that group comes (another
   * thread, or no group): kernels on a slot must run in call order. */
  if (e->batch.n && (ec->group_depth == 0 || !pthread_equal(e->batch.owner, pthread_self())) &&
      symmpin_engine_group_flush(c) != 0) {
    *rc = SYMMPIN_NCCL_UNHANDLED_CUDA_ERROR;
    *reason = SYMMPIN_REASON_ERROR;
    return true;
  }
  first_call_note(c, e, n, a, ec->capturing);
  e->capturing_now = ec->capturing;
  /* an event query is "unsafe" during a capture: never from a capturing call, and in relaxed mode
   * so that another thread's global-mode capture is not invalidated. */
  if (!ec->capturing && e->timing) {
    CUstreamCaptureMode mode = capture_mode_relax();
    symmpin_timing_read(e->timing, c, e->choice);
    capture_mode_restore(mode);
  }
  symmpin_agree_call call = {
      .site = ec->site,
      .stream_ord = ec->stream_ord,
      .count = a->count,
      .dtype = a->dtype,
      .op = a->op,
      .coll = a->coll,
      .in_place = a->send == a->recv,
      .capturing = ec->capturing,
      .group_token = ec->group_depth > 0 ? ec->group_token : 0,
      .send_alloc = ec->send_alloc,
      .recv_alloc = ec->recv_alloc,
  };
  /* A stop ends the epochs, not an agreed plan: the peers keep redirecting its sites, so this rank
   * must too (sending them to NCCL would leave both sides waiting). */
  if (symmpin_agree_step(e->agree, n, &call)) {
    stats_publish(c, e, symmpin_agree_plan(e->agree));
    symmpin_nvtx_mark_plan(c, e->agree);
  }
  const symmpin_plan *plan = symmpin_agree_plan(e->agree);
  if (!plan) {
    symmpin_agree_stop stopped = symmpin_agree_stopped(e->agree);
    if (stopped) symmpin_nvtx_mark_stop(c, stopped);
    *reason = stopped ? stop_reason(stopped)
              : ec->capturing ? SYMMPIN_REASON_CAPTURE : SYMMPIN_REASON_WARMUP;
    ec->timing = symmpin_timing_start(&e->timing, c, e->choice, ec, false, false);
    return false;
  }
  /* Eager calls: the slot of the pinned site of their shape, whatever their stream (the home
   * stream the route names is not needed: launch orders the slot's kernels). Captured calls: a
   * slot of the capture arena, whatever their shape's plan (docs/design.md "Capture"). */
  const symmpin_plan_site *slot = NULL;
  symmpin_plan_site arena_slot;
  if (ec->capturing) {
    *reason = symmpin_arena_route(&e->arena, c, plan, ec, &arena_slot);
    slot = &arena_slot;
  } else {
    *reason = reason_of(symmpin_agree_route(e->agree, &call, &slot));
    /* Not pinned because the user keeps this collective on NCCL: say so. */
    if (*reason == SYMMPIN_REASON_TYPE_OP && coll_off(a->coll)) *reason = SYMMPIN_REASON_OFF;
  }
  /* The choice by measurement: some of a newly pinned shape's eager calls go to NCCL to be
   * timed there, and some groups whole (the same calls on every rank: choice.h). A call in a
   * group is a grouped one only where the ranks group alike (planner/plan.h groups_alike). */
  bool measuring = !ec->capturing && e->choice && symmpin_agree_measuring(e->agree);
  bool as_group = measuring && ec->group_depth > 0 && plan->groups_alike;
  symmpin_plan_shape shape = {.count = a->count, .dtype = a->dtype, .op = a->op, .coll = a->coll};
  if (as_group) group_unit_note(c, e, ec, &shape);
  /* A group partly captured is not what either path runs eagerly: no sample. */
  if (ec->capturing && ec->group_depth > 0 && ec->group_token == e->grp.token)
    e->grp.untimed = true;
  if (*reason == SYMMPIN_REASON_NONE && measuring &&
      (as_group ? e->grp.probe : symmpin_choice_probe(e->choice, &shape)))
    *reason = SYMMPIN_REASON_PROBE;
  if (as_group && *reason == SYMMPIN_REASON_PROBE) e->grp.probed = true;
  if (*reason == SYMMPIN_REASON_NONE && fault_hits(c, FAULT_DIVERGE, n))
    *reason = SYMMPIN_REASON_DISAGREE; /* the test's divergent rank: NCCL, logged as such */
  /* Log the route before anything can wait, then compare with the peers' logs. */
  symmpin_agree_route_log(e->agree, n, &call, *reason == SYMMPIN_REASON_NONE ? slot : NULL);
  symmpin_alarm al;
  if (symmpin_agree_route_check(e->agree, ROUTE_CHECK_BUDGET_CALL, &al)) {
    enter_error(c, e, SYMMPIN_NCCL_REMOTE_ERROR);
    *rc = SYMMPIN_NCCL_REMOTE_ERROR;
    *reason = SYMMPIN_REASON_ERROR;
    return true;
  }
  if (*reason != SYMMPIN_REASON_NONE) {
    ec->timing =
        symmpin_timing_start(&e->timing, c, e->choice, ec, false, *reason == SYMMPIN_REASON_PROBE);
    return false;
  }
  bool hold = ec->group_depth > 0 && ec->may_batch;
  if (fault_hits(c, FAULT_SKIP, n) ||
      !(hold ? (ec->batched = batch_add(c, e, ec, slot, n)) : launch(c, e, ec, slot, n))) {
    /* NCCL cannot take this call any more: the peers run symmpin's kernel for it. This rank
     * reports the failure (ncclUnhandledCudaError) and enters the error state, so it never
     * launches a later call on this slot that the peers' waiting kernels would take for this
     * one; the alarm tells the peers, whose kernels then give up instead of waiting. */
    SYMMPIN_WARN("comm %d rank %d: launching symmpin's %s kernel for site %016llx (call %llu) "
                 "failed%s",
                 c->ordinal, c->rank, symmpin_coll_name(ec->call->coll),
                 (unsigned long long)ec->site, (unsigned long long)n,
                 fault_hits(c, FAULT_SKIP, n) ? " (SYMMPIN_TEST_FAULT)" : "");
    (void)symmpin_agree_raise(e->agree, SYMMPIN_ALARM_LAUNCH_FAILED, n);
    enter_error(c, e, SYMMPIN_NCCL_UNHANDLED_CUDA_ERROR);
    *rc = SYMMPIN_NCCL_UNHANDLED_CUDA_ERROR;
    *reason = SYMMPIN_REASON_ERROR;
    return true;
  }
  if (as_group) e->grp.taken = true;
  *rc = 0; /* ncclSuccess */
  return true;
}

/* ---- the end ---- */

static void engine_free_host(struct symmpin_engine_comm *e) {
  symmpin_agree_close(e->agree);
  symmpin_choice_free(e->choice);
  free(e);
}

/* ncclCommAbort: recovery from stuck kernels, which the abort word (set before the lock was taken,
 * events.c) has already told to give up. No barrier and no waiting CUDA call: the pool and the
 * error record go to the keep, freed once the kernels have given up (their events complete) and
 * every graph that captured them is gone (keep.h). A peer's kernel may still write into this
 * rank's chunks: its mapping holds them. The communicator's entry keeps its reference to the
 * record for threads that still read it (comm_async_error). */
/* The communicator's CUDA objects go (the first call's event, the timing pairs, the slots' events
 * handed to the keep) in its device's context, whatever thread ends the communicator: a watchdog
 * thread that aborts it, or the exiting main thread, may have no context current, and the driver
 * makes none implicitly. */
static void engine_free_cuda(symmpin_comm *c, struct symmpin_engine_comm *e) {
  bool first = e->first == FIRST_RECORDED || e->first == FIRST_DONE;
  symmpin_devscope s;
  bool scoped = (e->timing || first || e->keep || e->norders) && device_enter(c, &s);
  symmpin_timing_free(e->timing);
  e->timing = NULL;
  if (first) (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.EventDestroy(e->first_ev));
  orders_free(e);
  if (scoped) symmpin_devscope_leave(&s);
}

void symmpin_engine_comm_abandon(symmpin_comm *c) {
  struct symmpin_engine_comm *e = c->engine;
  if (!e) return;
  c->engine = NULL;
  engine_free_cuda(c, e);
  engine_free_host(e);
}

/* ncclCommDestroy or ncclCommFinalize: the same hand-over to the keep as an abort, without
 * stopping anything. Kernels already queued finish normally (their peers' pools stay mapped by
 * their own mappings), and nothing here waits for them, for a peer or for the device. */
void symmpin_engine_comm_release(symmpin_comm *c) {
  struct symmpin_engine_comm *e = c->engine;
  if (!e) return;
  /* Calls held for a group that never ended (the communicator ends inside it, or the process
   * exits there): NCCL would not run its own part either. Launching them now could wait for ever
   * (a peer that ends first, or another rank of this thread whose release comes later). */
  if (e->batch.n)
    SYMMPIN_WARN(
        "comm %d rank %d: the communicator ended inside ncclGroupStart/End; the group's %d "
        "collective(s) held for its end did not run",
        c->ordinal, c->rank, e->batch.n);
  e->batch.n = 0;
  c->engine = NULL;
  /* ncclCommFinalize keeps the handle (and so c) valid, and ncclCommGetAsyncError may still ask:
   * keep what the error record says now. Later kernel failures (of calls queued before) still
   * reach the record, which the entry holds: comm_async_error reads it until the entry goes. */
  const volatile uint32_t *failed = atomic_load(&c->kernel_failed);
  if (failed && *failed && !e->err_host->aborted)
    symmpin_comm_fail(c, SYMMPIN_NCCL_REMOTE_ERROR, "a kernel gave up waiting for a peer");
  engine_free_cuda(c, e);
  engine_free_host(e);
}
