/* symmpin-replay: run the planner on recorded traces, on the CPU (see planner/replay.h).
 *   symmpin-replay [--json] [--planner dedicated|shared] [--warmup N] [--max-bytes N] TRACE...
 * Exit status: 0 report printed (or --help, --version), 1 a trace could not be read, 2 bad usage
 * (the bad option or value named on stderr, then a hint to --help). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/version.h"
#include "planner/replay.h"
#include "planner/warmup.h"
#include "preload/agree.h"

#define PROG "symmpin-replay"

static void usage(FILE *to) {
  fprintf(to,
          "usage: symmpin-replay [--json] [--planner dedicated|shared] [--warmup N]\n"
          "                      [--max-bytes N] TRACE...\n"
          "       symmpin-replay --help | --version\n"
          "Replays symmpin traces of all ranks of a job (one file per process; a file may hold\n"
          "several ranks) and prints per communicator: call sites, buffers, whether ranks agree,\n"
          "and the plan every rank would make, per call site and stream. Defaults as in the\n"
          "library: --planner shared, --warmup %u, --max-bytes %lluK. Sizes accept K, M, G.\n"
          "Exit status: 0 report printed, 1 a trace could not be read, 2 bad usage.\n",
          (unsigned)SYMMPIN_WARMUP_DEFAULT,
          (unsigned long long)(SYMMPIN_PLAN_MAX_BYTES_DEFAULT >> 10));
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

/* A usage error: "symmpin-replay: <message>", the hint, status 2. */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, PROG ": ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\nTry '" PROG " --help' for more information.\n");
  va_end(ap);
  return 2;
}

enum { OPT_JSON = 256, OPT_PLANNER, OPT_WARMUP, OPT_MAX_BYTES, OPT_VERSION };

static const struct option longopts[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"planner", required_argument, NULL, OPT_PLANNER},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* After getopt_long returned '?' or ':': name the option as the user wrote it. */
static int option_error(int c, char **argv) {
  const char *arg = optind > 0 ? argv[optind - 1] : "";
  if (strncmp(arg, "--", 2) != 0) /* a short option: getopt_long put it in optopt */
    return usage_error("%s option '-%c'", c == ':' ? "missing value for" : "unknown", optopt);
  const char *eq = strchr(arg, '=');
  int len = eq ? (int)(eq - arg) : (int)strlen(arg);
  if (c == ':') return usage_error("option '%.*s' needs a value", len, arg);
  if (eq && optopt) return usage_error("option '%.*s' takes no value", len, arg);
  return usage_error("unknown option '%.*s'", len, arg);
}

int main(int argc, char **argv) {
  symmpin_log_set_tool(PROG); /* library warnings read "symmpin-replay: warning: ..." */
  symmpin_replay_options o = {.mode = SYMMPIN_PLAN_SHARED,
                              .warmup = SYMMPIN_WARMUP_DEFAULT,
                              .max_bytes = SYMMPIN_PLAN_MAX_BYTES_DEFAULT,
                              .kernels = &symmpin_agree_kernels};
  unsigned long long v;
  int c, m;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (c) {
    case OPT_JSON: o.json = true; break;
    case 'h': usage(stdout); return 0;
    case OPT_VERSION: printf(PROG " %s (git %s)\n", SYMMPIN_VERSION, SYMMPIN_GIT); return 0;
    case OPT_PLANNER:
      if ((m = symmpin_plan_mode_from_name(optarg)) < 0)
        return usage_error("bad --planner '%s' (dedicated, shared)", optarg);
      o.mode = (symmpin_plan_mode)m;
      break;
    case OPT_WARMUP:
      if (parse_size(optarg, &v) || v == 0 || v > 0xffffffffULL)
        return usage_error("bad --warmup '%s' (calls, 1..4294967295)", optarg);
      o.warmup = (uint32_t)v;
      break;
    case OPT_MAX_BYTES:
      if (parse_size(optarg, &v)) return usage_error("bad --max-bytes '%s' (bytes, K/M/G)", optarg);
      o.max_bytes = v;
      break;
    default: return option_error(c, argv);
    }
  }
  if (optind == argc) return usage_error("no TRACE given");
  symmpin_status st =
      symmpin_replay_run((const char *const *)(argv + optind), argc - optind, &o, stdout);
  return st == SYMMPIN_OK ? 0 : 1;
}
