/* Micro-benchmark of symmpin's pass-through path (wrapper + record, trace off) against the FAKE
 * CUDA runtime and NCCL of tests/fakes (CPU only): ns per call of ncclAllReduce and of a
 * cudaMalloc + cudaFree pair, without symmpin, preloaded at several SYMMPIN_STACK_DEPTHs, and
 * preloaded with SYMMPIN_DISABLE. The fakes' own cost is the "no preload" row.
 *
 * usage: bench_passthrough            run every configuration as a child and print a table
 *        bench_passthrough --child    measure this process as it is */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#define AR_CALLS 200000
#define ALLOC_CALLS 100000
#define REPEATS 5

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Separate functions so the call sites are fixed and the loop is not optimised away. */
__attribute__((noinline)) static double time_allreduce(ncclComm_t comm, float *buf) {
  double t0 = now_ns();
  for (int i = 0; i < AR_CALLS; i++)
    if (ncclAllReduce(buf, buf + 1, 1, ncclFloat32, ncclSum, comm, (cudaStream_t)0x10) !=
        ncclSuccess)
      abort();
  return (now_ns() - t0) / AR_CALLS;
}

__attribute__((noinline)) static double time_alloc(void) {
  double t0 = now_ns();
  for (int i = 0; i < ALLOC_CALLS; i++) {
    void *p;
    if (cudaMalloc(&p, 256) != cudaSuccess || cudaFree(p) != cudaSuccess) abort();
  }
  return (now_ns() - t0) / ALLOC_CALLS;
}

static int child(void) {
  ncclUniqueId id;
  ncclComm_t comm;
  float *buf;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess ||
      cudaMalloc((void **)&buf, 64) != cudaSuccess)
    return 1;
  double ar = 1e30, al = 1e30;
  for (int r = 0; r < REPEATS; r++) { /* best of: the least disturbed run */
    double a = time_allreduce(comm, buf), b = time_alloc();
    if (a < ar) ar = a;
    if (b < al) al = b;
  }
  printf("%10.1f %22.1f\n", ar, al);
  cudaFree(buf);
  ncclCommDestroy(comm);
  return 0;
}

static void run(const char *self, const char *label, int preload, const char *extra) {
  char ld_path[1024] = "LD_LIBRARY_PATH=" SYMMPIN_BENCH_FAKES;
  char ld_preload[1024] = "LD_PRELOAD=" SYMMPIN_BENCH_LIB;
  char *env[8];
  int n = 0;
  env[n++] = ld_path;
  if (preload) env[n++] = ld_preload;
  if (extra) env[n++] = (char *)extra;
  env[n] = NULL;
  char *argv[] = {(char *)self, "--child", NULL};
  printf("%-34s ", label);
  fflush(stdout);
  pid_t pid;
  if (posix_spawn(&pid, self, NULL, NULL, argv, env) != 0) {
    printf("spawn failed\n");
    return;
  }
  int st;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) printf("child failed\n");
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--child")) return child();
  printf("%-34s %10s %22s\n", "configuration (fakes, CPU)", "allreduce", "cudaMalloc+cudaFree");
  printf("%-34s %10s %22s\n", "", "ns/call", "ns/pair");
  run(argv[0], "no preload", 0, NULL);
  run(argv[0], "preload, SYMMPIN_DISABLE=1", 1, "SYMMPIN_DISABLE=1");
  run(argv[0], "preload, depth 1 (default)", 1, NULL);
  run(argv[0], "preload, depth 2", 1, "SYMMPIN_STACK_DEPTH=2");
  run(argv[0], "preload, depth 4", 1, "SYMMPIN_STACK_DEPTH=4");
  run(argv[0], "preload, depth 8", 1, "SYMMPIN_STACK_DEPTH=8");
  run(argv[0], "preload, depth 16", 1, "SYMMPIN_STACK_DEPTH=16");
  run(argv[0], "preload, depth 1, SYMMPIN_STATS=1", 1, "SYMMPIN_STATS_FILE=/dev/null");
  return 0;
}
