/* The slow path of symmpin's CUDA checks (check.h): a call has failed. */
#include "driver/check.h"

#include <string.h>

void symmpin_cuda_failed(CUresult err, const char *call, const char *file, int line,
                         symmpin_log_level level, _Atomic bool *logged) {
  if (err == CUDA_ERROR_DEINITIALIZED || !SYMMPIN_LOG_ON((int)level) ||
      atomic_exchange(logged, true))
    return;
  /* WARN lines carry file:line in their prefix (log.h); INFO lines say it themselves. */
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  if (level == SYMMPIN_LOG_WARN)
    symmpin_log_write(level, file, line, "CUDA call %s failed: %s (%d)", call,
                      symmpin_cu_error_name(err), (int)err);
  else
    symmpin_log_write(level, file, line, "%s:%d CUDA call %s failed: %s (%d)", base, line, call,
                      symmpin_cu_error_name(err), (int)err);
}
