/* One check for symmpin's own CUDA driver calls on the host, in the spirit of NCCL's CUCHECK: a
 * call that fails is logged -- the call as written, file:line and the driver's error name -- once
 * per call site. Each check evaluates to the call's CUresult; what a failure means is the
 * caller's business (fall back, give up, go on).
 *
 *   SYMMPIN_CUDA_CHECK(call)   a failure changes what symmpin does (it falls back to NCCL, or the
 *                              communicator enters its error state): logged as WARN;
 *   SYMMPIN_CUDA_IGNORE(call)  a failure symmpin shrugs off (a timing sample lost, a destroy at
 *                              teardown, a query with a fallback value): logged at INFO;
 *   SYMMPIN_CUDA_QUERY(call)   EventQuery / StreamQuery: CUDA_ERROR_NOT_READY is an answer, not a
 *                              failure (not logged); others as IGNORE.
 *
 * The driver keeps no per-thread "last error" (the runtime's cudaGetLastError is the runtime's
 * own), so a failed call of symmpin's can never be read by the program as its own, and nothing
 * has to be cleared. Sticky errors (a broken context) fail the program's next calls as they would
 * without symmpin.
 *
 * Once per call site: every expansion has a flag of its own, so a call that fails at every
 * all-reduce logs one line, not one per call (the first line says where and why). An error while
 * the driver shuts down (CUDA_ERROR_DEINITIALIZED: the process is exiting, every call fails
 * alike) is never logged.
 *
 * Host C only (a GNU statement expression). */
#ifndef SYMMPIN_DRIVER_CHECK_H
#define SYMMPIN_DRIVER_CHECK_H

#include <stdatomic.h>
#include <stdbool.h>

#include "common/log.h"
#include "driver/cu.h"

#define SYMMPIN_CUDA_CHECK(call) SYMMPIN_CUDA_CHECK_AT_(call, SYMMPIN_LOG_WARN, false)
#define SYMMPIN_CUDA_IGNORE(call) SYMMPIN_CUDA_CHECK_AT_(call, SYMMPIN_LOG_INFO, false)
#define SYMMPIN_CUDA_QUERY(call) SYMMPIN_CUDA_CHECK_AT_(call, SYMMPIN_LOG_INFO, true)

/* The slow path of a failed check (check.c): log once (*logged is the call site's flag). */
void symmpin_cuda_failed(CUresult err, const char *call, const char *file, int line,
                         symmpin_log_level level, _Atomic bool *logged);

#define SYMMPIN_CUDA_CHECK_AT_(call, level, not_ready_answers)                                     \
  __extension__({                                                                                  \
    static _Atomic bool symmpin_cuda_logged_;                                                      \
    CUresult symmpin_cuda_err_ = (call);                                                           \
    if (symmpin_cuda_err_ != CUDA_SUCCESS &&                                                       \
        !((not_ready_answers) && symmpin_cuda_err_ == CUDA_ERROR_NOT_READY))                       \
      symmpin_cuda_failed(symmpin_cuda_err_, #call, __FILE__, __LINE__, (level),                   \
                          &symmpin_cuda_logged_);                                                  \
    symmpin_cuda_err_;                                                                             \
  })

#endif
