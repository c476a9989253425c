/* What the preload asks of CUDA and NCCL (preload/host.h), answered here where their headers and
 * the real symbols are, and installed when the library loads. CUDA questions go to the driver
 * (driver/cu.h, opened by the first question); NCCL is not linked, so its functions are resolved
 * like the wrapped ones. The stack depth for call-site hashes is set here too, from the
 * configuration, before any wrapped call needs it. */
#include <nccl.h>

#include "driver/cu.h"
#include "interpose/callsite.h"
#include "interpose/guard.h"
#include "interpose/real.h"
#include "preload/config.h"
#include "preload/host.h"
#include "preload/preload.h"

/* The device of the thread's current context: one driver call on the per-call path. A thread
 * without one (CUDA_ERROR_INVALID_CONTEXT) answers 0, as the program's runtime would
 * (cudaGetDevice): its next CUDA call makes device 0's primary context current. */
static int query_device(void) {
  if (!symmpin_cu_usable()) return -1;
  CUdevice dev = -1;
  CUresult r = symmpin_cu.CtxGetDevice(&dev);
  if (r == CUDA_ERROR_INVALID_CONTEXT) return 0;
  return r == CUDA_SUCCESS ? (int)dev : -1;
}

static int query_capturing(void *stream, unsigned long long *capture_id) {
  if (!symmpin_cu_usable()) return -1;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  if (symmpin_cu.StreamGetCaptureInfo((CUstream)stream, &st, &id, NULL, NULL, NULL) != CUDA_SUCCESS)
    return -1;
  if (capture_id) *capture_id = id;
  return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

static symmpin_real_sym real_user_rank = SYMMPIN_REAL_SYM_INIT(SYMMPIN_REAL_NCCL, ncclCommUserRank);
static symmpin_real_sym real_count = SYMMPIN_REAL_SYM_INIT(SYMMPIN_REAL_NCCL, ncclCommCount);

static int query_comm(void *comm, int *rank, int *nranks) {
  ncclResult_t (*user_rank)(const ncclComm_t, int *) = symmpin_real_get(&real_user_rank);
  ncclResult_t (*count)(const ncclComm_t, int *) = symmpin_real_get(&real_count);
  if (!user_rank || !count) return ncclSystemError;
  int r = -1, n = -1;
  ncclResult_t rc = user_rank((ncclComm_t)comm, &r);
  if (rc == ncclSuccess) rc = count((ncclComm_t)comm, &n);
  if (rc != ncclSuccess) return rc;
  *rank = r;
  *nranks = n;
  return ncclSuccess;
}

/* Priority 101: before the preload's own constructor (default priority) reports anything. */
__attribute__((constructor(101))) static void symmpin_interpose_install(void) {
  const symmpin_config *cfg = symmpin_config_get();
  if (!cfg->disable) symmpin_callsite_set_depth(cfg->stack_depth); /* may prime backtrace() */
  symmpin_host h = {.device = query_device, .capturing = query_capturing, .comm_rank = query_comm};
  symmpin_host_install(&h);
}

/* At exit (or unload), with the guard set: symmpin's teardown calls CUDA, and those calls are not
 * the program's. */
__attribute__((destructor)) static void symmpin_interpose_fini(void) {
  symmpin_guard_enter();
  symmpin_preload_exit();
  symmpin_guard_leave();
}
