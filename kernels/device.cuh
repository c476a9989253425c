/* What every all-reduce kernel family shares, on the device: the kernel parameters, peer memory
 * accesses, the datatypes and their arithmetic, user-buffer loads and stores, the slot header's
 * epochs, the cross-rank barrier with its identity check, timeouts and abort.
 *
 * Included by kernels/allreduce.cu only (one translation unit holds every kernel, so the group
 * kernel can run any family's call), hence the anonymous namespace; the kernels' entry points
 * there are extern "C", the names the host loads them by (kernels/names.h). The families' own code is in
 * kernels/oneshot.cuh and kernels/twoshot.cuh.
 *
 * Arithmetic: integers wrap like NCCL (avg = wrapped sum / n, truncated toward zero); floating
 * types accumulate in float (double for f64) in rank order 0..n-1 and round once to the output
 * type, so every rank produces the same bits.
 *
 * Datatypes and ops: the kernel types below are matched to common/types.h's lists entry by entry:
 * this file is the one place that knows which datatypes have a kernel type, and the build fails
 * when kernels/select.h's table says otherwise. */
#ifndef SYMMPIN_KERNELS_DEVICE_CUH
#define SYMMPIN_KERNELS_DEVICE_CUH

#include "kernels/allreduce.h"
#include "kernels/oneshot_layout.h"
#include "kernels/params.h"
#include "kernels/select.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <stdio.h>

#include <type_traits>

namespace {

constexpr int kMaxRanks = SYMMPIN_KERNEL_MAX_RANKS;
constexpr int kMaxBlocks = SYMMPIN_ONESHOT_MAX_BLOCKS;
constexpr size_t kHeader = SYMMPIN_ONESHOT_HEADER_BYTES;

static_assert(SYMMPIN_ONESHOT_TIMEOUT_OFFSET + 8 <= SYMMPIN_ONESHOT_IDENT_OFFSET, "header");
static_assert(SYMMPIN_ONESHOT_TIMEOUT_OFFSET % 8 == 0, "timeout word alignment");
static_assert(SYMMPIN_ONESHOT_IDENT_OFFSET % 8 == 0, "ident alignment");
static_assert(SYMMPIN_ONESHOT_IDENT_OFFSET + 2 * 8 * kMaxRanks <= SYMMPIN_ONESHOT_HEADER_BYTES, "header");
static_assert(SYMMPIN_ONESHOT_BAR_OFFSET >= 4 * SYMMPIN_ONESHOT_MAX_BLOCKS, "epochs overlap bars");

/* One call's parameters (kernels/params.h: the layout the host fills). */
using Params = symmpin_kernel_params;

/* ---- memory access helpers. Peer memory is read and written with volatile (system-scope,
 * never L1-cached) accesses; flags use release/acquire at system scope because peers are other
 * GPUs. ---- */

__device__ __forceinline__ void st_volatile_v4(void *p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

__device__ __forceinline__ uint4 ld_volatile_v4(const void *p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

__device__ __forceinline__ void st_volatile_u64(uint64_t *p, uint64_t v) {
  asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t ld_volatile_u64(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint32_t ld_volatile_u32(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_release_sys(uint32_t *p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/* ---- datatypes: storage type S, accumulator type A, conversions ---- */

template <typename T> struct IntType {
  using S = T;
  using A = T;
  static constexpr bool kInt = true;
  __device__ static A to(S s) { return s; }
  __device__ static S from(A a) { return a; }
};
struct F32 {
  using S = float;
  using A = float;
  static constexpr bool kInt = false;
  __device__ static A to(S s) { return s; }
  __device__ static S from(A a) { return a; }
};
struct F64 {
  using S = double;
  using A = double;
  static constexpr bool kInt = false;
  __device__ static A to(S s) { return s; }
  __device__ static S from(A a) { return a; }
};
struct F16 {
  using S = uint16_t;
  using A = float;
  static constexpr bool kInt = false;
  __device__ static A to(S s) { return __half2float(__ushort_as_half(s)); }
  __device__ static S from(A a) { return __half_as_ushort(__float2half_rn(a)); }
};
struct BF16 {
  using S = uint16_t;
  using A = float;
  static constexpr bool kInt = false;
  __device__ static A to(S s) { return __bfloat162float(__ushort_as_bfloat16(s)); }
  __device__ static S from(A a) { return __bfloat16_as_ushort(__float2bfloat16_rn(a)); }
};
template <__nv_fp8_interpretation_t K> struct FP8 {
  using S = uint8_t;
  using A = float;
  static constexpr bool kInt = false;
  __device__ static A to(S s) {
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)s, K);
    return __half2float(__half(h));
  }
  /* Saturate to the largest finite value, as NCCL's fp8 arithmetic does on overflow. */
  __device__ static S from(A a) { return (S)__nv_cvt_float_to_fp8(a, __NV_SATFINITE, K); }
};

/* The kernel type of each datatype value. The primary template has none (void); a specialization
 * gives datatype NAME its kernel type. */
template <int DTYPE> struct KernelType { using type = void; };
#define SYMMPIN_KERNEL_TYPE(NAME, ...)                                                             \
  template <> struct KernelType<SYMMPIN_##NAME> { using type = __VA_ARGS__; }
SYMMPIN_KERNEL_TYPE(INT8, IntType<int8_t>);
SYMMPIN_KERNEL_TYPE(UINT8, IntType<uint8_t>);
SYMMPIN_KERNEL_TYPE(INT32, IntType<int32_t>);
SYMMPIN_KERNEL_TYPE(UINT32, IntType<uint32_t>);
SYMMPIN_KERNEL_TYPE(INT64, IntType<int64_t>);
SYMMPIN_KERNEL_TYPE(UINT64, IntType<uint64_t>);
SYMMPIN_KERNEL_TYPE(FLOAT16, F16);
SYMMPIN_KERNEL_TYPE(FLOAT32, F32);
SYMMPIN_KERNEL_TYPE(FLOAT64, F64);
SYMMPIN_KERNEL_TYPE(BFLOAT16, BF16);
SYMMPIN_KERNEL_TYPE(FP8E4M3, FP8<__NV_E4M3>);
SYMMPIN_KERNEL_TYPE(FP8E5M2, FP8<__NV_E5M2>);
#undef SYMMPIN_KERNEL_TYPE

template <int DTYPE>
constexpr bool kHasKernelType = !std::is_void_v<typename KernelType<DTYPE>::type>;

template <int DTYPE> constexpr size_t storage_bytes() {
  if constexpr (kHasKernelType<DTYPE>) return sizeof(typename KernelType<DTYPE>::type::S);
  return 0;
}

/* For every datatype of common/types.h's list: kernels/select.h's entry (what supports() answers)
 * says exactly whether this file has a kernel type, and the type's element is the list's size. */
#define SYMMPIN_X(NAME, value, str, bytes)                                                         \
  static_assert(SYMMPIN_KERNEL_DTYPE_##NAME == (kHasKernelType<value> ? 1 : 0),                    \
                "kernels/select.h: SYMMPIN_KERNEL_DTYPE_" #NAME                                    \
                " must be 1 exactly when kernels/device.cuh has a KernelType for it");                     \
  static_assert(!kHasKernelType<value> || storage_bytes<value>() == (bytes),                       \
                "kernels/device.cuh: the kernel type of " #NAME " differs in size from common/types.h");
SYMMPIN_DTYPES(SYMMPIN_X)
#undef SYMMPIN_X

/* ---- ops on the accumulator type ---- */

template <typename T> struct Unsigned { using U = T; };
template <> struct Unsigned<int8_t> { using U = uint8_t; };
template <> struct Unsigned<int32_t> { using U = uint32_t; };
template <> struct Unsigned<int64_t> { using U = uint64_t; };

/* The ops Red implements. As for datatypes, kernels/select.h's entry for every op of the list must
 * say exactly this. */
template <int OP>
constexpr bool kHasArithmetic = OP == SYMMPIN_SUM || OP == SYMMPIN_PROD || OP == SYMMPIN_MAX ||
                                OP == SYMMPIN_MIN || OP == SYMMPIN_AVG;
#define SYMMPIN_X(NAME, value, str)                                                                \
  static_assert(SYMMPIN_KERNEL_OP_##NAME == (kHasArithmetic<value> ? 1 : 0),                       \
                "kernels/select.h: SYMMPIN_KERNEL_OP_" #NAME                                       \
                " must be 1 exactly when Red implements it");
SYMMPIN_OPS(SYMMPIN_X)
#undef SYMMPIN_X

template <class D, int OP> struct Red {
  using A = typename D::A;
  static_assert(kHasArithmetic<OP>, "no arithmetic for this op");
  __device__ static A op(A a, A b) {
    if constexpr (D::kInt) {
      using U = typename Unsigned<A>::U;
      /* Wrap-around through the unsigned type: signed overflow is undefined in C++. The product
       * of two promoted 8-bit values fits in int, 32/64-bit products are computed unsigned. */
      if constexpr (OP == SYMMPIN_SUM || OP == SYMMPIN_AVG) return (A)(U)((U)a + (U)b);
      if constexpr (OP == SYMMPIN_PROD) return (A)(U)((U)a * (U)b);
      if constexpr (OP == SYMMPIN_MAX) return a > b ? a : b;
      if constexpr (OP == SYMMPIN_MIN) return a < b ? a : b;
    } else {
      if constexpr (OP == SYMMPIN_SUM || OP == SYMMPIN_AVG) return a + b;
      if constexpr (OP == SYMMPIN_PROD) return a * b;
      if constexpr (OP == SYMMPIN_MAX) return a > b ? a : (b > a ? b : (a != a ? a : b));
      if constexpr (OP == SYMMPIN_MIN) return a < b ? a : (b < a ? b : (a != a ? a : b));
    }
    return a;
  }
  /* avg: integers divide the wrapped sum, truncating toward zero (NCCL's SumPostDiv); floats
   * divide the rank-order float sum by n once. */
  __device__ static A fin(A a, int n) {
    if constexpr (OP == SYMMPIN_AVG) return (A)(a / (A)n);
    return a;
  }
};

/* The rank-order reduction of one pack of B bytes (8 or 16), fed one rank at a time, rank 0
 * first: integers wrap, floating types accumulate in A and round once. Every algorithm reduces
 * through it, so all give the same bits. A caller may hold all ranks' packs (reduce_packs) or
 * load a few ranks at a time (two-shot: fewer registers held). */
template <class D, int OP, int B = 16> struct PackAcc {
  using S = typename D::S;
  using A = typename D::A;
  static constexpr int E = B / (int)sizeof(S);
  union Pack {
    uint32_t w[B / 4];
    S e[E];
  };
  A acc[E];
  __device__ __forceinline__ void add(const uint32_t (&w)[B / 4], bool first) {
    Pack p;
#pragma unroll
    for (int i = 0; i < B / 4; i++) p.w[i] = w[i];
#pragma unroll
    for (int k = 0; k < E; k++) acc[k] = first ? D::to(p.e[k]) : Red<D, OP>::op(acc[k], D::to(p.e[k]));
  }
  __device__ __forceinline__ void add(uint4 v, bool first) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    add(w, first);
  }
  __device__ __forceinline__ void result(int n, uint32_t (&out)[B / 4]) const {
    Pack p;
#pragma unroll
    for (int k = 0; k < E; k++) p.e[k] = D::from(Red<D, OP>::fin(acc[k], n));
#pragma unroll
    for (int i = 0; i < B / 4; i++) out[i] = p.w[i];
  }
  __device__ __forceinline__ uint4 result(int n) const {
    uint32_t w[4];
    result(n, w);
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
};

/* Reduce packs of B bytes from n ranks (in[s] for rank s) in rank order into out. */
template <class D, int OP, int B>
__device__ __forceinline__ void reduce_packs(const uint32_t (&in)[kMaxRanks][B / 4], int n,
                                             uint32_t (&out)[B / 4]) {
  PackAcc<D, OP, B> acc;
#pragma unroll
  for (int s = 0; s < kMaxRanks; s++)
    if (s < n) acc.add(in[s], s == 0);
  acc.result(n, out);
}

/* ---- user buffers: any alignment, partial packs at the tail ---- */

template <int B> union Bytes {
  uint32_t w[B / 4];
  uint16_t h[B / 2];
  uint8_t c[B];
};

/* Load `valid` (<= B) bytes at p into w (rest zero), with the widest accesses p allows. */
template <int B>
__device__ __forceinline__ void load_user(const char *p, size_t valid, uint32_t (&w)[B / 4]) {
  Bytes<B> u;
  if (valid == B && ((uintptr_t)p % B) == 0) {
    if constexpr (B == 16) {
      uint4 v = *(const uint4 *)p;
      u.w[0] = v.x, u.w[1] = v.y, u.w[2] = v.z, u.w[3] = v.w;
    } else {
      uint2 v = *(const uint2 *)p;
      u.w[0] = v.x, u.w[1] = v.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < B / 4; i++) u.w[i] = 0;
    uintptr_t a = (uintptr_t)p | valid;
    if ((a & 3) == 0) {
#pragma unroll
      for (int i = 0; i < B / 4; i++)
        if (4 * (size_t)i < valid) u.w[i] = ((const uint32_t *)p)[i];
    } else if ((a & 1) == 0) {
#pragma unroll
      for (int i = 0; i < B / 2; i++)
        if (2 * (size_t)i < valid) u.h[i] = ((const uint16_t *)p)[i];
    } else {
#pragma unroll
      for (int i = 0; i < B; i++)
        if ((size_t)i < valid) u.c[i] = ((const uint8_t *)p)[i];
    }
  }
#pragma unroll
  for (int i = 0; i < B / 4; i++) w[i] = u.w[i];
}

/* Store the first `valid` (<= B) bytes of w at p. */
template <int B>
__device__ __forceinline__ void store_user(char *p, size_t valid, const uint32_t (&w)[B / 4]) {
  Bytes<B> u;
#pragma unroll
  for (int i = 0; i < B / 4; i++) u.w[i] = w[i];
  if (valid == B && ((uintptr_t)p % B) == 0) {
    if constexpr (B == 16)
      *(uint4 *)p = make_uint4(u.w[0], u.w[1], u.w[2], u.w[3]);
    else
      *(uint2 *)p = make_uint2(u.w[0], u.w[1]);
    return;
  }
  uintptr_t a = (uintptr_t)p | valid;
  if ((a & 3) == 0) {
#pragma unroll
    for (int i = 0; i < B / 4; i++)
      if (4 * (size_t)i < valid) ((uint32_t *)p)[i] = u.w[i];
  } else if ((a & 1) == 0) {
#pragma unroll
    for (int i = 0; i < B / 2; i++)
      if (2 * (size_t)i < valid) ((uint16_t *)p)[i] = u.h[i];
  } else {
#pragma unroll
    for (int i = 0; i < B; i++)
      if ((size_t)i < valid) ((uint8_t *)p)[i] = u.c[i];
  }
}

/* ---- epochs, timeouts, barrier ---- */

__device__ __forceinline__ uint32_t *epochs(const Params &P) {
  return (uint32_t *)(P.slot[P.rank] + SYMMPIN_ONESHOT_EPOCH_OFFSET);
}

/* A call's geometry as its kernel sees it: block b of nb, thread t of nt. A call's own launch
 * has the grid's; in a group launch (group_kernel) each call keeps the geometry of its own launch
 * inside the larger grid, so what a block and a thread do for it (units, epochs, barrier flags)
 * is the same whether it runs alone or in a group, on this rank and its peers alike. Threads
 * t >= nt do no work for the call but take part in its __syncthreads. */
struct Geo {
  unsigned b, nb, t, nt;
  __device__ size_t first() const { return t < nt ? (size_t)b * nt + t : ~(size_t)0; }
  __device__ size_t stride() const { return (size_t)nb * nt; }
};

__device__ __forceinline__ Geo launch_geo() { return Geo{blockIdx.x, gridDim.x, threadIdx.x, blockDim.x}; }

/* Keep every epoch entry equal: block b of B writes entries b, b+B, ... (after all its threads
 * read entry b at the start, hence the barrier). */
__device__ __forceinline__ void epochs_advance(const Params &P, uint32_t seq, const Geo &g) {
  __syncthreads();
  unsigned k = g.b + g.t * g.nb;
  if (g.t < 32 && k < (unsigned)kMaxBlocks) epochs(P)[k] = seq;
}

/* A wait gave up (mismatch: a peer's data at this epoch belongs to another call): record it in
 * the host-mapped error record and print one line per call (the first block to give up at this
 * epoch wins the exchange). No __trap: the process lives on. */
__device__ __noinline__ void report_timeout(const Params &P, int peer, uint32_t seq,
                                            bool mismatch = false) {
  /* 1 << 32 | seq: never the zeroed slot's 0, also for sequence number 0 (two-shot wraps
   * through it). */
  unsigned long long *last = (unsigned long long *)(P.slot[P.rank] + SYMMPIN_ONESHOT_TIMEOUT_OFFSET);
  const unsigned long long tag = 1ull << 32 | seq;
  if (atomicExch(last, tag) == tag) return;
  bool aborted = !mismatch && P.error && P.error->abort;
  if (P.error) {
    P.error->peer = peer;
    P.error->site = P.site;
    if (aborted) P.error->aborted = 1;
    if (mismatch) P.error->mismatch = 1;
    __threadfence_system();
    P.error->timed_out = 1;
    __threadfence_system();
  }
  if (aborted) return; /* the program is aborting the communicator: no news */
  if (mismatch) {
    printf("symmpin: all-reduce out of step: rank %d's call %u met rank %d's data of "
           "another call at epoch %u (site %016llx); gave up\n",
           P.rank, P.id, peer, seq, (unsigned long long)P.site);
    return;
  }
  /* Device printf, not common/log.h: the logger is host code and this runs on the GPU. It is the
   * only trace of a timeout when the caller passed no error record (or reads it only later); the
   * CUDA runtime copies the line to stdout at the next synchronization. The host side reports
   * through `error` with SYMMPIN_WARN (preload/engine.c). */
  printf("symmpin: all-reduce timed out: rank %d waited for rank %d (site %016llx, "
         "epoch %u)\n",
         P.rank, peer, (unsigned long long)P.site, seq);
}

/* Whether a wait that began at `start` gives up now: past the deadline (0 = none: a late peer is
 * only late), or the host asked to abort. The abort word is host memory (a PCIe read), so it is
 * read only once the wait has lasted kAbortPollCycles: waits for peers that are on time never
 * read it. */
constexpr uint64_t kAbortPollCycles = 2000000; /* ~1 ms at H200 clocks */
/* How long an LL line may look half written (one 8-byte half new, the other old) before a reader
 * takes it for what it is: ~50 us, thousands of times what a write takes to land. */
constexpr long long kTornCycles = 100000;

__device__ __forceinline__ bool expired(const Params &P, long long start) {
  uint64_t waited = (uint64_t)(clock64() - start);
  if (waited < kAbortPollCycles) return false;
  if (P.timeout != 0 && waited > P.timeout) return true;
  return P.error && P.error->abort;
}

/* Rank s's identity word for this epoch's parity, in this rank's header: (seq, another call)
 * means rank s is at this epoch with another call (out of step), whichever of its blocks wrote
 * it (a call of another shape may have fewer blocks than this one: the blocks its peer lacks
 * would otherwise wait for ever). */
__device__ __forceinline__ bool peer_out_of_step(const Params &P, int s, uint32_t seq) {
  uint64_t who = ld_volatile_u64((const uint64_t *)(P.slot[P.rank] + SYMMPIN_ONESHOT_IDENT_OFFSET) +
                                 (seq & 1) * kMaxRanks + s);
  return (uint32_t)(who >> 32) == seq && (uint32_t)who != P.id;
}

/* Whether a wait for rank s that began at `start` gives up now: expired(), or, once it has
 * lasted kAbortPollCycles, rank s is out of step (*mismatch). */
__device__ __forceinline__ bool gives_up(const Params &P, int s, uint32_t seq, long long start,
                                         bool *mismatch) {
  if ((uint64_t)(clock64() - start) < kAbortPollCycles) return false;
  if (peer_out_of_step(P, s, seq)) {
    *mismatch = true;
    return true;
  }
  return expired(P, start);
}

/* How far ahead of a barrier's sequence number a peer's flag may be: one barrier, which the
 * one-shot numbering may jump by 3 (seq_next skips 0). Anything else, also a flag far behind
 * that reads as "ahead" in signed wrap-around arithmetic (a block index unused for 2^31
 * barriers), is not there yet. */
constexpr uint32_t kFlagAheadMax = 3;

/* Block-level barrier across ranks for this block index: thread s signals rank s and waits for
 * rank s. Returns false (in every thread) if a wait timed out. */
__device__ __noinline__ bool barrier(const Params &P, uint32_t seq, int *abort_flag, const Geo &g) {
  __syncthreads(); /* this block's prior accesses happen before the release below */
  const int s = (int)g.t;
  if (s < P.nranks) {
    /* Who I am at this barrier, then the flag that releases it (the release orders both). */
    st_volatile_u64((uint64_t *)(P.slot[s] + SYMMPIN_ONESHOT_IDENT_OFFSET) + (seq & 1) * kMaxRanks + P.rank,
                    (uint64_t)seq << 32 | P.id);
    uint32_t *flags = (uint32_t *)(P.slot[s] + SYMMPIN_ONESHOT_BAR_OFFSET);
    st_release_sys(&flags[g.b * kMaxRanks + P.rank], seq);
    const uint32_t *mine = (const uint32_t *)(P.slot[P.rank] + SYMMPIN_ONESHOT_BAR_OFFSET) +
                           g.b * kMaxRanks + s;
    long long start = clock64();
    /* seq .. seq + kFlagAheadMax in wrap-around arithmetic: a peer may be one barrier ahead. */
    bool arrived = true, mismatch = false;
    while ((uint32_t)(ld_acquire_sys(mine) - seq) > kFlagAheadMax) {
      if (gives_up(P, s, seq, start, &mismatch)) {
        report_timeout(P, s, seq, mismatch);
        *abort_flag = 1;
        arrived = false;
        break;
      }
    }
    /* The peer's identity at this barrier must be this call's (ident[seq & 1] still holds it,
     * also when the peer is already one barrier ahead: see oneshot_layout.h). */
    if (arrived) {
      uint64_t who = ld_volatile_u64((const uint64_t *)(P.slot[P.rank] + SYMMPIN_ONESHOT_IDENT_OFFSET) +
                                     (seq & 1) * kMaxRanks + s);
      if ((uint32_t)(who >> 32) == seq && (uint32_t)who != P.id) {
        report_timeout(P, s, seq, true);
        *abort_flag = 1;
      }
    }
  }
  __syncthreads(); /* the other threads' peer loads come after the acquire above */
  return *abort_flag == 0;
}

/* ---- launch overlap, call epochs ---- */

/* Programmatic dependent launch (sm_90 and newer): the LL kernel is launched so that it may start
 * while the kernel before it on the stream finishes; griddepcontrol.wait then holds it until that
 * kernel has completed and its memory is visible, so no result can differ. It lets its own
 * successor launch once it no longer waits for any peer (a successor holding SM slots earlier
 * could, with several simulated ranks on one GPU, keep a peer's kernel from being scheduled).
 * Older GPUs have no griddepcontrol: there both are empty, and the host never sets the launch
 * attribute (pdl_on_current_device()), so the kernel starts only after its predecessor, as any
 * launch. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void griddep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void griddep_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
#else
__device__ __forceinline__ void griddep_wait() {}
__device__ __forceinline__ void griddep_launch_dependents() {}
#endif

/* The epoch of this call on this block: the slot's next one. Read by every thread before any
 * advances it (epochs_advance begins with a barrier). */
__device__ __forceinline__ uint32_t call_seq(const Params &P, const Geo &g) {
  return symmpin_oneshot_seq_next(ld_volatile_u32(&epochs(P)[g.b]));
}

} // namespace

#endif
