/* Names and sizes for the shared vocabulary (types.h), expanded from its lists. */
#include "common/types.h"

#include <string.h>

static const char *const status_names[] = {
    "ok",      "out of memory", "invalid argument", "i/o error",      "cuda error",
    "timeout", "unsupported",   "ranks disagree",   "internal error",
};

const char *symmpin_status_name(symmpin_status s) {
  if ((unsigned)s < sizeof(status_names) / sizeof(status_names[0])) return status_names[s];
  return "unknown status";
}

static const struct {
  const char *name;
  size_t size;
} dtypes[SYMMPIN_DTYPE_COUNT] = {
#define SYMMPIN_X(name, value, str, bytes) [value] = {str, bytes},
    SYMMPIN_DTYPES(SYMMPIN_X)
#undef SYMMPIN_X
};

static const char *const op_names[SYMMPIN_OP_COUNT] = {
#define SYMMPIN_X(name, value, str) [value] = str,
    SYMMPIN_OPS(SYMMPIN_X)
#undef SYMMPIN_X
};

static const char *const coll_names[SYMMPIN_COLL_COUNT] = {
#define SYMMPIN_X(name, value, str) [value] = str,
    SYMMPIN_COLLS(SYMMPIN_X)
#undef SYMMPIN_X
};

/* The counts above are written by hand (enums cannot count an X-macro); a list that grows without
 * them fails here. */
#define SYMMPIN_X(name, value, ...) +1
_Static_assert(0 SYMMPIN_DTYPES(SYMMPIN_X) == SYMMPIN_DTYPE_COUNT, "SYMMPIN_DTYPE_COUNT");
_Static_assert(0 SYMMPIN_OPS(SYMMPIN_X) == SYMMPIN_OP_COUNT, "SYMMPIN_OP_COUNT");
_Static_assert(0 SYMMPIN_COLLS(SYMMPIN_X) == SYMMPIN_COLL_COUNT, "SYMMPIN_COLL_COUNT");
#undef SYMMPIN_X

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

const char *symmpin_coll_name(int coll) {
  return (coll >= 0 && coll < SYMMPIN_COLL_COUNT) ? coll_names[coll] : "?";
}

int symmpin_coll_from_name(const char *name) {
  for (int i = 0; i < SYMMPIN_COLL_COUNT; i++)
    if (strcmp(name, coll_names[i]) == 0) return i;
  return -1;
}
