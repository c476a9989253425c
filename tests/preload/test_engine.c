/* The engine's decisions on the CPU: preload/engine.c as built into libsymmpin, with the
 * agreement on real boards and threads as ranks, and FAKES for what lies below it (the CUDA
 * runtime's events and streams, symmem's pool, the kernels' launch: tests/preload/engine_fakes.h).
 * What a fake cannot show (that the kernels and the pool work on GPUs) the GPU suite shows; this
 * shows which calls the engine launches, on which stream and slot, and how it orders them. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/commkey.h"
#include "preload/comm.h"
#include "preload/config.h"
#include "preload/engine.h"
#include "engine_fakes.h"

#define RANKS 2
#define CALLS 200
#define WARMUP 16

#define S0 ((void *)0x100)   /* every rank's main stream */
#define S1 ((void *)0x200)   /* a side stream */

/* One call of one rank's script. */
typedef struct spec {
  uint64_t site;
  size_t count;
  void *stream;
  bool capturing;
  bool fail_launch; /* the kernel launch of this call fails on this rank */
  bool other_thread; /* made from another thread of the rank's process */
} spec;

/* What the engine did with it. */
typedef struct outcome {
  bool taken;
  int rc;
  symmpin_reason reason;
  char ops[16];          /* L launch, R event record, W stream wait, in order */
  int64_t offset;        /* the launch's slot offset, -1 if none */
  void *launch_stream;
} outcome;

typedef struct world {
  symmpin_comm_key key;
  spec script[RANKS][CALLS];
  size_t ncalls;
  outcome out[RANKS][CALLS];
  _Atomic int progress[RANKS];
} world;

static world W;

static void config(void) {
  static symmpin_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.warmup = WARMUP;
  cfg.max_bytes = 1 << 20;
  cfg.planner = SYMMPIN_PLAN_SHARED;
  cfg.timeout_ms = 5000;
  cfg.stack_depth = 1;
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

static void note(outcome *o) {
  size_t n;
  const fake_op *ops = fake_ops(&n);
  o->offset = -1;
  size_t k = 0;
  for (size_t i = 0; i < n && k + 1 < sizeof o->ops; i++) {
    o->ops[k++] = ops[i].kind == FAKE_LAUNCH ? 'L' : ops[i].kind == FAKE_RECORD ? 'R' : 'W';
    if (ops[i].kind == FAKE_LAUNCH) {
      o->offset = ops[i].offset;
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
  symmpin_allreduce_call a = {.send = buf, .recv = buf, .count = s->count, .dtype = SYMMPIN_FLOAT32,
                              .op = SYMMPIN_SUM, .comm = c->handle, .stream = s->stream};
  if (s->fail_launch) fake_fail_next_launch();
  pthread_mutex_lock(&c->lock);
  c->allreduces++;
  symmpin_engine_call ec = {.call = &a, .site = s->site, .capturing = s->capturing,
                            .stream_ord = symmpin_comm_stream_ordinal(c, s->stream)};
  outcome *o = &W.out[ca->rank][ca->i];
  int rc = 0;
  symmpin_reason reason = SYMMPIN_REASON_NONE;
  fake_ops_clear();
  o->taken = symmpin_engine_allreduce(c, &ec, &rc, &reason);
  o->rc = rc;
  o->reason = reason;
  note(o);
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

static void *rank_main(void *arg) {
  int rank = (int)(intptr_t)arg;
  symmpin_comm *c = symmpin_comm_register((void *)(uintptr_t)(0xc0 + rank), W.key, rank, RANKS,
                                          rank, true);
  cr_assert_not_null(c);
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
  symmpin_engine_comm_release(c);
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

Test(engine, plain_run_redirects_after_warmup_on_the_call_stream_without_events) {
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
      cr_assert_str_eq(o->ops, "L", "call %zu rank %d: on its home stream, no event: %s", i + 1,
                       k, o->ops);
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
 * redirected, spliced into the main stream's order: record on S0, S1 waits, launch on S1, record
 * on S1, S0 waits. Nothing else changes. */
Test(engine, a_call_on_another_stream_is_spliced_into_its_home_streams_order) {
  world_init();
  for (size_t i = 150; i < 160; i++) W.script[0][i].stream = S1;
  world_run();
  cr_assert_lt(first_taken(), 100);
  for (size_t i = 150; i < 160; i++) {
    const outcome *o = &W.out[0][i];
    cr_assert(o->taken && o->rc == 0, "call %zu", i + 1);
    cr_assert_str_eq(o->ops, "RWLRW", "call %zu: %s", i + 1, o->ops);
    cr_assert_eq(o->launch_stream, S1);
    cr_assert_eq(o->offset, W.out[1][i].offset, "call %zu: the peer's slot", i + 1);
    cr_assert_str_eq(W.out[1][i].ops, "L");
  }
  cr_assert_str_eq(W.out[0][160].ops, "L", "back on the home stream: no events");
}

/* Rank 0's call 150 is captured on a side stream: it cannot be spliced (an event recorded outside
 * the capture cannot order it), so it goes to NCCL there (reason `stream`) while rank 1 redirects
 * it. The route check turns that into the error state on both ranks within a few calls: every
 * later call returns ncclRemoteError (6) and launches nothing. Never a silent result. */
Test(engine, a_call_only_one_rank_can_redirect_puts_both_ranks_in_error) {
  world_init();
  W.script[0][150].stream = S1;
  W.script[0][150].capturing = true;
  world_run();
  cr_assert_lt(first_taken(), 100);
  /* Rank 0: NCCL for it (reason `stream`), or already the error if rank 1's route was logged
   * first; never its kernel. */
  const outcome *r0 = &W.out[0][150];
  cr_assert((!r0->taken && r0->reason == SYMMPIN_REASON_STREAM) || (r0->taken && r0->rc == 6),
            "rank 0 call 151: taken %d rc %d reason %d", r0->taken, r0->rc, r0->reason);
  cr_assert_eq(r0->offset, -1);
  cr_assert(W.out[1][150].taken);
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

/* A launch that fails on one rank: that rank returns ncclUnhandledCudaError (1) for that call at
 * once, and both ranks are in error from then on (rank 0 learns it through the board's alarm
 * within a few calls); neither launches anything after that. */
Test(engine, a_failed_launch_is_an_error_on_every_rank) {
  world_init();
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

/* cudaStreamPerThread (0x2) is a different stream on every thread. Rank 0 makes its calls there;
 * calls 151..155 come from another thread of its process, on that thread's own per-thread stream.
 * That stream is not the home's, and the home (the first thread's per-thread stream) cannot be
 * named from the other thread to splice the call in: NCCL there (reason `stream`), so the
 * communicator ends in error on both ranks; never a launch that uses the slot from two unordered
 * streams. */
Test(engine, another_threads_per_thread_stream_is_never_treated_as_the_home) {
  world_init();
  for (size_t i = 0; i < W.ncalls; i++) W.script[0][i].stream = (void *)0x2;
  for (size_t i = 150; i < 155; i++) W.script[0][i].other_thread = true;
  world_run();
  cr_assert_lt(first_taken(), 100);
  cr_assert_str_eq(W.out[0][149].ops, "L", "on the home per-thread stream: launched, no events");
  const outcome *o = &W.out[0][150];
  cr_assert((!o->taken && o->reason == SYMMPIN_REASON_STREAM) || (o->taken && o->rc == 6),
            "rank 0 call 151: taken %d rc %d reason %d", o->taken, o->rc, o->reason);
  for (size_t i = 150; i < W.ncalls; i++)
    cr_assert_eq(W.out[0][i].offset, -1, "rank 0 call %zu: nothing launched", i + 1);
  size_t err = 0;
  for (size_t i = 150; i < W.ncalls && !err; i++)
    if (W.out[1][i].taken && W.out[1][i].rc == 6) err = i;
  cr_assert(err && err <= 160, "rank 1: an error by call 161 (first at %zu)", err + 1);
}
