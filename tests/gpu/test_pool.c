/* GPU test of symmetric pools (symmem/pool.h) agreed over a board (symmem/board.h), with ranks as
 * processes (--procs N: spawned copies of this program, chunks passed as file descriptors), as threads of one process
 * (--threads N) or all driven by one thread (--single N: post-then-read, never blocking on itself).
 * Rank r runs on GPU r % ngpus, so one GPU works (IPC on one device, shared pointers in-process)
 * and 2+ GPUs exercise P2P.
 *
 * Each rank fills its pool with a rank-specific random pattern, then (after a board barrier)
 * reads every rank's pool through symmpin_pool_addr with cudaMemcpy and with a kernel that loads
 * peer memory directly; the pool then grows by a second chunk and everything is checked again.
 * Pools grow with symmpin_pool_grow (symmem/grow.h: reserve, post, attach, agree), given every
 * rank the calling thread drives. Prints `test_pool: N passed, M failed` and exits non-zero on any
 * failure; --help for the options. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "symmem/board.h"
#include "symmem/grow.h"
#include "symmem/pool.h"
#include "tests/gpu/gpu_common.h"
#include "tests/symmem/pool_pattern.h"

#define PROG "test_pool"

extern char **environ;

#define MAX_RANKS 64
#define WAIT_MS 60000u

/* Pool growth steps: a first chunk, then a second one; sizes deliberately not multiples of the
 * chunk granularity, so rounding is exercised too. */
static size_t grow_target(size_t size, int nchunks) {
  return nchunks == 0 ? 3 * ((size_t)1 << 20) + 5 : size + 5 * ((size_t)1 << 20);
}

typedef struct rank_ctx {
  int rank, nranks, device;
  uint64_t seed, tid;
  symmpin_comm_key key;
  symmpin_board *board;
  symmpin_pool *pool;
  uint32_t round;
  size_t chunk_end[3]; /* chunk boundaries: [0, end0), [end0, end1) */
  int nchunks;
  int passed, failed;
  uint8_t out[256]; /* this rank's blob for the current step */
  size_t out_bytes;
  int pid0; /* rank 0's process (from its facts) */
} rank_ctx;

static void check(rank_ctx *c, int ok, const char *fmt, ...) {
  if (ok) {
    c->passed++;
    return;
  }
  c->failed++;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "test_pool: rank %d: FAILED: ", c->rank);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

static uint64_t thread_id(void) { return (uint64_t)syscall(SYS_gettid); }

/* ---- steps: a "post" half and a "read" half, so that one thread can post for all its ranks
 * before reading any (--single); growth is one blocking call over all of them ----------------- */

typedef enum step {
  STEP_FACTS,  /* post eligibility facts; read: check_peers */
  STEP_GROW,   /* symmpin_pool_grow to the next size; then check and fill own new chunk */
  STEP_VERIFY, /* post size (barrier: everyone filled); read: verify every rank's pool */
  STEP_NOGROW, /* symmpin_pool_grow to less than the size: empty records, nothing changes */
  STEP_FREE_FIRST, /* rank 0 frees its pool (it may even exit); read: the others still see its
                      chunks, through their own mappings, as it left them */
  STEP_COUNT
} step;

static const step plan[] = {STEP_FACTS, STEP_GROW,   STEP_VERIFY, STEP_NOGROW,
                            STEP_GROW,  STEP_VERIFY, STEP_FREE_FIRST};
#define PLAN_STEPS (sizeof(plan) / sizeof(plan[0]))

/* Growth steps block in symmpin_pool_grow, which gets every rank of the calling thread at once;
 * the other steps are a "post" half and a "read" half. */
static bool step_grows(step s) { return s == STEP_GROW || s == STEP_NOGROW; }

static int cuda_ok(rank_ctx *c, cudaError_t e, const char *what) {
  check(c, e == cudaSuccess, "%s: %s", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

static void step_post(rank_ctx *c, step s) {
  cudaSetDevice(c->device);
  c->out_bytes = 0;
  switch (s) {
  case STEP_FACTS: {
    symmpin_pool_facts f;
    symmpin_status st = symmpin_pool_facts_get(c->device, &f);
    check(c, st == SYMMPIN_OK, "facts_get: %s", symmpin_status_name(st));
    memcpy(c->out, &f, sizeof(f));
    c->out_bytes = sizeof(f);
    break;
  }
  case STEP_VERIFY: {
    uint64_t size = symmpin_pool_size(c->pool);
    memcpy(c->out, &size, sizeof(size));
    c->out_bytes = sizeof(size);
    break;
  }
  case STEP_FREE_FIRST:
    /* Its own kernels are done (the preload knows from its events); its peers are not asked. */
    if (c->rank == 0 && cuda_ok(c, cudaDeviceSynchronize(), "cudaDeviceSynchronize")) {
      symmpin_pool_destroy(c->pool);
      c->pool = NULL;
    }
    break;
  default: break;
  }
  c->round++;
  symmpin_status st = symmpin_board_post(c->board, c->round, c->out, c->out_bytes, c->tid);
  check(c, st == SYMMPIN_OK, "post round %u: %s", c->round, symmpin_status_name(st));
}

/* Verifies bytes [from, to) of rank r's pool, one chunk, through its mapping in this process:
 * with cudaMemcpy, and with a kernel that loads it directly. */
static void verify_range(rank_ctx *c, int r, size_t from, size_t to, uint64_t *host) {
  const void *src = symmpin_pool_addr(c->pool, r, from);
  check(c, src != NULL, "addr(rank %d, %zu)", r, from);
  if (!src) return;
  size_t bytes = to - from, words = bytes / 8;
  check(c, symmpin_pool_fits(c->pool, from, bytes), "fits(%zu, %zu)", from, bytes);
  if (!cuda_ok(c, cudaMemcpy(host, src, bytes, cudaMemcpyDefault), "cudaMemcpy from peer")) return;
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < words; i++) {
    if (host[i] != symmpin_test_pattern(c->seed, r, from / 8 + i)) {
      if (!bad) first_bad = i;
      bad++;
    }
  }
  check(c, bad == 0, "cudaMemcpy of rank %d's [%zu, %zu): %zu words differ, first at word %zu", r,
        from, to, bad, from / 8 + first_bad);
  unsigned long long kbad = ~0ull;
  int e = symmpin_test_check(src, from / 8, words, c->seed, r, &kbad);
  if (cuda_ok(c, (cudaError_t)e, "check kernel on peer memory"))
    check(c, kbad == 0, "kernel loads of rank %d's [%zu, %zu): %llu words differ", r, from, to,
          kbad);
}

/* Every chunk of rank r's pool, through this rank's mapping of it. */
static void verify_rank(rank_ctx *c, int r, uint64_t *host) {
  size_t from = 0;
  for (int i = 0; i < c->nchunks; i++) {
    verify_range(c, r, from, c->chunk_end[i], host);
    from = c->chunk_end[i];
  }
}

static void step_read(rank_ctx *c, step s) {
  cudaSetDevice(c->device);
  int missing = -1;
  symmpin_status st = symmpin_board_wait(c->board, c->round, WAIT_MS, c->tid, &missing);
  check(c, st == SYMMPIN_OK, "wait round %u: %s (missing rank %d)", c->round,
        symmpin_status_name(st), missing);
  if (st != SYMMPIN_OK) return;
  const void *blobs[MAX_RANKS];
  for (int r = 0; r < c->nranks; r++) {
    size_t n = 0;
    blobs[r] = symmpin_board_blob(c->board, c->round, r, &n);
    check(c, blobs[r] != NULL && n == c->out_bytes, "blob of rank %d, round %u: %zu bytes", r,
          c->round, n);
    if (!blobs[r]) return;
  }
  switch (s) {
  case STEP_FACTS: {
    symmpin_pool_facts f[MAX_RANKS];
    for (int r = 0; r < c->nranks; r++) memcpy(&f[r], blobs[r], sizeof(f[r]));
    char why[160];
    st = symmpin_pool_check_peers(f, c->nranks, why, sizeof(why));
    check(c, st == SYMMPIN_OK, "check_peers: %s (%s)", symmpin_status_name(st), why);
    /* Ranks on one GPU share its UUID; ranks on different GPUs do not (every rank of this test
     * sees the same devices, so ordinals compare across processes). */
    for (int r = 0; r < c->nranks; r++)
      check(c, (memcmp(f[r].uuid, f[c->rank].uuid, 16) == 0) == (f[r].device == c->device),
            "uuid of rank %d vs device", r);
    c->pid0 = f[0].pid;
    break;
  }
  case STEP_VERIFY: {
    uint64_t mine = symmpin_pool_size(c->pool);
    for (int r = 0; r < c->nranks; r++) {
      uint64_t theirs;
      memcpy(&theirs, blobs[r], sizeof(theirs));
      check(c, theirs == mine, "rank %d's size %" PRIu64 " != mine %" PRIu64, r, theirs, mine);
    }
    size_t biggest = 0, from = 0;
    for (int i = 0; i < c->nchunks; i++) {
      if (c->chunk_end[i] - from > biggest) biggest = c->chunk_end[i] - from;
      from = c->chunk_end[i];
    }
    uint64_t *host = malloc(biggest);
    if (!host) {
      check(c, 0, "out of host memory");
      return;
    }
    for (int r = 0; r < c->nranks; r++) verify_rank(c, r, host);
    free(host);
    break;
  }
  case STEP_FREE_FIRST:
    /* Rank 0 in another process: it exits right after this round; read its chunks only once it
     * is gone (exited: a zombie or reaped), so its memory lives on through our mappings alone. */
    if (c->rank != 0 && c->pid0 != (int)getpid()) {
      bool exited = false;
      for (int i = 0; i < 2000 && !exited; i++) {
        char path[64], state = 0;
        snprintf(path, sizeof path, "/proc/%d/stat", c->pid0);
        FILE *f = fopen(path, "r");
        exited = !f || (fscanf(f, "%*d %*s %c", &state) == 1 && state == 'Z');
        if (f) fclose(f);
        if (!exited) usleep(10 * 1000);
      }
      check(c, exited, "rank 0's process %d did not exit", c->pid0);
    }
    if (c->rank != 0) {
      uint64_t *host = malloc(c->chunk_end[c->nchunks - 1]);
      check(c, host != NULL, "out of host memory");
      if (host) verify_rank(c, 0, host);
      free(host);
    }
    break;
  default: break;
  }
}

/* After a growth from `old` bytes: the new chunk is where the old size ended on every rank,
 * zeroed, and separate from the peers' chunks; then this rank fills it with its pattern. */
static void check_grown(rank_ctx *c, size_t old) {
  cudaSetDevice(c->device);
  size_t size = symmpin_pool_size(c->pool);
  size_t want = grow_target(old, c->nchunks);
  size_t expect = want; /* a chunk covers exactly what was asked for (its allocation is rounded) */
  check(c, size == expect, "size %zu after growing to %zu, expected %zu", size, want, expect);
  c->chunk_end[c->nchunks++] = size;
  /* Offsets are the same slots everywhere: own chunk starts where the old size ended. */
  void *mine = symmpin_pool_addr(c->pool, c->rank, old);
  size_t off = 12345;
  check(c, mine && symmpin_pool_contains(c->pool, mine, &off) && off == old,
        "contains(own addr %zu) -> %zu", old, off);
  check(c, symmpin_pool_contains(c->pool, (char *)mine + 8, &off) && off == old + 8,
        "contains(own addr + 8)");
  check(c, symmpin_pool_addr(c->pool, c->rank, size) == NULL, "addr past the end");
  check(c, !symmpin_pool_fits(c->pool, size - 8, 16), "fits past the end");
  check(c, symmpin_pool_fits(c->pool, size - 8, 8), "fits at the end");
  if (c->nchunks == 2)
    check(c, !symmpin_pool_fits(c->pool, old - 8, 16), "a slot straddling two chunks fits");
  for (int r = 0; r < c->nranks; r++) {
    if (r == c->rank) continue;
    void *peer = symmpin_pool_addr(c->pool, r, old);
    check(c, peer != NULL && peer != mine, "rank %d's chunk maps to %p (mine %p)", r, peer, mine);
    check(c, !symmpin_pool_contains(c->pool, peer, &off), "peer memory counted as own");
  }
  /* New chunks arrive zeroed (kernels rely on zeroed flags). */
  uint64_t head[64];
  if (cuda_ok(c, cudaMemcpy(head, mine, sizeof(head), cudaMemcpyDefault), "cudaMemcpy own")) {
    int zero = 1;
    for (int i = 0; i < 64; i++) zero &= head[i] == 0;
    check(c, zero, "a fresh chunk is not zeroed");
  }
  int e = symmpin_test_fill(mine, old / 8, (size - old) / 8, c->seed, c->rank);
  cuda_ok(c, (cudaError_t)e, "fill kernel");
}

/* STEP_GROW / STEP_NOGROW for the n ranks this thread drives (c[0..n-1], one rank or all). */
static void step_grow(rank_ctx *c, int n, step s) {
  symmpin_pool *pools[MAX_RANKS];
  symmpin_board *boards[MAX_RANKS];
  size_t old[MAX_RANKS];
  for (int l = 0; l < n; l++) {
    pools[l] = c[l].pool;
    boards[l] = c[l].board;
    old[l] = symmpin_pool_size(c[l].pool);
  }
  /* NOGROW asks for less than the size: reserve posts empty records, attach changes nothing. */
  size_t want = s == STEP_GROW ? grow_target(old[0], c[0].nchunks) : old[0] - 1;
  symmpin_pool_grow_args args = {.nranks = c[0].nranks,
                                 .bytes = want,
                                 .round = c[0].round + 1,
                                 .timeout_ms = WAIT_MS,
                                 .tid = c[0].tid};
  char why[160];
  symmpin_status st = symmpin_pool_grow(pools, boards, n, &args, why, sizeof(why));
  for (int l = 0; l < n; l++) {
    c[l].round += SYMMPIN_POOL_GROW_ROUNDS;
    check(&c[l], st == SYMMPIN_OK, "grow to %zu: %s (%s)", want, symmpin_status_name(st), why);
    if (st != SYMMPIN_OK) continue;
    if (s == STEP_GROW)
      check_grown(&c[l], old[l]);
    else
      check(&c[l], symmpin_pool_size(c[l].pool) == old[l], "size %zu after no growth, was %zu",
            symmpin_pool_size(c[l].pool), old[l]);
  }
}

static int ctx_open(rank_ctx *c) {
  symmpin_status st = symmpin_board_open(c->key, c->rank, c->nranks, &c->board);
  check(c, st == SYMMPIN_OK, "board_open: %s", symmpin_status_name(st));
  if (st != SYMMPIN_OK) return -1;
  st = symmpin_pool_create(c->rank, c->nranks, c->device, &c->pool);
  check(c, st == SYMMPIN_OK, "pool_create: %s", symmpin_status_name(st));
  return st == SYMMPIN_OK ? 0 : -1;
}

/* Free what is left (the pool needs no barrier: every rank holds its own mappings), agree on a
 * verdict. */
static void ctx_close(rank_ctx *c) {
  cudaSetDevice(c->device);
  symmpin_pool_destroy(c->pool);
  c->pool = NULL;
  if (c->board) {
    symmpin_verdict v = symmpin_board_decide(c->board, c->round,
                                             c->failed ? SYMMPIN_VERDICT_FAIL : SYMMPIN_VERDICT_GO);
    check(c, v == symmpin_board_verdict(c->board, c->round), "verdict changed after decide");
    symmpin_board_close(c->board);
    c->board = NULL;
  }
}

/* One rank driven by its own thread or process: each step posts, then reads. */
static void rank_run(rank_ctx *c) {
  if (ctx_open(c) == 0) {
    for (size_t i = 0; i < PLAN_STEPS; i++) {
      if (step_grows(plan[i])) {
        step_grow(c, 1, plan[i]);
      } else {
        step_post(c, plan[i]);
        step_read(c, plan[i]);
      }
      if (c->failed) break; /* later steps depend on earlier ones */
    }
  }
  ctx_close(c);
}

static void *rank_thread(void *p) {
  rank_ctx *c = p;
  c->tid = thread_id();
  rank_run(c);
  return NULL;
}

static int device_count(void) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n < 1) {
    fprintf(stderr, "test_pool: no CUDA device (%s)\n", cudaGetErrorString(e));
    return 0;
  }
  return n;
}

static void ctx_init(rank_ctx *c, int rank, int nranks, int ngpus, symmpin_comm_key key,
                     uint64_t seed) {
  memset(c, 0, sizeof(*c));
  c->rank = rank;
  c->nranks = nranks;
  c->device = rank % ngpus;
  c->key = key;
  c->seed = seed;
  c->tid = thread_id();
}

static void random_key(symmpin_comm_key *key, uint64_t *seed) {
  uint64_t r[3];
  if (!symmpin_test_random_bytes(r, sizeof(r))) symmpin_test_die("getrandom: %s", strerror(errno));
  key->hi = r[0];
  key->lo = r[1];
  *seed = r[2];
}

static int report(int passed, int failed) {
  printf("test_pool: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

static int run_threads(int n) {
  int ngpus = device_count();
  if (!ngpus) return report(0, 1);
  symmpin_comm_key key;
  uint64_t seed;
  random_key(&key, &seed);
  rank_ctx *c = calloc((size_t)n, sizeof(*c));
  pthread_t *t = calloc((size_t)n, sizeof(*t));
  for (int r = 0; r < n; r++) {
    ctx_init(&c[r], r, n, ngpus, key, seed);
    if (pthread_create(&t[r], NULL, rank_thread, &c[r]) != 0) {
      fprintf(stderr, "test_pool: pthread_create failed\n");
      exit(2);
    }
  }
  int passed = 0, failed = 0;
  for (int r = 0; r < n; r++) {
    pthread_join(t[r], NULL);
    passed += c[r].passed;
    failed += c[r].failed;
  }
  printf("test_pool: --threads %d on %d GPU(s)\n", n, ngpus);
  free(t);
  free(c);
  return report(passed, failed);
}

/* One thread drives every rank: each step posts for all ranks, then reads for all ranks. */
static int run_single(int n) {
  int ngpus = device_count();
  if (!ngpus) return report(0, 1);
  symmpin_comm_key key;
  uint64_t seed;
  random_key(&key, &seed);
  rank_ctx *c = calloc((size_t)n, sizeof(*c));
  int ok = 1;
  for (int r = 0; r < n; r++) {
    ctx_init(&c[r], r, n, ngpus, key, seed);
    ok &= ctx_open(&c[r]) == 0;
  }
  bool self_wait_checked = false;
  for (size_t i = 0; ok && i < PLAN_STEPS; i++) {
    if (step_grows(plan[i])) {
      step_grow(c, n, plan[i]);
    } else {
      step_post(&c[0], plan[i]);
      if (n > 1 && c[1].round > 0 && !self_wait_checked) {
        /* Rank 0 posted this round, rank 1 (whose last post came from this thread) not yet:
         * waiting would deadlock, so the board must say DISAGREE at once. */
        int missing = -1;
        symmpin_status st = symmpin_board_wait(c[0].board, c[0].round, WAIT_MS, c[0].tid, &missing);
        check(&c[0], st == SYMMPIN_ERR_DISAGREE && missing == 1,
              "wait on a rank of the same thread: %s, missing %d", symmpin_status_name(st),
              missing);
        self_wait_checked = true;
      }
      for (int r = 1; r < n; r++) step_post(&c[r], plan[i]);
      for (int r = 0; r < n; r++) step_read(&c[r], plan[i]);
    }
    for (int r = 0; r < n; r++) ok &= c[r].failed == 0;
  }
  int passed = 0, failed = 0;
  for (int r = 0; r < n; r++) {
    ctx_close(&c[r]);
    passed += c[r].passed;
    failed += c[r].failed;
  }
  printf("test_pool: --single %d on %d GPU(s)\n", n, ngpus);
  free(c);
  return report(passed, failed);
}

/* A child of --procs: rank `rank`; writes "rank passed failed" to fd `fd` at the end. */
static int run_child(int rank, int n, const char *keyhex, int fd) {
  symmpin_comm_key key;
  uint64_t seed;
  if (sscanf(keyhex, "%16" SCNx64 "%16" SCNx64 "%16" SCNx64, &key.hi, &key.lo, &seed) != 3) {
    fprintf(stderr, "test_pool: bad key %s\n", keyhex);
    return 2;
  }
  alarm(300); /* a hang is a failure the parent sees as a signal */
  int ngpus = device_count();
  rank_ctx c;
  if (!ngpus) {
    dprintf(fd, "%d 0 1\n", rank);
    return 1;
  }
  ctx_init(&c, rank, n, ngpus, key, seed);
  rank_run(&c);
  dprintf(fd, "%d %d %d\n", rank, c.passed, c.failed);
  return c.failed ? 1 : 0;
}

/* Spawns n copies of this program (posix_spawn: no fork of a CUDA process, and the parent never
 * initializes CUDA anyway). */
static int run_procs(int n) {
  symmpin_comm_key key;
  uint64_t seed;
  random_key(&key, &seed);
  char keyhex[64], nstr[16], fdstr[16];
  snprintf(keyhex, sizeof(keyhex), "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, key.hi, key.lo, seed);
  snprintf(nstr, sizeof(nstr), "%d", n);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    perror("pipe2");
    return 2;
  }
  /* The children inherit a copy of the write end at fd 100 (not close-on-exec). */
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 100);
  snprintf(fdstr, sizeof(fdstr), "%d", 100);
  pid_t pids[MAX_RANKS];
  int spawned = 0, failed = 0, passed = 0;
  for (int r = 0; r < n; r++) {
    char rstr[16];
    snprintf(rstr, sizeof(rstr), "%d", r);
    char *argv[] = {PROG,    "--procs", nstr,          "--child", rstr,
                    "--key", keyhex,    "--report-fd", fdstr,     NULL};
    int e = posix_spawn(&pids[r], "/proc/self/exe", &fa, NULL, argv, environ);
    if (e != 0) {
      fprintf(stderr, "test_pool: posix_spawn: %s\n", strerror(e));
      failed++;
      break;
    }
    spawned++;
  }
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  int seen[MAX_RANKS] = {0};
  FILE *in = fdopen(fds[0], "r");
  int rr, p, f;
  while (in && fscanf(in, "%d %d %d", &rr, &p, &f) == 3) {
    if (rr >= 0 && rr < n) seen[rr] = 1;
    passed += p;
    failed += f;
  }
  if (in) fclose(in);
  for (int r = 0; r < spawned; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0 && !seen[r])) {
      fprintf(stderr, "test_pool: rank %d ended with status %#x\n", r, status);
      failed++;
    } else if (!seen[r]) {
      fprintf(stderr, "test_pool: rank %d reported nothing\n", r);
      failed++;
    }
  }
  printf("test_pool: --procs %d\n", n);
  return report(passed, failed);
}

static void usage(void) {
  printf(
      "usage: " PROG " --procs N | --threads N | --single N   (1 <= N <= %d)\n"
      "GPU test of symmetric pools (symmem/pool.h, grown with symmem/grow.h) over a board, with\n"
      "N ranks on GPU r %% ngpus (one GPU works). Prints '" PROG ": P passed, F failed'.\n"
      "  --procs N       ranks as N processes (spawned copies of this program, fds)\n"
      "  --threads N     ranks as N threads of this process\n"
      "  --single N      one thread drives all N ranks (post, then read: never blocks on itself)\n"
      "  -h, --help      this text\n"
      "  --version       the version and git revision\n",
      MAX_RANKS);
}

enum { OPT_PROCS = 256, OPT_THREADS, OPT_SINGLE, OPT_VERSION, OPT_CHILD, OPT_KEY, OPT_FD };

static const struct option longopts[] = {
    {"procs", required_argument, NULL, OPT_PROCS},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"single", required_argument, NULL, OPT_SINGLE},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    /* internal: a child of --procs is "--procs N --child RANK --key HEX --report-fd FD" */
    {"child", required_argument, NULL, OPT_CHILD},
    {"key", required_argument, NULL, OPT_KEY},
    {"report-fd", required_argument, NULL, OPT_FD},
    {NULL, 0, NULL, 0},
};

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int mode = 0, n = 0, child = -1, fd = -1, c;
  long v = 0;
  const char *key = NULL;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (c) {
    case 'h': usage(); return 0;
    case OPT_VERSION: return symmpin_test_print_version(PROG);
    case OPT_PROCS:
    case OPT_THREADS:
    case OPT_SINGLE:
      if (mode && mode != c)
        return symmpin_test_usage_error(PROG, "give one of --procs, --threads, --single");
      if (!symmpin_test_parse_int(optarg, 1, MAX_RANKS, &v))
        return symmpin_test_usage_error(PROG, "--%s takes 1..%d ranks, not '%s'",
                                        c == OPT_PROCS     ? "procs"
                                        : c == OPT_THREADS ? "threads"
                                                           : "single",
                                        MAX_RANKS, optarg);
      mode = c;
      n = (int)v;
      break;
    case OPT_CHILD:
      if (!symmpin_test_parse_int(optarg, 0, MAX_RANKS - 1, &v))
        return symmpin_test_usage_error(PROG, "bad --child '%s'", optarg);
      child = (int)v;
      break;
    case OPT_KEY: key = optarg; break;
    case OPT_FD:
      if (!symmpin_test_parse_int(optarg, 0, 1 << 20, &v))
        return symmpin_test_usage_error(PROG, "bad --report-fd '%s'", optarg);
      fd = (int)v;
      break;
    default: return symmpin_test_option_error(PROG, c, argv, longopts);
    }
  }
  if (optind < argc)
    return symmpin_test_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
  if (!mode) return symmpin_test_usage_error(PROG, "give one of --procs, --threads, --single");
  if (child >= 0) {
    if (mode != OPT_PROCS || !key || fd < 0 || child >= n)
      return symmpin_test_usage_error(PROG,
                                      "--child needs --procs N (N > RANK), --key, --report-fd");
    return run_child(child, n, key, fd);
  }
  if (mode == OPT_PROCS) return run_procs(n);
  if (mode == OPT_THREADS) return run_threads(n);
  return run_single(n);
}
