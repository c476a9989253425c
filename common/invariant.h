/* Invariants as checks, not comments (leveled as mimalloc's mi_assert and UCX's ucs_assert).
 *
 *   SYMMPIN_ASSERT(cond)            level >= 1: a cheap check (O(1));
 *   SYMMPIN_ASSERT_EXPENSIVE(cond)  level >= 2: a check that walks a table or a plan;
 *   SYMMPIN_BUG(fmt, ...)           every build: a WARN ending "(a bug)", for a state that cannot
 *                                   arise unless symmpin has a bug but that the code survives (it
 *                                   falls back); where asserts are on it aborts as well.
 * A failed check logs what failed with file:line and aborts. A condition must have no side
 * effects: below its level it is compiled (so it stays valid code) but never evaluated.
 *
 * The level is SYMMPIN_ASSERT_LEVEL, 0 (off), 1 or 2, from the meson option `asserts`: 'auto'
 * means 2 in a debug build and 0 in every other, debugoptimized (what ships) and release
 * included. libsymmpin runs inside someone else's program and must never end it (it logs and
 * falls back to NCCL instead), so a production build has no assert, and what has to survive in
 * production is written as a WARN and a fallback (SYMMPIN_BUG where only a bug leads there). The
 * CPU tests that compile modules themselves (the engine over fakes, the pool, the registry's
 * races) build them with level 2, so CI runs their checks. Plain C, no allocation. */
#ifndef SYMMPIN_COMMON_INVARIANT_H
#define SYMMPIN_COMMON_INVARIANT_H

#include <stddef.h>

#include "common/log.h"

#ifndef SYMMPIN_ASSERT_LEVEL
#ifdef SYMMPIN_ASSERT_LEVEL_BUILD /* the meson option, for the whole build */
#define SYMMPIN_ASSERT_LEVEL SYMMPIN_ASSERT_LEVEL_BUILD
#else
#define SYMMPIN_ASSERT_LEVEL 0
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Logs "what" at file:line (WARN, whatever the log level) and aborts. */
void symmpin_invariant_failed(const char *what, const char *cond, const char *file, int line)
    __attribute__((noreturn, cold));

#ifdef __cplusplus
}
#endif

#define SYMMPIN_ASSERT_AT_(level, cond)                                                            \
  ((SYMMPIN_ASSERT_LEVEL >= (level) && !(cond))                                                    \
       ? symmpin_invariant_failed("assertion failed", #cond, __FILE__, __LINE__)                   \
       : (void)0)
#define SYMMPIN_ASSERT(cond) SYMMPIN_ASSERT_AT_(1, cond)
#define SYMMPIN_ASSERT_EXPENSIVE(cond) SYMMPIN_ASSERT_AT_(2, cond)

#define SYMMPIN_BUG(fmt, ...)                                                                      \
  do {                                                                                             \
    SYMMPIN_WARN(fmt " (a bug)", ##__VA_ARGS__);                                                   \
    if (SYMMPIN_ASSERT_LEVEL >= 1)                                                                 \
      symmpin_invariant_failed("a bug (the WARN line above)", NULL, __FILE__, __LINE__);           \
  } while (0)

#endif
