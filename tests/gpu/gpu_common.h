/* What the GPU programs share (symmpin-bench, test_pool, symmpin-app, test_oneshot): check macros
 * that end the program with file:line, small random-number functions, host codecs of the
 * datatypes in common/types.h, and the command-line conventions of our tools (--version, the
 * message for a bad option).
 *
 * Header only, C11 and CUDA C++ alike, and it links nothing: symmpin-app, an ordinary NCCL program
 * that knows nothing of symmpin, uses it without linking any symmpin module (the datatype list is
 * the SYMMPIN_DTYPES X-macro, expanded here). The status check needs common/ linked
 * (symmpin_status_name); the NCCL check needs <nccl.h> included first. */
#ifndef SYMMPIN_TESTS_GPU_COMMON_H
#define SYMMPIN_TESTS_GPU_COMMON_H

#include <cuda_runtime_api.h>
#include <errno.h> /* program_invocation_short_name (GNU) */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/hash.h"
#include "common/types.h"
#include "common/version.h"

#ifdef __cplusplus
#define SYMMPIN_TEST_NORETURN [[noreturn]]
#else
#define SYMMPIN_TEST_NORETURN _Noreturn
#endif

/* ------------------------------------------------------------------------------ checks */

/* Where a failed check goes: a printf-like function that does not return. A program that wants
 * its own prefix (a rank number, a watchdog to stop) defines SYMMPIN_TEST_FAIL before including
 * this header; the default prints "<program>: FATAL: <message>" on stderr and exits with 2. */
#ifndef SYMMPIN_TEST_FAIL
#define SYMMPIN_TEST_FAIL symmpin_test_die
#endif

SYMMPIN_TEST_NORETURN static inline void symmpin_test_die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
SYMMPIN_TEST_NORETURN static inline void symmpin_test_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: FATAL: ", program_invocation_short_name);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  fflush(stdout);
  exit(2);
}

#define SYMMPIN_TEST_CUDA(x)                                                                       \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess)                                                                         \
      SYMMPIN_TEST_FAIL("%s:%d: %s: %s", __FILE__, __LINE__, #x, cudaGetErrorString(e_));          \
  } while (0)

/* ncclInProgress is not a failure: it is how a non-blocking communicator says "started". */
#define SYMMPIN_TEST_NCCL(x)                                                                       \
  do {                                                                                             \
    ncclResult_t r_ = (x);                                                                         \
    if (r_ != ncclSuccess && r_ != ncclInProgress)                                                 \
      SYMMPIN_TEST_FAIL("%s:%d: %s: %s (%s)", __FILE__, __LINE__, #x, ncclGetErrorString(r_),      \
                        ncclGetLastError(NULL));                                                   \
  } while (0)

#define SYMMPIN_TEST_OK(x)                                                                         \
  do {                                                                                             \
    symmpin_status s_ = (x);                                                                       \
    if (s_ != SYMMPIN_OK)                                                                          \
      SYMMPIN_TEST_FAIL("%s:%d: %s: %s", __FILE__, __LINE__, #x, symmpin_status_name(s_));         \
  } while (0)

/* ------------------------------------------------------------------------ random numbers */

/* splitmix64: a pure function of x, for values any rank must be able to recompute. */
static inline uint64_t symmpin_test_splitmix64(uint64_t x) {
  return symmpin_hash_mix64(x + 0x9E3779B97F4A7C15ull);
}

/* xorshift64*: a sequence from a seed (nonzero state). */
static inline uint64_t symmpin_test_xorshift64s(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* The top 53 bits of r as a double in [0, 1). */
static inline double symmpin_test_unit(uint64_t r) { return (double)(r >> 11) * 0x1p-53; }

/* Fresh random bytes from the kernel (seeds, board keys); false if it could not give them. */
static inline bool symmpin_test_random_bytes(void *p, size_t n) {
  return getrandom(p, n, 0) == (ssize_t)n;
}

/* ------------------------------------------------------------------------------ datatypes */

/* Bytes per element, 0 for an unknown value: symmpin_dtype_size() without linking common/. */
static inline size_t symmpin_test_dtype_size(int dtype) {
  switch (dtype) {
#define SYMMPIN_X(name, value, str, bytes)                                                         \
  case value: return bytes;
    SYMMPIN_DTYPES(SYMMPIN_X)
#undef SYMMPIN_X
  default: return 0;
  }
}

static inline bool symmpin_test_dtype_is_int(int dtype) {
  return dtype >= SYMMPIN_INT8 && dtype <= SYMMPIN_UINT64;
}

static inline bool symmpin_test_dtype_is_signed(int dtype) {
  return dtype == SYMMPIN_INT8 || dtype == SYMMPIN_INT32 || dtype == SYMMPIN_INT64;
}

/* A small IEEE-like binary float (f16, the fp8 formats) from a double that it represents exactly
 * (no rounding: test values are chosen to be exact). e4m3 (no infinities) has ebits 4, mbits 3,
 * bias 7; e5m2 5, 2, 15; f16 5, 10, 15. */
static inline uint32_t symmpin_test_small_float_encode(double v, int ebits, int mbits, int bias) {
  uint32_t sign = signbit(v) ? 1u : 0u;
  double a = fabs(v);
  if (a == 0.0) return sign << (ebits + mbits);
  int e;
  double f = frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
  int exp = e - 1 + bias;  /* a = 1.m * 2^(e-1) */
  if (exp <= 0)            /* subnormal: 0.m * 2^(1-bias) */
    return (sign << (ebits + mbits)) | (uint32_t)ldexp(a, bias - 1 + mbits);
  uint32_t mant = (uint32_t)ldexp(f * 2.0 - 1.0, mbits);
  return (sign << (ebits + mbits)) | ((uint32_t)exp << mbits) | mant;
}

/* The inverse, exact, with the format's special values: an all-ones exponent is infinity or NaN
 * where the format has infinities (f16, e5m2); e4m3 has only NaN (all ones in exponent and
 * mantissa). */
static inline double symmpin_test_small_float_decode(uint32_t bits, int ebits, int mbits, int bias,
                                                     bool has_inf) {
  uint32_t sign = (bits >> (ebits + mbits)) & 1u;
  uint32_t emax = (1u << ebits) - 1u, mmax = (1u << mbits) - 1u;
  uint32_t exp = (bits >> mbits) & emax;
  uint32_t mant = bits & mmax;
  double v;
  if (has_inf && exp == emax)
    v = mant ? NAN : INFINITY;
  else if (!has_inf && exp == emax && mant == mmax)
    v = NAN;
  else if (exp == 0)
    v = ldexp((double)mant, 1 - bias - mbits);
  else
    v = ldexp(1.0 + ldexp((double)mant, -mbits), (int)exp - bias);
  return sign ? -v : v;
}

/* bfloat16 from a finite float, rounded to nearest even (exact values stay exact). */
static inline uint16_t symmpin_test_bf16_from_float(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float symmpin_test_bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Store one element of `dtype` at dst (any alignment): integers take iv (truncated to the type's
 * width), floating types fv, which the type must represent exactly except for f32 and bf16
 * (rounded to nearest even). */
static inline void symmpin_test_encode(int dtype, double fv, uint64_t iv, void *dst) {
  uint8_t b8;
  uint16_t b16;
  uint32_t b32;
  float f;
  switch (dtype) {
  case SYMMPIN_INT8:
  case SYMMPIN_UINT8:
    b8 = (uint8_t)iv;
    memcpy(dst, &b8, 1);
    break;
  case SYMMPIN_INT32:
  case SYMMPIN_UINT32:
    b32 = (uint32_t)iv;
    memcpy(dst, &b32, 4);
    break;
  case SYMMPIN_INT64:
  case SYMMPIN_UINT64: memcpy(dst, &iv, 8); break;
  case SYMMPIN_FLOAT16:
    b16 = (uint16_t)symmpin_test_small_float_encode(fv, 5, 10, 15);
    memcpy(dst, &b16, 2);
    break;
  case SYMMPIN_FLOAT32:
    f = (float)fv;
    memcpy(dst, &f, 4);
    break;
  case SYMMPIN_FLOAT64: memcpy(dst, &fv, 8); break;
  case SYMMPIN_BFLOAT16:
    b16 = symmpin_test_bf16_from_float((float)fv);
    memcpy(dst, &b16, 2);
    break;
  case SYMMPIN_FP8E4M3:
    b8 = (uint8_t)symmpin_test_small_float_encode(fv, 4, 3, 7);
    memcpy(dst, &b8, 1);
    break;
  case SYMMPIN_FP8E5M2:
    b8 = (uint8_t)symmpin_test_small_float_encode(fv, 5, 2, 15);
    memcpy(dst, &b8, 1);
    break;
  default: break;
  }
}

/* One element of `dtype` at src (any alignment) as a double: exact for every floating type (and
 * for integers up to 2^53); signed integers sign-extended. NaN for an unknown dtype. */
static inline double symmpin_test_decode(int dtype, const void *src) {
  uint8_t b8;
  uint16_t b16;
  uint32_t b32;
  uint64_t b64;
  float f;
  double d;
  switch (dtype) {
  case SYMMPIN_INT8: memcpy(&b8, src, 1); return (double)(int8_t)b8;
  case SYMMPIN_UINT8: memcpy(&b8, src, 1); return (double)b8;
  case SYMMPIN_INT32: memcpy(&b32, src, 4); return (double)(int32_t)b32;
  case SYMMPIN_UINT32: memcpy(&b32, src, 4); return (double)b32;
  case SYMMPIN_INT64: memcpy(&b64, src, 8); return (double)(int64_t)b64;
  case SYMMPIN_UINT64: memcpy(&b64, src, 8); return (double)b64;
  case SYMMPIN_FLOAT16:
    memcpy(&b16, src, 2);
    return symmpin_test_small_float_decode(b16, 5, 10, 15, true);
  case SYMMPIN_FLOAT32: memcpy(&f, src, 4); return (double)f;
  case SYMMPIN_FLOAT64: memcpy(&d, src, 8); return d;
  case SYMMPIN_BFLOAT16: memcpy(&b16, src, 2); return (double)symmpin_test_bf16_to_float(b16);
  case SYMMPIN_FP8E4M3:
    memcpy(&b8, src, 1);
    return symmpin_test_small_float_decode(b8, 4, 3, 7, false);
  case SYMMPIN_FP8E5M2:
    memcpy(&b8, src, 1);
    return symmpin_test_small_float_decode(b8, 5, 2, 15, true);
  default: return NAN;
  }
}

/* The unit roundoff of a floating type (half its machine epsilon): one rounding to the type moves
 * a value by at most u |value| (normal range). 0 for integers. */
static inline double symmpin_test_unit_roundoff(int dtype) {
  switch (dtype) {
  case SYMMPIN_FLOAT16: return 0x1p-11;
  case SYMMPIN_BFLOAT16: return 0x1p-8;
  case SYMMPIN_FP8E4M3: return 0x1p-4;
  case SYMMPIN_FP8E5M2: return 0x1p-3;
  case SYMMPIN_FLOAT32: return 0x1p-24;
  case SYMMPIN_FLOAT64: return 0x1p-53;
  default: return 0.0;
  }
}

/* The smallest positive (subnormal) value of a floating type: the absolute error floor. */
static inline double symmpin_test_smallest(int dtype) {
  switch (dtype) {
  case SYMMPIN_FLOAT16: return 0x1p-24;
  case SYMMPIN_BFLOAT16: return 0x1p-133;
  case SYMMPIN_FP8E4M3: return 0x1p-9;
  case SYMMPIN_FP8E5M2: return 0x1p-16;
  case SYMMPIN_FLOAT32: return 0x1p-149;
  case SYMMPIN_FLOAT64: return 0x1p-1074;
  default: return 0.0;
  }
}

/* -------------------------------------------------------------------------- command line */

/* --version: "<prog> <version> (git <revision>)" on stdout. */
static inline int symmpin_test_print_version(const char *prog) {
  printf("%s %s (git %s)\n", prog, SYMMPIN_VERSION, SYMMPIN_GIT);
  return 0;
}

/* The line after every usage error. Returns 2, the exit status of a usage error. */
static inline int symmpin_test_usage_hint(const char *prog) {
  fprintf(stderr, "Try '%s --help' for more information.\n", prog);
  return 2;
}

/* After getopt_long() returned '?' or ':' (its optstring starting with ':', opterr = 0): names the
 * bad option on stderr ("prog: unknown option '--foo'", "... needs a value", "... takes no value",
 * "... is ambiguous"), then the hint. Returns 2. */
static inline int symmpin_test_option_error(const char *prog, int c, char *const argv[],
                                            const struct option *longopts) {
  const char *arg = optind > 0 ? argv[optind - 1] : NULL;
  if (arg && arg[0] == '-' && arg[1] == '-') {
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const struct option *exact = NULL;
    int prefixes = 0;
    for (const struct option *o = longopts; o && o->name; o++) {
      if (strncmp(o->name, name, len) != 0) continue;
      prefixes++;
      if (strlen(o->name) == len) exact = o;
    }
    if (c == ':')
      fprintf(stderr, "%s: option '--%.*s' needs a value\n", prog, (int)len, name);
    else if ((exact || prefixes == 1) && eq)
      fprintf(stderr, "%s: option '--%.*s' takes no value\n", prog, (int)len, name);
    else if (!exact && prefixes > 1)
      fprintf(stderr, "%s: option '--%.*s' is ambiguous\n", prog, (int)len, name);
    else
      fprintf(stderr, "%s: unknown option '--%.*s'\n", prog, (int)len, name);
  } else if (c == ':') {
    fprintf(stderr, "%s: option '-%c' needs a value\n", prog, optopt);
  } else {
    fprintf(stderr, "%s: unknown option '-%c'\n", prog, optopt);
  }
  return symmpin_test_usage_hint(prog);
}

/* A whole decimal number in [lo, hi] (no sign for lo >= 0, no trailing characters). */
static inline bool symmpin_test_parse_int(const char *s, long lo, long hi, long *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/* A usage error about a value: "prog: <message>" and the hint. Returns 2. */
static inline int symmpin_test_usage_error(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline int symmpin_test_usage_error(const char *prog, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", prog);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return symmpin_test_usage_hint(prog);
}

#endif
