/* Logging for the whole library and its tools: NCCL-like levels (WARN, INFO, TRACE), every line
 * prefixed "host:pid:tid [device] symmpin LEVEL", written with one write(2) per line and never
 * allocating, so it is safe inside any intercepted call (also from allocation wrappers).
 *
 * preload/config.c sets the level and the output file once from SYMMPIN_DEBUG(_FILE); before that
 * the level is WARN on stderr. The file is opened by the first line written, so a process in which
 * symmpin logs nothing has none. The device in the prefix is a per-thread value the preload sets
 * when it knows it (no CUDA call is made to log). */
#ifndef SYMMPIN_COMMON_LOG_H
#define SYMMPIN_COMMON_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum symmpin_log_level {
  SYMMPIN_LOG_NONE = 0,
  SYMMPIN_LOG_WARN = 1,
  SYMMPIN_LOG_INFO = 2,
  SYMMPIN_LOG_TRACE = 3,
} symmpin_log_level;

/* The level in force (what SYMMPIN_LOG_ON compares with). */
int symmpin_log_level_get(void);

/* Level and destination: fd < 0 keeps the current one (stderr by default). */
void symmpin_log_configure(symmpin_log_level level, int fd);
/* The log's destination (stderr, or the SYMMPIN_DEBUG_FILE), for reports printed at exit. */
int symmpin_log_fd(void);
/* Open SYMMPIN_DEBUG_FILE's pattern (%h host, %p pid, %% percent) for appending; -1 on failure. */
int symmpin_log_open_file(const char *pattern);
/* Log to the file of this pattern from the first line written on (opened then, by
 * symmpin_log_open_file; stderr if that fails). The pattern is copied. */
void symmpin_log_set_file(const char *pattern);
/* The device shown in this thread's lines (-1: none). */
void symmpin_log_set_device(int device);

/* For command-line tools (symmpin-replay, ...): lines read "prog: message" (WARN lines
 * "prog: warning: message"), the form users expect from a tool, instead of the library's prefix. */
void symmpin_log_set_tool(const char *prog);

void symmpin_log_write(symmpin_log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#ifdef __cplusplus /* CUDA host code: C++ has no _Atomic before C++23, so ask the function */
#define SYMMPIN_LOG_ON(lvl) (symmpin_log_level_get() >= (lvl))
#else
#include <stdatomic.h>
extern _Atomic int symmpin_log_level_now;
#define SYMMPIN_LOG_ON(lvl) (atomic_load_explicit(&symmpin_log_level_now, memory_order_relaxed) >= (lvl))
#endif
#define SYMMPIN_WARN(...)                                                                          \
  do {                                                                                             \
    if (SYMMPIN_LOG_ON(SYMMPIN_LOG_WARN))                                                          \
      symmpin_log_write(SYMMPIN_LOG_WARN, __FILE__, __LINE__, __VA_ARGS__);                        \
  } while (0)
#define SYMMPIN_INFO(...)                                                                          \
  do {                                                                                             \
    if (SYMMPIN_LOG_ON(SYMMPIN_LOG_INFO))                                                          \
      symmpin_log_write(SYMMPIN_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__);                        \
  } while (0)
#define SYMMPIN_TRACE(...)                                                                         \
  do {                                                                                             \
    if (SYMMPIN_LOG_ON(SYMMPIN_LOG_TRACE))                                                         \
      symmpin_log_write(SYMMPIN_LOG_TRACE, __FILE__, __LINE__, __VA_ARGS__);                       \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif
