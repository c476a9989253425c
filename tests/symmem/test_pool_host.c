/* CPU tests of the pool's host-side bookkeeping (symmem/pool.h) that need no GPU: argument checks,
 * an empty pool's lookups, destroy of a pool that never allocated. These paths make no CUDA call
 * (the GPU paths are tests/gpu/test_pool.c). The pool reaches the driver through driver/cu.h,
 * linked as built (it opens libcuda.so.1 at run time): where it cannot be opened, the pool's CUDA
 * paths refuse cleanly. */
#include <criterion/criterion.h>
#include <string.h>

#include "driver/cu.h"
#include "symmem/pool.h"

Test(pool_host, create_rejects_bad_arguments) {
  symmpin_pool *p = NULL;
  cr_expect_eq(symmpin_pool_create(2, 2, 0, &p), SYMMPIN_ERR_INVALID);
  cr_expect_eq(symmpin_pool_create(-1, 2, 0, &p), SYMMPIN_ERR_INVALID);
  cr_expect_eq(symmpin_pool_create(0, 0, 0, &p), SYMMPIN_ERR_INVALID);
  cr_expect_eq(symmpin_pool_create(0, 2, -1, &p), SYMMPIN_ERR_INVALID);
  cr_expect_eq(symmpin_pool_create(0, 2, 0, NULL), SYMMPIN_ERR_INVALID);
  cr_expect_null(p, "no output on failure");
}

Test(pool_host, empty_pool_has_nothing) {
  symmpin_pool *p = NULL;
  cr_assert_eq(symmpin_pool_create(1, 4, 0, &p), SYMMPIN_OK);
  cr_assert_not_null(p);
  cr_expect_eq(symmpin_pool_size(p), 0u);
  cr_expect_null(symmpin_pool_addr(p, 0, 0));
  cr_expect_null(symmpin_pool_addr(p, 1, 0));
  cr_expect_null(symmpin_pool_addr(p, 4, 0), "rank out of range");
  cr_expect_null(symmpin_pool_addr(p, -1, 0), "rank out of range");
  cr_expect(!symmpin_pool_fits(p, 0, 0));
  cr_expect(!symmpin_pool_fits(p, 0, 8));
  size_t off = 77;
  int x;
  cr_expect(!symmpin_pool_contains(p, &x, &off));
  cr_expect_eq(off, 77u, "output untouched when not contained");
  cr_expect_eq(symmpin_pool_attach(p, NULL), SYMMPIN_ERR_INVALID);
  cr_expect_eq(symmpin_pool_reserve(p, 1024, NULL), SYMMPIN_ERR_INVALID);
  symmpin_pool_destroy(p); /* never allocated: no CUDA call */
  symmpin_pool_destroy(NULL);
}

Test(pool_host, same_device_is_always_p2p) {
  /* a == b is answered without asking CUDA. */
  cr_expect(symmpin_pool_p2p_ok(3, 3));
}

Test(pool_host, check_peers_rejects_bad_arguments) {
  char why[64] = "stale";
  cr_expect_eq(symmpin_pool_check_peers(NULL, 2, why, sizeof(why)), SYMMPIN_ERR_INVALID);
  cr_expect_str_empty(why, "why is cleared");
}

/* A machine whose driver symmpin cannot open (no libcuda.so.1, as on a CPU-only CI machine; a
 * driver older than CUDA 12.0; no GPU): the pool's functions that need the driver refuse cleanly,
 * the device check with the driver's reason (driver/cu.h). Where the driver works, the GPU tests
 * say the rest. */
Test(pool_host, without_a_usable_driver_the_pool_refuses_cleanly) {
  if (symmpin_cu_usable()) {
    cr_skip_test("the CUDA driver is usable here (tests/gpu/test_pool.c)");
    return;
  }
  const symmpin_cu_state *d = symmpin_cu_open();
  cr_expect_str_not_empty(d->why, "no reason given");
  char why[200];
  cr_expect_eq(symmpin_pool_device_check(0, why, sizeof why), SYMMPIN_ERR_UNSUPPORTED);
  cr_expect_str_eq(why, d->why);
  symmpin_pool_facts facts[2];
  memset(facts, 0, sizeof facts);
  cr_expect_eq(symmpin_pool_facts_get(0, &facts[0]), SYMMPIN_ERR_CUDA);
  cr_expect_eq(symmpin_pool_check_peers(facts, 2, why, sizeof why), SYMMPIN_ERR_CUDA);
  cr_expect_not(symmpin_pool_p2p_ok(0, 1));
  symmpin_pool *p = NULL;
  cr_assert_eq(symmpin_pool_create(0, 2, 0, &p), SYMMPIN_OK);
  unsigned char rec[SYMMPIN_POOL_EXPORT_BYTES];
  cr_expect_eq(symmpin_pool_reserve(p, 1024, rec), SYMMPIN_ERR_CUDA);
  symmpin_pool_destroy(p);
}
