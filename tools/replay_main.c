/* symmpin-replay: run the planner on recorded traces, on the CPU (see planner/replay.h).
 *   symmpin-replay [--json] [--planner dedicated|shared] [--warmup N] [--max-bytes N] TRACE...
 * Exit status: 0 report printed, 1 a trace could not be read, 2 bad usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/replay.h"
#include "planner/warmup.h"

static void usage(FILE *to) {
  fprintf(to,
          "usage: symmpin-replay [--json] [--planner dedicated|shared] [--warmup N]\n"
          "                      [--max-bytes N] TRACE...\n"
          "Replays symmpin traces of all ranks of a job (one file per process; a file may hold\n"
          "several ranks) and prints per communicator: call sites, buffers, whether ranks agree,\n"
          "and the plan every rank would make, per call site and stream. Defaults as in the\n"
          "library: --planner shared, --warmup %u, --max-bytes %lluK. Sizes accept K, M, G.\n",
          (unsigned)SYMMPIN_WARMUP_DEFAULT, (unsigned long long)(SYMMPIN_MAX_BYTES_DEFAULT >> 10));
}

/* Decimal with an optional K/M/G (binary) suffix, as the library's environment variables. */
static int parse_size(const char *s, unsigned long long *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *s == '-') return -1;
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  if (*end == 'M' || *end == 'm') shift = 20;
  if (*end == 'G' || *end == 'g') shift = 30;
  if (shift) end++;
  if (*end || (shift && v > (~0ULL >> shift))) return -1;
  *out = v << shift;
  return 0;
}

int main(int argc, char **argv) {
  symmpin_replay_options o = {.mode = SYMMPIN_PLAN_SHARED,
                              .warmup = SYMMPIN_WARMUP_DEFAULT,
                              .max_bytes = SYMMPIN_MAX_BYTES_DEFAULT,
                              .slot_bytes = symmpin_replay_slot_bytes,
                              .supports = symmpin_replay_supports};
  const char **paths = calloc((size_t)argc, sizeof(*paths));
  int npaths = 0;
  if (!paths) return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    unsigned long long v;
    if (strcmp(a, "--json") == 0) {
      o.json = true;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      free(paths);
      return 0;
    } else if (strcmp(a, "--planner") == 0 && i + 1 < argc) {
      int m = symmpin_plan_mode_from_name(argv[++i]);
      if (m < 0) goto bad;
      o.mode = (symmpin_plan_mode)m;
    } else if (strcmp(a, "--warmup") == 0 && i + 1 < argc) {
      if (parse_size(argv[++i], &v) || v == 0 || v > 0xffffffffULL) goto bad;
      o.warmup = (uint32_t)v;
    } else if (strcmp(a, "--max-bytes") == 0 && i + 1 < argc) {
      if (parse_size(argv[++i], &v)) goto bad;
      o.max_bytes = v;
    } else if (a[0] == '-' && a[1] == '-') {
      goto bad;
    } else {
      paths[npaths++] = a;
    }
  }
  if (npaths == 0) goto bad;
  symmpin_status st = symmpin_replay_run(paths, npaths, &o, stdout);
  free(paths);
  return st == SYMMPIN_OK ? 0 : 1;
bad:
  usage(stderr);
  free(paths);
  return 2;
}
