/* symmpin-trust: the failure scenarios of docs/design.md ("Errors", "Routing") as an ordinary NCCL
 * program, run with and without LD_PRELOAD=libsymmpin.so and compared. One process per GPU (the
 * parent spawns one child per rank, as torchrun does). It knows nothing of symmpin; for the fault
 * scenarios it only reads SYMMPIN_TEST_FAULT to know which call is the faulty one (to time how
 * long the error took to show).
 *
 *   --scenario side     after warm-up, rank 1 makes one all-reduce on a stream never used before,
 *                       ordered with its default stream by events (as PyTorch's wait_stream does),
 *                       while the other ranks use their default stream: every result must be
 *                       right and no error may appear.
 *   --scenario sites    after warm-up, rank 1 reaches some all-reduces from other call sites than
 *                       its peers (data-dependent control flow: the same calls, in the same order,
 *                       from other code): every result must be right and no error may appear.
 *   --scenario fault    run with SYMMPIN_TEST_FAULT=skip:R:K or diverge:R:K: every rank must see
 *                       an error (a failed call or ncclCommGetAsyncError) within a second of call
 *                       K, and no result may be wrong while the communicator reports no error. A
 *                       watchdog thread polls ncclCommGetAsyncError every 20 ms and aborts the
 *                       communicator on an error, as PyTorch's does, so the program ends instead
 *                       of hanging. Without symmpin (or with the fault on no call) it runs clean.
 *   --scenario abort    rank 0 sleeps --straggle MS before call 100 while the others wait inside
 *                       it; their watchdog aborts the communicator after --abort-after MS, and the
 *                       abort must return promptly (under a second).
 *   --scenario graphs   after warm-up, capture two CUDA graphs of all-reduces (shapes the warm-up
 *                       never made) on streams the warm-up never used, as torch.cuda.graph does,
 *                       and replay them alternately --cycles N times each, moving between the
 *                       default and a side stream, with an eager all-reduce after every replay:
 *                       every result must be right and no error may appear.
 *   --scenario churn    --cycles N times: split a communicator off the world one, make
 *                       --calls-per-cycle (64) all-reduces on it (past warm-up: redirected under
 *                       symmpin), destroy it. Open files and /dev/shm entries must not grow; the
 *                       growth of device memory is printed for the suite to compare with the run
 *                       without symmpin. Measured after a barrier on the world communicator, so
 *                       ranks sharing a GPU (or a /dev/shm) never count a peer's communicator that
 *                       is still being destroyed. --churn-seconds S: the ranks agree (a max over
 *                       that barrier) to stop after S seconds; CHURN says how many cycles ran.
 *   --scenario busy     split a communicator, make 64 all-reduces on it, then keep another
 *                       stream busy for a second (a host function that sleeps) and destroy the
 *                       communicator: the time ncclCommDestroy takes is printed, for the suite to
 *                       compare with NCCL alone (a destroy that synchronizes the device waits the
 *                       whole second). Then the same with ncclCommAbort.
 *
 * Ranks are processes started by tests/apps/launch.h (bounded waits, the GPU suite's rank wrapper),
 * rank r on GPU r % GPUs. Each rank prints its RESULT line before its teardown.
 * Inputs are random 32-bit integers and floats holding small integers (exact sums in any order),
 * checked exactly against a CPU reference. Last line: "symmpin-trust: N passed, M failed"; exit
 * status 3 when every result was right but a rank hung after printing them. */
#include <cuda_runtime.h>
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/apps/launch.h"
#include "tests/gpu/gpu_common.h"

#define PROG "symmpin-trust"
#define MAX_RANKS SYMMPIN_TEST_LAUNCH_MAX_RANKS
#define CHECK_EVERY 8 /* calls between host checks (results stay in flight meanwhile) */

static struct {
  const char *scenario;
  int nranks, calls, cycles, calls_per_cycle;
  long straggle_ms, abort_after_ms, churn_seconds;
  int child;
  const char *uid;
} opt = {.scenario = "side",
         .calls = 400,
         .cycles = 1000,
         .calls_per_cycle = 64,
         .straggle_ms = 5000,
         .abort_after_ms = 1000,
         .child = -1};

/* Three call shapes, each from its own call site in the loop: one LL-sized, one mid, one copy. */
typedef struct shape {
  ncclDataType_t dtype;
  size_t count;
} shape;
static const shape shapes[] = {{ncclInt32, 1024}, {ncclFloat32, 8192}, {ncclInt32, 65536}};
#define NSHAPES 3

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct rank_ctx {
  int rank, nranks, dev;
  ncclComm_t comm;
  cudaStream_t side;
  cudaEvent_t ev;
  void *send[NSHAPES], *recv[NSHAPES];
  /* Pinned host staging, one per call in flight: a copy from pinned memory reads it when the
   * copy runs, not when it is enqueued, so a buffer is refilled only after the next check's sync. */
  int32_t *host_in[CHECK_EVERY], *host_out[CHECK_EVERY];
  int out_shape[CHECK_EVERY];
  uint64_t out_call[CHECK_EVERY];
  long passed, failed;
  /* the watchdog */
  pthread_t watchdog;
  pthread_mutex_t nccl_lock; /* held around NCCL calls that the watchdog's abort must not race */
  _Atomic int stop, aborted, error_code;
  _Atomic uint64_t progress; /* calls issued or checked: the abort scenario's watchdog timer */
  _Atomic double error_at_ms;
  double abort_took_ms;
  uint64_t fault_call; /* SYMMPIN_TEST_FAULT's call, 0 = none */
  double issued_ms;    /* when fault_call was issued */
} rank_ctx;

static int32_t value_of(int rank, uint64_t call, size_t i, bool small) {
  uint64_t h = symmpin_test_splitmix64(((uint64_t)rank << 48) ^ (call << 20) ^ i);
  /* floats: small integers (exact sums); ints: anything (wrapping sums are exact too) */
  return small ? (int32_t)(h % 2001) - 1000 : (int32_t)h;
}

static void fill_shape(int32_t *in, int rank, const shape *s, uint64_t call) {
  for (size_t i = 0; i < s->count; i++) {
    int32_t v = value_of(rank, call, i, s->dtype == ncclFloat32);
    if (s->dtype == ncclFloat32) {
      float f = (float)v;
      memcpy(&in[i], &f, 4);
    } else {
      in[i] = v;
    }
  }
}

static void fill(int32_t *in, int rank, int k, uint64_t call) { fill_shape(in, rank, &shapes[k], call); }

static bool verify_shape(rank_ctx *c, const shape *s, uint64_t call, const int32_t *out) {
  for (size_t i = 0; i < s->count; i++) {
    int64_t sum = 0;
    uint32_t usum = 0;
    for (int r = 0; r < c->nranks; r++) {
      int32_t v = value_of(r, call, i, s->dtype == ncclFloat32);
      sum += v;
      usum += (uint32_t)v;
    }
    bool ok;
    if (s->dtype == ncclFloat32) {
      float f;
      memcpy(&f, &out[i], 4);
      ok = f == (float)sum;
    } else {
      ok = (uint32_t)out[i] == usum;
    }
    if (!ok) {
      if (c->failed < 5)
        fprintf(stderr, PROG ": rank %d: call %llu (%zu elements) element %zu is wrong\n",
                c->rank, (unsigned long long)call, s->count, i);
      return false;
    }
  }
  return true;
}

static bool verify(rank_ctx *c, int k, uint64_t call, const int32_t *out) {
  return verify_shape(c, &shapes[k], call, out);
}

static void *watchdog_main(void *p) {
  rank_ctx *c = p;
  double still_since = now_ms();
  uint64_t seen = 0;
  while (!atomic_load(&c->stop)) {
    usleep(20000);
    pthread_mutex_lock(&c->nccl_lock);
    if (atomic_load(&c->aborted)) {
      pthread_mutex_unlock(&c->nccl_lock);
      break;
    }
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(c->comm, &async);
    /* As PyTorch's watchdog: no progress for --abort-after ms means stuck (abort scenario). */
    uint64_t now_progress = atomic_load(&c->progress);
    if (now_progress != seen) {
      seen = now_progress;
      still_since = now_ms();
    }
    bool timed_out = !strcmp(opt.scenario, "abort") && now_ms() - still_since > opt.abort_after_ms;
    if (async != ncclSuccess || timed_out) {
      int none = 0;
      if (async != ncclSuccess && atomic_compare_exchange_strong(&c->error_code, &none, async))
        atomic_store(&c->error_at_ms, now_ms());
      double t0 = now_ms();
      ncclCommAbort(c->comm);
      c->abort_took_ms = now_ms() - t0;
      atomic_store(&c->aborted, 1);
      pthread_mutex_unlock(&c->nccl_lock);
      break;
    }
    pthread_mutex_unlock(&c->nccl_lock);
  }
  return NULL;
}

static void setup(rank_ctx *c) {
  SYMMPIN_TEST_CUDA(cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking));
  SYMMPIN_TEST_CUDA(cudaEventCreateWithFlags(&c->ev, cudaEventDisableTiming));
  for (int k = 0; k < NSHAPES; k++) {
    size_t bytes = shapes[k].count * 4;
    SYMMPIN_TEST_CUDA(cudaMalloc(&c->send[k], bytes));
    SYMMPIN_TEST_CUDA(cudaMalloc(&c->recv[k], bytes));
  }
  for (int j = 0; j < CHECK_EVERY; j++) {
    SYMMPIN_TEST_CUDA(cudaMallocHost((void **)&c->host_in[j], shapes[NSHAPES - 1].count * 4));
    SYMMPIN_TEST_CUDA(cudaMallocHost((void **)&c->host_out[j], shapes[NSHAPES - 1].count * 4));
  }
  pthread_mutex_init(&c->nccl_lock, NULL);
}

static void teardown(rank_ctx *c) {
  for (int k = 0; k < NSHAPES; k++) {
    cudaFree(c->send[k]);
    cudaFree(c->recv[k]);
  }
  for (int j = 0; j < CHECK_EVERY; j++) {
    cudaFreeHost(c->host_in[j]);
    cudaFreeHost(c->host_out[j]);
  }
  cudaEventDestroy(c->ev);
  cudaStreamDestroy(c->side);
}

/* Three call sites (noinline: distinct return addresses), as a model's layers would have. */
__attribute__((noinline)) static ncclResult_t site0(rank_ctx *c, cudaStream_t s) {
  return ncclAllReduce(c->send[0], c->recv[0], shapes[0].count, shapes[0].dtype, ncclSum, c->comm, s);
}
__attribute__((noinline)) static ncclResult_t site1(rank_ctx *c, cudaStream_t s) {
  return ncclAllReduce(c->send[1], c->recv[1], shapes[1].count, shapes[1].dtype, ncclSum, c->comm, s);
}
__attribute__((noinline)) static ncclResult_t site2(rank_ctx *c, cudaStream_t s) {
  return ncclAllReduce(c->send[2], c->recv[2], shapes[2].count, shapes[2].dtype, ncclSum, c->comm, s);
}

/* The same three calls from other code: rank 1's data-dependent branch in the sites scenario. */
__attribute__((noinline)) static ncclResult_t other_site0(rank_ctx *c, cudaStream_t s) {
  return ncclAllReduce(c->send[0], c->recv[0], shapes[0].count, shapes[0].dtype, ncclSum, c->comm, s);
}
__attribute__((noinline)) static ncclResult_t other_site1(rank_ctx *c, cudaStream_t s) {
  return ncclAllReduce(c->send[1], c->recv[1], shapes[1].count, shapes[1].dtype, ncclSum, c->comm, s);
}
__attribute__((noinline)) static ncclResult_t other_site2(rank_ctx *c, cudaStream_t s) {
  return ncclAllReduce(c->send[2], c->recv[2], shapes[2].count, shapes[2].dtype, ncclSum, c->comm, s);
}

/* In the sites scenario, whether rank 1 makes call n from the other sites: a run of 30 calls
 * from the middle on, then one call in 7 (all after the warm-up). */
static bool from_other_site(const rank_ctx *c, uint64_t n, uint64_t ncalls) {
  return !strcmp(opt.scenario, "sites") && c->rank == 1 && n > ncalls / 2 &&
         (n <= ncalls / 2 + 30 || n % 7 == 0);
}

/* Check the results of the last calls, once the default stream has them. */
static void check_pending(rank_ctx *c, int npending) {
  cudaError_t e = cudaStreamSynchronize(0);
  if (e != cudaSuccess) {
    fprintf(stderr, PROG ": rank %d: stream: %s\n", c->rank, cudaGetErrorString(e));
    cudaGetLastError();
  }
  /* Results are only owed while the communicator reports no error (NCCL's contract for
   * asynchronous errors): ask first, then judge. */
  ncclResult_t async = ncclSuccess;
  pthread_mutex_lock(&c->nccl_lock);
  if (!atomic_load(&c->aborted)) ncclCommGetAsyncError(c->comm, &async);
  pthread_mutex_unlock(&c->nccl_lock);
  bool error = async != ncclSuccess || atomic_load(&c->error_code) || atomic_load(&c->aborted);
  if (async != ncclSuccess) {
    int none = 0;
    if (atomic_compare_exchange_strong(&c->error_code, &none, async))
      atomic_store(&c->error_at_ms, now_ms());
  }
  atomic_fetch_add(&c->progress, 1);
  for (int j = 0; j < npending; j++) {
    if (verify(c, c->out_shape[j], c->out_call[j], c->host_out[j])) {
      c->passed++;
    } else if (error) {
      c->passed++; /* the program was told: a wrong result under a reported error is allowed */
    } else {
      c->failed++;
      fprintf(stderr, PROG ": rank %d: call %llu: WRONG RESULT with no error reported\n",
              c->rank, (unsigned long long)c->out_call[j]);
    }
  }
}

/* The loop: call n uses shape n % 3 from its own site; results checked every CHECK_EVERY calls.
 * side_call: the call rank 1 makes on its side stream (0 = none). Returns calls completed. */
static uint64_t run_calls(rank_ctx *c, uint64_t ncalls, uint64_t side_call) {
  int npending = 0;
  uint64_t n;
  for (n = 1; n <= ncalls; n++) {
    if (atomic_load(&c->aborted) || atomic_load(&c->error_code)) break;
    int k = (int)(n % NSHAPES);
    fill(c->host_in[npending], c->rank, k, n);
    SYMMPIN_TEST_CUDA(cudaMemcpyAsync(c->send[k], c->host_in[npending], shapes[k].count * 4,
                                      cudaMemcpyHostToDevice, 0));
    cudaStream_t s = 0;
    if (n == side_call && c->rank == 1) {
      s = c->side; /* after the default stream's work, as torch's wait_stream orders it */
      SYMMPIN_TEST_CUDA(cudaEventRecord(c->ev, 0));
      SYMMPIN_TEST_CUDA(cudaStreamWaitEvent(s, c->ev, 0));
    }
    if (!strcmp(opt.scenario, "abort") && c->rank == 0 && n == 100) usleep(opt.straggle_ms * 1000);
    if (n == c->fault_call) c->issued_ms = now_ms();
    atomic_fetch_add(&c->progress, 1);
    pthread_mutex_lock(&c->nccl_lock);
    bool other = from_other_site(c, n, ncalls);
    ncclResult_t rc = atomic_load(&c->aborted) ? ncclInvalidUsage
                      : k == 0                 ? (other ? other_site0 : site0)(c, s)
                      : k == 1                 ? (other ? other_site1 : site1)(c, s)
                                               : (other ? other_site2 : site2)(c, s);
    pthread_mutex_unlock(&c->nccl_lock);
    if (rc != ncclSuccess) {
      int none = 0;
      if (atomic_compare_exchange_strong(&c->error_code, &none, rc))
        atomic_store(&c->error_at_ms, now_ms());
      fprintf(stderr, PROG ": rank %d: call %llu returned %d (%s)\n", c->rank,
              (unsigned long long)n, (int)rc, ncclGetErrorString(rc));
      break;
    }
    if (s != 0) {
      SYMMPIN_TEST_CUDA(cudaEventRecord(c->ev, s));
      SYMMPIN_TEST_CUDA(cudaStreamWaitEvent(0, c->ev, 0));
    }
    SYMMPIN_TEST_CUDA(cudaMemcpyAsync(c->host_out[npending], c->recv[k], shapes[k].count * 4,
                                      cudaMemcpyDeviceToHost, 0));
    c->out_shape[npending] = k;
    c->out_call[npending] = n;
    if (++npending == CHECK_EVERY) {
      check_pending(c, npending);
      npending = 0;
    }
  }
  if (npending) check_pending(c, npending);
  return n - 1;
}

static void start_watchdog(rank_ctx *c) {
  if (pthread_create(&c->watchdog, NULL, watchdog_main, c) != 0) SYMMPIN_TEST_FAIL("pthread_create");
}

static void stop_watchdog(rank_ctx *c) {
  atomic_store(&c->stop, 1);
  pthread_join(c->watchdog, NULL);
}

static void expect(rank_ctx *c, bool ok, const char *what) {
  if (ok) {
    c->passed++;
  } else {
    c->failed++;
    fprintf(stderr, PROG ": rank %d: expected %s\n", c->rank, what);
  }
}

static uint64_t fault_call_of_env(void) {
  const char *f = getenv("SYMMPIN_TEST_FAULT");
  char kind[16];
  int rank;
  unsigned long long call;
  if (f && sscanf(f, "%15[a-z]:%d:%llu", kind, &rank, &call) == 3) return call;
  return 0;
}

static int open_fds(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

static int shm_boards(void) {
  int n = 0;
  DIR *d = opendir("/dev/shm");
  for (struct dirent *e; d && (e = readdir(d));) n += !strncmp(e->d_name, "symmpin-", 8);
  if (d) closedir(d);
  return n;
}

/* ---- the graphs scenario ---- */

/* Shapes only the graphs use (LL, LL, copy sized on 2 ranks), so the warm-up never planned them. */
static const shape gshapes[] = {{ncclInt32, 3000}, {ncclFloat32, 20000}, {ncclInt32, 100000}};
#define GRAPHS 2
#define GRAPH_MAX_CALLS 4
/* Graph 0: shapes 0, 1, 2; graph 1: shapes 0, 1, 0, 2 (a shape twice: two calls, two buffers). */
static const int graph_calls[GRAPHS][GRAPH_MAX_CALLS] = {{0, 1, 2, -1}, {0, 1, 0, 2}};

/* The call site inside the graphs (noinline: its own return address). */
__attribute__((noinline)) static ncclResult_t graph_site(rank_ctx *c, void *send, void *recv,
                                                         const shape *s, cudaStream_t st) {
  return ncclAllReduce(send, recv, s->count, s->dtype, ncclSum, c->comm, st);
}

typedef struct graph_run {
  cudaGraphExec_t exec[GRAPHS];
  void *send[GRAPHS][GRAPH_MAX_CALLS], *recv[GRAPHS][GRAPH_MAX_CALLS];
  /* pinned staging per replay in flight: the graph's calls, then the eager call */
  int32_t *in[CHECK_EVERY][GRAPH_MAX_CALLS + 1], *out[CHECK_EVERY][GRAPH_MAX_CALLS + 1];
  int ncaptured;
} graph_run;

static void graph_capture(rank_ctx *c, graph_run *g, int k) {
  cudaStream_t cs;
  SYMMPIN_TEST_CUDA(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  /* The program's buffers, written before capture (the graph only reads and writes them). */
  for (int j = 0; j < GRAPH_MAX_CALLS && graph_calls[k][j] >= 0; j++) {
    size_t bytes = gshapes[graph_calls[k][j]].count * 4;
    SYMMPIN_TEST_CUDA(cudaMalloc(&g->send[k][j], bytes));
    SYMMPIN_TEST_CUDA(cudaMalloc(&g->recv[k][j], bytes));
  }
  SYMMPIN_TEST_CUDA(cudaDeviceSynchronize());
  SYMMPIN_TEST_CUDA(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
  for (int j = 0; j < GRAPH_MAX_CALLS && graph_calls[k][j] >= 0; j++) {
    ncclResult_t rc = graph_site(c, g->send[k][j], g->recv[k][j], &gshapes[graph_calls[k][j]], cs);
    if (rc != ncclSuccess) {
      fprintf(stderr, PROG ": rank %d: captured call returned %d\n", c->rank, (int)rc);
      atomic_store(&c->error_code, rc);
    }
    g->ncaptured++;
  }
  cudaGraph_t graph;
  SYMMPIN_TEST_CUDA(cudaStreamEndCapture(cs, &graph));
  SYMMPIN_TEST_CUDA(cudaGraphInstantiate(&g->exec[k], graph, 0));
  SYMMPIN_TEST_CUDA(cudaGraphDestroy(graph));
  SYMMPIN_TEST_CUDA(cudaStreamDestroy(cs));
}

/* Check the replays in flight: the graphs' calls and the eager call of each. */
static void graph_check(rank_ctx *c, graph_run *g, uint64_t first, uint64_t n) {
  SYMMPIN_TEST_CUDA(cudaDeviceSynchronize());
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(c->comm, &async);
  if (async != ncclSuccess) atomic_store(&c->error_code, async);
  for (uint64_t i = first; i < first + n; i++) {
    int k = (int)(i % GRAPHS), p = (int)(i - first);
    for (int j = 0; j <= GRAPH_MAX_CALLS; j++) {
      bool eager = j == GRAPH_MAX_CALLS;
      if (!eager && graph_calls[k][j] < 0) continue;
      const shape *s = eager ? &shapes[i % NSHAPES] : &gshapes[graph_calls[k][j]];
      if (verify_shape(c, s, 1000000 + i * 8 + (uint64_t)j, g->out[p][j])) {
        c->passed++;
      } else {
        c->failed++;
        fprintf(stderr, PROG ": rank %d: replay %llu call %d: WRONG RESULT%s\n", c->rank,
                (unsigned long long)i, j, async != ncclSuccess ? " (error reported)" : "");
      }
    }
  }
}

static void scenario_graphs(rank_ctx *c) {
  uint64_t warm = run_calls(c, 200, 0); /* eager: plans the eager shapes only */
  static graph_run g;
  for (int k = 0; k < GRAPHS; k++) graph_capture(c, &g, k);
  for (int p = 0; p < CHECK_EVERY; p++)
    for (int j = 0; j <= GRAPH_MAX_CALLS; j++) {
      SYMMPIN_TEST_CUDA(cudaMallocHost((void **)&g.in[p][j], gshapes[2].count * 4));
      SYMMPIN_TEST_CUDA(cudaMallocHost((void **)&g.out[p][j], gshapes[2].count * 4));
    }
  uint64_t replays = 2 * (uint64_t)opt.cycles, first = 0;
  cudaStream_t prev = 0;
  for (uint64_t i = 0; i < replays && !atomic_load(&c->error_code); i++) {
    int k = (int)(i % GRAPHS), p = (int)(i - first);
    /* Graph 0, graph 1 on the default stream, then both on the side stream, and so on; each
     * stream waits for the other's work first (one order of NCCL calls, as NCCL requires). */
    cudaStream_t s = (i / 2) % 2 ? c->side : 0;
    if (s != prev) {
      SYMMPIN_TEST_CUDA(cudaEventRecord(c->ev, prev));
      SYMMPIN_TEST_CUDA(cudaStreamWaitEvent(s, c->ev, 0));
      prev = s;
    }
    for (int j = 0; j < GRAPH_MAX_CALLS && graph_calls[k][j] >= 0; j++) {
      const shape *sh = &gshapes[graph_calls[k][j]];
      fill_shape(g.in[p][j], c->rank, sh, 1000000 + i * 8 + (uint64_t)j);
      SYMMPIN_TEST_CUDA(cudaMemcpyAsync(g.send[k][j], g.in[p][j], sh->count * 4,
                                        cudaMemcpyHostToDevice, s));
    }
    SYMMPIN_TEST_CUDA(cudaGraphLaunch(g.exec[k], s));
    for (int j = 0; j < GRAPH_MAX_CALLS && graph_calls[k][j] >= 0; j++)
      SYMMPIN_TEST_CUDA(cudaMemcpyAsync(g.out[p][j], g.recv[k][j],
                                        gshapes[graph_calls[k][j]].count * 4,
                                        cudaMemcpyDeviceToHost, s));
    /* An eager all-reduce after the replay, on the same stream, into the eager slots. */
    int e = (int)(i % NSHAPES);
    fill(g.in[p][GRAPH_MAX_CALLS], c->rank, e, 1000000 + i * 8 + GRAPH_MAX_CALLS);
    SYMMPIN_TEST_CUDA(cudaMemcpyAsync(c->send[e], g.in[p][GRAPH_MAX_CALLS], shapes[e].count * 4,
                                      cudaMemcpyHostToDevice, s));
    ncclResult_t rc = e == 0 ? site0(c, s) : e == 1 ? site1(c, s) : site2(c, s);
    if (rc != ncclSuccess) {
      atomic_store(&c->error_code, rc);
      fprintf(stderr, PROG ": rank %d: eager call returned %d\n", c->rank, (int)rc);
    }
    SYMMPIN_TEST_CUDA(cudaMemcpyAsync(g.out[p][GRAPH_MAX_CALLS], c->recv[e], shapes[e].count * 4,
                                      cudaMemcpyDeviceToHost, s));
    if (p + 1 == CHECK_EVERY || i + 1 == replays) {
      graph_check(c, &g, first, (uint64_t)p + 1);
      first = i + 1;
    }
  }
  expect(c, atomic_load(&c->error_code) == 0, "no error");
  printf("GRAPHS rank=%d warmup_calls=%llu captured_calls=%d replays=%llu errors=%d\n", c->rank,
         (unsigned long long)warm, g.ncaptured, (unsigned long long)replays,
         atomic_load(&c->error_code));
  for (int k = 0; k < GRAPHS; k++) {
    cudaGraphExecDestroy(g.exec[k]);
    for (int j = 0; j < GRAPH_MAX_CALLS && graph_calls[k][j] >= 0; j++) {
      cudaFree(g.send[k][j]);
      cudaFree(g.recv[k][j]);
    }
  }
  for (int p = 0; p < CHECK_EVERY; p++)
    for (int j = 0; j <= GRAPH_MAX_CALLS; j++) {
      cudaFreeHost(g.in[p][j]);
      cudaFreeHost(g.out[p][j]);
    }
}

/* Every rank has ended what it made before (its kernels done, the communicator destroyed): an
 * async-error query on the world communicator (as a watchdog would make; a library may free what
 * ended there), then a max over the ranks of `vote` by an all-reduce on it, synchronized. */
__attribute__((noinline)) static int world_barrier(rank_ctx *c, ncclComm_t world, int vote) {
  SYMMPIN_TEST_CUDA(cudaDeviceSynchronize());
  ncclResult_t async = ncclSuccess;
  SYMMPIN_TEST_NCCL(ncclCommGetAsyncError(world, &async));
  if (async != ncclSuccess)
    SYMMPIN_TEST_FAIL("rank %d: world communicator error %d", c->rank, async);
  SYMMPIN_TEST_CUDA(cudaMemcpy(c->send[0], &vote, sizeof vote, cudaMemcpyHostToDevice));
  SYMMPIN_TEST_NCCL(ncclAllReduce(c->send[0], c->recv[0], 1, ncclInt32, ncclMax, world, 0));
  SYMMPIN_TEST_CUDA(cudaMemcpy(&vote, c->recv[0], sizeof vote, cudaMemcpyDeviceToHost));
  return vote;
}

static void scenario_churn(rank_ctx *c) {
  size_t free0 = 0, free1 = 0, total;
  int fds0 = 0, shm0 = 0, cyc, done_cycles = 0;
  ncclComm_t world = c->comm;
  /* The world communicator in use first, as a program's would be (so whatever a library sets
   * up for it is there before the baseline). */
  for (int i = 0; i < 200; i++) world_barrier(c, world, 0);
  double t0 = now_ms();
  for (cyc = 1; cyc <= opt.cycles; cyc++) {
    SYMMPIN_TEST_NCCL(ncclCommSplit(world, 0, c->rank, &c->comm, NULL));
    uint64_t done = run_calls(c, (uint64_t)opt.calls_per_cycle, 0);
    if (done != (uint64_t)opt.calls_per_cycle || c->failed) {
      fprintf(stderr, PROG ": rank %d: cycle %d stopped after %llu calls\n", c->rank, cyc,
              (unsigned long long)done);
      c->failed++;
      break;
    }
    SYMMPIN_TEST_NCCL(ncclCommDestroy(c->comm));
    done_cycles = cyc;
    bool over = opt.churn_seconds && now_ms() - t0 > opt.churn_seconds * 1e3;
    int stop = world_barrier(c, world, over);
    if (cyc % 100 == 0 || cyc == 10)
      fprintf(stderr, PROG ": rank %d: %d cycles in %.1f s\n", c->rank, cyc, (now_ms() - t0) / 1e3);
    if (cyc == 10) { /* past first-use allocations (NCCL's and CUDA's own caches) */
      SYMMPIN_TEST_CUDA(cudaMemGetInfo(&free0, &total));
      fds0 = open_fds();
      shm0 = shm_boards();
    }
    if (stop) break;
  }
  c->comm = world;
  SYMMPIN_TEST_CUDA(cudaMemGetInfo(&free1, &total));
  int fds1 = open_fds(), shm1 = shm_boards();
  long long grew = (long long)free0 - (long long)free1;
  printf("CHURN rank=%d cycles=%d wanted=%d seconds=%.1f device_bytes_grown=%lld fds=%d->%d "
         "shm_boards=%d->%d\n",
         c->rank, done_cycles, opt.cycles, (now_ms() - t0) / 1e3, grew, fds0, fds1, shm0, shm1);
  /* Device memory is judged against the same run without symmpin (scripts/gpu-suite.sh): NCCL's
   * own caches move it too. Files and boards are symmpin's alone. */
  expect(c, done_cycles >= 10, "at least 10 cycles (the baseline)");
  expect(c, fds1 <= fds0, "no more open files");
  expect(c, shm1 <= shm0, "no more /dev/shm boards");
}

static void CUDART_CB sleep_a_second(void *arg) {
  (void)arg;
  usleep(1000 * 1000);
}

/* How long ending a used communicator takes while another stream of the device is busy. */
static double end_while_busy(rank_ctx *c, ncclComm_t world, bool abort) {
  SYMMPIN_TEST_NCCL(ncclCommSplit(world, 0, c->rank, &c->comm, NULL));
  uint64_t done = run_calls(c, 64, 0);
  expect(c, done == 64, "64 calls on the split communicator");
  SYMMPIN_TEST_CUDA(cudaDeviceSynchronize()); /* the calls are done: only the busy stream runs */
  cudaStream_t busy;
  SYMMPIN_TEST_CUDA(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
  SYMMPIN_TEST_CUDA(cudaLaunchHostFunc(busy, sleep_a_second, NULL));
  double t0 = now_ms();
  if (abort)
    SYMMPIN_TEST_NCCL(ncclCommAbort(c->comm));
  else
    SYMMPIN_TEST_NCCL(ncclCommDestroy(c->comm));
  double dt = now_ms() - t0;
  SYMMPIN_TEST_CUDA(cudaStreamSynchronize(busy));
  SYMMPIN_TEST_CUDA(cudaStreamDestroy(busy));
  c->comm = world;
  return dt;
}

static void scenario_busy(rank_ctx *c) {
  ncclComm_t world = c->comm;
  double destroy_ms = end_while_busy(c, world, false);
  double abort_ms = end_while_busy(c, world, true);
  printf("BUSY rank=%d destroy_ms=%.0f abort_ms=%.0f\n", c->rank, destroy_ms, abort_ms);
}

static int child_main(void) {
  ncclUniqueId id;
  if (!symmpin_test_hex_decode(opt.uid, id.internal, sizeof id.internal))
    return symmpin_test_usage_error(PROG, "bad --uid '%s'", opt.uid);
  int ngpus;
  SYMMPIN_TEST_CUDA(cudaGetDeviceCount(&ngpus));
  static rank_ctx c;
  c.rank = opt.child;
  c.nranks = opt.nranks;
  c.dev = c.rank % ngpus;
  SYMMPIN_TEST_CUDA(cudaSetDevice(c.dev));
  SYMMPIN_TEST_NCCL(ncclCommInitRank(&c.comm, opt.nranks, id, c.rank));
  setup(&c);
  const char *sc = opt.scenario;
  if (!strcmp(sc, "side")) {
    uint64_t done = run_calls(&c, (uint64_t)opt.calls, (uint64_t)opt.calls / 2);
    expect(&c, done == (uint64_t)opt.calls, "every call to complete");
    expect(&c, atomic_load(&c.error_code) == 0, "no error");
    printf("SIDE rank=%d calls=%llu side_call=%d errors=%d\n", c.rank, (unsigned long long)done,
           opt.calls / 2, atomic_load(&c.error_code));
  } else if (!strcmp(sc, "sites")) {
    uint64_t done = run_calls(&c, (uint64_t)opt.calls, 0);
    uint64_t other = 0;
    for (uint64_t n = 1; n <= done; n++) other += from_other_site(&c, n, (uint64_t)opt.calls);
    expect(&c, done == (uint64_t)opt.calls, "every call to complete");
    expect(&c, atomic_load(&c.error_code) == 0, "no error");
    printf("SITES rank=%d calls=%llu from_other_sites=%llu errors=%d\n", c.rank,
           (unsigned long long)done, (unsigned long long)other, atomic_load(&c.error_code));
  } else if (!strcmp(sc, "fault")) {
    c.fault_call = fault_call_of_env();
    start_watchdog(&c);
    uint64_t done = run_calls(&c, (uint64_t)opt.calls, 0);
    /* Blocked ranks are freed by the watchdog's abort; give it time to see the error. */
    double wait0 = now_ms();
    while (c.fault_call && !atomic_load(&c.error_code) && now_ms() - wait0 < 5000) usleep(10000);
    stop_watchdog(&c);
    int err = atomic_load(&c.error_code);
    /* A rank may learn of the fault before it reaches the faulty call itself (a peer ahead of
     * it raised the alarm): then the error came "before" the call, 0 ms after it. */
    double dt = !err ? -1 : c.issued_ms == 0 ? 0 : atomic_load(&c.error_at_ms) - c.issued_ms;
    printf("FAULT rank=%d fault_call=%llu calls_done=%llu error=%d error_after_ms=%.0f "
           "aborted=%d\n", c.rank, (unsigned long long)c.fault_call, (unsigned long long)done,
           err, dt, atomic_load(&c.aborted));
    if (c.fault_call) {
      expect(&c, err != 0, "an error reported for the faulty call");
      expect(&c, err == 0 || dt < 1000, "the error within a second of the faulty call");
    } else {
      expect(&c, err == 0 && done == (uint64_t)opt.calls, "a clean run without a fault");
    }
  } else if (!strcmp(sc, "abort")) {
    /* Every rank's watchdog aborts after --abort-after ms without progress: the waiting ranks
     * with an all-reduce in flight (rank 0 is asleep before its call 100), rank 0 in its sleep. */
    start_watchdog(&c);
    run_calls(&c, 200, 0);
    double wait0 = now_ms();
    while (!atomic_load(&c.aborted) && now_ms() - wait0 < 30000) usleep(10000);
    stop_watchdog(&c);
    printf("ABORT rank=%d aborted=%d abort_took_ms=%.0f\n", c.rank, atomic_load(&c.aborted),
           c.abort_took_ms);
    expect(&c, atomic_load(&c.aborted), "the watchdog to abort");
    expect(&c, c.abort_took_ms < 1000, "ncclCommAbort to return within a second");
  } else if (!strcmp(sc, "graphs")) {
    scenario_graphs(&c);
  } else if (!strcmp(sc, "churn")) {
    scenario_churn(&c);
  } else if (!strcmp(sc, "busy")) {
    scenario_busy(&c);
  } else {
    fprintf(stderr, PROG ": unknown scenario %s\n", sc);
    return 2;
  }
  printf("RESULT rank=%d passed=%ld failed=%ld\n", c.rank, c.passed, c.failed);
  symmpin_test_launch_results_done(c.rank); /* what follows is teardown, bounded apart */
  if (!atomic_load(&c.aborted)) {
    if (atomic_load(&c.error_code)) ncclCommAbort(c.comm);
    else SYMMPIN_TEST_NCCL(ncclCommDestroy(c.comm));
  }
  teardown(&c);
  return c.failed ? 1 : 0;
}

typedef struct rank_counts {
  long passed, failed;
} rank_counts;

static void read_result_line(const char *line, void *arg) {
  rank_counts *rc = arg;
  int rr;
  sscanf(line, "RESULT rank=%d passed=%ld failed=%ld", &rr, &rc->passed, &rc->failed);
}

static int run_procs(void) {
  ncclUniqueId id;
  SYMMPIN_TEST_NCCL(ncclGetUniqueId(&id));
  char hex[2 * sizeof(id.internal) + 1];
  symmpin_test_hex_encode(id.internal, sizeof id.internal, hex, sizeof hex);
  char ns[16], calls[16], cycles[16], per_cycle[16], st[24], ab[24], cs[24];
  snprintf(ns, sizeof ns, "%d", opt.nranks);
  snprintf(calls, sizeof calls, "%d", opt.calls);
  snprintf(cycles, sizeof cycles, "%d", opt.cycles);
  snprintf(per_cycle, sizeof per_cycle, "%d", opt.calls_per_cycle);
  snprintf(st, sizeof st, "%ld", opt.straggle_ms);
  snprintf(ab, sizeof ab, "%ld", opt.abort_after_ms);
  snprintf(cs, sizeof cs, "%ld", opt.churn_seconds);
  char *args[] = {
      "--uid",      hex,   "--ranks",       ns,     "--scenario",        (char *)opt.scenario,
      "--calls",    calls, "--cycles",      cycles, "--calls-per-cycle", per_cycle,
      "--straggle", st,    "--abort-after", ab,     "--churn-seconds",   cs,
      NULL};
  symmpin_test_launch sp;
  if (!symmpin_test_launch_init(&sp, PROG) || !symmpin_test_launch_start(&sp, opt.nranks, args))
    return 2;
  symmpin_test_launch_wait(&sp);
  long passed = 0, failed = 0;
  for (int r = 0; r < opt.nranks; r++) {
    rank_counts rc = {0, 0};
    bool clean = symmpin_test_launch_collect(&sp, r, read_result_line, &rc);
    passed += rc.passed;
    failed += rc.failed;
    /* A rank that hung after its results is judged by them (the exit status says it hung); one
     * that failed without saying why counts once more. */
    if (!clean && sp.rank[r].end != SYMMPIN_TEST_RANK_HUNG_AFTER && rc.failed == 0) failed++;
  }
  printf(PROG ": %ld passed, %ld failed\n", passed, failed);
  return symmpin_test_launch_exit_code(&sp, failed == 0);
}

int main(int argc, char **argv) {
  static const struct option longs[] = {{"scenario", required_argument, NULL, 's'},
                                        {"ranks", required_argument, NULL, 'n'},
                                        {"calls", required_argument, NULL, 'c'},
                                        {"cycles", required_argument, NULL, 'y'},
                                        {"straggle", required_argument, NULL, 't'},
                                        {"abort-after", required_argument, NULL, 'a'},
                                        {"child", required_argument, NULL, 'C'},
                                        {"uid", required_argument, NULL, 'u'},
                                        {"calls-per-cycle", required_argument, NULL, 'p'},
                                        {"churn-seconds", required_argument, NULL, 'S'},
                                        {"help", no_argument, NULL, 'h'},
                                        {"version", no_argument, NULL, 'V'},
                                        {NULL, 0, NULL, 0}};
  int ch;
  long v;
  while ((ch = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
    switch (ch) {
    case 's': opt.scenario = optarg; break;
    case 'n':
      if (!symmpin_test_parse_int(optarg, 1, MAX_RANKS, &v))
        return symmpin_test_usage_error(PROG, "bad --ranks '%s'", optarg);
      opt.nranks = (int)v;
      break;
    case 'c':
      if (!symmpin_test_parse_int(optarg, 8, 1000000, &v))
        return symmpin_test_usage_error(PROG, "bad --calls '%s'", optarg);
      opt.calls = (int)v;
      break;
    case 'y':
      if (!symmpin_test_parse_int(optarg, 11, 1000000, &v))
        return symmpin_test_usage_error(PROG, "bad --cycles '%s'", optarg);
      opt.cycles = (int)v;
      break;
    case 't':
      if (!symmpin_test_parse_int(optarg, 0, 3600000, &opt.straggle_ms))
        return symmpin_test_usage_error(PROG, "bad --straggle '%s'", optarg);
      break;
    case 'a':
      if (!symmpin_test_parse_int(optarg, 0, 3600000, &opt.abort_after_ms))
        return symmpin_test_usage_error(PROG, "bad --abort-after '%s'", optarg);
      break;
    case 'C':
      if (!symmpin_test_parse_int(optarg, 0, MAX_RANKS - 1, &v))
        return symmpin_test_usage_error(PROG, "bad --child '%s'", optarg);
      opt.child = (int)v;
      break;
    case 'u': opt.uid = optarg; break;
    case 'p':
      if (!symmpin_test_parse_int(optarg, 8, 1000000, &v))
        return symmpin_test_usage_error(PROG, "bad --calls-per-cycle '%s'", optarg);
      opt.calls_per_cycle = (int)v;
      break;
    case 'S':
      if (!symmpin_test_parse_int(optarg, 0, 86400, &opt.churn_seconds))
        return symmpin_test_usage_error(PROG, "bad --churn-seconds '%s'", optarg);
      break;
    case 'h':
      printf("usage: " PROG " [--scenario side|sites|fault|abort|graphs|churn|busy] [--ranks N]\n"
             "                     [--calls N] [--cycles N] [--calls-per-cycle N] [--churn-seconds "
             "S]\n"
             "                     [--straggle MS] [--abort-after MS]\n"
             "The failure scenarios of symmpin's docs/design.md as a plain NCCL program; see the\n"
             "comment at the top of tests/apps/trust_app.c.\n");
      return 0;
    case 'V': return symmpin_test_print_version(PROG);
    default: return symmpin_test_usage_hint(PROG);
    }
  }
  if (optind < argc) return symmpin_test_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
  if (opt.child >= 0) {
    if (!opt.uid || !opt.nranks) return symmpin_test_usage_error(PROG, "--child needs --uid and --ranks");
    return child_main();
  }
  if (!opt.nranks) {
    int n = 0;
    SYMMPIN_TEST_CUDA(cudaGetDeviceCount(&n));
    opt.nranks = n < MAX_RANKS ? n : MAX_RANKS;
  }
  return run_procs();
}
