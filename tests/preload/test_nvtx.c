/* symmpin's NVTX names (preload/nvtx.h) as a tool sees them: preload/engine.c as built, with
 * threads as ranks on real boards over the engine's FAKES (engine_fakes.h), and an NVTX tool
 * (nvtx_recorder.c, loaded by NVTX itself through NVTX_INJECTION64_PATH, as Nsight Systems is)
 * that writes every domain, range and mark it receives to a file. Each test is a process of its
 * own (Criterion's), so NVTX starts afresh in each: with the tool attached, the names must be
 * exactly the ones nvtx.h documents; without it, nothing is recorded at all. Each test prints what
 * the tool recorded (distinct lines with their counts), for the log. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/commkey.h"
#include "preload/comm.h"
#include "preload/config.h"
#include "preload/engine.h"
#include "preload/nvtx.h"
#include "engine_fakes.h"

#define RANKS 2
#define MAX_CALLS 400
#define WARMUP 16
#define S0 ((void *)0x100) /* every rank's stream */
#define SG ((void *)0x300) /* a stream used only to capture a graph */

/* One call of one rank's script, and what the engine did with it. */
typedef struct spec {
  uint64_t site;
  size_t count;
  bool capturing;
  int group; /* nonzero: inside ncclGroupStart/End; consecutive calls with one id are one group */
  bool fail_launch;
} spec;
typedef struct outcome {
  bool taken;
  int rc;
} outcome;

static struct {
  symmpin_comm_key key;
  int nranks;
  size_t ncalls;
  spec script[RANKS][MAX_CALLS];
  outcome out[RANKS][MAX_CALLS];
  _Atomic int progress[RANKS];
  float kernel_ms, other_ms;
} W;

/* Where site 0xA is in the program (the other sites: not known). */
static const symmpin_site_where where_a = {
    .module = "/opt/app/bin/app", .symbol = "main", .offset = 0x1a2b};

static void config(int choose) {
  static symmpin_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.warmup = WARMUP;
  cfg.max_bytes = 2u << 20;
  cfg.capture_bytes = 256u << 10;
  cfg.planner = SYMMPIN_PLAN_SHARED;
  cfg.timeout_ms = 5000;
  cfg.stack_depth = 1;
  cfg.choose = choose;
  symmpin_config_set_for_tests(&cfg);
}

static void world_init(int nranks, size_t ncalls, int choose) {
  memset(&W, 0, sizeof W);
  uint64_t r[2];
  cr_assert_eq(getrandom(r, sizeof r, 0), (ssize_t)sizeof r);
  W.key = symmpin_comm_key_of_bytes(r, sizeof r); /* tests run in parallel: never share a board */
  W.nranks = nranks;
  W.ncalls = ncalls;
  config(choose);
}

/* Call i of this rank as the preload makes it (events.c): under the communicator's lock, counted
 * first; then, without the lock, symmpin_nvtx_call_routed with the route taken. */
static void make_call(symmpin_comm *c, int rank, size_t i) {
  const spec *s = &W.script[rank][i];
  static int buf[1];
  symmpin_coll_call a = {.send = buf,
                         .recv = buf,
                         .count = s->count,
                         .dtype = SYMMPIN_FLOAT32,
                         .op = SYMMPIN_SUM,
                         .comm = c->handle,
                         .stream = s->capturing ? SG : S0};
  if (s->site == 0xA) a.where = where_a;
  if (s->fail_launch) fake_fail_next_launch();
  pthread_mutex_lock(&c->lock);
  c->collectives++;
  symmpin_engine_call ec = {.call = &a,
                            .site = s->site,
                            .capturing = s->capturing,
                            .capture_id = s->capturing ? 9 : 0,
                            .group_depth = s->group ? 1 : 0,
                            .group_token = (uint64_t)s->group,
                            .may_batch = s->group != 0,
                            .stream_ord = symmpin_comm_stream_ordinal(c, a.stream)};
  fake_ctx_set(fake_ctx_primary(rank));
  int rc = 0;
  symmpin_reason reason = SYMMPIN_REASON_NONE;
  bool taken = symmpin_engine_collective(c, &ec, &rc, &reason);
  if (!taken) symmpin_engine_nccl_done(c, &ec, 0);
  bool last = s->group && (i + 1 == W.ncalls || W.script[rank][i + 1].group != s->group);
  if (last) {
    int frc = symmpin_engine_group_flush(c);
    if (frc) rc = frc;
    symmpin_engine_group_end(c, 0);
  }
  pthread_mutex_unlock(&c->lock);
  symmpin_nvtx_call_routed(c, &ec, taken ? SYMMPIN_REASON_NONE : reason);
  W.out[rank][i] = (outcome){.taken = taken, .rc = rc};
  fake_ops_clear();
}

static void *rank_main(void *arg) {
  int rank = (int)(intptr_t)arg;
  symmpin_comm *c =
      symmpin_comm_register((void *)(uintptr_t)(0xc0 + rank), W.key, rank, W.nranks, rank, true);
  cr_assert_not_null(c);
  if (W.kernel_ms > 0) fake_set_elapsed(W.kernel_ms, W.other_ms);
  for (size_t i = 0; i < W.ncalls; i++) {
    /* Lockstep, as the kernels keep real ranks. */
    for (int k = 0; k < W.nranks; k++)
      while (atomic_load(&W.progress[k]) < (int)i) sched_yield();
    make_call(c, rank, i);
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
  for (int k = 0; k < W.nranks; k++)
    cr_assert_eq(pthread_create(&t[k], NULL, rank_main, (void *)(intptr_t)k), 0);
  for (int k = 0; k < W.nranks; k++) pthread_join(t[k], NULL);
}

/* ---- the tool ---- */

static char log_path[256];

/* Before anything calls NVTX in this process: with the recorder as the tool, or with none (the
 * recorder's log file named all the same, so that a tool loaded by mistake would write it). */
static void tool(bool attached) {
  const char *dir = getenv("TMPDIR") && getenv("TMPDIR")[0] ? getenv("TMPDIR") : "/tmp";
  snprintf(log_path, sizeof log_path, "%s/symmpin-test-nvtx.%d.log", dir, (int)getpid());
  unlink(log_path);
  cr_assert_eq(setenv("SYMMPIN_TEST_NVTX_LOG", log_path, 1), 0);
  const char *recorder = getenv("SYMMPIN_TEST_NVTX_RECORDER");
  cr_assert(recorder && recorder[0], "SYMMPIN_TEST_NVTX_RECORDER names the recorder library");
  if (attached)
    cr_assert_eq(setenv("NVTX_INJECTION64_PATH", recorder, 1), 0);
  else
    cr_assert_eq(unsetenv("NVTX_INJECTION64_PATH"), 0);
}

/* Every string a test keeps (recorded lines, expected names) lives here, not on the heap: nothing
 * to free, nothing for LeakSanitizer to find (scripts/test-sanitizers.sh). */
static char pool[1 << 20];
static size_t pool_used;

static char *keep(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *keep(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(pool + pool_used, sizeof pool - pool_used, fmt, ap);
  va_end(ap);
  cr_assert(n >= 0 && (size_t)n < sizeof pool - pool_used, "the test's string pool is full");
  char *s = pool + pool_used;
  pool_used += (size_t)n + 1;
  return s;
}

#define MAX_LINES 8192
typedef struct lines {
  char *v[MAX_LINES];
  size_t n;
} lines;

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The recorder's lines (false: no file). */
static bool recorded(lines *out) {
  out->n = 0;
  FILE *f = fopen(log_path, "r");
  if (!f) return false;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    cr_assert_lt(out->n, MAX_LINES);
    out->v[out->n++] = keep("%s", line);
  }
  fclose(f);
  unlink(log_path);
  return true;
}

/* The lines that begin with prefix (prefix cut off), sorted. */
static void with_prefix(const lines *all, const char *prefix, lines *out) {
  out->n = 0;
  size_t len = strlen(prefix);
  for (size_t i = 0; i < all->n; i++)
    if (!strncmp(all->v[i], prefix, len)) out->v[out->n++] = all->v[i] + len;
  qsort(out->v, out->n, sizeof out->v[0], cmp_str);
}

static size_t count_equal(const lines *all, const char *line) {
  size_t n = 0;
  for (size_t i = 0; i < all->n; i++) n += !strcmp(all->v[i], line);
  return n;
}

/* What the tool recorded, for the log: each distinct line once, with its count, in one write. */
static void print_recorded(const char *test, const lines *all) {
  lines sorted = *all;
  qsort(sorted.v, sorted.n, sizeof sorted.v[0], cmp_str);
  static char out[1 << 16];
  size_t len = (size_t)snprintf(out, sizeof out, "nvtx test %s: the tool recorded %zu call(s)%s\n",
                                test, all->n, all->n ? ":" : "");
  for (size_t i = 0; i < sorted.n && len < sizeof out; i++) {
    size_t k = 1;
    while (i + k < sorted.n && !strcmp(sorted.v[i], sorted.v[i + k])) k++;
    int n = snprintf(out + len, sizeof out - len, "  %4zu x %s\n", k, sorted.v[i]);
    if (n > 0) len += (size_t)n;
    i += k - 1;
  }
  if (len > sizeof out) len = sizeof out;
  fwrite(out, 1, len, stdout);
  fflush(stdout);
}

/* Two sorted lists are equal; otherwise say where they differ. */
static void assert_same(const lines *got, const lines *want, const char *what) {
  for (size_t i = 0; i < got->n && i < want->n; i++)
    cr_assert_str_eq(got->v[i], want->v[i], "%s %zu: \"%s\", expected \"%s\"", what, i, got->v[i],
                     want->v[i]);
  cr_assert_eq(got->n, want->n, "%zu %s, expected %zu", got->n, what, want->n);
}

/* ---- the names, as nvtx.h documents them ---- */

static char *range_name(uint64_t site, size_t count, bool captured, bool two_shot) {
  char at[64] = "";
  if (site == 0xA) snprintf(at, sizeof at, " at app+0x1a2b (main)");
  return keep("allreduce %zu B f32 sum %s%s site 0x%016llx%s", count * 4,
              captured ? "captured " : "", two_shot ? "two-shot" : "one-shot",
              (unsigned long long)site, at);
}

/* ---- the tests ---- */

/* Every rank, in cycles of four: A (256 floats, one-shot) and B (1 MiB, two-shot at 2 ranks:
 * kernels/select.c) eagerly, then C (512 floats) and D (1024 floats) in one group; at the end four
 * calls of E (256 floats) captured into a graph. The tool sees one range per redirected call
 * (captured ones "captured"), one per group launch, one mark per rank for the plan (four sites,
 * all pinned), and nothing else. */
Test(nvtx, redirected_calls_groups_and_captures_are_named_ranges) {
  tool(true);
  world_init(RANKS, 40, SYMMPIN_CHOOSE_STATIC);
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < W.ncalls; i++) {
      static const uint64_t sites[4] = {0xA, 0xB, 0xC, 0xD};
      static const size_t counts[4] = {256, 262144, 512, 1024};
      W.script[k][i] = (spec){
          .site = sites[i % 4], .count = counts[i % 4], .group = i % 4 >= 2 ? (int)(i / 4) + 1 : 0};
      if (i >= W.ncalls - 4) W.script[k][i] = (spec){.site = 0xE, .count = 256, .capturing = true};
    }
  world_run();
  cr_assert(symmpin_nvtx_on(), "the tool's domain");
  lines all, pushes, marks, want = {.n = 0};
  cr_assert(recorded(&all), "the tool wrote %s", log_path);
  print_recorded("redirected_calls_groups_and_captures_are_named_ranges", &all);
  cr_assert_eq(count_equal(&all, "domain symmpin"), 1, "one domain, symmpin");
  with_prefix(&all, "push ", &pushes);
  with_prefix(&all, "mark ", &marks);
  cr_assert_eq(count_equal(&all, "pop"), pushes.n, "every range ended");
  cr_assert_eq(1 + pushes.n * 2 + marks.n, all.n, "nothing but the domain, ranges and marks");
  size_t singles = 0, groups = 0, captured = 0;
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < W.ncalls; i++) {
      const spec *s = &W.script[k][i];
      const outcome *o = &W.out[k][i];
      cr_assert(!o->taken || o->rc == 0, "rank %d call %zu: rc %d", k, i + 1, o->rc);
      if (!o->taken) continue;
      if (s->group && s->site == 0xD) { /* the group's end launched what symmpin took of C, D */
        bool c_too = W.out[k][i - 1].taken;
        want.v[want.n++] =
            keep("allreduce group of %d: %d B f32 sum one-shot sites %s%s", c_too ? 2 : 1,
                 c_too ? 6144 : 4096, c_too ? "0x000000000000000c " : "", "0x000000000000000d");
        groups += c_too;
      } else if (!s->group) {
        want.v[want.n++] = range_name(s->site, s->count, s->capturing, s->site == 0xB);
        singles += !s->capturing;
        captured += s->capturing;
      }
    }
  qsort(want.v, want.n, sizeof want.v[0], cmp_str);
  assert_same(&pushes, &want, "ranges");
  cr_assert_geq(singles, 2 * RANKS * 4, "eager calls redirected: %zu", singles);
  cr_assert_geq(groups, 2 * RANKS, "groups redirected: %zu", groups);
  cr_assert_eq(captured, 4 * RANKS, "captured calls redirected: %zu", captured);
  lines want_marks = {.n = 0};
  for (int k = 0; k < RANKS; k++) {
    want_marks.v[want_marks.n++] = keep("comm 0 rank %d/2: epoch 1 agreed: 4 of 4 sites pinned", k);
  }
  qsort(want_marks.v, want_marks.n, sizeof want_marks.v[0], cmp_str);
  assert_same(&marks, &want_marks, "marks");
}

/* The choice by measurement with the kernel timed slower than NCCL: after the probes, a plan
 * sends A's and B's calls back to NCCL on both ranks (reason measured). The tool sees, besides
 * the ranges and the plans' marks, exactly one mark per rank and site, at that moment; never one
 * for the probes (calls sent to NCCL to be timed there). */
Test(nvtx, a_site_that_goes_back_to_nccl_is_marked_with_its_reason) {
  tool(true);
  world_init(RANKS, 400, SYMMPIN_CHOOSE_MEASURE);
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < W.ncalls; i++)
      W.script[k][i] = (spec){.site = i % 2 ? 0xB : 0xA, .count = i % 2 ? 512 : 256};
  W.kernel_ms = 0.020f;
  W.other_ms = 0.005f;
  world_run();
  cr_assert_not(W.out[0][W.ncalls - 1].taken, "the shapes went back to NCCL");
  lines all, marks, back;
  cr_assert(recorded(&all));
  print_recorded("a_site_that_goes_back_to_nccl_is_marked_with_its_reason", &all);
  with_prefix(&all, "mark ", &marks);
  lines want = {.n = 0};
  for (int k = 0; k < RANKS; k++)
    for (int s = 0; s < 2; s++) {
      want.v[want.n++] =
          keep("comm 0 rank %d/2: site 0x000000000000000%c to NCCL: measured", k, s ? 'b' : 'a');
    }
  qsort(want.v, want.n, sizeof want.v[0], cmp_str);
  back.n = 0;
  size_t first_plans = 0;
  for (size_t i = 0; i < marks.n; i++) {
    if (strstr(marks.v[i], " to NCCL: ")) {
      back.v[back.n++] = marks.v[i];
      continue;
    }
    int rank = -1;
    unsigned epoch = 0;
    size_t pinned = 0, sites = 0;
    char again[160] = "";
    if (sscanf(marks.v[i], "comm 0 rank %d/2: epoch %u agreed: %zu of %zu sites pinned", &rank,
               &epoch, &pinned, &sites) == 4)
      snprintf(again, sizeof again, "comm 0 rank %d/2: epoch %u agreed: %zu of %zu sites pinned",
               rank, epoch, pinned, sites);
    cr_assert_str_eq(marks.v[i], again, "mark \"%s\": neither a plan nor a site to NCCL",
                     marks.v[i]);
    cr_assert_eq(sites, 2, "mark \"%s\"", marks.v[i]);
    if (epoch == 1) {
      cr_assert_eq(pinned, 2, "mark \"%s\": both sites pinned at first", marks.v[i]);
      first_plans++;
    }
  }
  cr_assert_eq(first_plans, RANKS, "epoch 1's mark on every rank");
  assert_same(&back, &want, "marks of sites to NCCL");
}

/* A launch that fails on rank 1: that rank is in error at once (ncclUnhandledCudaError), rank 0
 * learns it through the board's alarm (ncclRemoteError): one mark per rank, with the code. */
Test(nvtx, a_failed_launch_marks_each_rank_in_error) {
  tool(true);
  world_init(RANKS, 60, SYMMPIN_CHOOSE_STATIC);
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < W.ncalls; i++)
      W.script[k][i] = (spec){.site = i % 2 ? 0xB : 0xA, .count = i % 2 ? 512 : 256};
  W.script[1][40].fail_launch = true;
  world_run();
  cr_assert(W.out[1][40].taken && W.out[1][40].rc == 1, "rank 1's launch failed");
  lines all, errors, pushes;
  cr_assert(recorded(&all));
  print_recorded("a_failed_launch_marks_each_rank_in_error", &all);
  with_prefix(&all, "mark ", &errors);
  size_t n = 0;
  for (size_t i = 0; i < errors.n; i++)
    if (strstr(errors.v[i], " in error: ")) errors.v[n++] = errors.v[i];
  errors.n = n;
  lines want = {.v = {"comm 0 rank 0/2: in error: ncclRemoteError",
                      "comm 0 rank 1/2: in error: ncclUnhandledCudaError"},
                .n = 2};
  assert_same(&errors, &want, "marks of the error state");
  with_prefix(&all, "push ", &pushes);
  cr_assert_eq(count_equal(&all, "pop"), pushes.n, "every range ended");
}

/* A communicator of one rank: symmpin stays out of it (NCCL's collective is a copy at most). The
 * tool sees the domain and one mark with the reason and why, once, whatever the calls. */
Test(nvtx, a_communicator_symmpin_stays_out_of_is_marked_with_why) {
  tool(true);
  world_init(1, 8, SYMMPIN_CHOOSE_STATIC);
  for (size_t i = 0; i < W.ncalls; i++) W.script[0][i] = (spec){.site = 0xA, .count = 256};
  world_run();
  lines all;
  cr_assert(recorded(&all));
  print_recorded("a_communicator_symmpin_stays_out_of_is_marked_with_why", &all);
  lines want = {.v = {"domain symmpin",
                      "mark comm 0 rank 0/1: to NCCL: comm (one rank (NCCL's collective is a copy "
                      "at most))"},
                .n = 2};
  assert_same(&all, &want, "lines");
}

/* No tool (NVTX_INJECTION64_PATH unset): the first test's calls, and NVTX answers no domain, so
 * symmpin formats no name and calls nothing: the recorder's file is never written. */
Test(nvtx, without_a_tool_nothing_is_recorded) {
  tool(false);
  world_init(RANKS, 40, SYMMPIN_CHOOSE_STATIC);
  for (int k = 0; k < RANKS; k++)
    for (size_t i = 0; i < W.ncalls; i++)
      W.script[k][i] = (spec){.site = i % 2 ? 0xB : 0xA, .count = i % 2 ? 512 : 256};
  world_run();
  cr_assert(W.out[0][W.ncalls - 1].taken, "redirected as with a tool");
  cr_assert_not(symmpin_nvtx_on(), "no domain without a tool");
  lines all;
  bool wrote = recorded(&all);
  print_recorded("without_a_tool_nothing_is_recorded", &all);
  cr_assert_not(wrote, "%s written without a tool", log_path);
}
