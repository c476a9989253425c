/* Plain types shared by every module: status codes, datatypes and reduction ops.
 * Plain C, no CUDA or NCCL headers: the planner and the CPU tests use it as is.
 * Datatype and op values are numerically NCCL's (interpose/ checks that with static asserts), so
 * values cross module borders as plain ints without translation tables. */
#ifndef SYMMPIN_PLANNER_TYPES_H
#define SYMMPIN_PLANNER_TYPES_H

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

/* Same values as ncclDataType_t in NCCL 2.28 (fp8 types exist from 2.24 on). */
typedef enum symmpin_dtype {
  SYMMPIN_INT8 = 0,
  SYMMPIN_UINT8 = 1,
  SYMMPIN_INT32 = 2,
  SYMMPIN_UINT32 = 3,
  SYMMPIN_INT64 = 4,
  SYMMPIN_UINT64 = 5,
  SYMMPIN_FLOAT16 = 6,
  SYMMPIN_FLOAT32 = 7,
  SYMMPIN_FLOAT64 = 8,
  SYMMPIN_BFLOAT16 = 9,
  SYMMPIN_FP8E4M3 = 10,
  SYMMPIN_FP8E5M2 = 11,
  SYMMPIN_DTYPE_COUNT = 12,
} symmpin_dtype;

/* Same values as ncclRedOp_t's built-in ops; anything >= SYMMPIN_OP_COUNT (e.g. PreMulSum ops
 * created by ncclRedOpCreatePreMulSum) is not ours and goes to NCCL. */
typedef enum symmpin_op {
  SYMMPIN_SUM = 0,
  SYMMPIN_PROD = 1,
  SYMMPIN_MAX = 2,
  SYMMPIN_MIN = 3,
  SYMMPIN_AVG = 4,
  SYMMPIN_OP_COUNT = 5,
} symmpin_op;

/* Bytes per element, or 0 for a value that is not a known datatype. */
size_t symmpin_dtype_size(int dtype);
/* Short names ("bf16", "f32", "sum", ...) used in traces and reports; "?" for unknown values. */
const char *symmpin_dtype_name(int dtype);
const char *symmpin_op_name(int op);
/* Inverse of the names above; -1 when unknown. */
int symmpin_dtype_from_name(const char *name);
int symmpin_op_from_name(const char *name);

#ifdef __cplusplus
}
#endif

#endif
