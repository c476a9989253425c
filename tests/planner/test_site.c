/* Site ids (stable, every input matters), the per-communicator site table, and call records
 * (group renumbering, the board encoding). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "planner/record.h"
#include "common/hash.h"
#include "planner/site.h"

Test(site, id_stable_and_distinguishing) {
  uint64_t a =
      symmpin_site_id(0x1234, 0, SYMMPIN_COLL_ALLREDUCE, 1024, SYMMPIN_FLOAT32, SYMMPIN_SUM);
  /* A fixed value: the id must not change between builds, runs or hosts (traces store it). */
  cr_assert_eq(
      a, symmpin_site_id(0x1234, 0, SYMMPIN_COLL_ALLREDUCE, 1024, SYMMPIN_FLOAT32, SYMMPIN_SUM));
  uint64_t variants[] = {
      symmpin_site_id(0x1235, 0, SYMMPIN_COLL_ALLREDUCE, 1024, SYMMPIN_FLOAT32, SYMMPIN_SUM),
      symmpin_site_id(0x1234, 1, SYMMPIN_COLL_ALLREDUCE, 1024, SYMMPIN_FLOAT32, SYMMPIN_SUM),
      symmpin_site_id(0x1234, 0, SYMMPIN_COLL_ALLREDUCE, 1025, SYMMPIN_FLOAT32, SYMMPIN_SUM),
      symmpin_site_id(0x1234, 0, SYMMPIN_COLL_ALLREDUCE, 1024, SYMMPIN_BFLOAT16, SYMMPIN_SUM),
      symmpin_site_id(0x1234, 0, SYMMPIN_COLL_ALLREDUCE, 1024, SYMMPIN_FLOAT32, SYMMPIN_MAX),
      /* swapping two inputs' values must not collide */
      symmpin_site_id(0x1234, 0, SYMMPIN_COLL_ALLREDUCE, 1024, SYMMPIN_SUM, SYMMPIN_FLOAT32),
  };
  for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
    cr_assert_neq(variants[i], a, "variant %zu collides", i);
    for (size_t j = 0; j < i; j++) cr_assert_neq(variants[i], variants[j]);
  }
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

Test(site, id_no_collisions_over_a_grid) {
  /* 64 stacks x 4 comms x 64 counts x 12 dtypes x 5 ops: all distinct, none zero. */
  size_t n = 64 * 4 * 64 * 12 * 5, k = 0;
  uint64_t *ids = malloc(n * sizeof(*ids));
  for (uint64_t s = 0; s < 64; s++)
    for (int c = 0; c < 4; c++)
      for (uint64_t cnt = 1; cnt <= 64; cnt++)
        for (int d = 0; d < 12; d++)
          for (int o = 0; o < 5; o++)
            ids[k++] = symmpin_site_id(s * 0x9e37, c, SYMMPIN_COLL_ALLREDUCE, cnt * 256, d, o);
  qsort(ids, n, sizeof(*ids), cmp_u64);
  for (size_t i = 0; i < n; i++) {
    cr_assert_neq(ids[i], 0);
    if (i) cr_assert_neq(ids[i], ids[i - 1]);
  }
  free(ids);
}

Test(site, table_aggregates) {
  symmpin_site_table *t = symmpin_site_table_create(3);
  cr_assert_eq(symmpin_site_table_comm(t), 3);
  uint64_t A = 0xa, B = 0xb;
  for (uint64_t i = 0; i < 10; i++) {
    symmpin_site_call c = {.site = (i % 3 == 2) ? B : A, .count = (i % 3 == 2) ? 10 : 256,
                           .dtype = (i % 3 == 2) ? SYMMPIN_FLOAT64 : SYMMPIN_BFLOAT16,
                           .op = SYMMPIN_SUM, .stream_ord = (int)(i % 2),
                           .in_place = i < 4, .send_alloc = 1 + i % 10, .recv_alloc = 100,
                           .index = i};
    cr_assert_eq(symmpin_site_table_add(t, &c), SYMMPIN_OK);
  }
  cr_assert_eq(symmpin_site_table_count(t), 2);
  const symmpin_site *a = symmpin_site_table_at(t, 0), *b = symmpin_site_table_at(t, 1);
  cr_assert_eq(a->id, A);
  cr_assert_eq(b->id, B);
  cr_assert_eq(symmpin_site_table_find(t, B), b);
  cr_assert_null(symmpin_site_table_find(t, 0xc));
  /* A: calls 0,1,3,4,6,7,9 (7 calls); B: 2,5,8 */
  cr_assert_eq(a->calls, 7);
  cr_assert_eq(a->bytes, 7 * 256 * 2);
  cr_assert_eq(b->calls, 3);
  cr_assert_eq(b->bytes, 3 * 10 * 8);
  cr_assert_eq(a->in_place, 3); /* 0, 1, 3 */
  cr_assert_eq(a->out_of_place, 4);
  cr_assert_eq(a->streams, 0x3);
  cr_assert_eq(b->streams, 0x3); /* 2 -> 0, 5 -> 1, 8 -> 0 */
  cr_assert_eq(a->first_call, 0);
  cr_assert_eq(a->last_call, 9);
  cr_assert_eq(b->first_call, 2);
  cr_assert_eq(b->last_call, 8);
  cr_assert_eq(a->nrecv_allocs, 1);
  cr_assert_eq(a->recv_allocs[0], 100);
  cr_assert_eq(a->nsend_allocs, 7);
  cr_assert_not(a->allocs_overflow);
  cr_assert_eq(b->nsend_allocs, 3);
  cr_assert_eq(b->send_allocs[0], 3);
  symmpin_site_table_destroy(t);
}

Test(site, table_alloc_overflow) {
  symmpin_site_table *t = symmpin_site_table_create(0);
  for (uint64_t i = 0; i < SYMMPIN_SITE_MAX_ALLOCS + 3; i++) {
    symmpin_site_call c = {.site = 1, .count = 1, .send_alloc = i + 1, .recv_alloc = i + 1,
                           .index = i};
    symmpin_site_table_add(t, &c);
  }
  const symmpin_site *s = symmpin_site_table_find(t, 1);
  cr_assert_eq(s->nsend_allocs, SYMMPIN_SITE_MAX_ALLOCS);
  cr_assert(s->allocs_overflow);
  symmpin_site_table_destroy(t);
}

Test(record, groups_renumbered_and_blob_roundtrip) {
  symmpin_record r;
  symmpin_record_init(&r, 2, 1, 4, 100);
  /* tokens: none, 777, 777, none, 555, 555, 555, 777 (a later group that reuses a token) */
  uint64_t tokens[] = {0, 777, 777, 0, 555, 555, 555, 777};
  uint32_t want[] = {0, 1, 1, 0, 2, 2, 2, 3};
  for (int i = 0; i < 8; i++) {
    symmpin_call c = {.site = (uint64_t)i * 11 + 1,
                      .count = (uint64_t)i * 1000,
                      .dtype = i % 12,
                      .op = i % 5,
                      .coll = i % 3,
                      .stream_ord = i % 3 - 1,
                      .group = 99,
                      .in_place = i & 1,
                      .capturing = (i & 2) != 0,
                      .send_alloc = 5,
                      .recv_alloc = 6};
    cr_assert_eq(symmpin_record_append(&r, &c, tokens[i]), SYMMPIN_OK);
  }
  for (int i = 0; i < 8; i++) cr_assert_eq(r.calls[i].group, want[i], "call %d", i);
  cr_assert_eq(r.ngroups, 3);

  size_t need = symmpin_record_encoded_bytes(r.ncalls), len = 0;
  char small[16];
  cr_assert_eq(symmpin_record_encode(&r, small, sizeof(small), &len), SYMMPIN_ERR_INVALID);
  cr_assert_eq(len, need);
  char *blob = malloc(need);
  cr_assert_eq(symmpin_record_encode(&r, blob, need, &len), SYMMPIN_OK);
  symmpin_record d;
  cr_assert_eq(symmpin_record_decode(blob, len, &d), SYMMPIN_OK);
  cr_assert_eq(d.comm, 2);
  cr_assert_eq(d.rank, 1);
  cr_assert_eq(d.nranks, 4);
  cr_assert_eq(d.first_call, 100);
  cr_assert_eq(d.ncalls, 8);
  cr_assert_eq(d.ngroups, 3);
  for (int i = 0; i < 8; i++) {
    cr_assert_eq(d.calls[i].site, r.calls[i].site);
    cr_assert_eq(d.calls[i].count, r.calls[i].count);
    cr_assert_eq(d.calls[i].coll, r.calls[i].coll, "call %d's collective travels", i);
    cr_assert_eq(d.calls[i].dtype, r.calls[i].dtype);
    cr_assert_eq(d.calls[i].op, r.calls[i].op);
    cr_assert_eq(d.calls[i].stream_ord, r.calls[i].stream_ord);
    cr_assert_eq(d.calls[i].group, r.calls[i].group);
    cr_assert_eq(d.calls[i].in_place, r.calls[i].in_place);
    cr_assert_eq(d.calls[i].capturing, r.calls[i].capturing);
    cr_assert_eq(d.calls[i].send_alloc, 0); /* local facts stay local */
  }
  /* Corrupt blobs are refused. */
  symmpin_record e;
  cr_assert_eq(symmpin_record_decode(blob, len - 1, &e), SYMMPIN_ERR_INVALID);
  blob[0] ^= 1;
  cr_assert_eq(symmpin_record_decode(blob, len, &e), SYMMPIN_ERR_INVALID);
  free(blob);
  symmpin_record_free(&d);

  symmpin_record_restart(&r, 500);
  cr_assert_eq(r.ncalls, 0);
  cr_assert_eq(r.first_call, 500);
  symmpin_call c = {.site = 1};
  symmpin_record_append(&r, &c, 777);
  cr_assert_eq(r.calls[0].group, 1); /* numbering restarts with the record */
  symmpin_record_free(&r);
}

/* ---- locations for people ---- */

Test(site_where, format) {
  char buf[128];
  symmpin_site_where w = {"/opt/lib/libtorch_cuda.so", "_ZN4c10d9allreduceEv", 0x1a2b3c};
  cr_assert(symmpin_site_where_known(&w));
  cr_assert_eq(symmpin_site_where_format(&w, buf, sizeof buf), strlen(buf));
  cr_assert_str_eq(buf, "libtorch_cuda.so+0x1a2b3c (_ZN4c10d9allreduceEv)");
  w.symbol = NULL;
  symmpin_site_where_format(&w, buf, sizeof buf);
  cr_assert_str_eq(buf, "libtorch_cuda.so+0x1a2b3c");
  symmpin_site_where plain = {"prog", "main", 0x10}; /* no directory */
  symmpin_site_where_format(&plain, buf, sizeof buf);
  cr_assert_str_eq(buf, "prog+0x10 (main)");
  /* Unknown: nothing at all, so reports print nothing extra. */
  symmpin_site_where none = {NULL, "main", 0x10}, empty = {"", NULL, 0};
  cr_assert(!symmpin_site_where_known(&none) && !symmpin_site_where_known(&empty));
  cr_assert(!symmpin_site_where_known(NULL));
  strcpy(buf, "junk");
  cr_assert_eq(symmpin_site_where_format(&none, buf, sizeof buf), 0);
  cr_assert_str_eq(buf, "");
  cr_assert_eq(symmpin_site_where_format(NULL, buf, sizeof buf), 0);
}

Test(site_where, format_cuts_the_symbol) {
  symmpin_site_where w = {"/x/libfoo.so", "a_very_long_symbol_name_indeed", 0xff};
  char buf[32];
  size_t n = symmpin_site_where_format(&w, buf, sizeof buf);
  cr_assert_eq(n, sizeof buf - 1);
  cr_assert_eq(strlen(buf), n);
  cr_assert_str_eq(buf, "libfoo.so+0xff (a_very_long...)");
  /* Too small for any of the symbol: module and offset only. */
  char small[19];
  symmpin_site_where_format(&w, small, sizeof small);
  cr_assert_str_eq(small, "libfoo.so+0xff");
  char tiny[8];
  symmpin_site_where_format(&w, tiny, sizeof tiny);
  cr_assert_str_eq(tiny, "libfoo.");
}

/* The collective is part of a site's identity; an all-reduce's id is the recipe of before the
 * other collectives (traces, stats and plans keep their ids): recomputed here from it. */
Test(site, id_of_each_collective) {
  uint64_t h = 0x73796d6d70696e31ULL;
  h = symmpin_hash_combine(h, 0xabc);
  h = symmpin_hash_combine(h, (uint64_t)(int64_t)2);
  h = symmpin_hash_combine(h, 4096);
  h = symmpin_hash_combine(h, (uint64_t)(int64_t)SYMMPIN_FLOAT32);
  h = symmpin_hash_combine(h, (uint64_t)(int64_t)SYMMPIN_SUM);
  cr_expect_eq(
      symmpin_site_id(0xabc, 2, SYMMPIN_COLL_ALLREDUCE, 4096, SYMMPIN_FLOAT32, SYMMPIN_SUM),
      h ? h : 1, "the all-reduce's id is unchanged");
  uint64_t ar =
      symmpin_site_id(0xabc, 2, SYMMPIN_COLL_ALLREDUCE, 4096, SYMMPIN_FLOAT32, SYMMPIN_SUM);
  uint64_t ag =
      symmpin_site_id(0xabc, 2, SYMMPIN_COLL_ALLGATHER, 4096, SYMMPIN_FLOAT32, SYMMPIN_SUM);
  uint64_t rs =
      symmpin_site_id(0xabc, 2, SYMMPIN_COLL_REDUCESCATTER, 4096, SYMMPIN_FLOAT32, SYMMPIN_SUM);
  cr_expect(ar != ag && ag != rs && ar != rs, "one call site, three collectives: three sites");
  cr_expect_neq(ag, 0);
}
