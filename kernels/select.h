/* The kernels' host-side choices: private to kernels/ (and its tests).
 *
 * Plain C so that select.c (C compiler, usable by CPU-only tools), kernels/device.cuh and the CPU tests
 * share one definition of: which datatypes and ops have kernels, which algorithm a call shape
 * runs, and its launch geometry. Callers outside kernels/ use only kernels/allreduce.h.
 *
 * Which datatypes and ops have kernels. One entry per entry of common/types.h's SYMMPIN_DTYPES and
 * SYMMPIN_OPS: SYMMPIN_KERNEL_DTYPE_<NAME> / SYMMPIN_KERNEL_OP_<NAME> is 1 when kernels/device.cuh has a
 * kernel type (storage, accumulator, conversions) / arithmetic for it, 0 when calls of it must go
 * to NCCL. Both ends are checked at compile time:
 *   - select.c builds symmpin_kernel_supports()'s table by expanding the lists with
 *     SYMMPIN_KERNEL_DTYPE_ENTRY / SYMMPIN_KERNEL_OP_ENTRY, so a datatype or op added to a list
 *     without an entry here does not compile (an undeclared identifier): adding one forces the
 *     decision "kernel or NCCL";
 *   - device.cuh expands the same lists and static_asserts that every entry equals whether it has
 *     a kernel type for it (and that the type's size is the list's), and dispatches only to those.
 * So supports() can never say yes to a datatype without kernels, and no kernel type hides behind a
 * 0. The kernels_lists_* tests (tests/kernels/meson.build) keep both checks working. */
#ifndef SYMMPIN_KERNELS_SELECT_H
#define SYMMPIN_KERNELS_SELECT_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/allreduce.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SYMMPIN_KERNEL_DTYPE_INT8 1
#define SYMMPIN_KERNEL_DTYPE_UINT8 1
#define SYMMPIN_KERNEL_DTYPE_INT32 1
#define SYMMPIN_KERNEL_DTYPE_UINT32 1
#define SYMMPIN_KERNEL_DTYPE_INT64 1
#define SYMMPIN_KERNEL_DTYPE_UINT64 1
#define SYMMPIN_KERNEL_DTYPE_FLOAT16 1
#define SYMMPIN_KERNEL_DTYPE_FLOAT32 1
#define SYMMPIN_KERNEL_DTYPE_FLOAT64 1
#define SYMMPIN_KERNEL_DTYPE_BFLOAT16 1
#define SYMMPIN_KERNEL_DTYPE_FP8E4M3 1
#define SYMMPIN_KERNEL_DTYPE_FP8E5M2 1

#define SYMMPIN_KERNEL_OP_SUM 1
#define SYMMPIN_KERNEL_OP_PROD 1
#define SYMMPIN_KERNEL_OP_MAX 1
#define SYMMPIN_KERNEL_OP_MIN 1
#define SYMMPIN_KERNEL_OP_AVG 1

/* X-macro bodies for SYMMPIN_DTYPES / SYMMPIN_OPS: designated initializers of a table indexed by
 * the value, {[value] = entry}. */
#define SYMMPIN_KERNEL_DTYPE_ENTRY(name, value, str, bytes) [value] = SYMMPIN_KERNEL_DTYPE_##name,
#define SYMMPIN_KERNEL_OP_ENTRY(name, value, str) [value] = SYMMPIN_KERNEL_OP_##name,

/* The algorithms, by family. Each uses a slot under its own protocol (so has its own slot class).
 *   ONESHOT_LL:      staged, small: push LL lines (data + flag) into every rank's slot, no barrier.
 *   ONESHOT_COPY:    staged, mid: copy-in to the own slot, start barrier, load every rank's data.
 *   ONESHOT_IN_SLOT: input already in the slot: start barrier, load, reduce, end barrier.
 *   TWOSHOT:         staged, large: push each shard to its owner, barrier, owners reduce and push
 *                    their result to every rank, barrier, copy out (reduce-scatter + all-gather). */
typedef enum symmpin_kernel_algo {
  SYMMPIN_ALGO_ONESHOT_LL = 0,
  SYMMPIN_ALGO_ONESHOT_COPY = 1,
  SYMMPIN_ALGO_ONESHOT_IN_SLOT = 2,
  SYMMPIN_ALGO_TWOSHOT = 3,
  SYMMPIN_ALGO_COUNT = 4,
} symmpin_kernel_algo;

/* Which algorithm a call shape runs; the same answer on every rank. Any input other than
 * SYMMPIN_INPUT_IN_SLOT counts as staged; unknown datatypes count as 0 bytes. All-gather and
 * reduce-scatter: LL up to the LL limit of their chunk, copy above (one-shot moves each of their
 * bytes once already: no two-shot). */
symmpin_kernel_algo symmpin_kernel_algo_for(int coll, size_t count, int dtype, int nranks,
                                            symmpin_kernel_input input);

/* Launch geometry of a call shape; {0, 0} for count 0 and for shapes slot_bytes refuses. */
typedef struct symmpin_kernel_geometry {
  unsigned blocks, threads;
} symmpin_kernel_geometry;
symmpin_kernel_geometry symmpin_kernel_geometry_for(int coll, size_t count, int dtype, int nranks,
                                                    symmpin_kernel_input input);

/* Which GPUs the kernels run on: the policy behind symmpin_kernel_device_check (allreduce.h), in
 * plain C so that the CPU tests check it. The kernels need compute capability 8.0 (Ampere) or
 * newer; the build carries native code for meson's gpu_archs and PTX of gpu_ptx for newer GPUs
 * (docs/compatibility.md). Compute capabilities are written x10: 90 = 9.0 = sm_90. */
#define SYMMPIN_KERNEL_MIN_CC 80
/* The code this build carries, as meson's options named it: "sm_80 sm_90 sm_100 sm_120 compute_90"
 * ("unknown" where select.c was compiled outside the build). */
const char *symmpin_kernel_archs(void);
/* The verdict on the GPU `device` of compute capability `cc` (0 unknown): `has_code` is whether
 * the CUDA runtime found code of the kernels for it; if not, `cuda_error` says why (may be NULL).
 * SYMMPIN_OK, or SYMMPIN_ERR_UNSUPPORTED with a sentence naming the GPU and the carried code in
 * `why` (may be NULL). Logs nothing. */
symmpin_status symmpin_kernel_arch_check(int device, int cc, bool has_code, const char *cuda_error,
                                         char *why, size_t why_len);
/* Whether the LL kernel may be launched with programmatic dependent launch: the GPU has it
 * (sm_90 or newer) and the code running there was compiled with its griddepcontrol instructions,
 * i.e. from PTX of compute_90 or newer: `code_arch` is that virtual architecture
 * (cudaFuncAttributes.ptxVersion). sm_80 code, also where a newer GPU JIT-compiles compute_80
 * PTX, has none, and a launch attribute without them could let the kernel overtake its
 * predecessor's writes. And the driver (`driver_version`, cuDriverGetVersion's 12030 for CUDA 12.3;
 * -1 unknown) is CUDA 12.3 or newer: the kernels are launched with the attribute also while the
 * program captures a graph, and programmatic edges in graphs came with 12.3; what an older driver
 * does with it during capture (ignore it, or fail the launch and so the program's capture) is
 * not known. */
#define SYMMPIN_KERNEL_PDL_MIN_DRIVER 12030
bool symmpin_kernel_pdl_usable(int cc, int code_arch, int driver_version);

/* Which of the embedded images (arch[i] x10, is_ptx[i]) runs on a GPU of compute capability cc
 * (x10): the cubin of the same major generation with the highest minor not above the GPU's (sm_80
 * code runs on sm_86 and sm_89, never on sm_90); else the PTX of the highest architecture not
 * above the GPU's, which the driver compiles for it; else -1. As the CUDA runtime chooses from a
 * fat binary. */
int symmpin_kernel_image_pick(const int *arch, const int *is_ptx, int n, int cc);
/* The PTX symmpin_kernel_image_pick would fall back to, cubins left out: what the driver is given
 * when it refused the cubin picked for the GPU; -1 if the images hold no PTX for it. */
int symmpin_kernel_image_pick_ptx(const int *arch, const int *is_ptx, int n, int cc);

/* One-shot family. Largest per-rank input (bytes) that uses LL; provisional until measured on
 * 2/4/8 GPUs. */
size_t symmpin_oneshot_ll_max_bytes(int nranks);
/* Work units per rank of a one-shot algorithm (LL lines of 8 data bytes, or 16-byte vectors). */
size_t symmpin_oneshot_units(size_t count, int dtype, symmpin_kernel_algo algo);

/* Two-shot family. Smallest per-rank input (bytes) that uses it, staged only; above the one-shot
 * LL limit, and none for one rank (SIZE_MAX). Provisional until measured on 2/4/8 GPUs: at n
 * ranks one-shot brings (n-1) x the message into every GPU, two-shot 2 (n-1)/n x in two barriers'
 * time, so the crossover falls as n grows. */
size_t symmpin_twoshot_min_bytes(int nranks);

#ifdef __cplusplus
}
#endif

#endif
