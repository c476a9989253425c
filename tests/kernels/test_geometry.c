/* CPU tests of the kernels' host logic: supports() table, slot sizes against a host-side model of
 * the slot layout, variant choice and launch geometry (kernels/geometry.c, kernels/layout.h).
 * No GPU and no CUDA call: the layout model below mirrors what oneshot.cu addresses. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/layout.h"
#include "kernels/oneshot.h"

static const size_t counts[] = {0,    1,    2,    3,    7,     8,     9,      15,     16,
                                17,   31,   255,  256,  257,   1023,  4095,   4096,   4097,
                                8191, 65535, 65536, 65537, 131072, 262145, 1000003, 1 << 22};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

static size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }

Test(kernels_supports, every_nccl_type_and_builtin_op) {
  for (int d = 0; d < SYMMPIN_DTYPE_COUNT; d++)
    for (int op = 0; op < SYMMPIN_OP_COUNT; op++)
      cr_expect(symmpin_oneshot_supports(d, op), "dtype %d op %d should be supported", d, op);
}

Test(kernels_supports, rejects_unknown_values) {
  cr_expect_not(symmpin_oneshot_supports(-1, SYMMPIN_SUM));
  cr_expect_not(symmpin_oneshot_supports(SYMMPIN_DTYPE_COUNT, SYMMPIN_SUM));
  cr_expect_not(symmpin_oneshot_supports(SYMMPIN_FLOAT32, SYMMPIN_OP_COUNT)); /* PreMulSum ops */
  cr_expect_not(symmpin_oneshot_supports(SYMMPIN_FLOAT32, -1));
  cr_expect_eq(symmpin_oneshot_slot_bytes(10, SYMMPIN_DTYPE_COUNT, 2, SYMMPIN_FORM_STAGED), 0);
  cr_expect_eq(symmpin_oneshot_slot_bytes(10, SYMMPIN_FLOAT32, 0, SYMMPIN_FORM_STAGED), 0);
  cr_expect_eq(symmpin_oneshot_slot_bytes(10, SYMMPIN_FLOAT32, SYMMPIN_MAX_RANKS + 1,
                                          SYMMPIN_FORM_STAGED), 0);
  cr_expect_eq(symmpin_oneshot_slot_bytes(10, SYMMPIN_FLOAT32, 2, (symmpin_oneshot_form)7), 0);
  cr_expect_eq(symmpin_oneshot_slot_bytes(SIZE_MAX / 2, SYMMPIN_FLOAT64, 2, SYMMPIN_FORM_STAGED),
               0, "overflowing sizes are refused, not wrapped");
}

Test(kernels_layout, header_fields_fit_and_do_not_overlap) {
  cr_expect_geq(SYMMPIN_ONESHOT_BAR_OFFSET, SYMMPIN_ONESHOT_EPOCH_OFFSET +
                                                4 * SYMMPIN_ONESHOT_MAX_BLOCKS);
  cr_expect_geq(SYMMPIN_ONESHOT_TIMEOUT_OFFSET,
                SYMMPIN_ONESHOT_BAR_OFFSET + 4 * SYMMPIN_ONESHOT_MAX_BLOCKS * SYMMPIN_MAX_RANKS);
  cr_expect_leq(SYMMPIN_ONESHOT_TIMEOUT_OFFSET + 4, SYMMPIN_ONESHOT_HEADER_BYTES);
  cr_expect_eq(symmpin_oneshot_direct_data_offset() % SYMMPIN_ONESHOT_SLOT_ALIGN, 0);
  cr_expect_eq(symmpin_oneshot_direct_data_offset(), SYMMPIN_ONESHOT_HEADER_BYTES);
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

/* Host model of what the kernels touch in a slot, in bytes from its start: the highest byte + 1. */
static size_t model_extent(size_t count, int dtype, int nranks, symmpin_oneshot_form form) {
  size_t bytes = count * symmpin_dtype_size(dtype);
  symmpin_oneshot_variant v = symmpin_oneshot_variant_for(count, dtype, nranks, form);
  size_t units = symmpin_oneshot_units(count, dtype, v);
  if (count == 0) return SYMMPIN_ONESHOT_HEADER_BYTES;
  switch (v) {
  case SYMMPIN_ONESHOT_DIRECT: return SYMMPIN_ONESHOT_HEADER_BYTES + bytes;
  case SYMMPIN_ONESHOT_COPY: {
    size_t hi = symmpin_oneshot_unit_index(units - 1, 1);
    size_t lo = symmpin_oneshot_unit_index(units - 1, 0);
    return SYMMPIN_ONESHOT_HEADER_BYTES + ((hi > lo ? hi : lo) + 1) * SYMMPIN_ONESHOT_UNIT_BYTES;
  }
  case SYMMPIN_ONESHOT_LL: {
    /* the last line of the last source rank, both parities; the max over all q is at the end */
    size_t last = (size_t)nranks * units - 1, top = 0;
    for (size_t q = last > 64 ? last - 64 : 0; q <= last; q++)
      for (unsigned p = 0; p < 2; p++) {
        size_t u = symmpin_oneshot_unit_index(q, p);
        if (u > top) top = u;
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
  for (int n = 1; n <= SYMMPIN_MAX_RANKS; n++) {
    for (int f = 0; f < 2; f++) {
      size_t prev = 0;
      for (size_t i = 0; i < NCOUNTS; i++) {
        size_t c = counts[i];
        size_t sb = symmpin_oneshot_slot_bytes(c, *dtype, n, (symmpin_oneshot_form)f);
        cr_assert_gt(sb, 0, "dtype %d n %d form %d count %zu", *dtype, n, f, c);
        cr_expect_eq(sb % SYMMPIN_ONESHOT_SLOT_ALIGN, 0, "slot size %zu not aligned", sb);
        cr_expect_geq(sb, prev, "slot size shrinks at count %zu (dtype %d n %d form %d)", c,
                      *dtype, n, f);
        size_t need = model_extent(c, *dtype, n, (symmpin_oneshot_form)f);
        cr_expect_geq(sb, need, "slot %zu < layout extent %zu (dtype %d n %d form %d count %zu)",
                      sb, need, *dtype, n, f, c);
        prev = sb;
      }
    }
  }
}

Test(kernels_slot, direct_needs_exactly_header_plus_data) {
  /* The direct form's data area is contiguous: a caller writes count*esize bytes at the offset. */
  size_t sb = symmpin_oneshot_slot_bytes(1000, SYMMPIN_FLOAT32, 2, SYMMPIN_FORM_DIRECT);
  cr_expect_eq(sb, SYMMPIN_ONESHOT_HEADER_BYTES + 4096);
  cr_expect_eq(symmpin_oneshot_slot_bytes(1024, SYMMPIN_FLOAT32, 8, SYMMPIN_FORM_DIRECT),
               SYMMPIN_ONESHOT_HEADER_BYTES + 4096, "direct size does not grow with ranks");
}

Test(kernels_variant, ll_below_threshold_copy_above) {
  for (int n = 1; n <= SYMMPIN_MAX_RANKS; n++) {
    size_t max = symmpin_oneshot_ll_max_bytes(n);
    cr_assert_gt(max, 0);
    cr_expect_eq(symmpin_oneshot_variant_for(max / 2, SYMMPIN_BFLOAT16, n,
                                             SYMMPIN_FORM_STAGED), SYMMPIN_ONESHOT_LL);
    cr_expect_eq(symmpin_oneshot_variant_for(max / 2 + 1, SYMMPIN_BFLOAT16, n, SYMMPIN_FORM_STAGED),
                 SYMMPIN_ONESHOT_COPY);
    cr_expect_eq(symmpin_oneshot_variant_for(1, SYMMPIN_BFLOAT16, n, SYMMPIN_FORM_DIRECT),
                 SYMMPIN_ONESHOT_DIRECT);
    if (n > 1) cr_expect_leq(max, symmpin_oneshot_ll_max_bytes(n - 1), "more ranks, less LL");
  }
}

Test(kernels_geometry, within_caps_and_covers_the_work) {
  for (int d = 0; d < SYMMPIN_DTYPE_COUNT; d++)
    for (int n = 1; n <= SYMMPIN_MAX_RANKS; n++)
      for (int f = 0; f < 2; f++)
        for (size_t i = 0; i < NCOUNTS; i++) {
          size_t c = counts[i];
          symmpin_oneshot_geometry g = symmpin_oneshot_geometry_for(c, d, n, f);
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
          size_t units = symmpin_oneshot_units(c, d, symmpin_oneshot_variant_for(c, d, n, f));
          cr_expect_geq(units, 1);
          /* no block is left without work: the grid is not larger than the work */
          cr_expect_leq((size_t)(g.blocks - 1) * g.threads, units,
                        "dtype %d n %d count %zu: %u x %u for %zu units", d, n, c, g.blocks,
                        g.threads, units);
          symmpin_oneshot_geometry g2 = symmpin_oneshot_geometry_for(c, d, n, f);
          cr_expect(g2.blocks == g.blocks && g2.threads == g.threads, "not deterministic");
        }
}

Test(kernels_geometry, small_calls_use_one_small_block) {
  symmpin_oneshot_geometry g = symmpin_oneshot_geometry_for(1, SYMMPIN_FLOAT32, 2,
                                                            SYMMPIN_FORM_STAGED);
  cr_expect_eq(g.blocks, 1);
  cr_expect_eq(g.threads, 32);
  g = symmpin_oneshot_geometry_for(1 << 20, SYMMPIN_BFLOAT16, 2, SYMMPIN_FORM_STAGED);
  cr_expect_eq(g.blocks, SYMMPIN_ONESHOT_MAX_BLOCKS, "large calls use the whole grid");
  cr_expect_eq(g.threads, SYMMPIN_ONESHOT_MAX_THREADS);
}

Test(kernels_geometry, invalid_shapes_give_empty_geometry) {
  symmpin_oneshot_geometry g = symmpin_oneshot_geometry_for(10, -1, 2, SYMMPIN_FORM_STAGED);
  cr_expect_eq(g.blocks, 0);
  g = symmpin_oneshot_geometry_for(10, SYMMPIN_FLOAT32, 9, SYMMPIN_FORM_STAGED);
  cr_expect_eq(g.blocks, 0);
  g = symmpin_oneshot_geometry_for(10, SYMMPIN_FLOAT32, 2, (symmpin_oneshot_form)3);
  cr_expect_eq(g.blocks, 0);
  (void)div_up;
}
