/* Per-thread re-entrancy guard (guard.h). initial-exec TLS: the library is preloaded, so its TLS
 * is static and an access costs one instruction, not a __tls_get_addr call. */
#include "interpose/guard.h"

static __thread int guard_depth __attribute__((tls_model("initial-exec")));

void symmpin_guard_enter(void) { guard_depth++; }
void symmpin_guard_leave(void) { guard_depth--; }
bool symmpin_guard_active(void) { return guard_depth > 0; }
