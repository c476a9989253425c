/* Communicator keys (commkey.h). */
#include "common/commkey.h"

#include <string.h>

#include "common/hash.h"

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* A 64-bit hash whose every round goes through a full avalanche, seeded per word so that two seeds
 * give two unrelated functions (the key's two halves). */
static uint64_t hash64(const unsigned char *p, size_t n, uint64_t seed) {
  uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ull);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h ^= symmpin_hash_mix64(w + seed);
    h = rotl(h, 29) * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  }
  if (i < n) {
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    h ^= symmpin_hash_mix64(w + seed + (uint64_t)(n - i));
    h = rotl(h, 29) * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  }
  return symmpin_hash_mix64(h ^ n);
}

symmpin_comm_key symmpin_comm_key_of_bytes(const void *p, size_t n) {
  symmpin_comm_key k;
  const unsigned char *b = p;
  k.hi = hash64(b, p ? n : 0, 0x243f6a8885a308d3ull);
  k.lo = hash64(b, p ? n : 0, 0x13198a2e03707344ull);
  return k;
}

symmpin_comm_key symmpin_comm_key_split(symmpin_comm_key parent, uint64_t counter, int64_t color) {
  /* A domain tag keeps split keys apart from keys of raw bytes that happen to look alike. */
  uint64_t words[5] = {0x73796d6d70696e6dull /* "symmpinm" */, parent.hi, parent.lo, counter,
                       (uint64_t)color};
  return symmpin_comm_key_of_bytes(words, sizeof(words));
}
