/* Plans: agreement across ranks, stable offsets, late sites, overlap safety, pool sizes against
 * the lower bound, reasons, the per-call route, and a seeded randomized property test. */
#include "plan_util.h"
#include "planner/slots.h"

#define F32 SYMMPIN_FLOAT32
#define SUM SYMMPIN_SUM

static const symmpin_plan_site *site_of(const symmpin_plan *p, uint64_t s) {
  const symmpin_plan_site *e = symmpin_plan_find(p, s);
  cr_assert_not_null(e, "site %#lx missing from the plan", (unsigned long)s);
  return e;
}

static bool disjoint(const symmpin_plan_site *a, const symmpin_plan_site *b) {
  return a->offset + a->slot_bytes <= b->offset || b->offset + b->slot_bytes <= a->offset;
}

Test(plan, identical_across_ranks_via_board_blobs) {
  /* 4 ranks, each "rank" decodes the other ranks' posted blobs and computes the plan itself. */
  tcall calls[40];
  for (int i = 0; i < 40; i++)
    calls[i] = (tcall){.site = 10 + (uint64_t)(i % 5), .count = 1000 * (uint64_t)(i % 5 + 1),
                       .dtype = F32, .op = SUM, .stream = i % 5 == 4 ? 1 : 0};
  enum { N = 4 };
  void *blob[N];
  size_t len[N];
  for (int r = 0; r < N; r++) {
    symmpin_record rec;
    mk_record(&rec, r, N, 0, calls, 40);
    size_t need = symmpin_record_encoded_bytes(rec.ncalls);
    blob[r] = malloc(need);
    cr_assert_eq(symmpin_record_encode(&rec, blob[r], need, &len[r]), SYMMPIN_OK);
    symmpin_record_free(&rec);
  }
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, N);
  symmpin_plan *plans[N];
  for (int me = 0; me < N; me++) {
    symmpin_record recs[N];
    const symmpin_record *rp[N];
    for (int r = 0; r < N; r++) {
      cr_assert_eq(symmpin_record_decode(blob[r], len[r], &recs[r]), SYMMPIN_OK);
      rp[r] = &recs[r];
    }
    cr_assert_eq(symmpin_plan_make(rp, &pol, NULL, &plans[me]), SYMMPIN_OK);
    for (int r = 0; r < N; r++) symmpin_record_free(&recs[r]);
  }
  for (int me = 1; me < N; me++) {
    cr_assert_eq(plans[me]->digest, plans[0]->digest);
    cr_assert_eq(plans[me]->nsites, plans[0]->nsites);
    cr_assert_eq(memcmp(plans[me]->sites, plans[0]->sites,
                        plans[0]->nsites * sizeof(symmpin_plan_site)),
                 0);
  }
  cr_assert_eq(plans[0]->nsites, 5);
  cr_assert_eq(plans[0]->npinned, 5);
  cr_assert(plans[0]->same_sequence);
  for (int r = 0; r < N; r++) {
    symmpin_plan_free(plans[r]);
    free(blob[r]);
  }
}

Test(plan, one_rank_differs_only_those_sites_fall_back) {
  /* Sites A B C D, 3 loops. Rank 1 calls X instead of C in the second loop, and its site D has a
   * different count at one call (same id, different shape). */
  enum { N = 3, L = 12 };
  tcall base[L], r1[L];
  for (int i = 0; i < L; i++)
    base[i] = (tcall){.site = 1 + (uint64_t)(i % 4), .count = 256, .dtype = F32, .op = SUM};
  memcpy(r1, base, sizeof(base));
  r1[6].site = 99; /* position of C in loop 2 */
  r1[11].count = 512; /* D, loop 3 */
  symmpin_record recs[N];
  const symmpin_record *rp[N];
  for (int r = 0; r < N; r++) {
    mk_record(&recs[r], r, N, 0, r == 1 ? r1 : base, L);
    rp[r] = &recs[r];
  }
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, N);
  symmpin_plan *p;
  cr_assert_eq(symmpin_plan_make(rp, &pol, NULL, &p), SYMMPIN_OK);
  cr_assert_not(p->same_sequence);
  cr_assert(site_of(p, 1)->pinned);
  cr_assert(site_of(p, 2)->pinned);
  cr_assert_not(site_of(p, 3)->pinned);
  cr_assert_eq(site_of(p, 3)->reason, SYMMPIN_PLAN_DIFFERS);
  cr_assert_not(site_of(p, 4)->pinned);
  cr_assert_eq(site_of(p, 4)->reason, SYMMPIN_PLAN_DIFFERS);
  cr_assert_not(site_of(p, 99)->pinned);
  cr_assert_eq(site_of(p, 99)->reason, SYMMPIN_PLAN_NOT_ALL_RANKS);
  cr_assert_eq(p->npinned, 2);
  /* The route of a fallen-back site says why. */
  /* Routing is by shape: a call from the site the ranks disagree on still goes to a slot when a
   * pinned site has its shape (all have one here: the smallest pinned id, site 1, routes them),
   * so ranks reaching one call from different sites route it alike... */
  const symmpin_plan_site *e = NULL;
  cr_assert_eq(symmpin_plan_route(p, 3, SYMMPIN_COLL_ALLREDUCE, 256, F32, SUM, 0, &e),
               SYMMPIN_PLAN_PINNED);
  cr_assert_eq(e, site_of(p, 1));
  cr_assert_eq(symmpin_plan_route(p, 99, SYMMPIN_COLL_ALLREDUCE, 256, F32, SUM, 0, &e),
               SYMMPIN_PLAN_PINNED);
  cr_assert_eq(e, site_of(p, 1));
  /* ...and a shape no pinned site has goes to NCCL with the reason of the site's own entry. */
  cr_assert_eq(symmpin_plan_route(p, 3, SYMMPIN_COLL_ALLREDUCE, 333, F32, SUM, 0, &e),
               SYMMPIN_PLAN_DIFFERS);
  cr_assert_null(e);
  symmpin_plan_free(p);
  for (int r = 0; r < N; r++) symmpin_record_free(&recs[r]);
}

Test(plan, records_of_different_length_or_start) {
  tcall c[6];
  for (int i = 0; i < 6; i++) c[i] = (tcall){.site = 1 + (uint64_t)(i % 2), .count = 8, .dtype = F32};
  symmpin_record recs[2];
  const symmpin_record *rp[2] = {&recs[0], &recs[1]};
  mk_record(&recs[0], 0, 2, 0, c, 6);
  mk_record(&recs[1], 1, 2, 0, c, 5); /* rank 1 ended its record one call earlier */
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 2);
  symmpin_plan *p;
  cr_assert_eq(symmpin_plan_make(rp, &pol, NULL, &p), SYMMPIN_OK);
  cr_assert(site_of(p, 1)->pinned);
  cr_assert_eq(site_of(p, 2)->reason, SYMMPIN_PLAN_DIFFERS); /* its 3rd call is on rank 0 only */
  symmpin_plan_free(p);
  symmpin_record_free(&recs[1]);
  mk_record(&recs[1], 1, 2, 7, c, 6); /* same calls, but from another call index */
  cr_assert_eq(symmpin_plan_make(rp, &pol, NULL, &p), SYMMPIN_OK);
  cr_assert_eq(p->npinned, 0);
  symmpin_plan_free(p);
  for (int r = 0; r < 2; r++) symmpin_record_free(&recs[r]);
}

Test(plan, same_trace_twice_same_offsets) {
  tcall c[30];
  for (int i = 0; i < 30; i++)
    c[i] = (tcall){.site = 50 + (uint64_t)(i % 7), .count = 100 + 300 * (uint64_t)(i % 7),
                   .dtype = i % 2 ? F32 : SYMMPIN_BFLOAT16, .stream = i % 3 == 0, .token = 0};
  for (int mode = 0; mode < 2; mode++) {
    symmpin_plan_policy pol = test_policy((symmpin_plan_mode)mode, 2);
    symmpin_plan *a = plan_same(c, 30, 2, &pol, NULL, 0), *b = plan_same(c, 30, 2, &pol, NULL, 0);
    cr_assert_eq(a->digest, b->digest);
    cr_assert_eq(a->nsites, b->nsites);
    for (size_t i = 0; i < a->nsites; i++) {
      cr_assert_eq(a->sites[i].site, b->sites[i].site);
      cr_assert_eq(a->sites[i].offset, b->sites[i].offset);
      cr_assert_eq(a->sites[i].slot_bytes, b->sites[i].slot_bytes);
    }
    symmpin_plan_free(a);
    symmpin_plan_free(b);
  }
}

Test(plan, late_sites_never_move_old_ones) {
  for (int mode = 0; mode < 2; mode++) {
    symmpin_plan_policy pol = test_policy((symmpin_plan_mode)mode, 2);
    tcall e0[] = {{1, 1000, F32, SUM, 0, 0}, {2, 5000, F32, SUM, 1, 0},
                  {1, 1000, F32, SUM, 0, 0}, {2, 5000, F32, SUM, 1, 0}};
    symmpin_plan *p0 = plan_same(e0, 4, 2, &pol, NULL, 0);
    /* epoch 1: old sites again, a big new one on stream 0, a small one on stream 1, one on a new
     * stream, and a new site in a group with an old one */
    tcall e1[] = {{1, 1000, F32, SUM, 0, 0},   {3, 90000, F32, SUM, 0, 0},
                  {2, 5000, F32, SUM, 1, 0},   {4, 10, F32, SUM, 1, 0},
                  {5, 700, F32, SUM, 2, 0},    {1, 1000, F32, SUM, 0, 77},
                  {6, 800, F32, SUM, 0, 77}};
    symmpin_plan *p1 = plan_same(e1, 7, 2, &pol, p0, 4);
    cr_assert_eq(p1->epoch, 1);
    cr_assert_eq(p1->nnew, 4);
    for (size_t i = 0; i < p0->nsites; i++) {
      cr_assert_eq(p1->sites[i].site, p0->sites[i].site);
      cr_assert_eq(p1->sites[i].offset, p0->sites[i].offset);
      cr_assert_eq(p1->sites[i].slot_bytes, p0->sites[i].slot_bytes);
      cr_assert_eq(p1->sites[i].pinned, p0->sites[i].pinned);
    }
    for (uint64_t s = 1; s <= 6; s++) cr_assert(site_of(p1, s)->pinned);
    cr_assert_geq(p1->pool_bytes, p0->pool_bytes);
    symmpin_record recs[1];
    mk_record(&recs[0], 0, 2, 4, e1, 7);
    const symmpin_record *rp[] = {&recs[0]};
    assert_no_shared_overlap(p1, rp, 1);
    cr_assert(disjoint(site_of(p1, 1), site_of(p1, 6)));
    if (mode == SYMMPIN_PLAN_SHARED) {
      /* the small new stream-1 site reuses site 2's bytes */
      cr_assert_eq(site_of(p1, 4)->offset, site_of(p1, 2)->offset);
    } else {
      cr_assert_eq(site_of(p1, 3)->offset, p0->pool_bytes); /* appended in order of appearance */
      cr_assert_eq(p1->pool_bytes, p1->dedicated_bytes);
    }
    symmpin_record_free(&recs[0]);
    symmpin_plan_free(p0);
    symmpin_plan_free(p1);
  }
}

/* The capture arena: placed once, after the first plan's slots, inside the pool, overlapping no
 * slot; later plans keep it where it is and place their new slots after it; it is part of the
 * digest (ranks asking different arenas never agree). */
Test(plan, the_capture_arena_is_placed_once_and_never_overlaps_a_slot) {
  for (int mode = 0; mode < 2; mode++) {
    symmpin_plan_policy pol = test_policy((symmpin_plan_mode)mode, 2);
    pol.capture_bytes = 1000; /* not a multiple of the alignment: rounded up */
    tcall e0[] = {{1, 1000, F32, SUM, 0, 0}, {2, 5000, F32, SUM, 1, 0},
                  {1, 1000, F32, SUM, 0, 0}, {2, 5000, F32, SUM, 1, 0}};
    symmpin_plan *p0 = plan_same(e0, 4, 2, &pol, NULL, 0);
    cr_assert_eq(p0->capture_bytes, 1024);
    cr_assert_eq(p0->capture_offset % p0->alignment, 0);
    cr_assert_eq(p0->pool_bytes, p0->capture_offset + p0->capture_bytes);
    for (uint64_t s = 1; s <= 2; s++)
      cr_assert_leq(site_of(p0, s)->offset + site_of(p0, s)->slot_bytes, p0->capture_offset);
    pol.capture_bytes = 1 << 20; /* a later epoch asking another size changes nothing */
    tcall e1[] = {{1, 1000, F32, SUM, 0, 0}, {3, 90000, F32, SUM, 0, 0}, {4, 10, F32, SUM, 2, 0}};
    symmpin_plan *p1 = plan_same(e1, 3, 2, &pol, p0, 4);
    cr_assert_eq(p1->capture_offset, p0->capture_offset);
    cr_assert_eq(p1->capture_bytes, p0->capture_bytes);
    for (uint64_t s = 3; s <= 4; s++) {
      const symmpin_plan_site *e = site_of(p1, s);
      cr_assert(e->offset + e->slot_bytes <= p1->capture_offset ||
                    e->offset >= p1->capture_offset + p1->capture_bytes,
                "mode %d: new site %lu [%lu, +%lu) touches the arena", mode, (unsigned long)s,
                (unsigned long)e->offset, (unsigned long)e->slot_bytes);
    }
    pol.capture_bytes = 2048;
    symmpin_plan *other = plan_same(e0, 4, 2, &pol, NULL, 0);
    cr_assert_neq(other->digest, p0->digest);
    pol.capture_bytes = 0;
    symmpin_plan *none = plan_same(e0, 4, 2, &pol, NULL, 0);
    cr_assert_eq(none->capture_bytes, 0);
    cr_assert_leq(none->pool_bytes, p0->capture_offset);
    symmpin_plan_free(p0);
    symmpin_plan_free(p1);
    symmpin_plan_free(other);
    symmpin_plan_free(none);
  }
}

Test(plan, one_stream_500_sites_pool_is_largest_slot) {
  enum { S = 500 };
  tcall *c = malloc(2 * S * sizeof(*c));
  for (int i = 0; i < 2 * S; i++) /* a scrambled order of sizes, twice */
    c[i] = (tcall){.site = 1000 + (uint64_t)((i * 37) % S), .count = 64 * (uint64_t)((i * 37) % S + 1),
                   .dtype = F32, .op = SUM};
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 2);
  symmpin_plan *p = plan_same(c, 2 * S, 2, &pol, NULL, 0);
  cr_assert_eq(p->npinned, S);
  uint64_t largest = fake_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 64 * S, F32, 2, NULL), sum = 0;
  for (int i = 0; i < S; i++)
    sum += fake_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 64 * (size_t)(i + 1), F32, 2, NULL);
  cr_assert_eq(p->pool_bytes, largest);
  cr_assert_eq(p->lower_bound_bytes, largest);
  cr_assert_eq(p->dedicated_bytes, sum);
  for (size_t i = 0; i < p->nsites; i++) cr_assert_eq(p->sites[i].offset, 0);
  symmpin_plan_free(p);
  pol.mode = SYMMPIN_PLAN_DEDICATED;
  p = plan_same(c, 2 * S, 2, &pol, NULL, 0);
  cr_assert_eq(p->pool_bytes, sum);
  /* dedicated: offsets in order of first appearance */
  for (size_t i = 1; i < p->nsites; i++)
    cr_assert_eq(p->sites[i].offset, p->sites[i - 1].offset + p->sites[i - 1].slot_bytes);
  symmpin_plan_free(p);
  free(c);
}

Test(plan, two_streams_interleaved) {
  /* A, C on stream 0; B, D on stream 1; calls alternate between streams. */
  tcall c[16];
  uint64_t counts[4] = {4000, 3000, 1000, 9000};
  for (int i = 0; i < 16; i++)
    c[i] = (tcall){.site = 1 + (uint64_t)(i % 4), .count = counts[i % 4], .dtype = F32, .op = SUM,
                   .stream = i % 2};
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 2);
  symmpin_plan *p = plan_same(c, 16, 2, &pol, NULL, 0);
  uint64_t a = fake_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 4000, F32, 2, NULL),
           b = fake_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 3000, F32, 2, NULL),
           d = fake_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 9000, F32, 2, NULL);
  cr_assert_eq(p->pool_bytes, a + d);
  cr_assert_eq(p->lower_bound_bytes, a + (b > d ? b : d));
  cr_assert_eq(site_of(p, 1)->offset, site_of(p, 3)->offset); /* same stream: shared */
  cr_assert_eq(site_of(p, 2)->offset, site_of(p, 4)->offset);
  for (uint64_t x = 1; x <= 4; x += 2)
    for (uint64_t y = 2; y <= 4; y += 2) cr_assert(disjoint(site_of(p, x), site_of(p, y)));
  cr_assert_eq(site_of(p, 2)->stream_ord, 1);
  symmpin_plan_free(p);
}

Test(plan, groups_keep_members_apart) {
  /* Each iteration: group {A, B, C} on stream 0, then D alone; tokens differ per iteration. */
  tcall c[16];
  uint64_t counts[4] = {2000, 5000, 3000, 12000};
  for (int it = 0, k = 0; it < 4; it++)
    for (int s = 0; s < 4; s++, k++)
      c[k] = (tcall){.site = 1 + (uint64_t)s, .count = counts[s], .dtype = F32, .op = SUM,
                     .token = s < 3 ? 100 + (uint64_t)it : 0};
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 2);
  symmpin_plan *p = plan_same(c, 16, 2, &pol, NULL, 0);
  symmpin_record rec;
  mk_record(&rec, 0, 2, 0, c, 16);
  const symmpin_record *rp[] = {&rec};
  assert_no_shared_overlap(p, rp, 1);
  cr_assert(disjoint(site_of(p, 1), site_of(p, 2)));
  cr_assert(disjoint(site_of(p, 1), site_of(p, 3)));
  cr_assert(disjoint(site_of(p, 2), site_of(p, 3)));
  uint64_t a = fake_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 2000, F32, 2, NULL),
           b = fake_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 5000, F32, 2, NULL),
           cc = fake_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 3000, F32, 2, NULL),
           d = fake_slot_bytes(SYMMPIN_COLL_ALLREDUCE, 12000, F32, 2, NULL);
  uint64_t lb = a + b + cc > d ? a + b + cc : d;
  cr_assert_eq(p->lower_bound_bytes, lb);
  /* Whole-slot sharing: the largest group member (B) shares D's slot, C and A need slots of their
   * own: D + C + A, the best any whole-slot placement can do here. */
  cr_assert_eq(site_of(p, 2)->offset, site_of(p, 4)->offset);
  cr_assert_eq(p->pool_bytes, d + cc + a);
  symmpin_record_free(&rec);
  symmpin_plan_free(p);
}

Test(plan, alignment_stress) {
  /* Slots of 256 * odd sizes under a 4096 alignment: every offset and size a multiple of 4096,
   * nothing overlapping across streams. */
  tcall c[24];
  for (int i = 0; i < 24; i++)
    c[i] = (tcall){.site = 1 + (uint64_t)(i % 12), .count = 1 + 97 * (uint64_t)(i % 12),
                   .dtype = i % 12 < 6 ? SYMMPIN_INT8 : SYMMPIN_FLOAT64, .stream = i % 3};
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 3);
  pol.alignment = 4096;
  symmpin_plan *p = plan_same(c, 24, 3, &pol, NULL, 0);
  cr_assert_eq(p->npinned, 12);
  symmpin_record rec;
  mk_record(&rec, 0, 3, 0, c, 24);
  const symmpin_record *rp[] = {&rec};
  assert_no_shared_overlap(p, rp, 1);
  for (size_t i = 0; i < p->nsites; i++) {
    cr_assert_eq(p->sites[i].slot_bytes % 4096, 0);
    cr_assert_geq(p->sites[i].slot_bytes, fake_slot_bytes(SYMMPIN_COLL_ALLREDUCE, p->sites[i].count,
                                                          p->sites[i].dtype, 3, NULL));
  }
  cr_assert_leq(p->pool_bytes, p->lower_bound_bytes * 105 / 100 + pol.alignment);
  symmpin_record_free(&rec);
  symmpin_plan_free(p);
  pol.alignment = 300; /* not a power of two */
  symmpin_record r0;
  mk_record(&r0, 0, 1, 0, c, 1);
  const symmpin_record *rp0[] = {&r0};
  pol.nranks = 1;
  cr_assert_eq(symmpin_plan_make(rp0, &pol, NULL, &p), SYMMPIN_ERR_INVALID);
  symmpin_record_free(&r0);
}

static bool no_prod(int coll, int dtype, int op, void *ctx) {
  (void)ctx, (void)coll;
  (void)dtype;
  return op != SYMMPIN_PROD;
}

static size_t slot_none_for_i64(int coll, size_t count, int dtype, int nranks, void *ctx) {
  return dtype == SYMMPIN_INT64 ? 0 : fake_slot_bytes(coll, count, dtype, nranks, ctx);
}

Test(plan, reasons) {
  tcall c[] = {
      {1, 100, F32, SUM, 0, 0},
      {2, 1u << 20, F32, SUM, 0, 0},      /* 4 MiB > max_bytes */
      {3, 100, 42, SUM, 0, 0},            /* unknown dtype */
      {4, 100, F32, 9, 0, 0},             /* PreMulSum-like op */
      {5, 100, F32, SYMMPIN_PROD, 0, 0},  /* refused by supports() */
      {6, 100, SYMMPIN_INT64, SUM, 0, 0}, /* slot_bytes() says 0 */
      {7, 100, F32, SUM, -1, 0},          /* stream unknown */
      {8, 256 * 1024, F32, SUM, 0, 0},    /* exactly max_bytes: allowed */
  };
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 2);
  pol.max_bytes = 1u << 20;
  pol.supports = no_prod;
  pol.slot_bytes = slot_none_for_i64;
  symmpin_plan *p = plan_same(c, 8, 2, &pol, NULL, 0);
  symmpin_plan_reason want[] = {SYMMPIN_PLAN_PINNED,      SYMMPIN_PLAN_TOO_LARGE,
                                SYMMPIN_PLAN_UNSUPPORTED, SYMMPIN_PLAN_UNSUPPORTED,
                                SYMMPIN_PLAN_UNSUPPORTED, SYMMPIN_PLAN_UNSUPPORTED,
                                SYMMPIN_PLAN_NO_STREAM,   SYMMPIN_PLAN_PINNED};
  for (int i = 0; i < 8; i++) {
    const symmpin_plan_site *s = site_of(p, (uint64_t)i + 1);
    cr_assert_eq(s->reason, want[i], "site %d: %s", i + 1, symmpin_plan_reason_name(s->reason));
    cr_assert_eq(s->pinned, want[i] == SYMMPIN_PLAN_PINNED);
    if (!s->pinned) cr_assert_eq(s->slot_bytes, 0);
  }
  for (int r = 0; r < SYMMPIN_PLAN_REASON_COUNT; r++)
    cr_assert_neq(symmpin_plan_reason_name((symmpin_plan_reason)r)[0], '?');
  symmpin_plan_free(p);
}

Test(plan, route_safety_net) {
  tcall c[] = {{1, 100, F32, SUM, 2, 0}, {1, 100, F32, SUM, 0, 0}};
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 2);
  symmpin_plan *p = plan_same(c, 2, 2, &pol, NULL, 0);
  const symmpin_plan_site *e = NULL;
  cr_assert_eq(symmpin_plan_route(p, 1, SYMMPIN_COLL_ALLREDUCE, 100, F32, SUM, 2, &e),
               SYMMPIN_PLAN_PINNED);
  cr_assert_eq(e->stream_ord, 2); /* planned on its first call's stream */
  cr_assert_eq(symmpin_plan_route(p, 1, SYMMPIN_COLL_ALLREDUCE, 100, F32, SUM, 0, &e),
               SYMMPIN_PLAN_STREAM_OFF_PLAN);
  cr_assert_not_null(e);
  /* A shape no pinned site has: NCCL, also from a pinned site (its next epoch plans it). */
  cr_assert_eq(symmpin_plan_route(p, 12345, SYMMPIN_COLL_ALLREDUCE, 101, F32, SUM, 2, &e),
               SYMMPIN_PLAN_UNPLANNED);
  cr_assert_null(e);
  cr_assert_eq(symmpin_plan_route(p, 1, SYMMPIN_COLL_ALLREDUCE, 100, F32, SYMMPIN_MAX, 2, &e),
               SYMMPIN_PLAN_UNPLANNED);
  cr_assert_null(e);
  symmpin_plan_free(p);
}

Test(plan, later_group_conflict_demotes_later_site) {
  /* Epoch 0: A and B on one stream, never grouped -> they share bytes. Epoch 1 shows them in one
   * group: B (later in plan order) must leave its slot, A keeps it. */
  tcall e0[] = {{1, 100, F32, SUM, 0, 0}, {2, 100, F32, SUM, 0, 0}};
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 2);
  symmpin_plan *p0 = plan_same(e0, 2, 2, &pol, NULL, 0);
  cr_assert_eq(site_of(p0, 1)->offset, site_of(p0, 2)->offset);
  tcall e1[] = {{1, 100, F32, SUM, 0, 5}, {2, 100, F32, SUM, 0, 5}, {3, 100, F32, SUM, 0, 0}};
  symmpin_plan *p1 = plan_same(e1, 3, 2, &pol, p0, 2);
  cr_assert(site_of(p1, 1)->pinned);
  cr_assert_not(site_of(p1, 2)->pinned);
  cr_assert_eq(site_of(p1, 2)->reason, SYMMPIN_PLAN_CONFLICT);
  cr_assert_eq(site_of(p1, 2)->offset, site_of(p0, 2)->offset); /* bytes stay reserved */
  cr_assert(site_of(p1, 3)->pinned);
  cr_assert_neq(p1->digest, p0->digest);
  symmpin_plan_free(p0);
  symmpin_plan_free(p1);
}

/* Per-call-site choice by measurement: a shape measured faster on NCCL (policy.nccl_faster) is
 * demoted in the plan that learns it (its bytes stay reserved: kernels issued before may still
 * run), no later site of that shape is pinned, in that plan or any later one (final), the schedule
 * stops asking for it (shape_missing), and the digest changes. */
Test(plan, shapes_measured_faster_on_nccl_are_demoted_for_good) {
  tcall e0[] = {{1, 100, F32, SUM, 0, 0}, {2, 5000, F32, SUM, 0, 0}};
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 2);
  symmpin_plan *p0 = plan_same(e0, 2, 2, &pol, NULL, 0);
  cr_assert(site_of(p0, 1)->pinned && site_of(p0, 2)->pinned);
  /* Epoch 1 learns that 5000 f32 sum runs faster on NCCL; site 3 (same shape) appears. */
  symmpin_plan_shape slow[] = {{5000, F32, SUM}, {777, F32, SUM} /* a shape nobody calls */};
  symmpin_plan_policy pol1 = pol;
  pol1.nccl_faster = slow;
  pol1.n_nccl_faster = 2;
  tcall e1[] = {{1, 100, F32, SUM, 0, 0}, {2, 5000, F32, SUM, 0, 0}, {3, 5000, F32, SUM, 1, 0}};
  symmpin_plan *p1 = plan_same(e1, 3, 2, &pol1, p0, 2);
  cr_assert(site_of(p1, 1)->pinned);
  cr_assert_not(site_of(p1, 2)->pinned);
  cr_assert_eq(site_of(p1, 2)->reason, SYMMPIN_PLAN_NCCL_FASTER);
  cr_assert_eq(site_of(p1, 2)->offset, site_of(p0, 2)->offset); /* bytes stay reserved */
  cr_assert_eq(site_of(p1, 2)->slot_bytes, site_of(p0, 2)->slot_bytes);
  cr_assert_not(site_of(p1, 3)->pinned);
  cr_assert_eq(site_of(p1, 3)->reason, SYMMPIN_PLAN_NCCL_FASTER);
  cr_assert_null(symmpin_plan_for_shape(p1, SYMMPIN_COLL_ALLREDUCE, 5000, F32, SUM));
  cr_assert(symmpin_plan_shape_nccl_faster(p1, SYMMPIN_COLL_ALLREDUCE, 5000, F32, SUM));
  cr_assert_not(symmpin_plan_shape_nccl_faster(p1, SYMMPIN_COLL_ALLREDUCE, 100, F32, SUM));
  cr_assert_not(symmpin_plan_shape_nccl_faster(p1, SYMMPIN_COLL_ALLREDUCE, 777, F32, SUM),
                "only shapes of its sites");
  cr_assert_not(symmpin_plan_shape_missing(p1, &pol, SYMMPIN_COLL_ALLREDUCE, 5000, F32, SUM),
                "not asked for again");
  cr_assert(symmpin_plan_shape_missing(p1, &pol, SYMMPIN_COLL_ALLREDUCE, 4000, F32, SUM));
  const symmpin_plan_site *e = NULL;
  cr_assert_eq(symmpin_plan_route(p1, 2, SYMMPIN_COLL_ALLREDUCE, 5000, F32, SUM, 0, &e),
               SYMMPIN_PLAN_NCCL_FASTER);
  cr_assert_null(e);
  cr_assert_neq(p1->digest, p0->digest);
  /* Epoch 2 without the list: the demotion stays, also for a new site of that shape. */
  tcall e2[] = {{2, 5000, F32, SUM, 0, 0}, {4, 5000, F32, SUM, 0, 0}};
  symmpin_plan *p2 = plan_same(e2, 2, 2, &pol, p1, 5);
  cr_assert_not(site_of(p2, 2)->pinned);
  cr_assert_eq(site_of(p2, 4)->reason, SYMMPIN_PLAN_NCCL_FASTER);
  cr_assert_null(symmpin_plan_for_shape(p2, SYMMPIN_COLL_ALLREDUCE, 5000, F32, SUM));
  cr_assert_eq(symmpin_plan_for_shape(p2, SYMMPIN_COLL_ALLREDUCE, 100, F32, SUM), site_of(p2, 1));
  symmpin_plan_free(p0);
  symmpin_plan_free(p1);
  symmpin_plan_free(p2);
}

/* Groups: a shape whose calls of one kind (eager, or inside ncclGroupStart/End) were measured
 * faster on NCCL sends that kind to NCCL and keeps its sites for the other kind; a shape never
 * seen in a group whose eager calls lost is demoted as before; once both kinds lost, its sites
 * are. group_max_bytes keeps larger grouped calls off their slots. All of it in the digest. */
Test(plan, a_kind_measured_slower_leaves_the_other_kind_its_slot) {
  /* Sites 1 (100 f32) and 3 (300 f32) in one group (token 5); 2 (200) and 4 (300) eager. */
  tcall e0[] = {{1, 100, F32, SUM, 0, 5},
                {3, 300, F32, SUM, 0, 5},
                {2, 200, F32, SUM, 0, 0},
                {4, 300, F32, SUM, 0, 0}};
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 2);
  pol.group_max_bytes = 1000; /* 300 f32 = 1200 B */
  symmpin_plan *p0 = plan_same(e0, 4, 2, &pol, NULL, 0);
  cr_assert(p0->groups_alike);
  cr_assert(site_of(p0, 1)->grouped && site_of(p0, 3)->grouped && !site_of(p0, 2)->grouped);
  cr_assert_eq(symmpin_plan_route_kind(p0, SYMMPIN_COLL_ALLREDUCE, 300, F32, SUM, true),
               SYMMPIN_PLAN_GROUP_TOO_LARGE);
  cr_assert_eq(symmpin_plan_route_kind(p0, SYMMPIN_COLL_ALLREDUCE, 300, F32, SUM, false),
               SYMMPIN_PLAN_PINNED);
  cr_assert_eq(symmpin_plan_route_kind(p0, SYMMPIN_COLL_ALLREDUCE, 100, F32, SUM, true),
               SYMMPIN_PLAN_PINNED);
  symmpin_plan_policy nolimit = pol;
  nolimit.group_max_bytes = 0;
  symmpin_plan *q0 = plan_same(e0, 4, 2, &nolimit, NULL, 0);
  cr_assert_neq(q0->digest, p0->digest, "the group limit is part of the plan");
  symmpin_plan_free(q0);
  /* Epoch 1: 100's groups lost; 200's and 300's eager calls lost. */
  symmpin_plan_shape grouped_slow[] = {{100, F32, SUM}};
  symmpin_plan_shape eager_slow[] = {{200, F32, SUM}, {300, F32, SUM}};
  symmpin_plan_policy pol1 = nolimit;
  pol1.group_nccl_faster = grouped_slow;
  pol1.n_group_nccl_faster = 1;
  pol1.nccl_faster = eager_slow;
  pol1.n_nccl_faster = 2;
  symmpin_plan *p1 = plan_same(e0, 4, 2, &pol1, p0, 4);
  cr_assert(site_of(p1, 1)->pinned, "its eager calls keep the slot");
  cr_assert_eq(symmpin_plan_route_kind(p1, SYMMPIN_COLL_ALLREDUCE, 100, F32, SUM, true),
               SYMMPIN_PLAN_GROUP_NCCL_FASTER);
  cr_assert_eq(symmpin_plan_route_kind(p1, SYMMPIN_COLL_ALLREDUCE, 100, F32, SUM, false),
               SYMMPIN_PLAN_PINNED);
  cr_assert_not(site_of(p1, 2)->pinned, "never grouped: demoted as before");
  cr_assert_eq(site_of(p1, 2)->reason, SYMMPIN_PLAN_NCCL_FASTER);
  cr_assert(site_of(p1, 3)->pinned && site_of(p1, 4)->pinned, "300's grouped calls keep them");
  cr_assert_eq(symmpin_plan_route_kind(p1, SYMMPIN_COLL_ALLREDUCE, 300, F32, SUM, false),
               SYMMPIN_PLAN_NCCL_FASTER);
  cr_assert_eq(symmpin_plan_route_kind(p1, SYMMPIN_COLL_ALLREDUCE, 300, F32, SUM, true),
               SYMMPIN_PLAN_PINNED);
  cr_assert_eq(p1->n_group_slow, 1);
  cr_assert_eq(p1->n_eager_slow, 1, "200 is carried by its demoted site");
  cr_assert(symmpin_plan_kind_nccl_faster(p1, SYMMPIN_COLL_ALLREDUCE, 200, F32, SUM, true));
  cr_assert(symmpin_plan_kind_nccl_faster(p1, SYMMPIN_COLL_ALLREDUCE, 300, F32, SUM, false));
  cr_assert_not(symmpin_plan_kind_nccl_faster(p1, SYMMPIN_COLL_ALLREDUCE, 300, F32, SUM, true));
  cr_assert_neq(p1->digest, p0->digest);
  /* Epoch 2, no new measurement: everything stays (final). Epoch 3: 100's eager calls lost too:
   * its sites are demoted, and no list needs it any more. */
  symmpin_plan *p2 = plan_same(e0, 4, 2, &nolimit, p1, 8);
  cr_assert_eq(symmpin_plan_route_kind(p2, SYMMPIN_COLL_ALLREDUCE, 100, F32, SUM, true),
               SYMMPIN_PLAN_GROUP_NCCL_FASTER);
  cr_assert_eq(symmpin_plan_route_kind(p2, SYMMPIN_COLL_ALLREDUCE, 300, F32, SUM, false),
               SYMMPIN_PLAN_NCCL_FASTER);
  symmpin_plan_shape also[] = {{100, F32, SUM}};
  symmpin_plan_policy pol3 = nolimit;
  pol3.nccl_faster = also;
  pol3.n_nccl_faster = 1;
  symmpin_plan *p3 = plan_same(e0, 4, 2, &pol3, p2, 12);
  cr_assert_not(site_of(p3, 1)->pinned);
  cr_assert_eq(site_of(p3, 1)->reason, SYMMPIN_PLAN_NCCL_FASTER);
  cr_assert_null(symmpin_plan_for_shape(p3, SYMMPIN_COLL_ALLREDUCE, 100, F32, SUM));
  cr_assert_eq(p3->n_group_slow, 0);
  symmpin_plan_free(p0);
  symmpin_plan_free(p1);
  symmpin_plan_free(p2);
  symmpin_plan_free(p3);
}

/* Rank 0's record has site 1 in a group, rank 1's the same call eagerly: being in a group is then
 * no shared fact, so the plan turns the group rules off for good (a grouped call is an eager
 * one, whatever the limit), and a kind measured slower demotes its shape whole. */
Test(plan, ranks_grouping_differently_turn_the_group_rules_off) {
  tcall r0[] = {{1, 100, F32, SUM, 0, 5}, {2, 200, F32, SUM, 0, 0}};
  tcall r1[] = {{1, 100, F32, SUM, 0, 0}, {2, 200, F32, SUM, 0, 0}};
  symmpin_record recs[2];
  const symmpin_record *rp[2] = {&recs[0], &recs[1]};
  mk_record(&recs[0], 0, 2, 0, r0, 2);
  mk_record(&recs[1], 1, 2, 0, r1, 2);
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 2);
  pol.group_max_bytes = 1;
  symmpin_plan *p0 = NULL;
  cr_assert_eq(symmpin_plan_make(rp, &pol, NULL, &p0), SYMMPIN_OK);
  cr_assert_not(p0->groups_alike);
  cr_assert(site_of(p0, 1)->pinned, "the sites themselves agree");
  cr_assert_eq(symmpin_plan_route_kind(p0, SYMMPIN_COLL_ALLREDUCE, 100, F32, SUM, true),
               SYMMPIN_PLAN_PINNED);
  symmpin_record_free(&recs[0]);
  symmpin_record_free(&recs[1]);
  /* Later records alike: still off. A group verdict demotes 100 whole. */
  symmpin_plan_shape grouped_slow[] = {{100, F32, SUM}};
  symmpin_plan_policy pol1 = pol;
  pol1.group_nccl_faster = grouped_slow;
  pol1.n_group_nccl_faster = 1;
  symmpin_plan *p1 = plan_same(r1, 2, 2, &pol1, p0, 2);
  cr_assert_not(p1->groups_alike);
  cr_assert_not(site_of(p1, 1)->pinned);
  cr_assert_eq(site_of(p1, 1)->reason, SYMMPIN_PLAN_NCCL_FASTER);
  cr_assert(site_of(p1, 2)->pinned);
  symmpin_plan_free(p0);
  symmpin_plan_free(p1);
}

Test(plan, a_shape_keeps_its_slot_when_a_later_epoch_pins_a_smaller_id) {
  /* Epoch 0 pins site 5 (shape 100 f32 sum) on stream 1; epoch 1 pins site 3, same shape, on
   * stream 0 (another slot). Calls of that shape keep going to site 5's slot: the routing entry is
   * the earliest epoch's, then the smallest id, so it never moves under calls in flight. */
  tcall e0[] = {{5, 100, F32, SUM, 1, 0}, {7, 64, F32, SUM, 0, 0}};
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 2);
  symmpin_plan *p0 = plan_same(e0, 2, 2, &pol, NULL, 0);
  tcall e1[] = {{5, 100, F32, SUM, 1, 0}, {7, 64, F32, SUM, 0, 0}, {3, 100, F32, SUM, 0, 0}};
  symmpin_plan *p1 = plan_same(e1, 3, 2, &pol, p0, 2);
  cr_assert(site_of(p1, 3)->pinned);
  cr_assert_eq(symmpin_plan_for_shape(p0, SYMMPIN_COLL_ALLREDUCE, 100, F32, SUM), site_of(p0, 5));
  cr_assert_eq(symmpin_plan_for_shape(p1, SYMMPIN_COLL_ALLREDUCE, 100, F32, SUM), site_of(p1, 5));
  const symmpin_plan_site *e = NULL;
  cr_assert_eq(symmpin_plan_route(p1, 3, SYMMPIN_COLL_ALLREDUCE, 100, F32, SUM, 0, &e),
               SYMMPIN_PLAN_STREAM_OFF_PLAN);
  cr_assert_eq(e->offset, site_of(p0, 5)->offset);
  symmpin_plan_free(p0);
  symmpin_plan_free(p1);
}

Test(plan, invalid_inputs) {
  tcall c[] = {{1, 100, F32, SUM, 0, 0}};
  symmpin_record r0, r1;
  mk_record(&r0, 0, 2, 0, c, 1);
  mk_record(&r1, 0, 2, 0, c, 1); /* claims rank 0 too */
  const symmpin_record *rp[] = {&r0, &r1};
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 2);
  symmpin_plan *p = NULL;
  cr_assert_eq(symmpin_plan_make(rp, &pol, NULL, &p), SYMMPIN_ERR_INVALID);
  cr_assert_null(p);
  symmpin_record_free(&r0);
  symmpin_record_free(&r1);
}

/* ---- randomized property test ---- */

typedef struct gsite {
  uint64_t id, count;
  int dtype, stream, group; /* group: -1 none, else the unit it belongs to */
} gsite;

static uint64_t rnd(uint64_t *s) { /* xorshift64*: seeded, reproducible everywhere */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ULL;
}

/* Sum over streams of max(largest pinned slot, largest group's pinned slots on that stream),
 * computed from the generator's own group structure. */
static uint64_t expected_lower_bound(const symmpin_plan *p, const gsite *g, int n, int ngroups) {
  uint64_t total = 0;
  for (int s = 0; s < 4; s++) {
    uint64_t best = 0;
    for (int i = 0; i < n; i++) {
      const symmpin_plan_site *e = symmpin_plan_find(p, g[i].id);
      if (e && e->pinned && e->stream_ord == s && e->slot_bytes > best) best = e->slot_bytes;
    }
    for (int k = 0; k < ngroups; k++) {
      uint64_t sum = 0;
      for (int i = 0; i < n; i++) {
        const symmpin_plan_site *e = symmpin_plan_find(p, g[i].id);
        if (g[i].group == k && e && e->pinned && e->stream_ord == s) sum += e->slot_bytes;
      }
      if (sum > best) best = sum;
    }
    total += best;
  }
  return total;
}

/* The best whole-slot placement when groups partition the sites: per stream, the k-th slot holds
 * the k-th largest pinned member of every group (singletons are groups of one), so the stream
 * needs sum over k of max over groups of their k-th largest. Also says whether any group holds two
 * pinned sites on one stream (only then can it exceed the lower bound). */
static uint64_t expected_whole_slot_pool(const symmpin_plan *p, const gsite *g, int n, int ngroups,
                                         bool *multi) {
  uint64_t total = 0;
  *multi = false;
  for (int s = 0; s < 4; s++) {
    uint64_t kth[64] = {0}; /* kth[k]: max over groups of their (k+1)-th largest */
    for (int grp = -1 - n; grp < ngroups; grp++) {
      /* grp < -1 stands for the singleton of site (-grp - 2) */
      uint64_t sz[64];
      int m = 0;
      for (int i = 0; i < n; i++) {
        bool in = grp >= 0 ? g[i].group == grp : (g[i].group < 0 && i == -grp - 2);
        const symmpin_plan_site *e = symmpin_plan_find(p, g[i].id);
        if (in && e && e->pinned && e->stream_ord == s) sz[m++] = e->slot_bytes;
      }
      if (m > 1) *multi = true;
      for (int x = 0; x < m; x++) /* sort descending */
        for (int y = x + 1; y < m; y++)
          if (sz[y] > sz[x]) {
            uint64_t t = sz[x];
            sz[x] = sz[y];
            sz[y] = t;
          }
      for (int k = 0; k < m; k++)
        if (sz[k] > kth[k]) kth[k] = sz[k];
    }
    for (int k = 0; k < 64; k++) total += kth[k];
  }
  return total;
}

/* One loop iteration's calls over sites [0, nsites) in unit order; grouped units get a token. */
static size_t emit_loop(const gsite *g, int nsites, int ngroups, uint64_t token_base, tcall *out) {
  size_t k = 0;
  for (int i = 0; i < nsites; i++)
    if (g[i].group < 0)
      out[k++] = (tcall){g[i].id, g[i].count, g[i].dtype, SUM, g[i].stream, 0};
  for (int grp = 0; grp < ngroups; grp++)
    for (int i = 0; i < nsites; i++)
      if (g[i].group == grp)
        out[k++] = (tcall){g[i].id, g[i].count, g[i].dtype, SUM, g[i].stream,
                           token_base + (uint64_t)grp + 1};
  return k;
}

Test(plan, randomized_properties, .timeout = 120) {
  uint64_t seed = 0x5eed5eedULL;
  const uint64_t aligns[] = {256, 512, 4096};
  for (int iter = 0; iter < 400; iter++) {
    int nranks = 1 + (int)(rnd(&seed) % 4);
    int nsites = 2 + (int)(rnd(&seed) % 40), nold = 1 + (int)(rnd(&seed) % (uint64_t)nsites);
    int nstreams = 1 + (int)(rnd(&seed) % 3), ngroups = (int)(rnd(&seed) % 4);
    gsite g[64];
    for (int i = 0; i < nsites; i++) {
      g[i] = (gsite){.id = 0x1000 + (uint64_t)iter * 64 + (uint64_t)i,
                     .count = 1 + rnd(&seed) % (1u << (4 + rnd(&seed) % 16)),
                     .dtype = (int)(rnd(&seed) % SYMMPIN_DTYPE_COUNT),
                     .stream = (int)(rnd(&seed) % (uint64_t)nstreams),
                     .group = ngroups && rnd(&seed) % 3 == 0 ? (int)(rnd(&seed) % (uint64_t)ngroups) : -1};
    }
    symmpin_plan_policy pol = test_policy((symmpin_plan_mode)(rnd(&seed) % 2), nranks);
    pol.alignment = aligns[rnd(&seed) % 3];

    /* epoch 0: two loops over the old sites; epoch 1: two loops over all sites */
    tcall calls[256];
    size_t n0 = emit_loop(g, nold, ngroups, 0, calls);
    n0 += emit_loop(g, nold, ngroups, 100, calls + n0);
    symmpin_plan *p0 = plan_same(calls, n0, nranks, &pol, NULL, 0);
    symmpin_record r0;
    mk_record(&r0, 0, nranks, 0, calls, n0);
    const symmpin_record *rp0[] = {&r0};
    assert_no_shared_overlap(p0, rp0, 1);
    cr_assert_eq(p0->npinned, (size_t)nold);
    cr_assert_eq(p0->lower_bound_bytes, expected_lower_bound(p0, g, nold, ngroups),
                 "iter %d: lower bound", iter);
    if (pol.mode == SYMMPIN_PLAN_SHARED) {
      bool multi;
      uint64_t best = expected_whole_slot_pool(p0, g, nold, ngroups, &multi);
      cr_assert_eq(p0->pool_bytes, best, "iter %d: pool %lu, best whole-slot pool %lu", iter,
                   (unsigned long)p0->pool_bytes, (unsigned long)best);
      /* Without groups of several sites on one stream, the pool meets the lower bound itself. */
      if (!multi)
        cr_assert_leq(p0->pool_bytes, p0->lower_bound_bytes * 105 / 100 + pol.alignment,
                      "iter %d: pool %lu vs lower bound %lu", iter, (unsigned long)p0->pool_bytes,
                      (unsigned long)p0->lower_bound_bytes);
    } else
      cr_assert_eq(p0->pool_bytes, p0->dedicated_bytes);

    size_t n1 = emit_loop(g, nsites, ngroups, 200, calls);
    n1 += emit_loop(g, nsites, ngroups, 300, calls + n1);
    symmpin_plan *p1 = plan_same(calls, n1, nranks, &pol, p0, n0);
    symmpin_record r1;
    mk_record(&r1, 0, nranks, n0, calls, n1);
    const symmpin_record *rp01[] = {&r0, &r1};
    assert_no_shared_overlap(p1, rp01, 2);
    uint64_t new_bytes = 0;
    for (size_t i = 0; i < p1->nsites; i++) {
      if (i < p0->nsites) {
        cr_assert_eq(p1->sites[i].offset, p0->sites[i].offset, "iter %d: an offset moved", iter);
        cr_assert_eq(p1->sites[i].slot_bytes, p0->sites[i].slot_bytes);
      } else {
        new_bytes += p1->sites[i].slot_bytes;
      }
    }
    cr_assert_eq(p1->nsites, (size_t)nsites);
    cr_assert_leq(p1->pool_bytes, p0->pool_bytes + new_bytes);
    cr_assert_geq(p1->pool_bytes, p0->pool_bytes);
    /* Extending is deterministic too. */
    symmpin_plan *p1b = plan_same(calls, n1, nranks, &pol, p0, n0);
    cr_assert_eq(p1b->digest, p1->digest);
    symmpin_plan_free(p1b);
    symmpin_record_free(&r0);
    symmpin_record_free(&r1);
    symmpin_plan_free(p0);
    symmpin_plan_free(p1);
  }
}

/* A later epoch's pool grows by a separate chunk of symmetric memory: a new slot may join an old
 * slot only if it stays inside the old pool, else it must start at or after the old end. */
Test(plan, late_slot_never_crosses_the_old_pool_end) {
  symmpin_slot_item items[2] = {
      {.bytes = 256, .stream = 0, .placed = true, .offset = 0}, /* earlier plan: pool [0, 256) */
      {.bytes = 512, .stream = 0, .placed = false},             /* same stream: may share bytes */
  };
  symmpin_slot_problem pb = {.items = items, .nitems = 2, .alignment = 256, .pool_bytes = 256};
  cr_assert_eq(symmpin_slots_shared.assign(&pb), SYMMPIN_OK);
  cr_assert(items[1].offset >= 256, "new slot at %llu crosses the old end 256",
            (unsigned long long)items[1].offset);
  cr_assert_eq(items[0].offset, 0);
  cr_assert_eq(pb.pool_bytes, items[1].offset + 512);
}

/* ---- the collectives in one plan (common/types.h's SYMMPIN_COLLS) ---- */

/* An all-reduce, an all-gather and a reduce-scatter of one count, datatype and op (the all-gather
 * with op 0) are three shapes: three slots of their own sizes, each routed by its own shape. */
Test(plan_colls, shapes_differ_by_collective) {
  tcall c[] = {
      {1, 1000, F32, SUM, 0, 0, SYMMPIN_COLL_ALLREDUCE},
      {2, 1000, F32, SUM, 0, 0, SYMMPIN_COLL_ALLGATHER},
      {3, 1000, F32, SUM, 0, 0, SYMMPIN_COLL_REDUCESCATTER},
  };
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_DEDICATED, 2);
  symmpin_plan *p = plan_same(c, 3, 2, &pol, NULL, 0);
  cr_assert_eq(p->npinned, 3);
  for (int k = 0; k < 3; k++) {
    const symmpin_plan_site *s = symmpin_plan_for_shape(p, c[k].coll, 1000, F32, SUM);
    cr_assert(s, "collective %d has a slot", c[k].coll);
    cr_expect_eq(s->site, c[k].site);
    cr_expect_eq(s->coll, c[k].coll);
    cr_expect_eq(s->slot_bytes, fake_slot_bytes(c[k].coll, 1000, F32, 2, NULL));
  }
  cr_expect_neq(symmpin_plan_for_shape(p, SYMMPIN_COLL_ALLGATHER, 1000, F32, SUM)->offset,
                symmpin_plan_for_shape(p, SYMMPIN_COLL_ALLREDUCE, 1000, F32, SUM)->offset);
  cr_expect_null(symmpin_plan_for_shape(p, SYMMPIN_COLL_ALLGATHER, 1001, F32, SUM));
  cr_expect_eq(symmpin_plan_route(p, 99, SYMMPIN_COLL_REDUCESCATTER, 1000, F32, SUM, 0, NULL),
               SYMMPIN_PLAN_PINNED, "routing is by shape, collective included");
  symmpin_plan_free(p);
}

/* SYMMPIN_MAX_BYTES bounds the message: the larger buffer, nranks x count for the all-gather and
 * reduce-scatter. At 4 ranks and a limit of 64 KiB: an all-reduce of 16 Ki f32 fits, an
 * all-gather of 16 Ki f32 per rank (256 KiB gathered) does not, one of 4 Ki does. */
Test(plan_colls, max_bytes_is_the_larger_buffer) {
  tcall c[] = {
      {1, 16384, F32, SUM, 0, 0, SYMMPIN_COLL_ALLREDUCE},
      {2, 16384, F32, 0, 0, 0, SYMMPIN_COLL_ALLGATHER},
      {3, 4096, F32, 0, 0, 0, SYMMPIN_COLL_ALLGATHER},
      {4, 4097, F32, SUM, 0, 0, SYMMPIN_COLL_REDUCESCATTER},
  };
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 4);
  pol.max_bytes = 64 << 10;
  symmpin_plan *p = plan_same(c, 4, 4, &pol, NULL, 0);
  symmpin_plan_reason want[] = {SYMMPIN_PLAN_PINNED, SYMMPIN_PLAN_TOO_LARGE, SYMMPIN_PLAN_PINNED,
                                SYMMPIN_PLAN_TOO_LARGE};
  for (int i = 0; i < 4; i++)
    cr_expect_eq(symmpin_plan_find(p, c[i].site)->reason, want[i], "site %d: %s", i + 1,
                 symmpin_plan_reason_name(symmpin_plan_find(p, c[i].site)->reason));
  symmpin_plan_policy pol4 = pol;
  cr_expect_not(symmpin_plan_shape_missing(p, &pol4, SYMMPIN_COLL_ALLGATHER, 16384, F32, 0),
                "too large: never missing");
  cr_expect(symmpin_plan_shape_missing(p, &pol4, SYMMPIN_COLL_ALLGATHER, 2048, F32, 0),
            "a new all-gather shape that would fit");
  symmpin_plan_free(p);
}

/* Ranks that disagree only in the collective of one call (an all-gather here, an all-reduce
 * there, same site, count, datatype, op) differ: that site is not pinned. */
Test(plan_colls, ranks_that_differ_in_the_collective) {
  tcall a[] = {{1, 1000, F32, SUM, 0, 0, SYMMPIN_COLL_ALLREDUCE}, {2, 500, F32, SUM, 0, 0, 0}};
  tcall b[] = {{1, 1000, F32, SUM, 0, 0, SYMMPIN_COLL_ALLGATHER}, {2, 500, F32, SUM, 0, 0, 0}};
  symmpin_record r0, r1;
  mk_record(&r0, 0, 2, 0, a, 2);
  mk_record(&r1, 1, 2, 0, b, 2);
  const symmpin_record *rp[2] = {&r0, &r1};
  symmpin_plan_policy pol = test_policy(SYMMPIN_PLAN_SHARED, 2);
  symmpin_plan *p = NULL;
  cr_assert_eq(symmpin_plan_make(rp, &pol, NULL, &p), SYMMPIN_OK);
  cr_expect_eq(symmpin_plan_find(p, 1)->reason, SYMMPIN_PLAN_DIFFERS);
  cr_expect_eq(symmpin_plan_find(p, 2)->reason, SYMMPIN_PLAN_PINNED);
  symmpin_plan_free(p);
  symmpin_record_free(&r0);
  symmpin_record_free(&r1);
}
