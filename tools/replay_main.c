/* symmpin-replay: run the planner on recorded traces, on the CPU (see planner/replay.h).
 *   symmpin-replay [--json] [--planner dedicated|shared] [--warmup N] [--max-bytes N]
 *                  [--capture-bytes N]
 *                  [--allow-mixed] TRACE...
 * Before replaying, the traces are checked to be one job's, each process once (the replay itself
 * would silently plan a file given twice as twice the calls, and two jobs as unrelated
 * communicators): a file given twice (same device and inode, or identical bytes), two files holding
 * the same rank of one communicator, and files sharing no communicator (traces of one job share
 * their communicators' keys, which are unique per job) are each named in one line on stderr.
 * --allow-mixed replays anyway (a copy is dropped). A trace without any all-reduce gets a warning.
 * Exit status: 0 report printed (or --help, --version), 1 a trace could not be read, 2 bad usage
 * (the bad option or value named on stderr, then a hint to --help), 3 the traces are not one job's
 * (see above; not with --allow-mixed). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/version.h"
#include "planner/replay.h"
#include "planner/trace.h"
#include "planner/warmup.h"
#include "agree/agree.h"

#define PROG "symmpin-replay"
#define EXIT_NOT_ONE_JOB 3

static void usage(FILE *to) {
  fprintf(to,
          "usage: symmpin-replay [--json] [--planner dedicated|shared] [--warmup N]\n"
          "                      [--max-bytes N] [--capture-bytes N] [--allow-mixed] TRACE...\n"
          "       symmpin-replay --help | --version\n"
          "Replays symmpin traces of all ranks of a job (one file per process; a file may hold\n"
          "several ranks) and prints per communicator: call sites, buffers, whether ranks agree,\n"
          "and the plan every rank would make, per call site and stream. Defaults as in the\n"
          "library: --planner shared, --warmup %u, --max-bytes %lluK, --capture-bytes %lluM.\n"
          "Sizes accept K, M, G.\n"
          "The traces must be one job's, each process once: a file given twice (or a copy), two\n"
          "files with the same rank of a communicator, and files of different jobs (no\n"
          "communicator in common) are refused; --allow-mixed replays them anyway, a copy once.\n"
          "Exit status: 0 report printed, 1 a trace could not be read, 2 bad usage, 3 the\n"
          "traces are not one job's.\n",
          (unsigned)SYMMPIN_WARMUP_DEFAULT,
          (unsigned long long)(SYMMPIN_PLAN_MAX_BYTES_DEFAULT >> 10),
          (unsigned long long)(SYMMPIN_PLAN_CAPTURE_BYTES_DEFAULT >> 20));
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

enum { OPT_JSON = 256, OPT_PLANNER, OPT_WARMUP, OPT_MAX_BYTES, OPT_CAPTURE_BYTES, OPT_ALLOW_MIXED,
       OPT_VERSION };

static const struct option longopts[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"planner", required_argument, NULL, OPT_PLANNER},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
    {"capture-bytes", required_argument, NULL, OPT_CAPTURE_BYTES},
    {"allow-mixed", no_argument, NULL, OPT_ALLOW_MIXED},
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

/* ------------------------------------------------------------ are the traces one job's? */

/* A rank of a communicator that a trace holds (from its communicator-creation events). */
typedef struct member {
  uint64_t key_hi, key_lo;
  int rank;
} member;

/* What the checks need of one TRACE argument. A file that cannot be read is left to the replay,
 * which names the problem (and exits 1). */
typedef struct input {
  const char *path;
  bool usable;  /* stat and the trace reader succeeded */
  bool dropped; /* a copy of an earlier argument (only kept out with --allow-mixed) */
  struct stat st;
  uint64_t hash; /* of the file's bytes */
  member *members; /* in file order */
  member *sorted;  /* the same, by key and rank (the pairwise checks are merges, not n * m) */
  size_t nmembers;
  size_t nevents, ncollectives; /* collectives: all-reduces, all-gathers, reduce-scatters */
  int job; /* union-find parent: files sharing a communicator are one job */
} input;

static int key_cmp(const member *x, const member *y) {
  if (x->key_hi != y->key_hi) return x->key_hi < y->key_hi ? -1 : 1;
  if (x->key_lo != y->key_lo) return x->key_lo < y->key_lo ? -1 : 1;
  return 0;
}

static int member_cmp(const void *a, const void *b) {
  const member *x = a, *y = b;
  int k = key_cmp(x, y);
  if (k) return k;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static bool is_comm_create(symmpin_trace_call c) {
  return c == SYMMPIN_TRACE_COMM_INIT_RANK || c == SYMMPIN_TRACE_COMM_INIT_RANK_CONFIG ||
         c == SYMMPIN_TRACE_COMM_INIT_RANK_SCALABLE || c == SYMMPIN_TRACE_COMM_INIT_ALL ||
         c == SYMMPIN_TRACE_COMM_SPLIT;
}

/* FNV-1a over the file's bytes; false if it cannot be read. */
static bool hash_file(const char *path, uint64_t *out) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  uint64_t h = 0xcbf29ce484222325ULL;
  unsigned char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    for (size_t i = 0; i < n; i++) h = (h ^ buf[i]) * 0x100000001b3ULL;
  bool ok = !ferror(f);
  fclose(f);
  *out = h;
  return ok;
}

/* Byte for byte, after sizes and hashes matched. */
static bool same_bytes(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  bool same = fa && fb;
  unsigned char x[65536], y[65536];
  while (same) {
    size_t n = fread(x, 1, sizeof x, fa), m = fread(y, 1, sizeof y, fb);
    if (n != m || memcmp(x, y, n) != 0 || ferror(fa) || ferror(fb)) same = false;
    if (n == 0) break;
  }
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return same;
}

/* Reads what the checks need; the trace reader's own warnings are left to the replay, which reads
 * the file again and would repeat them. */
static void input_load(input *in, const char *path) {
  memset(in, 0, sizeof(*in));
  in->path = path;
  if (stat(path, &in->st) != 0 || !S_ISREG(in->st.st_mode) || !hash_file(path, &in->hash)) return;
  int level = symmpin_log_level_get();
  symmpin_log_configure(SYMMPIN_LOG_NONE, -1);
  symmpin_trace_file f;
  symmpin_status st = symmpin_trace_read(path, &f);
  symmpin_log_configure((symmpin_log_level)level, -1);
  if (st != SYMMPIN_OK) return;
  in->nevents = f.nevents;
  size_t ncreate = 0;
  for (size_t i = 0; i < f.nevents; i++) {
    if (symmpin_trace_call_coll(f.events[i].call) >= 0) in->ncollectives++;
    if (is_comm_create(f.events[i].call)) ncreate++;
  }
  in->members = ncreate ? calloc(ncreate, sizeof(member)) : NULL;
  for (size_t i = 0; i < f.nevents && in->members; i++) {
    const symmpin_trace_event *e = &f.events[i];
    if (!is_comm_create(e->call) || e->rc != 0 || (e->key_hi == 0 && e->key_lo == 0)) continue;
    in->members[in->nmembers++] = (member){e->key_hi, e->key_lo, e->rank};
  }
  in->sorted = in->nmembers ? malloc(in->nmembers * sizeof(member)) : NULL;
  if (in->sorted) {
    memcpy(in->sorted, in->members, in->nmembers * sizeof(member));
    qsort(in->sorted, in->nmembers, sizeof(member), member_cmp);
  } else {
    in->nmembers = 0; /* out of memory: this file shares nothing as far as the checks go */
  }
  symmpin_trace_file_free(&f);
  in->usable = true;
}

static int job_root(input *v, int i) {
  while (v[i].job != i) i = v[i].job = v[v[i].job].job;
  return i;
}

/* A communicator key two traces share (its first member in a, by key), or NULL. */
static const member *shared_comm(const input *a, const input *b) {
  for (size_t i = 0, j = 0; i < a->nmembers && j < b->nmembers;) {
    int k = key_cmp(&a->sorted[i], &b->sorted[j]);
    if (k == 0) return &a->sorted[i];
    if (k < 0)
      i++;
    else
      j++;
  }
  return NULL;
}

/* The same rank of one communicator in both traces, or NULL. */
static const member *shared_rank(const input *a, const input *b) {
  for (size_t i = 0, j = 0; i < a->nmembers && j < b->nmembers;) {
    int k = member_cmp(&a->sorted[i], &b->sorted[j]);
    if (k == 0 && a->sorted[i].rank >= 0) return &a->sorted[i];
    if (k <= 0)
      i++;
    else
      j++;
  }
  return NULL;
}

/* One line per problem on stderr: an error ("symmpin-replay: ..."), or with --allow-mixed a
 * warning ("symmpin-replay: warning: ..."), ending in what --allow-mixed does about it. Returns
 * the number of errors. */
static int problem(bool allow, bool copy, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int problem(bool allow, bool copy, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, PROG ": %s", allow ? "warning: " : "");
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (copy)
    fprintf(stderr, allow ? " (--allow-mixed: the copy is left out)\n"
                          : " (--allow-mixed leaves the copy out)\n");
  else
    fprintf(stderr, allow ? " (--allow-mixed: replayed anyway)\n"
                          : " (--allow-mixed replays anyway)\n");
  return allow ? 0 : 1;
}

/* Checks the traces (see the top of this file) and keeps the paths to replay in kept[] (copies
 * dropped). Returns the number of errors found (0 with --allow-mixed). */
static int check_inputs(char **paths, int n, bool allow, const char **kept, int *nkept) {
  input *v = calloc((size_t)n, sizeof(input));
  if (!v) { /* not worth failing the replay for: replay everything unchecked */
    for (int i = 0; i < n; i++) kept[i] = paths[i];
    *nkept = n;
    return 0;
  }
  int errors = 0;
  for (int i = 0; i < n; i++) {
    input_load(&v[i], paths[i]);
    v[i].job = i;
  }

  /* Each process once: the same file, or the same bytes under another name. */
  for (int j = 0; j < n; j++) {
    for (int i = 0; i < j && v[j].usable; i++) {
      if (!v[i].usable || v[i].dropped) continue;
      bool same_file = v[i].st.st_dev == v[j].st.st_dev && v[i].st.st_ino == v[j].st.st_ino;
      if (!same_file &&
          (v[i].st.st_size != v[j].st.st_size || v[i].hash != v[j].hash ||
           !same_bytes(v[i].path, v[j].path)))
        continue;
      if (same_file && !strcmp(v[i].path, v[j].path))
        errors +=
            problem(allow, true, "trace '%s' given twice: each process counts once", v[i].path);
      else if (same_file)
        errors += problem(allow, true,
                          "trace '%s' given twice (also as '%s'): each process counts once",
                          v[i].path, v[j].path);
      else
        errors += problem(allow, true,
                          "traces '%s' and '%s' are identical (a copy): each process counts once",
                          v[i].path, v[j].path);
      v[j].dropped = true;
      break;
    }
  }

  /* One rank of a communicator in one file only; files that share a communicator are one job. */
  for (int j = 0; j < n; j++) {
    if (!v[j].usable || v[j].dropped) continue;
    for (int i = 0; i < j; i++) {
      if (!v[i].usable || v[i].dropped) continue;
      const member *m = shared_rank(&v[i], &v[j]);
      if (m)
        errors += problem(allow, false,
                          "traces '%s' and '%s' both hold rank %d of communicator "
                          "%016llx%016llx (one process traced twice, or two runs)",
                          v[i].path, v[j].path, m->rank, (unsigned long long)m->key_hi,
                          (unsigned long long)m->key_lo);
      if (shared_comm(&v[i], &v[j])) v[job_root(v, j)].job = job_root(v, i);
    }
  }
  int first = -1, other = -1, jobs = 0;
  for (int i = 0; i < n; i++) {
    if (!v[i].usable || v[i].dropped || !v[i].nmembers || job_root(v, i) != i) continue;
    jobs++;
    if (first < 0)
      first = i;
    else if (other < 0)
      other = i;
  }
  if (jobs > 1)
    errors += problem(allow, false,
                      "traces '%s' and '%s' come from different jobs (no communicator in common: "
                      "keys %016llx%016llx and %016llx%016llx; %d jobs in all)",
                      v[first].path, v[other].path, (unsigned long long)v[first].members[0].key_hi,
                      (unsigned long long)v[first].members[0].key_lo,
                      (unsigned long long)v[other].members[0].key_hi,
                      (unsigned long long)v[other].members[0].key_lo, jobs);

  /* Traces of a program that ended (or was killed) early: not an error, but say why they add
   * nothing. */
  for (int i = 0; i < n; i++) {
    if (!v[i].usable || v[i].dropped || v[i].ncollectives) continue;
    if (!v[i].nevents)
      fprintf(stderr,
              PROG ": warning: trace '%s' holds no calls (did the program end before its first "
                   "all-reduce?)\n",
              v[i].path);
    else
      fprintf(stderr,
              PROG ": warning: trace '%s' holds no collective (all-reduce, all-gather, "
                   "reduce-scatter; %zu other call(s): did the program end before its first?)\n",
              v[i].path, v[i].nevents);
  }

  *nkept = 0;
  for (int i = 0; i < n; i++) {
    if (!v[i].dropped) kept[(*nkept)++] = paths[i];
    free(v[i].members);
    free(v[i].sorted);
  }
  free(v);
  return errors;
}

int main(int argc, char **argv) {
  symmpin_log_set_tool(PROG); /* library warnings read "symmpin-replay: warning: ..." */
  symmpin_replay_options o = {.mode = SYMMPIN_PLAN_SHARED,
                              .warmup = SYMMPIN_WARMUP_DEFAULT,
                              .max_bytes = SYMMPIN_PLAN_MAX_BYTES_DEFAULT,
                              .capture_bytes = SYMMPIN_PLAN_CAPTURE_BYTES_DEFAULT,
                              .kernels = &symmpin_agree_kernels};
  bool allow_mixed = false;
  unsigned long long v;
  int c, m;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (c) {
    case OPT_JSON: o.json = true; break;
    case OPT_ALLOW_MIXED: allow_mixed = true; break;
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
    case OPT_CAPTURE_BYTES:
      if (parse_size(optarg, &v))
        return usage_error("bad --capture-bytes '%s' (bytes, K/M/G)", optarg);
      o.capture_bytes = v;
      break;
    default: return option_error(c, argv);
    }
  }
  if (optind == argc) return usage_error("no TRACE given");
  int n = argc - optind, nkept = 0;
  const char **kept = calloc((size_t)n, sizeof(char *));
  if (!kept) {
    fprintf(stderr, PROG ": out of memory\n");
    return 1;
  }
  if (check_inputs(argv + optind, n, allow_mixed, kept, &nkept) > 0) {
    free(kept);
    return EXIT_NOT_ONE_JOB;
  }
  symmpin_status st = symmpin_replay_run(kept, nkept, &o, stdout);
  free(kept);
  return st == SYMMPIN_OK ? 0 : 1;
}
