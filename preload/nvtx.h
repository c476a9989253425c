/* symmpin in a profiler's timeline (Nsight Systems: docs/troubleshooting.md, "In Nsight
 * Systems"): NVTX ranges and marks in the domain "symmpin".
 *
 *   a range around each redirected call's launch:  "allreduce 1024 B f32 sum one-shot site
 *       0x000000000000000a at app+0x1a2b (main)" (path one-shot, two-shot, "captured one-shot",
 *       "captured two-shot"; the site as the statistics print it, and where it is when known);
 *   a range around each group launch:  "allreduce group of 2: 5120 B f32 sum one-shot sites
 *       0x000000000000000a 0x000000000000000b";
 *   a mark at each plan agreement:  "comm 0 rank 1/2: epoch 1 agreed: 2 of 2 sites pinned";
 *   a mark when a call site that ran on symmpin goes to NCCL:  "comm 0 rank 1/2: site
 *       0x000000000000000a to NCCL: measured" (once per site, kind of call and reason);
 *   a mark when a communicator goes to NCCL or into its error state:  "comm 0 rank 0/1: to NCCL:
 *       comm (one rank (NCCL's all-reduce is a copy at most))", "comm 0 rank 1/2: in error:
 *       ncclUnhandledCudaError" (once per communicator and reason).
 *
 * The NVTX header lives in nvtx.c alone. Without a tool attached (NVTX_INJECTION64_PATH unset),
 * NVTX's nvtxDomainCreateA answers NULL at symmpin_nvtx_init, and every function below is then a
 * load and a branch: no name is formatted, no NVTX function called. Thread-safe. */
#ifndef SYMMPIN_PRELOAD_NVTX_H
#define SYMMPIN_PRELOAD_NVTX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agree/agree.h"
#include "kernels/allreduce.h"
#include "planner/site.h"
#include "preload/comm.h"
#include "preload/engine.h"
#include "preload/reason.h"

/* Create the domain if a tool is attached (the first call asks NVTX, which loads the tool's
 * injection library then); later calls return at once. From the engine's first all-reduce of
 * each communicator: nothing NVTX happens before a communicator is used. */
void symmpin_nvtx_init(void);

/* The domain (an nvtxDomainHandle_t), NULL without a tool or before symmpin_nvtx_init. */
extern _Atomic(void *) symmpin_nvtx_domain;
static inline bool symmpin_nvtx_on(void) {
  return atomic_load_explicit(&symmpin_nvtx_domain, memory_order_acquire) != NULL;
}

void symmpin_nvtx_call_push_on(const symmpin_kernel_call *k, bool capturing,
                               const symmpin_site_where *where);
void symmpin_nvtx_group_push_on(const symmpin_kernel_call *calls, int n, bool capturing);
void symmpin_nvtx_pop_on(void);
void symmpin_nvtx_mark_plan_on(const symmpin_comm *c, const symmpin_agree *a);
void symmpin_nvtx_call_routed_on(const symmpin_comm *c, const symmpin_engine_call *ec,
                                 symmpin_reason r);
void symmpin_nvtx_mark_comm_on(const symmpin_comm *c, symmpin_reason r, const char *why);
void symmpin_nvtx_mark_error_on(const symmpin_comm *c, int code);
void symmpin_nvtx_mark_stop_on(const symmpin_comm *c, symmpin_agree_stop stop);

/* A range for one call's launch (k: the kernels' view of it; where: NULL or unknown: the site
 * alone), ended by symmpin_nvtx_pop on the same thread. */
static inline void symmpin_nvtx_call_push(const symmpin_kernel_call *k, bool capturing,
                                          const symmpin_site_where *where) {
  if (symmpin_nvtx_on()) symmpin_nvtx_call_push_on(k, capturing, where);
}
/* A range for a group's launch of n calls, ended by symmpin_nvtx_pop on the same thread. */
static inline void symmpin_nvtx_group_push(const symmpin_kernel_call *calls, int n,
                                           bool capturing) {
  if (symmpin_nvtx_on()) symmpin_nvtx_group_push_on(calls, n, capturing);
}
static inline void symmpin_nvtx_pop(void) {
  if (symmpin_nvtx_on()) symmpin_nvtx_pop_on();
}
/* The step of agreement a just agreed a plan (its epoch numbered as the INFO line does). */
static inline void symmpin_nvtx_mark_plan(const symmpin_comm *c, const symmpin_agree *a) {
  if (symmpin_nvtx_on()) symmpin_nvtx_mark_plan_on(c, a);
}
/* Call ec went to symmpin (r == SYMMPIN_REASON_NONE) or to NCCL for reason r: a mark the first
 * time a site's calls of one kind (eager, grouped, captured) that ran on symmpin go to NCCL for r
 * (probes, which are brief by design, and errors, marked per communicator, never count). */
static inline void symmpin_nvtx_call_routed(const symmpin_comm *c, const symmpin_engine_call *ec,
                                            symmpin_reason r) {
  if (symmpin_nvtx_on()) symmpin_nvtx_call_routed_on(c, ec, r);
}
/* The communicator goes to NCCL for reason r (why: what the INFO line says, or NULL). */
static inline void symmpin_nvtx_mark_comm(const symmpin_comm *c, symmpin_reason r,
                                          const char *why) {
  if (symmpin_nvtx_on()) symmpin_nvtx_mark_comm_on(c, r, why);
}
/* The communicator enters its error state: code is the ncclResult_t it reports from now on. */
static inline void symmpin_nvtx_mark_error(const symmpin_comm *c, int code) {
  if (symmpin_nvtx_on()) symmpin_nvtx_mark_error_on(c, code);
}
/* The plan agreements stopped, and no plan was ever agreed. */
static inline void symmpin_nvtx_mark_stop(const symmpin_comm *c, symmpin_agree_stop stop) {
  if (symmpin_nvtx_on()) symmpin_nvtx_mark_stop_on(c, stop);
}

#endif
