/* Test helpers for tests/gpu/test_pool.c: the rank-specific pattern written into pools (the same
 * function on host and device) and two tiny kernels behind extern "C" entry points. */
#ifndef SYMMPIN_TESTS_POOL_PATTERN_H
#define SYMMPIN_TESTS_POOL_PATTERN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SYMMPIN_TEST_HD __host__ __device__
#else
#define SYMMPIN_TEST_HD
#endif

/* 64-bit word `word` (index from the start of the pool) of rank `rank`'s pool. */
static inline SYMMPIN_TEST_HD uint64_t symmpin_test_pattern(uint64_t seed, int rank, uint64_t word) {
  uint64_t x = seed + 0x9e3779b97f4a7c15ull * ((uint64_t)rank + 1) + word * 0xd1b54a32d192ed03ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the pattern of `rank` for pool words [first_word, first_word + words) to dst with a
 * kernel on the current device, and waits for it. Returns a cudaError_t value (0 = success). */
int symmpin_test_fill(void *dst, uint64_t first_word, size_t words, uint64_t seed, int rank);
/* Loads [src, src + 8 * words) directly from a kernel on the current device (src may be a peer's
 * memory) and counts the words that differ from rank's pattern into *mismatches. Waits. */
int symmpin_test_check(const void *src, uint64_t first_word, size_t words, uint64_t seed, int rank,
                       unsigned long long *mismatches);

#ifdef __cplusplus
}
#endif

#endif
