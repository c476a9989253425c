/* CPU tests of the kernels' host logic (kernels/select.c): supports() against common/types.h's
 * lists, slot sizes against a host-side model of the one-shot slot layout
 * (kernels/oneshot_layout.h), slot classes, algorithm choice and launch geometry.
 * No GPU and no CUDA call: the layout model below mirrors what the kernels (kernels/device.cuh and the families) address. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/allreduce.h"
#include "kernels/oneshot_layout.h"
#include "kernels/twoshot_layout.h"
#include "kernels/select.h"

static const size_t counts[] = {0,    1,    2,    3,    7,     8,     9,      15,     16,
                                17,   31,   255,  256,  257,   1023,  4095,   4096,   4097,
                                8191, 65535, 65536, 65537, 131072, 262145, 1000003, 1 << 22};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

static size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }

Test(kernels_supports, every_nccl_type_and_builtin_op) {
  for (int d = 0; d < SYMMPIN_DTYPE_COUNT; d++)
    for (int op = 0; op < SYMMPIN_OP_COUNT; op++)
      cr_expect(symmpin_kernel_supports(SYMMPIN_COLL_ALLREDUCE, d, op),
                "dtype %d op %d should be supported", d, op);
}

Test(kernels_supports, rejects_unknown_values) {
  cr_expect_not(symmpin_kernel_supports(SYMMPIN_COLL_ALLREDUCE, -1, SYMMPIN_SUM));
  cr_expect_not(symmpin_kernel_supports(SYMMPIN_COLL_ALLREDUCE, SYMMPIN_DTYPE_COUNT, SYMMPIN_SUM));
  cr_expect_not(symmpin_kernel_supports(SYMMPIN_COLL_ALLREDUCE, SYMMPIN_FLOAT32,
                                        SYMMPIN_OP_COUNT)); /* PreMulSum ops */
  cr_expect_not(symmpin_kernel_supports(SYMMPIN_COLL_ALLREDUCE, SYMMPIN_FLOAT32, -1));
  cr_expect_eq(symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 10, SYMMPIN_DTYPE_COUNT, 2,
                                         SYMMPIN_INPUT_STAGED),
               0);
  cr_expect_eq(symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 10, SYMMPIN_FLOAT32, 0,
                                         SYMMPIN_INPUT_STAGED),
               0);
  cr_expect_eq(symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 10, SYMMPIN_FLOAT32,
                                         SYMMPIN_KERNEL_MAX_RANKS + 1, SYMMPIN_INPUT_STAGED),
               0);
  cr_expect_eq(symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 10, SYMMPIN_FLOAT32, 2,
                                         (symmpin_kernel_input)7),
               0);
  cr_expect_eq(symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, SIZE_MAX / 2, SYMMPIN_FLOAT64, 2,
                                         SYMMPIN_INPUT_STAGED),
               0, "overflowing sizes are refused, not wrapped");
}

/* common/types.h's lists, with kernels/select.h's entry for each. */
static const struct {
  const char *name;
  int value;
  size_t bytes;
  int has_kernel;
} listed_dtypes[] = {
#define SYMMPIN_X(name, value, str, bytes) {#name, value, bytes, SYMMPIN_KERNEL_DTYPE_##name},
    SYMMPIN_DTYPES(SYMMPIN_X)
#undef SYMMPIN_X
};
static const struct {
  const char *name;
  int value;
  int has_kernel;
} listed_ops[] = {
#define SYMMPIN_X(name, value, str) {#name, value, SYMMPIN_KERNEL_OP_##name},
    SYMMPIN_OPS(SYMMPIN_X)
#undef SYMMPIN_X
};
#define NLISTED_DTYPES (sizeof listed_dtypes / sizeof listed_dtypes[0])
#define NLISTED_OPS (sizeof listed_ops / sizeof listed_ops[0])

static bool dtype_listed(int v) {
  for (size_t i = 0; i < NLISTED_DTYPES; i++)
    if (listed_dtypes[i].value == v) return true;
  return false;
}

static bool op_listed(int v) {
  for (size_t i = 0; i < NLISTED_OPS; i++)
    if (listed_ops[i].value == v) return true;
  return false;
}

/* supports() follows the lists entry by entry: a (datatype, op) pair is supported exactly when
 * both entries say there is a kernel, and only then does the datatype get a slot and a geometry. */
Test(kernels_supports, follows_the_datatype_and_op_lists) {
  cr_assert_gt(NLISTED_DTYPES, 0);
  cr_assert_gt(NLISTED_OPS, 0);
  for (size_t i = 0; i < NLISTED_DTYPES; i++) {
    int d = listed_dtypes[i].value;
    bool has = listed_dtypes[i].has_kernel != 0;
    cr_expect_eq(symmpin_dtype_size(d), listed_dtypes[i].bytes, "%s: size", listed_dtypes[i].name);
    for (size_t j = 0; j < NLISTED_OPS; j++) {
      bool want = has && listed_ops[j].has_kernel;
      cr_expect_eq(symmpin_kernel_supports(SYMMPIN_COLL_ALLREDUCE, d, listed_ops[j].value), want,
                   "%s / %s: supports %d", listed_dtypes[i].name, listed_ops[j].name, !want);
    }
    for (int f = 0; f < 2; f++) {
      cr_expect_eq(symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 100, d, 2,
                                             (symmpin_kernel_input)f) != 0,
                   has, "%s form %d: a slot size exactly when it has a kernel",
                   listed_dtypes[i].name, f);
      cr_expect_eq(
          symmpin_kernel_geometry_for(SYMMPIN_COLL_ALLREDUCE, 100, d, 2, (symmpin_kernel_input)f)
                  .blocks != 0,
          has, "%s form %d: a geometry exactly when it has a kernel", listed_dtypes[i].name, f);
    }
  }
}

/* Values the lists do not name (gaps, beyond either end, user-defined ops) are never supported. */
Test(kernels_supports, refuses_every_value_the_lists_do_not_name) {
  int hi = 0;
  for (size_t i = 0; i < NLISTED_DTYPES; i++)
    if (listed_dtypes[i].value > hi) hi = listed_dtypes[i].value;
  for (size_t j = 0; j < NLISTED_OPS; j++)
    if (listed_ops[j].value > hi) hi = listed_ops[j].value;
  int values[64 + 6] = {INT32_MIN, -1000, 255, 256, 1000, INT32_MAX}, nvalues = 6;
  for (int v = -8; v <= hi + 8 && nvalues < 70; v++) values[nvalues++] = v;
  for (int k = 0; k < nvalues; k++) {
    int v = values[k];
    if (!dtype_listed(v)) {
      for (size_t j = 0; j < NLISTED_OPS; j++)
        cr_expect_not(symmpin_kernel_supports(SYMMPIN_COLL_ALLREDUCE, v, listed_ops[j].value),
                      "dtype %d is not listed", v);
      cr_expect_eq(
          symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 100, v, 2, SYMMPIN_INPUT_STAGED), 0,
          "dtype %d", v);
    }
    if (!op_listed(v))
      for (size_t i = 0; i < NLISTED_DTYPES; i++)
        cr_expect_not(symmpin_kernel_supports(SYMMPIN_COLL_ALLREDUCE, listed_dtypes[i].value, v),
                      "op %d is not listed", v);
  }
}

/* Slot classes: a valid number for every shape (agree/agree.c multiplies them into sharing
 * classes, planner/record.h), also for shapes the kernels refuse; deterministic; named. */
Test(kernels_slot_class, in_range_for_every_shape_and_deterministic) {
  cr_assert_gt(SYMMPIN_KERNEL_SLOT_CLASSES, 0);
  for (int d = -2; d <= SYMMPIN_DTYPE_COUNT + 1; d++)
    for (int n = -1; n <= SYMMPIN_KERNEL_MAX_RANKS + 1; n++)
      for (int f = 0; f < 3; f++)
        for (size_t i = 0; i < NCOUNTS; i++) {
          int k = symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, counts[i], d, n,
                                            (symmpin_kernel_input)f);
          cr_assert(k >= 0 && k < SYMMPIN_KERNEL_SLOT_CLASSES,
                    "dtype %d n %d form %d count %zu: class %d", d, n, f, counts[i], k);
          cr_expect_eq(symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, counts[i], d, n,
                                                 (symmpin_kernel_input)f),
                       k);
        }
}

Test(kernels_slot_class, names) {
  for (int k = 0; k < SYMMPIN_KERNEL_SLOT_CLASSES; k++) {
    const char *a = symmpin_kernel_slot_class_name(k);
    cr_assert_not_null(a, "class %d has no name", k);
    cr_expect_gt(strlen(a), 0);
    for (int j = 0; j < k; j++)
      cr_expect_str_neq(a, symmpin_kernel_slot_class_name(j), "classes %d and %d share a name", j,
                        k);
  }
  cr_expect_null(symmpin_kernel_slot_class_name(-1));
  cr_expect_null(symmpin_kernel_slot_class_name(SYMMPIN_KERNEL_SLOT_CLASSES));
  /* symmpin-replay prints these (tests/planner/test_replay.py looks for "two-shot") */
  int ll = symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, 1, SYMMPIN_FLOAT32, 2,
                                     SYMMPIN_INPUT_STAGED);
  int copy = symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, (1 << 16) + 1, SYMMPIN_FLOAT32, 2,
                                       SYMMPIN_INPUT_STAGED);
  int in_slot = symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, 1, SYMMPIN_FLOAT32, 2,
                                          SYMMPIN_INPUT_IN_SLOT);
  int two = symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, 1 << 22, SYMMPIN_FLOAT32, 2,
                                      SYMMPIN_INPUT_STAGED);
  cr_expect_str_eq(symmpin_kernel_slot_class_name(ll), "LL");
  cr_expect_str_eq(symmpin_kernel_slot_class_name(copy), "copy");
  cr_expect_str_eq(symmpin_kernel_slot_class_name(in_slot), "in-slot");
  cr_expect_str_eq(symmpin_kernel_slot_class_name(two), "two-shot");
}

/* What the rule is for: two shapes whose algorithms differ (different slot layouts, or different
 * input forms, whose areas overlap) never share a class. Checked over every supported shape around
 * the LL/copy threshold. */
Test(kernels_slot_class, differs_whenever_the_algorithm_differs) {
  int class_of[SYMMPIN_ALGO_COUNT];
  for (int a = 0; a < SYMMPIN_ALGO_COUNT; a++) class_of[a] = -1;
  for (int d = 0; d < SYMMPIN_DTYPE_COUNT; d++) {
    if (!symmpin_kernel_supports(SYMMPIN_COLL_ALLREDUCE, d, SYMMPIN_SUM)) continue;
    size_t esize = symmpin_dtype_size(d);
    for (int n = 1; n <= SYMMPIN_KERNEL_MAX_RANKS; n++) {
      size_t at = symmpin_oneshot_ll_max_bytes(n) / esize;
      size_t cs[NCOUNTS + 3];
      memcpy(cs, counts, sizeof counts);
      cs[NCOUNTS] = at - 1, cs[NCOUNTS + 1] = at, cs[NCOUNTS + 2] = at + 1;
      for (int f = 0; f < 2; f++)
        for (size_t i = 0; i < NCOUNTS + 3; i++) {
          symmpin_kernel_input in = (symmpin_kernel_input)f;
          int a = (int)symmpin_kernel_algo_for(SYMMPIN_COLL_ALLREDUCE, cs[i], d, n, in);
          int k = symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, cs[i], d, n, in);
          cr_assert(a >= 0 && a < SYMMPIN_ALGO_COUNT);
          if (class_of[a] < 0) class_of[a] = k;
          cr_expect_eq(k, class_of[a], "algorithm %d in classes %d and %d", a, class_of[a], k);
        }
    }
  }
  for (int a = 0; a < SYMMPIN_ALGO_COUNT; a++) {
    cr_expect_geq(class_of[a], 0, "algorithm %d never chosen", a);
    for (int b = 0; b < a; b++)
      cr_expect_neq(class_of[a], class_of[b], "algorithms %d and %d share slot class %d", b, a,
                    class_of[a]);
  }
}

/* The numbers themselves are visible: agree/agree.c's sharing class is stream * classes + class,
 * and symmpin-replay prints it; they stay what the variants were (LL 0, copy 1, direct 2), the
 * two-shot family came fourth (3 of 4). */
Test(kernels_slot_class, numbers_unchanged) {
  cr_expect_eq(SYMMPIN_KERNEL_SLOT_CLASSES, 4);
  for (int n = 1; n <= SYMMPIN_KERNEL_MAX_RANKS; n++) {
    size_t at = symmpin_oneshot_ll_max_bytes(n);
    cr_expect_eq(symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, at, SYMMPIN_INT8, n,
                                           SYMMPIN_INPUT_STAGED),
                 0);
    cr_expect_eq(symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, at + 1, SYMMPIN_INT8, n,
                                           SYMMPIN_INPUT_STAGED),
                 1);
    cr_expect_eq(symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, at + 1, SYMMPIN_INT8, n,
                                           SYMMPIN_INPUT_IN_SLOT),
                 2);
    cr_expect_eq(symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, 1, SYMMPIN_INT8, n,
                                           SYMMPIN_INPUT_IN_SLOT),
                 2);
    size_t two = symmpin_twoshot_min_bytes(n);
    if (n == 1) {
      cr_expect_eq(two, SIZE_MAX, "one rank never takes two-shot");
      continue;
    }
    cr_expect_eq(symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, two - 1, SYMMPIN_INT8, n,
                                           SYMMPIN_INPUT_STAGED),
                 1);
    cr_expect_eq(symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, two, SYMMPIN_INT8, n,
                                           SYMMPIN_INPUT_STAGED),
                 3);
    cr_expect_eq(symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, two, SYMMPIN_INT8, n,
                                           SYMMPIN_INPUT_IN_SLOT),
                 2);
  }
}

Test(kernels_layout, header_fields_fit_and_do_not_overlap) {
  cr_expect_geq(SYMMPIN_ONESHOT_BAR_OFFSET, SYMMPIN_ONESHOT_EPOCH_OFFSET +
                                                4 * SYMMPIN_ONESHOT_MAX_BLOCKS);
  cr_expect_geq(SYMMPIN_ONESHOT_TIMEOUT_OFFSET,
                SYMMPIN_ONESHOT_BAR_OFFSET + 4 * SYMMPIN_ONESHOT_MAX_BLOCKS * SYMMPIN_KERNEL_MAX_RANKS);
  cr_expect_leq(SYMMPIN_ONESHOT_TIMEOUT_OFFSET + 8, SYMMPIN_ONESHOT_IDENT_OFFSET);
  cr_expect_eq(SYMMPIN_ONESHOT_IDENT_OFFSET % 8, 0);
  cr_expect_leq(SYMMPIN_ONESHOT_IDENT_OFFSET + 2 * 8 * SYMMPIN_KERNEL_MAX_RANKS,
                SYMMPIN_ONESHOT_HEADER_BYTES);
  cr_expect_eq(symmpin_kernel_in_slot_offset() % SYMMPIN_ONESHOT_SLOT_ALIGN, 0);
  cr_expect_eq(symmpin_kernel_in_slot_offset(), SYMMPIN_ONESHOT_HEADER_BYTES);
}

/* The staging map: injective over (position, parity), parity recoverable from the index alone
 * (what makes calls of different shapes at one slot safe), and bounded as slot_bytes assumes. */
Test(kernels_layout, unit_index_is_injective_and_keeps_parity) {
  enum { N = 4096 };
  unsigned char *seen = calloc(2 * N + 64, 1);
  cr_assert_not_null(seen);
  for (size_t q = 0; q < N; q++) {
    for (unsigned p = 0; p < 2; p++) {
      size_t u = symmpin_oneshot_unit_index(q, p);
      cr_assert_lt(u, 2 * (size_t)N, "q %zu p %u -> %zu", q, p, u);
      cr_expect_eq(seen[u], 0, "unit %zu used twice", u);
      seen[u] = 1;
      cr_expect_eq((u / SYMMPIN_ONESHOT_PARITY_UNITS) % 2, p, "parity lost for q %zu", q);
    }
  }
  free(seen);
}

Test(kernels_layout, seq_next_skips_zero_and_alternates_parity) {
  uint32_t s[] = {0, 1, 2, 0x7fffffffu, 0xfffffffeu, 0xffffffffu};
  for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
    uint32_t n = symmpin_oneshot_seq_next(s[i]);
    cr_expect_neq(n, 0u);
    cr_expect_neq(n & 1, s[i] & 1, "seq %u -> %u keeps parity", s[i], n);
    cr_expect_gt((int32_t)(n - s[i]), 0, "seq %u -> %u goes backwards", s[i], n);
  }
}

/* Two-shot calls take two sequence numbers each, wrapping through 0; the parity must alternate
 * from call to call everywhere, across the wrap too (a repeat would let a call's pushes overwrite
 * what a slower peer still copies out of the previous call). */
Test(kernels_layout, twoshot_parity_alternates_across_the_wrap) {
  uint32_t starts[] = {0, 1, 2, 3, 0x7ffffff0u, 0xfffffff0u, 0xfffffff1u};
  for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
    uint32_t epoch = starts[i];
    unsigned prev = 2;
    for (int k = 0; k < 64; k++) {
      uint32_t seq = symmpin_twoshot_first_seq(epoch);
      unsigned p = symmpin_twoshot_parity(seq);
      cr_assert(p <= 1);
      if (prev <= 1) cr_assert_neq(p, prev, "epoch %u: parity repeats", epoch);
      prev = p;
      epoch = seq + 1u; /* what the kernel leaves in the slot */
    }
  }
}

/* In and out regions of one parity never overlap, nor does any unit of one parity land on a unit
 * of the other, for any two shapes (shards S, S'). */
Test(kernels_layout, twoshot_regions_disjoint) {
  for (int n = 2; n <= SYMMPIN_KERNEL_MAX_RANKS; n++) {
    size_t shards[] = {1, 31, 32, 33, 100};
    for (size_t a = 0; a < 5; a++)
      for (size_t b = 0; b < 5; b++) {
        size_t S = shards[a], T = shards[b];
        size_t cap = 2 * (2 * (size_t)n * (S > T ? S : T) + 64);
        unsigned char *owner = calloc(cap, 1);
        const int r = n / 2; /* the slot's rank: any */
        for (int q = 0; q < n; q++)
          for (size_t u = 0; u < S && q != r; u++) {
            size_t i = symmpin_twoshot_in_index(S, n, q, r, u, 0);
            size_t o = symmpin_twoshot_out_index(S, n, q, r, u, 0);
            cr_assert(i < cap && o < cap);
            cr_expect_eq(owner[i], 0, "n %d S %zu: in unit reused", n, S);
            cr_expect_eq(owner[o], 0, "n %d S %zu: out unit overlaps", n, S);
            owner[i] = owner[o] = 1;
          }
        for (int q = 0; q < n; q++)
          for (size_t u = 0; u < T && q != r; u++) {
            cr_expect_neq(owner[symmpin_twoshot_in_index(T, n, q, r, u, 1)], 1, "parities meet");
            cr_expect_neq(owner[symmpin_twoshot_out_index(T, n, q, r, u, 1)], 1, "parities meet");
          }
        free(owner);
      }
  }
}

/* Host model of what the kernels touch in a slot, in bytes from its start: the highest byte + 1. */
static size_t model_extent(size_t count, int dtype, int nranks, symmpin_kernel_input form) {
  size_t bytes = count * symmpin_dtype_size(dtype);
  symmpin_kernel_algo v =
      symmpin_kernel_algo_for(SYMMPIN_COLL_ALLREDUCE, count, dtype, nranks, form);
  size_t units = symmpin_oneshot_units(count, dtype, v);
  if (count == 0) return SYMMPIN_ONESHOT_HEADER_BYTES;
  switch (v) {
  case SYMMPIN_ALGO_ONESHOT_IN_SLOT: return SYMMPIN_ONESHOT_HEADER_BYTES + bytes;
  case SYMMPIN_ALGO_ONESHOT_COPY: {
    size_t hi = symmpin_oneshot_unit_index(units - 1, 1);
    size_t lo = symmpin_oneshot_unit_index(units - 1, 0);
    return SYMMPIN_ONESHOT_HEADER_BYTES + ((hi > lo ? hi : lo) + 1) * SYMMPIN_ONESHOT_UNIT_BYTES;
  }
  case SYMMPIN_ALGO_ONESHOT_LL: {
    /* the last line of the last source rank, both parities; the max over all q is at the end */
    size_t last = (size_t)nranks * units - 1, top = 0;
    for (size_t q = last > 64 ? last - 64 : 0; q <= last; q++)
      for (unsigned p = 0; p < 2; p++) {
        size_t u = symmpin_oneshot_unit_index(q, p);
        if (u > top) top = u;
      }
    return SYMMPIN_ONESHOT_HEADER_BYTES + (top + 1) * SYMMPIN_ONESHOT_UNIT_BYTES;
  }
  case SYMMPIN_ALGO_TWOSHOT: {
    /* the last unit of the out region: owner n-1's last unit (16-byte vectors of one rank) */
    size_t vecs = (bytes + SYMMPIN_ONESHOT_UNIT_BYTES - 1) / SYMMPIN_ONESHOT_UNIT_BYTES;
    size_t S = (vecs + (size_t)nranks - 1) / (size_t)nranks;
    size_t top = 0;
    for (int r = 0; r < nranks; r++)
      for (int q = 0; q < nranks; q++) {
        if (q == r) continue;
        for (unsigned p = 0; p < 2; p++) {
          size_t hi = symmpin_twoshot_out_index(S, nranks, q, r, S - 1, p);
          size_t lo = symmpin_twoshot_in_index(S, nranks, q, r, S - 1, p);
          if (hi > top) top = hi;
          if (lo > top) top = lo;
        }
      }
    return SYMMPIN_ONESHOT_HEADER_BYTES + (top + 1) * SYMMPIN_ONESHOT_UNIT_BYTES;
  }
  default: return SIZE_MAX;
  }
}

ParameterizedTestParameters(kernels_slot, sizes) {
  static int dtypes[SYMMPIN_DTYPE_COUNT];
  for (int d = 0; d < SYMMPIN_DTYPE_COUNT; d++) dtypes[d] = d;
  return cr_make_param_array(int, dtypes, SYMMPIN_DTYPE_COUNT);
}

ParameterizedTest(int *dtype, kernels_slot, sizes, .timeout = 60) {
  for (int n = 1; n <= SYMMPIN_KERNEL_MAX_RANKS; n++) {
    for (int f = 0; f < 2; f++) {
      size_t prev = 0;
      for (size_t i = 0; i < NCOUNTS; i++) {
        size_t c = counts[i];
        size_t sb = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, c, *dtype, n,
                                              (symmpin_kernel_input)f);
        cr_assert_gt(sb, 0, "dtype %d n %d form %d count %zu", *dtype, n, f, c);
        cr_expect_eq(sb % SYMMPIN_ONESHOT_SLOT_ALIGN, 0, "slot size %zu not aligned", sb);
        cr_expect_geq(sb, prev, "slot size shrinks at count %zu (dtype %d n %d form %d)", c,
                      *dtype, n, f);
        size_t need = model_extent(c, *dtype, n, (symmpin_kernel_input)f);
        cr_expect_geq(sb, need, "slot %zu < layout extent %zu (dtype %d n %d form %d count %zu)",
                      sb, need, *dtype, n, f, c);
        prev = sb;
      }
    }
  }
}

Test(kernels_slot, in_slot_needs_exactly_header_plus_data) {
  /* The in-slot form's data area is contiguous: a caller writes count*esize bytes at the offset. */
  size_t sb = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 1000, SYMMPIN_FLOAT32, 2,
                                        SYMMPIN_INPUT_IN_SLOT);
  cr_expect_eq(sb, SYMMPIN_ONESHOT_HEADER_BYTES + 4096);
  cr_expect_eq(symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 1024, SYMMPIN_FLOAT32, 8,
                                         SYMMPIN_INPUT_IN_SLOT),
               SYMMPIN_ONESHOT_HEADER_BYTES + 4096, "in-slot size does not grow with ranks");
}

Test(kernels_algo, ll_below_threshold_copy_above) {
  for (int n = 1; n <= SYMMPIN_KERNEL_MAX_RANKS; n++) {
    size_t max = symmpin_oneshot_ll_max_bytes(n);
    cr_assert_gt(max, 0);
    cr_expect_eq(symmpin_kernel_algo_for(SYMMPIN_COLL_ALLREDUCE, max / 2, SYMMPIN_BFLOAT16, n,
                                         SYMMPIN_INPUT_STAGED),
                 SYMMPIN_ALGO_ONESHOT_LL);
    cr_expect_eq(symmpin_kernel_algo_for(SYMMPIN_COLL_ALLREDUCE, max / 2 + 1, SYMMPIN_BFLOAT16, n,
                                         SYMMPIN_INPUT_STAGED),
                 SYMMPIN_ALGO_ONESHOT_COPY);
    cr_expect_eq(symmpin_kernel_algo_for(SYMMPIN_COLL_ALLREDUCE, 1, SYMMPIN_BFLOAT16, n,
                                         SYMMPIN_INPUT_IN_SLOT),
                 SYMMPIN_ALGO_ONESHOT_IN_SLOT);
    if (n > 1) cr_expect_leq(max, symmpin_oneshot_ll_max_bytes(n - 1), "more ranks, less LL");
  }
}

Test(kernels_geometry, within_caps_and_covers_the_work) {
  for (int d = 0; d < SYMMPIN_DTYPE_COUNT; d++)
    for (int n = 1; n <= SYMMPIN_KERNEL_MAX_RANKS; n++)
      for (int f = 0; f < 2; f++)
        for (size_t i = 0; i < NCOUNTS; i++) {
          size_t c = counts[i];
          symmpin_kernel_geometry g =
              symmpin_kernel_geometry_for(SYMMPIN_COLL_ALLREDUCE, c, d, n, f);
          if (c == 0) {
            cr_expect_eq(g.blocks, 0, "count 0 launches nothing");
            continue;
          }
          cr_assert_geq(g.blocks, 1);
          cr_expect_leq(g.blocks, SYMMPIN_ONESHOT_MAX_BLOCKS);
          cr_expect_leq(g.threads, SYMMPIN_ONESHOT_MAX_THREADS);
          cr_expect_eq(g.threads % 32, 0, "threads %u not whole warps", g.threads);
          cr_expect_geq(g.threads, (unsigned)n, "barrier needs one thread per rank");
          /* 8 simulated ranks must fit on one GPU (132 SMs x 2048 threads on an H200) */
          cr_expect_leq(8ull * g.blocks * g.threads, 132ull * 2048 / 2);
          size_t units = symmpin_oneshot_units(
              c, d, symmpin_kernel_algo_for(SYMMPIN_COLL_ALLREDUCE, c, d, n, f));
          cr_expect_geq(units, 1);
          /* no block is left without work: the grid is not larger than the work */
          cr_expect_leq((size_t)(g.blocks - 1) * g.threads, units,
                        "dtype %d n %d count %zu: %u x %u for %zu units", d, n, c, g.blocks,
                        g.threads, units);
          symmpin_kernel_geometry g2 =
              symmpin_kernel_geometry_for(SYMMPIN_COLL_ALLREDUCE, c, d, n, f);
          cr_expect(g2.blocks == g.blocks && g2.threads == g.threads, "not deterministic");
        }
}

Test(kernels_geometry, small_calls_use_one_small_block) {
  symmpin_kernel_geometry g = symmpin_kernel_geometry_for(SYMMPIN_COLL_ALLREDUCE, 1,
                                                          SYMMPIN_FLOAT32, 2, SYMMPIN_INPUT_STAGED);
  cr_expect_eq(g.blocks, 1);
  cr_expect_eq(g.threads, 32);
  g = symmpin_kernel_geometry_for(SYMMPIN_COLL_ALLREDUCE, 1 << 20, SYMMPIN_BFLOAT16, 2,
                                  SYMMPIN_INPUT_STAGED);
  cr_expect_eq(g.blocks, SYMMPIN_ONESHOT_MAX_BLOCKS, "large calls use the whole grid");
  cr_expect_eq(g.threads, SYMMPIN_ONESHOT_MAX_THREADS);
}

Test(kernels_geometry, invalid_shapes_give_empty_geometry) {
  symmpin_kernel_geometry g =
      symmpin_kernel_geometry_for(SYMMPIN_COLL_ALLREDUCE, 10, -1, 2, SYMMPIN_INPUT_STAGED);
  cr_expect_eq(g.blocks, 0);
  g = symmpin_kernel_geometry_for(SYMMPIN_COLL_ALLREDUCE, 10, SYMMPIN_FLOAT32, 9,
                                  SYMMPIN_INPUT_STAGED);
  cr_expect_eq(g.blocks, 0);
  g = symmpin_kernel_geometry_for(SYMMPIN_COLL_ALLREDUCE, 10, SYMMPIN_FLOAT32, 2,
                                  (symmpin_kernel_input)3);
  cr_expect_eq(g.blocks, 0);
  (void)div_up;
}

/* An LL line's check word: the epoch itself for call_id 0 (the lines of calls without an
 * identity are what they were), and for two calls at the same epoch, different whenever their
 * identities differ (multiplication by an odd number is a bijection modulo 2^32). */
Test(kernels_layout, ll_check_tells_calls_apart_at_one_epoch) {
  for (uint32_t seq = 2; seq < 2000; seq += 7) {
    cr_expect_eq(symmpin_oneshot_ll_check(seq, 0), seq);
    for (uint32_t a = 0; a < 64; a++)
      for (uint32_t b = a + 1; b < 64; b++)
        cr_expect_neq(symmpin_oneshot_ll_check(seq, a), symmpin_oneshot_ll_check(seq, b));
  }
  cr_expect_neq(symmpin_oneshot_ll_check(5, 0xffffffffu), symmpin_oneshot_ll_check(5, 0x7fffffffu));
}

/* ---- all-gather and reduce-scatter (kernels/allreduce.h: coll) ---- */

/* Host model of the highest slot byte + 1 an all-gather or reduce-scatter touches: LL, every
 * rank's lines of a chunk (n x lines) in both parities; COPY, the staged units of my chunk
 * (all-gather) or of my n chunks at c x units + v (reduce-scatter), both parities. */
static size_t chunked_extent(int coll, size_t count, int dtype, int nranks) {
  if (count == 0) return SYMMPIN_ONESHOT_HEADER_BYTES;
  symmpin_kernel_algo v = symmpin_kernel_algo_for(coll, count, dtype, nranks, SYMMPIN_INPUT_STAGED);
  size_t units = symmpin_oneshot_units(count, dtype, v);
  size_t last = v == SYMMPIN_ALGO_ONESHOT_LL         ? (size_t)nranks * units - 1
                : coll == SYMMPIN_COLL_REDUCESCATTER ? (size_t)nranks * units - 1
                                                     : units - 1;
  size_t top = 0;
  for (size_t q = last > 64 ? last - 64 : 0; q <= last; q++)
    for (unsigned p = 0; p < 2; p++) {
      size_t u = symmpin_oneshot_unit_index(q, p);
      if (u > top) top = u;
    }
  return SYMMPIN_ONESHOT_HEADER_BYTES + (top + 1) * SYMMPIN_ONESHOT_UNIT_BYTES;
}

Test(kernels_colls, slot_sizes_cover_the_layout_and_grow_with_count, .timeout = 60) {
  for (int coll = SYMMPIN_COLL_ALLGATHER; coll <= SYMMPIN_COLL_REDUCESCATTER; coll++)
    for (int d = 0; d < SYMMPIN_DTYPE_COUNT; d++)
      for (int n = 1; n <= SYMMPIN_KERNEL_MAX_RANKS; n++) {
        size_t prev = 0;
        for (size_t i = 0; i < NCOUNTS; i++) {
          size_t c = counts[i];
          size_t sb = symmpin_kernel_slot_bytes(coll, c, d, n, SYMMPIN_INPUT_STAGED);
          cr_assert_gt(sb, 0, "%s dtype %d n %d count %zu", symmpin_coll_name(coll), d, n, c);
          cr_expect_eq(sb % SYMMPIN_ONESHOT_SLOT_ALIGN, 0);
          cr_expect_geq(sb, prev, "%s: slot size shrinks at count %zu (dtype %d n %d)",
                        symmpin_coll_name(coll), c, d, n);
          size_t need = chunked_extent(coll, c, d, n);
          cr_expect_geq(sb, need, "%s: slot %zu < layout extent %zu (dtype %d n %d count %zu)",
                        symmpin_coll_name(coll), sb, need, d, n, c);
          prev = sb;
        }
      }
}

Test(kernels_colls, what_one_rank_exposes) {
  /* Above the LL limit (copy): the all-gather stages only its chunk, the reduce-scatter its whole
   * input (n chunks), the all-reduce its input: at 4 ranks and a chunk of 1 MiB of f32. */
  size_t c = (1u << 20) / 4;
  size_t ag = symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLGATHER, c, SYMMPIN_FLOAT32, 4,
                                        SYMMPIN_INPUT_STAGED);
  size_t rs = symmpin_kernel_slot_bytes(SYMMPIN_COLL_REDUCESCATTER, c, SYMMPIN_FLOAT32, 4,
                                        SYMMPIN_INPUT_STAGED);
  cr_expect_eq(ag, SYMMPIN_ONESHOT_HEADER_BYTES + 2 * (1u << 20),
               "all-gather: its chunk, two parities");
  cr_expect_eq(rs, SYMMPIN_ONESHOT_HEADER_BYTES + 2 * 4 * (1u << 20),
               "reduce-scatter: 4 chunks, two parities");
}

Test(kernels_colls, algorithms_and_classes_are_the_all_reduce_ones) {
  for (int n = 1; n <= SYMMPIN_KERNEL_MAX_RANKS; n++) {
    size_t max = symmpin_oneshot_ll_max_bytes(n);
    for (int coll = SYMMPIN_COLL_ALLGATHER; coll <= SYMMPIN_COLL_REDUCESCATTER; coll++) {
      cr_expect_eq(symmpin_kernel_algo_for(coll, max / 4, SYMMPIN_FLOAT32, n, SYMMPIN_INPUT_STAGED),
                   SYMMPIN_ALGO_ONESHOT_LL);
      /* above the LL limit: copy, never two-shot, however large */
      cr_expect_eq(
          symmpin_kernel_algo_for(coll, max / 4 + 1, SYMMPIN_FLOAT32, n, SYMMPIN_INPUT_STAGED),
          SYMMPIN_ALGO_ONESHOT_COPY);
      cr_expect_eq(
          symmpin_kernel_algo_for(coll, 1u << 24, SYMMPIN_FLOAT32, n, SYMMPIN_INPUT_STAGED),
          SYMMPIN_ALGO_ONESHOT_COPY);
      /* the class of an algorithm is the same for every collective (shared slots) */
      cr_expect_eq(symmpin_kernel_slot_class(coll, 100, SYMMPIN_FLOAT32, n, SYMMPIN_INPUT_STAGED),
                   symmpin_kernel_slot_class(SYMMPIN_COLL_ALLREDUCE, 100, SYMMPIN_FLOAT32, n,
                                             SYMMPIN_INPUT_STAGED));
      cr_expect_eq(
          symmpin_kernel_slot_class(coll, max / 4 + 1, SYMMPIN_FLOAT32, n, SYMMPIN_INPUT_STAGED),
          SYMMPIN_ALGO_ONESHOT_COPY);
      /* geometry: of one chunk */
      symmpin_kernel_geometry g =
          symmpin_kernel_geometry_for(coll, 1000, SYMMPIN_FLOAT32, n, SYMMPIN_INPUT_STAGED);
      symmpin_kernel_geometry a = symmpin_kernel_geometry_for(
          SYMMPIN_COLL_ALLREDUCE, 1000, SYMMPIN_FLOAT32, n, SYMMPIN_INPUT_STAGED);
      cr_expect(g.blocks == a.blocks && g.threads == a.threads, "%s: a chunk's geometry",
                symmpin_coll_name(coll));
    }
  }
}

Test(kernels_colls, refusals) {
  /* staged only */
  cr_expect_eq(symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLGATHER, 100, SYMMPIN_FLOAT32, 2,
                                         SYMMPIN_INPUT_IN_SLOT),
               0);
  cr_expect_eq(symmpin_kernel_slot_bytes(SYMMPIN_COLL_REDUCESCATTER, 100, SYMMPIN_FLOAT32, 2,
                                         SYMMPIN_INPUT_IN_SLOT),
               0);
  symmpin_kernel_geometry g = symmpin_kernel_geometry_for(
      SYMMPIN_COLL_ALLGATHER, 100, SYMMPIN_FLOAT32, 2, SYMMPIN_INPUT_IN_SLOT);
  cr_expect_eq(g.blocks, 0);
  /* unknown collectives */
  cr_expect_eq(symmpin_kernel_slot_bytes(-1, 100, SYMMPIN_FLOAT32, 2, SYMMPIN_INPUT_STAGED), 0);
  cr_expect_eq(
      symmpin_kernel_slot_bytes(SYMMPIN_COLL_COUNT, 100, SYMMPIN_FLOAT32, 2, SYMMPIN_INPUT_STAGED),
      0);
  cr_expect_not(symmpin_kernel_supports(SYMMPIN_COLL_COUNT, SYMMPIN_FLOAT32, SYMMPIN_SUM));
  /* the all-gather takes every datatype with a kernel and any op; the reduce-scatter the
   * all-reduce's ops only */
  for (int d = 0; d < SYMMPIN_DTYPE_COUNT; d++) {
    cr_expect(symmpin_kernel_supports(SYMMPIN_COLL_ALLGATHER, d, 99));
    cr_expect_not(symmpin_kernel_supports(SYMMPIN_COLL_REDUCESCATTER, d, 99));
    for (int op = 0; op < SYMMPIN_OP_COUNT; op++)
      cr_expect(symmpin_kernel_supports(SYMMPIN_COLL_REDUCESCATTER, d, op));
  }
  cr_expect_not(symmpin_kernel_supports(SYMMPIN_COLL_ALLGATHER, SYMMPIN_DTYPE_COUNT, SYMMPIN_SUM));
  /* n x count elements must fit the size limit: a count the all-reduce takes can be too large */
  size_t huge = ((size_t)1 << 40) / 4 / 2 + 1;
  cr_expect_gt(symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLREDUCE, huge, SYMMPIN_FLOAT32, 2,
                                         SYMMPIN_INPUT_STAGED),
               0);
  cr_expect_eq(symmpin_kernel_slot_bytes(SYMMPIN_COLL_ALLGATHER, huge, SYMMPIN_FLOAT32, 2,
                                         SYMMPIN_INPUT_STAGED),
               0);
}

Test(kernels_colls, names_and_counts) {
  cr_expect_str_eq(symmpin_coll_name(SYMMPIN_COLL_ALLREDUCE), "allreduce");
  cr_expect_str_eq(symmpin_coll_name(SYMMPIN_COLL_ALLGATHER), "allgather");
  cr_expect_str_eq(symmpin_coll_name(SYMMPIN_COLL_REDUCESCATTER), "reducescatter");
  cr_expect_str_eq(symmpin_coll_name(3), "?");
  cr_expect_eq(symmpin_coll_from_name("reducescatter"), SYMMPIN_COLL_REDUCESCATTER);
  cr_expect_eq(symmpin_coll_from_name("gather"), -1);
  cr_expect_eq(symmpin_coll_send_count(SYMMPIN_COLL_ALLGATHER, 10, 4), 10);
  cr_expect_eq(symmpin_coll_recv_count(SYMMPIN_COLL_ALLGATHER, 10, 4), 40);
  cr_expect_eq(symmpin_coll_send_count(SYMMPIN_COLL_REDUCESCATTER, 10, 4), 40);
  cr_expect_eq(symmpin_coll_recv_count(SYMMPIN_COLL_REDUCESCATTER, 10, 4), 10);
  cr_expect_eq(symmpin_coll_send_count(SYMMPIN_COLL_ALLREDUCE, 10, 4), 10);
  cr_expect_eq(symmpin_coll_recv_count(7, 10, 4), 0);
}
