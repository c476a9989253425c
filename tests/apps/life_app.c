/* symmpin-life: NCCL's calls that change a communicator's life while an all-reduce is in flight
 * (docs/compatibility.md, NCCL 2.27+), as an ordinary NCCL program run with and without
 * LD_PRELOAD=libsymmpin.so; it knows nothing of symmpin. One process, one thread per rank, rank r
 * on GPU r (needs 2 GPUs: exit 77 otherwise). Needs an NCCL that has the calls (2.28.7+ for
 * revoke: PyTorch's 2.28.9, not the system's 2.28.3; with an older one the scenario reports the
 * call's error and fails).
 *
 *   --scenario revoke   both ranks make --calls all-reduces (past symmpin's warm-up: redirected
 *                       under the preload), checked exactly; then rank 0 makes one more while rank
 *                       1 does not, so rank 0's all-reduce waits for its peer on the GPU (checked:
 *                       its stream is still busy after 300 ms). Rank 0 revokes its communicator:
 *                       ncclCommRevoke must return, and rank 0's stream must drain, within a
 *                       second each (the waiting kernel stops, as NCCL's own does), and rank 0's
 *                       next all-reduce must return what NCCL returns for a revoked communicator
 *                       (ncclInvalidUsage). Rank 1 then revokes its own; both destroy theirs.
 *   --scenario shrink   the same in-flight wait, then rank 0 calls ncclCommShrink with
 *                       NCCL_SHRINK_ABORT excluding rank 1 (which never calls it): the call and
 *                       rank 0's stream must end within a second each, and the one-rank child's
 *                       all-reduces must be right.
 *
 * Every step has a deadline (a hang is a failure, and alarm(60) ends the process). Last line:
 * "symmpin-life: N passed, M failed". */
#include <cuda_runtime.h>
#include <getopt.h>
#include <nccl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "symmpin-life"
#define COUNT 1024 /* int32: an LL-sized all-reduce, redirected under symmpin */

static const char *scenario = "revoke";
static int calls = 400;
static _Atomic int passed, failed;
static ncclUniqueId id;
static pthread_barrier_t barrier;
static _Atomic int rank0_done;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void check(bool ok, int rank, const char *what) {
  if (ok) {
    atomic_fetch_add(&passed, 1);
  } else {
    atomic_fetch_add(&failed, 1);
    fprintf(stderr, PROG ": rank %d: FAIL %s\n", rank, what);
  }
}

/* Waits until `stream` has drained, at most `ms`: whether it did. */
static bool drains_within(cudaStream_t stream, double ms) {
  double t0 = now_ms();
  for (;;) {
    cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess) return true;
    if (q != cudaErrorNotReady) {
      cudaGetLastError();
      return true; /* an error ends the wait too; the checks after it tell */
    }
    if (now_ms() - t0 > ms) return false;
    usleep(1000);
  }
}

typedef struct rank_ctx {
  int rank;
  ncclComm_t comm;
  cudaStream_t stream;
  int32_t *buf, *host;
} rank_ctx;

/* `n` all-reduces of COUNT ints, each checked (rank r contributes r + i + k). */
static void checked_calls(rank_ctx *c, ncclComm_t comm, int nranks, int n, const char *what) {
  int bad = 0;
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < COUNT; k++) c->host[k] = c->rank + i + k;
    cudaMemcpyAsync(c->buf, c->host, COUNT * 4, cudaMemcpyHostToDevice, c->stream);
    if (ncclAllReduce(c->buf, c->buf, COUNT, ncclInt32, ncclSum, comm, c->stream) != ncclSuccess)
      bad++;
    cudaMemcpyAsync(c->host, c->buf, COUNT * 4, cudaMemcpyDeviceToHost, c->stream);
    cudaStreamSynchronize(c->stream);
    for (int k = 0; k < COUNT && !bad; k++) {
      int want = 0;
      for (int r = 0; r < nranks; r++) want += r + i + k;
      if (c->host[k] != want) bad++;
    }
  }
  check(bad == 0, c->rank, what);
}

static void *rank_main(void *arg) {
  rank_ctx *c = arg;
  cudaSetDevice(c->rank);
  cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
  cudaMalloc((void **)&c->buf, COUNT * 4);
  cudaMallocHost((void **)&c->host, COUNT * 4);
  if (ncclCommInitRank(&c->comm, 2, id, c->rank) != ncclSuccess) {
    check(false, c->rank, "ncclCommInitRank");
    return NULL;
  }
  checked_calls(c, c->comm, 2, calls, "all-reduces before the scenario");
  pthread_barrier_wait(&barrier);
  if (c->rank == 1) {
    /* Never makes the call rank 0 waits in; ends once rank 0 is done with its scenario. */
    while (!atomic_load(&rank0_done)) usleep(1000);
    if (!strcmp(scenario, "revoke")) {
      ncclResult_t rc = ncclCommRevoke(c->comm, NCCL_REVOKE_DEFAULT);
      check(rc == ncclSuccess || rc == ncclInProgress, 1, "ncclCommRevoke");
    }
    ncclCommAbort(c->comm);
    return NULL;
  }
  /* Rank 0: one more all-reduce, which waits for rank 1 on the GPU. */
  ncclAllReduce(c->buf, c->buf, COUNT, ncclInt32, ncclSum, c->comm, c->stream);
  usleep(300 * 1000);
  check(cudaStreamQuery(c->stream) == cudaErrorNotReady, 0,
        "the all-reduce without its peer is still running after 300 ms (the premise)");
  cudaGetLastError();
  double t0 = now_ms();
  if (!strcmp(scenario, "revoke")) {
    ncclResult_t rc = ncclCommRevoke(c->comm, NCCL_REVOKE_DEFAULT);
    double took = now_ms() - t0;
    printf(PROG ": rank 0: ncclCommRevoke returned %d after %.1f ms\n", (int)rc, took);
    check(rc == ncclSuccess || rc == ncclInProgress, 0, "ncclCommRevoke");
    check(took < 1000, 0, "ncclCommRevoke within a second");
    t0 = now_ms();
    bool drained = drains_within(c->stream, 1000);
    printf(PROG ": rank 0: stream %s after %.1f ms\n", drained ? "drained" : "still busy",
           now_ms() - t0);
    check(drained, 0, "the waiting all-reduce stopped within a second of the revoke");
    ncclResult_t later =
        ncclAllReduce(c->buf, c->buf, COUNT, ncclInt32, ncclSum, c->comm, c->stream);
    printf(PROG ": rank 0: an all-reduce after the revoke returned %d\n", (int)later);
    check(later == ncclInvalidUsage, 0, "an all-reduce after the revoke returns ncclInvalidUsage");
    check(drains_within(c->stream, 1000), 0, "nothing runs after the revoke");
    ncclCommAbort(c->comm);
  } else {
    int excluded[] = {1};
    ncclComm_t child = NULL;
    ncclResult_t rc = ncclCommShrink(c->comm, excluded, 1, &child, NULL, NCCL_SHRINK_ABORT);
    double took = now_ms() - t0;
    printf(PROG ": rank 0: ncclCommShrink(NCCL_SHRINK_ABORT) returned %d after %.1f ms\n", (int)rc,
           took);
    check(rc == ncclSuccess && child, 0, "ncclCommShrink");
    check(took < 1000, 0, "ncclCommShrink within a second");
    check(drains_within(c->stream, 1000), 0,
          "the waiting all-reduce stopped within a second of the shrink");
    if (child) {
      checked_calls(c, child, 1, 64, "the one-rank child's all-reduces");
      ncclCommDestroy(child);
    }
    ncclCommAbort(c->comm);
  }
  atomic_store(&rank0_done, 1);
  return NULL;
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = PROG ": FAIL: still running after 60 s (a hang)\n";
  ssize_t w = write(2, msg, sizeof msg - 1);
  (void)w;
  _exit(1);
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {{"scenario", required_argument, NULL, 's'},
                                           {"calls", required_argument, NULL, 'c'},
                                           {NULL, 0, NULL, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    if (o == 's')
      scenario = optarg;
    else if (o == 'c')
      calls = atoi(optarg);
    else
      return 2;
  }
  if (strcmp(scenario, "revoke") && strcmp(scenario, "shrink")) {
    fprintf(stderr, PROG ": --scenario revoke|shrink\n");
    return 2;
  }
  int ngpus = 0;
  if (cudaGetDeviceCount(&ngpus) != cudaSuccess || ngpus < 2) {
    printf(PROG ": needs 2 GPUs (found %d): SKIP\n", ngpus);
    return 77;
  }
  signal(SIGALRM, on_alarm);
  alarm(60);
  ncclGetUniqueId(&id);
  pthread_barrier_init(&barrier, NULL, 2);
  rank_ctx ctx[2] = {{.rank = 0}, {.rank = 1}};
  pthread_t t[2];
  for (int r = 0; r < 2; r++) pthread_create(&t[r], NULL, rank_main, &ctx[r]);
  for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
  printf(PROG ": %d passed, %d failed\n", atomic_load(&passed), atomic_load(&failed));
  return atomic_load(&failed) ? 1 : 0;
}
