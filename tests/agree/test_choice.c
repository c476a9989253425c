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

/* ---- groups ---- */

static symmpin_choice_unit unit_of(const symmpin_plan_shape *const *shapes, int n) {
  symmpin_choice_unit u;
  symmpin_choice_unit_init(&u);
  for (int i = 0; i < n; i++) symmpin_choice_unit_add(&u, shapes[i]);
  return u;
}

/* Groups are probed whole, by a count per first shape: the 2nd, 4th, ... of the first 32 groups
 * beginning with a shape, each first shape its own count, and the first 32 are the timed ones.
 * Counting groups leaves the eager calls' probes alone (their own count per shape). */
Test(choice, group_probes_are_every_other_group_of_a_first_shape) {
  symmpin_choice *ch = symmpin_choice_new();
  cr_assert_not_null(ch);
  for (unsigned j = 0; j < 100; j++) {
    bool want = j < 2 * SYMMPIN_CHOICE_SAMPLES && (j & 1), timed = false;
    cr_assert_eq(symmpin_choice_group_probe(ch, &A, &timed), want, "group %u of A", j);
    cr_assert_eq(timed, j < 2 * SYMMPIN_CHOICE_SAMPLES, "group %u of A timed", j);
    if (j < 10) {
      cr_assert_eq(symmpin_choice_group_probe(ch, &B, &timed), want, "group %u of B: own count", j);
    }
  }
  for (unsigned j = 0; j < 4; j++)
    cr_assert_eq(symmpin_choice_probe(ch, &A), (j & 1) != 0, "eager A call %u: its own count", j);
  symmpin_choice_free(ch);
}

/* A unit's samples (16 per path at most), keyed by its calls in order: another order is another
 * unit; a unit longer than SYMMPIN_CHOICE_GROUP_CALLS is not tracked. */
Test(choice, group_units_keep_their_samples_and_export_medians) {
  symmpin_choice *ch = symmpin_choice_new();
  const symmpin_plan_shape *ab[] = {&A, &B}, *ba[] = {&B, &A};
  symmpin_choice_unit u = unit_of(ab, 2), v = unit_of(ba, 2);
  cr_assert_neq(u.sig, v.sig, "the order is part of a unit");
  for (int i = 0; i < 20; i++) {
    cr_assert_eq(symmpin_choice_group_want(ch, &u, true), i < SYMMPIN_CHOICE_SAMPLES);
    symmpin_choice_group_add(ch, u.sig, true, 30.0 + i);
  }
  cr_assert(symmpin_choice_group_want(ch, &u, false));
  symmpin_choice_group_add(ch, u.sig, false, 7.0);
  symmpin_choice_group_add(ch, v.sig, false, 1.0); /* never tracked: dropped */
  symmpin_choice_unit big;
  symmpin_choice_unit_init(&big);
  for (int i = 0; i <= SYMMPIN_CHOICE_GROUP_CALLS; i++) symmpin_choice_unit_add(&big, &A);
  cr_assert_not(symmpin_choice_group_want(ch, &big, true), "too long to be tracked");
  symmpin_choice_group_entry e[4];
  cr_assert_eq(symmpin_choice_group_export(ch, e, 4), 1);
  cr_assert_eq(e[0].unit.ncalls, 2);
  cr_assert_eq(e[0].unit.calls[1].count, B.count);
  cr_assert_eq(e[0].symmpin_n, 16);
  cr_assert_eq(e[0].symmpin_ns, 37000, "lower middle of 30..45 us: %u", e[0].symmpin_ns);
  cr_assert_eq(e[0].nccl_n, 1);
  cr_assert_eq(e[0].nccl_ns, 7000);
  symmpin_choice_free(ch);
}

static symmpin_choice_group_entry gentry(const symmpin_choice_unit *u, uint32_t nccl_ns,
                                         uint32_t sym_ns, uint32_t n) {
  return (symmpin_choice_group_entry){
      .unit = *u, .nccl_ns = nccl_ns, .symmpin_ns = sym_ns, .nccl_n = n, .symmpin_n = n};
}

/* The verdict on groups: a unit whose slowest symmpin median is above its slowest NCCL median on
 * the ranks gives back its distinct shapes (for their grouped calls), in rank 0's order; it needs
 * every rank's samples of the same unit; a forged entry (more calls than an entry holds) is
 * ignored. */
Test(choice, group_verdict_gives_back_a_slower_units_shapes) {
  static const symmpin_plan_shape C = {4096, SYMMPIN_BFLOAT16, SYMMPIN_AVG};
  const symmpin_plan_shape *aba[] = {&A, &B, &A}, *cc[] = {&C, &C};
  symmpin_choice_unit slow = unit_of(aba, 3), fast = unit_of(cc, 2);
  /* slow: symmpin 30 / 42 us vs NCCL 40 / 41: slowest 42 > 41. fast: 5 / 6 vs 9 / 8. */
  symmpin_choice_group_entry r0[] = {gentry(&slow, 40000, 30000, 16),
                                     gentry(&fast, 9000, 5000, 16)};
  symmpin_choice_group_entry r1[] = {gentry(&fast, 8000, 6000, 16),
                                     gentry(&slow, 41000, 42000, 16)};
  const symmpin_choice_group_entry *all[] = {r0, r1};
  size_t n[] = {2, 2};
  symmpin_plan_shape out[8];
  cr_assert_eq(symmpin_choice_group_verdict(all, n, 2, out, 8), 2, "A and B, once each");
  cr_assert(out[0].count == A.count && out[1].count == B.count);
  r1[1].nccl_n = SYMMPIN_CHOICE_MIN - 1;
  cr_assert_eq(symmpin_choice_group_verdict(all, n, 2, out, 8), 0, "too few samples on rank 1");
  r1[1].nccl_n = 16;
  r1[1].unit.calls[2] = C; /* rank 1's unit of that signature has other calls */
  cr_assert_eq(symmpin_choice_group_verdict(all, n, 2, out, 8), 0, "not the same unit");
  r1[1].unit.calls[2] = A;
  r0[0].unit.ncalls = SYMMPIN_CHOICE_GROUP_CALLS + 1; /* forged */
  cr_assert_eq(symmpin_choice_group_verdict(all, n, 2, out, 8), 0);
  r0[0].unit.ncalls = 3;
  cr_assert_eq(symmpin_choice_group_verdict(all, n, 2, out, 1), 1, "at most cap");
}
