/* symmpin-life: NCCL's calls that change a communicator's life while an all-reduce is in flight
 * (docs/compatibility.md, NCCL 2.27+), as an ordinary NCCL program run with and without
 * LD_PRELOAD=libsymmpin.so; it knows nothing of symmpin. Two ranks, as processes
 * (tests/apps/launch.h: bounded waits, the GPU suite's rank wrapper), rank r on GPU r % GPUs: the
 * two may share one GPU where NCCL is given a host id per rank
 * (APP_RANK_WRAPPER=scripts/rank-env.sh RANK_ENV_NCCL_HOSTS=2; NCCL then talks over its socket
 * transport). Needs an NCCL that has the calls (2.28.7+ for revoke: PyTorch's 2.28.9, not the
 * system's 2.28.3; the launcher refuses an older one). Under symmpin, run it with
 * SYMMPIN_CHOOSE=static, so that the all-reduce in flight is symmpin's kernel (the measured choice
 * sends some calls to NCCL).
 *
 *   --scenario revoke   both ranks make --calls all-reduces (past symmpin's warm-up: redirected
 *                       under the preload), checked exactly; then rank 0 makes one more, which
 *                       rank 1 never makes, so rank 0's all-reduce waits for its peer on the GPU
 *                       (checked: its stream is still busy after the bound L below). Rank 0 revokes
 *                       its communicator: ncclCommRevoke must return, and rank 0's stream must
 *                       drain (without a CUDA error), within L each (the waiting kernel stops, as
 *                       NCCL's own does), and rank 0's next all-reduce must return what NCCL
 *                       returns for a revoked communicator (ncclInvalidUsage). Then rank 0 says it
 *                       is done, and only then does rank 1 revoke its own; both abort theirs.
 *   --scenario shrink   the same in-flight wait, then rank 0 calls ncclCommShrink with
 *                       NCCL_SHRINK_ABORT excluding rank 1 (which never calls it): the call and
 *                       rank 0's stream must end within L each, and the one-rank child's
 *                       all-reduces must be right. Rank 1 aborts once rank 0 says it is done.
 *
 * The peer never arrives: rank 1 makes no all-reduce after the checked ones, and makes no call on
 * its communicator at all until rank 0 has said it is done, through a file in a folder the
 * launcher makes (--sync; a host-side channel, not the communicator), so the waiting kernel can
 * only stop because of rank 0's own revoke or shrink. L (--limit-ms) is 1000 ms when each rank
 * has a GPU of its own and 2000 ms when the two time-share one; the wait before the revoke is L
 * as well, so the kernel has waited at least as long before the call as it may take to stop after
 * it. Every call goes through one call site (one shape, one site: what symmpin pins after its
 * warm-up is what waits).
 *
 * Every step has a deadline: a rank still short of its results after 60 s ends itself (a hang is
 * a failure); rank 1 waits at most 30 s for rank 0's word. Each rank prints
 *   LIFE rank=R scenario=S allreduces=N ...   (what happened, with times)
 *   symmpin-life: rank R: N passed, M failed  (its checks)
 * before its teardown; the launcher's last line: "symmpin-life: N passed, M failed" (every rank's
 * checks; a rank that ended badly without saying why counts as one failure). Exit status 3 when
 * every check passed but a rank hung in its teardown; 77 without a GPU. */
#include <cuda_runtime.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <nccl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/apps/launch.h"
#include "tests/gpu/gpu_common.h"

#define PROG "symmpin-life"
#define NRANKS 2
#define COUNT 1024          /* int32: an LL-sized all-reduce, redirected under symmpin */
#define CHILD_CALLS 64      /* checked all-reduces on the shrunk one-rank child */
#define HANG_S 60           /* a rank still short of its results then ends itself */
#define WORD_WAIT_MS 30000. /* rank 1's longest wait for rank 0's word */
#define DONE_FILE "rank0-done"

static struct {
  const char *scenario;
  int calls;
  long limit_ms; /* 0: by the placement (launcher); the ranks always get it */
  int child;
  const char *uid, *sync_dir;
} opt = {.scenario = "revoke", .calls = 400, .child = -1};

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* NCCL's version code (2.9 and newer: major * 10000 + minor * 100 + patch) as "2.28.9". */
static void version_text(int v, char *buf, size_t n) {
  snprintf(buf, n, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

typedef struct rank_ctx {
  int rank, dev, ngpus;
  ncclComm_t comm, child; /* child: the shrink's */
  cudaStream_t stream;
  int32_t *buf, *host;
  long passed, failed;
  long allreduces; /* made on comm */
} rank_ctx;

static void check(rank_ctx *c, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void check(rank_ctx *c, bool ok, const char *fmt, ...) {
  if (ok) {
    c->passed++;
    return;
  }
  c->failed++;
  va_list ap;
  va_start(ap, fmt);
  printf(PROG ": rank %d: FAIL ", c->rank);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
}

/* Waits until `stream` has drained, at most `ms`: whether it did; *err: the error it ended with
 * (cudaSuccess for a clean drain). */
static bool drains_within(cudaStream_t stream, double ms, cudaError_t *err) {
  double t0 = now_ms();
  *err = cudaSuccess;
  for (;;) {
    cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess) return true;
    if (q != cudaErrorNotReady) {
      *err = q;
      cudaGetLastError();
      return true; /* an error ends the wait too: the caller checks it */
    }
    if (now_ms() - t0 > ms) return false;
    usleep(1000);
  }
}

/* The one call site of every all-reduce (symmpin's site is the direct caller: not inlined, no
 * tail call). */
__attribute__((noinline)) static ncclResult_t allreduce(rank_ctx *c, ncclComm_t comm) {
  ncclResult_t rc = ncclAllReduce(c->buf, c->buf, COUNT, ncclInt32, ncclSum, comm, c->stream);
  __asm__ volatile("" ::: "memory");
  if (comm == c->comm) c->allreduces++;
  return rc;
}

/* `n` all-reduces of COUNT ints on `comm` (nranks ranks, this one is `rank` there), each checked
 * (rank r contributes r + i + k). */
static void checked_calls(rank_ctx *c, ncclComm_t comm, int rank, int nranks, int n,
                          const char *what) {
  int bad = 0;
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < COUNT; k++) c->host[k] = rank + i + k;
    cudaMemcpyAsync(c->buf, c->host, COUNT * 4, cudaMemcpyHostToDevice, c->stream);
    if (allreduce(c, comm) != ncclSuccess) bad++;
    cudaMemcpyAsync(c->host, c->buf, COUNT * 4, cudaMemcpyDeviceToHost, c->stream);
    if (cudaStreamSynchronize(c->stream) != cudaSuccess) bad++;
    for (int k = 0; k < COUNT && !bad; k++) {
      int want = 0;
      for (int r = 0; r < nranks; r++) want += r + i + k;
      if (c->host[k] != want) bad++;
    }
    if (bad) break; /* one wrong call is enough: the peer may be gone */
  }
  check(c, bad == 0, "%s (%d calls)", what, n);
}

/* ---- the word between the ranks: a file, not the communicator ---- */

static void say_done(void) {
  char tmp[4096], path[4096];
  snprintf(tmp, sizeof tmp, "%s/" DONE_FILE ".tmp", opt.sync_dir);
  snprintf(path, sizeof path, "%s/" DONE_FILE, opt.sync_dir);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
  if (fd < 0 || rename(tmp, path) != 0)
    printf(PROG ": rank 0: cannot write %s: %s\n", path, strerror(errno));
}

/* Rank 1: waits for rank 0's word, at most `ms`: whether it came. */
static bool wait_for_done(double ms) {
  char path[4096];
  snprintf(path, sizeof path, "%s/" DONE_FILE, opt.sync_dir);
  double t0 = now_ms();
  while (access(path, F_OK) != 0) {
    if (now_ms() - t0 > ms) return false;
    usleep(2000);
  }
  return true;
}

/* ---- the scenarios ---- */

static void rank0_scenario(rank_ctx *c) {
  double limit = (double)opt.limit_ms;
  /* One more all-reduce, which rank 1 never makes: it waits for its peer on the GPU. */
  ncclResult_t rc = allreduce(c, c->comm);
  check(c, rc == ncclSuccess, "the all-reduce without its peer is enqueued (returned %d)", (int)rc);
  usleep((useconds_t)(limit * 1000));
  bool busy = cudaStreamQuery(c->stream) == cudaErrorNotReady;
  cudaGetLastError();
  check(c, busy, "the all-reduce without its peer is still running after %.0f ms (the premise)",
        limit);
  bool revoke = !strcmp(opt.scenario, "revoke");
  double t0 = now_ms();
  if (revoke)
    rc = ncclCommRevoke(c->comm, NCCL_REVOKE_DEFAULT);
  else
    rc = ncclCommShrink(c->comm, (int[]){1}, 1, &c->child, NULL, NCCL_SHRINK_ABORT);
  double call_ms = now_ms() - t0;
  const char *call = revoke ? "ncclCommRevoke" : "ncclCommShrink(NCCL_SHRINK_ABORT)";
  if (revoke)
    check(c, rc == ncclSuccess || rc == ncclInProgress, "%s (returned %d)", call, (int)rc);
  else
    check(c, rc == ncclSuccess && c->child, "%s (returned %d, child %p)", call, (int)rc,
          (void *)c->child);
  check(c, call_ms < limit, "%s within %.0f ms (took %.1f ms)", call, limit, call_ms);
  t0 = now_ms();
  cudaError_t err;
  bool drained = drains_within(c->stream, limit, &err);
  double drain_ms = now_ms() - t0;
  check(c, drained, "the waiting all-reduce stopped within %.0f ms of the call", limit);
  check(c, err == cudaSuccess, "the stream drained without a CUDA error (%s)",
        cudaGetErrorName(err));
  int later = -1;
  if (revoke) {
    later = (int)allreduce(c, c->comm);
    check(c, later == ncclInvalidUsage,
          "an all-reduce after the revoke returns ncclInvalidUsage (returned %d)", later);
    cudaError_t after;
    check(c, drains_within(c->stream, limit, &after) && after == cudaSuccess,
          "nothing runs after the revoke");
  } else if (c->child) {
    checked_calls(c, c->child, 0, 1, CHILD_CALLS, "the one-rank child's all-reduces");
  }
  printf("LIFE rank=0 scenario=%s allreduces=%ld busy_after_ms=%.0f call_rc=%d call_ms=%.1f "
         "drained=%d drain_ms=%.1f cuda_error=%s later_rc=%d limit_ms=%ld\n",
         opt.scenario, c->allreduces, limit, (int)rc, call_ms, drained, drain_ms,
         cudaGetErrorName(err), later, opt.limit_ms);
}

static void rank1_scenario(rank_ctx *c) {
  /* Never makes the all-reduce rank 0 waits in, and no call on the communicator until rank 0
   * said it is done with its scenario. */
  double t0 = now_ms();
  bool told = wait_for_done(WORD_WAIT_MS);
  double waited_ms = now_ms() - t0;
  check(c, told, "rank 0 said it was done within %.0f s", WORD_WAIT_MS / 1e3);
  int rc = -1;
  if (!strcmp(opt.scenario, "revoke")) {
    rc = (int)ncclCommRevoke(c->comm, NCCL_REVOKE_DEFAULT);
    check(c, rc == ncclSuccess || rc == ncclInProgress, "ncclCommRevoke (returned %d)", rc);
  }
  printf("LIFE rank=1 scenario=%s allreduces=%ld waited_ms=%.0f told=%d revoke_rc=%d\n",
         opt.scenario, c->allreduces, waited_ms, told, rc);
}

static char hang_msg[128];
static size_t hang_len;

static void on_alarm(int sig) {
  (void)sig;
  ssize_t w = write(1, hang_msg, hang_len);
  (void)w;
  _exit(1);
}

static int child_main(void) {
  ncclUniqueId id;
  if (!symmpin_test_hex_decode(opt.uid, id.internal, sizeof id.internal))
    return symmpin_test_usage_error(PROG, "bad --uid '%s'", opt.uid);
  setvbuf(stdout, NULL, _IOLBF, 0); /* a file: lines out as they are printed */
  static rank_ctx c;
  c.rank = opt.child;
  snprintf(hang_msg, sizeof hang_msg,
           PROG ": rank %d: FAIL still short of its results after %d s (a hang)\n", c.rank, HANG_S);
  hang_len = strlen(hang_msg);
  signal(SIGALRM, on_alarm);
  alarm(HANG_S);
  int version = 0;
  ncclGetVersion(&version);
  SYMMPIN_TEST_CUDA(cudaGetDeviceCount(&c.ngpus));
  c.dev = c.rank % c.ngpus;
  SYMMPIN_TEST_CUDA(cudaSetDevice(c.dev));
  SYMMPIN_TEST_CUDA(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  SYMMPIN_TEST_CUDA(cudaMalloc((void **)&c.buf, COUNT * 4));
  SYMMPIN_TEST_CUDA(cudaMallocHost((void **)&c.host, COUNT * 4));
  char have[16];
  version_text(version, have, sizeof have);
  printf(PROG ": rank %d on GPU %d of %d, NCCL %s\n", c.rank, c.dev, c.ngpus, have);
  ncclResult_t rc = ncclCommInitRank(&c.comm, NRANKS, id, c.rank);
  check(&c, rc == ncclSuccess, "ncclCommInitRank (returned %d)", (int)rc);
  if (rc != ncclSuccess) c.comm = NULL;
  if (c.comm) {
    checked_calls(&c, c.comm, c.rank, NRANKS, opt.calls, "all-reduces before the scenario");
    if (c.rank == 0)
      rank0_scenario(&c);
    else
      rank1_scenario(&c);
  }
  if (c.rank == 0) say_done(); /* whatever happened: rank 1 must not wait for nothing */
  printf(PROG ": rank %d: %ld passed, %ld failed\n", c.rank, c.passed, c.failed);
  symmpin_test_launch_results_done(c.rank); /* what follows is teardown, bounded apart */
  alarm(0);
  if (c.child) ncclCommDestroy(c.child);
  if (c.comm) ncclCommAbort(c.comm);
  cudaFreeHost(c.host);
  cudaFree(c.buf);
  cudaStreamDestroy(c.stream);
  return c.failed ? 1 : 0;
}

/* ---- the launcher ---- */

typedef struct rank_counts {
  long passed, failed;
  bool seen;
} rank_counts;

static void read_counts(const char *line, void *arg) {
  rank_counts *rc = arg;
  int r;
  long p, f;
  if (sscanf(line, PROG ": rank %d: %ld passed, %ld failed", &r, &p, &f) == 3) {
    rc->passed = p;
    rc->failed = f;
    rc->seen = true;
  }
}

static void remove_sync_dir(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/" DONE_FILE, dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/" DONE_FILE ".tmp", dir);
  unlink(path);
  rmdir(dir);
}

static int run_ranks(void) {
  int ngpus = 0;
  if (cudaGetDeviceCount(&ngpus) != cudaSuccess || ngpus < 1) {
    printf(PROG ": needs a GPU (found none): SKIP\n");
    return 77;
  }
  int version = 0;
  ncclGetVersion(&version);
  int need = !strcmp(opt.scenario, "revoke") ? NCCL_VERSION(2, 28, 7) : NCCL_VERSION(2, 27, 0);
  if (opt.limit_ms == 0) opt.limit_ms = ngpus < NRANKS ? 2000 : 1000; /* time-sharing one GPU */
  char have[16], want[16];
  version_text(version, have, sizeof have);
  version_text(need, want, sizeof want);
  printf(PROG ": scenario=%s ranks=%d gpus=%d calls=%d limit_ms=%ld NCCL %s\n", opt.scenario,
         NRANKS, ngpus, opt.calls, opt.limit_ms, have);
  if (version < need) {
    printf(PROG ": FAIL NCCL %s has no %s call (%s+); PyTorch's has: put its folder first in "
                "LD_LIBRARY_PATH\n",
           have, opt.scenario, want);
    printf(PROG ": 0 passed, 1 failed\n");
    return 1;
  }
  fflush(stdout);
  ncclUniqueId id;
  SYMMPIN_TEST_NCCL(ncclGetUniqueId(&id));
  char hex[2 * sizeof(id.internal) + 1], calls[16], limit[24], dir[4096];
  symmpin_test_hex_encode(id.internal, sizeof id.internal, hex, sizeof hex);
  snprintf(calls, sizeof calls, "%d", opt.calls);
  snprintf(limit, sizeof limit, "%ld", opt.limit_ms);
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/" PROG ".XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    fprintf(stderr, PROG ": cannot make a folder %s: %s\n", dir, strerror(errno));
    return 2;
  }
  char *args[] = {"--uid",   hex,   "--scenario", (char *)opt.scenario,
                  "--calls", calls, "--limit-ms", limit,
                  "--sync",  dir,   NULL};
  symmpin_test_launch sp;
  if (!symmpin_test_launch_init(&sp, PROG) || !symmpin_test_launch_start(&sp, NRANKS, args)) {
    remove_sync_dir(dir);
    return 2;
  }
  symmpin_test_launch_wait(&sp);
  long passed = 0, failed = 0;
  for (int r = 0; r < NRANKS; r++) {
    rank_counts rc = {0, 0, false};
    bool clean = symmpin_test_launch_collect(&sp, r, read_counts, &rc);
    passed += rc.passed;
    failed += rc.failed;
    /* A rank that hung after its results is judged by them (the exit status says it hung); one
     * that ended badly without a failed check counts once more. */
    if (!rc.seen || (!clean && sp.rank[r].end != SYMMPIN_TEST_RANK_HUNG_AFTER && rc.failed == 0))
      failed++;
  }
  remove_sync_dir(dir);
  printf(PROG ": %ld passed, %ld failed\n", passed, failed);
  return symmpin_test_launch_exit_code(&sp, failed == 0);
}

static void usage(void) {
  printf("usage: " PROG " [--scenario revoke|shrink] [--calls N] [--limit-ms MS]\n"
         "ncclCommRevoke, or ncclCommShrink(NCCL_SHRINK_ABORT), while rank 0's all-reduce waits\n"
         "for a peer that never comes: the call and the wait must end within MS each (default\n"
         "1000, 2000 where the 2 ranks share a GPU). An ordinary NCCL program (NCCL 2.28.7+ for\n"
         "revoke) to run with and without LD_PRELOAD=libsymmpin.so (SYMMPIN_CHOOSE=static).\n"
         "Rank r runs on GPU r %% GPUs; ranks sharing a GPU need an NCCL host id each:\n"
         "APP_RANK_WRAPPER=scripts/rank-env.sh RANK_ENV_NCCL_HOSTS=2. Ranks are bounded by\n"
         "tests/apps/launch.h (APP_RANK_TIMEOUT_S, APP_TEARDOWN_S). Last line:\n"
         "'" PROG ": N passed, M failed'; exit status 3: every check passed, but a rank hung in\n"
         "its teardown.\n"
         "  --scenario S    revoke (default) or shrink\n"
         "  --calls N       checked all-reduces before the scenario (default 400)\n"
         "  --limit-ms MS   the bound of the call and of the drain, also the wait before the call\n"
         "  -h, --help      this text\n"
         "  --version       the version and git revision\n");
}

int main(int argc, char **argv) {
  enum { OPT_SCENARIO = 256, OPT_CALLS, OPT_LIMIT, OPT_VERSION, OPT_CHILD, OPT_UID, OPT_SYNC };
  static const struct option longopts[] = {{"scenario", required_argument, NULL, OPT_SCENARIO},
                                           {"calls", required_argument, NULL, OPT_CALLS},
                                           {"limit-ms", required_argument, NULL, OPT_LIMIT},
                                           {"help", no_argument, NULL, 'h'},
                                           {"version", no_argument, NULL, OPT_VERSION},
                                           {"child", required_argument, NULL, OPT_CHILD},
                                           {"uid", required_argument, NULL, OPT_UID},
                                           {"sync", required_argument, NULL, OPT_SYNC},
                                           {NULL, 0, NULL, 0}};
  int o;
  long v;
  opterr = 0;
  while ((o = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (o) {
    case 'h': usage(); return 0;
    case OPT_VERSION: return symmpin_test_print_version(PROG);
    case OPT_SCENARIO:
      if (strcmp(optarg, "revoke") && strcmp(optarg, "shrink"))
        return symmpin_test_usage_error(PROG, "bad --scenario '%s' (revoke, shrink)", optarg);
      opt.scenario = optarg;
      break;
    case OPT_CALLS:
      if (!symmpin_test_parse_int(optarg, 1, 1000000, &v))
        return symmpin_test_usage_error(PROG, "--calls must be 1..1000000");
      opt.calls = (int)v;
      break;
    case OPT_LIMIT:
      if (!symmpin_test_parse_int(optarg, 1, 10000, &opt.limit_ms))
        return symmpin_test_usage_error(PROG, "--limit-ms must be 1..10000");
      break;
    case OPT_CHILD:
      if (!symmpin_test_parse_int(optarg, 0, NRANKS - 1, &v))
        return symmpin_test_usage_error(PROG, "bad --child '%s'", optarg);
      opt.child = (int)v;
      break;
    case OPT_UID: opt.uid = optarg; break;
    case OPT_SYNC: opt.sync_dir = optarg; break;
    default: return symmpin_test_option_error(PROG, o, argv, longopts);
    }
  }
  if (optind < argc)
    return symmpin_test_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
  if (opt.child >= 0) {
    if (!opt.uid || !opt.sync_dir || !opt.limit_ms)
      return symmpin_test_usage_error(PROG, "--child needs --uid, --sync and --limit-ms");
    return child_main();
  }
  return run_ranks();
}
