/* One check for symmpin's own CUDA runtime calls on the host, in the spirit of NCCL's CUDACHECK /
 * CUDACHECKIGNORE: a call that fails is logged -- the call as written, file:line and the CUDA
 * error -- once per call site, and its error is cleared, so that the program's next
 * cudaGetLastError() does not report symmpin's failure as its own. Each check evaluates to the
 * call's cudaError_t; what a failure means is the caller's business (fall back, give up, go on).
 *
 *   SYMMPIN_CUDA_CHECK(call)   a failure changes what symmpin does (it falls back to NCCL, or the
 *                              communicator enters its error state): logged as WARN;
 *   SYMMPIN_CUDA_IGNORE(call)  a failure symmpin shrugs off (a timing sample lost, a destroy at
 *                              teardown, a query with a fallback value): logged at INFO;
 *   SYMMPIN_CUDA_QUERY(call)   cudaEventQuery / cudaStreamQuery: cudaErrorNotReady is an answer,
 *                              not a failure (neither logged nor cleared); others as IGNORE.
 *
 * Clearing with care. cudaGetLastError() returns AND resets the thread's last error, which may be
 * the program's: an error of one of its own calls that it has not read yet. So every check reads
 * the thread's last error before the call (cudaPeekAtLastError, a thread-local read) and clears
 * after a failure only if nothing was pending before. A pending error of the program is never
 * eaten: not by a call that succeeds (nothing is cleared then), and not by one that fails (the
 * program then reads symmpin's error where it had its own: still an error, as it had one). Sticky
 * errors (a broken context) cannot be cleared by anyone; they are only logged.
 *
 * Whichever runtime answers: the checks use the ordinary runtime symbols, so they read and clear
 * the last error of the runtime the checked call went to -- the program's shared libcudart, or a
 * copy linked into libsymmpin alone (then symmpin's calls never touch the program's last error
 * and the care above is only a cheap no-op).
 *
 * Once per call site: every expansion has a flag of its own, so a call that fails at every
 * all-reduce logs one line, not one per call (the count is not kept: the first line says where
 * and why). An error while the runtime unloads (cudaErrorCudartUnloading: the process is exiting,
 * every call fails alike) is cleared and never logged.
 *
 * Host C only (a GNU statement expression), for preload/ and symmem/. */
#ifndef SYMMPIN_SYMMEM_CUDA_CHECK_H
#define SYMMPIN_SYMMEM_CUDA_CHECK_H

#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/log.h"

#define SYMMPIN_CUDA_CHECK(call) SYMMPIN_CUDA_CHECK_AT_(call, SYMMPIN_LOG_WARN, false)
#define SYMMPIN_CUDA_IGNORE(call) SYMMPIN_CUDA_CHECK_AT_(call, SYMMPIN_LOG_INFO, false)
#define SYMMPIN_CUDA_QUERY(call) SYMMPIN_CUDA_CHECK_AT_(call, SYMMPIN_LOG_INFO, true)

/* For code that reports its CUDA failures its own way without clearing them (the kernels'
 * launch returns a symmpin_status): after it failed, clear the thread's error unless `before`,
 * cudaPeekAtLastError() read before calling it, was pending already (the care above). */
void symmpin_cuda_clear_failure(cudaError_t before);

/* The slow path of a failed check (cuda_check.c): clear as above, log once (*logged is the call
 * site's flag). */
void symmpin_cuda_failed(cudaError_t err, cudaError_t before, const char *call, const char *file,
                         int line, symmpin_log_level level, _Atomic bool *logged);

#define SYMMPIN_CUDA_CHECK_AT_(call, level, not_ready_answers)                                     \
  __extension__({                                                                                  \
    static _Atomic bool symmpin_cuda_logged_;                                                      \
    cudaError_t symmpin_cuda_before_ = cudaPeekAtLastError();                                      \
    cudaError_t symmpin_cuda_err_ = (call);                                                        \
    if (symmpin_cuda_err_ != cudaSuccess &&                                                        \
        !((not_ready_answers) && symmpin_cuda_err_ == cudaErrorNotReady))                          \
      symmpin_cuda_failed(symmpin_cuda_err_, symmpin_cuda_before_, #call, __FILE__, __LINE__,      \
                          (level), &symmpin_cuda_logged_);                                         \
    symmpin_cuda_err_;                                                                             \
  })

#endif
