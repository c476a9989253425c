/* symmpin-dp: a C data-parallel training step, issue 11's second end-to-end workload. It knows
 * nothing of symmpin; scripts/gpu-suite.sh (step dp_groups) runs it with and without the preload.
 *
 * One process per rank (tests/apps/launch.h, as torchrun or mpirun would start them; rank r on GPU
 * r % GPUs, so ranks may share a GPU where NCCL has a host id per rank). Each
 * step, on the compute stream: a forward pass and a backward pass over LAYERS layers, each a
 * matrix product (a tiled kernel of ours, 512 x 512 x 512, bf16 in, fp32 accumulate), the backward
 * pass writing one gradient per layer (768 B to 1.2 MB of bf16, the sizes of issue 11). The
 * gradients are averaged over the ranks by LAYERS all-reduces in one ncclGroupStart/End on a
 * communication stream, issued as soon as the backward pass has written them, while the compute
 * stream runs the next step's forward pass (overlap); the update waits for the group.
 *
 * Prints, per rank, a digest of the parameters after the last step (the same on every rank, and
 * with or without symmpin), and on rank 0 the time per step, the same with the all-reduces left
 * out (--no-comm: compute alone), and the time of the group alone (a loop of groups with no
 * compute). Last line: "symmpin-dp: N passed, M failed" (the digests of the ranks must match).
 *
 *   symmpin-dp [--ranks N] [--steps K] [--no-comm]                                              */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <getopt.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/apps/launch.h"
#include "tests/gpu/gpu_common.h"

#define PROG "symmpin-dp"
#define MAX_RANKS SYMMPIN_TEST_LAUNCH_MAX_RANKS
#define LAYERS 12
#define DIM 512 /* the matrix products: 0.27 GFLOP each, 24 per step */
#define TILE 32

static struct {
  int nranks, steps, child;
  bool no_comm;
  const char *uid;
} opt = {0, 60, -1, false, NULL}; /* nranks 0: one per GPU */

/* Gradient sizes in elements (bf16): 384 (768 B) up to 614400 (1.2 MB), geometric. */
static size_t grad_count(int layer) {
  static const size_t counts[LAYERS] = {384,   768,   1536,  3072,   6144,   12288,
                                        24576, 49152, 98304, 196608, 393216, 614400};
  return counts[layer];
}

/* c = a x b (DIM x DIM, row-major), bf16 operands, fp32 accumulation in a fixed order. */
__global__ void matmul(const __nv_bfloat16 *a, const __nv_bfloat16 *b, float *c) {
  __shared__ float as[TILE][TILE], bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < DIM; k0 += TILE) {
    as[threadIdx.y][threadIdx.x] = __bfloat162float(a[row * DIM + k0 + threadIdx.x]);
    bs[threadIdx.y][threadIdx.x] = __bfloat162float(b[(k0 + threadIdx.y) * DIM + col]);
    __syncthreads();
    for (int k = 0; k < TILE; k++) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
    __syncthreads();
  }
  c[row * DIM + col] = acc;
}

/* The layer's gradient from its product: deterministic, small, different per rank and step. */
__global__ void make_grad(const float *prod, __nv_bfloat16 *grad, size_t n, int rank, int step) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float v = prod[i % ((size_t)DIM * DIM)] * 1e-3f + 0.01f * (float)((rank + 1) * (step % 7 + 1));
    grad[i] = __float2bfloat16(v);
  }
}

/* param -= lr * averaged gradient; the first DIM x DIM parameters feed the next products. */
__global__ void update(__nv_bfloat16 *param, const __nv_bfloat16 *grad, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    param[i] = __float2bfloat16(__bfloat162float(param[i]) - 0.05f * __bfloat162float(grad[i]));
}

__global__ void init_bf16(__nv_bfloat16 *x, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint64_t h = (seed + i) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 31;
    x[i] = __float2bfloat16(((float)(h % 2001) - 1000.0f) * 1e-4f);
  }
}

typedef struct rank_ctx {
  int rank, nranks;
  ncclComm_t comm;
  cudaStream_t compute, comm_stream;
  cudaEvent_t grads_ready, group_done;
  __nv_bfloat16 *act, *weight[LAYERS], *param[LAYERS], *grad[LAYERS];
  float *prod;
} rank_ctx;

static void setup(rank_ctx *c) {
  SYMMPIN_TEST_CUDA(cudaStreamCreateWithFlags(&c->compute, cudaStreamNonBlocking));
  SYMMPIN_TEST_CUDA(cudaStreamCreateWithFlags(&c->comm_stream, cudaStreamNonBlocking));
  SYMMPIN_TEST_CUDA(cudaEventCreateWithFlags(&c->grads_ready, cudaEventDisableTiming));
  SYMMPIN_TEST_CUDA(cudaEventCreateWithFlags(&c->group_done, cudaEventDisableTiming));
  size_t sq = (size_t)DIM * DIM;
  SYMMPIN_TEST_CUDA(cudaMalloc(&c->act, sq * sizeof(__nv_bfloat16)));
  SYMMPIN_TEST_CUDA(cudaMalloc(&c->prod, sq * sizeof(float)));
  init_bf16<<<256, 256, 0, c->compute>>>(c->act, sq, 17); /* the same input on every rank */
  for (int l = 0; l < LAYERS; l++) {
    size_t n = grad_count(l);
    SYMMPIN_TEST_CUDA(cudaMalloc(&c->weight[l], sq * sizeof(__nv_bfloat16)));
    SYMMPIN_TEST_CUDA(cudaMalloc(&c->param[l], n * sizeof(__nv_bfloat16)));
    SYMMPIN_TEST_CUDA(cudaMalloc(&c->grad[l], n * sizeof(__nv_bfloat16)));
    init_bf16<<<256, 256, 0, c->compute>>>(c->weight[l], sq, 1000 + l); /* replicated model */
    init_bf16<<<256, 256, 0, c->compute>>>(c->param[l], n, 5000 + l);
  }
  SYMMPIN_TEST_CUDA(cudaGetLastError());
  SYMMPIN_TEST_CUDA(cudaStreamSynchronize(c->compute));
}

static void products(rank_ctx *c, int step, bool write_grads) {
  dim3 grid(DIM / TILE, DIM / TILE), block(TILE, TILE);
  for (int l = 0; l < LAYERS; l++) {
    int layer = write_grads ? LAYERS - 1 - l : l; /* backward runs the layers in reverse */
    matmul<<<grid, block, 0, c->compute>>>(c->act, c->weight[layer], c->prod);
    if (write_grads)
      make_grad<<<256, 256, 0, c->compute>>>(c->prod, c->grad[layer], grad_count(layer), c->rank,
                                             step);
  }
  SYMMPIN_TEST_CUDA(cudaGetLastError());
}

static void group(rank_ctx *c) {
  SYMMPIN_TEST_NCCL(ncclGroupStart());
  for (int l = LAYERS - 1; l >= 0; l--) /* in the order the backward pass wrote them */
    SYMMPIN_TEST_NCCL(ncclAllReduce(c->grad[l], c->grad[l], grad_count(l), ncclBfloat16, ncclAvg,
                                    c->comm, c->comm_stream));
  SYMMPIN_TEST_NCCL(ncclGroupEnd());
}

/* One training step: backward (gradients), the group on the communication stream overlapping the
 * next forward pass, then the update after the group. */
static void train_step(rank_ctx *c, int step, bool comm) {
  products(c, step, true);
  SYMMPIN_TEST_CUDA(cudaEventRecord(c->grads_ready, c->compute));
  if (comm) {
    SYMMPIN_TEST_CUDA(cudaStreamWaitEvent(c->comm_stream, c->grads_ready, 0));
    group(c);
    SYMMPIN_TEST_CUDA(cudaEventRecord(c->group_done, c->comm_stream));
  }
  products(c, step, false); /* the next forward pass, overlapping the group */
  if (comm) SYMMPIN_TEST_CUDA(cudaStreamWaitEvent(c->compute, c->group_done, 0));
  for (int l = 0; l < LAYERS; l++)
    update<<<256, 256, 0, c->compute>>>(c->param[l], c->grad[l], grad_count(l));
  SYMMPIN_TEST_CUDA(cudaGetLastError());
}

static double ms_of(rank_ctx *c, int steps, bool comm, bool group_only) {
  cudaEvent_t a, b;
  SYMMPIN_TEST_CUDA(cudaEventCreate(&a));
  SYMMPIN_TEST_CUDA(cudaEventCreate(&b));
  cudaStream_t s = group_only ? c->comm_stream : c->compute;
  SYMMPIN_TEST_CUDA(cudaDeviceSynchronize());
  SYMMPIN_TEST_CUDA(cudaEventRecord(a, s));
  for (int i = 0; i < steps; i++) {
    if (group_only) group(c);
    else train_step(c, 100000 + i, comm);
  }
  SYMMPIN_TEST_CUDA(cudaEventRecord(b, s));
  SYMMPIN_TEST_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  SYMMPIN_TEST_CUDA(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / steps;
}

static uint64_t params_digest(rank_ctx *c) {
  uint64_t h = 0x6470ull;
  for (int l = 0; l < LAYERS; l++) {
    size_t n = grad_count(l);
    uint16_t *host = (uint16_t *)malloc(n * 2);
    if (!host) SYMMPIN_TEST_FAIL("out of memory");
    SYMMPIN_TEST_CUDA(cudaMemcpy(host, c->param[l], n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) h = symmpin_test_splitmix64(h ^ host[i]);
    free(host);
  }
  return h;
}

static int run_child(void) {
  rank_ctx c;
  memset(&c, 0, sizeof c);
  c.rank = opt.child;
  c.nranks = opt.nranks;
  int ngpus = 0;
  SYMMPIN_TEST_CUDA(cudaGetDeviceCount(&ngpus));
  SYMMPIN_TEST_CUDA(cudaSetDevice(c.rank % ngpus));
  ncclUniqueId id;
  if (!symmpin_test_hex_decode(opt.uid, id.internal, sizeof id.internal))
    SYMMPIN_TEST_FAIL("bad --uid '%s'", opt.uid);
  SYMMPIN_TEST_NCCL(ncclCommInitRank(&c.comm, c.nranks, id, c.rank));
  setup(&c);
  /* The steps whose parameters are compared: with communication (unless --no-comm). */
  for (int s = 0; s < opt.steps; s++) train_step(&c, s, !opt.no_comm);
  SYMMPIN_TEST_CUDA(cudaDeviceSynchronize());
  uint64_t digest = params_digest(&c);
  printf("DP-DIGEST rank=%d steps=%d comm=%d digest=%016llx\n", c.rank, opt.steps, !opt.no_comm,
         (unsigned long long)digest);
  /* Timing (after the digest, so it does not change what is compared). */
  double step_ms = ms_of(&c, 20, true, false);
  double compute_ms = ms_of(&c, 20, false, false);
  double group_ms = ms_of(&c, 50, true, true);
  if (c.rank == 0)
    printf("DP-TIME layers=%d step_us=%.2f compute_us=%.2f group_us=%.2f\n", LAYERS,
           step_ms * 1e3, compute_ms * 1e3, group_ms * 1e3);
  symmpin_test_launch_results_done(c.rank); /* what follows is teardown, bounded apart */
  SYMMPIN_TEST_NCCL(ncclCommDestroy(c.comm));
  return 0;
}

typedef struct rank_digest {
  unsigned long long digest;
  bool seen;
} rank_digest;

static void read_digest_line(const char *line, void *arg) {
  rank_digest *d = (rank_digest *)arg;
  int rr, ss, cc;
  if (sscanf(line, "DP-DIGEST rank=%d steps=%d comm=%d digest=%llx", &rr, &ss, &cc, &d->digest) == 4)
    d->seen = true;
}

static int run_parent(void) {
  int ngpus = 0;
  SYMMPIN_TEST_CUDA(cudaGetDeviceCount(&ngpus));
  if (opt.nranks == 0) {
    opt.nranks = ngpus < MAX_RANKS ? ngpus : MAX_RANKS;
    if (opt.nranks < 2) /* a one-rank run checks nothing of the ranks' agreement: say so, fail */
      return symmpin_test_usage_error(PROG, "%d GPU(s): give --ranks (ranks may share a GPU "
                                            "where NCCL has a host id per rank)", ngpus);
  }
  ncclUniqueId id;
  SYMMPIN_TEST_NCCL(ncclGetUniqueId(&id));
  char hex[2 * sizeof(id.internal) + 1], ns[16], st[16];
  symmpin_test_hex_encode(id.internal, sizeof id.internal, hex, sizeof hex);
  snprintf(ns, sizeof ns, "%d", opt.nranks);
  snprintf(st, sizeof st, "%d", opt.steps);
  char *args[] = {(char *)"--uid", hex, (char *)"--ranks", ns, (char *)"--steps", st,
                  opt.no_comm ? (char *)"--no-comm" : NULL, NULL};
  symmpin_test_launch sp;
  if (!symmpin_test_launch_init(&sp, PROG) || !symmpin_test_launch_start(&sp, opt.nranks, args))
    return 2;
  symmpin_test_launch_wait(&sp);
  long failed = 0;
  unsigned long long first = 0;
  for (int r = 0; r < opt.nranks; r++) {
    rank_digest d = {0, false};
    bool clean = symmpin_test_launch_collect(&sp, r, read_digest_line, &d);
    if (!d.seen || (!clean && sp.rank[r].end != SYMMPIN_TEST_RANK_HUNG_AFTER)) {
      printf("rank %d: no digest, or it did not end well\n", r);
      failed++;
    } else if (r == 0) {
      first = d.digest;
    } else if (d.digest != first) {
      printf("rank %d: parameters differ from rank 0's (%016llx vs %016llx)\n", r, d.digest, first);
      failed++;
    }
  }
  printf(PROG ": %ld passed, %ld failed\n", opt.nranks - failed, failed);
  return symmpin_test_launch_exit_code(&sp, failed == 0);
}

int main(int argc, char **argv) {
  static const struct option longs[] = {
      {"ranks", required_argument, NULL, 'n'}, {"steps", required_argument, NULL, 's'},
      {"no-comm", no_argument, NULL, 'x'},     {"child", required_argument, NULL, 'C'},
      {"uid", required_argument, NULL, 'u'},   {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  int ch;
  long v;
  while ((ch = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
    switch (ch) {
    case 'n':
      if (!symmpin_test_parse_int(optarg, 1, MAX_RANKS, &v))
        return symmpin_test_usage_error(PROG, "bad --ranks '%s'", optarg);
      opt.nranks = (int)v;
      break;
    case 's':
      if (!symmpin_test_parse_int(optarg, 1, 1000000, &v))
        return symmpin_test_usage_error(PROG, "bad --steps '%s'", optarg);
      opt.steps = (int)v;
      break;
    case 'x': opt.no_comm = true; break;
    case 'C':
      if (!symmpin_test_parse_int(optarg, 0, MAX_RANKS - 1, &v))
        return symmpin_test_usage_error(PROG, "bad --child '%s'", optarg);
      opt.child = (int)v;
      break;
    case 'u': opt.uid = optarg; break;
    case 'h':
      printf("usage: " PROG " [--ranks N] [--steps K] [--no-comm]\n"
             "A data-parallel training step with grouped gradient all-reduces overlapping compute\n"
             "(issue 11); see the comment at the top of tests/apps/dp_groups.cu.\n");
      return 0;
    default: return symmpin_test_usage_error(PROG, "unknown option");
    }
  }
  if (opt.child >= 0) {
    if (!opt.uid || strlen(opt.uid) != 2 * sizeof(((ncclUniqueId *)0)->internal) || !opt.nranks)
      return symmpin_test_usage_error(PROG, "--child needs --uid and --ranks");
    return run_child();
  }
  return run_parent();
}
