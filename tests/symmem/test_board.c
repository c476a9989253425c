/* CPU tests of the board (symmem/board.h): ranks as threads of one process and as forked
 * processes, on real POSIX shared memory. No CUDA here. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "symmem/board.h"

#define WAIT_MS 10000u

static uint64_t my_tid(void) { return (uint64_t)syscall(SYS_gettid); }

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A fresh key per call: tests run in parallel processes and must never share a board. */
static symmpin_comm_key fresh_key(void) {
  uint64_t r[2];
  cr_assert_eq(getrandom(r, sizeof(r), 0), (ssize_t)sizeof(r));
  return symmpin_comm_key_of_bytes(r, sizeof(r));
}

static void shm_path(symmpin_comm_key k, char *buf, size_t len) {
  snprintf(buf, len, "/dev/shm/symmpin-%016llx%016llx", (unsigned long long)k.hi,
           (unsigned long long)k.lo);
}

/* Blob sizes cycle through edge cases: empty, tiny, around a page, the maximum. */
static size_t blob_size(int rank, uint32_t round) {
  static const size_t sizes[] = {0, 1, 7, 4095, 4096, 4097, 65536 + 3, SYMMPIN_BOARD_BLOB_MAX};
  return sizes[((unsigned)rank * 3u + round) % (sizeof(sizes) / sizeof(sizes[0]))];
}

static unsigned char blob_byte(int rank, uint32_t round, size_t i) {
  uint64_t x = (uint64_t)rank * 0x9e3779b97f4a7c15ull ^ (uint64_t)round * 0xbf58476d1ce4e5b9ull ^ i;
  x ^= x >> 29;
  x *= 0x94d049bb133111ebull;
  return (unsigned char)(x >> 40);
}

static void blob_fill(unsigned char *buf, int rank, uint32_t round, size_t n) {
  for (size_t i = 0; i < n; i++) buf[i] = blob_byte(rank, round, i);
}

/* 0 when rank r's round blob reads back as written. */
static int blob_check(symmpin_board *b, int r, uint32_t round) {
  size_t n = 12345;
  const unsigned char *p = symmpin_board_blob(b, round, r, &n);
  if (!p) return 1;
  if (n != blob_size(r, round)) return 2;
  for (size_t i = 0; i < n; i++)
    if (p[i] != blob_byte(r, round, i)) return 3;
  return 0;
}

/* One rank's part of a multi-round exchange: post, wait, read every rank's blob, for `rounds`
 * rounds, so parity areas get reused. Returns 0 on success, a code naming the failing step. */
static int rank_exchange(symmpin_comm_key key, int rank, int nranks, uint32_t rounds) {
  symmpin_board *b = NULL;
  if (symmpin_board_open(key, rank, nranks, &b) != SYMMPIN_OK) return 10;
  unsigned char *buf = malloc(SYMMPIN_BOARD_BLOB_MAX);
  int rc = 0;
  for (uint32_t round = 1; round <= rounds && rc == 0; round++) {
    size_t n = blob_size(rank, round);
    blob_fill(buf, rank, round, n);
    if (symmpin_board_post(b, round, buf, n, my_tid()) != SYMMPIN_OK) rc = 20;
    int missing = -1;
    if (!rc && symmpin_board_wait(b, round, WAIT_MS, my_tid(), &missing) != SYMMPIN_OK) rc = 30;
    if (!rc && !symmpin_board_round_complete(b, round)) rc = 40;
    for (int r = 0; r < nranks && !rc; r++)
      if (blob_check(b, r, round)) rc = 50 + blob_check(b, r, round);
    /* Nobody may post round+2 into the area we just read before everyone has read it: the
     * protocol guarantees that by posting round+1 only after reading round. */
  }
  free(buf);
  symmpin_board_close(b);
  return rc;
}

/* ---- exchanges -------------------------------------------------------------------------- */

typedef struct thread_arg {
  symmpin_comm_key key;
  int rank, nranks;
  uint32_t rounds;
  int rc;
} thread_arg;

static void *exchange_thread(void *p) {
  thread_arg *a = p;
  a->rc = rank_exchange(a->key, a->rank, a->nranks, a->rounds);
  return NULL;
}

Test(board, threads_exchange_blobs_of_many_sizes, .timeout = 60) {
  enum { N = 6 };
  symmpin_comm_key key = fresh_key();
  pthread_t t[N];
  thread_arg args[N];
  for (int r = 0; r < N; r++) {
    args[r] = (thread_arg){key, r, N, 17, -1};
    cr_assert_eq(pthread_create(&t[r], NULL, exchange_thread, &args[r]), 0);
  }
  for (int r = 0; r < N; r++) {
    pthread_join(t[r], NULL);
    cr_expect_eq(args[r].rc, 0, "rank %d failed with %d", r, args[r].rc);
  }
}

Test(board, processes_exchange_blobs_of_many_sizes, .timeout = 60) {
  enum { N = 5 };
  symmpin_comm_key key = fresh_key();
  pid_t pids[N];
  for (int r = 0; r < N; r++) {
    pids[r] = fork();
    cr_assert_geq(pids[r], 0);
    if (pids[r] == 0) _exit(rank_exchange(key, r, N, 13));
  }
  for (int r = 0; r < N; r++) {
    int status = 0;
    cr_assert_eq(waitpid(pids[r], &status, 0), pids[r]);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d: status %#x", r, status);
  }
}

Test(board, round_parity_reuses_areas, .timeout = 20) {
  symmpin_comm_key key = fresh_key();
  symmpin_board *b = NULL;
  cr_assert_eq(symmpin_board_open(key, 0, 1, &b), SYMMPIN_OK);
  uint32_t v[3] = {11, 22, 33};
  for (uint32_t round = 1; round <= 3; round++)
    cr_assert_eq(symmpin_board_post(b, round, &v[round - 1], sizeof(v[0]), my_tid()), SYMMPIN_OK);
  size_t n = 0;
  /* Round 3 went into round 1's area: round 1 is gone, rounds 2 and 3 read back. */
  cr_expect_null(symmpin_board_blob(b, 1, 0, &n));
  const uint32_t *p2 = symmpin_board_blob(b, 2, 0, &n);
  cr_assert_not_null(p2);
  cr_expect_eq(n, sizeof(uint32_t));
  cr_expect_eq(*p2, 22u);
  const uint32_t *p3 = symmpin_board_blob(b, 3, 0, &n);
  cr_assert_not_null(p3);
  cr_expect_eq(*p3, 33u);
  cr_expect_null(symmpin_board_blob(b, 4, 0, &n), "not posted yet");
  /* A single-rank board is complete as soon as it posted. */
  cr_expect(symmpin_board_round_complete(b, 3));
  cr_expect(!symmpin_board_round_complete(b, 4));
  symmpin_board_close(b);
}

Test(board, post_rejects_bad_rounds_and_sizes, .timeout = 20) {
  symmpin_comm_key key = fresh_key();
  symmpin_board *b = NULL;
  cr_assert_eq(symmpin_board_open(key, 0, 2, &b), SYMMPIN_OK);
  char c = 'x';
  cr_expect_eq(symmpin_board_post(b, 0, &c, 1, 1), SYMMPIN_ERR_INVALID);
  cr_expect_eq(symmpin_board_post(b, 1, NULL, 1, 1), SYMMPIN_ERR_INVALID);
  cr_expect_eq(symmpin_board_post(b, 1, &c, SYMMPIN_BOARD_BLOB_MAX + 1, 1), SYMMPIN_ERR_INVALID);
  cr_expect_eq(symmpin_board_post(b, 2, &c, 1, 1), SYMMPIN_OK);
  cr_expect_eq(symmpin_board_post(b, 2, &c, 1, 1), SYMMPIN_ERR_INVALID, "posted twice");
  cr_expect_eq(symmpin_board_post(b, 1, &c, 1, 1), SYMMPIN_ERR_INVALID, "went back");
  symmpin_board_close(b);
}

Test(board, open_rejects_bad_arguments_and_mismatches, .timeout = 20) {
  symmpin_comm_key key = fresh_key();
  symmpin_board *b = NULL, *b2 = NULL;
  cr_expect_eq(symmpin_board_open(key, 2, 2, &b), SYMMPIN_ERR_INVALID);
  cr_expect_eq(symmpin_board_open(key, -1, 2, &b), SYMMPIN_ERR_INVALID);
  cr_expect_eq(symmpin_board_open(key, 0, 0, &b), SYMMPIN_ERR_INVALID);
  cr_expect_eq(symmpin_board_open(key, 0, 100000, &b), SYMMPIN_ERR_UNSUPPORTED);
  cr_expect_null(b);
  cr_assert_eq(symmpin_board_open(key, 0, 3, &b), SYMMPIN_OK);
  cr_expect_eq(symmpin_board_open(key, 0, 3, &b2), SYMMPIN_ERR_INVALID, "rank 0 twice");
  cr_expect_eq(symmpin_board_open(key, 1, 4, &b2), SYMMPIN_ERR_DISAGREE, "rank counts differ");
  cr_expect_null(b2);
  symmpin_board_close(b);
}

/* ---- waiting ---------------------------------------------------------------------------- */

Test(board, wait_times_out_and_names_the_missing_rank, .timeout = 20) {
  symmpin_comm_key key = fresh_key();
  symmpin_board *b[3];
  for (int r = 0; r < 3; r++) cr_assert_eq(symmpin_board_open(key, r, 3, &b[r]), SYMMPIN_OK);
  int x = 1;
  /* Ranks 0 and 2 posted from "other threads" (fake tids), rank 1 never. */
  cr_assert_eq(symmpin_board_post(b[0], 1, &x, sizeof(x), 1001), SYMMPIN_OK);
  cr_assert_eq(symmpin_board_post(b[2], 1, &x, sizeof(x), 1003), SYMMPIN_OK);
  cr_expect(!symmpin_board_round_complete(b[0], 1));
  int missing = -1;
  uint64_t t0 = now_ms();
  cr_expect_eq(symmpin_board_wait(b[0], 1, 300, 1001, &missing), SYMMPIN_ERR_TIMEOUT);
  uint64_t dt = now_ms() - t0;
  cr_expect_eq(missing, 1);
  cr_expect_geq(dt, 300u, "waited %llu ms", (unsigned long long)dt);
  cr_expect_lt(dt, 3000u, "waited %llu ms", (unsigned long long)dt);
  /* Once rank 1 posts, the same wait succeeds at once. */
  cr_assert_eq(symmpin_board_post(b[1], 1, &x, sizeof(x), 1002), SYMMPIN_OK);
  cr_expect(symmpin_board_round_complete(b[2], 1));
  t0 = now_ms();
  cr_expect_eq(symmpin_board_wait(b[0], 1, 5000, 1001, &missing), SYMMPIN_OK);
  cr_expect_lt(now_ms() - t0, 1000u);
  for (int r = 0; r < 3; r++) symmpin_board_close(b[r]);
}

typedef struct late_arg {
  symmpin_board *b;
  unsigned delay_ms;
} late_arg;

static void *late_poster(void *p) {
  late_arg *a = p;
  struct timespec ts = {a->delay_ms / 1000, (long)(a->delay_ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  int x = 7;
  symmpin_board_post(a->b, 1, &x, sizeof(x), my_tid());
  return NULL;
}

Test(board, wait_returns_when_a_late_rank_posts, .timeout = 20) {
  symmpin_comm_key key = fresh_key();
  symmpin_board *b0, *b1;
  cr_assert_eq(symmpin_board_open(key, 0, 2, &b0), SYMMPIN_OK);
  cr_assert_eq(symmpin_board_open(key, 1, 2, &b1), SYMMPIN_OK);
  int x = 3;
  cr_assert_eq(symmpin_board_post(b0, 1, &x, sizeof(x), my_tid()), SYMMPIN_OK);
  pthread_t t;
  late_arg a = {b1, 200};
  cr_assert_eq(pthread_create(&t, NULL, late_poster, &a), 0);
  uint64_t t0 = now_ms();
  int missing = -1;
  cr_expect_eq(symmpin_board_wait(b0, 1, WAIT_MS, my_tid(), &missing), SYMMPIN_OK);
  uint64_t dt = now_ms() - t0;
  cr_expect_geq(dt, 150u);
  cr_expect_lt(dt, 2000u);
  pthread_join(t, NULL);
  size_t n = 0;
  const int *p = symmpin_board_blob(b0, 1, 1, &n);
  cr_assert_not_null(p);
  cr_expect_eq(*p, 7);
  symmpin_board_close(b0);
  symmpin_board_close(b1);
}

Test(board, wait_on_a_rank_of_the_same_thread_disagrees_at_once, .timeout = 20) {
  symmpin_comm_key key = fresh_key();
  symmpin_board *b[3];
  for (int r = 0; r < 3; r++) cr_assert_eq(symmpin_board_open(key, r, 3, &b[r]), SYMMPIN_OK);
  uint64_t me = my_tid();
  int x = 0;
  /* One thread drives all ranks: post-then-read works without blocking on itself. */
  for (int r = 0; r < 3; r++) cr_assert_eq(symmpin_board_post(b[r], 1, &x, sizeof(x), me), SYMMPIN_OK);
  for (int r = 0; r < 3; r++) cr_expect_eq(symmpin_board_wait(b[r], 1, WAIT_MS, me, NULL), SYMMPIN_OK);
  /* Round 2: only rank 0 posted; waiting for ranks 1 and 2, whose last posts came from this very
   * thread, would deadlock. */
  cr_assert_eq(symmpin_board_post(b[0], 2, &x, sizeof(x), me), SYMMPIN_OK);
  int missing = -1;
  uint64_t t0 = now_ms();
  cr_expect_eq(symmpin_board_wait(b[0], 2, WAIT_MS, me, &missing), SYMMPIN_ERR_DISAGREE);
  cr_expect_lt(now_ms() - t0, 500u, "must not wait");
  cr_expect_eq(missing, 1);
  /* Another thread (different tid) would simply wait: here with a short timeout. */
  cr_expect_eq(symmpin_board_wait(b[0], 2, 50, me + 1, &missing), SYMMPIN_ERR_TIMEOUT);
  /* tid 0 means "unknown": never taken for the same thread. */
  cr_expect_eq(symmpin_board_wait(b[0], 2, 50, 0, &missing), SYMMPIN_ERR_TIMEOUT);
  for (int r = 0; r < 3; r++) symmpin_board_close(b[r]);
}

/* ---- verdicts --------------------------------------------------------------------------- */

enum { RACERS = 16, RACE_ROUNDS = 200 };

typedef struct race_arg {
  symmpin_comm_key key;
  int rank;
  pthread_barrier_t *start;
  symmpin_verdict got[RACE_ROUNDS + 1];
  int wins;
  int rc;
} race_arg;

/* Every third round all ranks propose the same verdict (which must then stand); in the others
 * half propose GO and half FAIL (one of them must stand for everyone). */
static symmpin_verdict race_proposal(int rank, uint32_t round) {
  if (round % 3 == 0) return (round / 3) % 2 ? SYMMPIN_VERDICT_GO : SYMMPIN_VERDICT_FAIL;
  return ((unsigned)rank + round) % 2 ? SYMMPIN_VERDICT_GO : SYMMPIN_VERDICT_FAIL;
}

static void *race_thread(void *p) {
  race_arg *a = p;
  symmpin_board *b = NULL;
  a->rc = symmpin_board_open(a->key, a->rank, RACERS, &b);
  pthread_barrier_wait(a->start);
  if (a->rc != SYMMPIN_OK) return NULL;
  for (uint32_t round = 1; round <= RACE_ROUNDS; round++) {
    symmpin_verdict mine = race_proposal(a->rank, round);
    a->got[round] = symmpin_board_decide(b, round, mine);
  }
  symmpin_board_close(b);
  return NULL;
}

Test(board, concurrent_decide_threads_agree, .timeout = 60) {
  symmpin_comm_key key = fresh_key();
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, RACERS);
  static race_arg args[RACERS];
  pthread_t t[RACERS];
  for (int r = 0; r < RACERS; r++) {
    memset(&args[r], 0, sizeof(args[r]));
    args[r].key = key;
    args[r].rank = r;
    args[r].start = &start;
    cr_assert_eq(pthread_create(&t[r], NULL, race_thread, &args[r]), 0);
  }
  for (int r = 0; r < RACERS; r++) pthread_join(t[r], NULL);
  pthread_barrier_destroy(&start);
  int go = 0, fail = 0;
  for (uint32_t round = 1; round <= RACE_ROUNDS; round++) {
    symmpin_verdict v = args[0].got[round];
    cr_assert(v == SYMMPIN_VERDICT_GO || v == SYMMPIN_VERDICT_FAIL, "round %u: %d", round, v);
    for (int r = 0; r < RACERS; r++) {
      cr_assert_eq(args[r].rc, SYMMPIN_OK);
      cr_assert_eq(args[r].got[round], v, "round %u: rank %d saw %d, rank 0 saw %d", round, r,
                   args[r].got[round], v);
    }
    if (round % 3 == 0) cr_expect_eq(v, race_proposal(0, round), "unanimous round %u", round);
    if (v == SYMMPIN_VERDICT_GO)
      go++;
    else
      fail++;
  }
  cr_expect_eq(go + fail, RACE_ROUNDS);
}

Test(board, concurrent_decide_processes_agree, .timeout = 60) {
  enum { P = 8, ROUNDS = 300 };
  symmpin_comm_key key = fresh_key();
  /* Results come back through an anonymous shared mapping: one row per child. */
  int *res = mmap(NULL, sizeof(int) * P * (ROUNDS + 1), PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(res, MAP_FAILED);
  pid_t pids[P];
  for (int r = 0; r < P; r++) {
    pids[r] = fork();
    cr_assert_geq(pids[r], 0);
    if (pids[r] == 0) {
      symmpin_board *b = NULL;
      if (symmpin_board_open(key, r, P, &b) != SYMMPIN_OK) _exit(1);
      /* Loose start line: post round 1 and wait for everyone, then race. */
      if (symmpin_board_post(b, 1, NULL, 0, my_tid()) != SYMMPIN_OK) _exit(2);
      if (symmpin_board_wait(b, 1, WAIT_MS, my_tid(), NULL) != SYMMPIN_OK) _exit(3);
      for (uint32_t round = 1; round <= ROUNDS; round++)
        res[r * (ROUNDS + 1) + (int)round] = symmpin_board_decide(b, round, race_proposal(r, round));
      /* Everyone reads the standing verdicts again after all decided. */
      if (symmpin_board_post(b, 2, NULL, 0, my_tid()) != SYMMPIN_OK) _exit(4);
      if (symmpin_board_wait(b, 2, WAIT_MS, my_tid(), NULL) != SYMMPIN_OK) _exit(5);
      for (uint32_t round = 1; round <= ROUNDS; round++)
        if (symmpin_board_verdict(b, round) != (symmpin_verdict)res[r * (ROUNDS + 1) + (int)round])
          _exit(6);
      symmpin_board_close(b);
      _exit(0);
    }
  }
  for (int r = 0; r < P; r++) {
    int status = 0;
    cr_assert_eq(waitpid(pids[r], &status, 0), pids[r]);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %#x", r, status);
  }
  for (int round = 1; round <= ROUNDS; round++) {
    int v = res[round];
    cr_assert(v == SYMMPIN_VERDICT_GO || v == SYMMPIN_VERDICT_FAIL, "round %d: %d", round, v);
    for (int r = 1; r < P; r++)
      cr_assert_eq(res[r * (ROUNDS + 1) + round], v, "round %d, rank %d", round, r);
    if (round % 3 == 0) cr_expect_eq(v, race_proposal(0, (uint32_t)round), "unanimous round %d", round);
  }
  munmap(res, sizeof(int) * P * (ROUNDS + 1));
}

Test(board, decide_keeps_the_first_verdict, .timeout = 20) {
  symmpin_comm_key key = fresh_key();
  symmpin_board *b0, *b1;
  cr_assert_eq(symmpin_board_open(key, 0, 2, &b0), SYMMPIN_OK);
  cr_assert_eq(symmpin_board_open(key, 1, 2, &b1), SYMMPIN_OK);
  cr_expect_eq(symmpin_board_verdict(b1, 5), SYMMPIN_VERDICT_NONE);
  cr_expect_eq(symmpin_board_decide(b0, 5, SYMMPIN_VERDICT_FAIL), SYMMPIN_VERDICT_FAIL);
  cr_expect_eq(symmpin_board_decide(b1, 5, SYMMPIN_VERDICT_GO), SYMMPIN_VERDICT_FAIL);
  cr_expect_eq(symmpin_board_verdict(b1, 5), SYMMPIN_VERDICT_FAIL);
  cr_expect_eq(symmpin_board_decide(b1, 6, SYMMPIN_VERDICT_GO), SYMMPIN_VERDICT_GO);
  cr_expect_eq(symmpin_board_verdict(b0, 6), SYMMPIN_VERDICT_GO);
  cr_expect_eq(symmpin_board_verdict(b0, 5), SYMMPIN_VERDICT_FAIL, "round 6 left round 5 alone");
  /* Far-apart rounds sharing a ring slot: the newer one takes it, the older reads FAIL. */
  cr_expect_eq(symmpin_board_decide(b0, 5 + 1024, SYMMPIN_VERDICT_GO), SYMMPIN_VERDICT_GO);
  cr_expect_eq(symmpin_board_verdict(b1, 5 + 1024), SYMMPIN_VERDICT_GO);
  cr_expect_eq(symmpin_board_verdict(b1, 5), SYMMPIN_VERDICT_FAIL);
  cr_expect_eq(symmpin_board_decide(b1, 5, SYMMPIN_VERDICT_GO), SYMMPIN_VERDICT_FAIL);
  symmpin_board_close(b0);
  symmpin_board_close(b1);
}

/* ---- names and isolation ---------------------------------------------------------------- */

Test(board, name_is_unlinked_once_all_ranks_attached, .timeout = 20) {
  symmpin_comm_key key = fresh_key();
  char path[64];
  shm_path(key, path, sizeof(path));
  symmpin_board *b[3];
  cr_assert_eq(symmpin_board_open(key, 0, 3, &b[0]), SYMMPIN_OK);
  cr_expect_eq(access(path, F_OK), 0, "%s exists while ranks are missing", path);
  cr_assert_eq(symmpin_board_open(key, 2, 3, &b[2]), SYMMPIN_OK);
  cr_expect_eq(access(path, F_OK), 0);
  cr_assert_eq(symmpin_board_open(key, 1, 3, &b[1]), SYMMPIN_OK);
  cr_expect_neq(access(path, F_OK), 0, "%s still exists", path);
  /* The board keeps working after the unlink. */
  int x = 9;
  for (int r = 0; r < 3; r++) cr_assert_eq(symmpin_board_post(b[r], 1, &x, sizeof(x), 1), SYMMPIN_OK);
  cr_expect(symmpin_board_round_complete(b[1], 1));
  for (int r = 0; r < 3; r++) symmpin_board_close(b[r]);
}

Test(board, name_is_unlinked_when_the_last_local_rank_leaves, .timeout = 20) {
  /* A multi-host communicator: ranks 1..3 never attach here. */
  symmpin_comm_key key = fresh_key();
  char path[64];
  shm_path(key, path, sizeof(path));
  symmpin_board *b0;
  cr_assert_eq(symmpin_board_open(key, 0, 4, &b0), SYMMPIN_OK);
  int x = 1;
  cr_assert_eq(symmpin_board_post(b0, 1, &x, sizeof(x), my_tid()), SYMMPIN_OK);
  cr_expect(!symmpin_board_round_complete(b0, 1));
  cr_expect_eq(symmpin_board_wait(b0, 1, 100, my_tid(), NULL), SYMMPIN_ERR_TIMEOUT);
  cr_expect_eq(access(path, F_OK), 0);
  symmpin_board_close(b0);
  cr_expect_neq(access(path, F_OK), 0, "%s left behind", path);
}

Test(board, name_is_unlinked_after_processes_attach, .timeout = 30) {
  enum { N = 4 };
  symmpin_comm_key key = fresh_key();
  char path[64];
  shm_path(key, path, sizeof(path));
  pid_t pids[N];
  for (int r = 0; r < N; r++) {
    pids[r] = fork();
    cr_assert_geq(pids[r], 0);
    if (pids[r] == 0) {
      symmpin_board *b = NULL;
      if (symmpin_board_open(key, r, N, &b) != SYMMPIN_OK) _exit(1);
      if (symmpin_board_post(b, 1, &r, sizeof(r), my_tid()) != SYMMPIN_OK) _exit(2);
      if (symmpin_board_wait(b, 1, WAIT_MS, my_tid(), NULL) != SYMMPIN_OK) _exit(3);
      /* Everyone attached before round 1 completed, so the name is gone for all of them. */
      if (access(path, F_OK) == 0) _exit(4);
      symmpin_board_close(b);
      _exit(0);
    }
  }
  for (int r = 0; r < N; r++) {
    int status = 0;
    cr_assert_eq(waitpid(pids[r], &status, 0), pids[r]);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %#x", r, status);
  }
  cr_expect_neq(access(path, F_OK), 0);
}

Test(board, boards_with_different_keys_do_not_interfere, .timeout = 20) {
  symmpin_comm_key ka = fresh_key(), kb = symmpin_comm_key_split(ka, 0, 1);
  symmpin_board *a0, *a1, *b0, *b1;
  cr_assert_eq(symmpin_board_open(ka, 0, 2, &a0), SYMMPIN_OK);
  cr_assert_eq(symmpin_board_open(ka, 1, 2, &a1), SYMMPIN_OK);
  cr_assert_eq(symmpin_board_open(kb, 0, 2, &b0), SYMMPIN_OK);
  cr_assert_eq(symmpin_board_open(kb, 1, 2, &b1), SYMMPIN_OK);
  int va = 100, vb = 200;
  cr_assert_eq(symmpin_board_post(a0, 1, &va, sizeof(va), 1), SYMMPIN_OK);
  cr_assert_eq(symmpin_board_post(a1, 1, &va, sizeof(va), 2), SYMMPIN_OK);
  cr_expect(symmpin_board_round_complete(a0, 1));
  cr_expect(!symmpin_board_round_complete(b0, 1), "board b saw board a's posts");
  cr_expect_null(symmpin_board_blob(b1, 1, 0, NULL));
  cr_assert_eq(symmpin_board_post(b0, 1, &vb, sizeof(vb), 3), SYMMPIN_OK);
  cr_assert_eq(symmpin_board_post(b1, 1, &vb, sizeof(vb), 4), SYMMPIN_OK);
  cr_expect_eq(*(const int *)symmpin_board_blob(a1, 1, 0, NULL), 100);
  cr_expect_eq(*(const int *)symmpin_board_blob(b0, 1, 1, NULL), 200);
  cr_expect_eq(symmpin_board_decide(a0, 1, SYMMPIN_VERDICT_GO), SYMMPIN_VERDICT_GO);
  cr_expect_eq(symmpin_board_verdict(b0, 1), SYMMPIN_VERDICT_NONE);
  symmpin_board_close(a0);
  symmpin_board_close(a1);
  symmpin_board_close(b0);
  symmpin_board_close(b1);
}
