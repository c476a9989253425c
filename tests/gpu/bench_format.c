/* symmpin-bench's per-size lines and CSV rows (bench_format.h): pure formatting, so that the CPU
 * test can check on made-up numbers what the GPU run prints. */
#include "tests/gpu/bench_format.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

double bench_busbw_factor(int coll, int nranks) {
  if (nranks < 2) return 0.0;
  double n = (double)nranks;
  switch (coll) {
  case SYMMPIN_COLL_ALLREDUCE: return 2.0 * (n - 1.0) / n;
  case SYMMPIN_COLL_ALLGATHER:
  case SYMMPIN_COLL_REDUCESCATTER: return (n - 1.0) / n;
  default: return 0.0;
  }
}

double bench_algbw(int coll, size_t bytes, double us, int nranks) {
  if (!(us > 0.0) || isinf(us)) return NAN; /* NAN, zero, negative: nothing measured */
  /* The call's size as NCCL's tests count it: the all-gather's recv, the reduce-scatter's send. */
  double size = (double)bytes * (coll == SYMMPIN_COLL_ALLREDUCE ? 1.0 : (double)nranks);
  return size / (us * 1e3); /* bytes / (us * 1e-6 s) / 1e9 */
}

double bench_busbw(int coll, size_t bytes, double us, int nranks) {
  return bench_algbw(coll, bytes, us, nranks) * bench_busbw_factor(coll, nranks);
}

static double side_min(const bench_point *p, bool symmpin, bool median) {
  double m = NAN;
  for (int i = 0; i < p->nimpl; i++) {
    if (p->impl[i].symmpin != symmpin || p->impl[i].not_run) continue;
    double x = median ? p->impl[i].median_us : p->impl[i].best_us;
    if (!isnan(x) && (isnan(m) || x < m)) m = x;
  }
  return m;
}

double bench_point_ratio(const bench_point *p, bool median) {
  return side_min(p, true, median) / side_min(p, false, median);
}

/* An appender over one buffer: a failed or cut write poisons it (len = -1). */
typedef struct out {
  char *buf;
  size_t cap;
  int len;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...) {
  if (o->len < 0) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(o->buf + o->len, o->cap - (size_t)o->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= o->cap - (size_t)o->len)
    o->len = -1;
  else
    o->len += n;
}

static int done(out *o) {
  if (o->len < 0 && o->cap) o->buf[0] = '\0';
  return o->len;
}

/* Widths: "%13s %12s %12s %5s %6s" in front, then per implementation " %9s%c %7s %7s", then
 * " %6s". 13: "reducescatter". */
#define IMPL_W 27 /* characters per implementation group */

int bench_format_line_header(const bench_point *p, char *buf, size_t cap) {
  out o = {buf, cap, 0};
  put(&o, "#%*s", 13 + 1 + 12 + 1 + 12 + 1 + 5 + 1 + 6 - 1, "");
  for (int i = 0; i < p->nimpl; i++) {
    /* the label centred over its three columns, in dashes: " ------ nccl ------" */
    const char *l = p->impl[i].label;
    int n = 0;
    while (l[n]) n++;
    int dashes = IMPL_W - 1 - n - 2, left = dashes / 2, right = dashes - left;
    put(&o, " %.*s %s %.*s", left, "--------------------------", l, right,
        "--------------------------");
  }
  put(&o, "\n");
  put(&o, "#%12s %12s %12s %5s %6s", "coll", "size", "count", "type", "mode");
  for (int i = 0; i < p->nimpl; i++) put(&o, " %9s  %7s %7s", "time", "algbw", "busbw");
  put(&o, " %6s\n", "ratio");
  put(&o, "#%12s %12s %12s %5s %6s", "", "(B)", "(elements)", "", "");
  for (int i = 0; i < p->nimpl; i++) put(&o, " %9s  %7s %7s", "(us)", "(GB/s)", "(GB/s)");
  put(&o, "\n");
  return done(&o);
}

int bench_format_line(const bench_point *p, char *buf, size_t cap) {
  out o = {buf, cap, 0};
  put(&o, "%13s %12zu %12zu %5s %6s", symmpin_coll_name(p->coll), p->bytes, p->count, p->dtype,
      p->mode);
  for (int i = 0; i < p->nimpl; i++) {
    const bench_impl *m = &p->impl[i];
    double t = m->median_us;
    if (m->not_run || isnan(t)) {
      const char *none = m->not_run ? "n/a" : "-";
      put(&o, " %9s  %7s %7s", none, none, none);
      continue;
    }
    put(&o, " %9.2f%c %7.2f %7.2f", t, m->check_ok ? ' ' : '!',
        bench_algbw(p->coll, p->bytes, t, p->nranks), bench_busbw(p->coll, p->bytes, t, p->nranks));
  }
  double r = bench_point_ratio(p, true);
  if (isnan(r))
    put(&o, " %6s\n", "-");
  else
    put(&o, " %6.2f\n", r);
  return done(&o);
}

int bench_format_csv_header(char *buf, size_t cap) {
  out o = {buf, cap, 0};
  put(&o, "coll,mode,dtype,bytes,count,variant,nranks,calls,rounds,best_us,median_us,algbw_gbs,"
          "busbw_gbs,ratio_nccl,ratio_best,ratio_median,check_ok,samples_us\n");
  return done(&o);
}

/* %.4f, and "nan" for NAN whatever the C library prints. */
static void put_num(out *o, double x, const char *sep) {
  if (isnan(x))
    put(o, "nan%s", sep);
  else
    put(o, "%.4f%s", x, sep);
}

int bench_format_csv_row(const bench_point *p, int i, char *buf, size_t cap) {
  out o = {buf, cap, 0};
  if (i < 0 || i >= p->nimpl) return -1;
  const bench_impl *m = &p->impl[i];
  /* A form that does not exist is a row of nan: there, never silently left out. */
  double best = m->not_run ? NAN : m->best_us, median = m->not_run ? NAN : m->median_us;
  put(&o, "%s,%s,%s,%zu,%zu,%s,%d,%d,%d,", symmpin_coll_name(p->coll), p->mode, p->dtype, p->bytes,
      p->count, m->name, p->nranks, p->calls, p->rounds);
  put_num(&o, best, ",");
  put_num(&o, median, ",");
  put_num(&o, bench_algbw(p->coll, p->bytes, median, p->nranks), ",");
  put_num(&o, bench_busbw(p->coll, p->bytes, median, p->nranks), ",");
  put_num(&o, median / p->impl[0].median_us, ",");
  put_num(&o, bench_point_ratio(p, false), ",");
  put_num(&o, bench_point_ratio(p, true), ",");
  put(&o, "%d,", m->check_ok ? 1 : 0);
  for (int r = 0; r < m->nsamples; r++)
    put_num(&o, m->not_run ? NAN : m->samples_us[r], r + 1 < m->nsamples ? ";" : "");
  put(&o, "\n");
  return done(&o);
}
