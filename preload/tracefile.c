/* The process's trace file (tracefile.h): early-event buffer, then the planner's writer; and the
 * set of stacks whose location was written (open addressing, filled once per stack). */
#include "preload/tracefile.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/path.h"

typedef enum state { OFF, BUFFERING, OPEN, FAILED } state;

/* One lock for the whole life: adding after stop() must not race with the writer's close. The
 * writer has its own lock too, so the cost is one more uncontended mutex per traced call. */
static pthread_mutex_t tf_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int tf_state = OFF;
static char tf_pattern[512];
static char tf_path[512];
static symmpin_trace_event *early_events;
static size_t early_cap, early_n;
static size_t early_dropped;     /* events that did not fit before the first communicator */
static _Atomic bool tf_may_open; /* the process has a communicator (allow_open) */
static symmpin_trace_writer *writer;
static uint64_t start_mono_ns, start_unix_ns;

/* Stacks described so far (0 = empty slot: stack hashes are never 0). Allocated at start, so a
 * traced call never allocates; a location seen before the file opens waits here unwritten. */
typedef struct where_slot {
  uint64_t stack;
  bool written;
  symmpin_site_where where;
} where_slot;
static where_slot *wheres;
#define WHERE_PROBES 64 /* slots tried per stack: a crowded table costs locations, not time */
static bool wheres_full_noted;

static __thread long tf_tid __attribute__((tls_model("initial-exec")));

static uint64_t now_ns(clockid_t clk) {
  struct timespec ts;
  clock_gettime(clk, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

symmpin_status symmpin_tracefile_start(const char *pattern, size_t early) {
  if (!early) early = SYMMPIN_TRACEFILE_EARLY_EVENTS;
  if (strlen(pattern) >= sizeof tf_pattern) {
    SYMMPIN_WARN("trace pattern too long: %s", pattern);
    return SYMMPIN_ERR_INVALID;
  }
  symmpin_trace_event *ev = calloc(early, sizeof *ev);
  where_slot *ws = calloc(SYMMPIN_TRACEFILE_WHERES, sizeof *ws); /* NULL: no locations, logged */
  if (!ws) SYMMPIN_WARN("out of memory for the trace's call-site locations: none written");
  if (!ev) {
    free(ws);
    SYMMPIN_WARN("out of memory for the trace buffer (%zu events)", early);
    return SYMMPIN_ERR_NOMEM;
  }
  pthread_mutex_lock(&tf_lock);
  if (atomic_load(&tf_state) != OFF) {
    pthread_mutex_unlock(&tf_lock);
    free(ev);
    free(ws);
    return SYMMPIN_ERR_INVALID;
  }
  wheres = ws;
  wheres_full_noted = false;
  strcpy(tf_pattern, pattern);
  tf_path[0] = '\0';
  early_events = ev;
  early_cap = early;
  early_n = 0;
  early_dropped = 0;
  atomic_store(&tf_may_open, false);
  start_mono_ns = now_ns(CLOCK_MONOTONIC);
  start_unix_ns = now_ns(CLOCK_REALTIME);
  atomic_store(&tf_state, BUFFERING);
  pthread_mutex_unlock(&tf_lock);
  return SYMMPIN_OK;
}

bool symmpin_tracefile_on(void) {
  int s = atomic_load_explicit(&tf_state, memory_order_relaxed);
  return s == BUFFERING || s == OPEN;
}

void symmpin_tracefile_event_init(symmpin_trace_event *ev, symmpin_trace_call call) {
  memset(ev, 0, sizeof *ev);
  if (tf_tid == 0) tf_tid = syscall(SYS_gettid);
  ev->tid = (uint64_t)tf_tid;
  ev->t_ns = now_ns(CLOCK_MONOTONIC) - start_mono_ns;
  ev->call = call;
  ev->comm = -1;
  ev->device = -1;
  ev->rank = -1;
  ev->parent = -1;
  ev->stream_ord = -1;
}

/* Caller holds tf_lock, state BUFFERING. */
static void open_locked(int rank) {
  char host[64], why[160];
  symmpin_host_short_name(host, sizeof host);
  symmpin_trace_header h;
  memset(&h, 0, sizeof h);
  h.version = SYMMPIN_TRACE_VERSION;
  strcpy(h.host, host);
  h.pid = (int)getpid();
  h.rank = rank;
  snprintf(h.program, sizeof h.program, "%s", program_invocation_short_name);
  h.start_unix_ns = start_unix_ns;
  why[0] = '\0';
  if (symmpin_path_expand(tf_pattern, rank, h.pid, host, tf_path, sizeof tf_path, why, sizeof why) !=
          SYMMPIN_OK ||
      symmpin_trace_writer_open(tf_path, &h, &writer) != SYMMPIN_OK) {
    SYMMPIN_WARN("cannot open the trace file for SYMMPIN_TRACE=%s%s%s; tracing off", tf_pattern,
                 why[0] ? ": " : "", why);
    tf_path[0] = '\0';
    atomic_store(&tf_state, FAILED);
  } else {
    SYMMPIN_INFO("tracing to %s", tf_path);
    if (early_dropped)
      SYMMPIN_INFO("trace: %zu events before the first communicator did not fit the buffer (%zu "
                   "events) and are not in the trace",
                   early_dropped, early_cap);
    for (size_t i = 0; wheres && i < SYMMPIN_TRACEFILE_WHERES; i++)
      if (wheres[i].stack && !wheres[i].written) {
        symmpin_trace_writer_add_where(writer, wheres[i].stack, &wheres[i].where);
        wheres[i].written = true;
      }
    for (size_t i = 0; i < early_n; i++) symmpin_trace_writer_add(writer, &early_events[i]);
    atomic_store(&tf_state, OPEN);
  }
  free(early_events);
  early_events = NULL;
  early_n = early_cap = 0;
}

void symmpin_tracefile_allow_open(void) { atomic_store(&tf_may_open, true); }

void symmpin_tracefile_set_rank(int rank) {
  if (rank < 0) return;
  atomic_store(&tf_may_open, true);
  if (atomic_load(&tf_state) != BUFFERING) return;
  pthread_mutex_lock(&tf_lock);
  if (atomic_load(&tf_state) == BUFFERING) open_locked(rank);
  pthread_mutex_unlock(&tf_lock);
}

/* Caller holds tf_lock, state BUFFERING or OPEN. Notes a stack's location the first time it is
 * seen: written now when the file is open, else when it opens. */
static void where_note(int s, uint64_t stack, const symmpin_site_where *where) {
  if (!wheres || !stack || !symmpin_site_where_known(where)) return;
  uint32_t mask = SYMMPIN_TRACEFILE_WHERES - 1, i0 = (uint32_t)(stack ^ stack >> 32) & mask;
  for (uint32_t k = 0; k < WHERE_PROBES; k++) {
    where_slot *w = &wheres[(i0 + k) & mask];
    if (w->stack == stack) return;
    if (w->stack) continue;
    *w = (where_slot){.stack = stack, .where = *where};
    if (s == OPEN) {
      symmpin_trace_writer_add_where(writer, stack, where);
      w->written = true;
    }
    return;
  }
  if (!wheres_full_noted) {
    wheres_full_noted = true;
    SYMMPIN_INFO("trace: call-site location table crowded; some stacks get no \"#where\" line");
  }
}

void symmpin_tracefile_add(symmpin_trace_event *ev) { symmpin_tracefile_add_at(ev, NULL); }

void symmpin_tracefile_add_at(symmpin_trace_event *ev, const symmpin_site_where *where) {
  if (!symmpin_tracefile_on()) return;
  pthread_mutex_lock(&tf_lock);
  int s = atomic_load(&tf_state);
  if (where && (s == BUFFERING || s == OPEN)) where_note(s, ev->stack, where);
  if (s == BUFFERING) {
    if (early_n == early_cap && !atomic_load(&tf_may_open)) {
      early_dropped++; /* no communicator yet: no file may open */
    } else if (early_n == early_cap) {
      SYMMPIN_INFO("trace buffer full (%zu events) before the first communicator's rank is known: "
                   "opening with rank u",
                   early_cap);
      open_locked(-1);
      s = atomic_load(&tf_state);
    } else {
      early_events[early_n++] = *ev;
    }
  }
  if (s == OPEN) symmpin_trace_writer_add(writer, ev);
  pthread_mutex_unlock(&tf_lock);
}

void symmpin_tracefile_flush(void) {
  pthread_mutex_lock(&tf_lock);
  if (atomic_load(&tf_state) == OPEN) symmpin_trace_writer_flush(writer);
  pthread_mutex_unlock(&tf_lock);
}

void symmpin_tracefile_stop(void) {
  pthread_mutex_lock(&tf_lock);
  if (atomic_load(&tf_state) == BUFFERING && atomic_load(&tf_may_open))
    open_locked(-1);
  else if (atomic_load(&tf_state) == BUFFERING)
    SYMMPIN_TRACE("trace: no communicator in this process, no trace file (%zu events dropped)",
                  early_n + early_dropped);
  if (atomic_load(&tf_state) == OPEN) {
    symmpin_trace_writer_close(writer);
    writer = NULL;
  }
  free(early_events);
  early_events = NULL;
  early_n = early_cap = 0;
  free(wheres);
  wheres = NULL;
  atomic_store(&tf_state, OFF);
  pthread_mutex_unlock(&tf_lock);
}

const char *symmpin_tracefile_path(void) { return tf_path; }
