/* The engine's agreement and symmpin-replay must plan alike: the same recorded 2-GPU traces
 * (tests/traces/, recorded on 2 x H200) are fed to both paths and their final plans compared.
 *
 *  - the agreement path: every rank of every communicator in the traces is a thread with its own
 *    symmpin_agree (agree/agree.h) on one real board, stepped call by call with the trace's
 *    all-reduces, exactly as the engine steps it. FAKE: the GPU side (pool reserve/attach, P2P
 *    facts) always succeeds, as the replay assumes;
 *  - the replay path: symmpin_replay_run (planner/replay.h) on the same files, JSON report.
 * Both must end every communicator with the same plan digest, and the replay must report the
 * ranks agreeing. The trace folders come as arguments (the meson test passes them). */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "planner/replay.h"
#include "planner/trace.h"
#include "planner/warmup.h"
#include "agree/agree.h"

#define MAX_COMMS 8
#define MAX_RANKS 8

typedef struct rank_calls {
  symmpin_agree_call *calls;
  size_t n, cap;
} rank_calls;

typedef struct comm_calls {
  uint64_t key_hi, key_lo;
  int ordinal, nranks;
  rank_calls ranks[MAX_RANKS];
  uint64_t digest[MAX_RANKS];
  bool has_plan[MAX_RANKS];
  int agreed_epochs[MAX_RANKS];
} comm_calls;

typedef struct job {
  comm_calls comms[MAX_COMMS];
  int ncomms;
} job;

static comm_calls *comm_of(job *j, uint64_t hi, uint64_t lo, int ordinal, int nranks) {
  for (int i = 0; i < j->ncomms; i++)
    if (j->comms[i].key_hi == hi && j->comms[i].key_lo == lo) return &j->comms[i];
  cr_assert_lt(j->ncomms, MAX_COMMS);
  comm_calls *c = &j->comms[j->ncomms++];
  memset(c, 0, sizeof *c);
  c->key_hi = hi;
  c->key_lo = lo;
  c->ordinal = ordinal;
  c->nranks = nranks;
  return c;
}

/* Per file: comm ordinal -> communicator; per thread: group depth and token (as the preload). */
static void load(job *j, const char *path) {
  symmpin_trace_file f;
  cr_assert_eq(symmpin_trace_read(path, &f), SYMMPIN_OK, "%s", path);
  comm_calls *by_ordinal[64] = {0};
  typedef struct { uint64_t tid; int depth; uint64_t token; } thread_group;
  thread_group threads[64];
  int nthreads = 0;
  uint64_t tokens = 0;
  for (size_t e = 0; e < f.nevents; e++) {
    const symmpin_trace_event *ev = &f.events[e];
    switch (ev->call) {
    case SYMMPIN_TRACE_COMM_INIT_RANK: case SYMMPIN_TRACE_COMM_INIT_RANK_CONFIG:
    case SYMMPIN_TRACE_COMM_INIT_RANK_SCALABLE: case SYMMPIN_TRACE_COMM_INIT_ALL:
    case SYMMPIN_TRACE_COMM_SPLIT:
      if (ev->rc == 0 && ev->comm >= 0 && ev->comm < 64)
        by_ordinal[ev->comm] = comm_of(j, ev->key_hi, ev->key_lo, ev->comm, ev->nranks);
      break;
    case SYMMPIN_TRACE_GROUP_START: case SYMMPIN_TRACE_GROUP_END: {
      if (ev->rc != 0) break;
      int t = 0;
      while (t < nthreads && threads[t].tid != ev->tid) t++;
      if (t == nthreads) {
        cr_assert_lt(nthreads, 64);
        threads[nthreads++] = (thread_group){ev->tid, 0, 0};
      }
      if (ev->call == SYMMPIN_TRACE_GROUP_START) {
        if (threads[t].depth++ == 0) threads[t].token = ++tokens;
      } else if (threads[t].depth > 0 && --threads[t].depth == 0) {
        threads[t].token = 0;
      }
      break;
    }
    case SYMMPIN_TRACE_ALL_REDUCE: {
      cr_assert(ev->comm >= 0 && ev->comm < 64 && by_ordinal[ev->comm], "%s: call before init", path);
      cr_assert(ev->rank >= 0 && ev->rank < MAX_RANKS, "%s: all-reduce without a rank", path);
      comm_calls *c = by_ordinal[ev->comm];
      if (ev->nranks > c->nranks) c->nranks = ev->nranks;
      rank_calls *rc = &c->ranks[ev->rank];
      if (rc->n == rc->cap) {
        rc->cap = rc->cap ? 2 * rc->cap : 256;
        rc->calls = realloc(rc->calls, rc->cap * sizeof *rc->calls);
        cr_assert_not_null(rc->calls);
      }
      uint64_t token = 0;
      for (int t = 0; t < nthreads; t++)
        if (threads[t].tid == ev->tid) token = threads[t].token;
      bool in_place = ev->send_ptr == ev->recv_ptr ||
                      (ev->send_alloc && ev->send_alloc == ev->recv_alloc &&
                       ev->send_off == ev->recv_off);
      rc->calls[rc->n++] = (symmpin_agree_call){
          .site = ev->site, .stream_ord = ev->stream_ord, .count = ev->count,
          .dtype = ev->dtype, .op = ev->op, .in_place = in_place, .capturing = ev->capturing != 0,
          .group_token = token, .send_alloc = ev->send_alloc, .recv_alloc = ev->recv_alloc};
      break;
    }
    default: break;
    }
  }
  symmpin_trace_file_free(&f);
}

/* ---- the agreement path ---- */

static symmpin_status ok_facts(void *ctx, symmpin_pool_facts *out) {
  memset(out, 0, sizeof *out);
  out->device = (int32_t)(intptr_t)ctx;
  return SYMMPIN_OK;
}
static symmpin_status ok_peers(void *ctx, const symmpin_pool_facts *f, int n, char *w, size_t wl) {
  (void)ctx, (void)f, (void)n, (void)w, (void)wl;
  return SYMMPIN_OK;
}
static symmpin_status ok_reserve(void *ctx, uint64_t bytes, void *rec) {
  (void)ctx;
  memset(rec, 0, SYMMPIN_POOL_EXPORT_BYTES);
  memcpy(rec, &bytes, sizeof bytes);
  return SYMMPIN_OK;
}
static symmpin_status ok_attach(void *ctx, const void *const ex[], const symmpin_plan *p) {
  (void)ctx, (void)ex, (void)p;
  return SYMMPIN_OK;
}
static void ok_settle(void *ctx, bool agreed) { (void)ctx, (void)agreed; }

typedef struct rank_run {
  comm_calls *c;
  int rank;
  symmpin_agree *a;
} rank_run;

static void *rank_main(void *p) {
  rank_run *rr = p;
  rank_calls *rc = &rr->c->ranks[rr->rank];
  for (size_t i = 0; i < rc->n; i++)
    rr->c->agreed_epochs[rr->rank] += symmpin_agree_step(rr->a, i + 1, &rc->calls[i]);
  const symmpin_plan *plan = symmpin_agree_plan(rr->a);
  rr->c->has_plan[rr->rank] = plan != NULL;
  rr->c->digest[rr->rank] = plan ? plan->digest : 0;
  return NULL;
}

static void run_agreement(comm_calls *c) {
  uint64_t salt[2];
  cr_assert_eq(getrandom(salt, sizeof salt, 0), (ssize_t)sizeof salt);
  symmpin_comm_key key = symmpin_comm_key_of_bytes(salt, sizeof salt); /* a fresh board */
  pthread_t t[MAX_RANKS];
  rank_run rr[MAX_RANKS];
  for (int r = 0; r < c->nranks; r++) {
    symmpin_agree_params p = {
        .key = key, .comm = c->ordinal, .rank = r, .nranks = c->nranks,
        .warmup = SYMMPIN_WARMUP_DEFAULT, .mode = SYMMPIN_PLAN_SHARED,
        .max_bytes = SYMMPIN_PLAN_MAX_BYTES_DEFAULT, .timeout_ms = 20000,
        .capture_bytes = SYMMPIN_PLAN_CAPTURE_BYTES_DEFAULT,
        .ops = {.ctx = (void *)(intptr_t)r, .gpu_facts = ok_facts, .check_peers = ok_peers,
                .reserve = ok_reserve, .attach = ok_attach, .settle = ok_settle},
    };
    rr[r] = (rank_run){c, r, NULL};
    cr_assert_eq(symmpin_agree_open(&p, &rr[r].a), SYMMPIN_OK);
  }
  for (int r = 0; r < c->nranks; r++) cr_assert_eq(pthread_create(&t[r], NULL, rank_main, &rr[r]), 0);
  for (int r = 0; r < c->nranks; r++) {
    pthread_join(t[r], NULL);
    symmpin_agree_close(rr[r].a);
  }
}

/* ---- the replay path ---- */

/* The digest the replay reports for the communicator with this key; *found false if none. */
static uint64_t replay_digest(const char *json, const comm_calls *c, bool *found, bool *agreed,
                              int *epochs) {
  char key[64];
  snprintf(key, sizeof key, "\"key\":\"%016" PRIx64 "%016" PRIx64 "\"", c->key_hi, c->key_lo);
  const char *at = strstr(json, key);
  const char *ag = at ? strstr(at, "\"agreed\":") : NULL;
  const char *d = at ? strstr(at, "\"digest\":\"") : NULL;
  const char *e = at ? strstr(at, "\"epochs\":") : NULL;
  *found = ag && d && e;
  *epochs = *found ? atoi(e + 9) : -1;
  *agreed = *found && strncmp(ag + 9, "true", 4) == 0;
  return *found ? strtoull(d + 10, NULL, 16) : 0;
}

static void replay_json(const char *const *paths, int n, char **json) {
  size_t len = 0;
  *json = NULL;
  FILE *out = open_memstream(json, &len);
  symmpin_replay_options o = {
      .mode = SYMMPIN_PLAN_SHARED, .warmup = SYMMPIN_WARMUP_DEFAULT,
      .max_bytes = SYMMPIN_PLAN_MAX_BYTES_DEFAULT, .json = true,
      .capture_bytes = SYMMPIN_PLAN_CAPTURE_BYTES_DEFAULT,
      .kernels = &symmpin_agree_kernels,
  };
  cr_assert_eq(symmpin_replay_run(paths, n, &o, out), SYMMPIN_OK);
  fclose(out);
}

static void compare_folder(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "%s", dir);
  char *paths[16];
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) && n < 16) {
    if (de->d_name[0] == '.' || !strstr(de->d_name, ".trace")) continue;
    size_t len = strlen(dir) + strlen(de->d_name) + 2;
    paths[n] = malloc(len);
    snprintf(paths[n++], len, "%s/%s", dir, de->d_name);
  }
  closedir(d);
  cr_assert_gt(n, 0, "no traces in %s", dir);
  static job j;
  memset(&j, 0, sizeof j);
  for (int i = 0; i < n; i++) load(&j, paths[i]);
  char *json = NULL;
  replay_json((const char *const *)paths, n, &json);
  int compared = 0;
  for (int i = 0; i < j.ncomms; i++) {
    comm_calls *c = &j.comms[i];
    if (c->nranks < 2 || !c->ranks[0].n) continue;
    run_agreement(c);
    bool found = false, agreed = false;
    int epochs = -1;
    uint64_t rd = replay_digest(json, c, &found, &agreed, &epochs);
    cr_assert(found, "%s: the replay did not report communicator %d", dir, c->ordinal);
    for (int r = 0; r < c->nranks; r++) {
      cr_assert(c->has_plan[r], "%s comm %d rank %d: the agreement made no plan", dir, c->ordinal, r);
      cr_assert_eq(c->digest[r], c->digest[0], "%s: ranks' plans differ", dir);
      cr_assert_eq(c->agreed_epochs[r], epochs, "%s comm %d rank %d: %d epochs agreed, the replay "
                   "says %d", dir, c->ordinal, r, c->agreed_epochs[r], epochs);
    }
    cr_assert(agreed, "%s comm %d: the replay says the ranks do not agree", dir, c->ordinal);
    cr_assert_eq(c->digest[0], rd, "%s comm %d: agreement %016" PRIx64 " vs replay %016" PRIx64,
                 dir, c->ordinal, c->digest[0], rd);
    compared++;
    for (int r = 0; r < MAX_RANKS; r++) free(c->ranks[r].calls);
  }
  cr_assert_gt(compared, 0, "%s: no communicator with two ranks", dir);
  free(json);
  for (int i = 0; i < n; i++) free(paths[i]);
}

static const char *traces_root(void) {
  const char *root = getenv("SYMMPIN_TRACES");
  cr_assert_not_null(root, "SYMMPIN_TRACES (the tests/traces folder) is not set");
  return root;
}

static void compare(const char *name) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/%s", traces_root(), name);
  compare_folder(dir);
}

Test(agree_traces, app_procs, .timeout = 120) { compare("app-procs"); }
Test(agree_traces, app_single, .timeout = 120) { compare("app-single"); }
Test(agree_traces, app_threads, .timeout = 120) { compare("app-threads"); }
Test(agree_traces, ddp, .timeout = 120) { compare("ddp"); }
Test(agree_traces, tp, .timeout = 120) { compare("tp"); }
/* Synthetic traces (tests/traces/synthetic/README.md): late sites, two streams, groups driven by
 * one thread for 4 ranks, and ranks whose warm-up ends at different calls (realignment). */
Test(agree_traces, synthetic_ddp2, .timeout = 120) { compare("synthetic/ddp2"); }
Test(agree_traces, synthetic_differ2, .timeout = 120) { compare("synthetic/differ2"); }
Test(agree_traces, synthetic_twostreams2, .timeout = 120) { compare("synthetic/twostreams2"); }
Test(agree_traces, synthetic_mixed2, .timeout = 120) { compare("synthetic/mixed2"); }
Test(agree_traces, synthetic_sweep4, .timeout = 120) { compare("synthetic/sweep4"); }
Test(agree_traces, synthetic_skew2, .timeout = 120) { compare("synthetic/skew2"); }
