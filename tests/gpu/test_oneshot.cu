/* GPU test of the collectives' kernels (kernels/allreduce.h): every path of symmpin_kernel_launch,
 * i.e. the all-reduce's one-shot algorithms LL, copy (staged input), in-slot and two-shot, and the
 * all-gather's and reduce-scatter's LL and copy.
 *
 * One process simulates N ranks (argv: N, default 2): rank r lives on GPU r % ngpus, its "pool" is
 * a zeroed cudaMalloc'd buffer and slot pointers are raw pointers (no IPC in-process); peer access
 * is enabled when ngpus > 1. Every rank launches on its own stream, then all streams are synced
 * under a watchdog, so a hang is reported instead of waited on forever.
 *
 * Groups of checks: API argument checks; every datatype x op x {in place, out of place} x
 * {staged, in-slot} x sizes around vector/block/LL boundaries with misaligned user pointers, random
 * non-zero data and poisoned outputs (bitwise equal across ranks, exact for integers, float64
 * reference with per-dtype tolerances for floats, guard bytes around outputs untouched);
 * back-to-back calls on one slot (LL, copy, in-slot, in place and not); CUDA-graph capture +
 * replays with new data (one call of each algorithm); two streams on different slots; groups of
 * up to 16 calls in one launch against the same calls launched one by one; a rank that skips a
 * call on a slot (every rank must report an error, never combine two calls' data); the timeout
 * path of each algorithm (N-1 ranks launched). All-gather and reduce-scatter: every datatype
 * (every op), counts 0, 1, odd, around the LL limit and up to the largest chunk symmpin takes, in
 * place (NCCL's forms) and not, misaligned, against the host (all-gather bitwise; reduce-scatter
 * within tolerance and bitwise the all-reduce kernel's chunk); the three collectives back to back
 * on one slot of each shared class; captured and replayed.
 *
 * Usage: test_oneshot [N] [--small] [--colls] [--reset] [--seed S] (--help, --version). --small runs a
 * tiny subset with 1 s waits (for compute-sanitizer; with N = 1 no kernel waits for another, which
 * matters if the tool serializes kernels: N > 1 then shows up as timeouts). --reset runs one call
 * of each algorithm and a group, frees everything, resets every device (cudaDeviceReset), sets the
 * ranks up again and runs the same calls: the launcher must launch functions of the new context,
 * not of the destroyed one, whose address the new one may have (issue 36, item 3).
 * Prints one line per group and `test_oneshot: P passed, F failed`; exits 1 on any failure. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <errno.h>
#include <getopt.h>
#include <unistd.h>

#include "common/types.h"
#include "driver/cu.h" /* --reset: the current context's address and id, as the launcher sees them */
#include "kernels/allreduce.h"
#include "kernels/select.h" /* the algorithms' thresholds: cases on both sides of each */
#include "tests/gpu/gpu_common.h" /* --version, bad-option messages: our tools' conventions */

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "test_oneshot: %s failed at %s:%d: %s\n", #x, __FILE__, __LINE__,            \
              cudaGetErrorString(e_));                                                             \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)

static const size_t kGuard = 256;     /* poisoned bytes around every user buffer */
static const uint8_t kPoisonOut = 0xA5, kPoisonIn = 0x5A;
static uint64_t g_timeout_cycles = 20000000000ull; /* ~10 s: a bug fails, never hangs */
static int g_passed, g_failed;
static bool g_colls_only; /* --colls: the API checks and the all-gather / reduce-scatter groups only */
static bool g_reset;      /* --reset: calls, cudaDeviceReset, the same calls (test_reset) */

/* ---------------------------------------------------------------- random numbers, dtypes */

static uint64_t g_rng;
static uint64_t rnd() { /* xorshift64*: fixed seed, printed, reproducible */
  g_rng ^= g_rng >> 12, g_rng ^= g_rng << 25, g_rng ^= g_rng >> 27;
  return g_rng * 0x2545F4914F6CDD1Dull;
}
static double rnd01() { return (double)(rnd() >> 11) / 9007199254740992.0; }

static bool is_int(int d) { return d <= SYMMPIN_UINT64; }
static bool is_signed(int d) {
  return d == SYMMPIN_INT8 || d == SYMMPIN_INT32 || d == SYMMPIN_INT64;
}

/* Decode one floating element to double (exact). */
static double decode(int d, const uint8_t *p) {
  switch (d) {
  case SYMMPIN_FLOAT16: {
    __half_raw r;
    memcpy(&r.x, p, 2);
    return (double)__half2float(__half(r));
  }
  case SYMMPIN_BFLOAT16: {
    __nv_bfloat16_raw r;
    memcpy(&r.x, p, 2);
    return (double)__bfloat162float(__nv_bfloat16(r));
  }
  case SYMMPIN_FLOAT32: {
    float f;
    memcpy(&f, p, 4);
    return f;
  }
  case SYMMPIN_FLOAT64: {
    double f;
    memcpy(&f, p, 8);
    return f;
  }
  case SYMMPIN_FP8E4M3:
  case SYMMPIN_FP8E5M2: {
    __half_raw r = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)*p,
                                            d == SYMMPIN_FP8E4M3 ? __NV_E4M3 : __NV_E5M2);
    return (double)__half2float(__half(r));
  }
  }
  return NAN;
}

/* A random non-zero element: integers over their full range, floats +-[0.5, 2) rounded to the
 * type (sums of 8 stay far from overflow, products of 8 stay below e4m3's 448). */
static void random_elem(int d, uint8_t *p) {
  size_t sz = symmpin_dtype_size(d);
  if (is_int(d)) {
    uint64_t v;
    do v = rnd(); while ((v & (sz == 8 ? ~0ull : ((1ull << (8 * sz)) - 1))) == 0);
    memcpy(p, &v, sz);
    return;
  }
  float v = (float)(0.5 + 1.5 * rnd01()) * ((rnd() & 1) ? -1.f : 1.f);
  switch (d) {
  case SYMMPIN_FLOAT16: {
    __half_raw r = __half(__float2half_rn(v));
    memcpy(p, &r.x, 2);
    break;
  }
  case SYMMPIN_BFLOAT16: {
    __nv_bfloat16_raw r = __nv_bfloat16(__float2bfloat16_rn(v));
    memcpy(p, &r.x, 2);
    break;
  }
  case SYMMPIN_FLOAT32: memcpy(p, &v, 4); break;
  case SYMMPIN_FLOAT64: {
    double x = (0.5 + 1.5 * rnd01()) * ((rnd() & 1) ? -1.0 : 1.0);
    memcpy(p, &x, 8);
    break;
  }
  case SYMMPIN_FP8E4M3: *p = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3); break;
  case SYMMPIN_FP8E5M2: *p = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2); break;
  }
}

/* Tolerances (docs/kernels.md): the kernels accumulate in float (double for f64) in rank order and
 * round once, so |got - ref| <= u_out * |ref| + 2 * n * u_acc * S + tiny, where S = sum |x_i|
 * (sum, avg: / n) or |ref| (prod), u_out the output type's unit roundoff, u_acc float's (or
 * double's), tiny the type's smallest subnormal. max/min must be exact. */
static double u_out(int d) {
  switch (d) {
  case SYMMPIN_FLOAT16: return ldexp(1.0, -11);
  case SYMMPIN_BFLOAT16: return ldexp(1.0, -8);
  case SYMMPIN_FP8E4M3: return ldexp(1.0, -4);
  case SYMMPIN_FP8E5M2: return ldexp(1.0, -3);
  case SYMMPIN_FLOAT32: return ldexp(1.0, -24);
  default: return ldexp(1.0, -53);
  }
}
static double u_acc(int d) { return d == SYMMPIN_FLOAT64 ? ldexp(1.0, -53) : ldexp(1.0, -24); }
static double tiny(int d) {
  switch (d) {
  case SYMMPIN_FLOAT16: return ldexp(1.0, -24);
  case SYMMPIN_FP8E4M3: return ldexp(1.0, -9);
  case SYMMPIN_FP8E5M2: return ldexp(1.0, -16);
  default: return 1e-300;
  }
}

/* Check `got` (count elements) against the reduction of in[0..n-1]. Returns the first bad index
 * or -1; *why describes it. */
static long check_result(int d, int op, int n, size_t count, const std::vector<const uint8_t *> &in,
                         const uint8_t *got, char *why, size_t whylen) {
  size_t sz = symmpin_dtype_size(d);
  for (size_t i = 0; i < count; i++) {
    if (is_int(d)) {
      uint64_t mask = sz == 8 ? ~0ull : ((1ull << (8 * sz)) - 1);
      auto val = [&](int r) -> uint64_t {
        uint64_t v = 0;
        memcpy(&v, in[r] + i * sz, sz);
        return v;
      };
      auto sext = [&](uint64_t v) -> int64_t {
        return sz == 8 ? (int64_t)v : (int64_t)(v << (64 - 8 * sz)) >> (64 - 8 * sz);
      };
      uint64_t acc = val(0);
      for (int r = 1; r < n; r++) {
        uint64_t v = val(r);
        switch (op) {
        case SYMMPIN_SUM:
        case SYMMPIN_AVG: acc = acc + v; break;
        case SYMMPIN_PROD: acc = acc * v; break;
        case SYMMPIN_MAX:
          acc = is_signed(d) ? (sext(v) > sext(acc) ? v : acc) : ((v & mask) > (acc & mask) ? v : acc);
          break;
        case SYMMPIN_MIN:
          acc = is_signed(d) ? (sext(v) < sext(acc) ? v : acc) : ((v & mask) < (acc & mask) ? v : acc);
          break;
        }
      }
      acc &= mask;
      if (op == SYMMPIN_AVG) /* NCCL: wrapped sum divided by n, truncated toward zero */
        acc = is_signed(d) ? (uint64_t)(sext(acc) / n) & mask : (acc / (uint64_t)n) & mask;
      uint64_t g = 0;
      memcpy(&g, got + i * sz, sz);
      if (g != acc) {
        snprintf(why, whylen, "element %zu: got 0x%llx, want 0x%llx", i, (unsigned long long)g,
                 (unsigned long long)acc);
        return (long)i;
      }
    } else {
      double x0 = decode(d, in[0] + i * sz), ref = x0, S = fabs(x0);
      for (int r = 1; r < n; r++) {
        double x = decode(d, in[r] + i * sz);
        S += fabs(x);
        switch (op) {
        case SYMMPIN_SUM:
        case SYMMPIN_AVG: ref += x; break;
        case SYMMPIN_PROD: ref *= x; break;
        case SYMMPIN_MAX: ref = x > ref ? x : ref; break;
        case SYMMPIN_MIN: ref = x < ref ? x : ref; break;
        }
      }
      if (op == SYMMPIN_AVG) ref /= n, S /= n;
      if (op == SYMMPIN_PROD) S = fabs(ref);
      double g = decode(d, got + i * sz);
      double tol = (op == SYMMPIN_MAX || op == SYMMPIN_MIN)
                       ? 0.0
                       : u_out(d) * fabs(ref) + 2.0 * n * u_acc(d) * S + tiny(d);
      if (!(fabs(g - ref) <= tol)) {
        snprintf(why, whylen, "element %zu: got %.17g, want %.17g (tol %.3g)", i, g, ref, tol);
        return (long)i;
      }
    }
  }
  return -1;
}

/* ---------------------------------------------------------------- ranks */

struct Rank {
  int dev;
  cudaStream_t s[2];
  char *pool;
  char *bufA, *bufB; /* user send / recv buffers, kGuard + 16 spare bytes around the data */
  char *bufC;        /* scratch: the all-reduce that a reduce-scatter is compared with */
  symmpin_kernel_error *err;     /* host-mapped */
  symmpin_kernel_error *err_dev; /* its device pointer */
};

static int N = 2, g_ngpus = 1;
static std::vector<Rank> R;
static size_t g_buf_bytes, g_pool_bytes;

/* Every pair of the first `used` GPUs reaches each other (false, said, if not). */
static bool enable_peers(int used) {
  for (int a = 0; a < used; a++)
    for (int b = 0; b < used; b++)
      if (a != b) {
        int can = 0;
        CK(cudaDeviceCanAccessPeer(&can, a, b));
        if (!can) {
          fprintf(stderr, "test_oneshot: GPU %d cannot access GPU %d (no P2P)\n", a, b);
          return false;
        }
        CK(cudaSetDevice(a));
        cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
        else CK(e);
      }
  return true;
}

/* Each rank's streams, pool (g_pool_bytes, zeroed), buffers and error record. */
static void ranks_setup() {
  R.resize(N);
  for (int r = 0; r < N; r++) {
    Rank &k = R[r];
    k.dev = r % g_ngpus;
    CK(cudaSetDevice(k.dev));
    CK(cudaStreamCreateWithFlags(&k.s[0], cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&k.s[1], cudaStreamNonBlocking));
    CK(cudaMalloc(&k.pool, g_pool_bytes));
    CK(cudaMemset(k.pool, 0, g_pool_bytes)); /* slots are zeroed once, as the contract asks */
    CK(cudaMalloc(&k.bufA, g_buf_bytes));
    CK(cudaMalloc(&k.bufB, g_buf_bytes));
    CK(cudaMalloc(&k.bufC, g_buf_bytes));
    CK(cudaHostAlloc(&k.err, sizeof *k.err, cudaHostAllocMapped | cudaHostAllocPortable));
    CK(cudaHostGetDevicePointer((void **)&k.err_dev, k.err, 0));
  }
  for (int r = 0; r < N; r++) {
    CK(cudaSetDevice(R[r].dev));
    CK(cudaDeviceSynchronize());
  }
}

static void ranks_teardown() {
  for (int r = 0; r < N; r++) {
    Rank &k = R[r];
    CK(cudaSetDevice(k.dev));
    CK(cudaDeviceSynchronize());
    CK(cudaStreamDestroy(k.s[0]));
    CK(cudaStreamDestroy(k.s[1]));
    CK(cudaFree(k.pool));
    CK(cudaFree(k.bufA));
    CK(cudaFree(k.bufB));
    CK(cudaFree(k.bufC));
    CK(cudaFreeHost(k.err));
  }
}

/* Slots: separate ones per test group (a slot used with in-slot input is never used staged:
 * different slot classes). */
enum { SLOT_STAGED, SLOT_IN_SLOT, SLOT_B2B, SLOT_STREAM0, SLOT_STREAM1, SLOT_GRAPH_LL, SLOT_GRAPH_IN_SLOT,
       SLOT_GRAPH_COPY, SLOT_GRAPH_TWO, SLOT_TO_LL, SLOT_TO_IN_SLOT, SLOT_TO_COPY, SLOT_TO_TWO, SLOT_API,
       /* two sets of group slots: 4-byte and 2-byte datatypes (a count's slot class, LL or copy,
        * depends on its bytes; one slot keeps one class) */
       SLOT_GROUP, SLOT_GROUP16 = SLOT_GROUP + SYMMPIN_KERNEL_GROUP_MAX,
       SLOT_SKEW_LL = SLOT_GROUP16 + SYMMPIN_KERNEL_GROUP_MAX, SLOT_SKEW_COPY, SLOT_SKEW_TWO,
       SLOT_SHAPE_LL, SLOT_SHAPE_TWO, SLOT_COLL, SLOT_COLL_B2B_LL, SLOT_COLL_B2B_COPY,
       SLOT_COLL_GRAPH, SLOT_COLL_TO = SLOT_COLL_GRAPH + 4, NSLOTS = SLOT_COLL_TO + 4 };
static size_t g_slot_off[NSLOTS], g_slot_bytes[NSLOTS];

static void set_dev(int r) { CK(cudaSetDevice(R[r].dev)); }

static char *slot_ptr(int r, int slot) { return R[r].pool + g_slot_off[slot]; }

static symmpin_kernel_call make_call(int r, int slot, size_t count, int d, int op,
                                      symmpin_kernel_input input, const void *send, void *recv,
                                      uint64_t site) {
  symmpin_kernel_call c;
  memset(&c, 0, sizeof c);
  for (int q = 0; q < N; q++) c.slot[q] = slot_ptr(q, slot);
  c.slot_bytes = g_slot_bytes[slot];
  c.rank = r, c.nranks = N;
  c.send = send, c.recv = recv;
  c.count = count, c.dtype = d, c.op = op, c.input = input;
  c.site = site;
  c.timeout_cycles = g_timeout_cycles;
  c.error = R[r].err_dev;
  return c;
}

/* Wait for every rank's streams; false if they did not finish within `seconds` (a hang). */
static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static bool sync_all(double seconds) {
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    bool done = true;
    for (int r = 0; r < N; r++) {
      for (int k = 0; k < 2; k++) {
        cudaError_t e = cudaStreamQuery(R[r].s[k]);
        if (e == cudaErrorNotReady) done = false;
        else CK(e);
      }
    }
    if (done) return true;
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (el > seconds) return false;
  }
}

static void sync_or_die(const char *what) {
  if (!sync_all(120.0)) {
    fprintf(stderr, "test_oneshot: HANG in %s (kernels did not finish in 120 s)\n", what);
    printf("test_oneshot: %d passed, %d failed\n", g_passed, g_failed + 1);
    fflush(stdout);
    _exit(1);
  }
}

/* Setup copies and memsets run on the legacy stream, which the ranks' non-blocking streams do not
 * wait for: finish them on every device before launching. */
static void sync_devices() {
  for (int r = 0; r < N; r++) {
    set_dev(r);
    CK(cudaDeviceSynchronize());
  }
}

static void clear_errors() {
  for (int r = 0; r < N; r++) memset((void *)R[r].err, 0, sizeof *R[r].err);
}

static bool errors_clear(char *why, size_t len) {
  for (int r = 0; r < N; r++)
    if (R[r].err->timed_out) {
      snprintf(why, len, "rank %d timed out waiting for rank %d", r, (int)R[r].err->peer);
      return false;
    }
  return true;
}

static int check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int check(bool ok, const char *fmt, ...) {
  if (ok) {
    g_passed++;
    return 1;
  }
  g_failed++;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return 0;
}

static bool all_poison(const uint8_t *p, size_t n, uint8_t v, size_t *at) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) {
      *at = i;
      return false;
    }
  return true;
}

/* ---------------------------------------------------------------- the matrix of single calls */

struct Case {
  int d, op;
  size_t count;
  symmpin_kernel_input input;
  bool inplace;
  size_t soff, roff; /* misalignment of send / recv in bytes (multiples of the element size) */
};

static const char *form_name(symmpin_kernel_input f) {
  return f == SYMMPIN_INPUT_STAGED ? "staged" : "in-slot";
}

/* Run one call on all ranks and check it. Returns 1 if it passed. */
static int run_case(const Case &c, uint64_t site) {
  size_t sz = symmpin_dtype_size(c.d), bytes = c.count * sz;
  size_t span = kGuard + 16 + bytes + kGuard; /* bytes of bufA/bufB this case touches */
  int slot = c.input == SYMMPIN_INPUT_STAGED ? SLOT_STAGED : SLOT_IN_SLOT;
  char desc[160];
  snprintf(desc, sizeof desc, "%s %s count %zu %s %s soff %zu roff %zu n %d",
           symmpin_dtype_name(c.d), symmpin_op_name(c.op), c.count, form_name(c.input),
           c.inplace ? "in-place" : "out-of-place", c.soff, c.roff, N);
  if (span > g_buf_bytes) return check(false, "%s: test buffers too small", desc);

  std::vector<std::vector<uint8_t>> in(N, std::vector<uint8_t>(bytes));
  for (int r = 0; r < N; r++)
    for (size_t i = 0; i < c.count; i++) random_elem(c.d, &in[r][i * sz]);

  std::vector<void *> recv(N);
  for (int r = 0; r < N; r++) {
    set_dev(r);
    char *send = R[r].bufA + kGuard + c.soff;
    CK(cudaMemset(R[r].bufA, kPoisonIn, span));
    CK(cudaMemset(R[r].bufB, kPoisonOut, span));
    if (c.input == SYMMPIN_INPUT_STAGED) {
      CK(cudaMemcpy(send, in[r].data(), bytes, cudaMemcpyHostToDevice));
      recv[r] = c.inplace ? (void *)send : (void *)(R[r].bufB + kGuard + c.roff);
    } else {
      char *data = slot_ptr(r, slot) + symmpin_kernel_in_slot_offset();
      CK(cudaMemcpy(data, in[r].data(), bytes, cudaMemcpyHostToDevice));
      recv[r] = c.inplace ? (void *)data : (void *)(R[r].bufB + kGuard + c.roff);
    }
  }
  sync_devices();
  clear_errors();
  for (int r = 0; r < N; r++) {
    set_dev(r);
    symmpin_kernel_call call = make_call(r, slot, c.count, c.d, c.op, c.input,
                                          R[r].bufA + kGuard + c.soff, recv[r], site);
    symmpin_status st = symmpin_kernel_launch(&call, R[r].s[0]);
    if (st != SYMMPIN_OK) return check(false, "%s: launch returned %s", desc, symmpin_status_name(st));
  }
  sync_or_die(desc);
  char why[200];
  if (!errors_clear(why, sizeof why)) return check(false, "%s: %s", desc, why);

  std::vector<std::vector<uint8_t>> out(N, std::vector<uint8_t>(bytes));
  std::vector<uint8_t> guardA(span), guardB(span);
  for (int r = 0; r < N; r++) {
    set_dev(r);
    CK(cudaMemcpy(out[r].data(), recv[r], bytes, cudaMemcpyDeviceToHost));
    /* Nothing outside the output may change: poison around recv, and the input when not in place. */
    if (!(c.input == SYMMPIN_INPUT_IN_SLOT && c.inplace)) {
      bool recv_in_A = c.input == SYMMPIN_INPUT_STAGED && c.inplace;
      CK(cudaMemcpy(guardA.data(), R[r].bufA, span, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(guardB.data(), R[r].bufB, span, cudaMemcpyDeviceToHost));
      size_t at, lo = kGuard + (recv_in_A ? c.soff : c.roff);
      const uint8_t *g = recv_in_A ? guardA.data() : guardB.data();
      uint8_t pv = recv_in_A ? kPoisonIn : kPoisonOut;
      if (!all_poison(g, lo, pv, &at) || !all_poison(g + lo + bytes, span - lo - bytes, pv, &at))
        return check(false, "%s: rank %d wrote outside recv", desc, r);
      if (c.input == SYMMPIN_INPUT_STAGED && !c.inplace &&
          memcmp(guardA.data() + kGuard + c.soff, in[r].data(), bytes) != 0)
        return check(false, "%s: rank %d's send buffer changed", desc, r);
    }
  }
  for (int r = 1; r < N; r++)
    if (memcmp(out[r].data(), out[0].data(), bytes) != 0)
      return check(false, "%s: rank %d differs bitwise from rank 0", desc, r);
  std::vector<const uint8_t *> inp(N);
  for (int r = 0; r < N; r++) inp[r] = in[r].data();
  long bad = check_result(c.d, c.op, N, c.count, inp, out[0].data(), why, sizeof why);
  return check(bad < 0, "%s: %s", desc, why);
}

static void test_matrix(bool small) {
  std::vector<size_t> sizes;
  if (small) {
    sizes = {1, 9, 257, 4097};
  } else {
    sizes = {1, 7, 8, 9, 15, 16, 17, 31, 255, 256, 257, 4095, 4096, 4097, 65537, 1048577};
  }
  std::vector<int> dtypes, ops;
  if (small) {
    dtypes = {SYMMPIN_FLOAT32, SYMMPIN_BFLOAT16, SYMMPIN_INT8, SYMMPIN_FP8E4M3};
    ops = {SYMMPIN_SUM, SYMMPIN_AVG, SYMMPIN_MAX};
  } else {
    for (int d = 0; d < SYMMPIN_DTYPE_COUNT; d++) dtypes.push_back(d);
    for (int o = 0; o < SYMMPIN_OP_COUNT; o++) ops.push_back(o);
  }
  unsigned idx = 0;
  for (int d : dtypes) {
    int p0 = g_passed, f0 = g_failed;
    size_t sz = symmpin_dtype_size(d);
    std::vector<size_t> ds = sizes;
    /* around the LL / copy threshold of the staged form */
    for (size_t b = (512u << 10) / N / sz; b <= (512u << 10) / N / sz + 1; b++)
      if (!small || b == (512u << 10) / N / sz + 1) ds.push_back(b);
    /* around the copy / two-shot threshold (staged; none at one rank) */
    if (N > 1) {
      size_t t = symmpin_twoshot_min_bytes(N) / sz;
      if (!small) ds.push_back(t - 1);
      ds.push_back(t + 3);
    }
    for (int op : ops)
      for (size_t count : ds)
        for (int f = 0; f < 2; f++)
          for (int ip = 0; ip < 2; ip++, idx++) {
            /* ~1M elements: sum and max only, one of the four form/in-place combos each (cycling),
             * to keep the host-side reference affordable at 8 ranks */
            if (count >= 1000000 &&
                ((op != SYMMPIN_SUM && op != SYMMPIN_MAX) || f * 2 + ip != (d + op) % 4))
              continue;
            Case c;
            c.d = d, c.op = op, c.count = count, c.input = (symmpin_kernel_input)f, c.inplace = ip;
            /* misalign: cycle through multiples of the element size below 16 */
            c.soff = (idx * 3 * sz) % 16 / sz * sz;
            c.roff = ((idx * 5 + 1) * sz) % 16 / sz * sz;
            run_case(c, 0x1000 + idx);
          }
    printf("matrix %-4s: %d passed, %d failed (%zu sizes x %zu ops x staged/in-slot x in/out)\n",
           symmpin_dtype_name(d), g_passed - p0, g_failed - f0, ds.size(), ops.size());
    fflush(stdout);
  }
}

/* ---------------------------------------------------------------- back-to-back calls */

/* K calls on one slot enqueued without any host sync, each with its own input and output buffers,
 * so fast ranks run ahead of slow ones: tests the parity / end-barrier arguments. */
static void test_back_to_back(symmpin_kernel_input input, bool inplace, int d, int op, size_t count,
                              int K, int slot, size_t count_odd = 0) {
  int p0 = g_passed, f0 = g_failed;
  /* count_odd: odd calls have this count instead (the slot's layout per shape changes from call
   * to call, while peers may still be in the previous call) */
  auto count_of = [&](int k) { return (k & 1) && count_odd ? count_odd : count; };
  size_t cmax = count_odd > count ? count_odd : count;
  size_t sz = symmpin_dtype_size(d), stride = (cmax * sz + 255) / 256 * 256;
  std::vector<char *> ins(N), outs(N);
  std::vector<std::vector<uint8_t>> host(N, std::vector<uint8_t>(stride * K));
  for (int r = 0; r < N; r++) {
    set_dev(r);
    CK(cudaMalloc(&ins[r], stride * K));
    CK(cudaMalloc(&outs[r], stride * K));
    for (int k = 0; k < K; k++)
      for (size_t i = 0; i < count_of(k); i++) random_elem(d, &host[r][k * stride + i * sz]);
    CK(cudaMemcpy(ins[r], host[r].data(), stride * K, cudaMemcpyHostToDevice));
    CK(cudaMemset(outs[r], kPoisonOut, stride * K));
  }
  sync_devices();
  clear_errors();
  char desc[160];
  char counts[48];
  if (count_odd)
    snprintf(counts, sizeof counts, "counts %zu/%zu", count, count_odd);
  else
    snprintf(counts, sizeof counts, "count %zu", count);
  snprintf(desc, sizeof desc, "back-to-back %s %s %s %s x %d", form_name(input),
           inplace ? "in-place" : "out-of-place", symmpin_dtype_name(d), counts, K);
  bool launched = true;
  for (int k = 0; k < K && launched; k++) {
    for (int r = 0; r < N; r++) {
      set_dev(r);
      cudaStream_t s = R[r].s[0];
      char *in = ins[r] + k * stride, *out = outs[r] + k * stride;
      const size_t bytes = count_of(k) * sz;
      char *data = slot_ptr(r, slot) + symmpin_kernel_in_slot_offset();
      const void *send = in;
      void *recv = out;
      if (input == SYMMPIN_INPUT_IN_SLOT) {
        CK(cudaMemcpyAsync(data, in, bytes, cudaMemcpyDeviceToDevice, s));
        recv = inplace ? (void *)data : (void *)out;
      } else if (inplace) {
        CK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, s));
        send = recv = out;
      }
      symmpin_kernel_call call = make_call(r, slot, count_of(k), d, op, input, send, recv, 0x2000 + k);
      if (symmpin_kernel_launch(&call, s) != SYMMPIN_OK) launched = false;
      if (input == SYMMPIN_INPUT_IN_SLOT && inplace)
        CK(cudaMemcpyAsync(out, data, bytes, cudaMemcpyDeviceToDevice, s));
    }
  }
  sync_or_die(desc);
  char why[200];
  if (!check(launched, "%s: a launch failed", desc) || !check(errors_clear(why, sizeof why), "%s: %s", desc, why)) {
  } else {
    std::vector<std::vector<uint8_t>> got(N, std::vector<uint8_t>(stride * K));
    for (int r = 0; r < N; r++) {
      set_dev(r);
      CK(cudaMemcpy(got[r].data(), outs[r], stride * K, cudaMemcpyDeviceToHost));
    }
    int bad = 0;
    for (int k = 0; k < K && bad < 3; k++) {
      bool same = true;
      const size_t bytes = count_of(k) * sz;
      for (int r = 1; r < N; r++) same &= memcmp(got[r].data() + k * stride, got[0].data() + k * stride, bytes) == 0;
      std::vector<const uint8_t *> inp(N);
      for (int r = 0; r < N; r++) inp[r] = host[r].data() + k * stride;
      long e = check_result(d, op, N, count_of(k), inp, got[0].data() + k * stride, why, sizeof why);
      if (!check(same && e < 0, "%s: call %d: %s", desc, k, same ? why : "ranks differ")) bad++;
    }
  }
  for (int r = 0; r < N; r++) {
    set_dev(r);
    CK(cudaFree(ins[r]));
    CK(cudaFree(outs[r]));
  }
  printf("%s: %d passed, %d failed\n", desc, g_passed - p0, g_failed - f0);
  fflush(stdout);
}

/* ---------------------------------------------------------------- CUDA graphs */

/* Each rank captures, on its stream: a staged LL call, an in-slot call (with the copy of its input
 * into the slot captured too), a staged call above the LL limit (copy variant) and one above the
 * two-shot threshold. The graphs are
 * replayed `replays` times with new inputs written between replays. */
/* The graph test's calls: one per algorithm (at one rank, the last is a copy call too). */
enum { kGraphCalls = 4 };
static size_t graph_two_count() { return N > 1 ? symmpin_twoshot_min_bytes(N) / 2 + 4099 : 4099; }

static void test_graph(int replays) {
  int p0 = g_passed, f0 = g_failed;
  struct G {
    int slot, d, op;
    size_t count;
    symmpin_kernel_input input;
  } calls[kGraphCalls] = {
      {SLOT_GRAPH_LL, SYMMPIN_BFLOAT16, SYMMPIN_SUM, 3001, SYMMPIN_INPUT_STAGED},
      {SLOT_GRAPH_IN_SLOT, SYMMPIN_FLOAT32, SYMMPIN_MAX, 1025, SYMMPIN_INPUT_IN_SLOT},
      {SLOT_GRAPH_COPY, SYMMPIN_FLOAT32, SYMMPIN_SUM, (size_t)(512u << 10) / N / 4 + 333,
       SYMMPIN_INPUT_STAGED},
      {SLOT_GRAPH_TWO, SYMMPIN_BFLOAT16, SYMMPIN_SUM, graph_two_count(), SYMMPIN_INPUT_STAGED},
  };
  std::vector<cudaGraphExec_t> exec(N);
  std::vector<char *> ins(N * kGraphCalls), outs(N * kGraphCalls);
  for (int r = 0; r < N; r++) {
    set_dev(r);
    for (int j = 0; j < kGraphCalls; j++) {
      size_t bytes = calls[j].count * symmpin_dtype_size(calls[j].d);
      CK(cudaMalloc(&ins[r * kGraphCalls + j], bytes));
      CK(cudaMalloc(&outs[r * kGraphCalls + j], bytes));
    }
    cudaStream_t s = R[r].s[0];
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    bool ok = true;
    for (int j = 0; j < kGraphCalls; j++) {
      const G &c = calls[j];
      size_t bytes = c.count * symmpin_dtype_size(c.d);
      const void *send = ins[r * kGraphCalls + j];
      if (c.input == SYMMPIN_INPUT_IN_SLOT) {
        char *data = slot_ptr(r, c.slot) + symmpin_kernel_in_slot_offset();
        CK(cudaMemcpyAsync(data, ins[r * kGraphCalls + j], bytes, cudaMemcpyDeviceToDevice, s));
      }
      symmpin_kernel_call call = make_call(r, c.slot, c.count, c.d, c.op, c.input, send,
                                            outs[r * kGraphCalls + j], 0x3000 + j);
      ok &= symmpin_kernel_launch(&call, s) == SYMMPIN_OK;
    }
    cudaGraph_t g;
    CK(cudaStreamEndCapture(s, &g));
    check(ok, "graph: capture of rank %d's launches", r);
    CK(cudaGraphInstantiate(&exec[r], g, 0));
    CK(cudaGraphDestroy(g));
  }
  int bad = 0;
  for (int it = 0; it < replays; it++) {
    std::vector<std::vector<std::vector<uint8_t>>> host(kGraphCalls, std::vector<std::vector<uint8_t>>(N));
    for (int j = 0; j < kGraphCalls; j++) {
      size_t sz = symmpin_dtype_size(calls[j].d), bytes = calls[j].count * sz;
      for (int r = 0; r < N; r++) {
        host[j][r].resize(bytes);
        for (size_t i = 0; i < calls[j].count; i++) random_elem(calls[j].d, &host[j][r][i * sz]);
        set_dev(r);
        CK(cudaMemcpy(ins[r * kGraphCalls + j], host[j][r].data(), bytes, cudaMemcpyHostToDevice));
        CK(cudaMemset(outs[r * kGraphCalls + j], kPoisonOut, bytes));
      }
    }
    sync_devices();
    clear_errors();
    for (int r = 0; r < N; r++) {
      set_dev(r);
      CK(cudaGraphLaunch(exec[r], R[r].s[0]));
    }
    sync_or_die("graph replay");
    char why[200];
    if (!check(errors_clear(why, sizeof why), "graph replay %d: %s", it, why)) {
      bad++;
      continue;
    }
    for (int j = 0; j < kGraphCalls; j++) {
      size_t bytes = calls[j].count * symmpin_dtype_size(calls[j].d);
      std::vector<std::vector<uint8_t>> got(N, std::vector<uint8_t>(bytes));
      std::vector<const uint8_t *> inp(N);
      bool same = true;
      for (int r = 0; r < N; r++) {
        set_dev(r);
        CK(cudaMemcpy(got[r].data(), outs[r * kGraphCalls + j], bytes, cudaMemcpyDeviceToHost));
        inp[r] = host[j][r].data();
        if (r) same &= memcmp(got[r].data(), got[0].data(), bytes) == 0;
      }
      long e = check_result(calls[j].d, calls[j].op, N, calls[j].count, inp, got[0].data(), why,
                            sizeof why);
      if (!check(same && e < 0, "graph replay %d call %d (%s): %s", it, j,
                 form_name(calls[j].input), same ? why : "ranks differ"))
        bad++;
    }
    if (bad > 5) break;
  }
  for (int r = 0; r < N; r++) {
    set_dev(r);
    CK(cudaGraphExecDestroy(exec[r]));
    for (int j = 0; j < kGraphCalls; j++) { CK(cudaFree(ins[r * kGraphCalls + j])); CK(cudaFree(outs[r * kGraphCalls + j])); }
  }
  printf("graph capture + %d replays (LL, in-slot, copy, two-shot): %d passed, %d failed\n", replays,
         g_passed - p0, g_failed - f0);
  fflush(stdout);
}

/* ---------------------------------------------------------------- two streams */

/* Stream 0 runs staged calls on one slot, stream 1 in-slot calls on another, M each, interleaved
 * and unsynchronized: calls on different slots must not wait for each other. */
static void test_streams(int M) {
  int p0 = g_passed, f0 = g_failed;
  const int d0 = SYMMPIN_FLOAT32, d1 = SYMMPIN_BFLOAT16;
  const size_t c0 = 1000, c1 = 3000, b0 = c0 * 4, b1 = c1 * 2;
  std::vector<char *> in0(N), out0(N), in1(N), out1(N);
  std::vector<std::vector<uint8_t>> h0(N, std::vector<uint8_t>(b0 * M)), h1(N, std::vector<uint8_t>(b1 * M));
  for (int r = 0; r < N; r++) {
    set_dev(r);
    for (size_t i = 0; i < c0 * M; i++) random_elem(d0, &h0[r][i * 4]);
    for (size_t i = 0; i < c1 * M; i++) random_elem(d1, &h1[r][i * 2]);
    CK(cudaMalloc(&in0[r], b0 * M)); CK(cudaMalloc(&out0[r], b0 * M));
    CK(cudaMalloc(&in1[r], b1 * M)); CK(cudaMalloc(&out1[r], b1 * M));
    CK(cudaMemcpy(in0[r], h0[r].data(), b0 * M, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(in1[r], h1[r].data(), b1 * M, cudaMemcpyHostToDevice));
  }
  sync_devices();
  clear_errors();
  bool ok = true;
  for (int k = 0; k < M; k++) {
    for (int r = 0; r < N; r++) {
      set_dev(r);
      symmpin_kernel_call a = make_call(r, SLOT_STREAM0, c0, d0, SYMMPIN_SUM, SYMMPIN_INPUT_STAGED,
                                         in0[r] + k * b0, out0[r] + k * b0, 0x4000 + k);
      ok &= symmpin_kernel_launch(&a, R[r].s[0]) == SYMMPIN_OK;
      char *data = slot_ptr(r, SLOT_STREAM1) + symmpin_kernel_in_slot_offset();
      CK(cudaMemcpyAsync(data, in1[r] + k * b1, b1, cudaMemcpyDeviceToDevice, R[r].s[1]));
      symmpin_kernel_call b = make_call(r, SLOT_STREAM1, c1, d1, SYMMPIN_MIN, SYMMPIN_INPUT_IN_SLOT,
                                         nullptr, out1[r] + k * b1, 0x5000 + k);
      ok &= symmpin_kernel_launch(&b, R[r].s[1]) == SYMMPIN_OK;
    }
  }
  sync_or_die("two streams");
  char why[200];
  check(ok, "two streams: launches");
  if (check(errors_clear(why, sizeof why), "two streams: %s", why)) {
    std::vector<std::vector<uint8_t>> g0(N, std::vector<uint8_t>(b0 * M)), g1(N, std::vector<uint8_t>(b1 * M));
    for (int r = 0; r < N; r++) {
      set_dev(r);
      CK(cudaMemcpy(g0[r].data(), out0[r], b0 * M, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(g1[r].data(), out1[r], b1 * M, cudaMemcpyDeviceToHost));
    }
    int bad = 0;
    for (int k = 0; k < M && bad < 3; k++) {
      std::vector<const uint8_t *> i0(N), i1(N);
      bool same = true;
      for (int r = 0; r < N; r++) {
        i0[r] = h0[r].data() + k * b0, i1[r] = h1[r].data() + k * b1;
        if (r) same &= !memcmp(g0[r].data() + k * b0, g0[0].data() + k * b0, b0) &&
                       !memcmp(g1[r].data() + k * b1, g1[0].data() + k * b1, b1);
      }
      long e0 = check_result(d0, SYMMPIN_SUM, N, c0, i0, g0[0].data() + k * b0, why, sizeof why);
      if (!check(same && e0 < 0, "two streams call %d (stream 0): %s", k, same ? why : "ranks differ")) bad++;
      long e1 = check_result(d1, SYMMPIN_MIN, N, c1, i1, g1[0].data() + k * b1, why, sizeof why);
      if (!check(e1 < 0, "two streams call %d (stream 1): %s", k, why)) bad++;
    }
  }
  for (int r = 0; r < N; r++) {
    set_dev(r);
    CK(cudaFree(in0[r])); CK(cudaFree(out0[r])); CK(cudaFree(in1[r])); CK(cudaFree(out1[r]));
  }
  printf("two streams x %d calls (staged + in-slot on different slots): %d passed, %d failed\n", M,
         g_passed - p0, g_failed - f0);
  fflush(stdout);
}

/* ---------------------------------------------------------------- groups */

/* Counts of a group like a data-parallel step's gradient buckets (768 B to 1.2 MB in bf16), LL
 * and copy sized, one empty call; the last calls of the largest group. */
static const size_t kGroupCounts[SYMMPIN_KERNEL_GROUP_MAX] = {
    384, 0, 1000, 4097, 20000, 65536, 131072, 131073, 200000, 300000, 600000, 777,
    2048, 99999, 250001, 3};

/* One round of a group of n calls (datatype d, op) on every rank: fresh random inputs, the group
 * in one launch into outG, then the same calls one launch each (same slots, same stream) into
 * outS. Results: the same bits on every rank, the same bits as the single launches, and right
 * against the reference. */
static bool group_round(int n, int d, int op, int round, std::vector<std::vector<char *>> &in,
                        std::vector<std::vector<char *>> &outG, std::vector<std::vector<char *>> &outS,
                        bool mixed = false) {
  size_t sz = symmpin_dtype_size(d);
  const int base = sz == 2 ? SLOT_GROUP16 : SLOT_GROUP;
  std::vector<std::vector<std::vector<uint8_t>>> h(N, std::vector<std::vector<uint8_t>>(n));
  for (int r = 0; r < N; r++) {
    set_dev(r);
    for (int i = 0; i < n; i++) {
      h[r][i].resize(kGroupCounts[i] * sz);
      for (size_t e = 0; e < kGroupCounts[i]; e++) random_elem(d, &h[r][i][e * sz]);
      if (kGroupCounts[i])
        CK(cudaMemcpy(in[r][i], h[r][i].data(), kGroupCounts[i] * sz, cudaMemcpyHostToDevice));
    }
  }
  sync_devices();
  clear_errors();
  bool ok = true;
  for (int r = 0; r < N; r++) {
    set_dev(r);
    symmpin_kernel_call calls[SYMMPIN_KERNEL_GROUP_MAX];
    for (int i = 0; i < n; i++)
      calls[i] = make_call(r, base + i, kGroupCounts[i], d, op, SYMMPIN_INPUT_STAGED, in[r][i],
                           outG[r][i], 0x6000 + i);
    /* mixed: odd ranks launch the calls one by one where their peers group them (a rank's
     * grouping is its own business: other streams, another split) */
    if (mixed && r % 2)
      for (int i = 0; i < n; i++) ok &= symmpin_kernel_launch(&calls[i], R[r].s[0]) == SYMMPIN_OK;
    else
      ok &= symmpin_kernel_launch_group(calls, n, R[r].s[0]) == SYMMPIN_OK;
    for (int i = 0; i < n; i++) {
      calls[i].recv = outS[r][i];
      ok &= symmpin_kernel_launch(&calls[i], R[r].s[0]) == SYMMPIN_OK;
    }
  }
  sync_or_die("group");
  char why[200];
  bool good = check(ok, "group of %d (round %d): launches", n, round);
  if (!check(errors_clear(why, sizeof why), "group of %d: %s", n, why)) return false;
  std::vector<std::vector<std::vector<uint8_t>>> gG(N, std::vector<std::vector<uint8_t>>(n)),
      gS(N, std::vector<std::vector<uint8_t>>(n));
  for (int r = 0; r < N; r++) {
    set_dev(r);
    for (int i = 0; i < n; i++) {
      gG[r][i].resize(kGroupCounts[i] * sz);
      gS[r][i].resize(kGroupCounts[i] * sz);
      if (!kGroupCounts[i]) continue;
      CK(cudaMemcpy(gG[r][i].data(), outG[r][i], kGroupCounts[i] * sz, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(gS[r][i].data(), outS[r][i], kGroupCounts[i] * sz, cudaMemcpyDeviceToHost));
    }
  }
  for (int i = 0; i < n; i++) {
    bool same = true;
    for (int r = 0; r < N; r++) same &= gG[r][i] == gG[0][i] && gG[r][i] == gS[r][i];
    std::vector<const uint8_t *> ins(N);
    for (int r = 0; r < N; r++) ins[r] = h[r][i].data();
    long e = check_result(d, op, N, kGroupCounts[i], ins, gG[0][i].data(), why, sizeof why);
    good &= check(same && e < 0, "group of %d (round %d) call %d (%zu elements): %s", n, round, i,
                  kGroupCounts[i], same ? why : "not the same bits on every rank and alone");
  }
  return good;
}

/* Refusals of the group launch: nothing is launched. */
static void test_group_api() {
  set_dev(0);
  symmpin_kernel_call c[3];
  char *b = R[0].bufA + kGuard;
  for (int i = 0; i < 3; i++)
    c[i] = make_call(0, SLOT_GROUP + i, 100, SYMMPIN_FLOAT32, SYMMPIN_SUM, SYMMPIN_INPUT_STAGED, b, b, 1);
  check(symmpin_kernel_launch_group(c, 0, R[0].s[0]) == SYMMPIN_ERR_INVALID, "group: empty");
  check(symmpin_kernel_launch_group(c, SYMMPIN_KERNEL_GROUP_MAX + 1, R[0].s[0]) == SYMMPIN_ERR_INVALID,
        "group: too many");
  c[1].dtype = SYMMPIN_INT32;
  check(symmpin_kernel_launch_group(c, 3, R[0].s[0]) == SYMMPIN_ERR_INVALID, "group: mixed dtypes");
  c[1] = c[0];
  check(symmpin_kernel_launch_group(c, 3, R[0].s[0]) == SYMMPIN_ERR_INVALID, "group: one slot twice");
  c[1] = make_call(0, SLOT_GROUP + 1, 100, SYMMPIN_FLOAT32, SYMMPIN_SUM, SYMMPIN_INPUT_IN_SLOT,
                   nullptr, b, 1);
  check(symmpin_kernel_launch_group(c, 3, R[0].s[0]) == SYMMPIN_ERR_INVALID, "group: in-slot input");
  CK(cudaStreamSynchronize(R[0].s[0]));
}

static void test_groups(int rounds) {
  int p0 = g_passed, f0 = g_failed;
  test_group_api();
  const int n = SYMMPIN_KERNEL_GROUP_MAX;
  std::vector<std::vector<char *>> in(N, std::vector<char *>(n)), outG = in, outS = in;
  for (int r = 0; r < N; r++) {
    set_dev(r);
    for (int i = 0; i < n; i++) {
      size_t bytes = (kGroupCounts[i] ? kGroupCounts[i] : 1) * 8;
      CK(cudaMalloc(&in[r][i], bytes));
      CK(cudaMalloc(&outG[r][i], bytes));
      CK(cudaMalloc(&outS[r][i], bytes));
    }
  }
  /* A data-parallel step's group (bf16 avg, 12 calls), integers (exact), and the largest group;
   * every round advances each slot's epochs by two (group, then alone). */
  for (int k = 0; k < rounds; k++) {
    if (!group_round(12, SYMMPIN_BFLOAT16, SYMMPIN_AVG, k, in, outG, outS)) break;
    if (!group_round(7, SYMMPIN_INT32, SYMMPIN_SUM, k, in, outG, outS)) break;
    if (!group_round(n, SYMMPIN_FLOAT32, SYMMPIN_MAX, k, in, outG, outS)) break;
    if (N > 1 && !group_round(n, SYMMPIN_INT32, SYMMPIN_SUM, k, in, outG, outS, true)) break;
    if (N > 1 && !group_round(12, SYMMPIN_BFLOAT16, SYMMPIN_AVG, k, in, outG, outS, true)) break;
  }
  for (int r = 0; r < N; r++) {
    set_dev(r);
    for (int i = 0; i < n; i++) {
      CK(cudaFree(in[r][i]));
      CK(cudaFree(outG[r][i]));
      CK(cudaFree(outS[r][i]));
    }
  }
  printf("groups x %d rounds (one launch for up to %d calls, against one launch each; also odd "
         "ranks one by one where even ranks group): %d passed, %d failed\n", rounds, n,
         g_passed - p0, g_failed - f0);
  fflush(stdout);
}

/* ---------------------------------------------------------------- timeout */

/* Launch every rank but the last with a short timeout: each launched kernel must give up, record
 * the missing peer and the site, and return; the process must stay usable. */
/* A two-shot count of f32 (at one rank: a copy count; the tests below need 2+ ranks anyway). */
static size_t two_count() { return N > 1 ? symmpin_twoshot_min_bytes(N) / 4 + 100 : 100000; }

static void test_timeout() {
  int p0 = g_passed, f0 = g_failed;
  if (N < 2) {
    printf("timeout: skipped (needs 2+ ranks)\n");
    return;
  }
  struct T {
    int slot;
    symmpin_kernel_input input;
    size_t count;
    const char *name;
  } ts[4] = {{SLOT_TO_LL, SYMMPIN_INPUT_STAGED, 1000, "LL"},
             {SLOT_TO_IN_SLOT, SYMMPIN_INPUT_IN_SLOT, 1000, "in-slot"},
             {SLOT_TO_COPY, SYMMPIN_INPUT_STAGED, (size_t)(512u << 10) / N / 4 + 100, "copy"},
             {SLOT_TO_TWO, SYMMPIN_INPUT_STAGED, two_count(), "two-shot"}};
  for (const T &t : ts) {
    clear_errors();
    uint64_t site = 0xdead0000ull + (uint64_t)t.slot;
    for (int r = 0; r < N - 1; r++) {
      set_dev(r);
      symmpin_kernel_call c = make_call(r, t.slot, t.count, SYMMPIN_FLOAT32, SYMMPIN_SUM, t.input,
                                         R[r].bufA + kGuard, R[r].bufB + kGuard, site);
      c.timeout_cycles = 2000000; /* ~1 ms */
      check(symmpin_kernel_launch(&c, R[r].s[0]) == SYMMPIN_OK, "timeout %s: launch", t.name);
    }
    if (!sync_all(60.0)) {
      check(false, "timeout %s: kernels did not give up (hang)", t.name);
      printf("test_oneshot: %d passed, %d failed\n", g_passed, g_failed);
      fflush(stdout);
      _exit(1);
    }
    for (int r = 0; r < N - 1; r++) {
      symmpin_kernel_error e = *R[r].err;
      check(e.timed_out == 1 && e.peer == N - 1 && e.site == site,
            "timeout %s: rank %d recorded timed_out %u peer %d site %llx (want 1, %d, %llx)",
            t.name, r, (unsigned)e.timed_out, (int)e.peer, (unsigned long long)e.site, N - 1,
            (unsigned long long)site);
    }
    check(R[N - 1].err->timed_out == 0, "timeout %s: the missing rank recorded nothing", t.name);
    check(cudaGetLastError() == cudaSuccess, "timeout %s: no CUDA error left behind", t.name);
  }
  /* The process lives on: a normal call on fresh slots still works. */
  Case c = {SYMMPIN_FLOAT32, SYMMPIN_SUM, 4097, SYMMPIN_INPUT_STAGED, false, 0, 0};
  run_case(c, 0x6000);
  printf("timeout (N-1 ranks, LL/in-slot/copy/two-shot): %d passed, %d failed\n", g_passed - p0, g_failed - f0);
  fflush(stdout);
}

/* ---------------------------------------------------------------- out of step */

/* Calls 1, 2, 3 on a fresh slot, with identities 1, 2, 3; rank 1 skips call 2 (as a rank whose
 * launch failed would). From then on rank 1's slot epoch is one behind: its call 3 runs at the
 * epoch its peers used for call 2. Without identities in the data, rank 1's call 3 and the peers'
 * call 2 combined each other's data and reported nothing. Now every rank gives up and records
 * it (the ranks that meet another call's data at their epoch as a mismatch; the peers' call 3,
 * which rank 1 never makes, by the deadline), and no rank ends without an error. */
static void test_out_of_step() {
  int p0 = g_passed, f0 = g_failed;
  if (N < 2) {
    printf("out of step: skipped (needs 2+ ranks)\n");
    return;
  }
  struct T {
    int slot;
    size_t count;
    const char *name;
  } ts[3] = {{SLOT_SKEW_LL, 1000, "LL"}, {SLOT_SKEW_COPY, (size_t)(512u << 10) / N / 4 + 100, "copy"},
             {SLOT_SKEW_TWO, two_count(), "two-shot"}};
  for (const T &t : ts) {
    clear_errors();
    for (uint32_t id = 1; id <= 3; id++) {
      for (int r = 0; r < N; r++) {
        if (id == 2 && r == 1) continue;
        set_dev(r);
        symmpin_kernel_call c = make_call(r, t.slot, t.count, SYMMPIN_FLOAT32, SYMMPIN_SUM,
                                           SYMMPIN_INPUT_STAGED, R[r].bufA + kGuard,
                                           R[r].bufB + kGuard, 0xbeef0000ull + id);
        c.call_id = id;
        c.timeout_cycles = 200000000; /* ~0.1 s: the peers' call 3 waits for a call never made */
        check(symmpin_kernel_launch(&c, R[r].s[0]) == SYMMPIN_OK, "out of step %s: launch", t.name);
      }
      if (id == 1) { /* in step: fine */
        sync_or_die("out of step, call 1");
        char why[200];
        check(errors_clear(why, sizeof why), "out of step %s: call 1: %s", t.name, why);
      }
    }
    if (!sync_all(60.0)) {
      check(false, "out of step %s: kernels did not give up (hang)", t.name);
      printf("test_oneshot: %d passed, %d failed\n", g_passed, g_failed);
      fflush(stdout);
      _exit(1);
    }
    int mismatches = 0;
    for (int r = 0; r < N; r++) {
      symmpin_kernel_error e = *R[r].err;
      mismatches += e.mismatch != 0;
      check(e.timed_out == 1, "out of step %s: rank %d ended its calls without an error "
            "(timed_out %u, mismatch %u)", t.name, r, (unsigned)e.timed_out, (unsigned)e.mismatch);
    }
    check(R[1].err->mismatch == 1, "out of step %s: rank 1's call 3 met call 2's data: mismatch",
          t.name);
    check(mismatches >= 2, "out of step %s: %d rank(s) saw the mismatch", t.name, mismatches);
    check(cudaGetLastError() == cudaSuccess, "out of step %s: no CUDA error left behind", t.name);
  }
  printf("out of step (a rank skips a call; LL/copy/two-shot): %d passed, %d failed\n", g_passed - p0,
         g_failed - f0);
  fflush(stdout);
}

/* Out of step with another shape: rank 1 skips call 2 (large: many blocks), so its call 3 (small,
 * the same slot class: fewer blocks) meets its peers' call 2 at one epoch. The peers' blocks that
 * rank 1's call lacks wait for flags or lines that never come; with no deadline they used to wait
 * until an abort. Now they see rank 1's identity word (written by any of its blocks) show this
 * epoch with another call, and give up: every peer's call 2 ends (within a second) with a
 * mismatch, and so does rank 1's call 3. The peers' call 3 then waits for a call rank 1 never
 * makes, until the abort. */
static size_t shape_ll_big() { return symmpin_oneshot_ll_max_bytes(N) / 4; }
static size_t shape_two_big() { return N > 1 ? symmpin_twoshot_min_bytes(N) : 4096; }
static size_t shape_two_small() { return N > 1 ? symmpin_twoshot_min_bytes(N) / 4 + 1 : 1024; }

static void test_out_of_step_shapes() {
  int p0 = g_passed, f0 = g_failed;
  if (N < 2) {
    printf("out of step, other shapes: skipped (needs 2+ ranks)\n");
    return;
  }
  struct T {
    int slot;
    size_t big, small;
    const char *name;
  } ts[2] = {{SLOT_SHAPE_LL, shape_ll_big(), 1000, "LL"},
             {SLOT_SHAPE_TWO, shape_two_big() / 4 * 4, shape_two_small(), "two-shot"}};
  for (const T &t : ts) {
    symmpin_kernel_geometry gb = symmpin_kernel_geometry_for(SYMMPIN_COLL_ALLREDUCE, t.big, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
    symmpin_kernel_geometry gs = symmpin_kernel_geometry_for(SYMMPIN_COLL_ALLREDUCE, t.small, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
    if (symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, t.big, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED) !=
            symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, t.small, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED) ||
        gb.blocks <= gs.blocks) {
      printf("out of step, other shapes, %s: skipped at %d ranks (%u and %u blocks)\n", t.name, N,
             gb.blocks, gs.blocks);
      continue;
    }
    clear_errors();
    std::vector<cudaEvent_t> ev2(N);
    for (uint32_t id = 1; id <= 3; id++) {
      size_t count = id == 2 ? t.big : t.small;
      for (int r = 0; r < N; r++) {
        set_dev(r);
        if (id == 2 && r == 1) continue;
        symmpin_kernel_call c = make_call(r, t.slot, count, SYMMPIN_FLOAT32, SYMMPIN_SUM,
                                           SYMMPIN_INPUT_STAGED, R[r].bufA + kGuard,
                                           R[r].bufB + kGuard, 0xcafe0000ull + id);
        c.call_id = id;
        c.timeout_cycles = 0; /* no deadline: only the identity words can end the wait */
        check(symmpin_kernel_launch(&c, R[r].s[0]) == SYMMPIN_OK, "other shapes %s: launch", t.name);
        if (id == 2) {
          CK(cudaEventCreateWithFlags(&ev2[r], cudaEventDisableTiming));
          CK(cudaEventRecord(ev2[r], R[r].s[0]));
        }
      }
      if (id == 1) {
        sync_or_die("out of step, other shapes, call 1");
        char why[200];
        check(errors_clear(why, sizeof why), "other shapes %s: call 1: %s", t.name, why);
      }
    }
    /* Every peer's call 2 ends by itself. */
    double t0 = now_s();
    bool ended = false;
    while (!ended && now_s() - t0 < 10.0) {
      ended = true;
      for (int r = 0; r < N; r++)
        if (r != 1) {
          set_dev(r);
          cudaError_t q = cudaEventQuery(ev2[r]);
          if (q == cudaErrorNotReady) ended = false;
          else CK(q);
        }
      if (!ended) usleep(1000);
    }
    check(ended, "other shapes %s: the peers' call 2 ended without a deadline or an abort (%.2f s)",
          t.name, now_s() - t0);
    for (int r = 0; r < N; r++)
      check(R[r].err->mismatch == 1, "other shapes %s: rank %d recorded the mismatch (timed_out %u "
            "mismatch %u)", t.name, r, (unsigned)R[r].err->timed_out, (unsigned)R[r].err->mismatch);
    /* The peers' call 3 waits for rank 1's: the abort ends it. */
    for (int r = 0; r < N; r++) R[r].err->abort = 1;
    if (!sync_all(20.0)) {
      check(false, "other shapes %s: kernels did not stop at the abort (hang)", t.name);
      printf("test_oneshot: %d passed, %d failed\n", g_passed, g_failed);
      fflush(stdout);
      _exit(1);
    }
    for (int r = 0; r < N; r++)
      if (r != 1) {
        set_dev(r);
        CK(cudaEventDestroy(ev2[r]));
      }
    check(cudaGetLastError() == cudaSuccess, "other shapes %s: no CUDA error left behind", t.name);
  }
  clear_errors();
  printf("out of step, other shapes (a rank skips a large call, its next small call meets it; no "
         "deadline; LL/two-shot): %d passed, %d failed\n", g_passed - p0, g_failed - f0);
  fflush(stdout);
}

/* ---------------------------------------------------------------- abort */

/* No deadline (a late peer is only late), but the host's abort word stops every waiting kernel
 * promptly: what ncclCommAbort relies on. N-1 ranks launch, the last never does. */
static void test_abort() {
  int p0 = g_passed, f0 = g_failed;
  if (N < 2) {
    printf("abort: skipped (needs 2+ ranks)\n");
    return;
  }
  const int slots[4] = {SLOT_TO_LL, SLOT_TO_IN_SLOT, SLOT_TO_COPY, SLOT_TO_TWO};
  const symmpin_kernel_input inputs[4] = {SYMMPIN_INPUT_STAGED, SYMMPIN_INPUT_IN_SLOT,
                                          SYMMPIN_INPUT_STAGED, SYMMPIN_INPUT_STAGED};
  const size_t counts[4] = {1000, 1000, (size_t)(512u << 10) / N / 4 + 100, two_count()};
  const char *names[4] = {"LL", "in-slot", "copy", "two-shot"};
  for (int t = 0; t < 4; t++) {
    clear_errors();
    for (int r = 0; r < N - 1; r++) {
      set_dev(r);
      symmpin_kernel_call c = make_call(r, slots[t], counts[t], SYMMPIN_FLOAT32, SYMMPIN_SUM,
                                         inputs[t], R[r].bufA + kGuard, R[r].bufB + kGuard, 0xab);
      c.timeout_cycles = 0; /* no deadline */
      check(symmpin_kernel_launch(&c, R[r].s[0]) == SYMMPIN_OK, "abort %s: launch", names[t]);
    }
    usleep(300 * 1000);
    bool waiting = true;
    for (int r = 0; r < N - 1; r++) waiting &= cudaStreamQuery(R[r].s[0]) == cudaErrorNotReady;
    check(waiting, "abort %s: without a deadline the kernels still wait after 300 ms", names[t]);
    for (int r = 0; r < N - 1; r++) R[r].err->abort = 1;
    double t0 = now_s();
    if (!sync_all(20.0)) {
      check(false, "abort %s: kernels did not stop (hang)", names[t]);
      printf("test_oneshot: %d passed, %d failed\n", g_passed, g_failed);
      fflush(stdout);
      _exit(1);
    }
    check(now_s() - t0 < 1.0, "abort %s: kernels stopped within a second (%.3f s)", names[t],
          now_s() - t0);
    for (int r = 0; r < N - 1; r++)
      check(R[r].err->timed_out == 1 && R[r].err->aborted == 1,
            "abort %s: rank %d recorded timed_out %u aborted %u", names[t], r,
            (unsigned)R[r].err->timed_out, (unsigned)R[r].err->aborted);
    check(cudaGetLastError() == cudaSuccess, "abort %s: no CUDA error left behind", names[t]);
  }
  clear_errors();
  Case c = {SYMMPIN_FLOAT32, SYMMPIN_SUM, 4097, SYMMPIN_INPUT_STAGED, false, 0, 0};
  run_case(c, 0x6100);
  printf("abort (N-1 ranks, no deadline, LL/in-slot/copy/two-shot): %d passed, %d failed\n",
         g_passed - p0, g_failed - f0);
  fflush(stdout);
}

/* ---------------------------------------------------------------- API checks */

static void test_api() {
  int p0 = g_passed, f0 = g_failed;
  set_dev(0);
  char *a = R[0].bufA + kGuard, *b = R[0].bufB + kGuard;
  symmpin_kernel_call c = make_call(0, SLOT_API, 100, SYMMPIN_FLOAT32, SYMMPIN_SUM,
                                     SYMMPIN_INPUT_STAGED, a, b, 1);
  char why[200] = "";
  check(symmpin_kernel_device_check(why, sizeof why) == SYMMPIN_OK,
        "api: the kernels have code for this GPU");
  if (why[0]) printf("  %s\n", why);
  symmpin_kernel_call x = c;
  x.count = 0;
  check(symmpin_kernel_launch(&x, R[0].s[0]) == SYMMPIN_OK, "api: count 0 is a no-op");
  x = c, x.op = SYMMPIN_OP_COUNT;
  check(symmpin_kernel_launch(&x, R[0].s[0]) == SYMMPIN_ERR_UNSUPPORTED, "api: user op refused");
  x = c, x.dtype = SYMMPIN_DTYPE_COUNT;
  check(symmpin_kernel_launch(&x, R[0].s[0]) == SYMMPIN_ERR_UNSUPPORTED,
        "api: unknown dtype refused");
  x = c, x.input = (symmpin_kernel_input)7;
  check(symmpin_kernel_launch(&x, R[0].s[0]) == SYMMPIN_ERR_INVALID, "api: bad input form refused");
  x = c, x.send = nullptr;
  check(symmpin_kernel_launch(&x, R[0].s[0]) == SYMMPIN_ERR_INVALID,
        "api: staged NULL send refused");
  check(symmpin_kernel_launch(nullptr, R[0].s[0]) == SYMMPIN_ERR_INVALID, "api: NULL call refused");
  x = c, x.slot_bytes = 256;
  check(symmpin_kernel_launch(&x, R[0].s[0]) == SYMMPIN_ERR_INVALID, "api: small slot refused");
  x = c, x.recv = a + 4;
  check(symmpin_kernel_launch(&x, R[0].s[0]) == SYMMPIN_ERR_UNSUPPORTED,
        "api: shifted overlap of send and recv refused");
  x = c, x.rank = N;
  check(symmpin_kernel_launch(&x, R[0].s[0]) == SYMMPIN_ERR_INVALID, "api: bad rank refused");
  x = c, x.input = SYMMPIN_INPUT_IN_SLOT, x.recv = slot_ptr(0, SLOT_API) + 16;
  check(symmpin_kernel_launch(&x, R[0].s[0]) == SYMMPIN_ERR_UNSUPPORTED,
        "api: in-slot recv inside the slot header refused");
  x = c, x.slot[N > 1 ? 1 : 0] = (char *)x.slot[N > 1 ? 1 : 0] + 4;
  check(symmpin_kernel_launch(&x, R[0].s[0]) == SYMMPIN_ERR_INVALID, "api: misaligned slot refused");
  CK(cudaStreamSynchronize(R[0].s[0]));
  printf("api argument checks: %d passed, %d failed\n", g_passed - p0, g_failed - f0);
}

/* ---------------------------------------------------------------- all-gather and reduce-scatter */

/* NCCL's count argument is the chunk: the all-gather's send and the reduce-scatter's recv hold
 * `count` elements, the other buffer nranks x count. */
struct CollCase {
  int coll, d, op;
  size_t count;
  bool inplace;       /* NCCL's in-place form (allreduce.h) */
  size_t soff, roff;  /* misalignment of the buffers' base in bytes (multiples of the element) */
};

static const char *coll_label(int coll) { return symmpin_coll_name(coll); }

/* Run one all-gather or reduce-scatter on all ranks and check it against the host's reference:
 * all-gather bitwise (every rank's chunk at its place, on every rank), reduce-scatter within the
 * all-reduce's tolerances (exact for integers) and, for `bitwise_ar`, bitwise the all-reduce
 * kernel's result for the same inputs (the same rank order, the same arithmetic). Poison around
 * every output must stay, and the input when not in place. */
static int run_coll_case(const CollCase &c, int slot, uint64_t site, bool bitwise_ar) {
  const size_t sz = symmpin_dtype_size(c.d), bytes = c.count * sz;
  const bool ag = c.coll == SYMMPIN_COLL_ALLGATHER;
  const size_t send_bytes = ag ? bytes : N * bytes, recv_bytes = ag ? N * bytes : bytes;
  const size_t span = kGuard + 16 + N * bytes + kGuard;
  char desc[192];
  snprintf(desc, sizeof desc, "%s %s %s count %zu %s soff %zu roff %zu n %d", coll_label(c.coll),
           symmpin_dtype_name(c.d), ag ? "-" : symmpin_op_name(c.op), c.count,
           c.inplace ? "in-place" : "out-of-place", c.soff, c.roff, N);
  if (span > g_buf_bytes) return check(false, "%s: test buffers too small", desc);

  std::vector<std::vector<uint8_t>> in(N, std::vector<uint8_t>(send_bytes));
  for (int r = 0; r < N; r++)
    for (size_t i = 0; i < send_bytes / (sz ? sz : 1); i++) random_elem(c.d, &in[r][i * sz]);
  std::vector<char *> send(N), recv(N);
  for (int r = 0; r < N; r++) {
    set_dev(r);
    CK(cudaMemset(R[r].bufA, kPoisonIn, span));
    CK(cudaMemset(R[r].bufB, kPoisonOut, span));
    if (!c.inplace) {
      send[r] = R[r].bufA + kGuard + c.soff;
      recv[r] = R[r].bufB + kGuard + c.roff;
    } else if (ag) { /* send is chunk `rank` of recv */
      recv[r] = R[r].bufB + kGuard + c.roff;
      send[r] = recv[r] + (size_t)r * bytes;
    } else { /* recv is chunk `rank` of send */
      send[r] = R[r].bufB + kGuard + c.roff;
      recv[r] = send[r] + (size_t)r * bytes;
    }
    if (send_bytes) CK(cudaMemcpy(send[r], in[r].data(), send_bytes, cudaMemcpyHostToDevice));
  }
  sync_devices();
  clear_errors();
  for (int r = 0; r < N; r++) {
    set_dev(r);
    symmpin_kernel_call call = make_call(r, slot, c.count, c.d, c.op, SYMMPIN_INPUT_STAGED, send[r],
                                          recv[r], site);
    call.coll = c.coll;
    symmpin_status st = symmpin_kernel_launch(&call, R[r].s[0]);
    if (st != SYMMPIN_OK) return check(false, "%s: launch returned %s", desc, symmpin_status_name(st));
  }
  sync_or_die(desc);
  char why[200];
  if (!errors_clear(why, sizeof why)) return check(false, "%s: %s", desc, why);

  std::vector<std::vector<uint8_t>> out(N, std::vector<uint8_t>(recv_bytes));
  std::vector<uint8_t> A(span), B(span);
  for (int r = 0; r < N; r++) {
    set_dev(r);
    if (recv_bytes) CK(cudaMemcpy(out[r].data(), recv[r], recv_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(A.data(), R[r].bufA, span, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(B.data(), R[r].bufB, span, cudaMemcpyDeviceToHost));
    size_t at;
    /* Poison before and after the region of bufB the call owns: recv, or, for the in-place
     * reduce-scatter, its send around recv, whose other chunks must be unchanged. */
    bool rs_inplace = c.inplace && !ag;
    size_t lo = rs_inplace ? kGuard + c.roff : (size_t)(recv[r] - R[r].bufB);
    size_t len = rs_inplace ? send_bytes : recv_bytes;
    if (!all_poison(B.data(), lo, kPoisonOut, &at) ||
        !all_poison(B.data() + lo + len, span - lo - len, kPoisonOut, &at))
      return check(false, "%s: rank %d wrote outside its buffers (byte %zu)", desc, r, at);
    for (int q = 0; rs_inplace && q < N; q++)
      if (q != r && memcmp(B.data() + lo + q * bytes, in[r].data() + q * bytes, bytes))
        return check(false, "%s: rank %d changed chunk %d of its in-place send", desc, r, q);
    if (!c.inplace && memcmp(A.data() + kGuard + c.soff, in[r].data(), send_bytes) != 0)
      return check(false, "%s: rank %d's send buffer changed", desc, r);
    if (!c.inplace && (!all_poison(A.data(), kGuard + c.soff, kPoisonIn, &at) ||
                       !all_poison(A.data() + kGuard + c.soff + send_bytes,
                                   span - kGuard - c.soff - send_bytes, kPoisonIn, &at)))
      return check(false, "%s: rank %d wrote around its send buffer", desc, r);
  }
  if (ag) {
    for (int r = 0; r < N; r++)
      for (int q = 0; q < N; q++)
        if (memcmp(out[r].data() + q * bytes, in[q].data(), bytes) != 0)
          return check(false, "%s: rank %d's chunk %d is not rank %d's input", desc, r, q, q);
    return check(true, "%s", desc);
  }
  for (int r = 0; r < N; r++) {
    std::vector<const uint8_t *> inp(N);
    for (int q = 0; q < N; q++) inp[q] = in[q].data() + r * bytes;
    long bad = check_result(c.d, c.op, N, c.count, inp, out[r].data(), why, sizeof why);
    if (bad >= 0) return check(false, "%s: rank %d: %s", desc, r, why);
  }
  if (bitwise_ar && c.count) {
    /* The all-reduce kernel on the same inputs (n x count elements, out of place on the matrix's
     * staged slot): each rank's chunk must be the reduce-scatter's result, bit for bit. */
    for (int r = 0; r < N; r++) {
      set_dev(r);
      CK(cudaMemcpy(R[r].bufA + kGuard, in[r].data(), send_bytes, cudaMemcpyHostToDevice));
    }
    sync_devices();
    for (int r = 0; r < N; r++) {
      set_dev(r);
      symmpin_kernel_call call = make_call(r, SLOT_STAGED, N * c.count, c.d, c.op, SYMMPIN_INPUT_STAGED,
                                            R[r].bufA + kGuard, R[r].bufC, site ^ 0xA11);
      symmpin_status st = symmpin_kernel_launch(&call, R[r].s[0]);
      if (st != SYMMPIN_OK)
        return check(false, "%s: the all-reduce for comparison returned %s", desc, symmpin_status_name(st));
    }
    sync_or_die(desc);
    if (!errors_clear(why, sizeof why)) return check(false, "%s: the all-reduce: %s", desc, why);
    std::vector<uint8_t> ar(send_bytes);
    for (int r = 0; r < N; r++) {
      set_dev(r);
      CK(cudaMemcpy(ar.data(), R[r].bufC, send_bytes, cudaMemcpyDeviceToHost));
      if (memcmp(ar.data() + r * bytes, out[r].data(), bytes) != 0)
        return check(false, "%s: rank %d differs bitwise from the all-reduce's chunk", desc, r);
    }
  }
  return check(true, "%s", desc);
}

/* Every datatype (every op for the reduce-scatter), counts 0, 1, odd, around the LL limit and up
 * to the largest chunk symmpin takes (SYMMPIN_MAX_BYTES, 2 MiB, over the larger buffer), in place
 * and not, misaligned. */
static void test_colls(bool small) {
  const size_t max_chunk_bytes = (2u << 20) / N;
  for (int coll : {SYMMPIN_COLL_ALLGATHER, SYMMPIN_COLL_REDUCESCATTER}) {
    for (int d = 0; d < SYMMPIN_DTYPE_COUNT; d++) {
      if (small && d != SYMMPIN_FLOAT32 && d != SYMMPIN_BFLOAT16 && d != SYMMPIN_FP8E5M2) continue;
      int p0 = g_passed, f0 = g_failed;
      size_t sz = symmpin_dtype_size(d), ll = symmpin_oneshot_ll_max_bytes(N) / sz;
      std::vector<size_t> counts = small ? std::vector<size_t>{0, 1, 257, ll + 1}
                                         : std::vector<size_t>{0, 1, 7, 9, 255, 257, 4097, ll, ll + 1,
                                                               65537, max_chunk_bytes / sz};
      std::vector<int> ops;
      if (coll == SYMMPIN_COLL_ALLGATHER) ops = {SYMMPIN_SUM};
      else for (int o = 0; o < SYMMPIN_OP_COUNT; o++) if (!small || o != SYMMPIN_PROD) ops.push_back(o);
      unsigned idx = 0;
      for (int op : ops)
        for (size_t count : counts)
          for (int ip = 0; ip < 2; ip++, idx++) {
            /* the largest chunks: sum and max only, to keep the host reference affordable */
            if (count >= 65537 && coll == SYMMPIN_COLL_REDUCESCATTER && op != SYMMPIN_SUM &&
                op != SYMMPIN_MAX)
              continue;
            CollCase c;
            c.coll = coll, c.d = d, c.op = op, c.count = count, c.inplace = ip;
            c.soff = (idx * 3 * sz) % 16 / sz * sz;
            c.roff = ((idx * 5 + 1) * sz) % 16 / sz * sz;
            run_coll_case(c, SLOT_COLL, 0x5000 + idx, coll == SYMMPIN_COLL_REDUCESCATTER && count <= 65537);
          }
      printf("%-13s %-4s: %d passed, %d failed (%zu counts x %zu ops x in/out of place)\n",
             coll_label(coll), symmpin_dtype_name(d), g_passed - p0, g_failed - f0, counts.size(),
             ops.size());
      fflush(stdout);
    }
  }
}

/* The three collectives back to back on one slot of one class, K calls without a host sync, each
 * with its own buffers (so fast ranks run ahead): the slot-reuse arguments across collectives and
 * shapes (allreduce.h: they share the class). `big`: counts above the LL limit (the copy class). */
static void test_colls_back_to_back(bool big, int K, int slot) {
  int p0 = g_passed, f0 = g_failed;
  const int d = SYMMPIN_FLOAT32, op = SYMMPIN_SUM;
  const size_t ll = symmpin_oneshot_ll_max_bytes(N) / 4;
  /* per collective: the all-reduce stays below the two-shot threshold (its own class) */
  const size_t cnt[3] = {big ? ll + 77 : 1000, big ? ll + 5 : 777, big ? ll + 1 : 1501};
  auto coll_of = [](int k) { return k % 3; }; /* SYMMPIN_COLL_* values 0, 1, 2 in turn */
  size_t stride = 0;
  for (int k = 0; k < 3; k++) stride = std::max(stride, (N * cnt[k] * 4 + 255) / 256 * 256);
  std::vector<char *> ins(N), outs(N);
  std::vector<std::vector<uint8_t>> host(N, std::vector<uint8_t>(stride * K));
  for (int r = 0; r < N; r++) {
    set_dev(r);
    CK(cudaMalloc(&ins[r], stride * K));
    CK(cudaMalloc(&outs[r], stride * K));
    for (size_t i = 0; i < stride * K / 4; i++) random_elem(d, &host[r][i * 4]);
    CK(cudaMemcpy(ins[r], host[r].data(), stride * K, cudaMemcpyHostToDevice));
    CK(cudaMemset(outs[r], kPoisonOut, stride * K));
  }
  sync_devices();
  clear_errors();
  char desc[160];
  snprintf(desc, sizeof desc, "back-to-back all-reduce/all-gather/reduce-scatter %s x %d",
           big ? "copy" : "LL", K);
  bool launched = true;
  for (int k = 0; k < K && launched; k++)
    for (int r = 0; r < N; r++) {
      set_dev(r);
      symmpin_kernel_call call = make_call(r, slot, cnt[coll_of(k)], d, op, SYMMPIN_INPUT_STAGED,
                                            ins[r] + k * stride, outs[r] + k * stride, 0x6000 + k);
      call.coll = coll_of(k);
      call.call_id = (uint32_t)k;
      if (symmpin_kernel_launch(&call, R[r].s[0]) != SYMMPIN_OK) launched = false;
    }
  sync_or_die(desc);
  char why[200];
  if (check(launched, "%s: a launch failed", desc) && check(errors_clear(why, sizeof why), "%s: %s", desc, why)) {
    std::vector<std::vector<uint8_t>> got(N, std::vector<uint8_t>(stride * K));
    for (int r = 0; r < N; r++) {
      set_dev(r);
      CK(cudaMemcpy(got[r].data(), outs[r], stride * K, cudaMemcpyDeviceToHost));
    }
    int bad = 0;
    for (int k = 0; k < K && bad < 3; k++) {
      const int coll = coll_of(k);
      const size_t count = cnt[coll], bytes = count * 4;
      bool ok = true;
      for (int r = 0; r < N && ok; r++) {
        const uint8_t *o = got[r].data() + k * stride;
        std::vector<const uint8_t *> inp(N);
        if (coll == SYMMPIN_COLL_ALLGATHER) {
          for (int q = 0; q < N && ok; q++)
            if (memcmp(o + q * bytes, host[q].data() + k * stride, bytes)) {
              snprintf(why, sizeof why, "rank %d's chunk %d wrong", r, q);
              ok = false;
            }
          continue;
        }
        size_t chunk = coll == SYMMPIN_COLL_REDUCESCATTER ? r * bytes : 0;
        for (int q = 0; q < N; q++) inp[q] = host[q].data() + k * stride + chunk;
        if (check_result(d, op, N, count, inp, o, why, sizeof why) >= 0) ok = false;
      }
      if (!check(ok, "%s: call %d (%s): %s", desc, k, coll_label(coll), why)) bad++;
    }
  }
  for (int r = 0; r < N; r++) {
    set_dev(r);
    CK(cudaFree(ins[r]));
    CK(cudaFree(outs[r]));
  }
  printf("%s: %d passed, %d failed\n", desc, g_passed - p0, g_failed - f0);
  fflush(stdout);
}

/* Captured all-gathers and reduce-scatters (LL and copy each), replayed with new inputs. */
static void test_colls_graph(int replays) {
  int p0 = g_passed, f0 = g_failed;
  const size_t ll4 = symmpin_oneshot_ll_max_bytes(N) / 4, ll2 = symmpin_oneshot_ll_max_bytes(N) / 2;
  struct G {
    int coll, slot, d, op;
    size_t count;
  } calls[4] = {
      {SYMMPIN_COLL_ALLGATHER, SLOT_COLL_GRAPH + 0, SYMMPIN_BFLOAT16, SYMMPIN_SUM, 3001},
      {SYMMPIN_COLL_ALLGATHER, SLOT_COLL_GRAPH + 1, SYMMPIN_FLOAT32, SYMMPIN_SUM, ll4 + 333},
      {SYMMPIN_COLL_REDUCESCATTER, SLOT_COLL_GRAPH + 2, SYMMPIN_FLOAT32, SYMMPIN_SUM, 1001},
      {SYMMPIN_COLL_REDUCESCATTER, SLOT_COLL_GRAPH + 3, SYMMPIN_BFLOAT16, SYMMPIN_AVG, ll2 + 99},
  };
  const int J = 4;
  std::vector<cudaGraphExec_t> exec(N);
  std::vector<char *> ins(N * J), outs(N * J);
  auto sbytes = [&](int j) { return symmpin_coll_send_count(calls[j].coll, calls[j].count, N) * symmpin_dtype_size(calls[j].d); };
  auto rbytes = [&](int j) { return symmpin_coll_recv_count(calls[j].coll, calls[j].count, N) * symmpin_dtype_size(calls[j].d); };
  for (int r = 0; r < N; r++) {
    set_dev(r);
    for (int j = 0; j < J; j++) {
      CK(cudaMalloc(&ins[r * J + j], sbytes(j)));
      CK(cudaMalloc(&outs[r * J + j], rbytes(j)));
    }
    cudaStream_t s = R[r].s[0];
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    bool ok = true;
    for (int j = 0; j < J; j++) {
      symmpin_kernel_call call = make_call(r, calls[j].slot, calls[j].count, calls[j].d, calls[j].op,
                                            SYMMPIN_INPUT_STAGED, ins[r * J + j], outs[r * J + j], 0x7000 + j);
      call.coll = calls[j].coll;
      ok &= symmpin_kernel_launch(&call, s) == SYMMPIN_OK;
    }
    cudaGraph_t g;
    CK(cudaStreamEndCapture(s, &g));
    check(ok, "collectives graph: capture of rank %d's launches", r);
    CK(cudaGraphInstantiate(&exec[r], g, 0));
    CK(cudaGraphDestroy(g));
  }
  int bad = 0;
  for (int it = 0; it < replays && bad <= 5; it++) {
    std::vector<std::vector<std::vector<uint8_t>>> host(J, std::vector<std::vector<uint8_t>>(N));
    for (int j = 0; j < J; j++) {
      size_t sz = symmpin_dtype_size(calls[j].d);
      for (int r = 0; r < N; r++) {
        host[j][r].resize(sbytes(j));
        for (size_t i = 0; i < sbytes(j) / sz; i++) random_elem(calls[j].d, &host[j][r][i * sz]);
        set_dev(r);
        CK(cudaMemcpy(ins[r * J + j], host[j][r].data(), sbytes(j), cudaMemcpyHostToDevice));
        CK(cudaMemset(outs[r * J + j], kPoisonOut, rbytes(j)));
      }
    }
    sync_devices();
    clear_errors();
    for (int r = 0; r < N; r++) {
      set_dev(r);
      CK(cudaGraphLaunch(exec[r], R[r].s[0]));
    }
    sync_or_die("collectives graph replay");
    char why[200];
    if (!check(errors_clear(why, sizeof why), "collectives graph replay %d: %s", it, why)) {
      bad++;
      continue;
    }
    for (int j = 0; j < J; j++) {
      const size_t bytes = calls[j].count * symmpin_dtype_size(calls[j].d);
      bool ok = true;
      why[0] = '\0';
      for (int r = 0; r < N && ok; r++) {
        std::vector<uint8_t> got(rbytes(j));
        set_dev(r);
        CK(cudaMemcpy(got.data(), outs[r * J + j], rbytes(j), cudaMemcpyDeviceToHost));
        if (calls[j].coll == SYMMPIN_COLL_ALLGATHER) {
          for (int q = 0; q < N && ok; q++)
            if (memcmp(got.data() + q * bytes, host[j][q].data(), bytes)) {
              snprintf(why, sizeof why, "rank %d's chunk %d wrong", r, q);
              ok = false;
            }
        } else {
          std::vector<const uint8_t *> inp(N);
          for (int q = 0; q < N; q++) inp[q] = host[j][q].data() + r * bytes;
          if (check_result(calls[j].d, calls[j].op, N, calls[j].count, inp, got.data(), why, sizeof why) >= 0)
            ok = false;
        }
      }
      if (!check(ok, "collectives graph replay %d call %d (%s): %s", it, j, coll_label(calls[j].coll), why))
        bad++;
    }
  }
  for (int r = 0; r < N; r++) {
    set_dev(r);
    CK(cudaGraphExecDestroy(exec[r]));
    for (int j = 0; j < J; j++) {
      CK(cudaFree(ins[r * J + j]));
      CK(cudaFree(outs[r * J + j]));
    }
  }
  printf("collectives graph capture + %d replays (all-gather LL and copy, reduce-scatter LL and "
         "copy): %d passed, %d failed\n",
         replays, g_passed - p0, g_failed - f0);
  fflush(stdout);
}

/* A peer that never comes: every launched all-gather and reduce-scatter (LL and copy) gives up at
 * its deadline, records the peer and the site, and the process lives on (a hang fails). */
static size_t colls_to_count(int j) {
  return j % 2 ? symmpin_oneshot_ll_max_bytes(N) / 4 + 100 : 1000; /* f32: LL, then copy */
}
static void test_colls_timeout() {
  int p0 = g_passed, f0 = g_failed;
  if (N < 2) {
    printf("collectives timeout: skipped (needs 2+ ranks)\n");
    return;
  }
  for (int j = 0; j < 4; j++) {
    int coll = j < 2 ? SYMMPIN_COLL_ALLGATHER : SYMMPIN_COLL_REDUCESCATTER;
    const char *name = coll == SYMMPIN_COLL_ALLGATHER ? (j % 2 ? "all-gather copy" : "all-gather LL")
                                                      : (j % 2 ? "reduce-scatter copy" : "reduce-scatter LL");
    clear_errors();
    uint64_t site = 0xdeac0000ull + (uint64_t)j;
    for (int r = 0; r < N - 1; r++) {
      set_dev(r);
      symmpin_kernel_call c = make_call(r, SLOT_COLL_TO + j, colls_to_count(j), SYMMPIN_FLOAT32, SYMMPIN_SUM,
                                         SYMMPIN_INPUT_STAGED, R[r].bufA + kGuard, R[r].bufB + kGuard, site);
      c.coll = coll;
      c.timeout_cycles = 2000000; /* ~1 ms */
      check(symmpin_kernel_launch(&c, R[r].s[0]) == SYMMPIN_OK, "timeout %s: launch", name);
    }
    if (!sync_all(60.0)) {
      check(false, "timeout %s: kernels did not give up (hang)", name);
      printf("test_oneshot: %d passed, %d failed\n", g_passed, g_failed);
      fflush(stdout);
      _exit(1);
    }
    for (int r = 0; r < N - 1; r++) {
      symmpin_kernel_error e = *R[r].err;
      check(e.timed_out == 1 && e.peer == N - 1 && e.site == site,
            "timeout %s: rank %d recorded timed_out %u peer %d site %llx (want 1, %d, %llx)", name, r,
            (unsigned)e.timed_out, (int)e.peer, (unsigned long long)e.site, N - 1, (unsigned long long)site);
    }
    check(R[N - 1].err->timed_out == 0, "timeout %s: the missing rank recorded nothing", name);
    check(cudaGetLastError() == cudaSuccess, "timeout %s: no CUDA error left behind", name);
  }
  printf("collectives timeout (N-1 ranks, all-gather and reduce-scatter, LL and copy): %d passed, "
         "%d failed\n",
         g_passed - p0, g_failed - f0);
  fflush(stdout);
}

/* Refusals particular to the new collectives: nothing is launched. */
static void test_colls_api() {
  int p0 = g_passed, f0 = g_failed;
  set_dev(0);
  char *a = R[0].bufA + kGuard, *b = R[0].bufB + kGuard;
  auto launch = [&](int coll, size_t count, const void *send, void *recv, symmpin_kernel_input in, int op) {
    symmpin_kernel_call c = make_call(0, SLOT_COLL, count, SYMMPIN_FLOAT32, op, in, send, recv, 1);
    c.coll = coll;
    return symmpin_kernel_launch(&c, R[0].s[0]);
  };
  check(launch(3, 16, a, b, SYMMPIN_INPUT_STAGED, SYMMPIN_SUM) == SYMMPIN_ERR_INVALID, "unknown collective refused");
  check(launch(SYMMPIN_COLL_ALLGATHER, 16, a, b, SYMMPIN_INPUT_IN_SLOT, SYMMPIN_SUM) == SYMMPIN_ERR_UNSUPPORTED,
        "all-gather in-slot refused");
  check(launch(SYMMPIN_COLL_REDUCESCATTER, 16, a, b, SYMMPIN_INPUT_STAGED, 7) == SYMMPIN_ERR_UNSUPPORTED,
        "reduce-scatter with a user op refused");
  check(symmpin_kernel_supports(SYMMPIN_COLL_ALLGATHER, SYMMPIN_FLOAT32, 7), "all-gather ignores the op");
  if (N > 1) {
    /* shifted overlaps that are not NCCL's in-place forms */
    check(launch(SYMMPIN_COLL_ALLGATHER, 16, b + 4, b, SYMMPIN_INPUT_STAGED, SYMMPIN_SUM) == SYMMPIN_ERR_UNSUPPORTED,
          "all-gather with send inside recv at another chunk refused");
    check(launch(SYMMPIN_COLL_REDUCESCATTER, 16, a, a + 64 + 4, SYMMPIN_INPUT_STAGED, SYMMPIN_SUM) == SYMMPIN_ERR_UNSUPPORTED,
          "reduce-scatter with recv inside send at another chunk refused");
  }
  check(symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLGATHER, 1000, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_IN_SLOT) == 0,
        "no in-slot slot size for the all-gather");
  sync_or_die("collectives api");
  printf("collectives api: %d passed, %d failed\n", g_passed - p0, g_failed - f0);
  fflush(stdout);
}

/* ---------------------------------------------------------------- device reset */

/* The address and id of `dev`'s primary context, made current and initialized by the runtime:
 * what the launcher sees at a launch there (nullptr and 0 if the driver does not say). */
static void context_of(int dev, void **addr, unsigned long long *id) {
  CK(cudaSetDevice(dev));
  CK(cudaFree(nullptr)); /* the runtime initializes the device's primary context */
  CUcontext c = nullptr;
  *id = 0;
  if (symmpin_cu.CtxGetCurrent(&c) != CUDA_SUCCESS ||
      symmpin_cu.CtxGetId(nullptr, id) != CUDA_SUCCESS)
    c = nullptr;
  *addr = (void *)c;
}

/* One all-reduce of each algorithm (LL, copy in place, in-slot, two-shot) and a group, exact. */
static void reset_round(const char *when) {
  int p0 = g_passed, f0 = g_failed;
  size_t copy = symmpin_oneshot_ll_max_bytes(N) / 2 + 77; /* bf16: above the LL limit */
  const Case cases[] = {
      {SYMMPIN_FLOAT32, SYMMPIN_SUM, 1000, SYMMPIN_INPUT_STAGED, false, 4, 8},
      {SYMMPIN_BFLOAT16, SYMMPIN_SUM, copy, SYMMPIN_INPUT_STAGED, true, 0, 0},
      {SYMMPIN_INT32, SYMMPIN_MAX, 4097, SYMMPIN_INPUT_IN_SLOT, false, 0, 4},
      {SYMMPIN_FLOAT32, SYMMPIN_SUM, two_count(), SYMMPIN_INPUT_STAGED, false, 0, 0},
  };
  uint64_t site = 0x7e5e7000ull;
  for (const Case &c : cases) run_case(c, site++);
  test_groups(1);
  printf("reset, %s: one call of each algorithm and a group: %d passed, %d failed\n", when,
         g_passed - p0, g_failed - f0);
  fflush(stdout);
}

/* cudaDeviceReset between launches, in one process (issue 36, item 3): the launcher keeps kernel
 * functions per context, and a function of the destroyed context must never be launched in the
 * new one, which may have its address. The calls before and after the reset must be exact. */
static bool test_reset(int used) {
  if (!symmpin_cu_usable()) {
    fprintf(stderr, "test_oneshot: the driver cannot serve symmpin: %s\n", symmpin_cu_open()->why);
    return false;
  }
  std::vector<void *> addr(used);
  std::vector<unsigned long long> id(used);
  for (int d = 0; d < used; d++) context_of(d, &addr[d], &id[d]);
  reset_round("before cudaDeviceReset");
  ranks_teardown();
  for (int d = 0; d < used; d++) {
    CK(cudaSetDevice(d));
    CK(cudaDeviceReset());
  }
  if (!enable_peers(used)) return false;
  ranks_setup();
  bool reused = false;
  for (int d = 0; d < used; d++) {
    void *a;
    unsigned long long i;
    context_of(d, &a, &i);
    printf("reset: GPU %d's context %p (id %llu), then %p (id %llu): %s address, %s id\n", d,
           addr[d], id[d], a, i, a == addr[d] ? "the same" : "another",
           i == id[d] ? "the same" : "a new");
    check(i != id[d], "GPU %d: the context after cudaDeviceReset has the old one's id %llu", d, i);
    reused |= a == addr[d];
  }
  reset_round("after cudaDeviceReset");
  printf("reset: %s\n", reused ? "a new context at the destroyed one's address (issue 36, item 3)"
                               : "every new context at another address");
  return true;
}

/* ---------------------------------------------------------------- main */

static const char kProg[] = "test_oneshot";

static void usage(FILE *to) {
  fprintf(to,
          "usage: %s [N] [--small] [--colls] [--reset] [--seed S]\n"
          "GPU test of symmpin's all-reduce kernels (kernels/allreduce.h): N simulated ranks\n"
          "(1..%d, default 2) in this process, rank r on visible GPU r %% ngpus.\n"
          "  --small      a small subset with 1 s waits (for compute-sanitizer)\n"
          "  --colls      only the API checks and the all-gather / reduce-scatter groups\n"
          "  --reset      only: a call of each algorithm and a group, then cudaDeviceReset on every\n"
          "               GPU, the ranks set up again and the same calls (new contexts)\n"
          "  --seed S     seed of the random inputs (default 0x5eed1234abcd; printed first)\n"
          "  --help       print this and exit\n"
          "  --version    print symmpin's version and git revision and exit\n"
          "Prints one line per group of checks, last 'test_oneshot: P passed, F failed'.\n"
          "Exit status: 0 all passed, 1 a check failed, 2 bad usage or no usable GPU.\n",
          kProg, SYMMPIN_KERNEL_MAX_RANKS);
}

int main(int argc, char **argv) {
  bool small = false;
  uint64_t seed = 0x5eed1234abcdull;
  static const struct option longopts[] = {
      {"small", no_argument, nullptr, 's'},
      {"colls", no_argument, nullptr, 'c'},
      {"reset", no_argument, nullptr, 'r'},
      {"seed", required_argument, nullptr, 'S'},
      {"help", no_argument, nullptr, 'h'},
      {"version", no_argument, nullptr, 'V'},
      {nullptr, 0, nullptr, 0},
  };
  opterr = 0;
  int o;
  while ((o = getopt_long(argc, argv, ":h", longopts, nullptr)) != -1) {
    switch (o) {
    case 's': small = true; break;
    case 'c': g_colls_only = true; break;
    case 'r': g_reset = true; break;
    case 'S': {
      char *end = nullptr;
      errno = 0;
      unsigned long long v = strtoull(optarg, &end, 0); /* decimal or the printed 0x form */
      if (errno || end == optarg || *end || optarg[0] == '-')
        return symmpin_test_usage_error(kProg, "--seed: not a number: '%s'", optarg);
      seed = v;
      break;
    }
    case 'h': usage(stdout); return 0;
    case 'V': return symmpin_test_print_version(kProg);
    default: return symmpin_test_option_error(kProg, o, argv, longopts); /* '?' or ':' */
    }
  }
  if (optind < argc) {
    long n;
    if (!symmpin_test_parse_int(argv[optind], 1, SYMMPIN_KERNEL_MAX_RANKS, &n))
      return symmpin_test_usage_error(kProg, "N must be a number in 1..%d, not '%s'",
                                      SYMMPIN_KERNEL_MAX_RANKS, argv[optind]);
    N = (int)n;
    optind++;
  }
  if (optind < argc)
    return symmpin_test_usage_error(kProg, "unexpected argument '%s'", argv[optind]);
  /* Up to 2 streams per simulated rank on one GPU: enough hardware queues that independent
   * streams never serialize behind each other (that could make spin-waiting ranks wait on
   * kernels queued behind themselves). Must be set before the CUDA context exists. */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  /* Load every kernel when the context is created. With lazy loading (the CUDA default) the
   * first launch of a kernel can wait for kernels already running on the device, and those spin
   * for a peer whose launch comes later from this same thread: `2 --small` (which reaches the
   * two-stream group with a kernel not launched before) timed out on one H200 with EAGER unset,
   * with the kernels from before issue 9 as well, and passed with it. */
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  g_rng = seed;
  if (small) g_timeout_cycles = 2000000000ull; /* ~1 s: a serializing tool fails fast, not slowly */
  CK(cudaGetDeviceCount(&g_ngpus));
  if (g_ngpus < 1) {
    fprintf(stderr, "test_oneshot: no GPU\n");
    return 2;
  }
  int used = g_ngpus < N ? g_ngpus : N;
  printf("test_oneshot: %d ranks on %d GPU(s), seed 0x%llx%s\n", N, used, (unsigned long long)seed,
         small ? ", small subset" : "");
  if (!enable_peers(used)) return 2;

  /* Slot sizes: the matrix slots hold the largest case of either form; others their own calls. */
  size_t big = 0, bigd = 0;
  size_t maxcount = small ? (1024u << 10) / N + 4 : 1048577 + (512u << 10) / N + 2;
  for (int d = 0; d < SYMMPIN_DTYPE_COUNT; d++) {
    size_t s = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, maxcount, d, N, SYMMPIN_INPUT_STAGED);
    size_t t = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, maxcount, d, N, SYMMPIN_INPUT_IN_SLOT);
    big = s > big ? s : big, bigd = t > bigd ? t : bigd;
  }
  g_slot_bytes[SLOT_STAGED] = big;
  g_slot_bytes[SLOT_IN_SLOT] = bigd;
  g_slot_bytes[SLOT_B2B] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 400000, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
  g_slot_bytes[SLOT_STREAM0] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 1000, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
  g_slot_bytes[SLOT_STREAM1] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 3000, SYMMPIN_BFLOAT16, N, SYMMPIN_INPUT_IN_SLOT);
  g_slot_bytes[SLOT_GRAPH_LL] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 3001, SYMMPIN_BFLOAT16, N, SYMMPIN_INPUT_STAGED);
  g_slot_bytes[SLOT_GRAPH_IN_SLOT] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 1025, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_IN_SLOT);
  g_slot_bytes[SLOT_GRAPH_COPY] =
      symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, (512u << 10) / N / 4 + 333, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
  g_slot_bytes[SLOT_GRAPH_TWO] =
      symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, graph_two_count(), SYMMPIN_BFLOAT16, N, SYMMPIN_INPUT_STAGED);
  g_slot_bytes[SLOT_TO_LL] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 1000, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
  g_slot_bytes[SLOT_TO_IN_SLOT] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 1000, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_IN_SLOT);
  g_slot_bytes[SLOT_TO_COPY] =
      symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, (512u << 10) / N / 4 + 100, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
  g_slot_bytes[SLOT_TO_TWO] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, two_count(), SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
  g_slot_bytes[SLOT_SKEW_TWO] = g_slot_bytes[SLOT_TO_TWO];
  g_slot_bytes[SLOT_SHAPE_LL] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, shape_ll_big(), SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
  g_slot_bytes[SLOT_SHAPE_TWO] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, shape_two_big(), SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
  g_slot_bytes[SLOT_API] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 100, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
  g_slot_bytes[SLOT_SKEW_LL] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 1000, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
  g_slot_bytes[SLOT_SKEW_COPY] =
      symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, (512u << 10) / N / 4 + 100, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
  for (int i = 0; i < SYMMPIN_KERNEL_GROUP_MAX; i++) {
    size_t c = kGroupCounts[i] ? kGroupCounts[i] : 1;
    g_slot_bytes[SLOT_GROUP + i] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, c, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
    g_slot_bytes[SLOT_GROUP16 + i] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, c, SYMMPIN_BFLOAT16, N, SYMMPIN_INPUT_STAGED);
  }
  /* The new collectives: the largest chunk the matrix takes, of any datatype; the back-to-back
   * slots hold the three collectives' calls (test_colls_back_to_back); the graph's its own. */
  {
    size_t cb = 0, ll = symmpin_oneshot_ll_max_bytes(N);
    for (int coll : {SYMMPIN_COLL_ALLGATHER, SYMMPIN_COLL_REDUCESCATTER})
      for (int d = 0; d < SYMMPIN_DTYPE_COUNT; d++) {
        size_t sz = symmpin_dtype_size(d);
        size_t c = std::max((size_t)65537, std::max(ll / sz + 1, (size_t)(2u << 20) / N / sz));
        cb = std::max(cb, symmpin_kernel_slot_bytes(coll, c, d, N, SYMMPIN_INPUT_STAGED));
      }
    g_slot_bytes[SLOT_COLL] = cb;
    size_t l4 = ll / 4;
    for (int big = 0; big < 2; big++) {
      size_t cnt[3] = {big ? l4 + 77 : 1000, big ? l4 + 5 : 777, big ? l4 + 1 : 1501}, m = 0;
      for (int coll = 0; coll < 3; coll++)
        m = std::max(m, symmpin_kernel_slot_bytes(coll, cnt[coll], SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED));
      g_slot_bytes[big ? SLOT_COLL_B2B_COPY : SLOT_COLL_B2B_LL] = m;
    }
    g_slot_bytes[SLOT_COLL_GRAPH + 0] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLGATHER, 3001, SYMMPIN_BFLOAT16, N, SYMMPIN_INPUT_STAGED);
    g_slot_bytes[SLOT_COLL_GRAPH + 1] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLGATHER, l4 + 333, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
    g_slot_bytes[SLOT_COLL_GRAPH + 2] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_REDUCESCATTER, 1001, SYMMPIN_FLOAT32, N, SYMMPIN_INPUT_STAGED);
    for (int j = 0; j < 4; j++)
      g_slot_bytes[SLOT_COLL_TO + j] = symmpin_kernel_slot_bytes(
          j < 2 ? SYMMPIN_COLL_ALLGATHER : SYMMPIN_COLL_REDUCESCATTER, colls_to_count(j), SYMMPIN_FLOAT32, N,
          SYMMPIN_INPUT_STAGED);
    g_slot_bytes[SLOT_COLL_GRAPH + 3] = symmpin_kernel_slot_bytes(SYMMPIN_COLL_REDUCESCATTER, ll / 2 + 99, SYMMPIN_BFLOAT16, N, SYMMPIN_INPUT_STAGED);
  }
  size_t pool_bytes = 0;
  for (int k = 0; k < NSLOTS; k++) {
    g_slot_off[k] = pool_bytes;
    pool_bytes += (g_slot_bytes[k] + 4095) / 4096 * 4096;
  }
  g_buf_bytes = 2 * kGuard + 16 + maxcount * 8;
  /* the new collectives' larger buffers: nranks x the largest chunk (2 MiB over all, or 65537
   * elements of 8 bytes, or the LL limit's) */
  g_buf_bytes = std::max(g_buf_bytes, 2 * kGuard + 16 + (size_t)N * std::max((size_t)65537 * 8, std::max((size_t)(2u << 20) / N, symmpin_oneshot_ll_max_bytes(N) + 8)));

  g_pool_bytes = pool_bytes;
  ranks_setup();
  if (g_reset) {
    bool ok = test_reset(used);
    printf("test_oneshot: %d passed, %d failed\n", g_passed, g_failed);
    return ok && !g_failed ? 0 : 1;
  }

  test_api();
  test_colls_api();
  test_colls(small);
  test_colls_back_to_back(false, small ? 30 : 600, SLOT_COLL_B2B_LL);
  test_colls_back_to_back(true, small ? 6 : 60, SLOT_COLL_B2B_COPY);
  test_colls_graph(small ? 3 : 50);
  test_colls_timeout();
  if (g_colls_only) {
    printf("test_oneshot: %d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
  }
  test_matrix(small);
  int K = small ? 20 : 1000;
  test_back_to_back(SYMMPIN_INPUT_STAGED, false, SYMMPIN_FLOAT32, SYMMPIN_SUM, 4097, K, SLOT_B2B);
  test_back_to_back(SYMMPIN_INPUT_STAGED, true, SYMMPIN_BFLOAT16, SYMMPIN_SUM, 777, K, SLOT_B2B);
  test_back_to_back(SYMMPIN_INPUT_STAGED, false, SYMMPIN_FLOAT32, SYMMPIN_SUM, 400000, small ? 5 : 30,
                    SLOT_B2B);
  /* two-shot (at 2+ ranks) with the shard size changing from call to call, in place and not */
  test_back_to_back(SYMMPIN_INPUT_STAGED, false, SYMMPIN_BFLOAT16, SYMMPIN_SUM, 800000,
                    small ? 6 : 60, SLOT_B2B, 400001);
  test_back_to_back(SYMMPIN_INPUT_STAGED, true, SYMMPIN_INT32, SYMMPIN_SUM, 300007,
                    small ? 6 : 60, SLOT_B2B, 399999);
  /* in-slot back-to-back needs a slot never used staged: reuse the in-slot matrix slot */
  test_back_to_back(SYMMPIN_INPUT_IN_SLOT, false, SYMMPIN_FLOAT32, SYMMPIN_SUM, 4097, K, SLOT_IN_SLOT);
  test_back_to_back(SYMMPIN_INPUT_IN_SLOT, true, SYMMPIN_INT32, SYMMPIN_SUM, 20001, small ? 20 : 300,
                    SLOT_IN_SLOT);
  test_graph(small ? 3 : 100);
  test_streams(small ? 10 : 200);
  test_groups(small ? 2 : 20);
  test_timeout();
  test_out_of_step();
  test_out_of_step_shapes();
  test_abort();

  printf("test_oneshot: %d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
