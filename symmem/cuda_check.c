/* The slow path of symmpin's CUDA checks (cuda_check.h): a call has failed. */
#include "symmem/cuda_check.h"

#include <string.h>

void symmpin_cuda_clear_failure(cudaError_t before) {
  /* Only symmpin's error is on the thread now: clear it. Something was pending before the call:
   * the program's error (or, sticky, everyone's); leave an error for the program to read. */
  if (before == cudaSuccess) (void)cudaGetLastError();
}

void symmpin_cuda_failed(cudaError_t err, cudaError_t before, const char *call, const char *file,
                         int line, symmpin_log_level level, _Atomic bool *logged) {
  symmpin_cuda_clear_failure(before);
  if (err == cudaErrorCudartUnloading || !SYMMPIN_LOG_ON((int)level) ||
      atomic_exchange(logged, true))
    return;
  /* WARN lines carry file:line in their prefix (log.h); INFO lines say it themselves. */
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  if (level == SYMMPIN_LOG_WARN)
    symmpin_log_write(level, file, line, "CUDA call %s failed: %s (%d)", call,
                      cudaGetErrorName(err), (int)err);
  else
    symmpin_log_write(level, file, line, "%s:%d CUDA call %s failed: %s (%d)", base, line, call,
                      cudaGetErrorName(err), (int)err);
}
