/* Exactly representable test values and their encodings in every NCCL datatype.
 *
 * The app draws inputs from small sets of values (quarter integers, small integers, powers of
 * two) that every datatype represents exactly and whose sums and products over up to 8 ranks are
 * exact too, so the expected result is exact whatever order a library reduces in: symmpin, NCCL
 * and the CPU reference must agree bit for bit (avg excepted: its division rounds). */
#ifndef SYMMPIN_APP_VALUES_H
#define SYMMPIN_APP_VALUES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Encode an exactly representable double into a small IEEE-like float format. */
static inline uint32_t app_encode_small_float(double v, int ebits, int mbits, int bias) {
  uint32_t sign = signbit(v) ? 1u : 0u;
  double a = fabs(v);
  if (a == 0.0) return sign << (ebits + mbits);
  int e;
  double f = frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
  int exp = e - 1 + bias;  /* a = 1.m * 2^(e-1) */
  uint32_t mant = (uint32_t)ldexp(f * 2.0 - 1.0, mbits);
  return (sign << (ebits + mbits)) | ((uint32_t)exp << mbits) | mant;
}

static inline double app_decode_small_float(uint32_t bits, int ebits, int mbits, int bias) {
  uint32_t sign = (bits >> (ebits + mbits)) & 1u;
  uint32_t exp = (bits >> mbits) & ((1u << ebits) - 1u);
  uint32_t mant = bits & ((1u << mbits) - 1u);
  double v = exp == 0 ? ldexp((double)mant, 1 - bias - mbits)
                      : ldexp(1.0 + ldexp((double)mant, -mbits), (int)exp - bias);
  return sign ? -v : v;
}

static inline uint16_t app_to_bf16(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16); /* exact values: no rounding needed */
}

static inline double app_from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

#endif
