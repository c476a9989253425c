/* File names users give as patterns (SYMMPIN_TRACE, SYMMPIN_STATS_FILE, SYMMPIN_DEBUG_FILE):
 * %r the rank, %p the pid, %h the host's short name, %% a percent sign. Never allocate, so they are
 * usable inside intercepted calls and by the logger itself. */
#ifndef SYMMPIN_COMMON_PATH_H
#define SYMMPIN_COMMON_PATH_H

#include <stddef.h>

#include "common/types.h"

/* The host name up to its first dot ("node1" of "node1.cluster"), or "unknown". Always
 * NUL-terminated within cap (cap > 0). */
void symmpin_host_short_name(char *out, size_t cap);

/* Expand `pattern` into out (cap bytes, NUL-terminated). rank < 0 expands %r to "u" (not known yet).
 * SYMMPIN_ERR_INVALID for an unknown escape or a result that does not fit; `why` (may be NULL)
 * then holds a one-line reason. Logs nothing: callers say which setting was wrong. */
symmpin_status symmpin_path_expand(const char *pattern, int rank, int pid, const char *host,
                                   char *out, size_t cap, char *why, size_t why_cap);

#endif
