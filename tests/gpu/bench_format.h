/* symmpin-bench's per-size lines and CSV rows as pure functions of numbers: no CUDA, no NCCL, no
 * state. bench_report.c fills a bench_point per (collective, dtype, size, mode) as the run goes and
 * prints what these functions format; test_bench_format checks them on the CPU with made-up numbers
 * (docs/bench.md shows the line and the CSV).
 *
 * Units: times in microseconds per call; bandwidths in GB/s = 1e9 bytes per second, as NCCL's
 * tests print them (NCCL's doc/PERFORMANCE.md): algbw = the call's size / time, where the size is
 * the all-reduce's buffer and the all-gather's or reduce-scatter's larger buffer (nranks x the
 * per-rank chunk, `bytes` here); busbw = algbw x 2(n-1)/n for an all-reduce on n ranks, x (n-1)/n
 * for the other two (the bytes each rank's links carry). NAN means "not measured".
 *
 * Collectives are common/types.h's SYMMPIN_COLL_* values; their names come from
 * symmpin_coll_name() (common/). */
#ifndef SYMMPIN_BENCH_FORMAT_H
#define SYMMPIN_BENCH_FORMAT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/types.h"

/* One implementation's numbers at one (dtype, size, mode). */
typedef struct bench_impl {
  const char *name;  /* CSV: "nccl", "nccl_win", "symmpin_staged", "symmpin_direct" */
  const char *label; /* line header: "nccl", "nccl_win", "staged", "direct" */
  bool symmpin;      /* one of symmpin's (else an NCCL variant): which side of the ratio */
  double best_us, median_us; /* over the rounds; NAN: not measured */
  bool check_ok;             /* false: a result check of it failed at this (dtype, size) */
  bool not_run;              /* the kernels have no such form of this collective: "n/a", never
                                measured (the all-gather's and reduce-scatter's in-slot form) */
  const double *samples_us;  /* the per-round values (NAN: not measured that round) */
  int nsamples;
} bench_impl;

/* One (collective, dtype, size, mode): every implementation's numbers. impl[0] is plain NCCL, the
 * baseline of ratio_nccl. */
typedef struct bench_point {
  int coll;          /* SYMMPIN_COLL_* */
  const char *mode;  /* "eager", "graph" */
  const char *dtype; /* "bf16", "f32" */
  size_t bytes, count; /* per rank: all-gather and reduce-scatter, the chunk (NCCL's count) */
  int nranks, calls, rounds;
  const bench_impl *impl;
  int nimpl;
} bench_point;

/* busbw / algbw on n ranks: 2(n-1)/n for an all-reduce, (n-1)/n for an all-gather or a
 * reduce-scatter (0 for n < 2: nothing crosses a link; 0 for an unknown collective). */
double bench_busbw_factor(int coll, int nranks);
/* The call's size / us in GB/s, for `bytes` per rank (the all-gather's and reduce-scatter's chunk:
 * their size is nranks x bytes); NAN unless us is a positive number. */
double bench_algbw(int coll, size_t bytes, double us, int nranks);
double bench_busbw(int coll, size_t bytes, double us, int nranks);

/* min over symmpin's implementations / min over NCCL's, of the median (median = true) or of the
 * best round; NAN if either side measured nothing. */
double bench_point_ratio(const bench_point *p, bool median);

/* Each function writes one or more whole lines, each ending in '\n', into buf (NUL-terminated) and
 * returns their length, or -1 if they do not fit in cap. */

/* The column header printed once before the first per-size line: three '#' lines naming the
 * implementations of p (the numbers in p are not used). */
int bench_format_line_header(const bench_point *p, char *buf, size_t cap);
/* The per-size line, NCCL-tests style: collective, bytes, count, type, mode, then per
 * implementation the median time (us, '!' after it when a check failed), algbw and busbw (GB/s),
 * '-' for what was not measured, 'n/a' for what does not exist (not_run); last the ratio of the
 * medians (bench_point_ratio). */
int bench_format_line(const bench_point *p, char *buf, size_t cap);
/* The CSV's header line: coll first, then the columns of the CSVs from before the collectives. */
int bench_format_csv_header(char *buf, size_t cap);
/* The CSV row of implementation i of p. */
int bench_format_csv_row(const bench_point *p, int i, char *buf, size_t cap);

#endif
