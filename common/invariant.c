/* A failed invariant check (invariant.h): say what and where, then abort. */
#include "common/invariant.h"

#include <stdlib.h>

void symmpin_invariant_failed(const char *what, const char *cond, const char *file, int line) {
  if (cond)
    symmpin_log_write(SYMMPIN_LOG_WARN, file, line, "%s: %s; aborting (asserts are on)", what,
                      cond);
  else
    symmpin_log_write(SYMMPIN_LOG_WARN, file, line, "%s; aborting (asserts are on)", what);
  abort();
}
