/* Names of the fall-back reasons (reason.h), as written in statistics. */
#include "preload/reason.h"

static const char *const names[SYMMPIN_REASON_COUNT] = {
    [SYMMPIN_REASON_NONE] = "none",
    [SYMMPIN_REASON_WARMUP] = "warmup",
    [SYMMPIN_REASON_TOO_LARGE] = "too_large",
    [SYMMPIN_REASON_TYPE_OP] = "type_op",
    [SYMMPIN_REASON_COMM] = "comm",
    [SYMMPIN_REASON_DISAGREE] = "disagree",
    [SYMMPIN_REASON_CAPTURE] = "capture",
    [SYMMPIN_REASON_STREAM] = "stream",
    [SYMMPIN_REASON_ERROR] = "error",
    [SYMMPIN_REASON_MEASURED] = "measured",
    [SYMMPIN_REASON_PROBE] = "probe",
    [SYMMPIN_REASON_GROUP] = "group",
    [SYMMPIN_REASON_GROUP_MEASURED] = "group_measured",
    [SYMMPIN_REASON_OFF] = "off",
};

const char *symmpin_reason_name(symmpin_reason r) {
  return (unsigned)r < SYMMPIN_REASON_COUNT && names[r] ? names[r] : "?";
}
