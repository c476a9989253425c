/* Names and sizes for the plain types in types.h. */
#include "planner/types.h"

#include <string.h>

static const char *const status_names[] = {
    "ok", "out of memory", "invalid argument", "i/o error", "cuda error",
    "timeout", "unsupported", "ranks disagree", "internal error",
};

const char *symmpin_status_name(symmpin_status s) {
  if ((unsigned)s < sizeof(status_names) / sizeof(status_names[0])) return status_names[s];
  return "unknown status";
}

static const struct {
  const char *name;
  size_t size;
} dtypes[SYMMPIN_DTYPE_COUNT] = {
    {"i8", 1}, {"u8", 1}, {"i32", 4}, {"u32", 4}, {"i64", 8},  {"u64", 8},
    {"f16", 2}, {"f32", 4}, {"f64", 8}, {"bf16", 2}, {"e4m3", 1}, {"e5m2", 1},
};

static const char *const op_names[SYMMPIN_OP_COUNT] = {"sum", "prod", "max", "min", "avg"};

size_t symmpin_dtype_size(int dtype) {
  return (dtype >= 0 && dtype < SYMMPIN_DTYPE_COUNT) ? dtypes[dtype].size : 0;
}

const char *symmpin_dtype_name(int dtype) {
  return (dtype >= 0 && dtype < SYMMPIN_DTYPE_COUNT) ? dtypes[dtype].name : "?";
}

const char *symmpin_op_name(int op) {
  return (op >= 0 && op < SYMMPIN_OP_COUNT) ? op_names[op] : "?";
}

int symmpin_dtype_from_name(const char *name) {
  for (int i = 0; i < SYMMPIN_DTYPE_COUNT; i++)
    if (strcmp(name, dtypes[i].name) == 0) return i;
  return -1;
}

int symmpin_op_from_name(const char *name) {
  for (int i = 0; i < SYMMPIN_OP_COUNT; i++)
    if (strcmp(name, op_names[i]) == 0) return i;
  return -1;
}
