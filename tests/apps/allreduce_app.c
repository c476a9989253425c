/* symmpin-app: a multi-GPU NCCL program of ours, the C workload symmpin runs under.
 *
 * It is an ordinary NCCL program (it knows nothing of symmpin and links nothing of it): run it
 * with and without LD_PRELOAD=libsymmpin.so and compare. Three ways ranks live, as in real jobs:
 *   --mode procs    one process per GPU (the parent spawns one child per rank)
 *   --mode threads  one process, one thread per GPU
 *   --mode single   one process, one thread driving all GPUs inside ncclGroupStart/End
 * Each iteration runs every datatype x op, with buffers from cudaMalloc (pointers moving inside one
 * large allocation from call to call, not 16-byte aligned), cudaMallocAsync, ncclMemAlloc and the
 * driver's cuMemAlloc (dlopen'ed, as allocators of their own do: no allocation a preload that
 * wraps the runtime's and NCCL's allocators knows of), in place and out of place, plus one
 * all-reduce too large for symmpin. Inputs are drawn from small sets of values (quarter integers,
 * small integers, powers of two) that every datatype represents exactly and whose sums and products
 * over up to 8 ranks are exact too, so every result is checked exactly against a CPU reference (avg
 * with a tolerance: its division rounds), whatever order a library reduces in, and a checksum of
 * all outputs is compared across ranks. The outputs of avg have a checksum of their own (an AVG
 * line): it is compared across ranks too, but not with another library's, which may round the
 * average another way (NCCL premultiplies floating-point inputs by 1/n, symmpin divides the sum:
 * the same bits at 2, 4 and 8 ranks, not at 3).
 * --diverge makes even and odd ranks reach some all-reduces from different call sites (still the
 * same collectives, so NCCL matches them): symmpin must keep those on NCCL.
 * --split-hosts K (procs): after the checks on the world communicator, the same checks on a
 * communicator split off it per "host" (K blocks of consecutive ranks, as scripts/rank-env.sh
 * places them), so a job spanning hosts runs its per-host communicators too.
 * --group-simulate: half-way, one all-reduce inside a group ended by ncclGroupSimulateEnd (NCCL
 * 2.22+: it runs nothing): its output must stay untouched, and every later call stays exact.
 * --colls: every iteration also makes all-gathers (every datatype) and reduce-scatters (every
 * datatype and op) of the same sizes, in place (NCCL's forms) and not: all-gather outputs are
 * every rank's input at its place, checked exactly (any rank can compute a peer's input), and
 * reduce-scatter outputs exactly like the all-reduce's.
 * --reset (procs): after the checks, the communicator and every buffer go, cudaDeviceReset destroys
 * the process's context on its GPU, and the same checks run on a new communicator in a new context
 * (issue 36, item 3: a library that keeps anything of the old context, e.g. kernel functions by the
 * context's address, which the new context may have, fails here); counts and checksums go on.
 * --bench times bf16 sums of 1 KiB .. 1 MiB, eager and replayed from a CUDA graph.
 * In procs mode ranks are processes (tests/apps/launch.h: bounded waits, the suite's rank wrapper),
 * rank r on GPU r % GPUs: several ranks may share a GPU where NCCL is given a host id per rank.
 * Each rank prints "TIME rank=R first_call_ms=.. checks_ms=.." (its first all-reduce, input copy
 * to result; all checks). Last line: "symmpin-app: N passed, M failed"; exit status 3 when every
 * result was right but a rank hung after printing them (spawn.h).
 *
 * Datatype codecs, check macros and the --version line come from tests/gpu/gpu_common.h (header
 * only); NCCL's datatype and op values are those of common/types.h's lists. */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <nccl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/apps/launch.h"
#include "tests/gpu/gpu_common.h"

#define PROG "symmpin-app"

_Static_assert((int)ncclNumTypes == (int)SYMMPIN_DTYPE_COUNT &&
                   (int)ncclNumOps == (int)SYMMPIN_OP_COUNT,
               "NCCL's datatypes and ops are common/types.h's");

#define MAX_RANKS SYMMPIN_TEST_LAUNCH_MAX_RANKS
enum buf_kind { BUF_ARENA, BUF_ASYNC, BUF_NCCLMEM, BUF_DRIVER, BUF_KINDS };

/* The CUDA driver's allocator, looked up at run time (no cuda.h, no libcuda at link time: the
 * CUDA 12 build of this program has neither). CUdeviceptr is an unsigned long long on 64-bit
 * hosts; the functions return CUresult, 0 for success. */
typedef int (*cu_mem_alloc_fn)(unsigned long long *dptr, size_t bytes);
typedef int (*cu_mem_free_fn)(unsigned long long dptr);
static cu_mem_alloc_fn cu_mem_alloc;
static cu_mem_free_fn cu_mem_free;

static void driver_alloc_init(void) {
  if (cu_mem_alloc) return;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) SYMMPIN_TEST_FAIL("dlopen libcuda.so.1: %s", dlerror());
  cu_mem_alloc = (cu_mem_alloc_fn)dlsym(h, "cuMemAlloc_v2");
  cu_mem_free = (cu_mem_free_fn)dlsym(h, "cuMemFree_v2");
  if (!cu_mem_alloc || !cu_mem_free)
    SYMMPIN_TEST_FAIL("libcuda.so.1 has no cuMemAlloc_v2/cuMemFree_v2");
}

static void *driver_alloc(size_t bytes) {
  unsigned long long p = 0;
  int rc = cu_mem_alloc(&p, bytes);
  if (rc != 0) SYMMPIN_TEST_FAIL("cuMemAlloc_v2(%zu) returned CUresult %d", bytes, rc);
  return (void *)(uintptr_t)p;
}

static void driver_free(void *p) {
  int rc = cu_mem_free((unsigned long long)(uintptr_t)p);
  if (rc != 0) SYMMPIN_TEST_FAIL("cuMemFree_v2 returned CUresult %d", rc);
}

typedef struct app_op {
  int coll; /* 0 ncclAllReduce, 1 ncclAllGather, 2 ncclReduceScatter (common/types.h) */
  int dtype, op;
  size_t count;
  int kind;
  bool inplace;
  bool diverge; /* under --diverge, reached from a rank-dependent call site */
} app_op;

static const int ndtypes = SYMMPIN_DTYPE_COUNT; /* ncclInt8 .. ncclFloat8e5m2 */
static const int nops = SYMMPIN_OP_COUNT;        /* ncclSum .. ncclAvg */
static const size_t sizes[] = {1, 7, 33, 255, 1024, 4097, 16384, 65536};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static app_op ops[256];
static int g_nranks = 1; /* the world's ranks, for the buffers' sizes (--colls) */
static int nops_total;

static struct {
  const char *mode;
  int nranks, iters;
  int split_hosts;  /* --split-hosts K: then the checks on a per-host split, 0 = none */
  long straggle_ms; /* --straggle: rank 0 sleeps this long before one all-reduce mid-run */
  bool diverge, bench, quiet, two_streams, group_simulate, colls, reset;
} opt = {.mode = "procs", .iters = 6};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The ops of every iteration; needs opt.nranks. */
static void build_ops(void) {
  /* NCCL 2.24.3 and later refuse an fp8 average on a one-rank communicator (ncclInvalidArgument,
   * with no WARN: ncclLaunchOneRank in src/device/onerank.cu has its fp8 cases only in the device
   * pass), so a communicator of one rank (--ranks 1, or --split-hosts as many as the ranks) gets
   * an fp8 sum there instead. */
  bool one_rank = (opt.split_hosts ? opt.nranks / opt.split_hosts : opt.nranks) == 1;
  g_nranks = opt.nranks; /* --colls takes no --split-hosts: the world's ranks */
  int k = 0;
  for (int dt = 0; dt < ndtypes; dt++)
    for (int op = 0; op < nops; op++, k++) {
      bool fp8 = dt == ncclFloat8e4m3 || dt == ncclFloat8e5m2;
      int o = one_rank && fp8 && op == ncclAvg ? ncclSum : op;
      ops[k] = (app_op){
          0, dt, o, sizes[k % NSIZES], k % BUF_KINDS, (k / BUF_KINDS) % 2 == 1, k % 7 == 3};
      size_t es = symmpin_test_dtype_size(dt);
      if (ops[k].count * es > 65536) ops[k].count = 65536 / es;
    }
  /* Larger than symmpin's default SYMMPIN_MAX_BYTES (1 MiB): NCCL must keep it. */
  ops[k++] = (app_op){0, ncclFloat32, ncclSum, (4u << 20) / 4, BUF_ARENA, false, false};
  /* The other collectives: an all-gather per datatype and a reduce-scatter per datatype and op,
   * NCCL's count (the chunk) cycling through the sizes, buffers and in-place forms. */
  for (int dt = 0; opt.colls && dt < ndtypes; dt++)
    for (int op = -1; op < nops; op++, k++) {
      bool fp8 = dt == ncclFloat8e4m3 || dt == ncclFloat8e5m2;
      int coll = op < 0 ? 1 : 2;
      int o = op < 0 ? 0 : one_rank && fp8 && op == ncclAvg ? ncclSum : op;
      ops[k] =
          (app_op){coll, dt, o, sizes[(k * 3) % NSIZES], k % BUF_KINDS, (k / 2) % 2 == 1, false};
      size_t es = symmpin_test_dtype_size(dt);
      if (ops[k].count * es > 16384) ops[k].count = 16384 / es;
    }
  nops_total = k;
}

/* ---- inputs and the reference ---- */

static bool is_int(int dt) { return symmpin_test_dtype_is_int(dt); }
static bool is_signed(int dt) { return symmpin_test_dtype_is_signed(dt); }

/* Exact float inputs: sums and products over up to 8 ranks stay exact in every format. */
static double float_value(int dt, int op, uint64_t h) {
  if (op == ncclProd) {
    static const double p[] = {0.5, 1.0, 2.0, -0.5, -1.0, -2.0};
    return p[h % 6];
  }
  if (dt == ncclFloat8e5m2) return (double)((int)(h % 3) - 1);
  if (dt == ncclFloat8e4m3) return (double)((int)(h % 5) - 2);
  return ((int)(h % 17) - 8) / 4.0;
}

static uint64_t int_value(int dt, int op, uint64_t h) {
  unsigned bits = (unsigned)symmpin_test_dtype_size(dt) * 8;
  uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  if (op == ncclAvg) return h & (mask >> 4); /* non-negative, no overflow: no sign question */
  return h & mask;
}

static uint64_t input_hash(int rank, int iter, int opi, size_t i) {
  return symmpin_hash_mix64(((uint64_t)iter << 48) ^ ((uint64_t)opi << 40) ^
                            ((uint64_t)rank << 36) ^ i ^ 0x5eed);
}

static size_t send_bytes(const app_op *o);

/* A rank's send buffer: element i of it (the reduce-scatter's n chunks are one index range). */
static void fill_input(void *host, const app_op *o, int rank, int iter, int opi) {
  size_t es = symmpin_test_dtype_size(o->dtype);
  for (size_t i = 0; i < send_bytes(o) / es; i++) {
    uint64_t h = input_hash(rank, iter, opi, i);
    symmpin_test_encode(o->dtype, float_value(o->dtype, o->op, h), int_value(o->dtype, o->op, h),
                        (char *)host + i * es);
  }
}

static int64_t sext(uint64_t v, unsigned bits) {
  return bits == 64 ? (int64_t)v : (int64_t)(v << (64 - bits)) >> (64 - bits);
}

/* Compare one output element with the exact reduction over all ranks' inputs. */
static bool check_element(const app_op *o, int nranks, int iter, int opi, size_t i,
                          const void *got) {
  int dt = o->dtype;
  if (is_int(dt)) {
    unsigned bits = (unsigned)symmpin_test_dtype_size(dt) * 8;
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    uint64_t acc = int_value(dt, o->op, input_hash(0, iter, opi, i)) & mask;
    for (int r = 1; r < nranks; r++) {
      uint64_t v = int_value(dt, o->op, input_hash(r, iter, opi, i)) & mask;
      switch (o->op) {
      case ncclSum: case ncclAvg: acc = (acc + v) & mask; break;
      case ncclProd: acc = (acc * v) & mask; break;
      case ncclMax:
        acc = is_signed(dt) ? (sext(v, bits) > sext(acc, bits) ? v : acc) : (v > acc ? v : acc);
        break;
      case ncclMin:
        acc = is_signed(dt) ? (sext(v, bits) < sext(acc, bits) ? v : acc) : (v < acc ? v : acc);
        break;
      }
    }
    if (o->op == ncclAvg) acc = acc / (uint64_t)nranks; /* inputs are small and non-negative */
    uint64_t g = 0;
    memcpy(&g, got, symmpin_test_dtype_size(dt));
    return (g & mask) == acc;
  }
  double acc = float_value(dt, o->op, input_hash(0, iter, opi, i));
  for (int r = 1; r < nranks; r++) {
    double v = float_value(dt, o->op, input_hash(r, iter, opi, i));
    switch (o->op) {
    case ncclSum: case ncclAvg: acc += v; break;
    case ncclProd: acc *= v; break;
    case ncclMax: acc = v > acc ? v : acc; break;
    case ncclMin: acc = v < acc ? v : acc; break;
    }
  }
  double g = symmpin_test_decode(dt, got);
  if (o->op != ncclAvg) return g == acc;
  acc /= nranks;
  double tol = (dt == ncclFloat32 || dt == ncclFloat64) ? 1e-6 : 0.07; /* one rounding */
  return fabs(g - acc) <= tol * fmax(1.0, fabs(acc));
}

/* Element j of an all-gather's output: element j % count of rank j / count's input, exactly. */
static bool gathered_element(const app_op *o, int iter, int opi, size_t j, const void *got) {
  size_t es = symmpin_test_dtype_size(o->dtype);
  int q = (int)(j / o->count);
  uint64_t h = input_hash(q, iter, opi, j % o->count);
  unsigned char want[8];
  symmpin_test_encode(o->dtype, float_value(o->dtype, o->op, h), int_value(o->dtype, o->op, h),
                      want);
  return memcmp(want, got, es) == 0;
}

/* ---- one rank ---- */

typedef struct rank_ctx {
  int rank, nranks, dev;
  ncclComm_t comm;
  cudaStream_t stream;  /* the stream op_* use: main or side */
  cudaStream_t main_stream, side_stream;
  char *arena;
  size_t arena_bytes, max_op_bytes;
  void *bufs[256][2]; /* async / ncclMem / driver buffers per op: send, recv (as many as ops[]) */
  void *host_in, *host_out;
  void *host_in_side; /* the side stream's input staging: both streams copy in at once */
  uint64_t checksum;  /* every output but avg's */
  uint64_t avg_checksum; /* avg's outputs: rounded as the library rounds (see the top) */
  /* --colls: the reduce-scatters' outputs but avg's. Each rank's chunk is its own, so this is
   * compared with another library's on the same rank (its RESULT line), never across ranks; a
   * reduce-scatter's avg rounds as the library rounds and differs between ranks too: it is checked
   * element by element only. */
  uint64_t rs_checksum;
  long passed, failed;
  long calls;                /* all-reduces this rank made on comm, 1-based index of the last */
  double first_call_ms;      /* the first all-reduce: input copy to checked result */
  void *sim_send, *sim_recv; /* --group-simulate's buffers */
} rank_ctx;

/* NCCL's count is the chunk: the all-gather's recv and the reduce-scatter's send hold nranks. */
static size_t send_bytes(const app_op *o) {
  return o->count * symmpin_test_dtype_size(o->dtype) * (o->coll == 2 ? (size_t)g_nranks : 1);
}
static size_t recv_bytes(const app_op *o) {
  return o->count * symmpin_test_dtype_size(o->dtype) * (o->coll == 1 ? (size_t)g_nranks : 1);
}
static size_t op_bytes(const app_op *o) {
  return send_bytes(o) > recv_bytes(o) ? send_bytes(o) : recv_bytes(o);
}
static const app_op *simulated_op(void);

static void rank_setup(rank_ctx *c) {
  SYMMPIN_TEST_CUDA(cudaSetDevice(c->dev));
  SYMMPIN_TEST_CUDA(cudaStreamCreateWithFlags(&c->main_stream, cudaStreamNonBlocking));
  SYMMPIN_TEST_CUDA(cudaStreamCreateWithFlags(&c->side_stream, cudaStreamNonBlocking));
  c->stream = c->main_stream;
  c->max_op_bytes = 0;
  for (int k = 0; k < nops_total; k++)
    if (op_bytes(&ops[k]) > c->max_op_bytes) c->max_op_bytes = op_bytes(&ops[k]);
  /* Room for send and recv of the largest op, plus the drift of the moving pointers. */
  c->arena_bytes = 2 * c->max_op_bytes + 1024 * 1024;
  SYMMPIN_TEST_CUDA(cudaMalloc((void **)&c->arena, c->arena_bytes));
  for (int k = 0; k < nops_total; k++) {
    size_t b = op_bytes(&ops[k]) + 64;
    if (ops[k].kind == BUF_ASYNC) {
      SYMMPIN_TEST_CUDA(cudaMallocAsync(&c->bufs[k][0], b, c->stream));
      SYMMPIN_TEST_CUDA(cudaMallocAsync(&c->bufs[k][1], b, c->stream));
    } else if (ops[k].kind == BUF_NCCLMEM) {
      SYMMPIN_TEST_NCCL(ncclMemAlloc(&c->bufs[k][0], b));
      SYMMPIN_TEST_NCCL(ncclMemAlloc(&c->bufs[k][1], b));
    } else if (ops[k].kind == BUF_DRIVER) {
      /* cudaSetDevice made the device's primary context current (CUDA 12+): the driver's
       * allocation lives there, as the runtime's do. */
      driver_alloc_init();
      c->bufs[k][0] = driver_alloc(b);
      c->bufs[k][1] = driver_alloc(b);
    }
  }
  SYMMPIN_TEST_CUDA(cudaMallocHost(&c->host_in, c->max_op_bytes));
  SYMMPIN_TEST_CUDA(cudaMallocHost(&c->host_in_side, c->max_op_bytes));
  SYMMPIN_TEST_CUDA(cudaMallocHost(&c->host_out, c->max_op_bytes));
  if (opt.group_simulate) {
    SYMMPIN_TEST_CUDA(cudaMalloc(&c->sim_send, op_bytes(simulated_op())));
    SYMMPIN_TEST_CUDA(cudaMalloc(&c->sim_recv, op_bytes(simulated_op())));
  }
  SYMMPIN_TEST_CUDA(cudaStreamSynchronize(c->stream));
}

static void rank_teardown(rank_ctx *c) {
  SYMMPIN_TEST_CUDA(cudaSetDevice(c->dev));
  for (int k = 0; k < nops_total; k++) {
    if (ops[k].kind == BUF_ASYNC) {
      SYMMPIN_TEST_CUDA(cudaFreeAsync(c->bufs[k][0], c->stream));
      SYMMPIN_TEST_CUDA(cudaFreeAsync(c->bufs[k][1], c->stream));
    } else if (ops[k].kind == BUF_NCCLMEM) {
      SYMMPIN_TEST_NCCL(ncclMemFree(c->bufs[k][0]));
      SYMMPIN_TEST_NCCL(ncclMemFree(c->bufs[k][1]));
    }
  }
  SYMMPIN_TEST_CUDA(cudaStreamSynchronize(c->stream)); /* then no call still reads a buffer */
  for (int k = 0; k < nops_total; k++) {
    if (ops[k].kind == BUF_DRIVER) {
      driver_free(c->bufs[k][0]);
      driver_free(c->bufs[k][1]);
    }
  }
  SYMMPIN_TEST_CUDA(cudaFree(c->arena));
  if (c->sim_send) SYMMPIN_TEST_CUDA(cudaFree(c->sim_send));
  if (c->sim_recv) SYMMPIN_TEST_CUDA(cudaFree(c->sim_recv));
  SYMMPIN_TEST_CUDA(cudaFreeHost(c->host_in));
  SYMMPIN_TEST_CUDA(cudaFreeHost(c->host_in_side));
  SYMMPIN_TEST_CUDA(cudaFreeHost(c->host_out));
  SYMMPIN_TEST_CUDA(cudaStreamDestroy(c->main_stream));
  SYMMPIN_TEST_CUDA(cudaStreamDestroy(c->side_stream));
}

/* Send and receive pointers of op k in iteration `iter`: arena pointers move every iteration and
 * are aligned only to the element size. */
static void op_buffers(rank_ctx *c, int k, int iter, void **send, void **recv) {
  const app_op *o = &ops[k];
  size_t es = symmpin_test_dtype_size(o->dtype);
  if (o->kind == BUF_ARENA) {
    size_t drift = (size_t)((iter * 7 + k) % 61) * es * 3;
    *send = c->arena + drift;
    *recv = c->arena + c->max_op_bytes + 4096 + drift;
  } else {
    *send = c->bufs[k][0];
    *recv = c->bufs[k][1];
  }
  /* In place, as NCCL's: the all-gather sends its chunk of recv, the reduce-scatter receives
   * into its chunk of send. */
  size_t chunk = o->count * es * (size_t)c->rank;
  if (o->inplace && o->coll == 1)
    *send = (char *)*recv + chunk;
  else if (o->inplace && o->coll == 2)
    *recv = (char *)*send + chunk;
  else if (o->inplace)
    *recv = *send;
}

/* Distinct call sites (no inlining, no tail calls: see meson's -fno-optimize-sibling-calls). */
__attribute__((noinline)) static ncclResult_t allreduce_site_even(void *s, void *r, const app_op *o,
                                                                   ncclComm_t comm, cudaStream_t st) {
  ncclResult_t rc = ncclAllReduce(s, r, o->count, o->dtype, o->op, comm, st);
  __asm__ volatile("" ::: "memory");
  return rc;
}
static volatile int odd_calls; /* keeps the two sites' code different (no identical-code folding) */
__attribute__((noinline)) static ncclResult_t allreduce_site_odd(void *s, void *r, const app_op *o,
                                                                  ncclComm_t comm, cudaStream_t st) {
  odd_calls++;
  ncclResult_t rc = ncclAllReduce(s, r, o->count, o->dtype, o->op, comm, st);
  __asm__ volatile("" ::: "memory");
  return rc;
}

static void op_start(rank_ctx *c, int k, int iter) {
  const app_op *o = &ops[k];
  void *send, *recv;
  op_buffers(c, k, iter, &send, &recv);
  SYMMPIN_TEST_CUDA(cudaSetDevice(c->dev));
  void *staging = c->stream == c->side_stream ? c->host_in_side : c->host_in;
  fill_input(staging, o, c->rank, iter, k);
  /* poison first (the in-place all-gather's send lies inside recv) */
  if (!o->inplace || o->coll == 1)
    SYMMPIN_TEST_CUDA(cudaMemsetAsync(recv, 0xA5, recv_bytes(o), c->stream));
  SYMMPIN_TEST_CUDA(
      cudaMemcpyAsync(send, staging, send_bytes(o), cudaMemcpyHostToDevice, c->stream));
}

static void op_call(rank_ctx *c, int k, int iter) {
  const app_op *o = &ops[k];
  void *send, *recv;
  op_buffers(c, k, iter, &send, &recv);
  SYMMPIN_TEST_CUDA(cudaSetDevice(c->dev));
  c->calls++;
  if (o->coll == 1)
    SYMMPIN_TEST_NCCL(ncclAllGather(send, recv, o->count, o->dtype, c->comm, c->stream));
  else if (o->coll == 2)
    SYMMPIN_TEST_NCCL(ncclReduceScatter(send, recv, o->count, o->dtype, o->op, c->comm, c->stream));
  else if (opt.diverge && o->diverge && (c->rank & 1))
    SYMMPIN_TEST_NCCL(allreduce_site_odd(send, recv, o, c->comm, c->stream));
  else
    SYMMPIN_TEST_NCCL(allreduce_site_even(send, recv, o, c->comm, c->stream));
}

static void op_finish(rank_ctx *c, int k, int iter) {
  const app_op *o = &ops[k];
  void *send, *recv;
  op_buffers(c, k, iter, &send, &recv);
  SYMMPIN_TEST_CUDA(cudaSetDevice(c->dev));
  SYMMPIN_TEST_CUDA(
      cudaMemcpyAsync(c->host_out, recv, recv_bytes(o), cudaMemcpyDeviceToHost, c->stream));
  SYMMPIN_TEST_CUDA(cudaStreamSynchronize(c->stream));
  size_t es = symmpin_test_dtype_size(o->dtype), bad = 0;
  for (size_t i = 0; i < recv_bytes(o) / es; i++)
    if (!(o->coll == 1   ? gathered_element(o, iter, k, i, (char *)c->host_out + i * es)
          : o->coll == 2 ? check_element(o, c->nranks, iter, k, (size_t)c->rank * o->count + i,
                                         (char *)c->host_out + i * es)
                         : check_element(o, c->nranks, iter, k, i, (char *)c->host_out + i * es))) {
      if (bad++ < 3 && !opt.quiet)
        fprintf(stderr, "rank %d iter %d op %d (dtype %d op %d count %zu): element %zu wrong\n",
                c->rank, iter, k, o->dtype, o->op, o->count, i);
    }
  uint64_t scratch = 0;
  uint64_t *sum = o->coll == 2 ? (o->op == ncclAvg ? &scratch : &c->rs_checksum)
                  : o->coll != 1 && o->op == ncclAvg ? &c->avg_checksum
                                                     : &c->checksum;
  for (size_t i = 0; i < recv_bytes(o); i++)
    *sum = (*sum ^ ((unsigned char *)c->host_out)[i]) * 0x100000001b3ull;
  if (bad) c->failed++;
  else c->passed++;
}

/* Ops k and k+1 in flight together on two streams (their buffers are distinct). */
static void op_pair_concurrent(rank_ctx *c, int k, int it) {
  c->stream = c->main_stream;
  op_start(c, k, it);
  c->stream = c->side_stream;
  op_start(c, k + 1, it);
  c->stream = c->main_stream;
  op_call(c, k, it);
  c->stream = c->side_stream;
  op_call(c, k + 1, it);
  c->stream = c->main_stream;
  op_finish(c, k, it);
  c->stream = c->side_stream;
  op_finish(c, k + 1, it);
  c->stream = c->main_stream;
}

/* The shape of the simulated group's call: a float sum of the checks (so a planned shape, which
 * symmpin holds until the group's end, not one it leaves to NCCL). */
static const app_op *simulated_op(void) {
  for (int k = 0; k < nops_total; k++)
    if (ops[k].dtype == ncclFloat32 && ops[k].op == ncclSum) return &ops[k];
  return &ops[0];
}

/* One all-reduce in a group that ncclGroupSimulateEnd ends: NCCL runs nothing of it, so its
 * output must keep the poison, and no later call may be held back or lost (the checks after it). */
__attribute__((noinline)) static void group_simulate(rank_ctx *c) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)
  const app_op *o = simulated_op();
  SYMMPIN_TEST_CUDA(cudaSetDevice(c->dev));
  SYMMPIN_TEST_CUDA(cudaMemsetAsync(c->sim_send, 0x11, op_bytes(o), c->stream));
  SYMMPIN_TEST_CUDA(cudaMemsetAsync(c->sim_recv, 0xA5, op_bytes(o), c->stream));
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  SYMMPIN_TEST_NCCL(ncclGroupStart());
  c->calls++;
  SYMMPIN_TEST_NCCL(
      ncclAllReduce(c->sim_send, c->sim_recv, o->count, o->dtype, o->op, c->comm, c->stream));
  SYMMPIN_TEST_NCCL(ncclGroupSimulateEnd(&info));
  SYMMPIN_TEST_CUDA(
      cudaMemcpyAsync(c->host_out, c->sim_recv, op_bytes(o), cudaMemcpyDeviceToHost, c->stream));
  SYMMPIN_TEST_CUDA(cudaStreamSynchronize(c->stream));
  size_t touched = 0;
  for (size_t i = 0; i < op_bytes(o); i++) touched += ((unsigned char *)c->host_out)[i] != 0xA5;
  printf("GROUPSIM rank=%d call=%ld count=%zu dtype=%d estimated_us=%.1f touched_bytes=%zu\n",
         c->rank, c->calls, o->count, o->dtype, info.estimatedTime * 1e6, touched);
  if (touched) {
    fprintf(stderr, PROG ": rank %d: the simulated group wrote %zu bytes of its output\n", c->rank,
            touched);
    c->failed++;
  } else {
    c->passed++;
  }
#else
  (void)c;
  SYMMPIN_TEST_FAIL("--group-simulate needs NCCL 2.22 or newer (ncclGroupSimulateEnd)");
#endif
}

static void rank_run_checks(rank_ctx *c) {
  for (int it = 0; it < opt.iters; it++) {
    bool pairs = opt.two_streams && it >= opt.iters / 2;
    if (opt.group_simulate && it == opt.iters / 2) group_simulate(c);
    for (int k = 0; k < nops_total; k++) {
      if (pairs && k + 1 < nops_total && ops[k].kind != BUF_ARENA && ops[k + 1].kind != BUF_ARENA) {
        op_pair_concurrent(c, k, it);
        k++;
        continue;
      }
      double t0 = now_ms();
      op_start(c, k, it);
      /* A straggler (a checkpoint, a slow data loader): the peers' kernels wait for it. */
      if (opt.straggle_ms && c->rank == 0 && it == opt.iters / 2 && k == 0)
        usleep((useconds_t)opt.straggle_ms * 1000);
      op_call(c, k, it);
      op_finish(c, k, it);
      if (it == 0 && k == 0) c->first_call_ms = now_ms() - t0;
    }
  }
}

/* ---- timing ---- */

static const size_t bench_bytes[] = {1024, 4096, 16384, 65536, 262144, 1048576};
#define NBENCH (sizeof(bench_bytes) / sizeof(bench_bytes[0]))

/* One call site for every timed all-reduce (warm-up, eager and captured), as in a real program's
 * training loop, so that what warm-up planned is what gets timed. */
__attribute__((noinline)) static void bench_allreduce(rank_ctx **cs, int n, bool single, size_t bytes) {
  if (single) SYMMPIN_TEST_NCCL(ncclGroupStart());
  for (int i = 0; i < n; i++) {
    SYMMPIN_TEST_CUDA(cudaSetDevice(cs[i]->dev));
    SYMMPIN_TEST_NCCL(ncclAllReduce(cs[i]->arena, cs[i]->arena + (2u << 20), bytes / 2,
                                    ncclBfloat16, ncclSum, cs[i]->comm, cs[i]->stream));
  }
  if (single) SYMMPIN_TEST_NCCL(ncclGroupEnd());
}

/* Warm every size up together (symmpin plans at agreement points after its warm-up), then time
 * each size eagerly and from a CUDA graph. All ranks run the same sequence. */
static void rank_bench(rank_ctx **cs, int n, bool single) {
  const int warm_rounds = 200, calls = 200, replays = 20;
  double eager[NBENCH], graph[NBENCH];
  for (int w = 0; w < warm_rounds; w++)
    for (size_t s = 0; s < NBENCH; s++) {
      bench_allreduce(cs, n, single, bench_bytes[s]);
    }
  for (int i = 0; i < n; i++) SYMMPIN_TEST_CUDA(cudaStreamSynchronize(cs[i]->stream));
  for (size_t s = 0; s < NBENCH; s++) {
    cudaEvent_t e0, e1;
    rank_ctx *c0 = cs[0];
    SYMMPIN_TEST_CUDA(cudaSetDevice(c0->dev));
    SYMMPIN_TEST_CUDA(cudaEventCreate(&e0));
    SYMMPIN_TEST_CUDA(cudaEventCreate(&e1));
    /* eager */
    SYMMPIN_TEST_CUDA(cudaEventRecord(e0, c0->stream));
    for (int k = 0; k < calls; k++) {
      bench_allreduce(cs, n, single, bench_bytes[s]);
    }
    SYMMPIN_TEST_CUDA(cudaSetDevice(c0->dev));
    SYMMPIN_TEST_CUDA(cudaEventRecord(e1, c0->stream));
    for (int i = 0; i < n; i++) SYMMPIN_TEST_CUDA(cudaStreamSynchronize(cs[i]->stream));
    float ms;
    SYMMPIN_TEST_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    eager[s] = ms * 1000.0 / calls;
    /* graph: capture `calls` calls per rank, replay */
    cudaGraphExec_t exec[MAX_RANKS];
    for (int i = 0; i < n; i++) {
      SYMMPIN_TEST_CUDA(cudaSetDevice(cs[i]->dev));
      SYMMPIN_TEST_CUDA(cudaStreamBeginCapture(cs[i]->stream, cudaStreamCaptureModeThreadLocal));
    }
    for (int k = 0; k < calls; k++) {
      bench_allreduce(cs, n, single, bench_bytes[s]);
    }
    for (int i = 0; i < n; i++) {
      cudaGraph_t g;
      SYMMPIN_TEST_CUDA(cudaSetDevice(cs[i]->dev));
      SYMMPIN_TEST_CUDA(cudaStreamEndCapture(cs[i]->stream, &g));
      SYMMPIN_TEST_CUDA(cudaGraphInstantiate(&exec[i], g, 0));
      SYMMPIN_TEST_CUDA(cudaGraphDestroy(g));
      SYMMPIN_TEST_CUDA(cudaGraphLaunch(exec[i], cs[i]->stream)); /* warm */
    }
    for (int i = 0; i < n; i++) SYMMPIN_TEST_CUDA(cudaStreamSynchronize(cs[i]->stream));
    SYMMPIN_TEST_CUDA(cudaSetDevice(c0->dev));
    SYMMPIN_TEST_CUDA(cudaEventRecord(e0, c0->stream));
    for (int r = 0; r < replays; r++)
      for (int i = 0; i < n; i++) {
        SYMMPIN_TEST_CUDA(cudaSetDevice(cs[i]->dev));
        SYMMPIN_TEST_CUDA(cudaGraphLaunch(exec[i], cs[i]->stream));
      }
    SYMMPIN_TEST_CUDA(cudaSetDevice(c0->dev));
    SYMMPIN_TEST_CUDA(cudaEventRecord(e1, c0->stream));
    for (int i = 0; i < n; i++) SYMMPIN_TEST_CUDA(cudaStreamSynchronize(cs[i]->stream));
    SYMMPIN_TEST_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    graph[s] = ms * 1000.0 / ((double)calls * replays);
    for (int i = 0; i < n; i++) SYMMPIN_TEST_CUDA(cudaGraphExecDestroy(exec[i]));
    SYMMPIN_TEST_CUDA(cudaEventDestroy(e0));
    SYMMPIN_TEST_CUDA(cudaEventDestroy(e1));
  }
  if (cs[0]->rank == 0)
    for (size_t s = 0; s < NBENCH; s++)
      printf("bench bytes=%zu eager_us=%.2f graph_us=%.2f\n", bench_bytes[s], eager[s], graph[s]);
}

/* ---- the three modes ---- */

static void report(rank_ctx *c) {
  if (opt.colls)
    printf("RESULT rank=%d passed=%ld failed=%ld checksum=%016" PRIx64 " rs_checksum=%016" PRIx64
           "\n",
           c->rank, c->passed, c->failed, c->checksum, c->rs_checksum);
  else
    printf("RESULT rank=%d passed=%ld failed=%ld checksum=%016" PRIx64 "\n", c->rank, c->passed,
           c->failed, c->checksum);
  printf("AVG rank=%d checksum=%016" PRIx64 "\n", c->rank, c->avg_checksum);
  fflush(stdout);
}

/* --split-hosts: the same checks on this rank's host's communicator (split off the world one),
 * over the world pass's buffers; its counts and checksum continue the world pass's. */
static void run_split_checks(rank_ctx *c) {
  int per_host = opt.nranks / opt.split_hosts;
  rank_ctx sub = *c;
  SYMMPIN_TEST_NCCL(ncclCommSplit(c->comm, c->rank / per_host, c->rank, &sub.comm, NULL));
  SYMMPIN_TEST_NCCL(ncclCommUserRank(sub.comm, &sub.rank));
  SYMMPIN_TEST_NCCL(ncclCommCount(sub.comm, &sub.nranks));
  sub.calls = 0;
  rank_run_checks(&sub);
  printf("SPLIT rank=%d host=%d host_rank=%d host_ranks=%d calls=%ld\n", c->rank,
         c->rank / per_host, sub.rank, sub.nranks, sub.calls);
  SYMMPIN_TEST_NCCL(ncclCommDestroy(sub.comm));
  c->passed = sub.passed;
  c->failed = sub.failed;
  c->checksum = sub.checksum;
  c->avg_checksum = sub.avg_checksum;
}

/* --reset: the communicator and every buffer gone, the device reset (its context destroyed; the
 * next call makes a new one), then the same checks on a new communicator (`id`); the counts and
 * checksums go on from the first pass. */
static void run_after_reset(rank_ctx *c, ncclUniqueId id) {
  rank_teardown(c);
  SYMMPIN_TEST_NCCL(ncclCommDestroy(c->comm));
  SYMMPIN_TEST_CUDA(cudaSetDevice(c->dev));
  SYMMPIN_TEST_CUDA(cudaDeviceReset());
  SYMMPIN_TEST_CUDA(cudaSetDevice(c->dev));
  SYMMPIN_TEST_NCCL(ncclCommInitRank(&c->comm, c->nranks, id, c->rank));
  rank_setup(c);
  c->calls = 0;
  rank_run_checks(c);
  printf("RESET rank=%d calls=%ld\n", c->rank, c->calls);
}

static int child_main(int rank, const char *uid_hex, const char *uid2_hex) {
  ncclUniqueId id, id2 = {{0}};
  if (!symmpin_test_hex_decode(uid_hex, id.internal, sizeof id.internal))
    return symmpin_test_usage_error(PROG, "bad --uid '%s'", uid_hex);
  if (opt.reset &&
      (!uid2_hex || !symmpin_test_hex_decode(uid2_hex, id2.internal, sizeof id2.internal)))
    return symmpin_test_usage_error(PROG, "--reset needs --uid2 (the hex ncclUniqueId)");
  int ngpus;
  SYMMPIN_TEST_CUDA(cudaGetDeviceCount(&ngpus));
  rank_ctx c = {.rank = rank, .nranks = opt.nranks, .dev = rank % ngpus};
  SYMMPIN_TEST_CUDA(cudaSetDevice(c.dev));
  SYMMPIN_TEST_NCCL(ncclCommInitRank(&c.comm, opt.nranks, id, rank));
  rank_setup(&c);
  if (opt.bench) {
    rank_ctx *cs[1] = {&c};
    rank_bench(cs, 1, false);
  } else {
    double t0 = now_ms();
    rank_run_checks(&c);
    double checks_ms = now_ms() - t0;
    if (opt.split_hosts) run_split_checks(&c);
    if (opt.reset) run_after_reset(&c, id2);
    report(&c);
    printf("TIME rank=%d first_call_ms=%.1f checks_ms=%.1f\n", c.rank, c.first_call_ms, checks_ms);
  }
  /* Every result is out: what follows is teardown (the launcher bounds it separately). */
  symmpin_test_launch_results_done(c.rank);
  rank_teardown(&c);
  /* Finalize keeps the handle valid: the async-error query must still answer (and say nothing
   * went wrong) after symmpin released its state for the communicator. */
  SYMMPIN_TEST_NCCL(ncclCommFinalize(c.comm));
  ncclResult_t async = ncclInternalError;
  SYMMPIN_TEST_NCCL(ncclCommGetAsyncError(c.comm, &async));
  if (async != ncclSuccess) {
    fprintf(stderr, PROG ": rank %d: async error %d after finalize\n", c.rank, (int)async);
    c.failed++;
  }
  SYMMPIN_TEST_NCCL(ncclCommDestroy(c.comm));
  return c.failed ? 1 : 0;
}

/* Compare RESULT and AVG lines: every rank passed everything and all checksums are equal. */
static int summarize(const uint64_t *sums, const uint64_t *avgs, const long *passed,
                     const long *failed, int n) {
  long p = 0, f = 0;
  for (int r = 0; r < n; r++) {
    p += passed[r];
    f += failed[r];
    if (sums[r] != sums[0] || avgs[r] != avgs[0]) {
      printf("%s of rank %d differs from rank 0\n",
             sums[r] != sums[0] ? "checksum" : "avg checksum", r);
      f++;
    } else {
      p++;
    }
  }
  printf("symmpin-app: %ld passed, %ld failed\n", p, f);
  return f ? 1 : 0;
}

typedef struct procs_results {
  uint64_t sums[MAX_RANKS], avgs[MAX_RANKS];
  long passed[MAX_RANKS], failed[MAX_RANKS];
  int rank; /* whose output is being read */
} procs_results;

static void read_result_line(const char *line, void *arg) {
  procs_results *pr = arg;
  int rr;
  sscanf(line, "RESULT rank=%d passed=%ld failed=%ld checksum=%" SCNx64, &rr, &pr->passed[pr->rank],
         &pr->failed[pr->rank], &pr->sums[pr->rank]);
  sscanf(line, "AVG rank=%d checksum=%" SCNx64, &rr, &pr->avgs[pr->rank]);
}

static int run_procs(void) {
  ncclUniqueId id, id2;
  SYMMPIN_TEST_NCCL(ncclGetUniqueId(&id));
  char hex[2 * sizeof(id.internal) + 1], hex2[sizeof hex], ns[16], its[16], sts[24], hs[16];
  symmpin_test_hex_encode(id.internal, sizeof id.internal, hex, sizeof hex);
  if (opt.reset) { /* the communicator after the reset */
    SYMMPIN_TEST_NCCL(ncclGetUniqueId(&id2));
    symmpin_test_hex_encode(id2.internal, sizeof id2.internal, hex2, sizeof hex2);
  }
  snprintf(ns, sizeof ns, "%d", opt.nranks);
  snprintf(its, sizeof its, "%d", opt.iters);
  snprintf(sts, sizeof sts, "%ld", opt.straggle_ms);
  snprintf(hs, sizeof hs, "%d", opt.split_hosts);
  char *args[24];
  int a = 0;
  args[a++] = "--uid";
  args[a++] = hex;
  args[a++] = "--ranks";
  args[a++] = ns;
  args[a++] = "--iters";
  args[a++] = its;
  if (opt.diverge) args[a++] = "--diverge";
  if (opt.bench) args[a++] = "--bench";
  if (opt.quiet) args[a++] = "--quiet";
  if (opt.two_streams) args[a++] = "--two-streams";
  if (opt.group_simulate) args[a++] = "--group-simulate";
  if (opt.colls) args[a++] = "--colls";
  if (opt.reset) args[a++] = "--reset", args[a++] = "--uid2", args[a++] = hex2;
  if (opt.straggle_ms) args[a++] = "--straggle", args[a++] = sts;
  if (opt.split_hosts) args[a++] = "--split-hosts", args[a++] = hs;
  args[a] = NULL;
  symmpin_test_launch sp;
  if (!symmpin_test_launch_init(&sp, PROG) || !symmpin_test_launch_start(&sp, opt.nranks, args))
    return 2;
  symmpin_test_launch_wait(&sp);
  procs_results pr = {{0}, {0}, {0}, {0}, 0};
  int bad_exit = 0;
  for (int r = 0; r < opt.nranks; r++) {
    pr.rank = r;
    /* A rank that hung after its results is judged by them (the exit status says it hung). */
    if (!symmpin_test_launch_collect(&sp, r, read_result_line, &pr) &&
        sp.rank[r].end != SYMMPIN_TEST_RANK_HUNG_AFTER)
      bad_exit++;
  }
  if (opt.bench) return symmpin_test_launch_exit_code(&sp, bad_exit == 0);
  pr.failed[0] += bad_exit;
  int rc = summarize(pr.sums, pr.avgs, pr.passed, pr.failed, opt.nranks);
  return symmpin_test_launch_exit_code(&sp, rc == 0);
}

typedef struct thread_arg {
  ncclUniqueId id;
  rank_ctx c;
} thread_arg;

static void *thread_main(void *p) {
  thread_arg *t = p;
  SYMMPIN_TEST_CUDA(cudaSetDevice(t->c.dev));
  SYMMPIN_TEST_NCCL(ncclCommInitRank(&t->c.comm, t->c.nranks, t->id, t->c.rank));
  rank_setup(&t->c);
  rank_run_checks(&t->c);
  rank_teardown(&t->c);
  SYMMPIN_TEST_NCCL(ncclCommDestroy(t->c.comm));
  return NULL;
}

static int run_threads(int ngpus) {
  thread_arg t[MAX_RANKS];
  pthread_t th[MAX_RANKS];
  ncclUniqueId id;
  SYMMPIN_TEST_NCCL(ncclGetUniqueId(&id));
  for (int r = 0; r < opt.nranks; r++) {
    t[r] = (thread_arg){.id = id, .c = {.rank = r, .nranks = opt.nranks, .dev = r % ngpus}};
    pthread_create(&th[r], NULL, thread_main, &t[r]);
  }
  uint64_t sums[MAX_RANKS], avgs[MAX_RANKS];
  long passed[MAX_RANKS], failed[MAX_RANKS];
  for (int r = 0; r < opt.nranks; r++) {
    pthread_join(th[r], NULL);
    report(&t[r].c);
    sums[r] = t[r].c.checksum;
    avgs[r] = t[r].c.avg_checksum;
    passed[r] = t[r].c.passed;
    failed[r] = t[r].c.failed;
  }
  return summarize(sums, avgs, passed, failed, opt.nranks);
}

/* One thread drives every rank: each all-reduce is issued for all ranks inside one group. */
static int run_single(int ngpus) {
  rank_ctx cs[MAX_RANKS];
  rank_ctx *cp[MAX_RANKS];
  ncclComm_t comms[MAX_RANKS];
  int devs[MAX_RANKS];
  for (int r = 0; r < opt.nranks; r++) devs[r] = r % ngpus;
  SYMMPIN_TEST_NCCL(ncclCommInitAll(comms, opt.nranks, devs));
  for (int r = 0; r < opt.nranks; r++) {
    cs[r] = (rank_ctx){.rank = r, .nranks = opt.nranks, .dev = devs[r], .comm = comms[r]};
    cp[r] = &cs[r];
    rank_setup(&cs[r]);
  }
  if (opt.bench) {
    rank_bench(cp, opt.nranks, true);
  } else {
    for (int it = 0; it < opt.iters; it++)
      for (int k = 0; k < nops_total; k++) {
        for (int r = 0; r < opt.nranks; r++) op_start(&cs[r], k, it);
        SYMMPIN_TEST_NCCL(ncclGroupStart());
        for (int r = 0; r < opt.nranks; r++) op_call(&cs[r], k, it);
        SYMMPIN_TEST_NCCL(ncclGroupEnd());
        for (int r = 0; r < opt.nranks; r++) op_finish(&cs[r], k, it);
      }
  }
  uint64_t sums[MAX_RANKS], avgs[MAX_RANKS];
  long passed[MAX_RANKS], failed[MAX_RANKS];
  for (int r = 0; r < opt.nranks; r++) {
    rank_teardown(&cs[r]);
    SYMMPIN_TEST_NCCL(ncclCommDestroy(cs[r].comm));
    if (!opt.bench) report(&cs[r]);
    sums[r] = cs[r].checksum;
    avgs[r] = cs[r].avg_checksum;
    passed[r] = cs[r].passed;
    failed[r] = cs[r].failed;
  }
  return opt.bench ? 0 : summarize(sums, avgs, passed, failed, opt.nranks);
}

static void usage(void) {
  printf("usage: " PROG " [--mode procs|threads|single] [--ranks N] [--iters K] [--diverge]\n"
         "                   [--two-streams] [--straggle MS] [--split-hosts K] [--group-simulate]\n"
         "                   [--colls] [--reset] [--bench] [--quiet]\n"
         "An ordinary NCCL program (all-reduces of every datatype and op, checked exactly) to run\n"
         "with and without LD_PRELOAD=libsymmpin.so. Last line: '" PROG ": N passed, M failed'.\n"
         "  --mode M        procs (one process per GPU, default), threads (one thread per GPU) or\n"
         "                  single (one thread drives every GPU)\n"
         "  --ranks N       ranks, 1..%d (default: every GPU); rank r on GPU r %% GPUs. More\n"
         "                  ranks than GPUs (procs only) need an NCCL host id per rank:\n"
         "                  APP_RANK_WRAPPER=scripts/rank-env.sh RANK_ENV_NCCL_HOSTS=N\n"
         "  --iters K       iterations of all datatypes and ops (default 6)\n"
         "  --diverge       odd ranks reach some all-reduces from other call sites\n"
         "  --two-streams   in the second half, pairs of all-reduces on two streams at once\n"
         "  --straggle MS   rank 0 sleeps MS ms before one all-reduce half-way through (a slow\n"
         "                  peer: the others must wait for it and get the right result)\n"
         "  --split-hosts K then the same checks on communicators split off per host (K blocks\n"
         "                  of consecutive ranks; K must divide the ranks; procs only)\n"
         "  --group-simulate half-way, one all-reduce in a group ended by ncclGroupSimulateEnd:\n"
         "                  it must run nothing, and every later call must stay exact\n"
         "  --colls         also all-gathers (every datatype) and reduce-scatters (every datatype\n"
         "                  and op), in place and not, checked exactly\n"
         "  --reset         then cudaDeviceReset and the same checks on a new communicator in\n"
         "                  the new context (procs only)\n"
         "  --bench         time bf16 sums of 1K..1M instead (eager and graph; procs or single)\n"
         "  --quiet         no message per wrong element\n"
         "  -h, --help      this text\n"
         "  --version       the version and git revision\n"
         "Procs mode bounds every rank (tests/apps/launch.h: APP_RANK_TIMEOUT_S, APP_TEARDOWN_S,\n"
         "APP_RANK_WRAPPER); exit status 3: right results, but a rank hung in its teardown.\n",
         MAX_RANKS);
}

enum {
  OPT_MODE = 256,
  OPT_RANKS,
  OPT_ITERS,
  OPT_DIVERGE,
  OPT_BENCH,
  OPT_QUIET,
  OPT_TWO_STREAMS,
  OPT_STRAGGLE,
  OPT_SPLIT_HOSTS,
  OPT_GROUP_SIMULATE,
  OPT_COLLS,
  OPT_RESET,
  OPT_VERSION,
  OPT_CHILD, /* internal: --child RANK --uid HEX, added by --mode procs */
  OPT_UID,
  OPT_UID2, /* internal: the communicator after --reset's reset */
};

static const struct option longopts[] = {
    {"mode", required_argument, NULL, OPT_MODE},
    {"ranks", required_argument, NULL, OPT_RANKS},
    {"iters", required_argument, NULL, OPT_ITERS},
    {"diverge", no_argument, NULL, OPT_DIVERGE},
    {"bench", no_argument, NULL, OPT_BENCH},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"two-streams", no_argument, NULL, OPT_TWO_STREAMS},
    {"straggle", required_argument, NULL, OPT_STRAGGLE},
    {"split-hosts", required_argument, NULL, OPT_SPLIT_HOSTS},
    {"group-simulate", no_argument, NULL, OPT_GROUP_SIMULATE},
    {"colls", no_argument, NULL, OPT_COLLS},
    {"reset", no_argument, NULL, OPT_RESET},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {"child", required_argument, NULL, OPT_CHILD},
    {"uid", required_argument, NULL, OPT_UID},
    {"uid2", required_argument, NULL, OPT_UID2},
    {NULL, 0, NULL, 0},
};

int main(int argc, char **argv) {
  int child = -1, c;
  long v = 0;
  const char *uid = NULL, *uid2 = NULL;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (c) {
    case 'h': usage(); return 0;
    case OPT_VERSION: return symmpin_test_print_version(PROG);
    case OPT_MODE:
      if (strcmp(optarg, "procs") && strcmp(optarg, "threads") && strcmp(optarg, "single"))
        return symmpin_test_usage_error(PROG, "bad --mode '%s' (procs, threads, single)", optarg);
      opt.mode = optarg;
      break;
    case OPT_RANKS:
      if (!symmpin_test_parse_int(optarg, 1, MAX_RANKS, &v))
        return symmpin_test_usage_error(PROG, "--ranks must be 1..%d", MAX_RANKS);
      opt.nranks = (int)v;
      break;
    case OPT_ITERS:
      if (!symmpin_test_parse_int(optarg, 1, 1000000, &v))
        return symmpin_test_usage_error(PROG, "--iters must be 1..1000000");
      opt.iters = (int)v;
      break;
    case OPT_DIVERGE: opt.diverge = true; break;
    case OPT_BENCH: opt.bench = true; break;
    case OPT_QUIET: opt.quiet = true; break;
    case OPT_TWO_STREAMS: opt.two_streams = true; break;
    case OPT_STRAGGLE:
      if (!symmpin_test_parse_int(optarg, 0, 600000, &v))
        return symmpin_test_usage_error(PROG, "--straggle must be 0..600000 (ms)");
      opt.straggle_ms = v;
      break;
    case OPT_SPLIT_HOSTS:
      if (!symmpin_test_parse_int(optarg, 1, MAX_RANKS, &v))
        return symmpin_test_usage_error(PROG, "--split-hosts must be 1..%d", MAX_RANKS);
      opt.split_hosts = (int)v;
      break;
    case OPT_GROUP_SIMULATE: opt.group_simulate = true; break;
    case OPT_COLLS: opt.colls = true; break;
    case OPT_RESET: opt.reset = true; break;
    case OPT_CHILD:
      if (!symmpin_test_parse_int(optarg, 0, MAX_RANKS - 1, &v))
        return symmpin_test_usage_error(PROG, "bad --child '%s'", optarg);
      child = (int)v;
      break;
    case OPT_UID: uid = optarg; break;
    case OPT_UID2: uid2 = optarg; break;
    default: return symmpin_test_option_error(PROG, c, argv, longopts);
    }
  }
  if (optind < argc)
    return symmpin_test_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
  if (opt.bench && !strcmp(opt.mode, "threads"))
    return symmpin_test_usage_error(PROG, "--bench runs with --mode procs or single");
  if (opt.split_hosts && opt.colls)
    return symmpin_test_usage_error(PROG, "--colls takes no --split-hosts (its buffers are sized "
                                          "for the world communicator)");
  if (opt.reset && (strcmp(opt.mode, "procs") || opt.bench))
    return symmpin_test_usage_error(PROG, "--reset runs with --mode procs, without --bench (a "
                                          "reset destroys the context of every thread)");
  if (opt.split_hosts && strcmp(opt.mode, "procs"))
    return symmpin_test_usage_error(PROG, "--split-hosts runs with --mode procs");
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  if (child >= 0) {
    if (!uid || strlen(uid) != 2 * sizeof(((ncclUniqueId *)0)->internal) || opt.nranks <= child)
      return symmpin_test_usage_error(PROG, "--child needs --uid (the hex ncclUniqueId) and "
                                            "--ranks above the rank");
    build_ops();
    return child_main(child, uid, uid2);
  }
  int ngpus;
  SYMMPIN_TEST_CUDA(cudaGetDeviceCount(&ngpus));
  if (opt.nranks <= 0) opt.nranks = ngpus < MAX_RANKS ? ngpus : MAX_RANKS;
  build_ops();
  /* One process holds one NCCL host id, and NCCL refuses two ranks of one host on one GPU. */
  if (strcmp(opt.mode, "procs") && opt.nranks > ngpus) {
    fprintf(stderr,
            PROG ": --mode %s with %d ranks needs %d GPUs (NCCL takes one rank per GPU "
                 "of a host); %d here\n",
            opt.mode, opt.nranks, opt.nranks, ngpus);
    return 2;
  }
  if (opt.split_hosts && opt.nranks % opt.split_hosts)
    return symmpin_test_usage_error(PROG, "--split-hosts %d does not divide %d ranks",
                                    opt.split_hosts, opt.nranks);
  printf(PROG ": mode=%s ranks=%d gpus=%d iters=%d ops/iter=%d%s%s%s%s\n", opt.mode, opt.nranks,
         ngpus, opt.iters, nops_total, opt.diverge ? " diverge" : "",
         opt.two_streams ? " two-streams" : "", opt.group_simulate ? " group-simulate" : "",
         opt.reset ? " reset" : "");
  fflush(stdout);
  if (!strcmp(opt.mode, "procs")) return run_procs();
  if (!strcmp(opt.mode, "threads")) return run_threads(ngpus);
  return run_single(ngpus);
}
