/* Sizes read from files and from peers are bounded (planner/trace.h, planner/replay.c,
 * planner/record.c): tiny forged inputs that made the replay allocate gigabytes or loop for
 * minutes (a 105-byte trace with nranks=2000000000 took 15.6 GB and 2 minutes) are refused at
 * once with a WARN naming the line and the value. Each replay runs in a child under a 1 GiB
 * address-space limit and a 20 s alarm, so that a reader without the bounds fails the test fast
 * instead of swapping or hanging the suite. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "planner/record.h"
#include "planner/replay.h"
#include "planner/schedule.h"
#include "planner/trace.h"

/* AddressSanitizer reserves terabytes of address space for its shadow memory, so no process of an
 * ASan build can live under an address-space limit; there, ASan's own allocator refuses the huge
 * allocations of a reader without the bounds (the child crashes: still a failure). */
#if defined(__SANITIZE_ADDRESS__)
#define SYMMPIN_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SYMMPIN_TEST_ASAN 1
#endif
#endif

/* FAKE kernels binding (the library's is agree/'s symmpin_agree_kernels): any sizes will do. */
static size_t slot_bytes(int coll, size_t count, int dtype, int nranks, void *ctx) {
  (void)ctx, (void)coll;
  return (count * symmpin_dtype_size(dtype) * (size_t)(nranks > 0 ? nranks : 1) + 255) / 256 * 256;
}
static bool supports(int coll, int dtype, int op, void *ctx) {
  (void)ctx, (void)coll;
  return dtype >= 0 && dtype < SYMMPIN_DTYPE_COUNT && op >= 0 && op < SYMMPIN_OP_COUNT;
}
static int slot_class(int coll, size_t count, int dtype, int nranks) {
  (void)coll, (void)count, (void)dtype, (void)nranks;
  return 0;
}
static const char *class_name(int k) { return k == 0 ? "one" : NULL; }
static const symmpin_plan_kernels kernels = {.slot_bytes = slot_bytes,
                                             .supports = supports,
                                             .slot_class = slot_class,
                                             .nclasses = 1,
                                             .class_name = class_name};

static char path[64];

static void write_trace(const char *body) {
  snprintf(path, sizeof path, "/tmp/symmpin-bounds-XXXXXX");
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  FILE *f = fdopen(fd, "w");
  fprintf(f, "#symmpin-trace 1\n#host=h\n#pid=1\n#rank=0\n%s", body);
  fclose(f);
}

/* symmpin_replay_run on `path` in a child with 1 GiB of address space and 20 s: its status, or
 * -1 if it was killed (out of time, or a crash). */
static int replay_bounded(void) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
#ifndef SYMMPIN_TEST_ASAN
    struct rlimit as = {1ull << 30, 1ull << 30};
    setrlimit(RLIMIT_AS, &as);
#endif
    alarm(20);
    FILE *out = fopen("/dev/null", "w");
    const char *paths[] = {path};
    symmpin_replay_options o = {.mode = SYMMPIN_PLAN_SHARED, .kernels = &kernels};
    _exit((int)symmpin_replay_run(paths, 1, &o, out) & 0xff);
  }
  int status;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void expect_refused(const char *body, const char *what) {
  write_trace(body);
  symmpin_trace_file tf;
  cr_expect_eq(symmpin_trace_read(path, &tf), SYMMPIN_ERR_INVALID, "%s: the reader took it", what);
  int st = replay_bounded();
  cr_expect_eq(st, (int)SYMMPIN_ERR_INVALID & 0xff,
               "%s: the replay ended with %d (-1: killed "
               "after 20 s or out of memory; %d: out of memory)",
               what, st, (int)SYMMPIN_ERR_NOMEM & 0xff);
  unlink(path);
}

#define INIT "1 0 1 ncclCommInitRank rc=0 dev=0 comm=0 key_hi=0x1 key_lo=0x2 rank=0 nranks=2\n"
#define AR                                                                                         \
  "2 0 1 ncclAllReduce rc=0 dev=0 comm=0 rank=0 nranks=2 site=0x5 count=8 dtype=f32 "              \
  "op=sum stream_ord=0 path=0 reason=2\n"

Test(bounds, a_forged_rank_count_is_refused_at_once) {
  expect_refused("1 0 1 ncclCommInitRank rc=0 dev=0 comm=0 key_hi=0x1 key_lo=0x2 rank=0 "
                 "nranks=2000000000\n",
                 "nranks of an init");
  expect_refused(INIT "2 0 1 ncclAllReduce rc=0 dev=0 comm=0 rank=0 nranks=2000000000 site=0x5 "
                      "count=8 dtype=f32 op=sum stream_ord=0\n",
                 "nranks of an all-reduce");
  expect_refused("1 0 1 ncclCommInitRank rc=0 dev=0 comm=0 key_hi=0x1 key_lo=0x2 "
                 "rank=2000000000 nranks=-1\n",
                 "rank");
  expect_refused("1 0 1 ncclCommInitRank rc=0 dev=0 comm=-7 key_hi=0x1 key_lo=0x2 rank=0 "
                 "nranks=2\n",
                 "a communicator ordinal");
}

Test(bounds, a_forged_stream_ordinal_or_count_is_refused) {
  /* stream_ord * kernel classes overflowed an int (the sharing class); counts past 2^48. */
  expect_refused(INIT "2 0 1 ncclAllReduce rc=0 dev=0 comm=0 rank=0 nranks=2 site=0x5 count=8 "
                      "dtype=f32 op=sum stream_ord=2147483647\n",
                 "stream_ord");
  expect_refused(INIT "2 0 1 ncclAllReduce rc=0 dev=0 comm=0 rank=0 nranks=2 site=0x5 "
                      "count=1152921504606846976 dtype=f32 op=sum stream_ord=0\n",
                 "count");
}

Test(bounds, the_largest_values_a_trace_may_hold_still_replay) {
  char body[1024];
  snprintf(body, sizeof body,
           "1 0 1 ncclCommInitRank rc=0 dev=0 comm=0 key_hi=0x1 key_lo=0x2 rank=%d nranks=%d\n"
           "2 0 1 ncclAllReduce rc=0 dev=0 comm=0 rank=%d nranks=%d site=0x5 count=%llu "
           "dtype=f32 op=sum stream_ord=%d\n",
           SYMMPIN_TRACE_MAX_RANKS - 1, SYMMPIN_TRACE_MAX_RANKS, SYMMPIN_TRACE_MAX_RANKS - 1,
           SYMMPIN_TRACE_MAX_RANKS, (unsigned long long)SYMMPIN_TRACE_MAX_COUNT,
           SYMMPIN_TRACE_MAX_STREAM_ORD);
  write_trace(body);
  symmpin_trace_file tf;
  cr_assert_eq(symmpin_trace_read(path, &tf), SYMMPIN_OK);
  cr_expect_eq(tf.nevents, 2);
  symmpin_trace_file_free(&tf);
  cr_expect_eq(replay_bounded(), 0, "a trace at the bounds is replayed (in little memory)");
  unlink(path);
}

/* Lookups in the replay are linear in communicators and in threads: a trace of a few hundred KB
 * naming thousands of them is refused rather than replayed for hours. */
Test(bounds, too_many_communicators_or_threads_are_refused) {
  size_t cap = 1u << 20, n = 0;
  char *body = malloc(cap);
  for (int i = 0; i < 4200; i++)
    n += (size_t)snprintf(body + n, cap - n,
                          "%d 0 1 ncclCommInitRank rc=0 dev=0 comm=%d key_hi=0x%x key_lo=0x1 "
                          "rank=0 nranks=2\n",
                          i + 1, i, i + 1);
  write_trace(body);
  cr_expect_eq(replay_bounded(), (int)SYMMPIN_ERR_INVALID & 0xff, "4200 communicators");
  unlink(path);
  n = 0;
  for (int i = 0; i < 4200; i++)
    n += (size_t)snprintf(body + n, cap - n, "%d 0 %d ncclGroupStart rc=0 depth=1\n", i + 1, i + 1);
  write_trace(body);
  cr_expect_eq(replay_bounded(), (int)SYMMPIN_ERR_INVALID & 0xff, "4200 threads");
  unlink(path);
  free(body);
}

/* A peer's record blob (a board is another process's word): never more calls than a rank
 * records, whatever its length says. */
Test(bounds, a_record_blob_with_more_calls_than_a_rank_records_is_refused) {
  symmpin_record r;
  symmpin_record_init(&r, 0, 0, 2, 0);
  for (uint32_t i = 0; i < SYMMPIN_RECORD_MAX_CALLS + 1; i++) {
    symmpin_call c = {.site = i + 1, .count = 8, .dtype = 7, .stream_ord = 0};
    cr_assert_eq(symmpin_record_append(&r, &c, 0), SYMMPIN_OK);
  }
  size_t need = symmpin_record_encoded_bytes(r.ncalls), len = 0;
  void *blob = malloc(need);
  cr_assert_eq(symmpin_record_encode(&r, blob, need, &len), SYMMPIN_OK);
  symmpin_record back;
  cr_expect_eq(symmpin_record_decode(blob, len, &back), SYMMPIN_ERR_INVALID);
  symmpin_record_free(&r);
  free(blob);
}
