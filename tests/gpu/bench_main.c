/* symmpin-bench: latency of NCCL's collectives against symmpin's one-shot kernels, in one run:
 * the all-reduce (sum), and with --colls the all-gather and the reduce-scatter (sum), whose size
 * is the per-rank chunk (NCCL's count argument).
 *
 * Variants, each timed eagerly (a host launch per call, back to back) and as CUDA-graph replays:
 *   nccl      ncclAllReduce / ncclAllGather / ncclReduceScatter on cudaMalloc'd buffers;
 *   nccl_win  the same on ncclMemAlloc'd buffers registered as symmetric windows
 *             (NCCL_WIN_COLL_SYMMETRIC: NCCL's own fastest small-message path);
 *   staged    symmpin_kernel_launch, input STAGED, user buffer -> separate output;
 *   direct    symmpin_kernel_launch, input IN_SLOT, input already in the slot's data area (the
 *             all-reduce's only: "n/a" for the others, which have no in-slot form).
 * symmpin's slots live in a symmetric pool (symmem/pool.h) agreed over a board (symmem/board.h),
 * exactly as the library's engine gets them. Results are checked before timing (random non-zero
 * data; all-reduce and reduce-scatter: a float64 reference over every rank's inputs, symmpin
 * bitwise against NCCL on <= 2 ranks; all-gather: bitwise every rank's input) and symmpin's
 * outputs again after timing (the replays must leave the same bits).
 *
 * Modes: one process per GPU (default; this program spawns itself once per rank with posix_spawn,
 * never fork after CUDA init; the mode that counts for eager numbers) and --single (one thread
 * drives every GPU, as single-process programs do). Why rounds: eager small-message times are
 * bimodal run to run, so every size is timed in R rounds that alternate the four variants, and the
 * tables give the best and the median of each. docs/bench.md explains the output and the targets.
 *
 * Robustness: every CUDA/NCCL/symmpin return code is checked (file:line on failure); host barriers
 * (board rounds) and GPU waits give up after --timeout seconds; symmpin kernels get ~10 s of clock
 * cycles and a host-mapped error record; a watchdog thread ends a rank that makes no progress.
 * Last line: `symmpin-bench: done`, or `symmpin-bench: N passed, M failed` (exit status 1).
 *
 * This file: options, and the outline of a run; bench.h lists the other files' jobs. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/gpu/bench.h"

/* ------------------------------------------------------------------------------- options */

static const size_t default_sizes[] = {8,        32,        128,       512,       1 << 10,
                                       2 << 10,  4 << 10,   8 << 10,   16 << 10,  32 << 10,
                                       64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20,
                                       2 << 20,  8 << 20,   32 << 20,  64 << 20};

static void usage(void) {
  printf("usage: " BENCH " [--single] [--ranks N] [--colls LIST] [--sizes LIST] [--dtypes LIST]\n"
         "                     [--rounds R] [--csv PATH] [--quick] [--seed S] [--timeout SECONDS]\n"
         "Collective latency of NCCL (plain and symmetric windows) against symmpin's one-shot\n"
         "kernels, eager and CUDA graph, in one run (docs/bench.md).\n"
         "  --single        one thread drives every GPU (default: one process per GPU)\n"
         "  --ranks N       GPUs to use, 1..%d (default: all visible)\n"
         "  --colls LIST    allreduce,allgather,reducescatter (default allreduce; sums)\n"
         "  --sizes LIST    bytes per rank, comma separated, K/M/G suffixes (default 8 .. 64M);\n"
         "                  allgather and reducescatter: the per-rank chunk (NCCL's count), so\n"
         "                  their larger buffer is N x the size\n"
         "  --dtypes LIST   bf16,f32 (default both)\n"
         "  --rounds R      alternating rounds per size, 1..%d (default 5; 2 with --quick)\n"
         "  --csv PATH      where rank 0 writes the CSV, a size at a time (default\n"
         "                  symmpin-bench.csv; scripts/plot_bench.py plots it)\n"
         "  --seed S        input data seed (default: random, printed)\n"
         "  --timeout S     host barriers and GPU waits give up after S seconds (default 120)\n"
         "  --quick         2 rounds and 1/5 of the calls (smoke test)\n"
         "  -h, --help      this text\n"
         "  --version       the version and git revision\n",
         SYMMPIN_KERNEL_MAX_RANKS, MAX_ROUNDS);
}

static size_t parse_size(const char *s) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return 0;
  switch (*end) {
  case 'k':
  case 'K':
    v <<= 10;
    end++;
    break;
  case 'm':
  case 'M':
    v <<= 20;
    end++;
    break;
  case 'g':
  case 'G':
    v <<= 30;
    end++;
    break;
  default: break;
  }
  if (*end == 'B' || *end == 'b') end++;
  return *end ? 0 : (size_t)v;
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* bf16 and f32 only: the host-side data generator and checks know these two. */
static int parse_dtype(const char *s) {
  if (!strcmp(s, "bfloat16"))
    s = "bf16";
  else if (!strcmp(s, "float") || !strcmp(s, "float32"))
    s = "f32";
  int d = symmpin_dtype_from_name(s);
  return d == SYMMPIN_BFLOAT16 || d == SYMMPIN_FLOAT32 ? d : -1;
}

enum {
  OPT_SINGLE = 256,
  OPT_QUICK,
  OPT_RANKS,
  OPT_ROUNDS,
  OPT_CSV,
  OPT_SEED,
  OPT_TIMEOUT,
  OPT_SIZES,
  OPT_DTYPES,
  OPT_COLLS,
  OPT_VERSION,
  OPT_CHILD,   /* internal: --child RANK --nccl-id HEX, added by the parent */
  OPT_NCCL_ID, /* internal */
};

static const struct option longopts[] = {
    {"single", no_argument, NULL, OPT_SINGLE},
    {"quick", no_argument, NULL, OPT_QUICK},
    {"ranks", required_argument, NULL, OPT_RANKS},
    {"rounds", required_argument, NULL, OPT_ROUNDS},
    {"csv", required_argument, NULL, OPT_CSV},
    {"seed", required_argument, NULL, OPT_SEED},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"dtypes", required_argument, NULL, OPT_DTYPES},
    {"colls", required_argument, NULL, OPT_COLLS},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {"child", required_argument, NULL, OPT_CHILD},
    {"nccl-id", required_argument, NULL, OPT_NCCL_ID},
    {NULL, 0, NULL, 0},
};

/* Hands each item of the comma list `val` to `add` (which stores it in o, or returns a usage
 * error's exit status); a list of no item is an error naming `option` and its `noun`. */
static int parse_list(opts *o, const char *val, const char *option, const char *noun,
                      int (*add)(opts *o, const char *item)) {
  char buf[1024];
  snprintf(buf, sizeof(buf), "%s", val);
  int items = 0, rc;
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), items++)
    if ((rc = add(o, t)) != 0) return rc;
  if (!items) return symmpin_test_usage_error(BENCH, "%s names no %s", option, noun);
  return 0;
}

/* Sizes are kept sorted (the report's rows go up in size); one given twice is an error. */
static int add_size(opts *o, const char *t) {
  size_t s = parse_size(t);
  if (!s || o->nsizes == MAX_SIZES)
    return symmpin_test_usage_error(BENCH, "bad size '%s' (or more than %d sizes)", t, MAX_SIZES);
  for (int k = 0; k < o->nsizes; k++)
    if (o->sizes[k] == s) return symmpin_test_usage_error(BENCH, "size %zu given twice", s);
  o->sizes[o->nsizes++] = s;
  qsort(o->sizes, (size_t)o->nsizes, sizeof(size_t), cmp_size);
  return 0;
}

static int add_dtype(opts *o, const char *t) {
  int d = parse_dtype(t);
  for (int k = 0; k < o->ndtypes && d >= 0; k++)
    if (o->dtypes[k] == d) d = -1;
  if (d < 0 || o->ndtypes == MAX_DTYPES)
    return symmpin_test_usage_error(BENCH, "unknown or repeated dtype '%s' (bf16, f32)", t);
  o->dtypes[o->ndtypes++] = d;
  return 0;
}

/* Collectives by common/types.h's names, in the order given. */
static int add_coll(opts *o, const char *t) {
  int c = symmpin_coll_from_name(t);
  for (int k = 0; k < o->ncolls && c >= 0; k++)
    if (o->colls[k] == c) c = -1;
  if (c < 0)
    return symmpin_test_usage_error(
        BENCH, "unknown or repeated collective '%s' (allreduce, allgather, reducescatter)", t);
  o->colls[o->ncolls++] = c;
  return 0;
}

/* Returns -1 to go on, else the exit status (0 after --help or --version, 2 for a usage error). */
static int parse_opts(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof(*o));
  o->rounds = 5;
  o->timeout_s = 120;
  o->child_rank = -1;
  o->csv = "symmpin-bench.csv";
  for (size_t i = 0; i < sizeof(default_sizes) / sizeof(default_sizes[0]); i++)
    o->sizes[o->nsizes++] = default_sizes[i];
  o->dtypes[o->ndtypes++] = SYMMPIN_BFLOAT16;
  o->dtypes[o->ndtypes++] = SYMMPIN_FLOAT32;
  o->colls[o->ncolls++] = SYMMPIN_COLL_ALLREDUCE;
  bool rounds_set = false;
  long v = 0;
  int c, rc;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (c) {
    case 'h': usage(); return 0;
    case OPT_VERSION: return symmpin_test_print_version(BENCH);
    case OPT_SINGLE: o->single = true; break;
    case OPT_QUICK: o->quick = true; break;
    case OPT_RANKS:
      if (!symmpin_test_parse_int(optarg, 1, SYMMPIN_KERNEL_MAX_RANKS, &v))
        return symmpin_test_usage_error(BENCH, "--ranks must be 1..%d", SYMMPIN_KERNEL_MAX_RANKS);
      o->nranks = (int)v;
      break;
    case OPT_ROUNDS:
      if (!symmpin_test_parse_int(optarg, 1, MAX_ROUNDS, &v))
        return symmpin_test_usage_error(BENCH, "--rounds must be 1..%d", MAX_ROUNDS);
      o->rounds = (int)v;
      rounds_set = true;
      break;
    case OPT_CSV: o->csv = optarg; break;
    case OPT_SEED: {
      char *end = NULL;
      errno = 0;
      o->seed = strtoull(optarg, &end, 0);
      if (errno || end == optarg || *end || optarg[0] == '-')
        return symmpin_test_usage_error(BENCH, "bad --seed '%s' (a number, 0x... for hex)", optarg);
      o->seed_set = true;
      break;
    }
    case OPT_TIMEOUT:
      if (!symmpin_test_parse_int(optarg, 0, 1000000, &v))
        return symmpin_test_usage_error(BENCH, "--timeout takes seconds, 0..1000000");
      o->timeout_s = v < 5 ? 5 : (unsigned)v;
      break;
    case OPT_SIZES:
      o->nsizes = 0;
      if ((rc = parse_list(o, optarg, "--sizes", "size", add_size)) != 0) return rc;
      break;
    case OPT_DTYPES:
      o->ndtypes = 0;
      if ((rc = parse_list(o, optarg, "--dtypes", "datatype", add_dtype)) != 0) return rc;
      break;
    case OPT_COLLS:
      o->ncolls = 0;
      if ((rc = parse_list(o, optarg, "--colls", "collective", add_coll)) != 0) return rc;
      break;
    case OPT_CHILD:
      if (!symmpin_test_parse_int(optarg, 0, SYMMPIN_KERNEL_MAX_RANKS - 1, &v))
        return symmpin_test_usage_error(BENCH, "bad --child '%s'", optarg);
      o->child_rank = (int)v;
      break;
    case OPT_NCCL_ID: o->child_id = optarg; break;
    default: return symmpin_test_option_error(BENCH, c, argv, longopts);
    }
  }
  if (optind < argc)
    return symmpin_test_usage_error(BENCH, "unexpected argument '%s'", argv[optind]);
  if (o->quick && !rounds_set) o->rounds = 2;
  return -1;
}

/* ------------------------------------------------------------------------------- the run */

static void bench_run(bench *b, const ncclUniqueId *id, symmpin_comm_key key) {
  b->tid = (uint64_t)syscall(SYS_gettid);
  b->form_ok[0] = b->form_ok[1] = true;
  b->max_bytes = b->o.sizes[b->o.nsizes - 1];
  bool gathers = false; /* an all-gather in the run: host_ref holds what it must receive */
  b->max_buf = b->max_bytes;
  for (int k = 0; k < b->o.ncolls; k++) {
    size_t wide = wide_count(b, b->o.colls[k], b->max_bytes); /* "elements" of 1 byte */
    if (wide > b->max_buf) b->max_buf = wide;
    gathers |= b->o.colls[k] == SYMMPIN_COLL_ALLGATHER;
  }
  b->buf_bytes = (b->max_buf + ((size_t)2 << 20) - 1) / ((size_t)2 << 20) * ((size_t)2 << 20);
  b->reporter = b->loc[0].rank == 0;
  size_t nus = (size_t)MAX_COLLS * M_COUNT * MAX_DTYPES * MAX_SIZES * V_COUNT * (size_t)b->o.rounds;
  b->us = malloc(nus * sizeof(double));
  b->bad = calloc((size_t)MAX_COLLS * MAX_DTYPES * MAX_SIZES * V_COUNT, 1);
  b->host_in = malloc(b->max_buf);
  b->host_ref = gathers ? malloc(b->max_buf) : NULL;
  for (int v = 0; v < V_COUNT; v++) b->host_out[v] = malloc(b->max_buf);
  if (!b->us || !b->bad || !b->host_in || (gathers && !b->host_ref))
    bench_die("out of host memory");
  for (int v = 0; v < V_COUNT; v++)
    if (!b->host_out[v]) bench_die("out of host memory");
  for (size_t i = 0; i < nus; i++) b->us[i] = NAN;

  bench_tick("setup", 0);
  bench_setup_devices(b);
  bench_tick("ncclCommInit", 0);
  if (id) {
    SYMMPIN_TEST_CUDA(cudaSetDevice(b->loc[0].device));
    SYMMPIN_TEST_NCCL(ncclCommInitRank(&b->loc[0].comm, b->n, *id, b->loc[0].rank));
  } else {
    ncclComm_t comms[SYMMPIN_KERNEL_MAX_RANKS];
    int devs[SYMMPIN_KERNEL_MAX_RANKS];
    for (int r = 0; r < b->n; r++) devs[r] = b->loc[r].device;
    SYMMPIN_TEST_NCCL(ncclCommInitAll(comms, b->n, devs));
    for (int r = 0; r < b->n; r++) b->loc[r].comm = comms[r];
  }
  for (int l = 0; l < b->nlocal; l++)
    SYMMPIN_TEST_OK(symmpin_board_open(key, b->loc[l].rank, b->n, &b->loc[l].board));
  bench_tick("buffers and windows", 0);
  bench_setup_buffers(b);
  bench_tick("pools", 0);
  bench_setup_pools(b);
  if (b->reporter) {
    bench_print_header(b);
    if (!b->pool_ok) b->loc[0].failed++; /* no symmpin numbers: the run cannot judge anything */
    bench_report_begin(b);
  }

  for (int c = 0; c < b->o.ncolls; c++) {
    for (int d = 0; d < b->o.ndtypes; d++) {
      for (int s = 0; s < b->o.nsizes; s++) {
        bench_run_size(b, c, d, s);
        if (b->reporter) bench_report_size(b, c, d, s); /* as it goes: lines per mode, CSV rows */
      }
    }
  }

  if (b->reporter) {
    bench_print_tables(b);
    bench_print_verdicts(b);
    bench_report_end(b);
    fflush(stdout);
  }
  bench_teardown(b);
  free(b->us);
  free(b->bad);
  free(b->host_in);
  free(b->host_ref);
  for (int v = 0; v < V_COUNT; v++) free(b->host_out[v]);
}

static bench *bench_new(const opts *o, int n, int nlocal, int first_rank) {
  bench *b = calloc(1, sizeof(*b));
  if (!b) bench_die("out of host memory");
  b->o = *o;
  b->n = n;
  b->nlocal = nlocal;
  b->loc = calloc((size_t)nlocal, sizeof(rank_st));
  if (!b->loc) bench_die("out of host memory");
  for (int l = 0; l < nlocal; l++) {
    b->loc[l].rank = first_rank + l;
    b->loc[l].device = first_rank + l; /* rank r on GPU r */
  }
  return b;
}

/* --single: this thread drives every rank. */
static int run_single(const opts *o) {
  int n = bench_visible_ranks(o);
  if (!n) return bench_final_line(0, 1);
  bench_watchdog_start(o->timeout_s + 60);
  bench *b = bench_new(o, n, n, 0);
  symmpin_comm_key key;
  if (!symmpin_test_random_bytes(&key, sizeof(key))) bench_die("getrandom failed");
  bench_run(b, NULL, key);
  int passed = 0, failed = 0;
  for (int l = 0; l < n; l++) {
    passed += b->loc[l].passed;
    failed += b->loc[l].failed;
  }
  free(b->loc);
  free(b);
  return bench_final_line(passed, failed);
}

/* A rank spawned by the parent (bench_proc.c): reports its counts there. */
static int run_child(const opts *o) {
  bench_rank = o->child_rank;
  ncclUniqueId id;
  const char *hex = o->child_id;
  if (!hex || strlen(hex) != 2 * sizeof(id)) bench_die("bad --nccl-id");
  for (size_t i = 0; i < sizeof(id); i++) {
    unsigned x = 0;
    if (sscanf(hex + 2 * i, "%2x", &x) != 1) bench_die("bad --nccl-id");
    ((unsigned char *)&id)[i] = (unsigned char)x;
  }
  int n = o->nranks;
  if (n < 1 || bench_rank < 0 || bench_rank >= n)
    bench_die("bad --child rank %d of %d", bench_rank, n);
  alarm(3600); /* last resort: the watchdog and the timeouts should fire long before */
  bench_watchdog_start(o->timeout_s + 60);
  bench *b = bench_new(o, n, 1, bench_rank);
  bench_run(b, &id, symmpin_comm_key_of_bytes(&id, sizeof(id)));
  int passed = b->loc[0].passed, failed = b->loc[0].failed;
  bench_child_report(bench_rank, passed, failed);
  free(b->loc);
  free(b);
  return failed ? 1 : 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* Never multicast (NVLS): symmpin does not use it, and the comparison is against what NCCL does
   * without it. A value the user set wins. */
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  opts o;
  int rc = parse_opts(argc, argv, &o);
  if (rc >= 0) return rc;
  if (o.child_rank >= 0) return run_child(&o);
  if ((rc = bench_csv_usable(o.csv)) != 0) return rc; /* before minutes of set-up, not after */
  if (!o.seed_set) {
    if (!symmpin_test_random_bytes(&o.seed, sizeof(o.seed))) bench_die("getrandom failed");
    o.seed_set = true;
  }
  if (o.single) return run_single(&o);
  return bench_run_parent(&o, argc, argv);
}
