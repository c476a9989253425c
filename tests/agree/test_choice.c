/* The choice by measurement's host side (agree/choice.h): which calls are probes, what a rank
 * posts, and the verdict every rank computes from the posts. Plain C, no fakes needed. */
#include <criterion/criterion.h>

#include "common/types.h"
#include "agree/choice.h"

static const symmpin_plan_shape A = {256, SYMMPIN_FLOAT32, SYMMPIN_SUM};
static const symmpin_plan_shape B = {512, SYMMPIN_BFLOAT16, SYMMPIN_AVG};

Test(choice, probes_are_the_odd_calls_of_the_first_32_per_shape) {
  symmpin_choice *ch = symmpin_choice_new();
  cr_assert_not_null(ch);
  for (unsigned j = 0; j < 100; j++) {
    bool want = j < 2 * SYMMPIN_CHOICE_SAMPLES && (j & 1);
    cr_assert_eq(symmpin_choice_probe(ch, &A), want, "A call %u", j);
    if (j < 10) cr_assert_eq(symmpin_choice_probe(ch, &B), want, "B call %u: own count", j);
  }
  symmpin_choice_free(ch);
}

Test(choice, a_full_table_probes_nothing_new) {
  symmpin_choice *ch = symmpin_choice_new();
  for (uint64_t k = 0; k < SYMMPIN_CHOICE_SHAPES; k++) {
    symmpin_plan_shape s = {100 + k, SYMMPIN_FLOAT32, SYMMPIN_SUM};
    (void)symmpin_choice_probe(ch, &s);
  }
  symmpin_plan_shape late = {7, SYMMPIN_FLOAT32, SYMMPIN_SUM};
  for (int j = 0; j < 4; j++) cr_assert_not(symmpin_choice_probe(ch, &late));
  cr_assert_not(symmpin_choice_want(ch, &late, true));
  symmpin_choice_free(ch);
}

Test(choice, samples_stop_at_16_and_export_medians) {
  symmpin_choice *ch = symmpin_choice_new();
  (void)symmpin_choice_probe(ch, &A);
  for (int i = 0; i < 20; i++) {
    cr_assert_eq(symmpin_choice_want(ch, &A, true), i < SYMMPIN_CHOICE_SAMPLES);
    symmpin_choice_add(ch, &A, true, 10.0 + i); /* 10 .. 25: kept 10 .. 25 of the first 16 */
  }
  symmpin_choice_add(ch, &A, false, 3.0);
  symmpin_choice_add(ch, &A, false, 100.0);
  symmpin_choice_add(ch, &A, false, 4.0);
  symmpin_choice_add(ch, &A, false, -1.0); /* refused */
  symmpin_choice_entry e[4];
  cr_assert_eq(symmpin_choice_export(ch, e, 4), 1);
  cr_assert_eq(e[0].count, 256);
  cr_assert_eq(e[0].symmpin_n, 16);
  cr_assert_eq(e[0].symmpin_ns, 17000, "lower middle of 10..25 us: %u", e[0].symmpin_ns);
  cr_assert_eq(e[0].nccl_n, 3);
  cr_assert_eq(e[0].nccl_ns, 4000);
  symmpin_choice_free(ch);
}

static symmpin_choice_entry entry(const symmpin_plan_shape *s, uint32_t nccl_ns, uint32_t sym_ns,
                                  uint32_t n) {
  return (symmpin_choice_entry){.count = s->count, .dtype = s->dtype, .op = s->op,
                                .nccl_ns = nccl_ns, .symmpin_ns = sym_ns, .nccl_n = n,
                                .symmpin_n = n};
}

/* The slowest rank's numbers decide (max of each path over ranks); every rank needs enough
 * samples of both; shapes are matched whatever their order on each rank. */
Test(choice, verdict_uses_the_slowest_rank_and_needs_every_rank) {
  symmpin_plan_shape out[8];
  /* A: rank 0 says symmpin 3 us vs NCCL 8, rank 1 symmpin 9 vs NCCL 8.5: slowest 9 > 8.5 -> NCCL.
   * B: symmpin 4 / 5 vs NCCL 7 / 6: slowest 5 < 7 -> symmpin. */
  symmpin_choice_entry r0[] = {entry(&A, 8000, 3000, 16), entry(&B, 7000, 4000, 16)};
  symmpin_choice_entry r1[] = {entry(&B, 6000, 5000, 16), entry(&A, 8500, 9000, 16)};
  const symmpin_choice_entry *all[] = {r0, r1};
  size_t n[] = {2, 2};
  cr_assert_eq(symmpin_choice_verdict(all, n, 2, out, 8), 1);
  cr_assert(out[0].count == A.count && out[0].dtype == A.dtype && out[0].op == A.op);
  /* the same posts in another rank's hands: the same answer */
  cr_assert_eq(symmpin_choice_verdict(all, n, 2, out, 8), 1);
  /* too few samples on one rank: no verdict yet */
  r1[1].nccl_n = SYMMPIN_CHOICE_MIN - 1;
  cr_assert_eq(symmpin_choice_verdict(all, n, 2, out, 8), 0);
  r1[1].nccl_n = SYMMPIN_CHOICE_MIN;
  cr_assert_eq(symmpin_choice_verdict(all, n, 2, out, 8), 1);
  /* a shape one rank never measured: no verdict */
  n[1] = 1;
  cr_assert_eq(symmpin_choice_verdict(all, n, 2, out, 8), 0);
  /* equal times keep symmpin */
  symmpin_choice_entry one[] = {entry(&A, 5000, 5000, 16)};
  const symmpin_choice_entry *solo[] = {one};
  size_t n1[] = {1};
  cr_assert_eq(symmpin_choice_verdict(solo, n1, 1, out, 8), 0);
  cr_assert_eq(symmpin_choice_verdict(NULL, n1, 1, out, 8), 0);
}
