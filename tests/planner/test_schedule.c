/* planner/schedule.h on the CPU: when records close, for the engine and symmpin-replay alike. */
#include <criterion/criterion.h>

#include "planner/schedule.h"

#define B 16 /* SYMMPIN_WARMUP in these tests */

/* Feed calls from *n on with a period-4 loop of shapes; the first call that closes, or 0. */
static uint64_t run_to_close(symmpin_schedule *s, uint64_t *n, uint64_t limit) {
  for (; *n <= limit; (*n)++)
    if (symmpin_schedule_call(s, *n, 0x100 + *n % 4, false)) return (*n)++;
  return 0;
}

static void open_schedule(symmpin_schedule *s, uint32_t warmup) {
  symmpin_warmup_config cfg = {.calls = warmup};
  cr_assert_eq(symmpin_schedule_init(s, &cfg), SYMMPIN_OK);
}

Test(schedule, warmup_then_two_intervals_then_doubling_while_nothing_is_new) {
  symmpin_schedule s;
  open_schedule(&s, B);
  uint64_t n = 1;
  uint64_t w = run_to_close(&s, &n, 1000);
  cr_assert_eq(w, B, "a loop of 4 repeated ends warm-up at the shortest warm-up (%u)", B);
  symmpin_schedule_agreed(&s, true);
  cr_assert_eq(run_to_close(&s, &n, 1000), w + 2 * B, "after the warm-up's GO: two intervals");
  symmpin_schedule_agreed(&s, false);
  cr_assert_eq(run_to_close(&s, &n, 1000), w + 2 * B + 2 * B, "nothing new: the interval doubles");
  symmpin_schedule_agreed(&s, true);
  cr_assert_eq(run_to_close(&s, &n, 1000), w + 4 * B + B, "something new: back to one interval");
  symmpin_schedule_free(&s);
}

Test(schedule, a_failed_epoch_is_retried_one_interval_after_its_close) {
  symmpin_schedule s;
  open_schedule(&s, B);
  uint64_t n = 1;
  uint64_t w = run_to_close(&s, &n, 1000);
  symmpin_schedule_failed(&s);
  uint64_t retry = run_to_close(&s, &n, 1000);
  cr_assert_eq(retry, w + B);
  symmpin_schedule_agreed(&s, false);
  uint64_t next = run_to_close(&s, &n, 1000);
  cr_assert_eq(next, retry + 2 * B);
  symmpin_schedule_failed(&s);
  cr_assert_eq(run_to_close(&s, &n, 1000), next + 2 * B, "retried one (doubled) interval later");
  symmpin_schedule_free(&s);
}

Test(schedule, misaligned_closes_meet_at_the_latest_plus_an_interval) {
  symmpin_schedule s;
  open_schedule(&s, B);
  uint64_t n = 1;
  uint64_t w = run_to_close(&s, &n, 1000);
  uint64_t closes[3] = {w, w + 5, w + 2};
  cr_assert(!symmpin_schedule_align(&s, closes, 3));
  symmpin_schedule_failed(&s); /* the realigned point stands */
  cr_assert_eq(run_to_close(&s, &n, 1000), w + 5 + B);
  uint64_t same[2] = {7, 7};
  cr_assert(symmpin_schedule_align(&s, same, 2));
  symmpin_schedule_free(&s);
}

Test(schedule, records_never_close_while_an_agreement_runs) {
  symmpin_schedule s;
  open_schedule(&s, 1); /* the shortest warm-up: one call */
  uint64_t n = 1;
  uint64_t prev = run_to_close(&s, &n, 1000);
  cr_assert_eq(prev, 1);
  for (int e = 0; e < 20; e++) {
    if (e % 3 == 0)
      symmpin_schedule_failed(&s);
    else
      symmpin_schedule_agreed(&s, e % 2);
    uint64_t next = run_to_close(&s, &n, 100000);
    cr_assert_geq(next, prev + SYMMPIN_AGREEMENT_CALLS + 1, "epoch %d: %llu after %llu", e,
                  (unsigned long long)next, (unsigned long long)prev);
    prev = next;
  }
  symmpin_schedule_free(&s);
}

/* Feed calls from *n on, the calls in [missing_from, missing_to) of a shape the plan lacks; the
 * first call that closes, or 0. */
static uint64_t run_missing(symmpin_schedule *s, uint64_t *n, uint64_t limit, uint64_t from,
                            uint64_t to) {
  for (; *n <= limit; (*n)++)
    if (symmpin_schedule_call(s, *n, 0x100 + *n % 4, *n >= from && *n < to)) return (*n)++;
  return 0;
}

/* The earliest call an early close can come at after a close at c: the 8th missing call counted
 * once the agreement is over, and never within B (SYMMPIN_WARMUP) calls of the close. */
static uint64_t early_at(uint64_t c) {
  uint64_t a = c + 3 + SYMMPIN_SCHEDULE_EARLY_CALLS;
  return a > c + B ? a : c + B;
}

/* After the first plan, calls of a shape it lacks close the record at the 8th such call (counted
 * once the agreement in progress is over, and at least B calls after the close), not at the next
 * regular close; an early epoch that
 * plans nothing new disarms the rule (such shapes cannot be planned) until a regular epoch plans
 * something new. */
Test(schedule, calls_of_a_shape_the_plan_lacks_close_the_record_early) {
  symmpin_schedule s;
  open_schedule(&s, B);
  uint64_t n = 1;
  uint64_t w = run_to_close(&s, &n, 1000);
  symmpin_schedule_agreed(&s, true); /* regular next: w + 2B */
  /* missing from w + 1 on: the calls up to w + 3 belong to the agreement and do not count */
  uint64_t e = run_missing(&s, &n, 1000, w + 1, 1000);
  cr_assert_eq(e, early_at(w), "early close at %lu", (unsigned long)e);
  cr_assert_lt(e, w + 2 * B);
  symmpin_schedule_agreed(&s, true); /* it planned the new shape: one interval from here */
  cr_assert_eq(run_to_close(&s, &n, 1000), e + B);
  symmpin_schedule_agreed(&s, false);
  uint64_t e2 = run_missing(&s, &n, 1000, n, 1000);
  cr_assert_eq(e2, early_at(e + B));
  symmpin_schedule_agreed(&s, false); /* nothing new: disarmed, the regular close comes */
  uint64_t r = run_missing(&s, &n, 2000, n, 2000);
  cr_assert_eq(r, e + B + 2 * B, "the regular close (interval doubled), not an early one: %lu",
               (unsigned long)r);
  symmpin_schedule_agreed(&s, true); /* a regular epoch planned something: armed again */
  cr_assert_eq(run_missing(&s, &n, 3000, n, 3000), early_at(r));
  symmpin_schedule_free(&s);
}

/* A failed early epoch disarms it too (a capture at the close, say): the regular schedule goes on. */
Test(schedule, a_failed_early_epoch_disarms_the_early_rule) {
  symmpin_schedule s;
  open_schedule(&s, B);
  uint64_t n = 1;
  uint64_t w = run_to_close(&s, &n, 1000);
  symmpin_schedule_agreed(&s, true);
  uint64_t e = run_missing(&s, &n, 1000, w + 1, 1000);
  cr_assert_eq(e, early_at(w));
  symmpin_schedule_failed(&s);
  cr_assert_eq(run_missing(&s, &n, 1000, n, 1000), w + 2 * B, "the regular close");
  symmpin_schedule_free(&s);
}

/* Shapes that never stop changing: an early close at most every B calls. */
Test(schedule, ever_new_shapes_close_at_most_once_per_warmup_interval) {
  symmpin_schedule s;
  open_schedule(&s, B);
  uint64_t n = 1;
  uint64_t last = run_to_close(&s, &n, 1000);
  symmpin_schedule_agreed(&s, true);
  for (int k = 0; k < 20; k++) {
    uint64_t c = run_missing(&s, &n, 5000, 0, 5000);
    cr_assert_geq(c, last + B, "close %d at %lu, the last at %lu", k, (unsigned long)c,
                  (unsigned long)last);
    symmpin_schedule_agreed(&s, true); /* every epoch plans something new */
    last = c;
  }
  symmpin_schedule_free(&s);
}
