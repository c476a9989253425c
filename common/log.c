/* Logging that never allocates: one stack buffer per line, one write(2) per line (see log.h). */
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/path.h"

_Atomic int symmpin_log_level_now = SYMMPIN_LOG_WARN;
static _Atomic int log_fd = 2;
/* SYMMPIN_DEBUG_FILE, opened by the first line written: pending is 1 until then. */
static char log_file_pattern[512];
static _Atomic int log_file_pending;
static pthread_mutex_t log_file_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_host[64];
static _Atomic int log_host_ready;

static const char *log_tool; /* set once by a tool's main before any thread starts */
static __thread int log_device __attribute__((tls_model("initial-exec"))) = -1;
static __thread long log_tid __attribute__((tls_model("initial-exec")));

void symmpin_log_configure(symmpin_log_level level, int fd) {
  atomic_store(&symmpin_log_level_now, (int)level);
  if (fd >= 0) atomic_store(&log_fd, fd);
}

void symmpin_log_set_file(const char *pattern) {
  snprintf(log_file_pattern, sizeof log_file_pattern, "%s", pattern);
  atomic_store(&log_file_pending, 1);
}

/* The destination, opening the pending file first. Other threads wait for the open (their lines
 * go to the file too); the open's own warning, if it fails, goes to stderr (log_opening). */
static __thread int log_opening __attribute__((tls_model("initial-exec")));

static int log_fd_now(void) {
  if (atomic_load_explicit(&log_file_pending, memory_order_acquire) && !log_opening) {
    pthread_mutex_lock(&log_file_lock);
    if (atomic_load(&log_file_pending)) {
      log_opening = 1;
      int fd = symmpin_log_open_file(log_file_pattern);
      if (fd >= 0) atomic_store(&log_fd, fd);
      atomic_store(&log_file_pending, 0);
      log_opening = 0;
    }
    pthread_mutex_unlock(&log_file_lock);
  }
  return atomic_load_explicit(&log_fd, memory_order_relaxed);
}

int symmpin_log_fd(void) { return log_fd_now(); }

int symmpin_log_level_get(void) {
  return atomic_load_explicit(&symmpin_log_level_now, memory_order_relaxed);
}

void symmpin_log_set_device(int device) { log_device = device; }

void symmpin_log_set_tool(const char *prog) { log_tool = prog; }

/* The host name, once; racing first callers write the same bytes. */
static const char *host_name(void) {
  if (!atomic_load_explicit(&log_host_ready, memory_order_acquire)) {
    char h[sizeof log_host];
    symmpin_host_short_name(h, sizeof h);
    memcpy(log_host, h, sizeof h);
    atomic_store_explicit(&log_host_ready, 1, memory_order_release);
  }
  return log_host;
}

int symmpin_log_open_file(const char *pattern) {
  char path[512], why[160];
  /* The rank is not known when the log opens: %r expands to "u". */
  if (symmpin_path_expand(pattern, -1, (int)getpid(), host_name(), path, sizeof path, why,
                          sizeof why) != SYMMPIN_OK) {
    symmpin_log_write(SYMMPIN_LOG_WARN, __FILE__, __LINE__, "SYMMPIN_DEBUG_FILE %s", why);
    return -1;
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    symmpin_log_write(SYMMPIN_LOG_WARN, __FILE__, __LINE__, "cannot open debug file %s: %s", path,
                      strerror(errno));
  return fd;
}

static const char *const level_names[] = {"NONE", "WARN", "INFO", "TRACE"};

void symmpin_log_write(symmpin_log_level level, const char *file, int line, const char *fmt, ...) {
  char buf[1024];
  int saved_errno = errno; /* logging must not disturb the caller's errno */
  if (log_tid == 0) log_tid = syscall(SYS_gettid);
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  int n;
  if (log_tool)
    n = snprintf(buf, sizeof buf, "%s: %s", log_tool, level == SYMMPIN_LOG_WARN ? "warning: " : "");
  else if (log_device >= 0)
    n = snprintf(buf, sizeof buf, "%s:%d:%ld [%d] symmpin %s ", host_name(), (int)getpid(),
                 log_tid, log_device, level_names[level]);
  else
    n = snprintf(buf, sizeof buf, "%s:%d:%ld [-] symmpin %s ", host_name(), (int)getpid(), log_tid,
                 level_names[level]);
  if (n < 0) n = 0;
  /* WARN lines name their origin, as NCCL's do. */
  if (level == SYMMPIN_LOG_WARN && !log_tool && (size_t)n < sizeof buf) {
    int m = snprintf(buf + n, sizeof buf - (size_t)n, "%s:%d ", base, line);
    if (m > 0) n += m;
  }
  if ((size_t)n < sizeof buf) {
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (m > 0) n += m;
  }
  if ((size_t)n >= sizeof buf - 1) { /* truncated: mark it and keep the newline */
    n = (int)sizeof buf - 1;
    memcpy(buf + n - 3, "...", 3);
  }
  buf[n++] = '\n';
  ssize_t w = write(log_fd_now(), buf, (size_t)n);
  (void)w;
  errno = saved_errno;
}
