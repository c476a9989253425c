/* symmpin_kernel_launch and symmpin_kernel_launch_group (kernels/allreduce.h): the group kernel,
 * the dispatch from (datatype, op, algorithm) values to a kernel, the checks of a call, and the
 * launches. The algorithms themselves: kernels/oneshot.cuh, kernels/twoshot.cuh; what they share:
 * kernels/device.cuh. One translation unit, so the group kernel can run any family's call. */
#include "kernels/allreduce.h"
#include "kernels/device.cuh"
#include "kernels/oneshot.cuh"
#include "kernels/twoshot.cuh"
#include "kernels/select.h"

#include <cuda_runtime.h>
#include <stdint.h>

#include <atomic>

#include "common/log.h"

namespace {

/* ---- groups: several staged calls, each on its own slot, in one launch ---- */

constexpr int kGroupMax = SYMMPIN_KERNEL_GROUP_MAX;

/* The most blocks one group launch has: each call gets blocks of its own, and a group that needs
 * more is launched in parts. One call's cap (SYMMPIN_ONESHOT_MAX_BLOCKS), so that the co-residency
 * argument of docs/kernels.md "Geometry" holds for groups too: 128 failed on 2 x H200 with 8
 * simulated ranks (4 grids of up to 128 spin-waiting blocks per GPU cannot all be resident). */
constexpr int kGroupMaxBlocks = SYMMPIN_ONESHOT_MAX_BLOCKS;

struct GroupParams {
  Params call[kGroupMax];
  unsigned char algo[kGroupMax];    /* SYMMPIN_ALGO_ONESHOT_LL, _COPY or SYMMPIN_ALGO_TWOSHOT */
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
  if (G.algo[i] == SYMMPIN_ALGO_TWOSHOT) {
    const uint32_t epoch = twoshot_run<D, OP>(P, slot_epoch(P, g), &abort_flag, g);
    griddep_launch_dependents();
    epochs_advance(P, epoch, g);
    return;
  }
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
    case SYMMPIN_ALGO_TWOSHOT: return twoshot_kernel<D, OP>;
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
