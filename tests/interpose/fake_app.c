/* A small CUDA + NCCL 'program' for the interposition tests, linked against the FAKE libcudart
 * and libnccl of tests/fakes (CPU only). test_interpose.c runs it with and without
 * LD_PRELOAD=libsymmpin.so and checks its exit status, its output and the trace it leaves.
 * Every check here is on values the fakes compute; the program prints "ok <scenario>" and exits 0
 * when all pass, "FAIL ..." and exits 1 otherwise. */
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <nccl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_control.h"
#include "interpose/nccl_compat.h" /* the 2.27-2.29 calls, also where nccl.h is older */

static int failures;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* Distinct call sites (noinline: each is its own return address in this binary; different
 * bodies, or the compiler's identical-code folding would merge them into one). */
static volatile int site_b_calls;
__attribute__((noinline)) static ncclResult_t site_a(const void *s, void *r, size_t n,
                                                     ncclComm_t c, cudaStream_t st) {
  return ncclAllReduce(s, r, n, ncclFloat32, ncclSum, c, st);
}
__attribute__((noinline)) static ncclResult_t site_b(const void *s, void *r, size_t n,
                                                     ncclComm_t c, cudaStream_t st) {
  ncclResult_t rc = ncclAllReduce(s, r, n, ncclFloat32, ncclSum, c, st);
  site_b_calls++;
  return rc;
}

static void fill(float *p, size_t n, float v) {
  for (size_t i = 0; i < n; i++) p[i] = v + (float)i;
}

static int all_equal_scaled(const float *r, const float *s, size_t n, float k) {
  for (size_t i = 0; i < n; i++)
    if (r[i] != s[i] * k) return 0;
  return 1;
}

/* The trace checked by test_interpose.c "basic": 2 cudaMalloc, 1 cudaMallocAsync, 1 ncclMemAlloc,
 * comm 0 (rank 1 of 2), its split (comm 1), 4 all-reduces at site_a, 2 at site_b, streams 0x10
 * and 0x20, one all-reduce while "capturing", one inside a group. */
static void basic(void) {
  float *send = NULL, *recv = NULL, *nm = NULL, *as = NULL;
  const size_t n = 256;
  CHECK(cudaMalloc((void **)&send, n * sizeof(float)) == cudaSuccess, "cudaMalloc send");
  CHECK(cudaMalloc((void **)&recv, n * sizeof(float)) == cudaSuccess, "cudaMalloc recv");
  CHECK(cudaMallocAsync((void **)&as, 4096, (cudaStream_t)0x10) == cudaSuccess, "mallocAsync");
  CHECK(ncclMemAlloc((void **)&nm, 4096) == ncclSuccess, "ncclMemAlloc");
  if (failures) return;
  fill(send, n, 1.0f);

  ncclUniqueId id;
  ncclComm_t comm;
  CHECK(ncclGetUniqueId(&id) == ncclSuccess, "unique id");
  CHECK(ncclCommInitRank(&comm, 2, id, 1) == ncclSuccess, "init");
  cudaStream_t s1 = (cudaStream_t)0x10, s2 = (cudaStream_t)0x20;

  for (int i = 0; i < 3; i++) {
    memset(recv, 0, n * sizeof(float));
    CHECK(site_a(send, recv, n, comm, s1) == ncclSuccess, "site_a");
    CHECK(all_equal_scaled(recv, send, n, 2.0f), "site_a result");
  }
  /* Same site, other shape (count): another site id, the same stack. Offsets into buffers. */
  CHECK(site_a(send + 16, recv + 32, 64, comm, s2) == ncclSuccess, "site_a offset");
  CHECK(all_equal_scaled(recv + 32, send + 16, 64, 2.0f), "site_a offset result");
  CHECK(site_b(send, recv, n, comm, s1) == ncclSuccess, "site_b");
  fake_cuda_set_capturing(1);
  CHECK(ncclGroupStart() == ncclSuccess, "group start");
  CHECK(site_b(nm, nm, 8, comm, s2) == ncclSuccess, "site_b in group, in place");
  CHECK(ncclGroupEnd() == ncclSuccess, "group end");
  fake_cuda_set_capturing(0);
  /* A simulated group end (NCCL 2.22+) leaves the group too: the next group ends normally. */
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  CHECK(ncclGroupStart() == ncclSuccess, "group start (simulated)");
  CHECK(site_b(nm, nm, 8, comm, s2) == ncclSuccess, "site_b in a simulated group");
  CHECK(ncclGroupSimulateEnd(&sim) == ncclSuccess, "simulated group end");
  CHECK(ncclGroupStart() == ncclSuccess && ncclGroupEnd() == ncclSuccess, "group after it");

  ncclComm_t child;
  CHECK(ncclCommSplit(comm, 3, 0, &child, NULL) == ncclSuccess, "split");
  CHECK(ncclAllReduce(send, recv, 4, ncclFloat32, ncclSum, child, s1) == ncclSuccess, "child");
  CHECK(ncclCommFinalize(child) == ncclSuccess, "finalize");
  CHECK(ncclCommDestroy(child) == ncclSuccess, "destroy child");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");

  CHECK(ncclMemFree(nm) == ncclSuccess, "ncclMemFree");
  CHECK(cudaFreeAsync(as, s1) == cudaSuccess, "freeAsync");
  CHECK(cudaFree(recv) == cudaSuccess, "free recv");
  CHECK(cudaFree(send) == cudaSuccess, "free send");
  /* The fakes ran every call once. */
  CHECK(fake_nccl_count("ncclAllReduce") == 8, "fake all-reduces %ld", fake_nccl_count("ncclAllReduce"));
  CHECK(fake_cuda_count("cudaMalloc") == 2, "fake mallocs %ld", fake_cuda_count("cudaMalloc"));
  CHECK(fake_nccl_count("ncclCommDestroy") == 2, "fake destroys");
}

/* Injected errors come back unchanged. */
static void errors(void) {
  void *p = NULL;
  fake_cuda_fail_next("cudaMalloc", cudaErrorMemoryAllocation);
  CHECK(cudaMalloc(&p, 64) == cudaErrorMemoryAllocation, "cudaMalloc error");
  fake_cuda_fail_next("cudaFree", cudaErrorInvalidValue);
  CHECK(cudaFree((void *)0x1234) == cudaErrorInvalidValue, "cudaFree error");
  ncclUniqueId id;
  ncclComm_t comm;
  ncclGetUniqueId(&id);
  fake_nccl_fail_next("ncclCommInitRank", ncclSystemError);
  CHECK(ncclCommInitRank(&comm, 1, id, 0) == ncclSystemError, "init error");
  CHECK(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess, "init");
  float buf[4] = {1, 2, 3, 4};
  fake_nccl_fail_next("ncclAllReduce", ncclInvalidUsage);
  CHECK(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, comm, NULL) == ncclInvalidUsage,
        "allreduce error");
  /* An argument error the fake itself detects. */
  CHECK(ncclAllReduce(NULL, buf, 4, ncclFloat32, ncclSum, comm, NULL) == ncclInvalidArgument,
        "allreduce argument error");
  fake_nccl_fail_next("ncclGroupEnd", ncclInternalError);
  ncclGroupStart();
  CHECK(ncclGroupEnd() == ncclInternalError, "group end error");
  fake_nccl_fail_next("ncclCommDestroy", ncclInternalError);
  CHECK(ncclCommDestroy(comm) == ncclInternalError, "destroy error");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
}

/* The fake's cudaMalloc calls cudaMalloc/cudaFree from inside itself. Then one communicator, so
 * that symmpin writes its trace (a process without one writes none). */
static void reentrant(void) {
  fake_cuda_set_nested(1);
  void *p[3];
  for (int i = 0; i < 3; i++) CHECK(cudaMalloc(&p[i], 128) == cudaSuccess, "malloc");
  for (int i = 0; i < 3; i++) CHECK(cudaFree(p[i]) == cudaSuccess, "free");
  CHECK(fake_cuda_count("cudaMalloc") == 6, "fake mallocs %ld", fake_cuda_count("cudaMalloc"));
  CHECK(fake_cuda_count("cudaFree") == 6, "fake frees %ld", fake_cuda_count("cudaFree"));
  ncclUniqueId id;
  ncclComm_t comm;
  CHECK(ncclGetUniqueId(&id) == ncclSuccess && ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess,
        "init");
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
}

/* Threads, each with its own communicator, all at once. */
#define THREADS 8
#define THREAD_CALLS 2000
static void *thread_main(void *arg) {
  long t = (long)arg;
  ncclUniqueId id;
  ncclComm_t comm;
  ncclGetUniqueId(&id);
  if (ncclCommInitRank(&comm, 1 + (int)(t % 3), id, 0) != ncclSuccess) return (void *)1;
  int nr = 1 + (int)(t % 3);
  float *send, *recv;
  if (cudaMalloc((void **)&send, 64 * sizeof(float)) != cudaSuccess) return (void *)2;
  if (cudaMalloc((void **)&recv, 64 * sizeof(float)) != cudaSuccess) return (void *)3;
  fill(send, 64, (float)t);
  for (int i = 0; i < THREAD_CALLS; i++) {
    if (site_a(send, recv, 1 + (size_t)(i % 64), comm, (cudaStream_t)(0x100 + t)) != ncclSuccess)
      return (void *)4;
    if (recv[0] != send[0] * (float)nr) return (void *)5;
    if (i % 50 == 0) { /* allocations racing the all-reduces' lookups */
      void *p;
      if (cudaMalloc(&p, 256) != cudaSuccess || cudaFree(p) != cudaSuccess) return (void *)6;
    }
  }
  cudaFree(send);
  cudaFree(recv);
  return ncclCommDestroy(comm) == ncclSuccess ? NULL : (void *)7;
}

static void threads(void) {
  pthread_t th[THREADS];
  for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, thread_main, (void *)t);
  for (int t = 0; t < THREADS; t++) {
    void *r;
    pthread_join(th[t], &r);
    CHECK(r == NULL, "thread %d failed at step %ld", t, (long)r);
  }
  CHECK(fake_nccl_count("ncclAllReduce") == THREADS * THREAD_CALLS, "fake all-reduces");
}

/* Non-blocking init: rank and size are learned at a later all-reduce. */
static void nonblocking(void) {
  fake_nccl_set_inprogress_queries(2);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclUniqueId id;
  ncclComm_t comm;
  ncclGetUniqueId(&id);
  CHECK(ncclCommInitRankConfig(&comm, 4, id, 3, &cfg) == ncclInProgress, "init in progress");
  ncclComm_t child;
  CHECK(ncclCommSplit(comm, 0, 0, &child, &cfg) == ncclInProgress, "split in progress");
  float buf[8] = {1};
  for (int i = 0; i < 4; i++)
    CHECK(ncclAllReduce(buf, buf, 8, ncclFloat32, ncclMax, child, NULL) == ncclSuccess, "ar");
  ncclComm_t none = (ncclComm_t)0x1;
  CHECK(ncclCommSplit(comm, NCCL_SPLIT_NOCOLOR, 0, &none, NULL) == ncclSuccess && none == NULL,
        "nocolor split");
  ncclCommDestroy(child);
  ncclCommDestroy(comm);
}

/* One thread drives every rank of an InitAll communicator. */
static void initall(void) {
  ncclComm_t comms[3];
  int devs[3] = {2, 0, 1};
  CHECK(ncclCommInitAll(comms, 3, devs) == ncclSuccess, "init all");
  float bufs[3][16];
  ncclGroupStart();
  for (int r = 0; r < 3; r++) {
    fill(bufs[r], 16, (float)r);
    CHECK(ncclAllReduce(bufs[r], bufs[r], 16, ncclFloat32, ncclSum, comms[r], NULL) ==
              ncclSuccess, "ar %d", r);
  }
  ncclGroupEnd();
  for (int r = 0; r < 3; r++) CHECK(bufs[r][1] == (1.0f + (float)r) * 3, "result %d", r);
  for (int r = 0; r < 3; r++) ncclCommDestroy(comms[r]);
}

/* The calls that change a communicator's life (NCCL 2.27-2.29), with the fake NCCL's answers: a
 * revoked communicator refuses collectives, a suspended one until it is resumed; children of
 * Shrink and Grow work. test_interpose.c "life" checks what symmpin makes of them (trace, stats).
 */
static void life(void) {
  float buf[64];
  fill(buf, 64, 1.0f);
  ncclUniqueId id;
  ncclComm_t revoked, suspended, parent, shrunk, shrunk2, grown, split_of_child;
  ncclGetUniqueId(&id);
  CHECK(ncclCommInitRank(&revoked, 2, id, 1) == ncclSuccess, "init");
  CHECK(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclMax, revoked, NULL) == ncclSuccess, "ar");
  CHECK(ncclCommRevoke(revoked, 1) == ncclInvalidArgument, "revoke with a flag NCCL refuses");
  CHECK(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclMax, revoked, NULL) == ncclSuccess,
        "not revoked by a refused call");
  CHECK(ncclCommRevoke(revoked, NCCL_REVOKE_DEFAULT) == ncclSuccess, "revoke");
  CHECK(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclMax, revoked, NULL) == ncclInvalidUsage,
        "what NCCL says after a revoke");
  CHECK(ncclCommDestroy(revoked) == ncclSuccess, "destroy revoked");

  ncclGetUniqueId(&id);
  CHECK(ncclCommInitRank(&suspended, 2, id, 1) == ncclSuccess, "init");
  CHECK(ncclCommSuspend(suspended, NCCL_SUSPEND_MEM) == ncclSuccess, "suspend");
  CHECK(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclMax, suspended, NULL) == ncclInvalidUsage,
        "what NCCL says while suspended");
  CHECK(ncclCommResume(suspended) == ncclSuccess, "resume");
  CHECK(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclMax, suspended, NULL) == ncclSuccess,
        "resumed");
  CHECK(ncclCommDestroy(suspended) == ncclSuccess, "destroy suspended");

  ncclGetUniqueId(&id);
  CHECK(ncclCommInitRank(&parent, 4, id, 2) == ncclSuccess, "init");
  int excluded[] = {0};
  CHECK(ncclCommShrink(parent, excluded, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT) == ncclSuccess,
        "shrink");
  int r = -1, n = -1;
  ncclCommUserRank(shrunk, &r);
  ncclCommCount(shrunk, &n);
  CHECK(r == 1 && n == 3, "shrunk rank %d of %d", r, n);
  CHECK(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclMax, shrunk, NULL) == ncclSuccess, "ar");
  CHECK(ncclCommSplit(shrunk, 0, 0, &split_of_child, NULL) == ncclSuccess, "split of a child");
  CHECK(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclMax, split_of_child, NULL) == ncclSuccess,
        "ar");
  CHECK(ncclCommShrink(parent, excluded, 1, &shrunk2, NULL, NCCL_SHRINK_ABORT) == ncclSuccess,
        "shrink with abort");
  CHECK(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclMax, parent, NULL) == ncclSuccess,
        "the parent still works in NCCL");
  CHECK(ncclCommGrow(shrunk2, 5, NULL, -1, &grown, NULL) == ncclSuccess, "grow");
  CHECK(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclMax, grown, NULL) == ncclSuccess, "ar");
  ncclComm_t all[] = {split_of_child, grown, shrunk2, shrunk, parent};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ncclCommDestroy(all[i]);
}

/* The threads of this process now (/proc/self/task). */
static int threads_now(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (de->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* "quiet": allocations, never a communicator; "quiet_comm": the same and one communicator of two
 * ranks with one all-reduce. Prints the process's thread count at the start of main and at its
 * end (symmpin's constructors ran before the first, its exit runs after the second). */
static void quiet(bool comm) {
  int before = threads_now();
  void *p = NULL;
  CHECK(cudaMalloc(&p, 256) == cudaSuccess && cudaFree(p) == cudaSuccess, "malloc/free");
  if (comm) {
    ncclUniqueId id;
    ncclComm_t c;
    CHECK(ncclGetUniqueId(&id) == ncclSuccess && ncclCommInitRank(&c, 2, id, 0) == ncclSuccess,
          "init");
    float buf[8] = {1};
    CHECK(ncclAllReduce(buf, buf, 8, ncclFloat32, ncclSum, c, NULL) == ncclSuccess, "all-reduce");
    CHECK(buf[0] == 2.0f, "result %g", (double)buf[0]);
    CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy");
  }
  printf("threads %d %d\n", before, threads_now());
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: %s basic|errors|reentrant|threads|nonblocking|initall|life|quiet|quiet_comm\n",
            argv[0]);
    return 2;
  }
  const char *s = argv[1];
  if (!strcmp(s, "basic")) basic();
  else if (!strcmp(s, "errors")) errors();
  else if (!strcmp(s, "reentrant")) reentrant();
  else if (!strcmp(s, "threads")) threads();
  else if (!strcmp(s, "nonblocking")) nonblocking();
  else if (!strcmp(s, "initall")) initall();
  else if (!strcmp(s, "life"))
    life();
  else if (!strcmp(s, "quiet"))
    quiet(false);
  else if (!strcmp(s, "quiet_comm"))
    quiet(true);
  else {
    fprintf(stderr, "unknown scenario %s\n", s);
    return 2;
  }
  if (failures) return 1;
  printf("ok %s\n", s);
  return 0;
}
