/* symmpin-bench's per-size lines and CSV rows (bench_format.h): pure formatting, so that the CPU
 * test can check on made-up numbers what the GPU run prints. */
#include "tests/gpu/bench_format.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

double bench_busbw_factor(int nranks) {
  return nranks < 2 ? 0.0 : 2.0 * (double)(nranks - 1) / (double)nranks;
}

double bench_algbw(size_t bytes, double us) {
  if (!(us > 0.0) || isinf(us)) return NAN; /* NAN, zero, negative: nothing measured */
  return (double)bytes / (us * 1e3);          /* bytes / (us * 1e-6 s) / 1e9 */
}

double bench_busbw(size_t bytes, double us, int nranks) {
  return bench_algbw(bytes, us) * bench_busbw_factor(nranks);
}

static double side_min(const bench_point *p, bool symmpin, bool median) {
  double m = NAN;
  for (int i = 0; i < p->nimpl; i++) {
    if (p->impl[i].symmpin != symmpin) continue;
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

/* Widths: "%12s %12s %5s %6s" in front, then per implementation " %9s%c %7s %7s", then " %6s". */
#define IMPL_W 27 /* characters per implementation group */

int bench_format_line_header(const bench_point *p, char *buf, size_t cap) {
  out o = {buf, cap, 0};
  put(&o, "#%*s", 12 + 1 + 12 + 1 + 5 + 1 + 6 - 1, "");
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
  put(&o, "#%11s %12s %5s %6s", "size", "count", "type", "mode");
  for (int i = 0; i < p->nimpl; i++) put(&o, " %9s  %7s %7s", "time", "algbw", "busbw");
  put(&o, " %6s\n", "ratio");
  put(&o, "#%11s %12s %5s %6s", "(B)", "(elements)", "", "");
  for (int i = 0; i < p->nimpl; i++) put(&o, " %9s  %7s %7s", "(us)", "(GB/s)", "(GB/s)");
  put(&o, "\n");
  return done(&o);
}

int bench_format_line(const bench_point *p, char *buf, size_t cap) {
  out o = {buf, cap, 0};
  put(&o, "%12zu %12zu %5s %6s", p->bytes, p->count, p->dtype, p->mode);
  for (int i = 0; i < p->nimpl; i++) {
    const bench_impl *m = &p->impl[i];
    double t = m->median_us;
    if (isnan(t)) {
      put(&o, " %9s  %7s %7s", "-", "-", "-");
      continue;
    }
    put(&o, " %9.2f%c %7.2f %7.2f", t, m->check_ok ? ' ' : '!', bench_algbw(p->bytes, t),
        bench_busbw(p->bytes, t, p->nranks));
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
  put(&o, "mode,dtype,bytes,count,variant,nranks,calls,rounds,best_us,median_us,algbw_gbs,"
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
  put(&o, "%s,%s,%zu,%zu,%s,%d,%d,%d,", p->mode, p->dtype, p->bytes, p->count, m->name, p->nranks,
      p->calls, p->rounds);
  put_num(&o, m->best_us, ",");
  put_num(&o, m->median_us, ",");
  put_num(&o, bench_algbw(p->bytes, m->median_us), ",");
  put_num(&o, bench_busbw(p->bytes, m->median_us, p->nranks), ",");
  put_num(&o, m->median_us / p->impl[0].median_us, ",");
  put_num(&o, bench_point_ratio(p, false), ",");
  put_num(&o, bench_point_ratio(p, true), ",");
  put(&o, "%d,", m->check_ok ? 1 : 0);
  for (int r = 0; r < m->nsamples; r++)
    put_num(&o, m->samples_us[r], r + 1 < m->nsamples ? ";" : "");
  put(&o, "\n");
  return done(&o);
}
