/* Names of the fall-back reasons (preload/engine.h), as written in traces and statistics. Kept out
 * of engine.c so that the stand-in engine and the real one share them. */
#include "preload/engine.h"

static const char *const names[SYMMPIN_REASON_COUNT] = {
    "none", "disabled", "warmup", "too_large", "type_op", "comm", "disagree", "capture",
    "stream", "error",
};

const char *symmpin_reason_name(symmpin_reason r) {
  return (unsigned)r < SYMMPIN_REASON_COUNT ? names[r] : "?";
}
