/* GPU test of symmetric pools (symmem/pool.h) agreed over a board (symmem/board.h), with ranks as
 * processes (--procs N: spawned copies of this program, CUDA IPC), as threads of one process
 * (--threads N) or all driven by one thread (--single N: post-then-read, never blocking on itself).
 * Rank r runs on GPU r % ngpus, so one GPU works (IPC on one device, shared pointers in-process)
 * and 2+ GPUs exercise P2P.
 *
 * Each rank fills its pool with a rank-specific random pattern, then (after a board barrier)
 * reads every rank's pool through symmpin_pool_addr with cudaMemcpy and with a kernel that loads
 * peer memory directly; the pool then grows by a second chunk and everything is checked again.
 * Prints `test_pool: N passed, M failed` and exits non-zero on any failure. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "symmem/board.h"
#include "symmem/pool.h"
#include "tests/symmem/pool_pattern.h"

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

/* ---- steps: each is a "post" half and a "read" half, so that one thread can post for all its
 * ranks before reading any (--single) -------------------------------------------------------- */

typedef enum step {
  STEP_FACTS,   /* post eligibility facts; read: check_peers */
  STEP_GROW,    /* post a pool export record; read: attach, fill own new chunk */
  STEP_VERIFY,  /* post size (barrier: everyone filled); read: verify every rank's pool */
  STEP_NOGROW,  /* reserve no more than the size: empty records, nothing changes */
  STEP_UNMAP,   /* unmap peers, post (barrier: nobody maps our chunks any more) */
  STEP_COUNT
} step;

static const step plan[] = {STEP_FACTS, STEP_GROW,   STEP_VERIFY, STEP_NOGROW,
                            STEP_GROW,  STEP_VERIFY, STEP_UNMAP};
#define PLAN_STEPS (sizeof(plan) / sizeof(plan[0]))

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
  case STEP_GROW: {
    size_t want = grow_target(symmpin_pool_size(c->pool), c->nchunks);
    symmpin_status st = symmpin_pool_reserve(c->pool, want, c->out);
    check(c, st == SYMMPIN_OK, "reserve(%zu): %s", want, symmpin_status_name(st));
    c->out_bytes = SYMMPIN_POOL_EXPORT_BYTES;
    break;
  }
  case STEP_NOGROW: {
    symmpin_status st = symmpin_pool_reserve(c->pool, symmpin_pool_size(c->pool) - 1, c->out);
    check(c, st == SYMMPIN_OK, "reserve(size - 1): %s", symmpin_status_name(st));
    c->out_bytes = SYMMPIN_POOL_EXPORT_BYTES;
    break;
  }
  case STEP_VERIFY: {
    uint64_t size = symmpin_pool_size(c->pool);
    memcpy(c->out, &size, sizeof(size));
    c->out_bytes = sizeof(size);
    break;
  }
  case STEP_UNMAP: {
    symmpin_status st = symmpin_pool_unmap_peers(c->pool);
    check(c, st == SYMMPIN_OK, "unmap_peers: %s", symmpin_status_name(st));
    check(c, symmpin_pool_addr(c->pool, (c->rank + 1) % c->nranks, 0) == NULL || c->nranks == 1,
          "a peer's address after unmap_peers");
    check(c, symmpin_pool_addr(c->pool, c->rank, 0) != NULL, "own address after unmap_peers");
    break;
  }
  default:
    break;
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
    check(c, kbad == 0, "kernel loads of rank %d's [%zu, %zu): %llu words differ", r, from, to, kbad);
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
    break;
  }
  case STEP_GROW: {
    size_t old = symmpin_pool_size(c->pool);
    st = symmpin_pool_attach(c->pool, blobs);
    check(c, st == SYMMPIN_OK, "attach: %s", symmpin_status_name(st));
    if (st != SYMMPIN_OK) return;
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
    break;
  }
  case STEP_NOGROW: {
    size_t before = symmpin_pool_size(c->pool);
    st = symmpin_pool_attach(c->pool, blobs);
    check(c, st == SYMMPIN_OK && symmpin_pool_size(c->pool) == before, "attach without growth: %s",
          symmpin_status_name(st));
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
    for (int r = 0; r < c->nranks; r++) {
      from = 0;
      for (int i = 0; i < c->nchunks; i++) {
        verify_range(c, r, from, c->chunk_end[i], host);
        from = c->chunk_end[i];
      }
    }
    free(host);
    break;
  }
  default:
    break;
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

/* After the last (unmap) barrier nobody maps our chunks: free them, agree on a verdict. */
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
      step_post(c, plan[i]);
      step_read(c, plan[i]);
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
  if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
    perror("getrandom");
    exit(2);
  }
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
  for (size_t i = 0; ok && i < PLAN_STEPS; i++) {
    step_post(&c[0], plan[i]);
    if (i == 1 && n > 1) {
      /* Rank 0 posted this round, rank 1 (this thread's too) not yet: waiting would deadlock,
       * so the board must say DISAGREE at once. */
      int missing = -1;
      symmpin_status st = symmpin_board_wait(c[0].board, c[0].round, WAIT_MS, c[0].tid, &missing);
      check(&c[0], st == SYMMPIN_ERR_DISAGREE && missing == 1,
            "wait on a rank of the same thread: %s, missing %d", symmpin_status_name(st), missing);
    }
    for (int r = 1; r < n; r++) step_post(&c[r], plan[i]);
    for (int r = 0; r < n; r++) step_read(&c[r], plan[i]);
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
    char *argv[] = {"test_pool", "--child", rstr, nstr, keyhex, fdstr, NULL};
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

static int usage(void) {
  fprintf(stderr, "usage: test_pool --procs N | --threads N | --single N   (1 <= N <= %d)\n",
          MAX_RANKS);
  return 2;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 6 && strcmp(argv[1], "--child") == 0)
    return run_child(atoi(argv[2]), atoi(argv[3]), argv[4], atoi(argv[5]));
  if (argc != 3) return usage();
  int n = atoi(argv[2]);
  if (n < 1 || n > MAX_RANKS) return usage();
  if (strcmp(argv[1], "--procs") == 0) return run_procs(n);
  if (strcmp(argv[1], "--threads") == 0) return run_threads(n);
  if (strcmp(argv[1], "--single") == 0) return run_single(n);
  return usage();
}
