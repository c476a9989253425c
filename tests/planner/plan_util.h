/* Helpers for the plan tests: records from compact call lists, a fake slot-size function, and an
 * independent check of the plan's promises (no shared bytes between sites that can overlap). */
#ifndef SYMMPIN_TESTS_PLAN_UTIL_H
#define SYMMPIN_TESTS_PLAN_UTIL_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "planner/plan.h"
#include "planner/record.h"

typedef struct tcall {
  uint64_t site;
  uint64_t count;
  int dtype, op, stream;
  uint64_t token; /* group token, 0 = none */
  int coll;       /* common/types.h; 0 = all-reduce (lists that leave it out) */
} tcall;

/* FAKE: stands in for the kernels' symmpin_kernel_slot_bytes (kernels/allreduce.h) on the CPU. Any
 * deterministic size that grows with the message and is a multiple of 256 exercises the planner. */
static inline size_t fake_slot_bytes(int coll, size_t count, int dtype, int nranks, void *ctx) {
  (void)ctx;
  /* the other collectives: one more chunk's worth, so their sizes differ from the all-reduce's */
  size_t b = count * symmpin_dtype_size(dtype) * (size_t)(nranks + (coll ? 1 : 0));
  return (b + 255) / 256 * 256 + 256;
}

static inline symmpin_plan_policy test_policy(symmpin_plan_mode mode, int nranks) {
  return (symmpin_plan_policy){.mode = mode, .max_bytes = 0, .alignment = 256,
                               .slot_bytes = fake_slot_bytes, .nranks = nranks};
}

static inline void mk_record(symmpin_record *r, int rank, int nranks, uint64_t first,
                             const tcall *calls, size_t n) {
  symmpin_record_init(r, 0, rank, nranks, first);
  for (size_t i = 0; i < n; i++) {
    symmpin_call c = {.site = calls[i].site,
                      .count = calls[i].count,
                      .dtype = calls[i].dtype,
                      .op = calls[i].op,
                      .coll = calls[i].coll,
                      .stream_ord = calls[i].stream};
    cr_assert_eq(symmpin_record_append(r, &c, calls[i].token), SYMMPIN_OK);
  }
}

/* Plan from nranks records that are all copies of one call list. */
static inline symmpin_plan *plan_same(const tcall *calls, size_t n, int nranks,
                                      const symmpin_plan_policy *pol, const symmpin_plan *prev,
                                      uint64_t first) {
  symmpin_record *recs = calloc((size_t)nranks, sizeof(*recs));
  const symmpin_record **rp = calloc((size_t)nranks, sizeof(*rp));
  for (int r = 0; r < nranks; r++) {
    mk_record(&recs[r], r, nranks, first, calls, n);
    rp[r] = &recs[r];
  }
  symmpin_plan *p = NULL;
  cr_assert_eq(symmpin_plan_make(rp, pol, prev, &p), SYMMPIN_OK);
  for (int r = 0; r < nranks; r++) symmpin_record_free(&recs[r]);
  free(recs);
  free(rp);
  return p;
}

/* Independent of the planner: pinned sites that can overlap (different streams, or one group in
 * some record) must have disjoint byte ranges, sites that share bytes share their offset, and
 * every slot must lie inside the pool. */
static inline void assert_no_shared_overlap(const symmpin_plan *p, const symmpin_record *const *recs,
                                            size_t nrecs) {
  for (size_t i = 0; i < p->nsites; i++) {
    const symmpin_plan_site *a = &p->sites[i];
    if (!a->pinned) continue;
    cr_assert_leq(a->offset + a->slot_bytes, p->pool_bytes);
    cr_assert_eq(a->offset % p->alignment, 0);
    cr_assert_eq(a->slot_bytes % p->alignment, 0);
    for (size_t j = i + 1; j < p->nsites; j++) {
      const symmpin_plan_site *b = &p->sites[j];
      if (!b->pinned) continue;
      bool disjoint = a->offset + a->slot_bytes <= b->offset || b->offset + b->slot_bytes <= a->offset;
      if (disjoint) continue;
      /* the kernels' header sits at the slot start: sharing is only ever a whole shared start */
      cr_assert_eq(a->offset, b->offset, "sites %zu and %zu overlap partially", i, j);
      cr_assert_eq(a->stream_ord, b->stream_ord, "sites on different streams share bytes");
      for (size_t k = 0; k < nrecs; k++) {
        const symmpin_record *r = recs[k];
        for (size_t x = 0; x < r->ncalls; x++) {
          if (!r->calls[x].group || r->calls[x].site != a->site) continue;
          for (size_t y = 0; y < r->ncalls; y++)
            cr_assert(!(r->calls[y].group == r->calls[x].group && r->calls[y].site == b->site &&
                        r->calls[y].stream_ord == b->stream_ord &&
                        r->calls[x].stream_ord == a->stream_ord),
                      "sites %zu and %zu share a group and bytes", i, j);
        }
      }
    }
  }
}

#endif
