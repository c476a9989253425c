/* The allocation map: insert, remove, lookup at the edges of ranges, overlap replacement, and
 * concurrent writers and readers. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "planner/allocmap.h"

Test(allocmap, insert_lookup_edges) {
  symmpin_allocmap *m = symmpin_allocmap_create();
  cr_assert_not_null(m);
  uint64_t a, b;
  cr_assert_eq(symmpin_allocmap_insert(m, 0x1000, 0x100, 0, 0, 11, &a), SYMMPIN_OK);
  cr_assert_eq(symmpin_allocmap_insert(m, 0x3000, 0x200, 2, 1, 22, &b), SYMMPIN_OK);
  cr_assert_neq(a, b);
  cr_assert(a != 0 && b != 0);
  symmpin_alloc x;
  cr_assert(symmpin_allocmap_lookup(m, 0x1000, &x));
  cr_assert_eq(x.id, a);
  cr_assert_eq(x.stack, 11);
  cr_assert(symmpin_allocmap_lookup(m, 0x10ff, &x));
  cr_assert_eq(x.base, 0x1000);
  cr_assert_not(symmpin_allocmap_lookup(m, 0x1100, &x)); /* one past the end */
  cr_assert_not(symmpin_allocmap_lookup(m, 0xfff, &x));
  cr_assert(symmpin_allocmap_lookup(m, 0x31ff, &x));
  cr_assert_eq(x.id, b);
  cr_assert_eq(x.kind, 2);
  cr_assert_eq(x.device, 1);
  cr_assert_eq(symmpin_allocmap_count(m), 2);
  symmpin_allocmap_destroy(m);
}

Test(allocmap, remove) {
  symmpin_allocmap *m = symmpin_allocmap_create();
  uint64_t a;
  symmpin_allocmap_insert(m, 0x1000, 0x100, 0, 0, 0, &a);
  symmpin_alloc gone;
  cr_assert_eq(symmpin_allocmap_remove(m, 0x1010, &gone), SYMMPIN_ERR_INVALID); /* not a base */
  cr_assert_eq(symmpin_allocmap_remove(m, 0x1000, &gone), SYMMPIN_OK);
  cr_assert_eq(gone.id, a);
  cr_assert_eq(gone.size, 0x100);
  cr_assert_not(symmpin_allocmap_lookup(m, 0x1000, NULL));
  cr_assert_eq(symmpin_allocmap_remove(m, 0x1000, NULL), SYMMPIN_ERR_INVALID);
  cr_assert_eq(symmpin_allocmap_count(m), 0);
  symmpin_allocmap_destroy(m);
}

Test(allocmap, overlap_drops_stale_ranges) {
  symmpin_allocmap *m = symmpin_allocmap_create();
  uint64_t ids[4];
  symmpin_allocmap_insert(m, 0x1000, 0x100, 0, 0, 0, &ids[0]);
  symmpin_allocmap_insert(m, 0x1100, 0x100, 0, 0, 0, &ids[1]);
  symmpin_allocmap_insert(m, 0x1200, 0x100, 0, 0, 0, &ids[2]);
  symmpin_allocmap_insert(m, 0x2000, 0x100, 0, 0, 0, &ids[3]);
  /* Covers the tail of the first and all of the second, and the head of the third. */
  uint64_t n;
  cr_assert_eq(symmpin_allocmap_insert(m, 0x10f0, 0x120, 0, 0, 0, &n), SYMMPIN_OK);
  cr_assert_eq(symmpin_allocmap_count(m), 2);
  symmpin_alloc x;
  cr_assert(symmpin_allocmap_lookup(m, 0x1000, &x) == false);
  cr_assert(symmpin_allocmap_lookup(m, 0x1150, &x));
  cr_assert_eq(x.id, n);
  cr_assert(symmpin_allocmap_lookup(m, 0x2050, &x));
  cr_assert_eq(x.id, ids[3]);
  cr_assert_eq(symmpin_allocmap_insert(m, 0x5000, 0, 0, 0, 0, NULL), SYMMPIN_ERR_INVALID);
  symmpin_allocmap_destroy(m);
}

Test(allocmap, many_sorted_any_order) {
  symmpin_allocmap *m = symmpin_allocmap_create();
  /* 2000 ranges inserted in a scrambled order, looked up at every base and last byte. */
  for (unsigned i = 0; i < 2000; i++) {
    unsigned k = (i * 7919u) % 2000u;
    cr_assert_eq(symmpin_allocmap_insert(m, 0x100000 + (uintptr_t)k * 0x1000, 0x800, 0, 0, k, NULL),
                 SYMMPIN_OK);
  }
  cr_assert_eq(symmpin_allocmap_count(m), 2000);
  for (unsigned k = 0; k < 2000; k++) {
    symmpin_alloc x;
    uintptr_t base = 0x100000 + (uintptr_t)k * 0x1000;
    cr_assert(symmpin_allocmap_lookup(m, base + 0x7ff, &x));
    cr_assert_eq(x.stack, k);
    cr_assert_not(symmpin_allocmap_lookup(m, base + 0x800, &x));
  }
  symmpin_allocmap_destroy(m);
}

typedef struct {
  symmpin_allocmap *m;
  int t;
  int errors;
} thread_arg;

/* Each writer owns a disjoint address band; it inserts, checks and removes its own ranges while
 * others do the same, so any lost update or torn read shows up as a wrong lookup. */
static void *worker(void *p) {
  thread_arg *a = p;
  uintptr_t band = 0x10000000 + (uintptr_t)a->t * 0x1000000;
  for (int round = 0; round < 200; round++) {
    for (int i = 0; i < 20; i++)
      if (symmpin_allocmap_insert(a->m, band + (uintptr_t)i * 0x1000, 0x1000, 0, a->t,
                                  (uint64_t)(a->t * 1000 + i), NULL) != SYMMPIN_OK)
        a->errors++;
    for (int i = 0; i < 20; i++) {
      symmpin_alloc x;
      if (!symmpin_allocmap_lookup(a->m, band + (uintptr_t)i * 0x1000 + 5, &x) ||
          x.stack != (uint64_t)(a->t * 1000 + i) || x.device != a->t)
        a->errors++;
    }
    for (int i = 0; i < 20; i++)
      if (symmpin_allocmap_remove(a->m, band + (uintptr_t)i * 0x1000, NULL) != SYMMPIN_OK)
        a->errors++;
  }
  return NULL;
}

Test(allocmap, threads, .timeout = 60) {
  symmpin_allocmap *m = symmpin_allocmap_create();
  pthread_t th[8];
  thread_arg args[8];
  for (int t = 0; t < 8; t++) {
    args[t] = (thread_arg){m, t, 0};
    pthread_create(&th[t], NULL, worker, &args[t]);
  }
  for (int t = 0; t < 8; t++) {
    pthread_join(th[t], NULL);
    cr_assert_eq(args[t].errors, 0, "thread %d saw %d errors", t, args[t].errors);
  }
  cr_assert_eq(symmpin_allocmap_count(m), 0);
  symmpin_allocmap_destroy(m);
}
