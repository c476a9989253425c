/* The kernels' entry points: device code only, compiled to PTX and then to one CUDA 12 cubin per
 * architecture (kernels/images), which the host loads through the driver (kernels/launch.c). One
 * extern "C" kernel per family, datatype and op that has a kernel (kernels/names.h), each a thin
 * shell around the family's device function; the group kernel, which runs several staged calls of
 * any family in one launch, is here too. The algorithms themselves: kernels/oneshot.cuh,
 * kernels/twoshot.cuh; what they share: kernels/device.cuh. One translation unit, so the group
 * kernel can run any family's call. No host code: nothing here registers with a CUDA runtime. */
#include "kernels/device.cuh"
#include "kernels/names.h"
#include "kernels/oneshot.cuh"
#include "kernels/params.h"
#include "kernels/twoshot.cuh"

namespace {

using GroupParams = symmpin_kernel_group_params;

/* Several calls in one launch, each on blocks of its own: the blocks [first[i], first[i] +
 * blocks[i]) run call i exactly as its own launch's blocks 0 .. blocks[i]-1 would (Geo: the same
 * units, epochs, barrier flags and arithmetic, so the same bits), all calls at once. A rank may
 * therefore group differently from its peers (other streams, another split): each call's blocks
 * meet the peers' blocks of that call however either side launched it. */
template <class D, int OP> __device__ __forceinline__ void group_kernel(const GroupParams &G) {
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

} // namespace

/* The entry points of one datatype and op: __grid_constant__ keeps the parameters in parameter
 * space (the device functions take them by reference, never copying them to local memory). */
#define SYMMPIN_KT(dtype) typename KernelType<SYMMPIN_##dtype>::type
#define SYMMPIN_ENTRY_(family, dtype, op, Arg, body)                                               \
  extern "C" __global__ void __launch_bounds__(SYMMPIN_ONESHOT_MAX_THREADS, 2)                     \
      SYMMPIN_KERNEL_NAME(family, dtype, op)(const __grid_constant__ Arg P) {                      \
    body;                                                                                          \
  }
#define SYMMPIN_ENTRIES_(dtype, op, value, str)                                                    \
  SYMMPIN_KERNEL_IF(                                                                               \
      dtype, op,                                                                                   \
      SYMMPIN_ENTRY_(ll, dtype, op, Params, (ll_kernel<SYMMPIN_KT(dtype), SYMMPIN_##op>(P)))       \
      SYMMPIN_ENTRY_(copy, dtype, op, Params,                                                      \
                     (bar_kernel<SYMMPIN_KT(dtype), SYMMPIN_##op, false>(P)))                      \
      SYMMPIN_ENTRY_(in_slot, dtype, op, Params,                                                   \
                     (bar_kernel<SYMMPIN_KT(dtype), SYMMPIN_##op, true>(P)))                       \
      SYMMPIN_ENTRY_(twoshot, dtype, op, Params,                                                   \
                     (twoshot_kernel<SYMMPIN_KT(dtype), SYMMPIN_##op>(P)))                         \
      SYMMPIN_ENTRY_(group, dtype, op, GroupParams,                                                \
                     (group_kernel<SYMMPIN_KT(dtype), SYMMPIN_##op>(P))))
#define SYMMPIN_DTYPE_ENTRIES_(dtype, value, str, bytes) SYMMPIN_OPS_CTX(SYMMPIN_ENTRIES_, dtype)
SYMMPIN_DTYPES(SYMMPIN_DTYPE_ENTRIES_)
