/* libFuzzer target: trace files as symmpin-replay reads them (planner/trace.h, planner/replay.h).
 *
 * The input is one or more trace files back to back: every line that starts "#symmpin-trace "
 * begins a new file (at most FILES_MAX), so that concatenated real traces of a job's ranks are a
 * valid input and the fuzzer mutates all of them at once. Each file is handed over as a memfd
 * (/proc/self/fd/N), read by symmpin_trace_read, and checked:
 *   - every event the reader kept formats back to a line (symmpin_trace_format_event) that parses
 *     again, and whose second formatting is the same text (format o parse is a fixed point after
 *     one round: the writer and the reader agree on every field);
 *   - every "#where=" location is findable by its stack;
 * then all files go through symmpin_replay_run as `symmpin replay` runs them: the text report with
 * the shortest warm-up (plans from a few lines per rank) and the shared planner, or (the input's
 * last byte odd) the JSON report with the default warm-up and the dedicated planner. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agree/agree.h"
#include "common/log.h"
#include "planner/plan.h"
#include "planner/replay.h"
#include "planner/trace.h"
#include "planner/warmup.h"

#define FILES_MAX 8

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  devnull = fopen("/dev/null", "w");
  if (!devnull) abort();
  /* Warnings about malformed lines would flood the output (and cost most of the time). */
  /* SYMMPIN_FUZZ_DEBUG=1: the library's log at INFO (what one input does, when reproducing). */
  const char *debug = getenv("SYMMPIN_FUZZ_DEBUG");
  symmpin_log_configure(debug && *debug == '1' ? SYMMPIN_LOG_INFO : SYMMPIN_LOG_NONE, -1);
  return 0;
}

/* A failed property: the message and abort(), so that libFuzzer keeps the input. */
static void fail(const char *what, const char *a, const char *b) {
  fprintf(stderr, "fuzz_trace: %s\n  first:  %s\n  second: %s\n", what, a ? a : "", b ? b : "");
  abort();
}

static void check_events(const symmpin_trace_file *f) {
  char a[SYMMPIN_TRACE_LINE_MAX * 2], b[SYMMPIN_TRACE_LINE_MAX * 2];
  for (size_t i = 0; i < f->nevents; i++) {
    /* The line is not NUL-terminated (the writer puts a newline after it). */
    int na = symmpin_trace_format_event(&f->events[i], a, sizeof a - 1);
    if (na < 0) fail("an event read back does not format", NULL, NULL);
    if ((size_t)na >= sizeof a) fail("format returned a bad length", NULL, NULL);
    a[na] = '\0';
    symmpin_trace_event ev;
    if (symmpin_trace_parse_event(a, &ev) != SYMMPIN_OK)
      fail("a formatted event does not parse", a, NULL);
    int nb = symmpin_trace_format_event(&ev, b, sizeof b - 1);
    if (nb >= 0 && (size_t)nb < sizeof b) b[nb] = '\0';
    if (nb != na || memcmp(a, b, (size_t)na) != 0) fail("format(parse(format(e))) != format(e)", a, nb >= 0 ? b : NULL);
  }
  for (size_t i = 0; i < f->nwheres; i++) {
    if (i && f->wheres[i - 1].stack >= f->wheres[i].stack)
      fail("locations not sorted by stack, one per stack", NULL, NULL);
    if (symmpin_trace_file_where(f, f->wheres[i].stack) != &f->wheres[i].where)
      fail("a location is not found by its stack", NULL, NULL);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Split at the starts of "#symmpin-trace " lines. */
  static const char magic[] = "#symmpin-trace ";
  const size_t mlen = sizeof magic - 1;
  size_t start[FILES_MAX + 1];
  int nfiles = 0;
  start[nfiles++] = 0;
  for (size_t i = 1; i + mlen <= size && nfiles < FILES_MAX; i++)
    if (data[i - 1] == '\n' && memcmp(data + i, magic, mlen) == 0) start[nfiles++] = i;
  start[nfiles] = size;

  int fds[FILES_MAX];
  char names[FILES_MAX][32];
  const char *paths[FILES_MAX];
  for (int k = 0; k < nfiles; k++) {
    fds[k] = memfd_create("fuzz_trace", MFD_CLOEXEC);
    if (fds[k] < 0) abort();
    size_t len = start[k + 1] - start[k];
    if (len && write(fds[k], data + start[k], len) != (ssize_t)len) abort();
    snprintf(names[k], sizeof names[k], "/proc/self/fd/%d", fds[k]);
    paths[k] = names[k];
  }

  int readable = 0;
  for (int k = 0; k < nfiles; k++) {
    symmpin_trace_file f;
    if (symmpin_trace_read(paths[k], &f) != SYMMPIN_OK) continue;
    readable++;
    check_events(&f);
    symmpin_trace_file_free(&f);
  }

  /* The replay reads every file itself and fails on the first unreadable one, as the tool does.
   * Sizes the reader caps (SYMMPIN_TRACE_MAX_*: ranks, events) bound what a replay can cost. */
  if (readable == nfiles) {
    /* One of two runs, by the input's last byte (each costs as much as all the reading): the
     * text report with the shortest warm-up (plans from a few lines per rank) and the shared
     * planner, or the JSON report with the default warm-up and the dedicated planner. */
    bool json = size && (data[size - 1] & 1);
    symmpin_replay_options o = {.mode = json ? SYMMPIN_PLAN_DEDICATED : SYMMPIN_PLAN_SHARED,
                                .warmup = json ? SYMMPIN_WARMUP_DEFAULT : SYMMPIN_WARMUP_MIN_CALLS,
                                .max_bytes = SYMMPIN_PLAN_MAX_BYTES_DEFAULT,
                                .capture_bytes = SYMMPIN_PLAN_CAPTURE_BYTES_DEFAULT,
                                .json = json,
                                .kernels = &symmpin_agree_kernels};
    (void)symmpin_replay_run(paths, nfiles, &o, devnull);
  }
  for (int k = 0; k < nfiles; k++) close(fds[k]);
  return 0;
}
