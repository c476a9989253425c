/* preload's event handlers in-process (with the stand-ins of stand_ins.c for CUDA/NCCL queries
 * and the engine): the allocation-map glue, communicator keys and ordinals, site ids, stream
 * ordinals, the engine's inputs, the trace events produced and the statistics. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "planner/site.h"
#include "planner/trace.h"
#include "preload/comm.h"
#include "preload/config.h"
#include "preload/events.h"
#include "preload/preload.h"
#include "preload/stats.h"
#include "stand_ins.h"

static char dir[256];

/* A fresh preload with tracing into a new directory and statistics on. */
static void start(void) {
  snprintf(dir, sizeof dir, "/tmp/symmpin-events-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  symmpin_config cfg;
  const char *none[] = {NULL};
  (void)none;
  memset(&cfg, 0, sizeof cfg);
  cfg.debug = 1;
  cfg.warmup = 32;
  cfg.max_bytes = 1 << 20;
  cfg.timeout_ms = 1000;
  cfg.stack_depth = 1;
  cfg.stats = false;
  snprintf(cfg.stats_file, sizeof cfg.stats_file, "%s/stats.%%r.json", dir);
  snprintf(cfg.trace, sizeof cfg.trace, "%s/trace.%%r", dir);
  stand_in_take_count = (size_t)-1;
  stand_in_releases = 0;
  symmpin_preload_test_init(&cfg);
}

static void read_trace(symmpin_trace_file *tf, const char *name) {
  symmpin_preload_exit(); /* closes the trace */
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  cr_assert_eq(symmpin_trace_read(path, tf), SYMMPIN_OK, "%s", path);
}

static const symmpin_trace_event *nth(const symmpin_trace_file *tf, symmpin_trace_call call,
                                      size_t i) {
  for (size_t k = 0; k < tf->nevents; k++)
    if (tf->events[k].call == call && i-- == 0) return &tf->events[k];
  return NULL;
}

TestSuite(events, .init = start);

Test(events, allocation_map_glue) {
  symmpin_event_alloc(SYMMPIN_ALLOC_CUDA_MALLOC, (void *)0x10000, 4096, NULL, 77, 0);
  symmpin_event_alloc(SYMMPIN_ALLOC_NCCL_MEM, (void *)0x20000, 1024, NULL, 78, 0);
  symmpin_event_alloc(SYMMPIN_ALLOC_CUDA_MALLOC, (void *)0x30000, 64, NULL, 79, 2); /* failed */
  symmpin_allocmap *m = symmpin_preload_allocmap();
  cr_assert_eq(symmpin_allocmap_count(m), 2);
  symmpin_alloc a;
  cr_assert(symmpin_allocmap_lookup(m, 0x10000 + 4095, &a));
  cr_assert_eq(a.base, 0x10000);
  cr_assert_eq(a.kind, SYMMPIN_ALLOC_CUDA_MALLOC);
  cr_assert_eq(a.stack, 77);
  cr_assert(!symmpin_allocmap_lookup(m, 0x10000 + 4096, &a));
  cr_assert(symmpin_allocmap_lookup(m, 0x20010, &a));
  cr_assert_eq(a.kind, SYMMPIN_ALLOC_NCCL_MEM);
  /* Free: removed before the real call, whatever its result. */
  symmpin_event_free(SYMMPIN_ALLOC_CUDA_MALLOC, (void *)0x10000, NULL);
  symmpin_event_free_result(SYMMPIN_ALLOC_CUDA_MALLOC, (void *)0x10000, 0);
  cr_assert(!symmpin_allocmap_lookup(m, 0x10010, &a));
  symmpin_event_free(SYMMPIN_ALLOC_CUDA_MALLOC, NULL, NULL); /* cudaFree(NULL): nothing */
  symmpin_event_free_result(SYMMPIN_ALLOC_CUDA_MALLOC, NULL, 0);
  cr_assert_eq(symmpin_allocmap_count(m), 1);

  /* A process without a communicator writes no trace (docs/config.md); a failed init is the
   * first communicator too: the trace then opens with rank "u" at exit, and holds the
   * allocations before it. */
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, NULL, 1, 1, 0, 2, 0, true, 2);
  symmpin_trace_file tf;
  read_trace(&tf, "trace.u");
  cr_assert_eq(tf.nevents, 6);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_COMM_INIT_RANK, 0)->rc, 2);
  cr_assert_eq(tf.header.rank, -1);
  const symmpin_trace_event *e = nth(&tf, SYMMPIN_TRACE_CUDA_MALLOC, 0);
  cr_assert_eq(e->ptr, 0x10000);
  cr_assert_eq(e->size, 4096);
  cr_assert_eq(e->stack, 77);
  cr_assert_eq(e->alloc, 1);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_NCCL_MEM_ALLOC, 0)->alloc, 2);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_CUDA_MALLOC, 1)->rc, 2);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_CUDA_MALLOC, 1)->alloc, 0);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_CUDA_FREE, 0)->alloc, 1);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_CUDA_FREE, 1)->alloc, 0);
  symmpin_trace_file_free(&tf);
}

Test(events, allreduce_inputs_and_trace) {
  stand_in_device = 3;
  symmpin_event_alloc(SYMMPIN_ALLOC_CUDA_MALLOC, (void *)0x100000, 1 << 16, NULL, 1, 0);
  void *h = (void *)0xc0;
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, h, 11, 22, 2, 4, 3, true, 0);
  symmpin_comm *c = symmpin_comm_find(h);
  cr_assert_not_null(c);
  cr_assert_eq(c->key.hi, 11);
  cr_assert_eq(c->key.lo, 22);
  /* The kernels are loaded at the communicator's init, on its device, not at its first
   * all-reduce (issue 29, item 3). */
  cr_assert_eq(stand_in_prepares, 1);
  cr_assert_eq(stand_in_prepared_device, 3);

  symmpin_coll_call call = {.send = (void *)0x100040,
                            .recv = (void *)0x100400,
                            .count = 100,
                            .dtype = 7,
                            .op = 0,
                            .comm = h,
                            .stream = (void *)0x5,
                            .stack = 0xfeed};
  int rc = -1;
  cr_assert(!symmpin_event_collective(&call, &rc));
  symmpin_event_collective_result(&call, 0);
  /* What the engine saw. */
  cr_assert_eq(stand_in_last_call.site,
               symmpin_site_id(0xfeed, 0, SYMMPIN_COLL_ALLREDUCE, 100, 7, 0));
  cr_assert_eq(stand_in_last_call.stream_ord, 0);
  cr_assert_eq(stand_in_last_call.send_alloc, 1);
  cr_assert_eq(stand_in_last_call.recv_alloc, 1);
  cr_assert_eq(stand_in_last_call.group_depth, 0);
  cr_assert(!stand_in_last_call.capturing);
  cr_assert_eq(stand_in_last_index, 1);

  /* Second call: another stream, inside a group, capturing, outside known allocations; the
   * engine takes it (count 8) and its rc is what the wrapper returns. */
  symmpin_event_group_start(0);
  stand_in_capturing = 1;
  stand_in_take_count = 8;
  stand_in_take_rc = 0;
  symmpin_coll_call call2 = {.send = (void *)0x900000,
                             .recv = (void *)0x900000,
                             .count = 8,
                             .dtype = 9,
                             .op = 4,
                             .comm = h,
                             .stream = NULL,
                             .stack = 0xfeed};
  cr_assert(symmpin_event_collective(&call2, &rc));
  cr_assert_eq(rc, 0);
  symmpin_event_group_end(0);
  cr_assert_eq(stand_in_last_call.stream_ord, 1);
  cr_assert_eq(stand_in_last_call.group_depth, 1);
  cr_assert(stand_in_last_call.capturing);
  cr_assert_eq(stand_in_last_call.send_alloc, 0);
  cr_assert_eq(stand_in_last_index, 2);
  cr_assert_eq(symmpin_preload_group_depth(), 0);

  /* An unknown communicator never reaches the engine. */
  symmpin_coll_call call3 = {.send = (void *)0x100000,
                             .recv = (void *)0x100000,
                             .count = 4,
                             .dtype = 7,
                             .op = 0,
                             .comm = (void *)0xdead,
                             .stream = NULL,
                             .stack = 0xfeed};
  stand_in_last_index = 0;
  cr_assert(!symmpin_event_collective(&call3, &rc));
  symmpin_event_collective_result(&call3, 4);
  cr_assert_eq(stand_in_last_index, 0);

  symmpin_trace_file tf;
  read_trace(&tf, "trace.2");
  cr_assert_eq(tf.header.rank, 2);
  const symmpin_trace_event *a = nth(&tf, SYMMPIN_TRACE_ALL_REDUCE, 0);
  cr_assert_eq(a->comm, 0);
  cr_assert_eq(a->rank, 2);
  cr_assert_eq(a->nranks, 4);
  cr_assert_eq(a->device, 3);
  cr_assert_eq(a->send_alloc, 1);
  cr_assert_eq(a->send_off, 0x40);
  cr_assert_eq(a->recv_off, 0x400);
  cr_assert_eq(a->stream, 0x5);
  cr_assert_eq(a->path, SYMMPIN_PATH_NCCL);
  cr_assert_eq(a->reason, SYMMPIN_REASON_WARMUP);
  const symmpin_trace_event *b = nth(&tf, SYMMPIN_TRACE_ALL_REDUCE, 1);
  cr_assert_eq(b->path, SYMMPIN_PATH_SYMMPIN);
  cr_assert_eq(b->reason, SYMMPIN_REASON_NONE);
  cr_assert_eq(b->capturing, 1);
  cr_assert_eq(b->stream_ord, 1);
  cr_assert_eq(b->dtype, 9);
  cr_assert_eq(b->op, 4);
  const symmpin_trace_event *u = nth(&tf, SYMMPIN_TRACE_ALL_REDUCE, 2);
  cr_assert_eq(u->comm, -1);
  cr_assert_eq(u->reason, SYMMPIN_REASON_COMM);
  cr_assert_eq(u->rc, 4);
  cr_assert_eq(u->site, symmpin_site_id(0xfeed, -1, SYMMPIN_COLL_ALLREDUCE, 4, 7, 0));
  symmpin_trace_file_free(&tf);
}

Test(events, split_keys_and_lazy_ranks) {
  void *p0 = (void *)0x100, *p1 = (void *)0x200; /* two ranks of one parent in this process */
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, p0, 1, 2, 0, 2, 0, true, 0);
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, p1, 1, 2, 1, 2, 1, true, 0);
  uint64_t h0, l0, h1, l1, h2, l2, h3, l3;
  /* Both ranks' first split with color 5: the same key (every rank derives it alike). */
  symmpin_event_comm_split_key(p0, 5, &h0, &l0);
  symmpin_event_comm_init(SYMMPIN_COMM_SPLIT, (void *)0x300, h0, l0, -1, -1, 7, true, 0);
  symmpin_event_comm_split_key(p1, 5, &h1, &l1);
  symmpin_event_comm_init(SYMMPIN_COMM_SPLIT, (void *)0x400, h1, l1, -1, -1, 7, true, 0);
  cr_assert_eq(h0, h1);
  cr_assert_eq(l0, l1);
  /* The second split of the same parent with the same color: another key. Another color too. */
  symmpin_event_comm_split_key(p0, 5, &h2, &l2);
  symmpin_event_comm_init(SYMMPIN_COMM_SPLIT, NULL, h2, l2, -1, -1, 7, true, 0);
  symmpin_event_comm_split_key(p0, 6, &h3, &l3);
  symmpin_event_comm_init(SYMMPIN_COMM_SPLIT, NULL, h3, l3, -1, -1, 7, true, 0);
  cr_assert(h2 != h0 || l2 != l0);
  cr_assert(h3 != h2 || l3 != l2);

  symmpin_comm *s0 = symmpin_comm_find((void *)0x300), *s1 = symmpin_comm_find((void *)0x400);
  cr_assert_eq(s0->ordinal, 1);
  cr_assert_eq(s1->ordinal, 1);
  cr_assert_eq(s0->device, 0); /* the parent's device, not the current one */
  cr_assert_eq(s1->device, 1);
  cr_assert_eq(s0->rank, -1);

  /* A split of an unknown parent is left to NCCL: an entry that passes through, no ordinal (so
   * that a stale entry of its handle is replaced, never served). */
  symmpin_event_comm_split_key((void *)0x999, 1, &h2, &l2);
  symmpin_event_comm_init(SYMMPIN_COMM_SPLIT, (void *)0x500, h2, l2, -1, -1, 0, true, 0);
  symmpin_comm *unknown = symmpin_comm_find((void *)0x500);
  cr_assert_not_null(unknown);
  cr_assert_eq(unknown->ordinal, -1);
  cr_assert_not_null(unknown->passthrough);

  /* Rank learned at the first all-reduce that NCCL answers. */
  symmpin_coll_call call = {.send = (void *)0x1,
                            .recv = (void *)0x1,
                            .count = 4,
                            .dtype = 7,
                            .op = 0,
                            .comm = (void *)0x300,
                            .stream = NULL,
                            .stack = 1};
  int rc;
  stand_in_comm_rc = 7; /* ncclInProgress */
  symmpin_event_collective(&call, &rc);
  symmpin_event_collective_result(&call, 0);
  cr_assert_eq(s0->rank, -1);
  stand_in_comm_rc = 0;
  stand_in_comm_rank = 1;
  stand_in_comm_nranks = 2;
  symmpin_event_collective(&call, &rc);
  symmpin_event_collective_result(&call, 0);
  cr_assert_eq(s0->rank, 1);
  cr_assert_eq(s0->nranks, 2);

  /* Finalize keeps the entry; destroy removes it; the engine is released each time. */
  symmpin_event_comm_end(SYMMPIN_COMM_FINALIZE, (void *)0x300);
  symmpin_event_comm_end_result(SYMMPIN_COMM_FINALIZE, (void *)0x300, 0);
  cr_assert_eq(symmpin_comm_find((void *)0x300), s0);
  symmpin_event_comm_end(SYMMPIN_COMM_DESTROY, (void *)0x300);
  symmpin_event_comm_end_result(SYMMPIN_COMM_DESTROY, (void *)0x300, 0);
  cr_assert_null(symmpin_comm_find((void *)0x300));
  cr_assert_eq(stand_in_releases, 2);

  symmpin_trace_file tf;
  read_trace(&tf, "trace.0");
  cr_assert_eq(stand_in_releases, 5, "exit releases the three live comms");
  const symmpin_trace_event *sp = nth(&tf, SYMMPIN_TRACE_COMM_SPLIT, 0);
  cr_assert_eq(sp->comm, 1);
  cr_assert_eq(sp->parent, 0);
  cr_assert_eq(sp->color, 5);
  cr_assert_eq(sp->key_hi, h0);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_COMM_SPLIT, 2)->comm, -1);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_COMM_SPLIT, 4)->parent, -1);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_COMM_DESTROY, 0)->comm, 1);
  symmpin_trace_file_free(&tf);
}

Test(events, statistics) {
  void *h = (void *)0xc0;
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, h, 1, 1, 0, 2, 0, true, 0);
  symmpin_comm *c = symmpin_comm_find(h);
  cr_assert_not_null(c->stats);
  stand_in_take_count = 16;
  int rc;
  for (int i = 0; i < 5; i++) {
    symmpin_coll_call a = {.send = (void *)0x1,
                           .recv = (void *)0x1,
                           .count = i < 3 ? 16 : 32,
                           .dtype = 7,
                           .op = 0,
                           .comm = h,
                           .stream = NULL,
                           .stack = 42};
    if (!symmpin_event_collective(&a, &rc)) symmpin_event_collective_result(&a, 0);
  }
  uint64_t s16 = symmpin_site_id(42, 0, SYMMPIN_COLL_ALLREDUCE, 16, 7, 0),
           s32 = symmpin_site_id(42, 0, SYMMPIN_COLL_ALLREDUCE, 32, 7, 0);
  symmpin_stats_set_slot(c, s16, 4096, 512);
  symmpin_stats_set_pool(c, 1, 512, 512, 1 << 20);
  symmpin_stats_set_capture(c, 65536, 4096);
  symmpin_stats_site_view v;
  cr_assert(symmpin_stats_site_get(c->stats, s16, &v));
  cr_assert_eq(v.calls, 3);
  cr_assert_eq(v.redirected, 3);
  cr_assert_eq(v.nccl, 0);
  cr_assert_eq(v.bytes, 3 * 16 * 4);
  cr_assert(v.has_slot);
  cr_assert_eq(v.slot_offset, 4096);
  cr_assert(symmpin_stats_site_get(c->stats, s32, &v));
  cr_assert_eq(v.calls, 2);
  cr_assert_eq(v.nccl, 2);
  cr_assert_eq(v.reasons[SYMMPIN_REASON_WARMUP], 2);
  cr_assert(!v.has_slot);
  /* Timed calls (the engine's SYMMPIN_MEASURE samples): medians per path in the JSON. */
  symmpin_stats_record_time(c->stats, s16, false, 10.0);
  symmpin_stats_record_time(c->stats, s16, false, 14.0);
  symmpin_stats_record_time(c->stats, s16, true, 4.5);
  symmpin_stats_record_time(c->stats, s16, true, -1.0); /* not a time: ignored */
  cr_assert(symmpin_stats_site_get(c->stats, s16, &v));
  cr_assert_eq(v.timed[0], 2);
  cr_assert_eq(v.timed[1], 1);
  /* Sampling: a site's first SYMMPIN_STATS_TIMED_FIRST calls on each path, then one in
   * SYMMPIN_STATS_TIMED_EVERY of its calls; a site never seen is timed. */
  cr_assert(symmpin_stats_want_timing(c->stats, 0x5eed, true), "an unseen site");
  cr_assert(symmpin_stats_want_timing(c->stats, s16, true), "1 of 8 timings on symmpin");
  for (int i = 1; i < SYMMPIN_STATS_TIMED_FIRST; i++)
    symmpin_stats_record_time(c->stats, s16, true, 4.5);
  cr_assert(!symmpin_stats_want_timing(c->stats, s16, true), "8 timings, 3 calls: not now");
  cr_assert(symmpin_stats_want_timing(c->stats, s16, false), "still 2 of 8 on NCCL");
  for (int i = 0; i < SYMMPIN_STATS_TIMED_EVERY - 3; i++) {
    symmpin_coll_call a = {.send = (void *)0x1,
                           .recv = (void *)0x1,
                           .count = 16,
                           .dtype = 7,
                           .op = 0,
                           .comm = h,
                           .stream = NULL,
                           .stack = 42};
    if (!symmpin_event_collective(&a, &rc)) symmpin_event_collective_result(&a, 0);
  }
  cr_assert(symmpin_stats_want_timing(c->stats, s16, true), "the site's 16th call");
  cr_assert(!symmpin_stats_want_timing(NULL, s16, true), "no statistics: never");
  /* One slow call (as NCCL's first, which connects the peers) does not move the median. */
  symmpin_stats_record_time(c->stats, s16, true, 250000.0);
  cr_assert(symmpin_stats_site_get(c->stats, s16, &v));
  cr_assert_float_eq(symmpin_stats_median_us(&v, 1), 4.5, 1e-9, "median of eight 4.5s and one outlier");
  cr_assert_float_eq(symmpin_stats_median_us(&v, 0), 12.0, 1e-9, "median of 10 and 14");
  cr_assert_lt(symmpin_stats_median_us(&(symmpin_stats_site_view){0}, 0), 0.0, "no samples");
  cr_assert_lt(symmpin_stats_least_us(&(symmpin_stats_site_view){0}, 1), 0.0, "no samples");

  symmpin_preload_exit(); /* writes stats.0.json */
  char path[512];
  snprintf(path, sizeof path, "%s/stats.0.json", dir);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "%s", path);
  char json[8192];
  size_t n = fread(json, 1, sizeof json - 1, f);
  json[n] = '\0';
  fclose(f);
  cr_assert(strstr(json, "\"pool\": {\"planned_sites\": 1, \"dedicated_bytes\": 512, "
                         "\"lower_bound_bytes\": 512, \"pool_bytes\": 1048576, "
                         "\"capture_bytes\": 65536, \"capture_used_bytes\": 4096}"),
            "%s", json);
  cr_assert(strstr(json, "\"calls\": 16, \"bytes\": 1024, \"redirected\": 16, \"nccl\": 0, "
                         "\"reasons\": {}, \"slot\": {\"offset\": 4096, \"bytes\": 512}"),
            "%s", json);
  cr_assert(strstr(json, "\"reasons\": {\"warmup\": 2}"), "%s", json);
  cr_assert(strstr(json, "\"time_us\": {\"nccl\": 12.000, \"symmpin\": 4.500, \"nccl_least\": 10.000, "
                         "\"symmpin_least\": 4.500, \"samples\": [2, 9]}"),
            "%s", json);
  const char *first = strstr(json, "time_us");
  cr_assert(first && !strstr(first + 1, "time_us"), "only the timed site has time_us: %s", json);
}

Test(events, timing_keeps_the_latest_samples) {
  /* A site timed more than SYMMPIN_STATS_TIMED_KEEP times: the median is over the latest ones
   * (calls 9..40 of 1..40 here: median 24.5), so early warm-up times age out. */
  symmpin_stats_comm *sc = symmpin_stats_comm_open(7, 0, 2, 0);
  cr_assert_not_null(sc);
  for (int i = 1; i <= SYMMPIN_STATS_TIMED_KEEP + 8; i++)
    symmpin_stats_record_time(sc, 0xabc, false, (double)i);
  symmpin_stats_site_view v;
  cr_assert(symmpin_stats_site_get(sc, 0xabc, &v));
  cr_assert_eq(v.timed[0], SYMMPIN_STATS_TIMED_KEEP + 8);
  cr_assert_float_eq(symmpin_stats_median_us(&v, 0), 24.5, 1e-9);
  cr_assert_float_eq(symmpin_stats_least_us(&v, 0), 9.0, 1e-9, "1..8 aged out");
  cr_assert_lt(symmpin_stats_median_us(&v, 1), 0.0, "never timed on symmpin");
}

Test(events, no_communicator_no_trace) {
  /* Events, but never a communicator: at exit the buffered events are dropped, no file. */
  for (int i = 0; i < 10; i++)
    symmpin_event_alloc(SYMMPIN_ALLOC_CUDA_MALLOC, (void *)(uintptr_t)(0x1000000 + 256 * i), 256,
                        NULL, 1, 0);
  symmpin_preload_exit();
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  struct dirent *de;
  while ((de = readdir(d)))
    cr_assert(de->d_name[0] == '.', "%s/%s written without a communicator", dir, de->d_name);
  closedir(d);
}

Test(events, trace_keeps_the_buffer_before_the_first_communicator) {
  /* More events before the first communicator than the buffer holds: no file may open yet, so
   * those beyond the buffer are left out (the allocation map keeps them all); the communicator's
   * rank then opens the file with the buffered events, and every later event follows. */
  for (int i = 0; i < 5000; i++)
    symmpin_event_alloc(SYMMPIN_ALLOC_CUDA_MALLOC, (void *)(uintptr_t)(0x1000000 + 256 * i), 256,
                        NULL, 1, 0);
  cr_assert_eq(symmpin_allocmap_count(symmpin_preload_allocmap()), 5000);
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, (void *)0x100, 1, 1, 3, 4, 0, true, 0);
  symmpin_event_alloc(SYMMPIN_ALLOC_CUDA_MALLOC, (void *)0x9000000, 256, NULL, 1, 0);
  symmpin_trace_file tf;
  read_trace(&tf, "trace.3");
  cr_assert_eq(tf.nevents, 4096 + 2, "%zu events", tf.nevents);
  cr_assert_eq(tf.events[4095].alloc, 4096);
  cr_assert_eq(tf.events[4096].call, SYMMPIN_TRACE_COMM_INIT_RANK);
  cr_assert_eq(tf.events[4097].alloc, 5001);
  symmpin_trace_file_free(&tf);
}

Test(events, trace_opens_with_u_when_buffer_fills) {
  /* A communicator whose rank is not known yet (a split of a parent symmpin does not know), then
   * more events than the buffer holds: the file opens as rank u and keeps every event. */
  symmpin_event_comm_init(SYMMPIN_COMM_SPLIT, (void *)0x100, 1, 1, -1, -1, 0, true, 0);
  for (int i = 0; i < 5000; i++)
    symmpin_event_alloc(SYMMPIN_ALLOC_CUDA_MALLOC, (void *)(uintptr_t)(0x1000000 + 256 * i), 256,
                        NULL, 1, 0);
  symmpin_trace_file tf;
  read_trace(&tf, "trace.u");
  cr_assert_eq(tf.nevents, 5001);
  cr_assert_eq(tf.events[5000].alloc, 5000);
  symmpin_trace_file_free(&tf);
}

/* A forked child must never release the parent's communicators (their boards and pools are the
 * parent's), and is a pure pass-through. */
Test(events, forked_child_touches_nothing_of_the_parent) {
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, (void *)0xc0ffee, 1, 2, 0, 2, 0, true, 0);
  cr_assert_not_null(symmpin_comm_find((void *)0xc0ffee));
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    int bad = 0;
    if (symmpin_events_enabled()) bad |= 1;
    symmpin_preload_exit(); /* what the child's exit would run */
    if (stand_in_releases != 0) bad |= 2;
    int rc = 0;
    symmpin_coll_call call = {.send = (void *)1,
                              .recv = (void *)1,
                              .count = 8,
                              .dtype = 7,
                              .comm = (void *)0xc0ffee,
                              .stack = 1};
    if (symmpin_event_collective(&call, &rc)) bad |= 4;
    _exit(bad);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status));
  cr_assert_eq(WEXITSTATUS(status), 0, "child: 1 still enabled, 2 released, 4 took a call (%d)",
               WEXITSTATUS(status));
  /* The parent is untouched: its communicator is there and is released once, by the parent. */
  cr_assert(symmpin_events_enabled());
  cr_assert_not_null(symmpin_comm_find((void *)0xc0ffee));
  symmpin_preload_exit();
  cr_assert_eq(stand_in_releases, 1);
}

/* A symmpin kernel that gave up (the word a kernel sets in the host-mapped error record, faked
 * here) puts the communicator in error: ncclCommGetAsyncError reports ncclRemoteError and every
 * later all-reduce returns it without running anything, the failure logged once by the engine. An
 * abort the program asked for is not such an error. */
Test(events, a_kernel_that_gave_up_is_an_error_the_program_sees) {
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, (void *)0xe1, 3, 4, 0, 2, 0, true, 0);
  symmpin_comm *c = symmpin_comm_find((void *)0xe1);
  cr_assert_not_null(c);
  cr_assert_eq(symmpin_event_comm_async_error((void *)0xe1), 0);
  static volatile uint32_t gave_up;
  atomic_store(&c->kernel_failed, &gave_up);
  cr_assert_eq(symmpin_event_comm_async_error((void *)0xe1), 0, "nothing failed yet");
  stand_in_take_count = 8;
  int rc = -1;
  symmpin_coll_call call = {.send = (void *)1,
                            .recv = (void *)1,
                            .count = 8,
                            .dtype = 7,
                            .comm = (void *)0xe1,
                            .stack = 1};
  cr_assert(symmpin_event_collective(&call, &rc));
  cr_assert_eq(rc, 0);
  uint64_t calls_before = c->collectives;
  gave_up = 1;
  cr_assert_eq(symmpin_event_comm_async_error((void *)0xe1), SYMMPIN_NCCL_REMOTE_ERROR);
  call.count = 4; /* a call the (stand-in) engine would leave to NCCL: it must not run either */
  rc = -1;
  cr_assert(symmpin_event_collective(&call, &rc), "taken: NCCL must not pair it with a peer's");
  cr_assert_eq(rc, SYMMPIN_NCCL_REMOTE_ERROR);
  cr_assert_eq(c->collectives, calls_before, "the engine never saw it");
  cr_assert_eq(stand_in_failure_reports, 1);
  gave_up = 0; /* sticky: the error stays */
  cr_assert_eq(symmpin_event_comm_async_error((void *)0xe1), SYMMPIN_NCCL_REMOTE_ERROR);
}

/* A handle NCCL hands out again while symmpin still holds the old communicator (its end never
 * reached symmpin): the old engine state is released (its pool to its keep) before the new entry
 * replaces it. Before, the old pool was never released. */
Test(events, a_reused_handle_releases_the_old_communicators_engine) {
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, (void *)0xe9, 1, 2, 0, 2, 0, true, 0);
  symmpin_comm *old = symmpin_comm_find((void *)0xe9);
  cr_assert_not_null(old);
  int ordinal = old->ordinal;
  cr_assert_eq(stand_in_releases, 0);
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, (void *)0xe9, 3, 4, 1, 2, 0, true, 0);
  cr_expect_eq(stand_in_releases, 1, "the old communicator's engine was not released");
  symmpin_comm *c = symmpin_comm_find((void *)0xe9);
  cr_assert_not_null(c);
  cr_expect_neq(c->ordinal, ordinal, "the new communicator has an entry of its own");
  cr_expect_eq(c->rank, 1);
}

/* One owner of a communicator's failure (comm.h symmpin_comm_fail, NCCL's ncclCommSetAsyncError):
 * whichever way fails it first stands, and is what ncclCommGetAsyncError and every later
 * all-reduce report; a later failure of another kind changes nothing. Every way in tells the
 * communicator's kernels to stop (their calls no longer pair up): also a kernel that gave up, which
 * before set the error without the abort word, so this rank's other waiting kernels kept waiting.
 */
Test(events, the_first_failure_stands_and_stops_the_kernels) {
  void *h = (void *)0xe4;
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, h, 9, 10, 0, 2, 0, true, 0);
  symmpin_comm *c = symmpin_comm_find(h);
  cr_assert_not_null(c);
  static volatile uint32_t abort_word, gave_up;
  atomic_store(&c->kernel_abort, &abort_word);
  atomic_store(&c->kernel_failed, &gave_up);
  gave_up = 1; /* a kernel gave up waiting for a peer */
  cr_assert_eq(symmpin_event_comm_async_error(h), SYMMPIN_NCCL_REMOTE_ERROR);
  cr_expect_eq(abort_word, 1, "the communicator's other kernels were not told to stop");
  cr_expect_eq(symmpin_comm_fail(c, SYMMPIN_NCCL_UNHANDLED_CUDA_ERROR, "a later launch failure"),
               SYMMPIN_NCCL_REMOTE_ERROR, "the first failure stands");
  cr_expect_eq(symmpin_event_comm_async_error(h), SYMMPIN_NCCL_REMOTE_ERROR);
  stand_in_take_count = 8;
  int rc = -1;
  symmpin_coll_call call = {
      .send = (void *)1, .recv = (void *)1, .count = 8, .dtype = 7, .comm = h, .stack = 1};
  cr_assert(symmpin_event_collective(&call, &rc));
  cr_expect_eq(rc, SYMMPIN_NCCL_REMOTE_ERROR);

  /* The other order: a launch failure first; a kernel giving up afterwards does not replace it. */
  void *h2 = (void *)0xe5;
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, h2, 11, 12, 0, 2, 0, true, 0);
  symmpin_comm *c2 = symmpin_comm_find(h2);
  static volatile uint32_t abort2, gave_up2;
  atomic_store(&c2->kernel_abort, &abort2);
  atomic_store(&c2->kernel_failed, &gave_up2);
  cr_expect_eq(symmpin_comm_fail(c2, SYMMPIN_NCCL_UNHANDLED_CUDA_ERROR, "a launch failed"),
               SYMMPIN_NCCL_UNHANDLED_CUDA_ERROR);
  cr_expect_eq(abort2, 1);
  gave_up2 = 1;
  cr_expect_eq(symmpin_event_comm_async_error(h2), SYMMPIN_NCCL_UNHANDLED_CUDA_ERROR);
}

Test(events, an_abort_is_not_reported_as_an_error) {
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, (void *)0xe2, 5, 6, 0, 2, 0, true, 0);
  symmpin_comm *c = symmpin_comm_find((void *)0xe2);
  static volatile uint32_t gave_up = 1;
  atomic_store(&c->kernel_failed, &gave_up);
  atomic_store(&c->aborting, 1);
  cr_assert_eq(symmpin_event_comm_async_error((void *)0xe2), 0);
}

static void *hold_lock(void *arg) {
  symmpin_comm *c = arg;
  pthread_mutex_lock(&c->lock);
  usleep(300 * 1000); /* a thread stuck inside symmpin */
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

static void *abort_comm(void *arg) {
  symmpin_event_comm_end(SYMMPIN_COMM_ABORT, arg);
  return NULL;
}

/* ncclCommAbort tells the kernels to stop before it waits for the communicator's lock, which a
 * thread blocked inside symmpin may hold. */
Test(events, abort_reaches_the_kernels_without_the_lock) {
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, (void *)0xe3, 7, 8, 0, 2, 0, true, 0);
  symmpin_comm *c = symmpin_comm_find((void *)0xe3);
  static volatile uint32_t kernel_word;
  atomic_store(&c->kernel_abort, &kernel_word);
  pthread_t holder, aborter;
  cr_assert_eq(pthread_create(&holder, NULL, hold_lock, c), 0);
  usleep(50 * 1000);
  cr_assert_eq(pthread_create(&aborter, NULL, abort_comm, (void *)0xe3), 0);
  for (int i = 0; i < 100 && !kernel_word; i++) usleep(1000);
  cr_assert_eq(kernel_word, 1, "the kernels were told while another thread held the lock");
  cr_assert(atomic_load(&c->aborting));
  pthread_join(holder, NULL);
  pthread_join(aborter, NULL);
  cr_assert_eq(stand_in_releases, 1, "then the engine state was abandoned");
}

/* Inside a group the engine may hold the calls it takes; the outermost group end (before the real
 * ncclGroupEnd) has it launch them, once, and reports a failure as ncclGroupEnd's result. Inner
 * group ends launch nothing. Outside a group nothing is held. (The engine is a stand-in here:
 * tests/preload/test_engine.c holds and launches with the real one.) */
Test(events, a_group_launches_the_calls_held_at_its_outermost_end) {
  void *h = (void *)0xc4;
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, h, 17, 29, 2, 0, 0, true, 0);
  stand_in_take_count = 8;
  stand_in_take_rc = 0;
  stand_in_hold = true;
  stand_in_flushes = 0;
  symmpin_coll_call call = {.send = (void *)0x900000,
                            .recv = (void *)0x900000,
                            .count = 8,
                            .dtype = 9,
                            .op = 4,
                            .comm = h,
                            .stream = NULL,
                            .stack = 0xfeed};
  int rc = -1;
  cr_assert(symmpin_event_collective(&call, &rc));
  cr_assert_not(stand_in_last_call.may_batch, "outside a group");
  cr_assert_eq(symmpin_event_group_flush(), 0);
  cr_assert_eq(stand_in_flushes, 0);
  symmpin_event_group_start(0);
  symmpin_event_group_start(0);
  for (int i = 0; i < 3; i++) {
    cr_assert(symmpin_event_collective(&call, &rc));
    cr_assert(stand_in_last_call.may_batch && stand_in_last_call.batched);
  }
  cr_assert_eq(symmpin_event_group_flush(), 0, "an inner end");
  symmpin_event_group_end(0);
  cr_assert_eq(stand_in_flushes, 0, "an inner end launches nothing");
  stand_in_flush_rc = 1; /* ncclUnhandledCudaError */
  cr_assert_eq(symmpin_event_group_flush(), 1);
  symmpin_event_group_end(0);
  cr_assert_eq(stand_in_flushes, 1);
  cr_assert_eq(symmpin_event_group_flush(), 0, "nothing held any more");
  stand_in_flush_rc = 0;
  stand_in_hold = false;
}

/* A group is timed from its first call to after the real ncclGroupEnd (choice.h): an engine that
 * asks for the group's end is told once, at the outermost end, after the launch of what it held
 * (flush) and with ncclGroupEnd's result, also when it held nothing (its calls went to NCCL).
 * Before, only engines holding calls were kept, and nothing followed the real end. */
Test(events, an_engine_that_asks_is_told_the_outermost_group_end) {
  void *h = (void *)0xcd;
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, h, 23, 37, 2, 0, 0, true, 0);
  stand_in_take_count = 8;
  stand_in_hold = false;
  stand_in_want_group_end = true;
  stand_in_group_ends = 0;
  symmpin_coll_call nccl_call = {.send = (void *)0x900000,
                                 .recv = (void *)0x900000,
                                 .count = 16,
                                 .dtype = 9,
                                 .op = 4,
                                 .comm = h,
                                 .stream = NULL,
                                 .stack = 0xfeed};
  int rc = -1;
  cr_assert_not(symmpin_event_collective(&nccl_call, &rc), "outside a group");
  cr_assert_not(stand_in_last_call.group_end, "outside a group nothing is asked");
  symmpin_event_collective_result(&nccl_call, 0);
  symmpin_event_group_start(0);
  symmpin_event_group_start(0);
  for (int i = 0; i < 2; i++) {
    cr_assert_not(symmpin_event_collective(&nccl_call, &rc), "NCCL takes it");
    cr_assert(stand_in_last_call.group_end);
    symmpin_event_collective_result(&nccl_call, 0);
  }
  cr_assert_eq(symmpin_event_group_flush(), 0);
  symmpin_event_group_end(0);
  cr_assert_eq(stand_in_group_ends, 0, "an inner end");
  cr_assert_eq(symmpin_event_group_flush(), 0);
  cr_assert_eq(stand_in_group_ends, 0, "not before the real end");
  symmpin_event_group_end(3);
  cr_assert_eq(stand_in_group_ends, 1, "once, after the real outermost end");
  cr_assert_eq(stand_in_group_end_rc, 3, "with its result");
  symmpin_event_group_start(0);
  symmpin_event_group_end(0);
  cr_assert_eq(stand_in_group_ends, 1, "a later group without calls tells nobody");
  stand_in_want_group_end = false;
}

/* The watch thread checks every communicator on its own (SYMMPIN_WATCH_MS), so that a rank blocked
 * behind a divergent call learns of it with no call or query of the program: the (stand-in)
 * engine's poll runs without any call being made, and stops with the preload. */
Test(events, the_watch_polls_every_communicator_without_any_call) {
  symmpin_config cfg = *symmpin_config_get();
  cfg.watch_ms = 10;
  symmpin_preload_test_init(&cfg);
  stand_in_polls = 0;
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, (void *)0xc8, 41, 43, 2, 0, 0, true, 0);
  for (int i = 0; i < 200 && stand_in_polls < 3; i++) usleep(10000);
  cr_assert_geq(stand_in_polls, 3, "polls in 2 s: %d", stand_in_polls);
  symmpin_preload_exit();
  int after = stand_in_polls;
  usleep(50000);
  cr_assert_eq(stand_in_polls, after, "the watch stopped with the preload");
}

/* The watch frees what ended communicators left to their kernels, also once none is left (the
 * last communicator's pool must not stay until exit). */
Test(events, the_watch_drains_ended_communicators_when_none_is_left) {
  symmpin_config cfg = *symmpin_config_get();
  cfg.watch_ms = 10;
  symmpin_preload_test_init(&cfg);
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, (void *)0xc9, 45, 47, 0, 2, 0, true, 0);
  symmpin_event_comm_end(SYMMPIN_COMM_DESTROY, (void *)0xc9);
  symmpin_event_comm_end_result(SYMMPIN_COMM_DESTROY, (void *)0xc9, 0);
  cr_assert_null(symmpin_comm_find((void *)0xc9), "the communicator is gone");
  stand_in_drains = 0;
  for (int i = 0; i < 200 && stand_in_drains < 3; i++) usleep(10000);
  cr_assert_geq(stand_in_drains, 3, "drains in 2 s with no communicator left: %d", stand_in_drains);
  symmpin_preload_exit();
}

/* ncclGroupSimulateEnd runs nothing of the group: the held calls are dropped, never launched, and
 * the thread leaves the group (a later group launches its own at its end). */
Test(events, a_simulated_group_end_drops_the_held_calls) {
  void *h = (void *)0xcc;
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, h, 19, 31, 2, 0, 0, true, 0);
  stand_in_take_count = 8;
  stand_in_take_rc = 0;
  stand_in_hold = true;
  stand_in_flushes = stand_in_drops = 0;
  symmpin_coll_call call = {.send = (void *)0x900000,
                            .recv = (void *)0x900000,
                            .count = 8,
                            .dtype = 9,
                            .op = 4,
                            .comm = h,
                            .stream = NULL,
                            .stack = 0xfeed};
  int rc = -1;
  symmpin_event_group_start(0);
  cr_assert(symmpin_event_collective(&call, &rc) && stand_in_last_call.batched);
  symmpin_event_group_drop();
  symmpin_event_group_end(0);
  cr_assert_eq(stand_in_drops, 1);
  cr_assert_eq(symmpin_preload_group_depth(), 0);
  symmpin_event_group_start(0);
  cr_assert(symmpin_event_collective(&call, &rc) && stand_in_last_call.batched);
  cr_assert_eq(symmpin_event_group_flush(), 0);
  symmpin_event_group_end(0);
  cr_assert_eq(stand_in_flushes, 1, "the next group launches at its end");
  cr_assert_eq(stand_in_drops, 1);
  stand_in_hold = false;
}

/* ---- the calls of NCCL 2.27-2.29 that change a communicator's life (events.h) ---- */

static int taken_by_engine(void *h, size_t count) {
  symmpin_coll_call call = {
      .send = (void *)1, .recv = (void *)1, .count = count, .dtype = 7, .comm = h, .stack = 1};
  int rc = -1;
  stand_in_take_count = count;
  uint64_t before = stand_in_last_index;
  stand_in_last_index = 0;
  bool taken = symmpin_event_collective(&call, &rc);
  if (!taken) symmpin_event_collective_result(&call, 0);
  bool seen = stand_in_last_index != 0;
  stand_in_last_index = before;
  return taken ? 2 : seen ? 1 : 0; /* 2 taken, 1 the engine saw it, 0 it never did */
}

/* ncclCommRevoke stops NCCL's in-flight operations first thing: symmpin's kernels of that
 * communicator are told to stop too, before anything waits (abort word, aborting), the engine is
 * abandoned (its pool goes once they have given up), and from then on NCCL answers every call
 * (the engine never sees one again). An abort is no error of symmpin's. */
Test(events, a_revoke_stops_the_kernels_and_leaves_the_communicator_to_nccl) {
  void *h = (void *)0xd1;
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, h, 51, 52, 0, 2, 0, true, 0);
  symmpin_comm *c = symmpin_comm_find(h);
  static volatile uint32_t abort_word;
  atomic_store(&c->kernel_abort, &abort_word);
  cr_assert_eq(taken_by_engine(h, 8), 2, "redirected before the revoke");
  symmpin_event_comm_life(SYMMPIN_COMM_REVOKE, h, true);
  cr_expect_eq(abort_word, 1, "the kernels were not told to stop");
  cr_expect(atomic_load(&c->aborting), "the agreement's waits were not told to stop");
  cr_expect_eq(stand_in_releases, 1, "the engine was not let go");
  symmpin_event_comm_life_result(SYMMPIN_COMM_REVOKE, h, 0);
  cr_expect_eq(taken_by_engine(h, 8), 0, "a revoked communicator's call reached the engine");
  cr_expect_eq(symmpin_event_comm_async_error(h), 0);
  /* Its end later: nothing more to let go. */
  symmpin_event_comm_end(SYMMPIN_COMM_DESTROY, h);
  symmpin_event_comm_end_result(SYMMPIN_COMM_DESTROY, h, 0);
  cr_expect_null(symmpin_comm_find(h));
}

/* A revoke NCCL would refuse for its flags changes nothing; one NCCL refuses after symmpin had
 * stopped the kernels (NCCL refuses a valid revoke only when it is broken) is an error the program
 * sees, instead of calls whose kernels gave up; a communicator that ended already (finalized: its
 * kernels were left to finish) is not stopped. */
Test(events, a_revoke_nccl_refuses_is_an_error_or_changes_nothing) {
  void *h = (void *)0xd2;
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, h, 53, 54, 0, 2, 0, true, 0);
  symmpin_comm *c = symmpin_comm_find(h);
  static volatile uint32_t abort_word;
  atomic_store(&c->kernel_abort, &abort_word);
  symmpin_event_comm_life(SYMMPIN_COMM_REVOKE, h, false);
  symmpin_event_comm_life_result(SYMMPIN_COMM_REVOKE, h, 4 /* ncclInvalidArgument */);
  cr_expect_eq(abort_word, 0);
  cr_expect_eq(taken_by_engine(h, 8), 2, "still redirected");
  symmpin_event_comm_life(SYMMPIN_COMM_REVOKE, h, true);
  symmpin_event_comm_life_result(SYMMPIN_COMM_REVOKE, h, 3 /* ncclInternalError */);
  cr_expect_eq(symmpin_event_comm_async_error(h), SYMMPIN_NCCL_REMOTE_ERROR);

  void *f = (void *)0xd3;
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, f, 55, 56, 0, 2, 0, true, 0);
  symmpin_comm *cf = symmpin_comm_find(f);
  static volatile uint32_t abort_f;
  atomic_store(&cf->kernel_abort, &abort_f);
  symmpin_event_comm_end(SYMMPIN_COMM_FINALIZE, f);
  symmpin_event_comm_end_result(SYMMPIN_COMM_FINALIZE, f, 0);
  symmpin_event_comm_life(SYMMPIN_COMM_REVOKE, f, true);
  symmpin_event_comm_life_result(SYMMPIN_COMM_REVOKE, f, 4);
  cr_expect_eq(abort_f, 0, "a finalized communicator's kernels were stopped");
  cr_expect_eq(symmpin_event_comm_async_error(f), 0);
}

/* ncclCommSuspend(NCCL_SUSPEND_MEM) waits for the device in NCCL, on every rank: symmpin's kernels
 * are let finish (no abort word), the engine is let go and its pool drained once NCCL returns,
 * and the communicator stays with NCCL for good, resumed or not. A suspend without that flag
 * suspends nothing. */
Test(events, a_suspend_lets_the_kernels_finish_and_leaves_the_communicator_to_nccl) {
  void *h = (void *)0xd4;
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, h, 57, 58, 0, 2, 0, true, 0);
  symmpin_comm *c = symmpin_comm_find(h);
  static volatile uint32_t abort_word;
  atomic_store(&c->kernel_abort, &abort_word);
  symmpin_event_comm_life(SYMMPIN_COMM_SUSPEND, h, false);
  symmpin_event_comm_life_result(SYMMPIN_COMM_SUSPEND, h, 0);
  cr_expect_eq(taken_by_engine(h, 8), 2, "a suspend without NCCL_SUSPEND_MEM changed something");
  stand_in_drains = 0;
  symmpin_event_comm_life(SYMMPIN_COMM_SUSPEND, h, true);
  cr_expect_eq(stand_in_releases, 1);
  cr_expect_eq(abort_word, 0, "a suspend stopped kernels NCCL lets finish");
  cr_expect(!atomic_load(&c->aborting));
  symmpin_event_comm_life_result(SYMMPIN_COMM_SUSPEND, h, 0);
  cr_expect_geq(stand_in_drains, 1, "the pool was not drained after NCCL's suspend");
  cr_expect_eq(taken_by_engine(h, 8), 0);
  symmpin_event_comm_life(SYMMPIN_COMM_RESUME, h, true);
  symmpin_event_comm_life_result(SYMMPIN_COMM_RESUME, h, 0);
  cr_expect_eq(taken_by_engine(h, 8), 0, "resumed into symmpin");
  cr_expect_eq(stand_in_releases, 1);
}

/* Children of ncclCommShrink and ncclCommGrow pass through from the start: an entry without an
 * ordinal (the served communicators' ordinals stay the same on every rank, whether or not a rank
 * made the child), never an engine, and a split of one passes through too. A stale entry of a
 * reused handle is replaced, never served. NCCL_SHRINK_ABORT stops the parent's kernels and
 * leaves the parent to NCCL. */
Test(events, children_of_shrink_and_grow_pass_through) {
  void *parent = (void *)0xd5, *child = (void *)0xd6, *grown = (void *)0xd7;
  void *split = (void *)0xd8;
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, parent, 61, 62, 1, 4, 2, true, 0);
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, child, 63, 64, 0, 2, 0, true, 0); /* stale */
  symmpin_comm *p = symmpin_comm_find(parent);
  int next_ordinal = symmpin_comm_find(child)->ordinal + 1;
  stand_in_releases = 0;
  symmpin_event_comm_child(SYMMPIN_COMM_SHRINK, parent, child, 0, true, 0);
  cr_expect_eq(stand_in_releases, 1, "the stale entry of the reused handle was not let go");
  symmpin_comm *c = symmpin_comm_find(child);
  cr_assert_not_null(c);
  cr_expect_eq(c->ordinal, -1);
  cr_expect_eq(c->device, 2, "the parent's device");
  cr_expect_not_null(c->passthrough);
  stand_in_comm_rank = 0;
  stand_in_comm_nranks = 3;
  cr_expect_eq(taken_by_engine(child, 8), 0, "a child of Shrink reached the engine");
  cr_expect_eq(c->nranks, 3, "its size is still learned (statistics)");

  uint64_t hi, lo;
  symmpin_event_comm_split_key(child, 0, &hi, &lo);
  symmpin_event_comm_init(SYMMPIN_COMM_SPLIT, split, hi, lo, -1, -1, 0, true, 0);
  symmpin_comm *s = symmpin_comm_find(split);
  cr_assert_not_null(s);
  cr_expect_eq(s->ordinal, -1);
  cr_expect_eq(taken_by_engine(split, 8), 0, "a split of a child reached the engine");

  symmpin_event_comm_child(SYMMPIN_COMM_GROW, NULL, grown, 1, true, 0);
  cr_expect_eq(symmpin_comm_find(grown)->ordinal, -1);
  cr_expect_eq(taken_by_engine(grown, 8), 0, "a child of Grow reached the engine");
  /* None of them took an ordinal: the next communicator symmpin serves gets the next one. */
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, (void *)0xd9, 65, 66, 0, 2, 0, true, 0);
  cr_expect_eq(symmpin_comm_find((void *)0xd9)->ordinal, next_ordinal);

  static volatile uint32_t parent_abort;
  atomic_store(&p->kernel_abort, &parent_abort);
  cr_expect_eq(taken_by_engine(parent, 8), 2);
  symmpin_event_comm_life(SYMMPIN_COMM_SHRINK_ABORT, parent, true);
  symmpin_event_comm_life_result(SYMMPIN_COMM_SHRINK_ABORT, parent, 0);
  cr_expect_eq(parent_abort, 1, "NCCL_SHRINK_ABORT did not stop the parent's kernels");
  cr_expect_eq(taken_by_engine(parent, 8), 0);
}
