/* The vocabulary every module shares: status codes, datatypes and reduction ops.
 * Plain C, no CUDA or NCCL headers: every module, the tools and the CPU tests use it as is.
 * Datatype and op values are numerically NCCL's (interpose/ checks that with static asserts), so
 * values cross module borders as plain ints without translation tables. */
#ifndef SYMMPIN_COMMON_TYPES_H
#define SYMMPIN_COMMON_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One status enum for the whole library. The function where an error starts logs it; callers pass
 * it up unchanged. */
typedef enum symmpin_status {
  SYMMPIN_OK = 0,
  SYMMPIN_ERR_NOMEM,       /* host allocation failed */
  SYMMPIN_ERR_INVALID,     /* bad argument or malformed input */
  SYMMPIN_ERR_IO,          /* file, socket or shared-memory failure */
  SYMMPIN_ERR_CUDA,        /* a CUDA call failed */
  SYMMPIN_ERR_TIMEOUT,     /* a peer did not answer within SYMMPIN_TIMEOUT_MS */
  SYMMPIN_ERR_UNSUPPORTED, /* a valid request symmpin does not handle: caller falls back to NCCL */
  SYMMPIN_ERR_DISAGREE,    /* ranks disagree (plans, eligibility) */
  SYMMPIN_ERR_INTERNAL,    /* a bug: logged once, caller falls back */
} symmpin_status;

const char *symmpin_status_name(symmpin_status s);

/* The datatypes, in ONE list: X(NAME, value, short name, bytes per element). The values are
 * ncclDataType_t's in NCCL 2.28 (fp8 types exist from 2.24 on). Everything that depends on the set
 * of datatypes (sizes, names, the kernels' dispatch and what they support) expands this list, so a
 * datatype added here without a kernel type can never be pinned (kernels/allreduce.h). */
#define SYMMPIN_DTYPES(X)         \
  X(INT8, 0, "i8", 1)             \
  X(UINT8, 1, "u8", 1)            \
  X(INT32, 2, "i32", 4)           \
  X(UINT32, 3, "u32", 4)          \
  X(INT64, 4, "i64", 8)           \
  X(UINT64, 5, "u64", 8)          \
  X(FLOAT16, 6, "f16", 2)         \
  X(FLOAT32, 7, "f32", 4)         \
  X(FLOAT64, 8, "f64", 8)         \
  X(BFLOAT16, 9, "bf16", 2)       \
  X(FP8E4M3, 10, "e4m3", 1)       \
  X(FP8E5M2, 11, "e5m2", 1)

typedef enum symmpin_dtype {
#define SYMMPIN_X(name, value, str, bytes) SYMMPIN_##name = value,
  SYMMPIN_DTYPES(SYMMPIN_X)
#undef SYMMPIN_X
  SYMMPIN_DTYPE_COUNT = 12,
} symmpin_dtype;

/* The built-in reduction ops: X(NAME, value, short name), ncclRedOp_t's values. Anything
 * >= SYMMPIN_OP_COUNT (e.g. PreMulSum ops created by ncclRedOpCreatePreMulSum) is not ours and
 * goes to NCCL. SYMMPIN_OPS_CTX(X, c) is the same list with a context passed along, X(c, NAME,
 * value, short name), for a list nested in another (the kernels' entry points: one per datatype
 * and op). */
#define SYMMPIN_OPS_CTX(X, c)                                                                      \
  X(c, SUM, 0, "sum")                                                                              \
  X(c, PROD, 1, "prod")                                                                            \
  X(c, MAX, 2, "max")                                                                              \
  X(c, MIN, 3, "min")                                                                              \
  X(c, AVG, 4, "avg")
#define SYMMPIN_OPS_NO_CTX_(X, name, value, str) X(name, value, str)
#define SYMMPIN_OPS(X) SYMMPIN_OPS_CTX(SYMMPIN_OPS_NO_CTX_, X)

typedef enum symmpin_op {
#define SYMMPIN_X(name, value, str) SYMMPIN_##name = value,
  SYMMPIN_OPS(SYMMPIN_X)
#undef SYMMPIN_X
  SYMMPIN_OP_COUNT = 5,
} symmpin_op;

/* The collectives symmpin serves: X(NAME, value, short name). The value is symmpin's own (NCCL has
 * no such enum); 0 is the all-reduce, so a zeroed call or record is one, as before the others came.
 * A call's `count` is NCCL's count argument: the whole vector of an all-reduce, the chunk one rank
 * sends (all-gather: sendcount) or receives (reduce-scatter: recvcount) of the others; their other
 * buffer holds nranks x count elements. */
#define SYMMPIN_COLLS(X)                                                                           \
  X(ALLREDUCE, 0, "allreduce")                                                                     \
  X(ALLGATHER, 1, "allgather")                                                                     \
  X(REDUCESCATTER, 2, "reducescatter")

typedef enum symmpin_coll {
#define SYMMPIN_X(name, value, str) SYMMPIN_COLL_##name = value,
  SYMMPIN_COLLS(SYMMPIN_X)
#undef SYMMPIN_X
      SYMMPIN_COLL_COUNT = 3,
} symmpin_coll;

/* Whether the collective reduces (takes an op): all-reduce and reduce-scatter. */
static inline int symmpin_coll_reduces(int coll) {
  return coll == SYMMPIN_COLL_ALLREDUCE || coll == SYMMPIN_COLL_REDUCESCATTER;
}
/* Elements of a call's send and recv buffers for NCCL's `count` at `nranks` (0 for unknown). */
static inline size_t symmpin_coll_send_count(int coll, size_t count, int nranks) {
  return coll == SYMMPIN_COLL_REDUCESCATTER ? count * (size_t)nranks
         : (coll == SYMMPIN_COLL_ALLREDUCE || coll == SYMMPIN_COLL_ALLGATHER) ? count
                                                                              : 0;
}
static inline size_t symmpin_coll_recv_count(int coll, size_t count, int nranks) {
  return coll == SYMMPIN_COLL_ALLGATHER ? count * (size_t)nranks
         : (coll == SYMMPIN_COLL_ALLREDUCE || coll == SYMMPIN_COLL_REDUCESCATTER) ? count
                                                                                  : 0;
}

/* Bytes per element, or 0 for a value that is not a known datatype. */
size_t symmpin_dtype_size(int dtype);
/* Short names ("bf16", "f32", "sum", ...) used in traces and reports; "?" for unknown values. */
const char *symmpin_dtype_name(int dtype);
const char *symmpin_op_name(int op);
const char *symmpin_coll_name(int coll);
/* Inverse of the names above; -1 when unknown. */
int symmpin_dtype_from_name(const char *name);
int symmpin_op_from_name(const char *name);
int symmpin_coll_from_name(const char *name);

#ifdef __cplusplus
}
#endif

#endif
