/* symmpin-bench's report (rank 0): the header; as the run goes, one line per (collective, size,
 * mode) in the style of NCCL's tests and the CSV rows of that size (bench_format.c formats both),
 * flushed at once so that a long or interrupted run shows what it measured; then the tables of
 * best and median times per collective, the verdict block, and the last line. docs/bench.md
 * documents every line; scripts/gpu-suite.sh reads the exit status. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <unistd.h>

#include "tests/gpu/bench.h"
#include "tests/gpu/bench_format.h"

const char *const bench_v_name[V_COUNT] = {"nccl", "nccl_win", "symmpin_staged", "symmpin_direct"};
const char *const bench_v_short[V_COUNT] = {"nccl", "nccl_win", "staged", "direct"};
const char *const bench_m_name[M_COUNT] = {"eager", "graph"};

static void fmt_size(size_t v, char *buf, size_t len) {
  if (v >= (1u << 20) && v % (1u << 20) == 0)
    snprintf(buf, len, "%zuM", v >> 20);
  else if (v >= 1024 && v % 1024 == 0)
    snprintf(buf, len, "%zuK", v >> 10);
  else
    snprintf(buf, len, "%zu", v);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

enum { ST_BEST, ST_MEDIAN };

/* Best or median over the rounds that measured something; NAN if none did. */
static double stat_of(bench *b, int c, int m, int d, int s, int v, int which) {
  double x[MAX_ROUNDS];
  int k = 0;
  const double *p = us_at(b, c, m, d, s, v);
  for (int r = 0; r < b->o.rounds; r++)
    if (!isnan(p[r])) x[k++] = p[r];
  if (!k) return NAN;
  qsort(x, (size_t)k, sizeof(double), cmp_double);
  if (which == ST_BEST) return x[0];
  return k % 2 ? x[k / 2] : 0.5 * (x[k / 2 - 1] + x[k / 2]);
}

static double min_of(bench *b, int c, int m, int d, int s, uint32_t mask, int which) {
  double best = NAN;
  for (int v = 0; v < V_COUNT; v++) {
    if (!(mask & (1u << v))) continue;
    double x = stat_of(b, c, m, d, s, v, which);
    if (!isnan(x) && (isnan(best) || x < best)) best = x;
  }
  return best;
}

/* min(symmpin variants) / min(variants in den). */
static double ratio(bench *b, int c, int m, int d, int s, uint32_t den, int which) {
  return min_of(b, c, m, d, s, SYMM_MASK, which) / min_of(b, c, m, d, s, den, which);
}

/* Whether the run has a collective whose variants are not all there ("n/a" cells). */
static bool any_not_run(bench *b) {
  for (int c = 0; c < b->o.ncolls; c++)
    for (int d = 0; d < b->o.ndtypes; d++)
      for (int v = 0; v < V_COUNT; v++)
        if (!bench_exists(b, v, b->o.colls[c], b->o.dtypes[d])) return true;
  return false;
}

static void print_cell(double x, bool bad, bool not_run) {
  if (not_run)
    printf(" %8s ", "n/a");
  else if (isnan(x))
    printf(" %8s ", "-");
  else
    printf(" %8.2f%c", x, bad ? '!' : ' ');
}

void bench_print_tables(bench *b) {
  for (int c = 0; c < b->o.ncolls; c++) {
    int coll = b->o.colls[c];
    for (int m = 0; m < M_COUNT; m++) {
      for (int d = 0; d < b->o.ndtypes; d++) {
        printf("\n== %s, %s, %s: us per call; left: best of %d rounds, right: median; "
               "ratio = min(symmpin) / min(nccl, nccl_win)%s ==\n",
               symmpin_coll_name(coll), bench_m_name[m], symmpin_dtype_name(b->o.dtypes[d]),
               b->o.rounds, coll == SYMMPIN_COLL_ALLREDUCE ? "" : "; bytes = the per-rank chunk");
        printf("%9s %5s |", "bytes", "calls");
        for (int half = 0; half < 2; half++) {
          for (int v = 0; v < V_COUNT; v++) printf(" %9s", bench_v_short[v]);
          printf(" %6s |", "ratio");
        }
        printf("\n");
        for (int s = 0; s < b->o.nsizes; s++) {
          char sz[24];
          fmt_size(b->o.sizes[s], sz, sizeof(sz));
          printf("%9s %5d |", sz, b->iters[c][s]);
          for (int which = ST_BEST; which <= ST_MEDIAN; which++) {
            for (int v = 0; v < V_COUNT; v++)
              print_cell(stat_of(b, c, m, d, s, v, which), *bad_at(b, c, d, s, v) != 0,
                         !bench_exists(b, v, coll, b->o.dtypes[d]));
            double r = ratio(b, c, m, d, s, NCCL_MASK, which);
            if (isnan(r))
              printf(" %6s |", "-");
            else
              printf(" %6.2f |", r);
          }
          printf("\n");
        }
      }
    }
  }
  printf("('!' = a result check of that variant failed at that size; '-' = not measured)\n");
  if (any_not_run(b))
    printf("('n/a' = not run: the kernels have no in-slot form of allgather and reducescatter, "
           "kernels/select.c)\n");
}

typedef struct worst {
  double r, r_best; /* worst median-based ratio, and the best-of-rounds ratio at the same point */
  size_t bytes;
  int d, m;
  int measured, missing;
  bool bad;
} worst;

static void worst_add(bench *b, worst *w, int c, int m, int d, int s, uint32_t den) {
  double r = ratio(b, c, m, d, s, den, ST_MEDIAN);
  for (int v = 0; v < V_COUNT; v++)
    if ((SYMM_MASK | den) & (1u << v)) w->bad |= *bad_at(b, c, d, s, v) != 0;
  if (isnan(r)) {
    w->missing++;
    return;
  }
  if (!w->measured || r > w->r) {
    w->r = r;
    w->r_best = ratio(b, c, m, d, s, den, ST_BEST);
    w->bytes = b->o.sizes[s];
    w->d = d;
    w->m = m;
  }
  w->measured++;
}

static void print_target(bench *b, const char *what, const worst *w, double limit,
                         const char *note) {
  printf("%-62s ", what);
  if (!w->measured) {
    printf("NOT MEASURED (no size of that range ran)%s\n", note);
    return;
  }
  char sz[24];
  fmt_size(w->bytes, sz, sizeof(sz));
  /* Numbers of a variant that computed wrong results judge nothing. */
  const char *verdict = w->bad          ? "NOT JUDGED (result checks failed in this range)"
                        : w->r <= limit ? "MET"
                                        : "NOT MET";
  printf("%s  worst %.2f at %s %s %s [best-of-rounds %.2f]%s%s\n", verdict, w->r, sz,
         bench_m_name[w->m], symmpin_dtype_name(b->o.dtypes[w->d]), w->r_best,
         w->missing ? " (some sizes not measured)" : "", note);
}

/* The index of coll in o.colls, or -1. */
static int coll_index(bench *b, int coll) {
  for (int c = 0; c < b->o.ncolls; c++)
    if (b->o.colls[c] == coll) return c;
  return -1;
}

/* The first size whose median ratio exceeds 1 for one (collective, mode, dtype). */
static void print_stops_winning(bench *b, int c, int m, int d) {
  int first_loss = -1, last_win = -1, losses = 0;
  char lost[512] = "";
  for (int s = 0; s < b->o.nsizes; s++) {
    double r = ratio(b, c, m, d, s, NCCL_MASK, ST_MEDIAN);
    if (isnan(r)) continue;
    if (r <= 1.0) {
      if (first_loss < 0) last_win = s;
      continue;
    }
    if (first_loss < 0) first_loss = s;
    char sz[24];
    fmt_size(b->o.sizes[s], sz, sizeof(sz));
    size_t len = strlen(lost);
    snprintf(lost + len, sizeof(lost) - len, "%s%s (%.2f)", losses++ ? ", " : "", sz, r);
  }
  printf("symmpin stops winning, %s %s %s: ", symmpin_coll_name(b->o.colls[c]), bench_m_name[m],
         symmpin_dtype_name(b->o.dtypes[d]));
  char a[24] = "-", z[24] = "-";
  if (last_win >= 0) fmt_size(b->o.sizes[last_win], a, sizeof(a));
  if (first_loss < 0 && last_win < 0) {
    printf("nothing measured\n");
  } else if (first_loss < 0) {
    printf("never (wins through %s)\n", a);
  } else {
    fmt_size(b->o.sizes[first_loss], z, sizeof(z));
    if (last_win >= 0)
      printf("at %s (wins through %s); slower at: %s\n", z, a, lost);
    else
      printf("at %s, the smallest size measured; slower at: %s\n", z, lost);
  }
}

void bench_print_verdicts(bench *b) {
  const size_t K = 1024, M = 1024 * 1024;
  printf("\n== verdict (ratios from medians over the rounds; best-of-rounds in brackets) ==\n");
  /* The targets are the all-reduce's (issue 3); the other collectives get the last one. */
  int ar = coll_index(b, SYMMPIN_COLL_ALLREDUCE);
  if (ar >= 0) {
    worst t1 = {0}, t2 = {0}, t2b = {0}, t3 = {0};
    for (int d = 0; d < b->o.ndtypes; d++) {
      for (int s = 0; s < b->o.nsizes; s++) {
        size_t x = b->o.sizes[s];
        if (x >= K && x <= 64 * K) {
          worst_add(b, &t1, ar, M_GRAPH, d, s, 1u << V_WIN);
          worst_add(b, &t2, ar, M_EAGER, d, s, 1u << V_NCCL);
          worst_add(b, &t2b, ar, M_EAGER, d, s, NCCL_MASK);
        }
        if (x <= M) {
          worst_add(b, &t3, ar, M_EAGER, d, s, NCCL_MASK);
          worst_add(b, &t3, ar, M_GRAPH, d, s, NCCL_MASK);
        }
      }
    }
    print_target(
        b, "graph 1K-64K: symmpin <= 0.75 x nccl_win (symmetric window)", &t1, 0.75,
        b->win_ok ? "" : " (NCCL registered no window: nccl_win is plain NCCL on ncclMemAlloc)");
    print_target(b, "eager 1K-64K: symmpin <= 0.70 x nccl", &t2, 0.70,
                 b->o.single ? " (single-process run: the eager target counts per process per GPU)"
                             : "");
    print_target(b, "  (same, against the best NCCL variant)", &t2b, 0.70, "");
    print_target(b, "<= 1M, eager and graph: symmpin <= 1.00 x best NCCL", &t3, 1.0, "");
  } else {
    printf("all-reduce targets: not judged (allreduce not in --colls)\n");
  }
  for (int c = 0; c < b->o.ncolls; c++) {
    if (c == ar) continue;
    worst t = {0};
    for (int d = 0; d < b->o.ndtypes; d++) {
      for (int s = 0; s < b->o.nsizes; s++) {
        if (b->o.sizes[s] > M) continue;
        worst_add(b, &t, c, M_EAGER, d, s, NCCL_MASK);
        worst_add(b, &t, c, M_GRAPH, d, s, NCCL_MASK);
      }
    }
    char what[96];
    snprintf(what, sizeof(what), "%s <= 1M chunk, eager and graph: symmpin <= 1.00 x best NCCL",
             symmpin_coll_name(b->o.colls[c]));
    print_target(b, what, &t, 1.0, "");
  }
  for (int c = 0; c < b->o.ncolls; c++)
    for (int m = 0; m < M_COUNT; m++)
      for (int d = 0; d < b->o.ndtypes; d++) print_stops_winning(b, c, m, d);
}

/* --csv, checked before any GPU work: an existing file must be writable (it is not touched yet),
 * a new one creatable (it is created and removed again). */
int bench_csv_usable(const char *path) {
  struct stat st;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return symmpin_test_usage_error(BENCH, "cannot write --csv '%s': a directory", path);
    if (access(path, W_OK) != 0)
      return symmpin_test_usage_error(BENCH, "cannot write --csv '%s': %s", path, strerror(errno));
    return 0;
  }
  FILE *f = fopen(path, "w");
  if (!f)
    return symmpin_test_usage_error(BENCH, "cannot write --csv '%s': %s", path, strerror(errno));
  fclose(f);
  unlink(path);
  return 0;
}

/* The implementations at one (collective, mode, dtype, size), as bench_format.c takes them. */
static bench_point point_of(bench *b, int c, int m, int d, int s, bench_impl impl[V_COUNT]) {
  int coll = b->o.colls[c];
  for (int v = 0; v < V_COUNT; v++)
    impl[v] = (bench_impl){.name = bench_v_name[v],
                           .label = bench_v_short[v],
                           .symmpin = (SYMM_MASK & (1u << v)) != 0,
                           .best_us = stat_of(b, c, m, d, s, v, ST_BEST),
                           .median_us = stat_of(b, c, m, d, s, v, ST_MEDIAN),
                           .check_ok = !*bad_at(b, c, d, s, v),
                           .not_run = !bench_exists(b, v, coll, b->o.dtypes[d]),
                           .samples_us = us_at(b, c, m, d, s, v),
                           .nsamples = b->o.rounds};
  size_t bytes = b->o.sizes[s];
  return (bench_point){.coll = coll,
                       .mode = bench_m_name[m],
                       .dtype = symmpin_dtype_name(b->o.dtypes[d]),
                       .bytes = bytes,
                       .count = bytes / symmpin_dtype_size(b->o.dtypes[d]),
                       .nranks = b->n,
                       .calls = b->iters[c][s],
                       .rounds = b->o.rounds,
                       .impl = impl,
                       .nimpl = V_COUNT};
}

static void csv_failed(bench *b, const char *what) {
  fprintf(stderr, BENCH ": %s %s: %s; no more CSV rows\n", what, b->o.csv, strerror(errno));
  if (b->csv) fclose(b->csv);
  b->csv = NULL;
  b->loc[0].failed++;
}

void bench_report_begin(bench *b) {
  char buf[2048];
  bench_impl impl[V_COUNT];
  bench_point p = point_of(b, 0, 0, 0, 0, impl);
  b->csv = fopen(b->o.csv, "w");
  if (!b->csv)
    csv_failed(b, "cannot write");
  else if (bench_format_csv_header(buf, sizeof buf) < 0 || fputs(buf, b->csv) == EOF)
    csv_failed(b, "writing");
  printf("\n" BENCH ": per size as it runs: median of %d rounds; algbw = bytes / time, busbw = "
         "algbw x 2(n-1)/n; ratio = min(staged, direct) / min(nccl, nccl_win); '!' = a result "
         "check failed, '-' = not measured\n",
         b->o.rounds);
  if (b->o.ncolls > 1 || b->o.colls[0] != SYMMPIN_COLL_ALLREDUCE)
    printf(BENCH ": allgather and reducescatter: size and count are the per-rank chunk (NCCL's "
                 "count), algbw = n x bytes / time, busbw = algbw x (n-1)/n; 'n/a' = not run (no "
                 "in-slot form)\n");
  if (bench_format_line_header(&p, buf, sizeof buf) > 0) fputs(buf, stdout);
  fflush(stdout);
}

void bench_report_size(bench *b, int c, int d, int s) {
  if (b->o.sizes[s] % symmpin_dtype_size(b->o.dtypes[d])) return; /* not run: no line, no row */
  char buf[2048];
  for (int m = 0; m < M_COUNT; m++) {
    bench_impl impl[V_COUNT];
    bench_point p = point_of(b, c, m, d, s, impl);
    if (bench_format_line(&p, buf, sizeof buf) > 0) fputs(buf, stdout);
    for (int v = 0; v < V_COUNT && b->csv; v++)
      if (bench_format_csv_row(&p, v, buf, sizeof buf) < 0 || fputs(buf, b->csv) == EOF)
        csv_failed(b, "writing");
  }
  fflush(stdout);
  if (b->csv && fflush(b->csv) != 0) csv_failed(b, "writing");
}

void bench_report_end(bench *b) {
  if (!b->csv) return;
  FILE *f = b->csv;
  b->csv = NULL;
  if (fclose(f) != 0) {
    fprintf(stderr, BENCH ": writing %s failed: %s\n", b->o.csv, strerror(errno));
    b->loc[0].failed++;
    return;
  }
  printf(BENCH ": wrote %s\n", b->o.csv);
}

void bench_print_header(bench *b) {
  int v = 0;
  SYMMPIN_TEST_NCCL(ncclGetVersion(&v));
  printf(BENCH ": %s, %d rank(s), NCCL %d.%d.%d (built against %d.%d.%d), NCCL_NVLS_ENABLE=%s\n",
         b->o.single ? "single process (one thread drives every GPU)" : "one process per GPU", b->n,
         v / 10000, (v % 10000) / 100, v % 100, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
         getenv("NCCL_NVLS_ENABLE") ? getenv("NCCL_NVLS_ENABLE") : "(unset)");
  for (int r = 0; r < b->n; r++) printf(BENCH ": rank %d: %s\n", r, b->gpu_desc[r]);
  printf(BENCH ": NCCL symmetric windows: %s\n",
         b->win_ok ? "registered on every rank"
                   : "NOT registered (communicator without symmetric support): nccl_win is plain "
                     "NCCL on ncclMemAlloc'd buffers");
  if (b->pool_ok) {
    printf(BENCH ": symmpin pool: a slot per slot class,");
    for (int cls = 0; cls < SYMMPIN_KERNEL_SLOT_CLASSES; cls++)
      if (b->slot_bytes[cls])
        printf(" %s %zu bytes at %zu;", symmpin_kernel_slot_class_name(cls), b->slot_bytes[cls],
               b->slot_off[cls]);
    printf(" kernel timeout %" PRIu64 " cycles\n", b->timeout_cycles);
  } else
    printf(BENCH ": symmpin pool UNAVAILABLE (%s): symmpin columns are empty\n", b->no_pool_why);
  printf(BENCH ": collectives");
  for (int c = 0; c < b->o.ncolls; c++) printf(" %s", symmpin_coll_name(b->o.colls[c]));
  bool chunks = b->o.ncolls > 1 || b->o.colls[0] != SYMMPIN_COLL_ALLREDUCE;
  printf("%s\n", chunks ? " (sums; allgather and reducescatter sizes are per-rank chunks)" : "");
  printf(BENCH ": %d sizes %zu..%zu bytes, dtypes", b->o.nsizes, b->o.sizes[0],
         b->o.sizes[b->o.nsizes - 1]);
  for (int d = 0; d < b->o.ndtypes; d++) printf(" %s", symmpin_dtype_name(b->o.dtypes[d]));
  printf(", %d rounds, seed 0x%016" PRIx64 "%s\n", b->o.rounds, b->o.seed,
         b->o.quick ? ", --quick" : "");
  printf(BENCH ": eager = host launch per call (10 warm-up calls, then N timed); graph = N calls "
               "captured, one warm replay, one timed; CUDA events on rank 0's stream\n");
}

int bench_final_line(int passed, int failed) {
  if (failed == 0) {
    printf(BENCH ": %d result checks passed\n", passed);
    printf(BENCH ": done\n");
    return 0;
  }
  printf(BENCH ": %d passed, %d failed\n", passed, failed);
  return 1;
}
