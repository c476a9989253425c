/* The warm-up rule: ends on a repeated block once enough calls were seen, or at the limit;
 * deterministic (a pure function of the site sequence); the epoch schedule doubles while quiet. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "planner/warmup.h"

/* Index (1-based call count) at which warm-up ends on this sequence; 0 if it does not. */
static uint64_t end_of(const uint64_t *seq, size_t n, uint32_t warmup, uint32_t *period) {
  symmpin_warmup_config cfg = {warmup};
  symmpin_warmup w;
  cr_assert_eq(symmpin_warmup_init(&w, &cfg), SYMMPIN_OK);
  uint64_t end = 0;
  for (size_t i = 0; i < n; i++)
    if (symmpin_warmup_step(&w, seq[i])) {
      end = i + 1;
      break;
    }
  if (period) *period = w.period;
  /* once done, it stays done */
  if (end) cr_assert(symmpin_warmup_step(&w, 12345));
  symmpin_warmup_free(&w);
  return end;
}

/* The rule as stated in warmup.h, by brute force. */
static uint64_t end_reference(const uint64_t *seq, size_t n, uint32_t warmup) {
  uint32_t minc = warmup < SYMMPIN_WARMUP_MIN_CALLS ? warmup : SYMMPIN_WARMUP_MIN_CALLS;
  uint32_t maxp = warmup / 2 < SYMMPIN_WARMUP_MAX_PERIOD ? warmup / 2 : SYMMPIN_WARMUP_MAX_PERIOD;
  for (size_t c = 1; c <= n; c++) {
    if (c >= warmup) return c;
    if (c < minc) continue;
    for (size_t p = 1; p <= maxp && 2 * p <= c; p++) {
      bool rep = true;
      for (size_t k = 0; k < p && rep; k++) rep = seq[c - 1 - k] == seq[c - 1 - p - k];
      if (rep) return c;
    }
  }
  return 0;
}

Test(warmup, loop_of_four_sites) {
  uint64_t seq[64];
  for (int i = 0; i < 64; i++) seq[i] = 100 + (uint64_t)(i % 4);
  uint32_t period;
  /* the first n >= 16 that ends with ABCD ABCD is 16 */
  cr_assert_eq(end_of(seq, 64, 64, &period), 16);
  cr_assert_eq(period, 4);
}

Test(warmup, prologue_then_long_loop) {
  /* 3 one-off calls, then a loop of 10 distinct sites: ends after two full loops (3 + 20). */
  uint64_t seq[200];
  for (int i = 0; i < 3; i++) seq[i] = 1000 + (uint64_t)i;
  for (int i = 3; i < 200; i++) seq[i] = (uint64_t)((i - 3) % 10) + 1;
  uint32_t period;
  cr_assert_eq(end_of(seq, 200, 64, &period), 23);
  cr_assert_eq(period, 10);
}

Test(warmup, limit_ends_it) {
  /* all distinct: no repeat, the limit ends it */
  uint64_t seq[100];
  for (int i = 0; i < 100; i++) seq[i] = (uint64_t)i + 1;
  uint32_t period;
  cr_assert_eq(end_of(seq, 100, 40, &period), 40);
  cr_assert_eq(period, 0);
  cr_assert_eq(end_of(seq, 30, 40, NULL), 0); /* trace too short: never ends */
  cr_assert_eq(end_of(seq, 100, 0, NULL), SYMMPIN_WARMUP_DEFAULT);
}

Test(warmup, small_limit) {
  uint64_t seq[10] = {5, 5, 5, 5, 5, 5, 5, 5, 5, 5};
  cr_assert_eq(end_of(seq, 10, 1, NULL), 1);
  /* limit 3: the repeat at call 2 comes before min(16, 3) = 3 calls, so the limit ends it */
  cr_assert_eq(end_of(seq, 10, 3, NULL), 3);
}

Test(warmup, matches_reference_and_is_deterministic, .timeout = 60) {
  srand(1234);
  for (int iter = 0; iter < 300; iter++) {
    size_t n = 20 + (size_t)(rand() % 300);
    uint32_t warmup = 1 + (uint32_t)(rand() % 200);
    uint64_t *seq = malloc(n * sizeof(*seq));
    int alphabet = 1 + rand() % 6, period = 1 + rand() % 12;
    for (size_t i = 0; i < n; i++)
      seq[i] = (rand() % 4 == 0) ? (uint64_t)(rand() % alphabet) : (uint64_t)(i % (size_t)period);
    uint64_t a = end_of(seq, n, warmup, NULL), b = end_of(seq, n, warmup, NULL);
    cr_assert_eq(a, b);
    cr_assert_eq(a, end_reference(seq, n, warmup), "iter %d: n=%zu warmup=%u", iter, n, warmup);
    free(seq);
  }
}

Test(warmup, epochs_double_while_quiet) {
  symmpin_warmup_config cfg = {10};
  symmpin_epochs e;
  symmpin_epochs_init(&e, &cfg, 16);
  cr_assert_eq(e.next, 26);
  cr_assert(symmpin_epochs_due(&e, 26));
  cr_assert_not(symmpin_epochs_due(&e, 25));
  symmpin_epochs_advance(&e, false);
  cr_assert_eq(e.next, 46);
  symmpin_epochs_advance(&e, false);
  cr_assert_eq(e.next, 86);
  symmpin_epochs_advance(&e, true); /* new sites: back to the base interval */
  cr_assert_eq(e.next, 96);
  for (int i = 0; i < 100; i++) symmpin_epochs_advance(&e, false);
  cr_assert_eq(e.interval, SYMMPIN_EPOCH_MAX_INTERVAL);
  /* every record must fit one board blob (1 MiB): 32-byte header + 32 bytes a call */
  cr_assert_leq(32 + 32 * (uint64_t)SYMMPIN_EPOCH_MAX_INTERVAL, 1u << 20);
  cr_assert_leq(32 + 32 * (uint64_t)SYMMPIN_WARMUP_MAX, 1u << 20);
  symmpin_warmup_config big = {1u << 30};
  symmpin_epochs_init(&e, &big, 0);
  cr_assert_eq(e.interval, SYMMPIN_WARMUP_MAX);
}
