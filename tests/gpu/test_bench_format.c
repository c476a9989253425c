/* symmpin-bench's per-size line and CSV rows (tests/gpu/bench_format.c) on made-up numbers, on the
 * CPU: the bandwidth formulas of each collective, the line's columns and alignment, '-', 'n/a' and
 * '!' cells, the ratio, the CSV header and rows with their coll column. The benchmark itself needs
 * GPUs; this is the part of it CI can run. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/gpu/bench_format.h"

static const char *const names[4] = {"nccl", "nccl_win", "symmpin_staged", "symmpin_direct"};
static const char *const labels[4] = {"nccl", "nccl_win", "staged", "direct"};

/* 1 KiB bf16 on 2 ranks, graph mode: medians 5.78 / 3.46 / 2.29 / 2.61 us. */
static double samples[4][3] = {
    {5.80, 5.78, 5.70}, {3.46, 3.50, 3.40}, {2.29, 2.40, 2.20}, {2.61, 2.70, 2.50}};

static bench_point point(bench_impl impl[4], int nranks) {
  const double best[4] = {5.70, 3.40, 2.20, 2.50}, median[4] = {5.78, 3.46, 2.29, 2.61};
  for (int i = 0; i < 4; i++)
    impl[i] = (bench_impl){.name = names[i], .label = labels[i], .symmpin = i >= 2,
                           .best_us = best[i], .median_us = median[i], .check_ok = true,
                           .samples_us = samples[i], .nsamples = 3};
  return (bench_point){.coll = SYMMPIN_COLL_ALLREDUCE,
                       .mode = "graph",
                       .dtype = "bf16",
                       .bytes = 1024,
                       .count = 512,
                       .nranks = nranks,
                       .calls = 500,
                       .rounds = 3,
                       .impl = impl,
                       .nimpl = 4};
}

/* The same numbers as an all-gather or reduce-scatter of a 1 KiB chunk: no direct form. */
static bench_point chunked(int coll, bench_impl impl[4], int nranks) {
  bench_point p = point(impl, nranks);
  p.coll = coll;
  impl[3].not_run = true;
  return p;
}

/* Splits a line on blanks into at most max tokens; returns the count. */
static int tokens(const char *line, char tok[][32], int max) {
  int n = 0;
  const char *s = line;
  while (*s && n < max) {
    while (*s == ' ' || *s == '\n') s++;
    if (!*s) break;
    int k = 0;
    while (*s && *s != ' ' && *s != '\n' && k < 31) tok[n][k++] = *s++;
    tok[n++][k] = '\0';
  }
  return n;
}

Test(bench_format, busbw_factor_is_2n_minus_1_over_n) {
  const int ar = SYMMPIN_COLL_ALLREDUCE;
  cr_expect_float_eq(bench_busbw_factor(ar, 1), 0.0, 1e-12);
  cr_expect_float_eq(bench_busbw_factor(ar, 2), 1.0, 1e-12);
  cr_expect_float_eq(bench_busbw_factor(ar, 3), 4.0 / 3.0, 1e-12);
  cr_expect_float_eq(bench_busbw_factor(ar, 4), 1.5, 1e-12);
  cr_expect_float_eq(bench_busbw_factor(ar, 8), 1.75, 1e-12);
}

/* NCCL's doc/PERFORMANCE.md: all-gather and reduce-scatter busbw = algbw x (n-1)/n. */
Test(bench_format, busbw_factor_of_allgather_and_reducescatter_is_n_minus_1_over_n) {
  for (int coll = SYMMPIN_COLL_ALLGATHER; coll <= SYMMPIN_COLL_REDUCESCATTER; coll++) {
    cr_expect_float_eq(bench_busbw_factor(coll, 1), 0.0, 1e-12, "%d", coll);
    cr_expect_float_eq(bench_busbw_factor(coll, 2), 0.5, 1e-12, "%d", coll);
    cr_expect_float_eq(bench_busbw_factor(coll, 4), 0.75, 1e-12, "%d", coll);
    cr_expect_float_eq(bench_busbw_factor(coll, 8), 0.875, 1e-12, "%d", coll);
  }
  cr_expect_float_eq(bench_busbw_factor(SYMMPIN_COLL_COUNT, 2), 0.0, 1e-12, "unknown collective");
}

Test(bench_format, bandwidths_in_gb_per_second) {
  const int ar = SYMMPIN_COLL_ALLREDUCE;
  /* 1 MiB in 10 us: 1048576 / 10e-6 / 1e9 = 104.8576 GB/s */
  cr_expect_float_eq(bench_algbw(ar, 1 << 20, 10.0, 2), 104.8576, 1e-9);
  cr_expect_float_eq(bench_algbw(ar, 1 << 20, 10.0, 8), 104.8576, 1e-9);
  cr_expect_float_eq(bench_busbw(ar, 1 << 20, 10.0, 2), 104.8576, 1e-9);
  cr_expect_float_eq(bench_busbw(ar, 1 << 20, 10.0, 4), 104.8576 * 1.5, 1e-9);
  cr_expect_float_eq(bench_busbw(ar, 1 << 20, 10.0, 8), 104.8576 * 1.75, 1e-9);
  cr_expect(isnan(bench_algbw(ar, 1024, NAN, 2)));
  cr_expect(isnan(bench_algbw(ar, 1024, 0.0, 2)));
  cr_expect(isnan(bench_busbw(ar, 1024, -1.0, 2)));
}

/* bytes is the per-rank chunk: the call moves n chunks (the all-gather's recv, the reduce-scatter's
 * send), as NCCL's tests count their size. */
Test(bench_format, allgather_and_reducescatter_bandwidths_count_every_chunk) {
  for (int coll = SYMMPIN_COLL_ALLGATHER; coll <= SYMMPIN_COLL_REDUCESCATTER; coll++) {
    cr_expect_float_eq(bench_algbw(coll, 1 << 20, 10.0, 1), 104.8576, 1e-9, "%d", coll);
    cr_expect_float_eq(bench_algbw(coll, 1 << 20, 10.0, 2), 2 * 104.8576, 1e-9, "%d", coll);
    cr_expect_float_eq(bench_algbw(coll, 1 << 20, 10.0, 8), 8 * 104.8576, 1e-9, "%d", coll);
    cr_expect_float_eq(bench_busbw(coll, 1 << 20, 10.0, 2), 104.8576, 1e-9, "%d", coll);
    cr_expect_float_eq(bench_busbw(coll, 1 << 20, 10.0, 4), 4 * 104.8576 * 0.75, 1e-9, "%d", coll);
    cr_expect(isnan(bench_busbw(coll, 1024, NAN, 2)));
  }
}

Test(bench_format, ratio_is_best_symmpin_over_best_nccl) {
  bench_impl impl[4];
  bench_point p = point(impl, 2);
  cr_expect_float_eq(bench_point_ratio(&p, true), 2.29 / 3.46, 1e-12);
  cr_expect_float_eq(bench_point_ratio(&p, false), 2.20 / 3.40, 1e-12);
  impl[2].median_us = impl[3].median_us = NAN; /* no symmpin numbers: no ratio */
  cr_expect(isnan(bench_point_ratio(&p, true)));
}

Test(bench_format, line_columns) {
  bench_impl impl[4];
  bench_point p = point(impl, 2);
  char line[1024], tok[32][32];
  int len = bench_format_line(&p, line, sizeof line);
  cr_assert_gt(len, 0);
  cr_expect_eq((size_t)len, strlen(line));
  cr_expect_eq(line[len - 1], '\n');
  cr_expect_eq(strchr(line, '\n'), line + len - 1, "one line: %s", line);
  cr_assert_eq(tokens(line, tok, 32), 5 + 4 * 3 + 1, "%s", line);
  const char *want[] = {"allreduce", "1024", "512",  "bf16", "graph", "5.78",
                        "0.18",      "0.18", "3.46", "0.30", "0.30",  "2.29",
                        "0.45",      "0.45", "2.61", "0.39", "0.39",  "0.66"};
  for (int i = 0; i < 18; i++) cr_expect_str_eq(tok[i], want[i], "column %d of: %s", i, line);
  cr_expect_str_eq(line, "    allreduce         1024          512  bf16  graph      5.78     0.18"
                         "    0.18      3.46     0.30    0.30      2.29     0.45    0.45      2.61"
                         "     0.39    0.39   0.66\n");
}

/* The collective's name leads the line; the bandwidths count n chunks; the form the kernels lack
 * reads n/a (never '-', "not measured") and stays out of the ratio. */
Test(bench_format, line_of_allgather_and_reducescatter) {
  const char *name[] = {"allgather", "reducescatter"};
  for (int k = 0; k < 2; k++) {
    bench_impl impl[4];
    bench_point p = chunked(SYMMPIN_COLL_ALLGATHER + k, impl, 4);
    impl[3].median_us = 0.5; /* a number behind n/a must not show, nor win the ratio */
    char line[1024], tok[32][32];
    cr_assert_gt(bench_format_line(&p, line, sizeof line), 0);
    cr_assert_eq(tokens(line, tok, 32), 18, "%s", line);
    cr_expect_str_eq(tok[0], name[k], "%s", line);
    cr_expect_str_eq(tok[5], "5.78");
    cr_expect_str_eq(tok[6], "0.71"); /* algbw = 4 x 1024 / 5.78 us */
    cr_expect_str_eq(tok[7], "0.53"); /* busbw = algbw x 3/4 */
    cr_expect_str_eq(tok[11], "2.29");
    cr_expect_str_eq(tok[12], "1.79");
    cr_expect_str_eq(tok[13], "1.34");
    for (int i = 14; i < 17; i++) cr_expect_str_eq(tok[i], "n/a", "column %d of: %s", i, line);
    cr_expect_str_eq(tok[17], "0.66"); /* 2.29 / 3.46: staged against nccl_win */
    /* as long as the all-reduce's line, columns in place */
    bench_impl ar_impl[4];
    bench_point ar = point(ar_impl, 4);
    char line2[1024];
    cr_assert_gt(bench_format_line(&ar, line2, sizeof line2), 0);
    cr_expect_eq(strlen(line), strlen(line2), "\n%s%s", line, line2);
  }
  cr_expect_str_eq(symmpin_coll_name(SYMMPIN_COLL_REDUCESCATTER), "reducescatter");
}

Test(bench_format, busbw_column_scales_with_ranks) {
  bench_impl impl[4];
  bench_point p = point(impl, 4);
  p.bytes = 1 << 20;
  p.count = 1 << 19;
  impl[0].median_us = 10.0;
  char line[1024], tok[32][32];
  cr_assert_gt(bench_format_line(&p, line, sizeof line), 0);
  cr_assert_eq(tokens(line, tok, 32), 18);
  cr_expect_str_eq(tok[5], "10.00");
  cr_expect_str_eq(tok[6], "104.86"); /* algbw */
  cr_expect_str_eq(tok[7], "157.29"); /* busbw = algbw x 2(4-1)/4 */
}

Test(bench_format, header_aligns_with_the_line) {
  bench_impl impl[4];
  bench_point p = point(impl, 2);
  char head[2048], line[1024];
  cr_assert_gt(bench_format_line_header(&p, head, sizeof head), 0);
  cr_assert_gt(bench_format_line(&p, line, sizeof line), 0);
  /* three '#' lines; the column names end where the line's numbers end */
  char *l1 = head, *l2 = strchr(l1, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
  cr_assert_eq(strchr(l3, '\n')[1], '\0');
  cr_expect(l1[0] == '#' && l2[0] == '#' && l3[0] == '#');
  cr_expect_eq(strchr(l2, '\n') - l2, (long)strlen(line) - 1, "\n%s%s", head, line);
  const char *end_ratio = strstr(l2, "ratio") + 5;
  cr_expect_eq(end_ratio - l2, (long)strlen(line) - 1);
  const char *busbw = l2;
  for (int i = 0; i < 4; i++) {
    busbw = strstr(busbw, "busbw");
    cr_assert_not_null(busbw);
    busbw += 5;
  }
  /* the last busbw column ends where the direct group's busbw number ends */
  cr_expect_str_eq(line + (busbw - l2) - 4, "0.39   0.66\n");
  cr_expect_not_null(strstr(l1, " nccl "));
  cr_expect_not_null(strstr(l1, " nccl_win "));
  cr_expect_not_null(strstr(l1, " staged "));
  cr_expect_not_null(strstr(l1, " direct "));
  cr_expect_not_null(strstr(l3, "(us)"));
  /* the collective's column: its name ends where "coll" ends */
  const char *coll = strstr(l2, "coll");
  cr_assert_not_null(coll);
  cr_expect_eq(coll + 4 - l2, (long)strlen("    allreduce"), "\n%s%s", head, line);
  const char *size = strstr(l2, "size");
  cr_assert_not_null(size);
  cr_expect_eq(size + 4 - l2, strstr(line, "1024") + 4 - line, "\n%s%s", head, line);
  cr_expect_not_null(strstr(l3, "(GB/s)"));
  /* the group titles end over the last group's busbw (no blanks above the ratio) */
  cr_expect_eq(strchr(l1, '\n') - l1, busbw - l2, "\n%s", head);
  cr_expect_eq(strchr(l3, '\n') - l3, busbw - l2, "\n%s", head);
}

Test(bench_format, missing_and_failed_cells) {
  bench_impl impl[4];
  bench_point p = point(impl, 2);
  impl[1].median_us = NAN;  /* not measured */
  impl[2].check_ok = false; /* a result check failed */
  char line[1024], tok[32][32];
  cr_assert_gt(bench_format_line(&p, line, sizeof line), 0);
  cr_assert_eq(tokens(line, tok, 32), 18, "%s", line);
  cr_expect_str_eq(tok[8], "-");
  cr_expect_str_eq(tok[9], "-");
  cr_expect_str_eq(tok[10], "-");
  cr_expect_str_eq(tok[11], "2.29!");
  cr_expect_str_eq(tok[17], "0.40"); /* 2.29 / 5.78: nccl_win measured nothing */
  /* the '!' takes the blank after the number: columns stay where they were */
  bench_impl ok[4];
  bench_point q = point(ok, 2);
  char line2[1024];
  cr_assert_gt(bench_format_line(&q, line2, sizeof line2), 0);
  cr_expect_eq(strlen(line), strlen(line2));
}

Test(bench_format, csv_header_and_rows) {
  bench_impl impl[4];
  bench_point p = point(impl, 2);
  char buf[1024];
  cr_assert_gt(bench_format_csv_header(buf, sizeof buf), 0);
  cr_expect_str_eq(buf, "coll,mode,dtype,bytes,count,variant,nranks,calls,rounds,best_us,"
                        "median_us,algbw_gbs,busbw_gbs,ratio_nccl,ratio_best,ratio_median,"
                        "check_ok,samples_us\n");
  cr_assert_gt(bench_format_csv_row(&p, 0, buf, sizeof buf), 0);
  cr_expect_str_eq(buf, "allreduce,graph,bf16,1024,512,nccl,2,500,3,5.7000,5.7800,0.1772,0.1772,"
                        "1.0000,0.6471,0.6618,1,5.8000;5.7800;5.7000\n");
  cr_assert_gt(bench_format_csv_row(&p, 2, buf, sizeof buf), 0);
  cr_expect_str_eq(buf, "allreduce,graph,bf16,1024,512,symmpin_staged,2,500,3,2.2000,2.2900,"
                        "0.4472,0.4472,0.3962,0.6471,0.6618,1,2.2900;2.4000;2.2000\n");
  /* not measured: nan, never the C library's "-nan"; a failed check: check_ok 0 */
  impl[3].median_us = impl[3].best_us = NAN;
  samples[3][1] = NAN;
  impl[3].check_ok = false;
  cr_assert_gt(bench_format_csv_row(&p, 3, buf, sizeof buf), 0);
  cr_expect_str_eq(buf, "allreduce,graph,bf16,1024,512,symmpin_direct,2,500,3,nan,nan,nan,nan,nan,"
                        "0.6471,0.6618,0,2.6100;nan;2.5000\n");
  samples[3][1] = 2.70;
  /* the CSV's columns match its header's */
  cr_assert_gt(bench_format_csv_header(buf, sizeof buf), 0);
  int commas = 0;
  for (char *c = buf; *c; c++) commas += *c == ',';
  cr_assert_gt(bench_format_csv_row(&p, 1, buf, sizeof buf), 0);
  int row_commas = 0;
  for (char *c = buf; *c; c++) row_commas += *c == ',';
  cr_expect_eq(row_commas, commas);
  cr_expect_eq(bench_format_csv_row(&p, 4, buf, sizeof buf), -1);
}

/* The coll column names the collective, before the columns of the CSVs from before it; bytes and
 * count are the chunk, the bandwidths count n chunks; the form the kernels lack is a row of nan
 * (there, not left out), whatever numbers it was handed. */
Test(bench_format, csv_rows_of_allgather_and_reducescatter) {
  bench_impl impl[4];
  bench_point p = chunked(SYMMPIN_COLL_ALLGATHER, impl, 2);
  char buf[1024];
  cr_assert_gt(bench_format_csv_row(&p, 0, buf, sizeof buf), 0);
  cr_expect_str_eq(buf, "allgather,graph,bf16,1024,512,nccl,2,500,3,5.7000,5.7800,0.3543,0.1772,"
                        "1.0000,0.6471,0.6618,1,5.8000;5.7800;5.7000\n");
  cr_assert_gt(bench_format_csv_row(&p, 3, buf, sizeof buf), 0);
  cr_expect_str_eq(buf, "allgather,graph,bf16,1024,512,symmpin_direct,2,500,3,nan,nan,nan,nan,nan,"
                        "0.6471,0.6618,1,nan;nan;nan\n");
  p = chunked(SYMMPIN_COLL_REDUCESCATTER, impl, 4);
  cr_assert_gt(bench_format_csv_row(&p, 2, buf, sizeof buf), 0);
  cr_expect_str_eq(buf, "reducescatter,graph,bf16,1024,512,symmpin_staged,4,500,3,2.2000,2.2900,"
                        "1.7886,1.3415,0.3962,0.6471,0.6618,1,2.2900;2.4000;2.2000\n");
  cr_assert_gt(bench_format_csv_row(&p, 3, buf, sizeof buf), 0);
  cr_expect_str_eq(buf, "reducescatter,graph,bf16,1024,512,symmpin_direct,4,500,3,nan,nan,nan,"
                        "nan,nan,0.6471,0.6618,1,nan;nan;nan\n");
  /* an unknown collective is not passed off as one of the three */
  p.coll = SYMMPIN_COLL_COUNT;
  cr_assert_gt(bench_format_csv_row(&p, 0, buf, sizeof buf), 0);
  cr_expect_eq(buf[0], '?', "%s", buf);
}

Test(bench_format, too_small_a_buffer_is_refused) {
  bench_impl impl[4];
  bench_point p = point(impl, 2);
  char buf[40];
  cr_expect_eq(bench_format_line(&p, buf, sizeof buf), -1);
  cr_expect_eq(buf[0], '\0');
  cr_expect_eq(bench_format_csv_row(&p, 0, buf, sizeof buf), -1);
  cr_expect_eq(bench_format_line_header(&p, buf, sizeof buf), -1);
}
