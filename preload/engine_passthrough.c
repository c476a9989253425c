/* Stand-in engine until preload/engine.c lands: every all-reduce goes to NCCL (reason
 * "disabled") and there is no per-communicator state to release. Builds only when engine.c is
 * absent (preload/meson.build). */
#include "preload/engine.h"

bool symmpin_engine_allreduce(symmpin_comm *c, const symmpin_engine_call *ec, int *rc,
                              symmpin_reason *reason) {
  (void)c;
  (void)ec;
  (void)rc;
  *reason = SYMMPIN_REASON_DISABLED;
  return false;
}

void symmpin_engine_comm_release(symmpin_comm *c) { (void)c; }
void symmpin_engine_comm_abandon(symmpin_comm *c) { (void)c; }
