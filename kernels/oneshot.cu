/* The one-shot all-reduce kernels on a symmetric slot, and symmpin_kernel_launch
 * (kernels/allreduce.h).
 *
 * Three algorithms (kernels/select.h, docs/kernels.md):
 *  - ONESHOT_LL (staged, small): each rank pushes its input as 16-byte LL lines {data, epoch, data,
 *    check} (check: the epoch mixed with the call's identity) into every rank's slot, then waits on its own slot for every
 *    rank's lines of this epoch and reduces them in rank order. No barrier at all.
 *  - ONESHOT_COPY (staged, large): copy-in to this rank's slot, one start barrier, load every rank's
 *    data, reduce in rank order. Two staging parities make an end barrier unnecessary.
 *  - ONESHOT_IN_SLOT: input already in the slot; start barrier, load/reduce/store, end barrier.
 * Arithmetic: integers wrap like NCCL (avg = wrapped sum / n, truncated toward zero); floating
 * types accumulate in float (double for f64) in rank order 0..n-1 and round once to the output
 * type, so every rank produces the same bits.
 *
 * Datatypes and ops: the kernel types below are matched to common/types.h's lists entry by entry
 * (see "datatypes" and "dispatch"): this file is the one place that knows which datatypes have a
 * kernel type, and it refuses to compile when kernels/select.h's table says otherwise. */
#include "kernels/allreduce.h"
#include "kernels/oneshot_layout.h"
#include "kernels/select.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include <atomic>
#include <type_traits>

#include "common/log.h"

namespace {

constexpr int kMaxRanks = SYMMPIN_KERNEL_MAX_RANKS;
constexpr int kMaxBlocks = SYMMPIN_ONESHOT_MAX_BLOCKS;
constexpr size_t kHeader = SYMMPIN_ONESHOT_HEADER_BYTES;
constexpr int kRoundUnits = 2; /* IN_SLOT in place: units per thread held in registers per round */

static_assert(SYMMPIN_ONESHOT_TIMEOUT_OFFSET + 4 <= SYMMPIN_ONESHOT_IDENT_OFFSET, "header");
static_assert(SYMMPIN_ONESHOT_IDENT_OFFSET % 8 == 0, "ident alignment");
static_assert(SYMMPIN_ONESHOT_IDENT_OFFSET + 2 * 8 * kMaxRanks <= SYMMPIN_ONESHOT_HEADER_BYTES, "header");
static_assert(SYMMPIN_ONESHOT_BAR_OFFSET >= 4 * SYMMPIN_ONESHOT_MAX_BLOCKS, "epochs overlap bars");

struct Params {
  char *slot[kMaxRanks];
  const char *send;
  char *recv;
  size_t bytes; /* input bytes per rank */
  size_t units; /* LL lines or 16-byte vectors per rank */
  int rank, nranks;
  int inplace_slot; /* IN_SLOT: recv is this rank's own data area */
  uint64_t site;
  uint64_t timeout; /* clock64 cycles, 0 = never */
  symmpin_kernel_error *error;
  uint32_t id;      /* the call's identity (symmpin_kernel_call.call_id) */
};

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
                " must be 1 exactly when oneshot.cu has a KernelType for it");                     \
  static_assert(!kHasKernelType<value> || storage_bytes<value>() == (bytes),                       \
                "oneshot.cu: the kernel type of " #NAME " differs in size from common/types.h");
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

/* Reduce packs of B bytes from n ranks (in[s] for rank s) in rank order into out. */
template <class D, int OP, int B>
__device__ __forceinline__ void reduce_packs(const uint32_t (&in)[kMaxRanks][B / 4], int n,
                                             uint32_t (&out)[B / 4]) {
  using S = typename D::S;
  using A = typename D::A;
  constexpr int E = B / (int)sizeof(S);
  union {
    uint32_t w[B / 4];
    S e[E];
  } p;
  A acc[E];
#pragma unroll
  for (int i = 0; i < B / 4; i++) p.w[i] = in[0][i];
#pragma unroll
  for (int k = 0; k < E; k++) acc[k] = D::to(p.e[k]);
#pragma unroll
  for (int s = 1; s < kMaxRanks; s++) {
    if (s < n) {
#pragma unroll
      for (int i = 0; i < B / 4; i++) p.w[i] = in[s][i];
#pragma unroll
      for (int k = 0; k < E; k++) acc[k] = Red<D, OP>::op(acc[k], D::to(p.e[k]));
    }
  }
#pragma unroll
  for (int k = 0; k < E; k++) p.e[k] = D::from(Red<D, OP>::fin(acc[k], n));
#pragma unroll
  for (int i = 0; i < B / 4; i++) out[i] = p.w[i];
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
  uint32_t *last = (uint32_t *)(P.slot[P.rank] + SYMMPIN_ONESHOT_TIMEOUT_OFFSET);
  if (atomicExch(last, seq) == seq) return;
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
    printf("symmpin: one-shot all-reduce out of step: rank %d's call %u met rank %d's data of "
           "another call at epoch %u (site %016llx); gave up\n",
           P.rank, P.id, peer, seq, (unsigned long long)P.site);
    return;
  }
  /* Device printf, not common/log.h: the logger is host code and this runs on the GPU. It is the
   * only trace of a timeout when the caller passed no error record (or reads it only later); the
   * CUDA runtime copies the line to stdout at the next synchronization. The host side reports
   * through `error` with SYMMPIN_WARN (preload/engine.c). */
  printf("symmpin: one-shot all-reduce timed out: rank %d waited for rank %d (site %016llx, "
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
    /* >= in wrap-around arithmetic: a peer may already be one barrier ahead. */
    bool arrived = true;
    while ((int32_t)(ld_acquire_sys(mine) - seq) < 0) {
      if (expired(P, start)) {
        report_timeout(P, s, seq);
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

/* ---- LL algorithm ---- */

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

/* LL, push: my lines into every rank's slot (mine included), region of source rank P.rank. */
__device__ __forceinline__ void ll_push(const Params &P, uint32_t seq, const Geo &g) {
  const int n = P.nranks;
  const uint32_t check = symmpin_oneshot_ll_check(seq, P.id);
  const size_t L = P.units;
  const size_t first = g.first();
  const size_t stride = g.stride();
  const unsigned parity = seq & 1;
  for (size_t l = first; l < L; l += stride) {
    size_t off = l * SYMMPIN_ONESHOT_LL_DATA_BYTES;
    size_t valid = P.bytes - off < 8 ? P.bytes - off : 8;
    uint32_t w[2];
    load_user<8>(P.send + off, valid, w);
    uint4 line = make_uint4(w[0], seq, w[1], check);
    size_t u = symmpin_oneshot_unit_index((size_t)P.rank * L + l, parity);
#pragma unroll
    for (int s = 0; s < kMaxRanks; s++)
      if (s < n) st_volatile_v4(P.slot[s] + kHeader + u * SYMMPIN_ONESHOT_UNIT_BYTES, line);
  }
}

/* LL, then: wait for every rank's line of this epoch and reduce in rank order. The same thread
 * pushed these input bytes (ll_push, same grid), so in place (recv == send) is safe. */
template <class D, int OP>
__device__ __forceinline__ void ll_reduce(const Params &P, uint32_t seq, const Geo &g,
                                          int *abort_flag) {
  const int n = P.nranks;
  const size_t L = P.units;
  const size_t first = g.first();
  const size_t stride = g.stride();
  const unsigned parity = seq & 1;
  const uint32_t check = symmpin_oneshot_ll_check(seq, P.id);
  const char *own = P.slot[P.rank] + kHeader;
  for (size_t l = first; l < L; l += stride) {
    uint32_t in[kMaxRanks][2];
    unsigned pending = (1u << n) - 1;
    long long start = clock64();
    long long odd_since = 0; /* a line of this epoch with another call's check seen since */
    int odd_rank = -1;
    bool gave_up = false;
    while (pending) {
      bool odd = false;
#pragma unroll
      for (int s = 0; s < kMaxRanks; s++) {
        if (pending & (1u << s)) {
          size_t u = symmpin_oneshot_unit_index((size_t)s * L + l, parity);
          uint4 v = ld_volatile_v4(own + u * SYMMPIN_ONESHOT_UNIT_BYTES);
          if (v.y == seq && v.w == check) {
            in[s][0] = v.x, in[s][1] = v.z;
            pending &= ~(1u << s);
          } else if (v.y == seq) {
            odd = true;
            odd_rank = s;
          }
        }
      }
      if (!pending) break;
      /* The epoch right and the call wrong, for longer than a line takes to land whole: the
       * peer's data at this epoch is another call's (the ranks are out of step). */
      long long now = clock64();
      if (!odd) {
        odd_since = 0;
      } else if (!odd_since) {
        odd_since = now;
      } else if (now - odd_since > kTornCycles) {
        report_timeout(P, odd_rank, seq, true);
        gave_up = true;
        break;
      }
      if (expired(P, start)) {
        report_timeout(P, __ffs(pending) - 1, seq);
        gave_up = true;
        break;
      }
    }
    if (gave_up) {
      *abort_flag = 1; /* a group's later calls of this block need not wait too */
      break;
    }
    uint32_t out[2];
    reduce_packs<D, OP, 8>(in, n, out);
    size_t off = l * SYMMPIN_ONESHOT_LL_DATA_BYTES;
    store_user<8>(P.recv + off, P.bytes - off < 8 ? P.bytes - off : 8, out);
  }
}

template <class D, int OP>
__global__ void __launch_bounds__(SYMMPIN_ONESHOT_MAX_THREADS, 2) ll_kernel(const Params P) {
  __shared__ int abort_flag; /* written when a wait gives up; read only by group_kernel */
  if (threadIdx.x == 0) abort_flag = 0;
  griddep_wait();
  const Geo g = launch_geo();
  const uint32_t seq = call_seq(P, g);
  ll_push(P, seq, g);
  ll_reduce<D, OP>(P, seq, g, &abort_flag);
  griddep_launch_dependents();
  epochs_advance(P, seq, g);
}

/* ---- COPY and IN_SLOT algorithms ---- */

template <class D, int OP>
__device__ __forceinline__ void reduce_unit(const Params &P, size_t data_off, uint32_t (&out)[4]) {
  uint32_t in[kMaxRanks][4];
#pragma unroll
  for (int s = 0; s < kMaxRanks; s++) {
    if (s < P.nranks) {
      uint4 v = ld_volatile_v4(P.slot[s] + kHeader + data_off);
      in[s][0] = v.x, in[s][1] = v.y, in[s][2] = v.z, in[s][3] = v.w;
    }
  }
  reduce_packs<D, OP, 16>(in, P.nranks, out);
}

/* COPY, copy-in into this parity's staging units. Each block copies exactly the units it (and the
 * same block on every peer) reduces later, so only a per-block barrier is needed. */
__device__ __forceinline__ void copy_in(const Params &P, uint32_t seq, const Geo &g) {
  const size_t V = P.units;
  const size_t first = g.first();
  const size_t stride = g.stride();
  const unsigned parity = seq & 1;
  constexpr size_t U = SYMMPIN_ONESHOT_UNIT_BYTES;
  for (size_t v = first; v < V; v += stride) {
    size_t off = v * U;
    uint32_t w[4];
    load_user<16>(P.send + off, P.bytes - off < U ? P.bytes - off : U, w);
    *(uint4 *)(P.slot[P.rank] + kHeader + symmpin_oneshot_unit_index(v, parity) * U) =
        make_uint4(w[0], w[1], w[2], w[3]);
  }
}

/* COPY, then: the start barrier and the reduction. No end barrier: the next call stages into the
 * other parity, and the call after that runs only after its own start barrier proved every peer
 * finished this call (docs/kernels.md). */
template <class D, int OP>
__device__ __forceinline__ void copy_reduce(const Params &P, uint32_t seq, int *abort_flag,
                                            const Geo &g) {
  const size_t V = P.units;
  const size_t first = g.first();
  const size_t stride = g.stride();
  const unsigned parity = seq & 1;
  constexpr size_t U = SYMMPIN_ONESHOT_UNIT_BYTES;
  if (!barrier(P, seq, abort_flag, g)) return;
  for (size_t v = first; v < V; v += stride) {
    uint32_t out[4];
    reduce_unit<D, OP>(P, symmpin_oneshot_unit_index(v, parity) * U, out);
    size_t off = v * U;
    store_user<16>(P.recv + off, P.bytes - off < U ? P.bytes - off : U, out);
  }
}

template <class D, int OP, bool kInSlot>
__global__ void __launch_bounds__(SYMMPIN_ONESHOT_MAX_THREADS, 2) bar_kernel(const Params P) {
  __shared__ int abort_flag;
  if (threadIdx.x == 0) abort_flag = 0;
  const Geo g = launch_geo();
  const size_t V = P.units;
  const size_t first = g.first();
  const size_t stride = g.stride();
  uint32_t seq = call_seq(P, g);
  constexpr size_t U = SYMMPIN_ONESHOT_UNIT_BYTES;

  if constexpr (!kInSlot) {
    copy_in(P, seq, g);
    copy_reduce<D, OP>(P, seq, &abort_flag, g);
  } else if (!P.inplace_slot) {
    bool ok = barrier(P, seq, &abort_flag, g);
    if (ok) {
      for (size_t v = first; v < V; v += stride) {
        uint32_t out[4];
        reduce_unit<D, OP>(P, v * U, out);
        store_user<16>(P.recv + v * U, P.bytes - v * U < U ? P.bytes - v * U : U, out);
      }
      /* End barrier: peers may still read my data area; the caller may overwrite it next. */
      seq = symmpin_oneshot_seq_next(seq);
      barrier(P, seq, &abort_flag, g);
    }
  } else {
    /* In place in the slot: results may replace my data only after every peer has read it, so
     * reduce a round into registers, barrier, then store. Every block runs the same number of
     * rounds so that all epoch entries advance alike. */
    bool ok = barrier(P, seq, &abort_flag, g);
    const size_t per_round = stride * kRoundUnits;
    const size_t rounds = (V + per_round - 1) / per_round;
    for (size_t r = 0; ok && r < rounds; r++) {
      uint32_t out[kRoundUnits][4];
#pragma unroll
      for (int k = 0; k < kRoundUnits; k++) {
        size_t v = r * per_round + (size_t)k * stride + first;
        if (v < V) reduce_unit<D, OP>(P, v * U, out[k]);
      }
      seq = symmpin_oneshot_seq_next(seq);
      ok = barrier(P, seq, &abort_flag, g);
      if (!ok) break;
#pragma unroll
      for (int k = 0; k < kRoundUnits; k++) {
        size_t v = r * per_round + (size_t)k * stride + first;
        if (v < V) store_user<16>(P.recv + v * U, P.bytes - v * U < U ? P.bytes - v * U : U, out[k]);
      }
    }
  }
  epochs_advance(P, seq, g);
}

/* ---- groups: several staged calls, each on its own slot, in one launch ---- */

constexpr int kGroupMax = SYMMPIN_KERNEL_GROUP_MAX;

/* The most blocks one group launch has: each call gets blocks of its own, and a group that needs
 * more is launched in parts. One call's cap (SYMMPIN_ONESHOT_MAX_BLOCKS), so that the co-residency
 * argument of docs/kernels.md "Geometry" holds for groups too: 128 failed on 2 x H200 with 8
 * simulated ranks (4 grids of up to 128 spin-waiting blocks per GPU cannot all be resident). */
constexpr int kGroupMaxBlocks = SYMMPIN_ONESHOT_MAX_BLOCKS;

struct GroupParams {
  Params call[kGroupMax];
  unsigned char algo[kGroupMax];    /* SYMMPIN_ALGO_ONESHOT_LL or _COPY */
  unsigned short first[kGroupMax];  /* the call's first block in the grid */
  unsigned short blocks[kGroupMax]; /* each call's own launch geometry */
  unsigned short threads[kGroupMax];
  int n;
};
static_assert(sizeof(GroupParams) <= 4096, "kernel parameters are limited to 4 KiB");

/* Several calls in one launch, each on blocks of its own: the blocks [first[i], first[i] +
 * blocks[i]) run call i exactly as its own launch's blocks 0 .. blocks[i]-1 would (Geo: the same
 * units, epochs, barrier flags and arithmetic, so the same bits), all calls at once. A rank may
 * therefore group differently from its peers (other streams, another split): each call's blocks
 * meet the peers' blocks of that call however either side launched it. */
template <class D, int OP>
__global__ void __launch_bounds__(SYMMPIN_ONESHOT_MAX_THREADS, 2)
    group_kernel(const __grid_constant__ GroupParams G) {
  __shared__ int abort_flag;
  if (threadIdx.x == 0) abort_flag = 0;
  griddep_wait();
  int i = 0;
  while (i + 1 < G.n && blockIdx.x >= G.first[i + 1]) i++;
  const Params &P = G.call[i];
  const Geo g{blockIdx.x - G.first[i], G.blocks[i], threadIdx.x, G.threads[i]};
  const uint32_t seq = call_seq(P, g);
  if (G.algo[i] == SYMMPIN_ALGO_ONESHOT_LL) {
    ll_push(P, seq, g);
    ll_reduce<D, OP>(P, seq, g, &abort_flag);
  } else {
    copy_in(P, seq, g);
    copy_reduce<D, OP>(P, seq, &abort_flag, g);
  }
  griddep_launch_dependents();
  epochs_advance(P, seq, g);
}

/* ---- dispatch: from (datatype, op, algorithm) values to a kernel ---- */

using KernelFn = void (*)(Params);
using GroupFn = void (*)(GroupParams);

/* What the dispatch below picks, for a kernel type D and an op: one call's kernel by algorithm,
 * or the group kernel. */
struct CallKernel {
  using Fn = KernelFn;
  template <class D, int OP> static Fn get(int algo) {
    switch (algo) {
    case SYMMPIN_ALGO_ONESHOT_LL: return ll_kernel<D, OP>;
    case SYMMPIN_ALGO_ONESHOT_COPY: return bar_kernel<D, OP, false>;
    case SYMMPIN_ALGO_ONESHOT_IN_SLOT: return bar_kernel<D, OP, true>;
    }
    return nullptr;
  }
};
struct GroupKernel {
  using Fn = GroupFn;
  template <class D, int OP> static Fn get(int) { return group_kernel<D, OP>; }
};

/* Expanded from common/types.h's op list: an op without arithmetic here has no case that could
 * instantiate Red for it. */
template <class K, class D> typename K::Fn pick_op(int op, int algo) {
  switch (op) {
#define SYMMPIN_X(NAME, value, str)                                                                \
  case value:                                                                                      \
    if constexpr (kHasArithmetic<value>) return K::template get<D, value>(algo);                   \
    return nullptr;
    SYMMPIN_OPS(SYMMPIN_X)
#undef SYMMPIN_X
  }
  return nullptr;
}

template <class K, int DTYPE> typename K::Fn pick_dtype(int op, int algo) {
  if constexpr (kHasKernelType<DTYPE>)
    return pick_op<K, typename KernelType<DTYPE>::type>(op, algo);
  return nullptr;
}

/* Expanded from common/types.h's datatype list, like supports()'s table (kernels/select.h). */
template <class K> typename K::Fn pick(int dtype, int op, int algo) {
  switch (dtype) {
#define SYMMPIN_X(NAME, value, str, bytes)                                                         \
  case value: return pick_dtype<K, value>(op, algo);
    SYMMPIN_DTYPES(SYMMPIN_X)
#undef SYMMPIN_X
  }
  return nullptr;
}

KernelFn pick_kernel(int dtype, int op, int algo) { return pick<CallKernel>(dtype, op, algo); }
GroupFn pick_group(int dtype, int op) { return pick<GroupKernel>(dtype, op, 0); }

bool overlaps(const void *a, size_t an, const void *b, size_t bn) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y + bn && y < x + an;
}

/* The kernels' code on the current device, as the runtime sees it. */
struct DeviceCode {
  int dev = -1;
  int cc = 0; /* compute capability x10, 0 unknown */
  cudaError_t err = cudaErrorUnknown; /* cudaSuccess: the runtime has code for this GPU */
  int arch = 0; /* the virtual architecture (x10) that code was compiled from */
};

DeviceCode device_code() {
  DeviceCode d;
  bool failed = false;
  int major = 0, minor = 0;
  if (cudaGetDevice(&d.dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d.dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d.dev) == cudaSuccess)
    d.cc = major * 10 + minor;
  else
    failed = true;
  /* The one kernel every call shape can use: the runtime finds code for it exactly when this
   * module holds code for the GPU (all kernels are compiled for the same architectures). */
  cudaFuncAttributes attr;
  d.err = cudaFuncGetAttributes(&attr, pick_kernel(SYMMPIN_FLOAT32, SYMMPIN_SUM,
                                                   SYMMPIN_ALGO_ONESHOT_LL));
  if (d.err == cudaSuccess) /* SASS is built from PTX of its own architecture (meson.build) */
    d.arch = attr.ptxVersion > 0 ? attr.ptxVersion : attr.binaryVersion;
  else
    failed = true;
  if (failed) (void)cudaGetLastError(); /* not the program's error */
  return d;
}

/* Per device: is the LL kernel launched with programmatic dependent launch (0 not known yet,
 * 1 no, 2 yes). Decided once per device, by the device check or at the first LL launch. */
constexpr int kPdlDevices = 64;
std::atomic<signed char> pdl_state[kPdlDevices];

signed char pdl_remember(const DeviceCode &d) {
  signed char s = symmpin_kernel_pdl_usable(d.cc, d.arch) ? 2 : 1;
  if (d.dev >= 0 && d.dev < kPdlDevices) pdl_state[d.dev].store(s, std::memory_order_relaxed);
  return s;
}

bool pdl_on_current_device() {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kPdlDevices) return false;
  signed char s = pdl_state[dev].load(std::memory_order_relaxed);
  if (s == 0) s = pdl_remember(device_code());
  return s == 2;
}

} // namespace

/* Every refusal below is logged here, once, where it starts (the caller only falls back). */
extern "C" symmpin_status symmpin_kernel_device_check(char *why, size_t why_len) {
  DeviceCode d = device_code();
  pdl_remember(d);
  bool has_code = d.err == cudaSuccess;
  return symmpin_kernel_arch_check(d.dev, d.cc, has_code,
                                   has_code ? NULL : cudaGetErrorString(d.err), why, why_len);
}

namespace {

/* Check one call and fill its kernel parameters, algorithm and geometry. Every refusal is logged
 * here, once, where it starts (the caller only falls back). SYMMPIN_OK with g->blocks == 0: count
 * 0, nothing to launch. */
symmpin_status prepare(const symmpin_kernel_call *c, Params *P, symmpin_kernel_algo *algo,
                       symmpin_kernel_geometry *g) {
  if (!c || c->nranks < 1 || c->nranks > SYMMPIN_KERNEL_MAX_RANKS || c->rank < 0 ||
      c->rank >= c->nranks ||
      (c->input != SYMMPIN_INPUT_STAGED && c->input != SYMMPIN_INPUT_IN_SLOT)) {
    if (c)
      SYMMPIN_WARN("all-reduce kernel: bad call (rank %d of %d, input form %d)", c->rank,
                   c->nranks, (int)c->input);
    else
      SYMMPIN_WARN("all-reduce kernel: bad call (NULL)");
    return SYMMPIN_ERR_INVALID;
  }
  if (!symmpin_kernel_supports(c->dtype, c->op)) {
    SYMMPIN_WARN("all-reduce kernel: datatype %d / op %d not supported", c->dtype, c->op);
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  *g = symmpin_kernel_geometry{0, 0};
  if (c->count == 0) return SYMMPIN_OK; /* nothing to reduce; every rank skips alike */
  size_t need = symmpin_kernel_slot_bytes(c->count, c->dtype, c->nranks, c->input);
  if (need == 0) {
    SYMMPIN_WARN("all-reduce kernel: count %zu too large", c->count);
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  if (c->slot_bytes < need) {
    SYMMPIN_WARN("all-reduce kernel: slot of %zu bytes, call needs %zu", c->slot_bytes, need);
    return SYMMPIN_ERR_INVALID;
  }
  for (int r = 0; r < c->nranks; r++) {
    if (!c->slot[r] || ((uintptr_t)c->slot[r] % SYMMPIN_ONESHOT_UNIT_BYTES) != 0) {
      SYMMPIN_WARN("all-reduce kernel: slot of rank %d is NULL or not 16-byte aligned", r);
      return SYMMPIN_ERR_INVALID;
    }
  }
  size_t bytes = c->count * symmpin_dtype_size(c->dtype);
  if (!c->recv || (c->input == SYMMPIN_INPUT_STAGED && !c->send)) {
    SYMMPIN_WARN("all-reduce kernel: NULL buffer");
    return SYMMPIN_ERR_INVALID;
  }
  const char *own = (const char *)c->slot[c->rank];
  char *data = (char *)c->slot[c->rank] + symmpin_kernel_in_slot_offset();
  int inplace_slot = 0;
  if (c->input == SYMMPIN_INPUT_STAGED) {
    /* Threads read their input bytes before writing the same output bytes: identical buffers are
     * fine, shifted overlaps or buffers inside the slot's staging are not. */
    if ((c->send != c->recv && overlaps(c->send, bytes, c->recv, bytes)) ||
        overlaps(c->send, bytes, own, c->slot_bytes) ||
        overlaps(c->recv, bytes, own, c->slot_bytes)) {
      SYMMPIN_WARN("all-reduce kernel: staged buffers overlap each other or the slot");
      return SYMMPIN_ERR_UNSUPPORTED;
    }
  } else if (overlaps(c->recv, bytes, own, c->slot_bytes)) {
    if (c->recv != data) {
      SYMMPIN_WARN("all-reduce kernel: in-slot recv overlaps the slot but is not its data area");
      return SYMMPIN_ERR_UNSUPPORTED;
    }
    inplace_slot = 1;
  }

  *algo = symmpin_kernel_algo_for(c->count, c->dtype, c->nranks, c->input);
  *g = symmpin_kernel_geometry_for(c->count, c->dtype, c->nranks, c->input);
  if (!pick_kernel(c->dtype, c->op, *algo) || g->blocks == 0) {
    SYMMPIN_WARN("all-reduce kernel: no kernel for dtype %d op %d (algorithm %d)", c->dtype, c->op,
                 (int)*algo);
    return SYMMPIN_ERR_INTERNAL;
  }
  for (int r = 0; r < SYMMPIN_KERNEL_MAX_RANKS; r++)
    P->slot[r] = r < c->nranks ? (char *)c->slot[r] : nullptr;
  P->send = (const char *)c->send;
  P->recv = (char *)c->recv;
  P->bytes = bytes;
  P->units = symmpin_oneshot_units(c->count, c->dtype, *algo);
  P->rank = c->rank;
  P->nranks = c->nranks;
  P->inplace_slot = inplace_slot;
  P->site = c->site;
  P->timeout = c->timeout_cycles;
  P->error = c->error;
  P->id = c->call_id;
  return SYMMPIN_OK;
}

/* Launch fn(args) on the call's stream; with programmatic dependent launch when asked and the GPU
 * has it (see griddep_wait()). */
template <typename Fn, typename Arg>
symmpin_status launch_on(Fn fn, const Arg &args, symmpin_kernel_geometry g, void *stream, bool pdl_wanted) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(g.blocks);
  cfg.blockDim = dim3(g.threads);
  cfg.stream = (cudaStream_t)stream;
  cudaLaunchAttribute pdl[1];
  pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl[0].val.programmaticStreamSerializationAllowed = 1;
  if (pdl_wanted && pdl_on_current_device()) {
    cfg.attrs = pdl;
    cfg.numAttrs = 1;
  }
  cudaError_t e = cudaLaunchKernelEx(&cfg, fn, args);
  if (e != cudaSuccess) {
    SYMMPIN_WARN("all-reduce kernel: launch failed: %s", cudaGetErrorString(e));
    return SYMMPIN_ERR_CUDA;
  }
  return SYMMPIN_OK;
}

} // namespace

extern "C" symmpin_status symmpin_kernel_launch(const symmpin_kernel_call *c, void *stream) {
  Params P;
  symmpin_kernel_algo algo = SYMMPIN_ALGO_ONESHOT_LL;
  symmpin_kernel_geometry g;
  symmpin_status st = prepare(c, &P, &algo, &g);
  if (st != SYMMPIN_OK || g.blocks == 0) return st;
  /* The latency-bound algorithm takes programmatic dependent launch: see griddep_wait(). */
  return launch_on(pick_kernel(c->dtype, c->op, algo), P, g, stream,
                   algo == SYMMPIN_ALGO_ONESHOT_LL);
}

extern "C" symmpin_status symmpin_kernel_launch_group(const symmpin_kernel_call *calls, int n,
                                                      void *stream) {
  if (!calls || n < 1 || n > SYMMPIN_KERNEL_GROUP_MAX) {
    SYMMPIN_WARN("all-reduce kernel: bad group of %d calls", n);
    return SYMMPIN_ERR_INVALID;
  }
  GroupParams G;
  G.n = 0;
  symmpin_kernel_geometry grid = {0, 0};
  /* Check every call before launching any part. */
  for (int i = 0; i < n; i++) {
    const symmpin_kernel_call *c = &calls[i];
    if (c->dtype != calls[0].dtype || c->op != calls[0].op || c->input != SYMMPIN_INPUT_STAGED) {
      SYMMPIN_WARN("all-reduce kernel: a group mixes datatypes, ops or input forms");
      return SYMMPIN_ERR_INVALID;
    }
    for (int j = 0; j < i; j++)
      if (overlaps(c->slot[c->rank], c->slot_bytes, calls[j].slot[calls[j].rank],
                   calls[j].slot_bytes)) {
        SYMMPIN_WARN("all-reduce kernel: calls %d and %d of a group share slot bytes", j, i);
        return SYMMPIN_ERR_INVALID;
      }
    Params P;
    symmpin_kernel_algo algo = SYMMPIN_ALGO_ONESHOT_LL;
    symmpin_kernel_geometry g;
    symmpin_status st = prepare(c, &P, &algo, &g);
    if (st != SYMMPIN_OK) return st;
  }
  /* Then the launches: calls in order, each on blocks of its own, a new launch whenever the next
   * call's blocks would pass kGroupMaxBlocks. */
  GroupFn fn = pick_group(calls[0].dtype, calls[0].op);
  for (int i = 0; i < n; i++) {
    symmpin_kernel_algo algo = SYMMPIN_ALGO_ONESHOT_LL;
    symmpin_kernel_geometry g;
    (void)prepare(&calls[i], &G.call[G.n], &algo, &g); /* checked above */
    if (g.blocks == 0) continue; /* count 0 */
    if (G.n > 0 && grid.blocks + g.blocks > (unsigned)kGroupMaxBlocks) {
      symmpin_status st = launch_on(fn, G, grid, stream, true);
      if (st != SYMMPIN_OK) return st;
      G.call[0] = G.call[G.n];
      G.n = 0;
      grid = symmpin_kernel_geometry{0, 0};
    }
    G.algo[G.n] = (unsigned char)algo;
    G.first[G.n] = (unsigned short)grid.blocks;
    G.blocks[G.n] = (unsigned short)g.blocks;
    G.threads[G.n] = (unsigned short)g.threads;
    G.n++;
    grid.blocks += g.blocks;
    if (g.threads > grid.threads) grid.threads = g.threads;
  }
  if (G.n == 0) return SYMMPIN_OK;
  return launch_on(fn, G, grid, stream, true);
}
