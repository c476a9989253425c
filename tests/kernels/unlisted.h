/* Force-included (-include) ahead of kernels/select.c or kernels/allreduce.cu by
 * tests/kernels/meson.build, to show that common/types.h's lists and the kernels cannot drift
 * apart. It replaces a list after common/types.h defined it (its include guard keeps the real
 * definition from coming back):
 *   SYMMPIN_TEST_CONTROL          a short list of entries that all have kernels: must compile;
 *   SYMMPIN_TEST_UNLISTED_DTYPE   a datatype without a kernels/select.h entry: select.c must not;
 *   SYMMPIN_TEST_UNLISTED_OP      an op without an entry: select.c must not;
 *   SYMMPIN_TEST_UNTYPED_DTYPE    a datatype whose entry says 1 but that has no kernel type:
 *                                 allreduce.cu must not. */
#include "common/types.h"

#undef SYMMPIN_DTYPES
#undef SYMMPIN_OPS_CTX /* SYMMPIN_OPS is defined through it */
#define SYMMPIN_TEST_DTYPES(X) X(INT8, 0, "i8", 1) X(FLOAT32, 7, "f32", 4)
#define SYMMPIN_TEST_OPS_CTX(X, c) X(c, SUM, 0, "sum") X(c, MAX, 2, "max")

#if defined(SYMMPIN_TEST_UNLISTED_DTYPE) || defined(SYMMPIN_TEST_UNTYPED_DTYPE)
#define SYMMPIN_DTYPES(X) SYMMPIN_TEST_DTYPES(X) X(E8M0, 12, "e8m0", 1)
#else
#define SYMMPIN_DTYPES(X) SYMMPIN_TEST_DTYPES(X)
#endif

#ifdef SYMMPIN_TEST_UNLISTED_OP
#define SYMMPIN_OPS_CTX(X, c) SYMMPIN_TEST_OPS_CTX(X, c) X(c, MINMAX, 5, "minmax")
#else
#define SYMMPIN_OPS_CTX(X, c) SYMMPIN_TEST_OPS_CTX(X, c)
#endif

#ifdef SYMMPIN_TEST_UNTYPED_DTYPE
#define SYMMPIN_KERNEL_DTYPE_E8M0 1
#endif
