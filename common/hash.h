/* 64-bit mixing used wherever symmpin derives an identity or a digest (site ids, plan digests,
 * communicator keys, stack hashes). Every rank and every run must compute the same values, so this is pure integer
 * arithmetic with fixed constants: no seeds, no pointers, no host byte-order dependence. */
#ifndef SYMMPIN_COMMON_HASH_H
#define SYMMPIN_COMMON_HASH_H

#include <stdint.h>

/* The splitmix64 / Stafford "mix13" finalizer: a bijection on 64 bits with full avalanche, so
 * inputs that differ in one bit give unrelated outputs. */
static inline uint64_t symmpin_hash_mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

/* Fold one more value into a running hash. Order matters (combine(a, b) != combine(b, a)), which
 * is what sequences need. The constant is 2^64 / golden ratio, so a zero input still moves h. */
static inline uint64_t symmpin_hash_combine(uint64_t h, uint64_t v) {
  return symmpin_hash_mix64(h ^ (symmpin_hash_mix64(v) + 0x9e3779b97f4a7c15ULL + (h << 6) +
                                 (h >> 2)));
}

#endif
