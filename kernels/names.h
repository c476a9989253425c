/* The kernels' entry points by name: the device code defines one extern "C" kernel per family,
 * datatype and op that has a kernel (kernels/allreduce.cu), and the host loads each by the same
 * name from the module it loaded for the device (kernels/launch.c). Both sides expand the one
 * name macro below over common/types.h's lists, so they cannot disagree; the CPU test of the
 * embedded cubins checks that each holds every name (kernels/images). Private to kernels/. */
#ifndef SYMMPIN_KERNELS_NAMES_H
#define SYMMPIN_KERNELS_NAMES_H

#include "common/types.h"
#include "kernels/select.h"

/* The families of entry points, X(family, number, c1, c2) with a context passed along: the four
 * algorithms of one call (symmpin_kernel_algo, same numbers) and the group kernel, which runs
 * several staged calls of any family at once. */
#define SYMMPIN_KERNEL_FAMILIES(X, c1, c2)                                                         \
  X(ll, SYMMPIN_ALGO_ONESHOT_LL, c1, c2)                                                           \
  X(copy, SYMMPIN_ALGO_ONESHOT_COPY, c1, c2)                                                       \
  X(in_slot, SYMMPIN_ALGO_ONESHOT_IN_SLOT, c1, c2)                                                 \
  X(twoshot, SYMMPIN_ALGO_TWOSHOT, c1, c2)                                                         \
  X(group, SYMMPIN_KERNEL_FAMILY_GROUP, c1, c2)
#define SYMMPIN_KERNEL_FAMILY_GROUP SYMMPIN_ALGO_COUNT
#define SYMMPIN_KERNEL_FAMILY_COUNT (SYMMPIN_ALGO_COUNT + 1)

/* The entry point's identifier: symmpin_<family>_<DATATYPE>_<OP>, e.g. symmpin_ll_BFLOAT16_SUM. */
#define SYMMPIN_KERNEL_NAME(family, dtype, op) symmpin_##family##_##dtype##_##op

/* Expands `...` only when both the datatype and the op have kernels (select.h's entries are 1). */
#define SYMMPIN_KERNEL_IF(dtype, op, ...)                                                          \
  SYMMPIN_KERNEL_IF_(SYMMPIN_KERNEL_DTYPE_##dtype, SYMMPIN_KERNEL_OP_##op, __VA_ARGS__)
#define SYMMPIN_KERNEL_IF_(d, o, ...) SYMMPIN_KERNEL_IF__(d, o, __VA_ARGS__)
#define SYMMPIN_KERNEL_IF__(d, o, ...) SYMMPIN_KERNEL_IF_##d##o(__VA_ARGS__)
#define SYMMPIN_KERNEL_IF_11(...) __VA_ARGS__
#define SYMMPIN_KERNEL_IF_10(...)
#define SYMMPIN_KERNEL_IF_01(...)
#define SYMMPIN_KERNEL_IF_00(...)

/* Every entry point that exists, as SYMMPIN_KERNEL_ENTRY(family, number, dtype, op) for each
 * family, datatype and op with a kernel: the one expansion of the name list on the host (the name
 * table of kernels/launch.c, the images' test of kernels/images/dump_images.c). The user defines
 * SYMMPIN_KERNEL_ENTRY before expanding SYMMPIN_KERNEL_ENTRIES. */
#define SYMMPIN_KERNEL_ENTRIES SYMMPIN_DTYPES(SYMMPIN_KERNEL_ENTRIES_DTYPE_)
#define SYMMPIN_KERNEL_ENTRIES_DTYPE_(dtype, value, str, bytes)                                    \
  SYMMPIN_OPS_CTX(SYMMPIN_KERNEL_ENTRIES_OP_, dtype)
#define SYMMPIN_KERNEL_ENTRIES_OP_(dtype, op, value, str)                                          \
  SYMMPIN_KERNEL_IF(dtype, op, SYMMPIN_KERNEL_FAMILIES(SYMMPIN_KERNEL_ENTRY, dtype, op))

/* The index of an entry point in the host's tables. */
#define SYMMPIN_KERNEL_INDEX(family, dtype, op)                                                    \
  (((family)*SYMMPIN_DTYPE_COUNT + (dtype)) * SYMMPIN_OP_COUNT + (op))
#define SYMMPIN_KERNEL_COUNT (SYMMPIN_KERNEL_FAMILY_COUNT * SYMMPIN_DTYPE_COUNT * SYMMPIN_OP_COUNT)

#endif
