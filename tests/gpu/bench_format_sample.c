/* bench-format-sample: symmpin-bench's per-size lines and CSV on made-up numbers, on the CPU (no
 * GPU, no NCCL): the lines go to stdout, the CSV to the file named by the only argument. It feeds
 * scripts/plot_bench.py in the CPU tests (check_plot_bench.sh) and shows what a run prints
 * (docs/bench.md): all three collectives, bf16, 2 ranks, 7 sizes, both modes. The numbers are
 * invented; only their shape is real: no direct form above 2 MiB for the all-reduce ('-', nan),
 * none at all for the all-gather and reduce-scatter ('n/a', nan), and each collective's times
 * apart (the all-gather's 1.5 x, the reduce-scatter's 2 x the all-reduce's), so a plot that mixed
 * them up would show it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/gpu/bench_format.h"

static const char *const names[4] = {"nccl", "nccl_win", "symmpin_staged", "symmpin_direct"};
static const char *const labels[4] = {"nccl", "nccl_win", "staged", "direct"};

int main(int argc, char **argv) {
  if (argc != 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: bench-format-sample CSV\n");
    return 2;
  }
  FILE *csv = fopen(argv[1], "w");
  if (!csv) {
    perror(argv[1]);
    return 1;
  }
  char buf[4096];
  bench_impl impl[4];
  bench_point p = {.dtype = "bf16", .nranks = 2, .rounds = 3, .impl = impl, .nimpl = 4};
  if (bench_format_csv_header(buf, sizeof buf) < 0) return 1;
  fputs(buf, csv);
  const char *modes[2] = {"eager", "graph"};
  const int colls[3] = {SYMMPIN_COLL_ALLREDUCE, SYMMPIN_COLL_ALLGATHER, SYMMPIN_COLL_REDUCESCATTER};
  const double scale[3] = {1.0, 1.5, 2.0};
  bool header = false;
  for (int c = 0; c < 3; c++) {
    for (size_t bytes = 1024; bytes <= ((size_t)8 << 20); bytes *= 4) {
      for (int m = 0; m < 2; m++) {
        /* A latency floor plus a bandwidth term, symmpin's floor lower; graph below eager. */
        double floor_us[4] = {m ? 5.8 : 11.2, m ? 3.5 : 10.9, m ? 2.3 : 4.7, m ? 2.2 : 4.5};
        double samples[4][3];
        for (int i = 0; i < 4; i++) {
          double t = scale[c] * (floor_us[i] + (double)bytes / (i < 2 ? 180e3 : 170e3));
          samples[i][0] = t * 1.02;
          samples[i][1] = t;
          samples[i][2] = t * 1.10;
          bool not_run = i == 3 && colls[c] != SYMMPIN_COLL_ALLREDUCE;
          /* no direct-form numbers above 2 MiB in this sample: "-" on the line, nan in the CSV */
          bool none = not_run || (i == 3 && bytes > ((size_t)2 << 20));
          impl[i] = (bench_impl){.name = names[i],
                                 .label = labels[i],
                                 .symmpin = i >= 2,
                                 .best_us = none ? NAN : t,
                                 .median_us = none ? NAN : t * 1.02,
                                 .check_ok = true,
                                 .not_run = not_run,
                                 .samples_us = samples[i],
                                 .nsamples = 3};
          if (none) samples[i][0] = samples[i][1] = samples[i][2] = NAN;
        }
        p.coll = colls[c];
        p.mode = modes[m];
        p.bytes = bytes;
        p.count = bytes / 2;
        p.calls = 500;
        if (!header) {
          if (bench_format_line_header(&p, buf, sizeof buf) < 0) return 1;
          fputs(buf, stdout);
          header = true;
        }
        if (bench_format_line(&p, buf, sizeof buf) < 0) return 1;
        fputs(buf, stdout);
        for (int i = 0; i < 4; i++) {
          if (bench_format_csv_row(&p, i, buf, sizeof buf) < 0) return 1;
          fputs(buf, csv);
        }
      }
    }
  }
  if (fclose(csv) != 0) {
    perror(argv[1]);
    return 1;
  }
  return 0;
}
