/* The engine's decisions on the CPU: preload/engine.c as built into libsymmpin, with the
 * agreement on real boards and threads as ranks, and FAKES for what lies below it (the CUDA
 * driver's contexts, events and streams, symmem's pool, the kernels' launch:
 * tests/preload/engine_fakes.h).
 * What a fake cannot show (that the kernels and the pool work on GPUs) the GPU suite shows; this
 * shows which calls the engine launches, on which stream and slot, and how it orders them. */
#include <criterion/criterion.h>
#include <cuda.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/commkey.h"
#include "preload/comm.h"
#include "agree/choice.h"
#include "preload/config.h"
#include "preload/engine.h"
#include "preload/errrec.h"
#include "preload/keep.h"
#include "engine_fakes.h"

#define RANKS 2
#define CALLS 400 /* a script's calls, unless a test makes more */
#define MAX_CALLS 800
#define WARMUP 16

#define S0 ((void *)0x100)   /* every rank's main stream */
#define S1 ((void *)0x200)   /* a side stream */
#define SG ((void *)0x300)   /* a stream used only to capture CUDA graphs */
#define ARENA (256u << 10)   /* SYMMPIN_CAPTURE_BYTES */

/* One call of one rank's script. */
typedef struct spec {
  uint64_t site;
  size_t count;
  void *stream;
  bool capturing;
  unsigned long long capture_id; /* when capturing: the capture sequence */
  bool fail_launch; /* the kernel launch of this call fails on this rank */
  bool other_thread; /* made from another thread of the rank's process */
  int group;         /* nonzero: inside ncclGroupStart/End; consecutive calls with one id are one
                        group, whose end follows its last call */
  int coll;          /* common/types.h: 0 all-reduce (the default), all-gather, reduce-scatter */
  int dtype;         /* a common/types.h datatype; 0 (int8, unused here) stands for float32 */
} spec;

/* What the engine did with it. */
typedef struct outcome {
  bool taken;
  int rc;
  symmpin_reason reason;
  char ops[16];          /* L launch, G group launch, R event record, W stream wait, in order;
                            after a group's last call, '|' and what its end launched */
  int group_calls;       /* the calls in the last group launch logged, 0 if none */
  int launches, waits, records; /* all of them (ops holds the first 15) */
  int64_t offset;        /* the launch's slot offset, -1 if none */
  int coll;              /* the launch's collective */
  size_t slot_bytes;     /* the launch's slot size */
  void *launch_stream;
  int off_device;  /* launches, records and waits made without the communicator's device's
                      primary context current */
  void *ctx_after; /* the thread's current context after the call (fake_ctx_get) */
  int mode_after;  /* its stream-capture mode after the call (fake_capture_mode) */
} outcome;

/* The context the program has current on its thread when it calls NCCL. */
typedef enum program_ctx {
  PROGRAM_PRIMARY,      /* its device's primary context (cudaSetDevice(rank)): the default */
  PROGRAM_NO_CONTEXT,   /* none: the thread never made a CUDA call */
  PROGRAM_OTHER_DEVICE, /* a context of its own on another device than the communicator's */
} program_ctx;

typedef struct world {
  symmpin_comm_key key;
  spec script[RANKS][MAX_CALLS];
  size_t ncalls;
  outcome out[RANKS][MAX_CALLS];
  _Atomic int progress[RANKS];
  float kernel_ms, other_ms; /* nonzero: the fake event times (fake_set_elapsed) */
  float group_ms;            /* nonzero: a group launch's time (fake_set_elapsed_group) */
  bool abort_end; /* the ranks end with ncclCommAbort instead of ncclCommDestroy */
  program_ctx program_ctx;    /* the program's context at each of its calls and at the end */
  int program_mode;           /* the program's capture mode then (0: global, a thread's default) */
  void *ctx_after_end[RANKS]; /* the thread's context after the communicator's end */
  int mode_after_end[RANKS];  /* and its capture mode */
} world;

static world W;

static void config(void) {
  static symmpin_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.warmup = WARMUP;
  cfg.max_bytes = 1 << 20;
  cfg.capture_bytes = ARENA;
  cfg.planner = SYMMPIN_PLAN_SHARED;
  cfg.timeout_ms = 5000;
  cfg.stack_depth = 1;
  /* The tests below check launches and their order under the static choice; the choice by
   * measurement (which sends some calls to NCCL to time them) has its own test. */
  cfg.choose = SYMMPIN_CHOOSE_STATIC;
  cfg.allgather = cfg.reducescatter = true; /* the defaults */
  symmpin_config_set_for_tests(&cfg);
}

/* Every rank: sites 0xA (256 floats) and 0xB (512 floats) alternating on S0. */
static void world_init(void) {
  memset(&W, 0, sizeof W);
  uint64_t r[2];
  cr_assert_eq(getrandom(r, sizeof r, 0), (ssize_t)sizeof r);
  W.key = symmpin_comm_key_of_bytes(r, sizeof r); /* tests run in parallel: never share a board */
  W.ncalls = CALLS;
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < CALLS; i++)
      W.script[k][i] = (spec){.site = i % 2 ? 0xB : 0xA, .count = i % 2 ? 512 : 256, .stream = S0};
  config();
}

/* Every call of the default script made as collective coll instead (its sites and counts as they
 * are: the count is the all-gather's or reduce-scatter's per-rank chunk). */
static void script_coll(int coll) {
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < W.ncalls; i++) W.script[k][i].coll = coll;
}
/* The program's thread as it is when the rank calls NCCL (the rank's device is its number). */
static void *program_ctx_of(int rank) {
  switch (W.program_ctx) {
  case PROGRAM_NO_CONTEXT: return NULL;
  case PROGRAM_OTHER_DEVICE: return fake_ctx_own((rank + 1) % RANKS);
  case PROGRAM_PRIMARY:
  default: return fake_ctx_primary(rank);
  }
}

static void program_thread_set(int rank) {
  fake_ctx_set(program_ctx_of(rank));
  fake_set_capture_mode(W.program_mode);
}

static void note(outcome *o, int rank) {
  size_t n;
  const fake_op *ops = fake_ops(&n);
  o->offset = -1;
  size_t k = 0;
  o->launches = o->waits = o->records = o->off_device = 0;
  for (size_t i = 0; i < n; i++) {
    o->launches += ops[i].kind == FAKE_LAUNCH || ops[i].kind == FAKE_GROUP;
    o->waits += ops[i].kind == FAKE_WAIT;
    o->records += ops[i].kind == FAKE_RECORD;
    o->off_device += ops[i].device != rank || !ops[i].primary;
  }
  for (size_t i = 0; i < n && k + 1 < sizeof o->ops; i++) {
    o->ops[k++] = ops[i].kind == FAKE_LAUNCH ? 'L' : ops[i].kind == FAKE_GROUP ? 'G'
                  : ops[i].kind == FAKE_RECORD ? 'R' : 'W';
    if (ops[i].kind == FAKE_GROUP) o->group_calls = (int)ops[i].count;
    if (ops[i].kind == FAKE_LAUNCH) {
      o->offset = ops[i].offset;
      o->coll = ops[i].coll;
      o->slot_bytes = ops[i].slot_bytes;
      o->launch_stream = ops[i].stream;
    }
  }
  o->ops[k] = '\0';
  fake_ops_clear();
}

typedef struct call_arg {
  symmpin_comm *c;
  int rank;
  size_t i;
} call_arg;

/* Call i of this rank, as the preload makes it: under the communicator's lock, counted first. */
static void *make_call(void *arg) {
  call_arg *ca = arg;
  symmpin_comm *c = ca->c;
  const spec *s = &W.script[ca->rank][ca->i];
  static int buf[1];
  /* The all-gather carries op 0, as the wrapper passes it. */
  symmpin_coll_call a = {.send = buf,
                         .recv = buf,
                         .count = s->count,
                         .dtype = s->dtype ? s->dtype : SYMMPIN_FLOAT32,
                         .op = s->coll == SYMMPIN_COLL_ALLGATHER ? 0 : SYMMPIN_SUM,
                         .coll = s->coll,
                         .comm = c->handle,
                         .stream = s->stream};
  if (s->fail_launch) fake_fail_next_launch();
  pthread_mutex_lock(&c->lock);
  c->collectives++;
  symmpin_engine_call ec = {.call = &a, .site = s->site, .capturing = s->capturing,
                            .capture_id = s->capture_id, .group_depth = s->group ? 1 : 0,
                            .group_token = (uint64_t)s->group, .may_batch = s->group != 0,
                            .stream_ord = symmpin_comm_stream_ordinal(c, s->stream)};
  outcome *o = &W.out[ca->rank][ca->i];
  int rc = 0;
  symmpin_reason reason = SYMMPIN_REASON_NONE;
  fake_ops_clear();
  program_thread_set(ca->rank);
  o->taken = symmpin_engine_collective(c, &ec, &rc, &reason);
  if (!o->taken) symmpin_engine_nccl_done(c, &ec, 0); /* as the preload does after NCCL's call */
  o->rc = rc;
  o->reason = reason;
  /* The group's end after its last call, as the preload makes it before the real ncclGroupEnd,
   * then the end after the real one. */
  bool last = s->group && (ca->i + 1 == W.ncalls || W.script[ca->rank][ca->i + 1].group != s->group);
  if (last) {
    size_t n;
    fake_ops(&n);
    if (n < FAKE_MAX_OPS) {
      int frc = symmpin_engine_group_flush(c);
      if (frc) o->rc = frc;
      symmpin_engine_group_end(c, 0);
    }
  }
  note(o, ca->rank);
  o->ctx_after = fake_ctx_get();
  o->mode_after = fake_capture_mode();
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

static void *rank_main(void *arg) {
  int rank = (int)(intptr_t)arg;
  symmpin_comm *c = symmpin_comm_register((void *)(uintptr_t)(0xc0 + rank), W.key, rank, RANKS,
                                          rank, true);
  cr_assert_not_null(c);
  if (W.kernel_ms > 0) fake_set_elapsed(W.kernel_ms, W.other_ms);
  fake_set_elapsed_group(W.group_ms);
  for (size_t i = 0; i < W.ncalls; i++) {
    /* Lockstep, as the kernels keep real ranks (a redirected call completes when every rank has
     * made it): call i + 1 only once every peer has made call i. */
    for (int k = 0; k < RANKS; k++)
      while (atomic_load(&W.progress[k]) < (int)i) sched_yield();
    call_arg ca = {c, rank, i};
    if (W.script[rank][i].other_thread) {
      pthread_t t;
      cr_assert_eq(pthread_create(&t, NULL, make_call, &ca), 0);
      pthread_join(t, NULL);
    } else {
      make_call(&ca);
    }
    atomic_store(&W.progress[rank], (int)i + 1);
  }
  pthread_mutex_lock(&c->lock);
  program_thread_set(rank);
  if (W.abort_end)
    symmpin_engine_comm_abandon(c);
  else
    symmpin_engine_comm_release(c);
  W.ctx_after_end[rank] = fake_ctx_get();
  W.mode_after_end[rank] = fake_capture_mode();
  pthread_mutex_unlock(&c->lock);
  symmpin_comm_unregister(c);
  return NULL;
}

static void world_run(void) {
  pthread_t t[RANKS];
  for (int k = 0; k < RANKS; k++)
    cr_assert_eq(pthread_create(&t[k], NULL, rank_main, (void *)(intptr_t)k), 0);
  for (int k = 0; k < RANKS; k++) pthread_join(t[k], NULL);
}

/* The first call both ranks redirected (the plan's GO). */
static size_t first_taken(void) {
  for (size_t i = 0; i < W.ncalls; i++)
    if (W.out[0][i].taken && W.out[1][i].taken) return i;
  return W.ncalls;
}

/* One stream: every redirected call is its launch and the record of its slot's event (what a
 * call on another stream would wait for); never a wait. */
Test(engine, plain_run_redirects_after_warmup_on_the_call_stream_without_waits) {
  world_init();
  world_run();
  size_t go = first_taken();
  cr_assert_lt(go, 64, "redirected from call %zu", go + 1);
  for (size_t i = 0; i < go; i++)
    for (int k = 0; k < RANKS; k++) {
      cr_assert_not(W.out[k][i].taken);
      cr_assert_eq(W.out[k][i].reason, SYMMPIN_REASON_WARMUP, "call %zu rank %d", i + 1, k);
    }
  for (size_t i = go; i < W.ncalls; i++)
    for (int k = 0; k < RANKS; k++) {
      const outcome *o = &W.out[k][i];
      cr_assert(o->taken && o->rc == 0, "call %zu rank %d", i + 1, k);
      cr_assert_str_eq(o->ops, "LR", "call %zu rank %d: one stream, no wait: %s", i + 1, k,
                       o->ops);
      cr_assert_eq(o->launch_stream, S0);
      cr_assert_eq(o->offset, W.out[0][i].offset, "call %zu: the same slot on every rank", i + 1);
    }
}

/* After the warm-up rank 1 reaches some calls from sites nobody planned (data-dependent control
 * flow), with the shapes of planned sites: every rank redirects them into the same slot. Under
 * routing by site rank 1 sent them to NCCL while rank 0 ran the kernel. */
Test(engine, a_call_from_an_unplanned_site_goes_to_the_same_slot_on_every_rank) {
  world_init();
  for (size_t i = 120; i < 140; i++) W.script[1][i].site = 0xC000 + i;
  world_run();
  size_t go = first_taken();
  cr_assert_lt(go, 100);
  for (size_t i = 120; i < 140; i++) {
    cr_assert(W.out[0][i].taken && W.out[1][i].taken, "call %zu", i + 1);
    cr_assert_eq(W.out[1][i].rc, 0, "call %zu: no error", i + 1);
    cr_assert_eq(W.out[1][i].offset, W.out[0][i].offset, "call %zu", i + 1);
  }
  for (size_t i = 140; i < W.ncalls; i++)
    cr_assert(W.out[1][i].taken && W.out[1][i].rc == 0, "call %zu: still running", i + 1);
}

/* Rank 0 makes calls 150..159 on a side stream (ordered after its main stream by the program, as
 * torch's wait_stream does); rank 1 stays on its main stream. Rank 0's calls are still
 * redirected, into the same slot as rank 1's (the two shapes share one slot: one stream, never
 * in flight together). Only kernels on one slot are ordered: the first call on the side stream
 * waits for the event of that slot's latest kernel (on the main stream), later ones do not (same
 * stream); back on the main stream, the first call waits for the side stream's latest kernel on
 * the slot. The main stream as a whole never waits. */
Test(engine, a_call_on_another_stream_waits_only_for_the_latest_kernel_on_its_slot) {
  world_init();
  for (size_t i = 150; i < 160; i++) W.script[0][i].stream = S1;
  world_run();
  cr_assert_lt(first_taken(), 100);
  for (size_t i = 148; i < 164; i++) {
    const outcome *o = &W.out[0][i];
    cr_assert(o->taken && o->rc == 0, "call %zu", i + 1);
    const char *want = i == 150 || i == 160 ? "WLR" : "LR";
    cr_assert_str_eq(o->ops, want, "call %zu: %s, not %s", i + 1, o->ops, want);
    cr_assert_eq(o->launch_stream, i >= 150 && i < 160 ? S1 : S0);
    cr_assert_eq(o->offset, W.out[1][i].offset, "call %zu: the peer's slot", i + 1);
    cr_assert_str_eq(W.out[1][i].ops, "LR");
  }
}

/* Rank 0's call 150 is captured (on a stream of its own) while rank 1 makes it eagerly: rank 0
 * puts it in the capture arena, rank 1 in its shape's eager slot. The ranks routed one call to
 * two slots; the route check turns that into the error state on both ranks within a few calls:
 * every later call returns ncclRemoteError (6) and launches nothing. Never a silent result. */
static void captured_on_one_rank_only(int coll) {
  world_init();
  script_coll(coll);
  W.script[0][150].stream = SG;
  W.script[0][150].capturing = true;
  W.script[0][150].capture_id = 5;
  world_run();
  cr_assert_lt(first_taken(), 100);
  const outcome *r0 = &W.out[0][150];
  cr_assert(r0->taken && (r0->rc == 0 || r0->rc == 6), "rank 0 call 151: rc %d", r0->rc);
  cr_assert(W.out[1][150].taken);
  if (r0->rc == 0) cr_assert_neq(r0->offset, W.out[1][150].offset, "an arena slot, not the eager one");
  for (int k = 0; k < RANKS; k++) {
    size_t err = 0;
    for (size_t i = 150; i < W.ncalls && !err; i++)
      if (W.out[k][i].taken && W.out[k][i].rc == 6) err = i;
    cr_assert(err && err <= 160, "rank %d: an error by call 161 (first at %zu)", k, err + 1);
    for (size_t i = err; i < W.ncalls; i++) {
      cr_assert_eq(W.out[k][i].rc, 6, "rank %d call %zu: still the error", k, i + 1);
      cr_assert_eq(W.out[k][i].offset, -1, "rank %d call %zu: nothing launched", k, i + 1);
    }
  }
}
Test(engine, a_call_captured_on_one_rank_only_puts_both_ranks_in_error) {
  captured_on_one_rank_only(SYMMPIN_COLL_ALLREDUCE);
}
Test(engine, an_all_gather_captured_on_one_rank_only_puts_both_ranks_in_error) {
  captured_on_one_rank_only(SYMMPIN_COLL_ALLGATHER);
}
Test(engine, a_reduce_scatter_captured_on_one_rank_only_puts_both_ranks_in_error) {
  captured_on_one_rank_only(SYMMPIN_COLL_REDUCESCATTER);
}

/* A launch that fails on one rank: that rank returns ncclUnhandledCudaError (1) for that call at
 * once, and both ranks are in error from then on (rank 0 learns it through the board's alarm
 * within a few calls); neither launches anything after that. */
static void failed_launch_on_one_rank(int coll) {
  world_init();
  script_coll(coll);
  W.script[1][150].fail_launch = true;
  world_run();
  cr_assert_lt(first_taken(), 100);
  cr_assert(W.out[1][150].taken);
  cr_assert_eq(W.out[1][150].rc, 1, "ncclUnhandledCudaError, not %d", W.out[1][150].rc);
  for (size_t i = 151; i < W.ncalls; i++) {
    cr_assert_eq(W.out[1][i].rc, 6, "rank 1 call %zu", i + 1);
    cr_assert_eq(W.out[1][i].offset, -1, "rank 1 call %zu: nothing launched", i + 1);
  }
  size_t err = 0;
  for (size_t i = 150; i < W.ncalls && !err; i++)
    if (W.out[0][i].taken && W.out[0][i].rc == 6) err = i;
  cr_assert(err && err <= 160, "rank 0: an error by call 161 (first at %zu)", err + 1);
  for (size_t i = err; i < W.ncalls; i++)
    cr_assert_eq(W.out[0][i].offset, -1, "rank 0 call %zu: nothing launched", i + 1);
}
Test(engine, a_failed_launch_is_an_error_on_every_rank) {
  failed_launch_on_one_rank(SYMMPIN_COLL_ALLREDUCE);
}
Test(engine, a_failed_all_gather_launch_is_an_error_on_every_rank) {
  failed_launch_on_one_rank(SYMMPIN_COLL_ALLGATHER);
}
Test(engine, a_failed_reduce_scatter_launch_is_an_error_on_every_rank) {
  failed_launch_on_one_rank(SYMMPIN_COLL_REDUCESCATTER);
}

/* cudaStreamPerThread (0x2) is a different stream on every thread. Rank 0 makes its calls there;
 * calls 151..155 come from another thread of its process, on that thread's own per-thread stream.
 * They are redirected like every call (the peer redirects them), ordered after the main thread's
 * latest kernel on their slot by its event, which needs no handle to the other thread's stream;
 * and the main thread's next call on each slot waits for the other thread's kernel. */
Test(engine, another_threads_per_thread_stream_is_ordered_by_the_slots_event) {
  world_init();
  for (size_t i = 0; i < W.ncalls; i++) W.script[0][i].stream = (void *)0x2;
  for (size_t i = 150; i < 155; i++) W.script[0][i].other_thread = true;
  world_run();
  cr_assert_lt(first_taken(), 100);
  cr_assert_str_eq(W.out[0][149].ops, "LR", "on the main thread: no wait");
  for (size_t i = 150; i < 157; i++) {
    const outcome *o = &W.out[0][i];
    cr_assert(o->taken && o->rc == 0, "rank 0 call %zu: rc %d", i + 1, o->rc);
    cr_assert_eq(o->offset, W.out[1][i].offset, "rank 0 call %zu: the peer's slot", i + 1);
    /* The script makes each of 150..154 from a thread of its own (so each on a stream of its
     * own): each waits for the kernel before it on the (one shared) slot, and so does 155, back
     * on the main thread; 156 follows 155 on the same stream. */
    const char *want = i >= 150 && i <= 155 ? "WLR" : "LR";
    cr_assert_str_eq(o->ops, want, "rank 0 call %zu: %s, not %s", i + 1, o->ops, want);
  }
  for (size_t i = 150; i < W.ncalls; i++)
    cr_assert(W.out[0][i].rc == 0 && W.out[1][i].rc == 0, "call %zu: no error", i + 1);
}

/* Both ranks capture calls 150..169 into one graph (capture 77, on a stream the warm-up never
 * saw, as torch.cuda.graph does) and calls 170..179 into another (capture 78); eager calls go on
 * around them. Captured calls are redirected into the capture arena on both ranks, at the same
 * offsets, without events (nothing outside the graph may order it; its slots are its own): calls
 * of one graph on one stream share a slot (a new one when a larger call comes), the two graphs
 * share none, and no captured call uses an eager slot. */
Test(engine, captured_calls_use_the_capture_arena_alike_on_every_rank) {
  world_init();
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 150; i < 180; i++)
      W.script[k][i] = (spec){.site = 0xD0 + i % 2, .count = i % 2 ? 512 : 256, .stream = SG,
                              .capturing = true, .capture_id = i < 170 ? 77 : 78};
  world_run();
  cr_assert_lt(first_taken(), 100);
  int64_t eager[2] = {W.out[0][148].offset, W.out[0][149].offset};
  for (size_t i = 150; i < 180; i++)
    for (int k = 0; k < RANKS; k++) {
      const outcome *o = &W.out[k][i];
      cr_assert(o->taken && o->rc == 0, "rank %d call %zu: taken %d rc %d reason %d", k, i + 1,
                o->taken, o->rc, o->reason);
      cr_assert_str_eq(o->ops, "L", "rank %d call %zu: %s", k, i + 1, o->ops);
      cr_assert_eq(o->launch_stream, SG);
      cr_assert_eq(o->offset, W.out[0][i].offset, "call %zu: the same offset on every rank", i + 1);
      cr_assert(o->offset != eager[0] && o->offset != eager[1], "call %zu: an eager slot", i + 1);
    }
  /* graph 77: 256 floats, then 512 (larger: a new slot), and from then on that one */
  cr_assert_neq(W.out[0][150].offset, W.out[0][151].offset);
  for (size_t i = 152; i < 170; i++) cr_assert_eq(W.out[0][i].offset, W.out[0][151].offset);
  for (size_t i = 170; i < 180; i++)
    for (size_t j = 150; j < 170; j++)
      cr_assert_neq(W.out[0][i].offset, W.out[0][j].offset, "graphs 77 and 78 share a slot");
  for (size_t i = 180; i < W.ncalls; i++) {
    cr_assert_str_eq(W.out[0][i].ops, "LR", "eager call %zu", i + 1);
    cr_assert(W.out[0][i].offset == eager[0] || W.out[0][i].offset == eager[1]);
  }
}

/* 40 graphs of one call each (as 40 captured batch sizes): once the arena is full, captured calls
 * go to NCCL (reason `capture`) on every rank alike: no error, and the eager calls go on. */
Test(engine, a_full_capture_arena_sends_captured_calls_to_nccl_on_every_rank) {
  world_init();
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 110; i < 150; i++)
      W.script[k][i] = (spec){.site = 0xE0, .count = 512, .stream = SG, .capturing = true,
                              .capture_id = 1000 + i};
  world_run();
  cr_assert_lt(first_taken(), 100);
  size_t taken = 0, nccl = 0;
  for (size_t i = 110; i < 150; i++) {
    const outcome *a = &W.out[0][i], *b = &W.out[1][i];
    cr_assert_eq(a->taken, b->taken, "call %zu: routed alike", i + 1);
    cr_assert_eq(a->offset, b->offset);
    if (a->taken) {
      cr_assert_eq(nccl, 0, "call %zu: taken after the arena was full", i + 1);
      cr_assert(a->rc == 0 && b->rc == 0);
      taken++;
    } else {
      cr_assert(a->reason == SYMMPIN_REASON_CAPTURE && b->reason == SYMMPIN_REASON_CAPTURE);
      nccl++;
    }
  }
  cr_assert(taken > 0 && nccl > 0, "%zu captured calls taken, %zu to NCCL", taken, nccl);
  for (size_t i = 150; i < W.ncalls; i++)
    cr_assert(W.out[0][i].taken && W.out[0][i].rc == 0 && W.out[1][i].rc == 0, "call %zu", i + 1);
}

/* One rank, the calls of a single thread: NCCL's one-rank all-reduce is a copy at most, so the
 * engine stays out (reason `comm`) unless the tests' SYMMPIN_TEST_ONE_RANK asks it in (the GPU
 * suite on one GPU). */
static size_t one_rank_run(bool test_one_rank) {
  world_init();
  symmpin_config cfg = *symmpin_config_get();
  cfg.test_one_rank = test_one_rank;
  symmpin_config_set_for_tests(&cfg);
  symmpin_comm *c = symmpin_comm_register((void *)0xd0, W.key, 0, 1, 0, true);
  cr_assert_not_null(c);
  size_t taken = 0;
  for (size_t i = 0; i < 100; i++) {
    call_arg ca = {c, 0, i};
    make_call(&ca);
    const outcome *o = &W.out[0][i];
    if (o->taken) {
      cr_assert_eq(o->rc, 0);
      taken++;
    } else if (!test_one_rank) {
      cr_assert_eq(o->reason, SYMMPIN_REASON_COMM, "call %zu: reason %d", i + 1, o->reason);
    }
  }
  pthread_mutex_lock(&c->lock);
  symmpin_engine_comm_release(c);
  pthread_mutex_unlock(&c->lock);
  symmpin_comm_unregister(c);
  return taken;
}

Test(engine, a_one_rank_communicator_stays_on_nccl) {
  cr_assert_eq(one_rank_run(false), 0);
}

Test(engine, a_one_rank_communicator_is_redirected_when_the_tests_ask) {
  cr_assert_gt(one_rank_run(true), 50);
}

/* Every rank groups its calls in pairs (A then B, one ncclGroupStart/End each), from the start:
 * the planner gives A and B their own slots (in flight together), and after the warm-up each
 * group is one launch at its end (G with 2 calls), after which both slots' events are recorded;
 * nothing is launched at the calls themselves. */
Test(engine, a_group_is_one_launch_at_its_end) {
  world_init();
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < CALLS; i++) W.script[k][i].group = (int)(i / 2) + 1;
  world_run();
  size_t go = first_taken();
  cr_assert_lt(go, 100);
  for (size_t i = go + go % 2; i + 1 < W.ncalls; i += 2)
    for (int k = 0; k < RANKS; k++) {
      const outcome *a = &W.out[k][i], *b = &W.out[k][i + 1];
      cr_assert(a->taken && a->rc == 0 && b->taken && b->rc == 0, "rank %d calls %zu, %zu", k,
                i + 1, i + 2);
      cr_assert_str_eq(a->ops, "", "rank %d call %zu: held, not launched: %s", k, i + 1, a->ops);
      cr_assert_str_eq(b->ops, "GRR", "rank %d call %zu: the group's end: %s", k, i + 2, b->ops);
      cr_assert_eq(b->group_calls, 2);
    }
}

/* Groups of three calls A, A, B: the second A would use the first's slot in the same launch, so
 * the first launches alone when it comes (L, its event), and the second A and B launch together
 * at the group's end. Each slot sees its calls in call order. */
Test(engine, a_slot_used_twice_in_a_group_splits_the_launch) {
  world_init();
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < CALLS; i++) {
      bool b = i % 3 == 2;
      W.script[k][i] = (spec){.site = b ? 0xB : 0xA, .count = b ? 512 : 256, .stream = S0,
                              .group = (int)(i / 3) + 1};
    }
  W.ncalls = CALLS - CALLS % 3;
  world_run();
  size_t go = first_taken();
  cr_assert_lt(go, 100);
  for (size_t i = go + (3 - go % 3) % 3; i + 2 < W.ncalls; i += 3)
    for (int k = 0; k < RANKS; k++) {
      cr_assert_str_eq(W.out[k][i].ops, "", "rank %d call %zu", k, i + 1);
      cr_assert_str_eq(W.out[k][i + 1].ops, "LR", "rank %d call %zu: the first A alone: %s", k,
                       i + 2, W.out[k][i + 1].ops);
      cr_assert_str_eq(W.out[k][i + 2].ops, "GRR", "rank %d call %zu: %s", k, i + 3,
                       W.out[k][i + 2].ops);
      for (size_t j = i; j < i + 3; j++) cr_assert(W.out[k][j].taken && W.out[k][j].rc == 0);
    }
}

/* A group whose launch fails at its end: ncclGroupEnd reports ncclUnhandledCudaError on that rank,
 * and both ranks are in error within a few calls (the peer through the alarm). */
Test(engine, a_group_whose_launch_fails_puts_both_ranks_in_error) {
  world_init();
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < CALLS; i++) W.script[k][i].group = (int)(i / 2) + 1;
  W.script[1][151].fail_launch = true; /* the launch at the end of group 76 (calls 151, 152) */
  world_run();
  cr_assert_lt(first_taken(), 100);
  cr_assert_eq(W.out[1][151].rc, 1, "rank 1's group end: %d", W.out[1][151].rc);
  for (int k = 0; k < RANKS; k++) {
    size_t err = 0;
    for (size_t i = 151; i < W.ncalls && !err; i++)
      if (W.out[k][i].rc == 6 || W.out[k][i].rc == 1) err = i;
    cr_assert(err && err <= 162, "rank %d: an error by call 163 (first at %zu)", k, err + 1);
  }
}

/* Groups of 20 calls: shapes 0..19, then shapes 20..39, each set alternately on S0 and S1 (A on
 * S0, B on S0, A on S1, B on S1, ...): each group is launched in 16 + 4, and every call's slot last
 * ran on the other stream, so every launch waits once per call and records once per call. The
 * slots' order table grows (past 32 slots) in the middle of B's first launch: a wait or record
 * must never be lost to it (it once was: pointers into the table taken before it grew). */
Test(engine, every_slot_of_a_large_group_keeps_its_order_across_streams) {
  world_init();
  /* One slot per site: the shared planner may let two sites of a group share a slot when no one
   * record shows them together (the launch is then split there, which this test does not count). */
  symmpin_config cfg = *symmpin_config_get();
  cfg.planner = SYMMPIN_PLAN_DEDICATED;
  symmpin_config_set_for_tests(&cfg);
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < CALLS; i++) {
      size_t g = i / 20;
      uint64_t shape = (g % 2) * 20 + i % 20;
      W.script[k][i] = (spec){.site = 0x300 + shape, .count = 64 + shape,
                              .stream = (g / 2) % 2 ? S1 : S0, .group = (int)g + 1};
    }
  world_run();
  int checked = 0;
  for (size_t g0 = 40; g0 + 20 <= W.ncalls; g0 += 20) {
    bool all = true; /* this group and the last one of its shapes fully redirected */
    for (size_t i = g0 - 40; i < g0 + 20; i++)
      if (i < g0 - 20 || i >= g0)
        for (int k = 0; k < RANKS; k++) all = all && W.out[k][i].taken && W.out[k][i].rc == 0;
    if (!all) continue;
    for (int k = 0; k < RANKS; k++) {
      int launches = 0, waits = 0, records = 0;
      for (size_t i = g0; i < g0 + 20; i++) {
        launches += W.out[k][i].launches;
        waits += W.out[k][i].waits;
        records += W.out[k][i].records;
      }
      cr_assert_eq(launches, 2, "rank %d group at %zu: %d launches", k, g0 + 1, launches);
      cr_assert_eq(waits, 20, "rank %d group at %zu: %d waits", k, g0 + 1, waits);
      cr_assert_eq(records, 20, "rank %d group at %zu: %d records", k, g0 + 1, records);
    }
    checked++;
  }
  cr_assert_geq(checked, 4, "groups checked: %d", checked);
}

/* The choice by measurement (SYMMPIN_CHOOSE=measure) with fake event times: after the plan, each
 * pinned shape's odd calls of its first 32 go to NCCL as probes, the same calls on both ranks;
 * with the kernel timed slower than NCCL, a later plan sends both shapes back to NCCL on both
 * ranks at the same call, for good; with the kernel faster, nothing goes back. */
static void choice_run(float kernel_ms, float other_ms) {
  world_init();
  symmpin_config cfg = *symmpin_config_get();
  cfg.choose = SYMMPIN_CHOOSE_MEASURE;
  symmpin_config_set_for_tests(&cfg);
  W.kernel_ms = kernel_ms;
  W.other_ms = other_ms;
  world_run();
}

static size_t choice_check_alike_and_probes(void) {
  size_t go = first_taken();
  cr_assert_lt(go, 64);
  for (size_t i = 0; i < W.ncalls; i++) {
    cr_assert_eq(W.out[0][i].taken, W.out[1][i].taken, "call %zu routed apart", i + 1);
    cr_assert_eq(W.out[0][i].reason, W.out[1][i].reason, "call %zu: reasons %d / %d", i + 1,
                 W.out[0][i].reason, W.out[1][i].reason);
  }
  /* From the GO on, per shape: calls 1, 3, 5, ... of its first 32 are probes, the rest taken
   * (until a demotion). */
  size_t seen[2] = {0, 0}, probes = 0;
  for (size_t i = go; i < W.ncalls; i++) {
    const outcome *o = &W.out[0][i];
    if (o->reason == SYMMPIN_REASON_MEASURED) break;
    size_t j = seen[W.script[0][i].count == 512]++;
    bool probe = j < 2 * SYMMPIN_CHOICE_SAMPLES && (j & 1);
    cr_assert_eq(o->reason, probe ? SYMMPIN_REASON_PROBE : SYMMPIN_REASON_NONE,
                 "call %zu (shape call %zu): reason %d", i + 1, j, o->reason);
    cr_assert_eq(o->taken, !probe);
    probes += probe;
  }
  cr_assert_eq(probes, 2 * SYMMPIN_CHOICE_SAMPLES, "16 probes per shape");
  return go;
}

Test(engine, shapes_measured_slower_go_back_to_nccl_on_every_rank) {
  choice_run(0.020f, 0.005f); /* the kernel slower */
  size_t go = choice_check_alike_and_probes();
  size_t back = W.ncalls;
  for (size_t i = go; i < W.ncalls && back == W.ncalls; i++)
    if (W.out[0][i].reason == SYMMPIN_REASON_MEASURED) back = i;
  cr_assert_lt(back, W.ncalls, "a plan sent the shapes back to NCCL");
  for (size_t i = back; i < W.ncalls; i++)
    for (int k = 0; k < RANKS; k++) {
      cr_assert_not(W.out[k][i].taken, "call %zu rank %d after the demotion", i + 1, k);
      cr_assert_eq(W.out[k][i].reason, SYMMPIN_REASON_MEASURED);
    }
}

Test(engine, shapes_measured_faster_stay_on_symmpin) {
  choice_run(0.002f, 0.010f); /* the kernel faster */
  size_t go = choice_check_alike_and_probes();
  size_t last = W.ncalls - 1;
  for (size_t i = go; i < W.ncalls; i++)
    cr_assert_neq(W.out[0][i].reason, SYMMPIN_REASON_MEASURED, "call %zu", i + 1);
  cr_assert(W.out[0][last].taken && W.out[1][last].taken);
}

/* ---- groups and the choice by measurement ---- */

/* Every rank, in cycles of four calls: A and B (256 and 512 floats) in one group, then A and B
 * eagerly. The fake events give a group launch group_ms, a single launch kernel_ms and NCCL's
 * calls (which the fakes do not run) other_ms (engine_fakes.h: a FAKE of the CUDA events). */
static void groups_script(void) {
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < CALLS; i++) {
      bool b = i % 2;
      W.script[k][i] = (spec){.site = b ? 0xB : 0xA,
                              .count = b ? 512 : 256,
                              .stream = S0,
                              .group = i % 4 < 2 ? (int)(i / 4) + 1 : 0};
    }
}

static void groups_run(float kernel_ms, float group_ms, float other_ms, int choose,
                       uint64_t group_max_bytes) {
  world_init();
  symmpin_config cfg = *symmpin_config_get();
  cfg.choose = choose;
  cfg.group_max_bytes = group_max_bytes;
  symmpin_config_set_for_tests(&cfg);
  groups_script();
  W.kernel_ms = kernel_ms;
  W.group_ms = group_ms;
  W.other_ms = other_ms;
  world_run();
}

/* Both ranks routed every call alike (NCCL or symmpin, for the same reason). */
static void assert_routes_alike(void) {
  for (size_t i = 0; i < W.ncalls; i++) {
    cr_assert_eq(W.out[0][i].taken, W.out[1][i].taken, "call %zu routed apart", i + 1);
    cr_assert_eq(W.out[0][i].reason, W.out[1][i].reason, "call %zu: reasons %d / %d", i + 1,
                 W.out[0][i].reason, W.out[1][i].reason);
    cr_assert(!W.out[0][i].taken || W.out[0][i].rc == 0, "call %zu: rc %d", i + 1, W.out[0][i].rc);
  }
}

/* The first call from `from` on (rank 0; the ranks are alike) of the given kind (grouped or not)
 * whose reason is `r`; W.ncalls if none. */
static size_t first_with(size_t from, bool grouped, symmpin_reason r) {
  for (size_t i = from; i < W.ncalls; i++)
    if ((W.script[0][i].group != 0) == grouped && W.out[0][i].reason == r) return i;
  return W.ncalls;
}

/* A group kernel slower than NCCL's group, single kernels faster than NCCL's calls: after the
 * plan, whole groups alternate between symmpin and NCCL (both calls of a group are probes or
 * neither, the same groups on both ranks: every other group); then a plan sends the
 * grouped calls of A and B back to NCCL, on both ranks at the same call and for good (reason
 * group_measured), while their eager calls stay on symmpin (never `measured`). Before, grouped
 * calls were never timed: they stayed on symmpin's slower group kernel. */
Test(engine, grouped_calls_measured_slower_go_back_to_nccl_and_eager_ones_stay) {
  groups_run(0.002f, 0.030f, 0.010f, SYMMPIN_CHOOSE_MEASURE, 0);
  assert_routes_alike();
  size_t go = first_taken();
  cr_assert_lt(go, 64, "redirected from call %zu", go + 1);
  size_t back = first_with(go, true, SYMMPIN_REASON_GROUP_MEASURED);
  cr_assert_lt(back, W.ncalls - 40, "the grouped calls went back to NCCL (at call %zu)", back + 1);
  cr_assert_eq(back % 4, 0, "at a group's first call: %zu", back + 1);
  size_t probe_groups = 0, symmpin_groups = 0;
  for (size_t i = go + (4 - go % 4) % 4; i < back; i += 4) {
    const outcome *a = &W.out[0][i], *b = &W.out[0][i + 1];
    cr_assert_eq(a->reason, b->reason, "group at %zu probed apart: %d / %d", i + 1, a->reason,
                 b->reason);
    cr_assert(a->reason == SYMMPIN_REASON_PROBE || a->reason == SYMMPIN_REASON_NONE,
              "group at %zu: reason %d", i + 1, a->reason);
    if (a->reason == SYMMPIN_REASON_PROBE)
      probe_groups++;
    else
      symmpin_groups++;
  }
  cr_assert(probe_groups >= SYMMPIN_CHOICE_MIN && probe_groups <= SYMMPIN_CHOICE_SAMPLES,
            "probe groups before the verdict: %zu", probe_groups);
  cr_assert_geq(symmpin_groups, SYMMPIN_CHOICE_MIN);
  for (size_t i = back; i < W.ncalls; i++) {
    const outcome *o = &W.out[0][i];
    if (W.script[0][i].group) {
      cr_assert_not(o->taken, "grouped call %zu after the demotion", i + 1);
      cr_assert_eq(o->reason, SYMMPIN_REASON_GROUP_MEASURED, "grouped call %zu", i + 1);
    } else {
      cr_assert(o->taken || o->reason == SYMMPIN_REASON_PROBE, "eager call %zu: reason %d", i + 1,
                o->reason);
    }
  }
  cr_assert_eq(first_with(0, false, SYMMPIN_REASON_MEASURED), W.ncalls, "an eager call went back");
  cr_assert(W.out[0][W.ncalls - 1].taken && W.out[1][W.ncalls - 1].taken, "eager calls stay");
}

/* The other way round: single kernels slower than NCCL, the group kernel faster. The eager calls
 * of A and B go back to NCCL (reason measured; each shape at its own plan, on both ranks at the
 * same call); their grouped calls stay on symmpin (the sites stay pinned for them). */
Test(engine, eager_calls_measured_slower_go_back_to_nccl_and_grouped_ones_stay) {
  groups_run(0.030f, 0.002f, 0.010f, SYMMPIN_CHOOSE_MEASURE, 0);
  assert_routes_alike();
  size_t go = first_taken();
  cr_assert_lt(go, 64);
  size_t back = first_with(go, false, SYMMPIN_REASON_MEASURED);
  cr_assert_lt(back, W.ncalls - 40, "the eager calls went back to NCCL (at call %zu)", back + 1);
  bool gone[2] = {false, false}; /* A's, B's eager calls went back */
  for (size_t i = back; i < W.ncalls; i++) {
    const outcome *o = &W.out[0][i];
    bool b = W.script[0][i].count == 512;
    if (W.script[0][i].group) {
      cr_assert(o->taken || o->reason == SYMMPIN_REASON_PROBE, "grouped call %zu: reason %d", i + 1,
                o->reason);
    } else if (gone[b]) {
      cr_assert_eq(o->reason, SYMMPIN_REASON_MEASURED, "eager call %zu after its demotion", i + 1);
    } else {
      gone[b] = o->reason == SYMMPIN_REASON_MEASURED;
    }
  }
  cr_assert(gone[0] && gone[1], "both shapes' eager calls went back");
  cr_assert_eq(first_with(0, true, SYMMPIN_REASON_GROUP_MEASURED), W.ncalls);
  cr_assert(W.out[0][W.ncalls - 4].taken && W.out[1][W.ncalls - 3].taken, "grouped calls stay");
}

/* SYMMPIN_GROUP_MAX_BYTES = 1 KiB (the static choice alone): B (2 KiB) in a group never goes to
 * symmpin, on either rank (reason group); A in the group and B made eagerly still do. Before,
 * every grouped call of a pinned shape was redirected. */
Test(engine, grouped_calls_above_the_group_limit_stay_on_nccl) {
  groups_run(0, 0, 0, SYMMPIN_CHOOSE_STATIC, 1024);
  assert_routes_alike();
  size_t go = first_taken();
  cr_assert_lt(go, 64);
  for (size_t i = 0; i < W.ncalls; i++) {
    const spec *sp = &W.script[0][i];
    const outcome *o = &W.out[0][i];
    if (sp->group && sp->count == 512) {
      cr_assert_not(o->taken, "grouped B at call %zu redirected", i + 1);
      if (i > go) cr_assert_eq(o->reason, SYMMPIN_REASON_GROUP, "call %zu: %d", i + 1, o->reason);
    } else if (i > go + 4) {
      cr_assert(o->taken, "call %zu (%s, %zu floats): reason %d", i + 1,
                sp->group ? "grouped" : "eager", sp->count, o->reason);
    }
  }
}

/* Rank 0 groups A and B, rank 1 makes the same calls eagerly: being in a group is then no fact
 * the ranks share, so it changes nothing (the plan sees the ranks group differently): B's grouped
 * calls on rank 0 are redirected like rank 1's eager ones despite the 1 KiB group limit, and no
 * call is routed apart (which would be the error state). */
Test(engine, ranks_that_group_differently_route_grouped_calls_as_eager_ones) {
  world_init();
  symmpin_config cfg = *symmpin_config_get();
  cfg.choose = SYMMPIN_CHOOSE_MEASURE;
  cfg.group_max_bytes = 1024;
  symmpin_config_set_for_tests(&cfg);
  groups_script();
  for (size_t i = 0; i < CALLS; i++) W.script[1][i].group = 0;
  world_run();
  assert_routes_alike();
  size_t go = first_taken();
  cr_assert_lt(go, 64);
  for (size_t i = go; i < W.ncalls; i++) {
    cr_assert_neq(W.out[0][i].reason, SYMMPIN_REASON_GROUP, "call %zu", i + 1);
    cr_assert_neq(W.out[0][i].rc, 6, "call %zu in the error state", i + 1);
  }
  cr_assert(W.out[0][W.ncalls - 3].taken, "rank 0's last grouped B");
}

/* The data-parallel case (tests/apps/dp_groups.cu, scaled): every step, one group of 12 gradients
 * of different sizes, the largest first, the two largest above the group limit (256 KiB here:
 * 98304 and 153600 floats). symmpin's part of the group (10 calls, one launch) plus NCCL's part
 * timed slower than NCCL's whole group: the groups are probed whole (the first call, which
 * NCCL takes anyway, decides), and then every grouped call goes to NCCL on both ranks at the same
 * call, for good (group_measured, and group for the two largest). */
Test(engine, a_group_of_twelve_gradients_measured_slower_goes_back_whole) {
  static const size_t counts[12] = {153600, 98304, 49152, 24576, 12288, 6144,
                                    3072,   1536,  768,   384,   192,   96};
  world_init();
  symmpin_config cfg = *symmpin_config_get();
  cfg.choose = SYMMPIN_CHOOSE_MEASURE;
  cfg.group_max_bytes = 256u << 10;
  symmpin_config_set_for_tests(&cfg);
  W.ncalls = 60 * 12;
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < W.ncalls; i++)
      W.script[k][i] = (spec){.site = 0x500 + i % 12,
                              .count = counts[i % 12],
                              .stream = S1,
                              .group = (int)(i / 12) + 1};
  W.kernel_ms = W.group_ms = 0.040f;
  W.other_ms = 0.020f;
  world_run();
  assert_routes_alike();
  size_t go = first_taken();
  cr_assert_lt(go, 64, "redirected from call %zu", go + 1);
  size_t back = first_with(go, true, SYMMPIN_REASON_GROUP_MEASURED);
  cr_assert_lt(back, W.ncalls - 12 * 5, "the groups went back (at call %zu)", back + 1);
  size_t probe_groups = 0;
  for (size_t g = go / 12 + 1; g < back / 12; g++) {
    bool probe = W.out[0][12 * g + 2].reason == SYMMPIN_REASON_PROBE;
    probe_groups += probe;
    for (size_t i = 12 * g; i < 12 * g + 12; i++) {
      symmpin_reason want = i % 12 < 2 ? SYMMPIN_REASON_GROUP
                            : probe    ? SYMMPIN_REASON_PROBE
                                       : SYMMPIN_REASON_NONE;
      cr_assert_eq(W.out[0][i].reason, want, "group %zu call %zu: %d", g + 1, i + 1,
                   W.out[0][i].reason);
    }
  }
  /* The verdict needs 8 samples of each path on every rank: it may come before all 16 probes. */
  cr_assert(probe_groups >= SYMMPIN_CHOICE_MIN && probe_groups <= SYMMPIN_CHOICE_SAMPLES,
            "probe groups before the verdict: %zu", probe_groups);
  for (size_t i = (back / 12 + 1) * 12; i < W.ncalls; i++) {
    cr_assert_not(W.out[0][i].taken, "call %zu after the groups went back", i + 1);
    cr_assert_eq(W.out[0][i].reason,
                 i % 12 < 2 ? SYMMPIN_REASON_GROUP : SYMMPIN_REASON_GROUP_MEASURED, "call %zu",
                 i + 1);
  }
}

/* ---- the program's thread: its context and capture mode ---- */

/* Every call of every rank, and each rank's end, left the program's thread as it was: its
 * context, its capture mode; every launch, event record and stream wait was enqueued with the
 * communicator's device's primary context current. */
static void assert_program_thread_kept(void) {
  for (size_t i = 0; i < W.ncalls; i++)
    for (int k = 0; k < RANKS; k++) {
      const outcome *o = &W.out[k][i];
      cr_assert_eq(o->ctx_after, program_ctx_of(k), "call %zu rank %d: the context was changed",
                   i + 1, k);
      cr_assert_eq(o->mode_after, W.program_mode, "call %zu rank %d: capture mode %d, not %d",
                   i + 1, k, o->mode_after, W.program_mode);
      cr_assert_eq(o->off_device, 0, "call %zu rank %d: %d op(s) off the communicator's device",
                   i + 1, k, o->off_device);
    }
  for (int k = 0; k < RANKS; k++) {
    cr_assert_eq(W.ctx_after_end[k], program_ctx_of(k), "rank %d: the context changed at the end",
                 k);
    cr_assert_eq(W.mode_after_end[k], W.program_mode,
                 "rank %d: the capture mode changed at the end", k);
  }
}

/* The driver keeps no last error (driver/cu.h): what symmpin's calls could leave to the program is
 * the thread's state. The program has a context of its own on another device than the
 * communicator's current, and a capture mode of its own, whenever it calls ncclAllReduce and when
 * it destroys the communicator: both are still there afterwards, on every call, also with the
 * timing of the choice by measurement on. symmpin's work went to the communicator's device's
 * primary context (retained once per process, as the runtime does), the kernels' error record
 * (host memory) too: never to the program's context, which the program may destroy. (Before the
 * driver, this test was that a CUDA runtime error the program had pending outlived every call.) */
Test(engine, the_programs_context_and_capture_mode_outlive_every_call) {
  world_init();
  symmpin_config cfg = *symmpin_config_get();
  cfg.choose = SYMMPIN_CHOOSE_MEASURE;
  symmpin_config_set_for_tests(&cfg);
  W.program_ctx = PROGRAM_OTHER_DEVICE;
  W.program_mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  world_run();
  cr_assert_lt(first_taken(), 64, "some calls were redirected");
  assert_program_thread_kept();
  for (int k = 0; k < RANKS; k++)
    cr_expect_eq(fake_primary_retains(k), 1, "device %d's primary context: retained %d times", k,
                 fake_primary_retains(k));
  cr_expect_eq(fake_host_allocs_outside_primary(), 0,
               "host memory was allocated in the program's own context");
}

/* A thread that never made a CUDA call has no context, and the driver makes none implicitly (the
 * runtime did): every call of such a thread is redirected all the same, on the communicator's
 * device, and the thread is left without a context after every call and at the end. */
Test(engine, a_thread_without_a_context_is_redirected_and_left_without_one) {
  world_init();
  W.program_ctx = PROGRAM_NO_CONTEXT;
  world_run();
  size_t go = first_taken();
  cr_assert_lt(go, 64, "redirected from call %zu", go + 1);
  for (size_t i = go; i < W.ncalls; i++)
    for (int k = 0; k < RANKS; k++)
      cr_assert(W.out[k][i].taken && W.out[k][i].rc == 0 && !strcmp(W.out[k][i].ops, "LR"),
                "call %zu rank %d: taken %d rc %d ops %s", i + 1, k, W.out[k][i].taken,
                W.out[k][i].rc, W.out[k][i].ops);
  assert_program_thread_kept();
}

/* A launch that fails (cuLaunchKernelEx returns its error; the driver keeps none for the program to
 * read later) fails that call, and leaves the thread as the program had it, on that call as on
 * every other. (Before the driver: the runtime's launch error left on the thread was cleared.) */
Test(engine, a_failed_launch_leaves_the_programs_thread_as_it_was) {
  world_init();
  W.program_ctx = PROGRAM_OTHER_DEVICE;
  W.program_mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  W.script[0][200].fail_launch = true;
  world_run();
  cr_assert(W.out[0][200].taken && W.out[0][200].rc != 0, "the launch failed");
  assert_program_thread_kept();
}

/* ---- the end of a communicator: its pool outlives it until its kernels are done ---- */

/* Both ranks destroy the communicator while their last kernels still run (their events have not
 * completed): nothing waits, and nothing is freed under the kernels; once the events complete,
 * the next drain frees both pools, and both error records go back for reuse (the registry
 * entries are gone too). */
Test(engine, a_destroyed_communicators_pool_waits_for_its_kernels_without_waiting) {
  world_init();
  W.ncalls = 100;
  fake_set_events_pending(1);
  world_run(); /* ends with release and unregister on every rank */
  cr_assert_lt(first_taken(), 100, "some calls were redirected");
  cr_expect_eq(fake_pools_live(), RANKS, "a pool was freed while its kernels ran");
  cr_expect_eq(symmpin_keep_pending(), RANKS);
  symmpin_keep_drain();
  cr_expect_eq(fake_pools_live(), RANKS, "freed at a drain before the kernels were done");
  cr_expect_eq(symmpin_errrec_free_count(), 0,
               "an error record was put back for reuse while its kernels could still write it");
  fake_set_events_pending(0);
  symmpin_keep_drain();
  cr_expect_eq(fake_pools_live(), 0, "the pools outlived their kernels");
  cr_expect_eq(symmpin_keep_pending(), 0);
  cr_expect_eq(symmpin_errrec_free_count(), RANKS, "the error records are reusable");
}

/* Calls captured into graphs: the graphs hold the pools after the communicator is gone (a graph
 * may still be replayed), until CUDA destroys them. */
Test(engine, captured_graphs_hold_the_pool_until_they_are_gone) {
  world_init();
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 150; i < 160; i++)
      W.script[k][i] = (spec){.site = 0xD0, .count = 256, .stream = SG, .capturing = true,
                              .capture_id = 77};
  world_run();
  cr_assert(W.out[0][150].taken && W.out[1][150].taken, "the captured calls were redirected");
  cr_expect_eq(symmpin_keep_pending(), RANKS);
  symmpin_keep_drain();
  cr_expect_eq(fake_pools_live(), RANKS, "a pool was freed under a live graph");
  cr_expect_eq(symmpin_errrec_free_count(), 0, "an error record was reused under a live graph");
  cr_expect_eq(fake_destroy_graphs(), RANKS, "one graph reference per rank (per capture)");
  symmpin_keep_drain();
  cr_expect_eq(fake_pools_live(), 0);
  cr_expect_eq(symmpin_keep_pending(), 0);
}

/* An abort while kernels run: the same hand-over, never a wait, and nothing kept for ever (before,
 * an aborted communicator's pool and error record stayed until the process exited). */
Test(engine, an_aborted_communicators_pool_is_freed_once_its_kernels_gave_up) {
  world_init();
  W.ncalls = 100;
  W.abort_end = true;
  fake_set_events_pending(1);
  world_run();
  cr_assert_lt(first_taken(), 100);
  cr_expect_eq(fake_pools_live(), RANKS, "a pool was freed while its kernels were giving up");
  cr_expect_eq(symmpin_errrec_free_count(), 0,
               "an error record was put back for reuse while its kernels could still write it");
  fake_set_events_pending(0);
  symmpin_keep_drain();
  cr_expect_eq(fake_pools_live(), 0, "an aborted communicator's pool is kept");
  cr_expect_eq(symmpin_errrec_free_count(), RANKS, "an aborted communicator's record is kept");
}

/* ---- the collectives (common/types.h) ---- */

/* A step of an all-gather, an all-reduce and a reduce-scatter of one count: each is pinned as its
 * own shape, redirected on every rank alike with its collective, in a slot of the size the
 * kernels give it (copy-class and LL-class slots never shared by classes apart). */
Test(engine, all_gathers_and_reduce_scatters_are_redirected_in_slots_of_their_own) {
  world_init();
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < CALLS; i++) {
      int coll = (int)(i % 3); /* 0, 1, 2: all-reduce, all-gather, reduce-scatter */
      W.script[k][i] =
          (spec){.site = 0xA0 + (uint64_t)coll, .count = 4096, .stream = S0, .coll = coll};
    }
  world_run();
  size_t go = first_taken();
  cr_assert_lt(go, 64, "redirected from call %zu", go + 1);
  int64_t off[3] = {-1, -1, -1};
  for (size_t i = go; i < W.ncalls; i++) {
    int coll = (int)(i % 3);
    for (int k = 0; k < RANKS; k++) {
      const outcome *o = &W.out[k][i];
      cr_assert(o->taken && o->rc == 0, "call %zu rank %d (%s): reason %s", i + 1, k,
                symmpin_coll_name(coll), symmpin_reason_name(o->reason));
      cr_assert_eq(o->coll, coll, "call %zu: launched as %s", i + 1, symmpin_coll_name(o->coll));
      cr_assert_geq(o->slot_bytes, symmpin_kernel_slot_bytes(coll, 4096, SYMMPIN_FLOAT32, RANKS,
                                                             SYMMPIN_INPUT_STAGED));
      cr_assert_eq(o->offset, W.out[0][i].offset, "call %zu: the same slot on every rank", i + 1);
    }
    if (off[coll] < 0) off[coll] = W.out[0][i].offset;
    cr_assert_eq(W.out[0][i].offset, off[coll], "a shape keeps its slot");
  }
}

/* SYMMPIN_ALLGATHER=0 on every rank: the all-gathers stay on NCCL (reason off), the all-reduces
 * and reduce-scatters are redirected as before. */
Test(engine, symmpin_allgather_0_keeps_all_gathers_on_nccl) {
  world_init();
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < CALLS; i++) {
      int coll = (int)(i % 3);
      W.script[k][i] =
          (spec){.site = 0xA0 + (uint64_t)coll, .count = 4096, .stream = S0, .coll = coll};
    }
  static symmpin_config cfg;
  cfg = *symmpin_config_get();
  cfg.allgather = false;
  cfg.reducescatter = true;
  symmpin_config_set_for_tests(&cfg);
  world_run();
  size_t go = first_taken();
  cr_assert_lt(go, 64);
  for (size_t i = go + 3; i < W.ncalls; i++)
    for (int k = 0; k < RANKS; k++) {
      const outcome *o = &W.out[k][i];
      if (i % 3 == SYMMPIN_COLL_ALLGATHER)
        cr_assert(!o->taken && o->reason == SYMMPIN_REASON_OFF, "call %zu rank %d: %s", i + 1, k,
                  symmpin_reason_name(o->reason));
      else
        cr_assert(o->taken, "call %zu rank %d", i + 1, k);
    }
}

/* Ranks whose all-gathers differ in count (not a legal NCCL program: NCCL would fail or hang
 * them): symmpin pins none of those calls on any rank (their records differ), so it adds no
 * wait of its own; the all-reduces between them are still redirected alike. */
Test(engine, all_gathers_whose_counts_differ_between_ranks_stay_on_nccl) {
  world_init();
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < CALLS; i++) {
      bool ag = i % 2 == 1;
      W.script[k][i] = (spec){.site = ag ? 0xB1 : 0xA1,
                              .count = ag ? 1000 + (size_t)k : 256,
                              .stream = S0,
                              .coll = ag ? SYMMPIN_COLL_ALLGATHER : 0};
    }
  world_run();
  size_t go = first_taken();
  cr_assert_lt(go, 64, "the all-reduces are redirected from call %zu", go + 1);
  for (size_t i = 0; i < W.ncalls; i++)
    for (int k = 0; k < RANKS; k++) {
      if (i % 2 == 1)
        cr_assert_not(W.out[k][i].taken, "all-gather call %zu of rank %d taken", i + 1, k);
      else if (i >= go)
        cr_assert(W.out[k][i].taken, "all-reduce call %zu of rank %d", i + 1, k);
    }
}

/* Ranks whose reduce-scatters differ in datatype (rank 1 float16, rank 0 float32, one count: not
 * a legal NCCL program either): no rank pins them (their records differ), so each stays on NCCL
 * on every rank with the same reason; the all-reduces between them are redirected alike. */
Test(engine, reduce_scatters_whose_datatypes_differ_between_ranks_stay_on_nccl) {
  world_init();
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < CALLS; i++) {
      bool rs = i % 2 == 1;
      W.script[k][i] = (spec){.site = rs ? 0xB2 : 0xA2,
                              .count = rs ? 1024 : 256,
                              .stream = S0,
                              .coll = rs ? SYMMPIN_COLL_REDUCESCATTER : 0,
                              .dtype = rs && k == 1 ? SYMMPIN_FLOAT16 : SYMMPIN_FLOAT32};
    }
  world_run();
  size_t go = first_taken();
  cr_assert_lt(go, 64, "the all-reduces are redirected from call %zu", go + 1);
  for (size_t i = 0; i < W.ncalls; i++)
    for (int k = 0; k < RANKS; k++) {
      const outcome *o = &W.out[k][i];
      if (i % 2 == 0) {
        if (i >= go) cr_assert(o->taken, "all-reduce call %zu of rank %d", i + 1, k);
        continue;
      }
      cr_assert_not(o->taken, "reduce-scatter call %zu of rank %d taken", i + 1, k);
      cr_assert_eq(o->launches, 0, "reduce-scatter call %zu of rank %d launched", i + 1, k);
      cr_assert_eq(o->reason, W.out[0][i].reason, "call %zu: rank %d's reason %s, rank 0's %s",
                   i + 1, k, symmpin_reason_name(o->reason),
                   symmpin_reason_name(W.out[0][i].reason));
    }
}
