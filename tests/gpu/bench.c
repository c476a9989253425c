/* symmpin-bench: all-reduce latency of NCCL against symmpin's one-shot kernels, in one run.
 *
 * Variants, each timed eagerly (a host launch per call, back to back) and as CUDA-graph replays:
 *   nccl      ncclAllReduce on cudaMalloc'd buffers;
 *   nccl_win  ncclAllReduce on ncclMemAlloc'd buffers registered as symmetric windows
 *             (NCCL_WIN_COLL_SYMMETRIC: NCCL's own fastest small-message path);
 *   staged    symmpin_oneshot_launch, form STAGED, user buffer -> separate output;
 *   direct    symmpin_oneshot_launch, form DIRECT, input already in the slot's data area.
 * symmpin's slots live in a symmetric pool (symmem/pool.h) agreed over a board (symmem/board.h),
 * exactly as the library's engine gets them. Results are checked before timing (random non-zero
 * data, a float64 reference over every rank's inputs, symmpin bitwise against NCCL on <= 2 ranks)
 * and symmpin's outputs again after timing (the replays must leave the same bits).
 *
 * Modes: one process per GPU (default; this program spawns itself once per rank with posix_spawn,
 * never fork after CUDA init; the mode that counts for eager numbers) and --single (one thread
 * drives every GPU, as single-process programs do). Why rounds: eager small-message times are
 * bimodal run to run, so every size is timed in R rounds that alternate the four variants, and the
 * tables give the best and the median of each. docs/bench.md explains the output and the targets.
 *
 * Robustness: every CUDA/NCCL/symmpin return code is checked (file:line on failure); host barriers
 * (board rounds) and GPU waits give up after --timeout seconds; symmpin kernels get ~10 s of clock
 * cycles and a host-mapped error record; a watchdog thread ends a rank that makes no progress.
 * Last line: `symmpin-bench: done`, or `symmpin-bench: N passed, M failed` (exit status 1). */
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels/oneshot.h"
#include "common/types.h"
#include "symmem/board.h"
#include "symmem/pool.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 27, 0)
#error "symmpin-bench needs NCCL >= 2.27 (symmetric windows)"
#endif

extern char **environ;

#define BENCH "symmpin-bench"
#define MAX_SIZES 64
#define MAX_DTYPES 2
#define MAX_ROUNDS 64
#define CHILD_FD 100 /* where a child finds the pipe to report its counts on */

enum { V_NCCL, V_WIN, V_STAGED, V_DIRECT, V_COUNT };
enum { M_EAGER, M_GRAPH, M_COUNT };
static const char *const v_name[V_COUNT] = {"nccl", "nccl_win", "symmpin_staged", "symmpin_direct"};
static const char *const v_short[V_COUNT] = {"nccl", "nccl_win", "staged", "direct"};
static const char *const m_name[M_COUNT] = {"eager", "graph"};
#define NCCL_MASK ((1u << V_NCCL) | (1u << V_WIN))
#define SYMM_MASK ((1u << V_STAGED) | (1u << V_DIRECT))

/* ------------------------------------------------------------------ errors, clock, watchdog */

static int g_rank = -1; /* for messages: this process's rank, -1 in the parent / --single */

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (g_rank >= 0)
    fprintf(stderr, BENCH ": rank %d: FATAL: ", g_rank);
  else
    fprintf(stderr, BENCH ": FATAL: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  fflush(stdout);
  exit(2);
}

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) die("%s:%d: %s: %s", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
  } while (0)

#define NK(x)                                                                                      \
  do {                                                                                             \
    ncclResult_t r_ = (x);                                                                         \
    if (r_ != ncclSuccess)                                                                         \
      die("%s:%d: %s: %s (%s)", __FILE__, __LINE__, #x, ncclGetErrorString(r_),                    \
          ncclGetLastError(NULL));                                                                 \
  } while (0)

#define SK(x)                                                                                      \
  do {                                                                                             \
    symmpin_status s_ = (x);                                                                       \
    if (s_ != SYMMPIN_OK) die("%s:%d: %s: %s", __FILE__, __LINE__, #x, symmpin_status_name(s_));   \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The watchdog ends a rank whose main thread has not ticked for a while: a hang inside NCCL
 * (init, capture) or the driver is reported instead of waited on forever. */
static _Atomic(const char *) g_phase = "start";
static _Atomic size_t g_phase_bytes;
static _Atomic double g_tick;
static unsigned g_watchdog_s = 180;

static void tick(const char *phase, size_t bytes) {
  atomic_store(&g_phase, phase);
  atomic_store(&g_phase_bytes, bytes);
  atomic_store(&g_tick, now_s());
}

static void *watchdog_main(void *arg) {
  (void)arg;
  for (;;) {
    sleep(1);
    double idle = now_s() - atomic_load(&g_tick);
    if (idle > g_watchdog_s) {
      fprintf(stderr, BENCH ": rank %d: no progress for %.0f s in %s (%zu bytes); giving up\n",
              g_rank, idle, atomic_load(&g_phase), atomic_load(&g_phase_bytes));
      fflush(stdout);
      _exit(3);
    }
  }
  return NULL;
}

static void watchdog_start(void) {
  tick("start", 0);
  pthread_t t;
  if (pthread_create(&t, NULL, watchdog_main, NULL) != 0) die("pthread_create (watchdog) failed");
  pthread_detach(t);
}

/* ------------------------------------------------------------------------------- options */

typedef struct opts {
  size_t sizes[MAX_SIZES];
  int nsizes;
  int dtypes[MAX_DTYPES];
  int ndtypes;
  int rounds;
  int nranks; /* 0: every visible GPU (at most SYMMPIN_MAX_RANKS) */
  bool single, quick, seed_set;
  uint64_t seed;
  unsigned timeout_s;
  const char *csv;
  int child_rank; /* >= 0 in a spawned child */
  const char *child_id;
} opts;

static const size_t default_sizes[] = {8,        32,        128,       512,       1 << 10,
                                       2 << 10,  4 << 10,   8 << 10,   16 << 10,  32 << 10,
                                       64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20,
                                       2 << 20,  8 << 20,   32 << 20,  64 << 20};

static int usage(void) {
  fprintf(stderr,
          "usage: " BENCH " [--single] [--ranks N] [--sizes LIST] [--dtypes LIST] [--rounds R]\n"
          "                     [--csv PATH] [--quick] [--seed S] [--timeout SECONDS]\n"
          "  --single        one thread drives every GPU (default: one process per GPU)\n"
          "  --ranks N       GPUs to use, 1..%d (default: all visible)\n"
          "  --sizes LIST    bytes, comma separated, K/M/G suffixes (default 8 .. 64M)\n"
          "  --dtypes LIST   bf16,f32 (default both)\n"
          "  --rounds R      alternating rounds per size (default 5)\n"
          "  --csv PATH      where rank 0 writes the CSV (default symmpin-bench.csv)\n"
          "  --timeout S     host barriers and GPU waits give up after S seconds (default 120)\n"
          "  --quick         2 rounds and 1/5 of the calls (smoke test)\n",
          SYMMPIN_MAX_RANKS);
  return 2;
}

static size_t parse_size(const char *s) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return 0;
  switch (*end) {
  case 'k':
  case 'K':
    v <<= 10;
    end++;
    break;
  case 'm':
  case 'M':
    v <<= 20;
    end++;
    break;
  case 'g':
  case 'G':
    v <<= 30;
    end++;
    break;
  default: break;
  }
  if (*end == 'B' || *end == 'b') end++;
  return *end ? 0 : (size_t)v;
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

static int parse_dtype(const char *s) {
  if (!strcmp(s, "bf16") || !strcmp(s, "bfloat16")) return SYMMPIN_BFLOAT16;
  if (!strcmp(s, "f32") || !strcmp(s, "float") || !strcmp(s, "float32")) return SYMMPIN_FLOAT32;
  return -1; /* the host-side data generator and checks know these two */
}

static int parse_opts(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof(*o));
  o->rounds = 5;
  o->timeout_s = 120;
  o->child_rank = -1;
  o->csv = "symmpin-bench.csv";
  for (size_t i = 0; i < sizeof(default_sizes) / sizeof(default_sizes[0]); i++)
    o->sizes[o->nsizes++] = default_sizes[i];
  o->dtypes[o->ndtypes++] = SYMMPIN_BFLOAT16;
  o->dtypes[o->ndtypes++] = SYMMPIN_FLOAT32;
  bool rounds_set = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VAL()                                                                                 \
  do {                                                                                             \
    if (!val) {                                                                                    \
      fprintf(stderr, BENCH ": %s needs a value\n", a);                                            \
      return -1;                                                                                   \
    }                                                                                              \
    i++;                                                                                           \
  } while (0)
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      return 1;
    } else if (!strcmp(a, "--single")) {
      o->single = true;
    } else if (!strcmp(a, "--quick")) {
      o->quick = true;
    } else if (!strcmp(a, "--ranks")) {
      NEED_VAL();
      o->nranks = atoi(val);
      if (o->nranks < 1 || o->nranks > SYMMPIN_MAX_RANKS) {
        fprintf(stderr, BENCH ": --ranks must be 1..%d\n", SYMMPIN_MAX_RANKS);
        return -1;
      }
    } else if (!strcmp(a, "--rounds")) {
      NEED_VAL();
      o->rounds = atoi(val);
      rounds_set = true;
      if (o->rounds < 1 || o->rounds > MAX_ROUNDS) {
        fprintf(stderr, BENCH ": --rounds must be 1..%d\n", MAX_ROUNDS);
        return -1;
      }
    } else if (!strcmp(a, "--csv")) {
      NEED_VAL();
      o->csv = val;
    } else if (!strcmp(a, "--seed")) {
      NEED_VAL();
      o->seed = strtoull(val, NULL, 0);
      o->seed_set = true;
    } else if (!strcmp(a, "--timeout")) {
      NEED_VAL();
      o->timeout_s = (unsigned)atoi(val);
      if (o->timeout_s < 5) o->timeout_s = 5;
    } else if (!strcmp(a, "--sizes")) {
      NEED_VAL();
      char buf[1024];
      snprintf(buf, sizeof(buf), "%s", val);
      o->nsizes = 0;
      char *save = NULL;
      for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t s = parse_size(t);
        if (!s || o->nsizes == MAX_SIZES) {
          fprintf(stderr, BENCH ": bad size '%s' (or more than %d sizes)\n", t, MAX_SIZES);
          return -1;
        }
        o->sizes[o->nsizes++] = s;
      }
      if (!o->nsizes) return -1;
      qsort(o->sizes, (size_t)o->nsizes, sizeof(size_t), cmp_size);
    } else if (!strcmp(a, "--dtypes")) {
      NEED_VAL();
      char buf[256];
      snprintf(buf, sizeof(buf), "%s", val);
      o->ndtypes = 0;
      char *save = NULL;
      for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int d = parse_dtype(t);
        if (d < 0 || o->ndtypes == MAX_DTYPES) {
          fprintf(stderr, BENCH ": unknown or repeated dtype '%s' (bf16, f32)\n", t);
          return -1;
        }
        o->dtypes[o->ndtypes++] = d;
      }
      if (!o->ndtypes) return -1;
    } else if (!strcmp(a, "--child")) {
      /* --child RANK IDHEX: added by the parent of the process-per-GPU mode */
      if (i + 2 >= argc) return -1;
      o->child_rank = atoi(argv[i + 1]);
      o->child_id = argv[i + 2];
      i += 2;
    } else {
      fprintf(stderr, BENCH ": unknown option '%s'\n", a);
      return -1;
    }
#undef NEED_VAL
  }
  if (o->quick && !rounds_set) o->rounds = 2;
  return 0;
}

/* ------------------------------------------------------------- data: inputs, reference, hash */

static uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static uint16_t bf16_from_float(float f) { /* round to nearest even; inputs are finite */
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static float bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Rank r's input element i for one (dtype, size): +-[0.5, 2), never zero, a pure function of
 * (key, i) so that any rank can recompute every rank's inputs for the reference. */
static float input_value(uint64_t rank_key, size_t i) {
  uint64_t h = splitmix(rank_key + (uint64_t)i);
  float mag = 0.5f + 1.5f * (float)(h >> 40) * (1.0f / 16777216.0f);
  return (h & 1) ? -mag : mag;
}

static uint64_t rank_key(uint64_t size_seed, int r) {
  return splitmix(size_seed ^ (0x100000001B3ull * (uint64_t)(r + 1)));
}

static uint64_t size_seed(uint64_t seed, int dtype, size_t bytes) {
  return splitmix(seed ^ splitmix(((uint64_t)dtype << 56) ^ (uint64_t)bytes));
}

static void fill_input(void *dst, int dtype, size_t count, uint64_t key) {
  if (dtype == SYMMPIN_BFLOAT16) {
    uint16_t *p = dst;
    for (size_t i = 0; i < count; i++) p[i] = bf16_from_float(input_value(key, i));
  } else {
    float *p = dst;
    for (size_t i = 0; i < count; i++) p[i] = input_value(key, i);
  }
}

/* The input element as the GPU sees it (after rounding to the dtype), exactly, in double. */
static double input_elem(int dtype, uint64_t key, size_t i) {
  float v = input_value(key, i);
  return dtype == SYMMPIN_BFLOAT16 ? (double)bf16_to_float(bf16_from_float(v)) : (double)v;
}

static double decode(int dtype, const void *p, size_t i) {
  if (dtype == SYMMPIN_BFLOAT16) {
    uint16_t h;
    memcpy(&h, (const char *)p + 2 * i, 2);
    return bf16_to_float(h);
  }
  float f;
  memcpy(&f, (const char *)p + 4 * i, 4);
  return f;
}

static uint64_t hash_bytes(const void *p, size_t n) { /* FNV-1a over 8-byte words */
  const uint8_t *q = p;
  uint64_t h = 1469598103934665603ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, q + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < n; i++) h = (h ^ q[i]) * 1099511628211ull;
  return h ^ n;
}

/* ------------------------------------------------------------------------------ the bench */

typedef struct rank_st {
  int rank, device;
  cudaStream_t stream;
  cudaEvent_t ev0, ev1;
  ncclComm_t comm;
  symmpin_board *board;
  symmpin_pool *pool;
  void *send;                       /* cudaMalloc'd input of nccl and staged */
  void *win_send;                   /* ncclMemAlloc'd input of nccl_win */
  void *out[V_COUNT];               /* outputs; out[V_WIN] is ncclMemAlloc'd */
  ncclWindow_t win[2];              /* windows of win_send and out[V_WIN] (NULL: not registered) */
  void *slot[2][SYMMPIN_MAX_RANKS]; /* [form][rank] */
  symmpin_oneshot_error *err[2], *err_dev[2]; /* per form: host view, device view */
  symmpin_oneshot_call call[2];
  cudaGraphExec_t exec[V_COUNT];
  uint64_t pre_hash[2]; /* symmpin outputs at the check before timing */
  bool pre_ok[2];       /* pre_hash[f] holds this size's check */
  int passed, failed;
} rank_st;

typedef struct bench {
  opts o;
  int n, nlocal;
  rank_st *loc; /* the ranks this thread drives (1, or all with --single) */
  uint64_t tid;
  uint32_t round;
  size_t max_bytes; /* the largest size */
  size_t buf_bytes; /* device buffers: max_bytes rounded up to 2 MiB (NCCL's granularity) */
  bool reporter;    /* drives rank 0: prints and writes the CSV */
  bool win_ok, pool_ok;
  bool form_ok[2]; /* a form is dropped on every rank after a kernel timed out */
  size_t slot_off[2], slot_bytes[2];
  uint64_t timeout_cycles;
  double *us; /* rank 0's per-call microseconds [mode][dtype][size][variant][round]; NAN: none */
  int iters[MAX_SIZES];
  uint8_t *bad; /* [dtype][size][variant]: a result check failed on some rank */
  uint8_t *host_in, *host_out[V_COUNT];
  char gpu_desc[SYMMPIN_MAX_RANKS][128];
  char no_pool_why[192];
} bench;

static double *us_at(bench *b, int m, int d, int s, int v) {
  size_t i = (((size_t)m * MAX_DTYPES + (size_t)d) * MAX_SIZES + (size_t)s) * V_COUNT + (size_t)v;
  return b->us + i * (size_t)b->o.rounds;
}

static uint8_t *bad_at(bench *b, int d, int s, int v) {
  return b->bad + ((size_t)d * MAX_SIZES + (size_t)s) * V_COUNT + (size_t)v;
}

static void tally(rank_st *s, bool ok) {
  if (ok)
    s->passed++;
  else
    s->failed++;
}

/* ---------------------------------------------------------------- host barrier (board rounds) */

/* One board round: every local rank posts its blob, then this thread spins (bounded) until every
 * rank posted; out[r] points at rank r's blob. A blob stays readable until its rank posts twice
 * more, and no rank posts round k+1 before it read round k, so copying before the next exchange
 * is enough. Spinning, not sleeping: the release skew between ranks is what the next timed
 * section's warm-up calls must absorb. */
static void exchange(bench *b, const void *blobs, size_t bytes, const void *out[]) {
  b->round++;
  for (int l = 0; l < b->nlocal; l++)
    SK(symmpin_board_post(b->loc[l].board, b->round, (const char *)blobs + (size_t)l * bytes, bytes,
                          b->tid));
  double t0 = 0;
  for (unsigned spins = 1; !symmpin_board_round_complete(b->loc[0].board, b->round); spins++) {
    if ((spins & 255) == 0) {
      if (t0 == 0) t0 = now_s();
      sched_yield();
      if (now_s() - t0 > b->o.timeout_s) {
        int missing = -1;
        (void)symmpin_board_wait(b->loc[0].board, b->round, 0, 0, &missing);
        die("host barrier (board round %u): rank %d did not arrive within %u s", b->round, missing,
            b->o.timeout_s);
      }
    }
  }
  for (int r = 0; r < b->n; r++) {
    size_t got = 0;
    out[r] = symmpin_board_blob(b->loc[0].board, b->round, r, &got);
    if (!out[r] || got != bytes)
      die("board round %u: rank %d's blob is %s (%zu bytes, expected %zu)", b->round, r,
          out[r] ? "the wrong size" : "missing", got, bytes);
  }
}

typedef struct sync_blob {
  uint32_t flags;    /* SB_* */
  uint32_t bad_mask; /* variants whose result check failed on this rank */
  uint64_t hash[2];  /* symmpin outputs [form] when flags has SB_HASH << form */
} sync_blob;
/* Flags: a form timed out; hash[f] is valid (SB_HASH << form). */
enum { SB_TIMEOUT_STAGED = 1u << 0, SB_TIMEOUT_DIRECT = 1u << 1, SB_HASH = 1u << 2 };

/* Timeouts the kernels reported on this thread's ranks since the forms were last agreed on. */
static uint32_t local_timeouts(bench *b) {
  uint32_t flags = 0;
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    for (int f = 0; f < 2; f++) {
      if (!b->pool_ok || !b->form_ok[f] || !s->err[f]->timed_out) continue;
      fprintf(stderr, BENCH ": rank %d: symmpin %s kernel timed out waiting for rank %d\n", s->rank,
              f ? "direct" : "staged", (int)s->err[f]->peer);
      tally(s, false);
      flags |= f ? SB_TIMEOUT_DIRECT : SB_TIMEOUT_STAGED;
    }
  }
  return flags;
}

/* A barrier that also spreads timeouts, failed checks and output hashes: returns the OR of every
 * rank's flags and bad masks; with hashes, every local rank compares them with every rank's. */
static sync_blob barrier(bench *b, const sync_blob *mine /* nlocal entries, or NULL */) {
  sync_blob local[SYMMPIN_MAX_RANKS];
  uint32_t to = local_timeouts(b);
  for (int l = 0; l < b->nlocal; l++) {
    if (mine)
      local[l] = mine[l];
    else
      memset(&local[l], 0, sizeof(local[l]));
    local[l].flags |= to;
  }
  const void *out[SYMMPIN_MAX_RANKS];
  exchange(b, local, sizeof(sync_blob), out);
  sync_blob all = {0, 0, {0, 0}};
  sync_blob got[SYMMPIN_MAX_RANKS];
  for (int r = 0; r < b->n; r++) {
    memcpy(&got[r], out[r], sizeof(got[r]));
    all.flags |= got[r].flags;
    all.bad_mask |= got[r].bad_mask;
  }
  for (int f = 0; f < 2; f++) {
    if (b->form_ok[f] && (all.flags & (f ? SB_TIMEOUT_DIRECT : SB_TIMEOUT_STAGED))) {
      b->form_ok[f] = false;
      if (b->reporter)
        fprintf(stderr, BENCH ": symmpin %s dropped for the rest of the run after a timeout\n",
                f ? "direct" : "staged");
    }
  }
  if (mine) {
    /* Every rank reduces in rank order 0..n-1 with the same arithmetic: outputs must be bitwise
     * equal across ranks. */
    for (int l = 0; l < b->nlocal; l++) {
      for (int f = 0; f < 2; f++) {
        uint32_t bit = SB_HASH << f;
        if (!(local[l].flags & bit)) continue;
        bool same = true;
        for (int r = 0; r < b->n; r++)
          same &= !(got[r].flags & bit) || got[r].hash[f] == local[l].hash[f];
        if (!same) {
          fprintf(stderr, BENCH ": rank %d: symmpin %s output differs between ranks\n",
                  b->loc[l].rank, f ? "direct" : "staged");
          all.bad_mask |= 1u << (f ? V_DIRECT : V_STAGED);
        }
        tally(&b->loc[l], same);
      }
    }
  }
  return all;
}

/* ------------------------------------------------------------------------- GPU work, timing */

/* Waits for every local stream, bounded. During timed sections a symmpin timeout is fatal: the
 * calls still queued behind it would each wait ~10 s more. */
static void sync_all(bench *b, bool in_section) {
  double t0 = now_s();
  for (unsigned spins = 1;; spins++) {
    bool busy = false;
    for (int l = 0; l < b->nlocal; l++) {
      cudaError_t e = cudaStreamQuery(b->loc[l].stream);
      if (e == cudaErrorNotReady)
        busy = true;
      else
        CK(e);
    }
    if (!busy) return;
    if ((spins & 1023) == 0) {
      for (int l = 0; l < b->nlocal; l++) {
        rank_st *s = &b->loc[l];
        ncclResult_t ae = ncclSuccess;
        NK(ncclCommGetAsyncError(s->comm, &ae));
        if (ae != ncclSuccess && ae != ncclInProgress)
          die("rank %d: NCCL asynchronous error: %s", s->rank, ncclGetErrorString(ae));
        for (int f = 0; f < 2 && in_section && b->pool_ok; f++)
          if (b->form_ok[f] && s->err[f]->timed_out)
            die("rank %d: symmpin %s kernel timed out (waited for rank %d) in a timed section",
                s->rank, f ? "direct" : "staged", (int)s->err[f]->peer);
      }
      if (now_s() - t0 > b->o.timeout_s)
        die("GPU work did not finish within %u s (phase %s)", b->o.timeout_s,
            atomic_load(&g_phase));
    }
    sched_yield();
  }
}

static int form_of(int v) { return v == V_STAGED ? SYMMPIN_FORM_STAGED : SYMMPIN_FORM_DIRECT; }

/* Whether a variant runs for this shape; the same answer on every rank (agreed flags, pure
 * functions of the shape). */
static bool usable(const bench *b, int v, int dtype, size_t count) {
  if (v == V_NCCL || v == V_WIN) return true;
  int f = form_of(v);
  if (!b->pool_ok || !b->form_ok[f]) return false;
  size_t need = symmpin_oneshot_slot_bytes(count, dtype, b->n, (symmpin_oneshot_form)f);
  return need != 0 && need <= b->slot_bytes[f];
}

static void prepare_calls(bench *b, int dtype, size_t count) {
  for (int l = 0; l < b->nlocal && b->pool_ok; l++) {
    rank_st *s = &b->loc[l];
    for (int f = 0; f < 2; f++) {
      symmpin_oneshot_call *c = &s->call[f];
      memset(c, 0, sizeof(*c));
      for (int r = 0; r < b->n; r++) c->slot[r] = s->slot[f][r];
      c->slot_bytes = b->slot_bytes[f];
      c->rank = s->rank;
      c->nranks = b->n;
      c->send = f == SYMMPIN_FORM_STAGED ? s->send : NULL;
      c->recv = s->out[f == SYMMPIN_FORM_STAGED ? V_STAGED : V_DIRECT];
      c->count = count;
      c->dtype = dtype;
      c->op = SYMMPIN_SUM;
      c->form = (symmpin_oneshot_form)f;
      c->site = 0xBE0C0000u + (uint64_t)f;
      c->timeout_cycles = b->timeout_cycles;
      c->error = s->err_dev[f];
    }
  }
}

/* `calls` back-to-back calls of one variant on every local rank (one thread driving several
 * ranks groups NCCL's calls, as single-process programs must). */
static void issue(bench *b, int v, int dtype, size_t count, int calls) {
  for (int i = 0; i < calls; i++) {
    if (v == V_NCCL || v == V_WIN) {
      if (b->nlocal > 1) NK(ncclGroupStart());
      for (int l = 0; l < b->nlocal; l++) {
        rank_st *s = &b->loc[l];
        NK(ncclAllReduce(v == V_NCCL ? s->send : s->win_send, s->out[v], count,
                         (ncclDataType_t)dtype, ncclSum, s->comm, s->stream));
      }
      if (b->nlocal > 1) NK(ncclGroupEnd());
    } else {
      int f = form_of(v);
      for (int l = 0; l < b->nlocal; l++) {
        rank_st *s = &b->loc[l];
        if (b->nlocal > 1) CK(cudaSetDevice(s->device));
        SK(symmpin_oneshot_launch(&s->call[f], s->stream));
      }
    }
  }
}

/* Captures `calls` calls of variant v into one graph per local rank (each rank's stream). */
static void capture(bench *b, int v, int dtype, size_t count, int calls) {
  for (int l = 0; l < b->nlocal; l++)
    CK(cudaStreamBeginCapture(b->loc[l].stream, cudaStreamCaptureModeGlobal));
  issue(b, v, dtype, count, calls);
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    cudaGraph_t g = NULL;
    CK(cudaStreamEndCapture(s->stream, &g));
    CK(cudaSetDevice(s->device));
    CK(cudaGraphInstantiate(&s->exec[v], g, 0));
    CK(cudaGraphDestroy(g));
    CK(cudaGraphUpload(s->exec[v], s->stream));
  }
  sync_all(b, false);
}

static void drop_graphs(bench *b) {
  for (int l = 0; l < b->nlocal; l++) {
    for (int v = 0; v < V_COUNT; v++) {
      if (b->loc[l].exec[v]) CK(cudaGraphExecDestroy(b->loc[l].exec[v]));
      b->loc[l].exec[v] = NULL;
    }
  }
}

/* One timed section, after the caller's barrier: warm-up calls (they absorb the ranks' start skew
 * and NCCL's first-call costs), then `iters` calls between two events on rank 0's stream. Returns
 * microseconds per call as this thread's first rank sees it. */
static double section(bench *b, int m, int v, int dtype, size_t count, int iters) {
  rank_st *s0 = &b->loc[0];
  if (m == M_EAGER) {
    issue(b, v, dtype, count, iters < 10 ? 2 : 10);
    CK(cudaEventRecord(s0->ev0, s0->stream));
    issue(b, v, dtype, count, iters);
    CK(cudaEventRecord(s0->ev1, s0->stream));
  } else {
    for (int l = 0; l < b->nlocal; l++) CK(cudaGraphLaunch(b->loc[l].exec[v], b->loc[l].stream));
    CK(cudaEventRecord(s0->ev0, s0->stream));
    for (int l = 0; l < b->nlocal; l++) CK(cudaGraphLaunch(b->loc[l].exec[v], b->loc[l].stream));
    CK(cudaEventRecord(s0->ev1, s0->stream));
  }
  sync_all(b, true);
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, s0->ev0, s0->ev1));
  return 1000.0 * (double)ms / (double)iters;
}

static int iters_for(const bench *b, size_t bytes) {
  size_t it = ((size_t)512 << 20) / (bytes ? bytes : 1); /* ~512 MiB per section, 8..500 calls */
  if (it > 500) it = 500;
  if (it < 8) it = 8;
  if (b->o.quick) it = it / 5 < 3 ? 3 : it / 5;
  return (int)it;
}

/* ------------------------------------------------------------------------------ result checks */

static double u_out(int dtype) {
  return dtype == SYMMPIN_BFLOAT16 ? ldexp(1.0, -8) : ldexp(1.0, -24);
}

/* Checks one local rank's outputs (in b->host_out) against a float64 reference over every rank's
 * inputs. NCCL may add in any order and round every partial sum to the output type:
 * |got - ref| <= u_out |ref| + (n-1) u_out S (S = sum of |x_i|). symmpin accumulates in float in
 * rank order and rounds once (docs/kernels.md): u_out |ref| + 2 n 2^-24 S; on <= 2 ranks a sum
 * rounds once in any order, so symmpin must also be bitwise equal to NCCL's output wherever
 * NCCL's is right. Returns the mask of variants that failed; prints the first bad element. */
static uint32_t compare_outputs(bench *b, const rank_st *s, int dtype, size_t count, uint64_t sseed,
                                uint32_t ran) {
  uint64_t keys[SYMMPIN_MAX_RANKS];
  for (int r = 0; r < b->n; r++) keys[r] = rank_key(sseed, r);
  size_t es = symmpin_dtype_size(dtype);
  double uo = u_out(dtype), ua = ldexp(1.0, -24);
  uint32_t bad = 0;
  for (size_t i = 0; i < count; i++) {
    double ref = 0, S = 0;
    for (int r = 0; r < b->n; r++) {
      double x = input_elem(dtype, keys[r], i);
      ref += x;
      S += fabs(x);
    }
    bool nccl_ok = false;
    for (int v = 0; v < V_COUNT; v++) {
      if (!(ran & (1u << v))) continue;
      double got = decode(dtype, b->host_out[v], i);
      bool symm = v == V_STAGED || v == V_DIRECT;
      double tol = symm ? uo * fabs(ref) + 2.0 * b->n * ua * S
                        : uo * fabs(ref) + (double)(b->n - 1) * uo * S;
      bool ok = fabs(got - ref) <= tol; /* false for NaN (the poison) */
      if (v == V_NCCL) nccl_ok = ok;
      bool bitwise = true;
      if (ok && symm && b->n <= 2 && nccl_ok && (ran & (1u << V_NCCL)))
        bitwise = ok = memcmp(b->host_out[v] + i * es, b->host_out[V_NCCL] + i * es, es) == 0;
      if (!ok && !(bad & (1u << v))) {
        bad |= 1u << v;
        char extra[96] = "";
        if (!bitwise)
          snprintf(extra, sizeof(extra), ", not bitwise equal to NCCL's %.9g",
                   decode(dtype, b->host_out[V_NCCL], i));
        fprintf(stderr,
                BENCH ": rank %d: %s %s %zu bytes: element %zu is %.9g, reference %.9g "
                      "(tolerance %.3g)%s\n",
                s->rank, v_name[v], symmpin_dtype_name(dtype), count * es, i, got, ref, tol, extra);
      }
    }
  }
  return bad;
}

/* Fresh inputs on every rank, poisoned outputs, one call of every variant, then the checks. */
static void check_size(bench *b, int di, int si, int dtype, size_t count) {
  size_t es = symmpin_dtype_size(dtype), bytes = count * es;
  uint64_t sseed = size_seed(b->o.seed, dtype, bytes);
  tick("check", bytes);
  sync_all(b, false);
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    CK(cudaSetDevice(s->device));
    fill_input(b->host_in, dtype, count, rank_key(sseed, s->rank));
    CK(cudaMemcpyAsync(s->send, b->host_in, bytes, cudaMemcpyHostToDevice, s->stream));
    CK(cudaMemcpyAsync(s->win_send, b->host_in, bytes, cudaMemcpyHostToDevice, s->stream));
    if (b->pool_ok)
      CK(cudaMemcpyAsync((char *)s->slot[SYMMPIN_FORM_DIRECT][s->rank] +
                             symmpin_oneshot_direct_data_offset(),
                         b->host_in, bytes, cudaMemcpyHostToDevice, s->stream));
    for (int v = 0; v < V_COUNT; v++) CK(cudaMemsetAsync(s->out[v], 0xFF, bytes, s->stream));
    CK(cudaStreamSynchronize(s->stream)); /* host_in is reused for the next local rank */
  }
  barrier(b, NULL); /* every rank's inputs are in place before anyone reads a peer's */
  uint32_t ran = 0;
  for (int v = 0; v < V_COUNT; v++) {
    if (!usable(b, v, dtype, count)) continue;
    issue(b, v, dtype, count, 1);
    ran |= 1u << v;
  }
  sync_all(b, false); /* a timeout here ends after ~10 s and drops the form (next barrier) */
  sync_blob mine[SYMMPIN_MAX_RANKS];
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    CK(cudaSetDevice(s->device));
    for (int v = 0; v < V_COUNT; v++)
      if (ran & (1u << v)) CK(cudaMemcpy(b->host_out[v], s->out[v], bytes, cudaMemcpyDeviceToHost));
    uint32_t bad = compare_outputs(b, s, dtype, count, sseed, ran);
    for (int v = 0; v < V_COUNT; v++)
      if (ran & (1u << v)) tally(s, !(bad & (1u << v)));
    memset(&mine[l], 0, sizeof(mine[l]));
    mine[l].bad_mask = bad;
    for (int f = 0; f < 2; f++) {
      int v = f == SYMMPIN_FORM_STAGED ? V_STAGED : V_DIRECT;
      s->pre_ok[f] = (ran & (1u << v)) != 0;
      if (!s->pre_ok[f]) continue;
      mine[l].flags |= SB_HASH << f;
      mine[l].hash[f] = s->pre_hash[f] = hash_bytes(b->host_out[v], bytes);
    }
  }
  sync_blob all = barrier(b, mine);
  for (int v = 0; v < V_COUNT; v++)
    if (all.bad_mask & (1u << v)) *bad_at(b, di, si, v) = 1;
}

/* After the timed rounds (last writes: graph replays) symmpin's outputs must still hold the bits
 * of the check: back-to-back calls and replays computed the same thing. */
static void recheck_size(bench *b, int di, int si, int dtype, size_t count) {
  size_t bytes = count * symmpin_dtype_size(dtype);
  tick("recheck", bytes);
  sync_all(b, false);
  sync_blob mine[SYMMPIN_MAX_RANKS];
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    memset(&mine[l], 0, sizeof(mine[l]));
    CK(cudaSetDevice(s->device));
    for (int v = V_STAGED; v <= V_DIRECT; v++) {
      if (!usable(b, v, dtype, count) || !s->pre_ok[form_of(v)]) continue;
      CK(cudaMemcpy(b->host_out[v], s->out[v], bytes, cudaMemcpyDeviceToHost));
      bool same = hash_bytes(b->host_out[v], bytes) == s->pre_hash[form_of(v)];
      if (!same) {
        fprintf(stderr,
                BENCH ": rank %d: %s %s %zu bytes: output after the timed calls differs from "
                      "the checked one\n",
                s->rank, v_name[v], symmpin_dtype_name(dtype), bytes);
        mine[l].bad_mask |= 1u << v;
      }
      tally(s, same);
    }
  }
  sync_blob all = barrier(b, mine);
  for (int v = 0; v < V_COUNT; v++)
    if (all.bad_mask & (1u << v)) *bad_at(b, di, si, v) = 1;
}

/* ---------------------------------------------------------------------------------- one size */

static void run_size(bench *b, int di, int si) {
  int dtype = b->o.dtypes[di];
  size_t bytes = b->o.sizes[si], es = symmpin_dtype_size(dtype);
  if (bytes % es) return; /* every rank skips alike; the tables print "-" */
  size_t count = bytes / es;
  int iters = iters_for(b, bytes);
  b->iters[si] = iters;
  prepare_calls(b, dtype, count);
  check_size(b, di, si, dtype, count);

  tick("capture", bytes);
  for (int v = 0; v < V_COUNT; v++)
    if (usable(b, v, dtype, count)) capture(b, v, dtype, count, iters);

  for (int round = 0; round < b->o.rounds; round++) {
    for (int m = 0; m < M_COUNT; m++) {
      for (int v = 0; v < V_COUNT; v++) {
        tick(m == M_EAGER ? "eager timing" : "graph timing", bytes);
        sync_all(b, false);
        barrier(b, NULL);
        /* usable() after the barrier: a form dropped there is skipped by every rank. */
        if (!usable(b, v, dtype, count) || (m == M_GRAPH && !b->loc[0].exec[v])) continue;
        double t = section(b, m, v, dtype, count, iters);
        if (b->reporter) us_at(b, m, di, si, v)[round] = t;
      }
    }
  }
  sync_all(b, false);
  drop_graphs(b);
  recheck_size(b, di, si, dtype, count);
}

/* ---------------------------------------------------------------------------------- set-up */

typedef struct hello_blob {
  symmpin_pool_facts facts;
  uint32_t win_ok;
  char desc[96];
} hello_blob;

typedef struct grow_blob {
  uint32_t peers_ok;
  uint8_t rec[SYMMPIN_POOL_EXPORT_BYTES];
} grow_blob;

static void setup_devices(bench *b) {
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    CK(cudaSetDevice(s->device));
    CK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&s->ev0));
    CK(cudaEventCreate(&s->ev1));
    for (int f = 0; f < 2; f++) {
      void *h = NULL, *d = NULL;
      CK(cudaHostAlloc(&h, sizeof(symmpin_oneshot_error), cudaHostAllocMapped));
      memset(h, 0, sizeof(symmpin_oneshot_error));
      CK(cudaHostGetDevicePointer(&d, h, 0));
      s->err[f] = h;
      s->err_dev[f] = d;
    }
    int khz = 0;
    CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, s->device));
    uint64_t cycles = khz > 0 ? (uint64_t)khz * 1000u * 10u : 20000000000ull; /* ~10 s */
    if (cycles > b->timeout_cycles) b->timeout_cycles = cycles;
  }
}

static void setup_buffers(bench *b) {
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    CK(cudaSetDevice(s->device));
    CK(cudaMalloc(&s->send, b->buf_bytes));
    for (int v = 0; v < V_COUNT; v++)
      if (v != V_WIN) CK(cudaMalloc(&s->out[v], b->buf_bytes));
    NK(ncclMemAlloc(&s->win_send, b->buf_bytes));
    NK(ncclMemAlloc(&s->out[V_WIN], b->buf_bytes));
  }
  /* Window registration is collective: every rank registers the same sizes in the same order; one
   * thread driving several ranks groups them. NCCL leaves *win NULL when the communicator has no
   * symmetric support (e.g. one rank): nccl_win is then plain NCCL on ncclMemAlloc'd memory. */
  for (int w = 0; w < 2; w++) {
    if (b->nlocal > 1) NK(ncclGroupStart());
    for (int l = 0; l < b->nlocal; l++) {
      rank_st *s = &b->loc[l];
      NK(ncclCommWindowRegister(s->comm, w ? s->out[V_WIN] : s->win_send, b->buf_bytes, &s->win[w],
                                NCCL_WIN_COLL_SYMMETRIC));
    }
    if (b->nlocal > 1) NK(ncclGroupEnd());
  }
}

/* Pools as the engine gets them: facts -> check_peers; reserve -> post export -> attach; post
 * the outcome, since attach can fail on one rank only. Every rank walks the same rounds. */
static void setup_pools(bench *b) {
  size_t staged = 0, direct = 0;
  for (int d = 0; d < b->o.ndtypes; d++) {
    size_t es = symmpin_dtype_size(b->o.dtypes[d]);
    for (int i = 0; i < b->o.nsizes; i++) {
      size_t c = b->o.sizes[i] / es;
      size_t st = symmpin_oneshot_slot_bytes(c, b->o.dtypes[d], b->n, SYMMPIN_FORM_STAGED);
      size_t di = symmpin_oneshot_slot_bytes(c, b->o.dtypes[d], b->n, SYMMPIN_FORM_DIRECT);
      if (st > staged) staged = st;
      if (di > direct) direct = di;
    }
  }
  /* Two slots, staged at offset 0 and direct after it: a slot never changes form. */
  b->slot_off[0] = 0;
  b->slot_bytes[0] = staged;
  b->slot_off[1] = (staged + 4095) / 4096 * 4096;
  b->slot_bytes[1] = direct;
  size_t total = b->slot_off[1] + direct;

  hello_blob hello[SYMMPIN_MAX_RANKS];
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    SK(symmpin_pool_facts_get(s->device, &hello[l].facts));
    hello[l].win_ok = s->win[0] != NULL && s->win[1] != NULL;
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, s->device));
    char bus[32] = "?";
    CK(cudaDeviceGetPCIBusId(bus, sizeof(bus), s->device));
    snprintf(hello[l].desc, sizeof(hello[l].desc), "GPU %d %.48s (%s, pid %d)", s->device,
             prop.name, bus, (int)getpid());
  }
  const void *out[SYMMPIN_MAX_RANKS];
  exchange(b, hello, sizeof(hello_blob), out);
  symmpin_pool_facts facts[SYMMPIN_MAX_RANKS];
  b->win_ok = true;
  for (int r = 0; r < b->n; r++) {
    const hello_blob *h = out[r];
    facts[r] = h->facts;
    b->win_ok &= h->win_ok != 0;
    snprintf(b->gpu_desc[r], sizeof(b->gpu_desc[r]), "%s", h->desc);
  }
  char why[160] = "";
  bool peers_ok = symmpin_pool_check_peers(facts, b->n, why, sizeof(why)) == SYMMPIN_OK;

  grow_blob grow[SYMMPIN_MAX_RANKS];
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    memset(&grow[l], 0, sizeof(grow[l]));
    grow[l].peers_ok = peers_ok;
    SK(symmpin_pool_create(s->rank, b->n, s->device, &s->pool));
    if (peers_ok && symmpin_pool_reserve(s->pool, total, grow[l].rec) != SYMMPIN_OK) {
      grow[l].peers_ok = 0;
      snprintf(why, sizeof(why), "rank %d could not reserve %zu bytes", s->rank, total);
    }
  }
  exchange(b, grow, sizeof(grow_blob), out);
  bool all_ok = true;
  for (int r = 0; r < b->n; r++) all_ok &= ((const grow_blob *)out[r])->peers_ok != 0;
  uint32_t attached[SYMMPIN_MAX_RANKS];
  const void *recs[SYMMPIN_MAX_RANKS];
  for (int r = 0; r < b->n; r++) recs[r] = ((const grow_blob *)out[r])->rec;
  for (int l = 0; l < b->nlocal; l++) {
    attached[l] = all_ok && symmpin_pool_attach(b->loc[l].pool, recs) == SYMMPIN_OK;
    if (all_ok && !attached[l])
      snprintf(why, sizeof(why), "attach failed on rank %d", b->loc[l].rank);
  }
  exchange(b, attached, sizeof(uint32_t), out);
  b->pool_ok = true;
  for (int r = 0; r < b->n; r++) b->pool_ok &= *(const uint32_t *)out[r] != 0;
  if (!b->pool_ok) {
    snprintf(b->no_pool_why, sizeof(b->no_pool_why), "%s", why[0] ? why : "another rank failed");
    return;
  }
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    for (int f = 0; f < 2; f++) {
      if (!symmpin_pool_fits(s->pool, b->slot_off[f], b->slot_bytes[f]))
        die("pool of %zu bytes does not fit slot [%zu, +%zu)", symmpin_pool_size(s->pool),
            b->slot_off[f], b->slot_bytes[f]);
      for (int r = 0; r < b->n; r++) {
        s->slot[f][r] = symmpin_pool_addr(s->pool, r, b->slot_off[f]);
        if (!s->slot[f][r]) die("no address for rank %d's slot at offset %zu", r, b->slot_off[f]);
      }
    }
  }
}

static void teardown(bench *b) {
  tick("teardown", 0);
  sync_all(b, false);
  drop_graphs(b);
  barrier(b, NULL); /* nobody runs a collective on the windows any more */
  for (int l = 0; l < b->nlocal; l++)
    for (int w = 0; w < 2; w++)
      if (b->loc[l].win[w]) NK(ncclCommWindowDeregister(b->loc[l].comm, b->loc[l].win[w]));
  barrier(b, NULL);
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    CK(cudaSetDevice(s->device));
    NK(ncclMemFree(s->win_send));
    NK(ncclMemFree(s->out[V_WIN]));
    CK(cudaFree(s->send));
    for (int v = 0; v < V_COUNT; v++)
      if (v != V_WIN) CK(cudaFree(s->out[v]));
    if (s->pool) SK(symmpin_pool_unmap_peers(s->pool));
  }
  barrier(b, NULL); /* nobody maps a peer's pool any more: free them (docs/symmem.md) */
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    CK(cudaSetDevice(s->device));
    symmpin_pool_destroy(s->pool);
    s->pool = NULL;
    NK(ncclCommDestroy(s->comm));
    for (int f = 0; f < 2; f++) CK(cudaFreeHost(s->err[f]));
    CK(cudaEventDestroy(s->ev0));
    CK(cudaEventDestroy(s->ev1));
    CK(cudaStreamDestroy(s->stream));
  }
  for (int l = 0; l < b->nlocal; l++) symmpin_board_close(b->loc[l].board);
}

/* ------------------------------------------------------------------------------------ report */

static void fmt_size(size_t v, char *buf, size_t len) {
  if (v >= (1u << 20) && v % (1u << 20) == 0)
    snprintf(buf, len, "%zuM", v >> 20);
  else if (v >= 1024 && v % 1024 == 0)
    snprintf(buf, len, "%zuK", v >> 10);
  else
    snprintf(buf, len, "%zu", v);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

enum { ST_BEST, ST_MEDIAN };

/* Best or median over the rounds that measured something; NAN if none did. */
static double stat_of(bench *b, int m, int d, int s, int v, int which) {
  double x[MAX_ROUNDS];
  int k = 0;
  const double *p = us_at(b, m, d, s, v);
  for (int r = 0; r < b->o.rounds; r++)
    if (!isnan(p[r])) x[k++] = p[r];
  if (!k) return NAN;
  qsort(x, (size_t)k, sizeof(double), cmp_double);
  if (which == ST_BEST) return x[0];
  return k % 2 ? x[k / 2] : 0.5 * (x[k / 2 - 1] + x[k / 2]);
}

static double min_of(bench *b, int m, int d, int s, uint32_t mask, int which) {
  double best = NAN;
  for (int v = 0; v < V_COUNT; v++) {
    if (!(mask & (1u << v))) continue;
    double x = stat_of(b, m, d, s, v, which);
    if (!isnan(x) && (isnan(best) || x < best)) best = x;
  }
  return best;
}

/* min(symmpin variants) / min(variants in den). */
static double ratio(bench *b, int m, int d, int s, uint32_t den, int which) {
  return min_of(b, m, d, s, SYMM_MASK, which) / min_of(b, m, d, s, den, which);
}

static void print_cell(double x, bool bad) {
  if (isnan(x))
    printf(" %8s ", "-");
  else
    printf(" %8.2f%c", x, bad ? '!' : ' ');
}

static void print_tables(bench *b) {
  for (int m = 0; m < M_COUNT; m++) {
    for (int d = 0; d < b->o.ndtypes; d++) {
      printf("\n== %s, %s: us per call; left: best of %d rounds, right: median; "
             "ratio = min(symmpin) / min(nccl, nccl_win) ==\n",
             m_name[m], symmpin_dtype_name(b->o.dtypes[d]), b->o.rounds);
      printf("%9s %5s |", "bytes", "calls");
      for (int half = 0; half < 2; half++) {
        for (int v = 0; v < V_COUNT; v++) printf(" %9s", v_short[v]);
        printf(" %6s |", "ratio");
      }
      printf("\n");
      for (int s = 0; s < b->o.nsizes; s++) {
        char sz[24];
        fmt_size(b->o.sizes[s], sz, sizeof(sz));
        printf("%9s %5d |", sz, b->iters[s]);
        for (int which = ST_BEST; which <= ST_MEDIAN; which++) {
          for (int v = 0; v < V_COUNT; v++)
            print_cell(stat_of(b, m, d, s, v, which), *bad_at(b, d, s, v) != 0);
          double r = ratio(b, m, d, s, NCCL_MASK, which);
          if (isnan(r))
            printf(" %6s |", "-");
          else
            printf(" %6.2f |", r);
        }
        printf("\n");
      }
    }
  }
  printf("('!' = a result check of that variant failed at that size; '-' = not measured)\n");
}

typedef struct worst {
  double r, r_best; /* worst median-based ratio, and the best-of-rounds ratio at the same point */
  size_t bytes;
  int d, m;
  int measured, missing;
  bool bad;
} worst;

static void worst_add(bench *b, worst *w, int m, int d, int s, uint32_t den) {
  double r = ratio(b, m, d, s, den, ST_MEDIAN);
  for (int v = 0; v < V_COUNT; v++)
    if ((SYMM_MASK | den) & (1u << v)) w->bad |= *bad_at(b, d, s, v) != 0;
  if (isnan(r)) {
    w->missing++;
    return;
  }
  if (!w->measured || r > w->r) {
    w->r = r;
    w->r_best = ratio(b, m, d, s, den, ST_BEST);
    w->bytes = b->o.sizes[s];
    w->d = d;
    w->m = m;
  }
  w->measured++;
}

static void print_target(bench *b, const char *what, const worst *w, double limit,
                         const char *note) {
  printf("%-62s ", what);
  if (!w->measured) {
    printf("NOT MEASURED (no size of that range ran)%s\n", note);
    return;
  }
  char sz[24];
  fmt_size(w->bytes, sz, sizeof(sz));
  /* Numbers of a variant that computed wrong results judge nothing. */
  const char *verdict = w->bad          ? "NOT JUDGED (result checks failed in this range)"
                        : w->r <= limit ? "MET"
                                        : "NOT MET";
  printf("%s  worst %.2f at %s %s %s [best-of-rounds %.2f]%s%s\n", verdict, w->r, sz, m_name[w->m],
         symmpin_dtype_name(b->o.dtypes[w->d]), w->r_best,
         w->missing ? " (some sizes not measured)" : "", note);
}

static void print_verdicts(bench *b) {
  const size_t K = 1024, M = 1024 * 1024;
  printf("\n== verdict (ratios from medians over the rounds; best-of-rounds in brackets) ==\n");
  worst t1 = {0}, t2 = {0}, t2b = {0}, t3 = {0};
  for (int d = 0; d < b->o.ndtypes; d++) {
    for (int s = 0; s < b->o.nsizes; s++) {
      size_t x = b->o.sizes[s];
      if (x >= K && x <= 64 * K) {
        worst_add(b, &t1, M_GRAPH, d, s, 1u << V_WIN);
        worst_add(b, &t2, M_EAGER, d, s, 1u << V_NCCL);
        worst_add(b, &t2b, M_EAGER, d, s, NCCL_MASK);
      }
      if (x <= M) {
        worst_add(b, &t3, M_EAGER, d, s, NCCL_MASK);
        worst_add(b, &t3, M_GRAPH, d, s, NCCL_MASK);
      }
    }
  }
  print_target(b, "graph 1K-64K: symmpin <= 0.75 x nccl_win (symmetric window)", &t1, 0.75,
               b->win_ok ? ""
                         : " (NCCL registered no window: nccl_win is plain NCCL on ncclMemAlloc)");
  print_target(b, "eager 1K-64K: symmpin <= 0.70 x nccl", &t2, 0.70,
               b->o.single ? " (single-process run: the eager target counts per process per GPU)"
                           : "");
  print_target(b, "  (same, against the best NCCL variant)", &t2b, 0.70, "");
  print_target(b, "<= 1M, eager and graph: symmpin <= 1.00 x best NCCL", &t3, 1.0, "");
  for (int m = 0; m < M_COUNT; m++) {
    for (int d = 0; d < b->o.ndtypes; d++) {
      int first_loss = -1, last_win = -1, losses = 0;
      char lost[512] = "";
      for (int s = 0; s < b->o.nsizes; s++) {
        double r = ratio(b, m, d, s, NCCL_MASK, ST_MEDIAN);
        if (isnan(r)) continue;
        if (r <= 1.0) {
          if (first_loss < 0) last_win = s;
          continue;
        }
        if (first_loss < 0) first_loss = s;
        char sz[24];
        fmt_size(b->o.sizes[s], sz, sizeof(sz));
        size_t len = strlen(lost);
        snprintf(lost + len, sizeof(lost) - len, "%s%s (%.2f)", losses++ ? ", " : "", sz, r);
      }
      printf("symmpin stops winning, %s %s: ", m_name[m], symmpin_dtype_name(b->o.dtypes[d]));
      char a[24] = "-", z[24] = "-";
      if (last_win >= 0) fmt_size(b->o.sizes[last_win], a, sizeof(a));
      if (first_loss < 0 && last_win < 0) {
        printf("nothing measured\n");
      } else if (first_loss < 0) {
        printf("never (wins through %s)\n", a);
      } else {
        fmt_size(b->o.sizes[first_loss], z, sizeof(z));
        if (last_win >= 0)
          printf("at %s (wins through %s); slower at: %s\n", z, a, lost);
        else
          printf("at %s, the smallest size measured; slower at: %s\n", z, lost);
      }
    }
  }
}

static void write_csv(bench *b) {
  FILE *f = fopen(b->o.csv, "w");
  if (!f) {
    fprintf(stderr, BENCH ": cannot write %s: %s\n", b->o.csv, strerror(errno));
    b->loc[0].failed++;
    return;
  }
  fprintf(f, "mode,dtype,bytes,variant,calls,rounds,best_us,median_us,ratio_best,ratio_median,"
             "check_ok,samples_us\n");
  for (int m = 0; m < M_COUNT; m++)
    for (int d = 0; d < b->o.ndtypes; d++)
      for (int s = 0; s < b->o.nsizes; s++)
        for (int v = 0; v < V_COUNT; v++) {
          fprintf(f, "%s,%s,%zu,%s,%d,%d,%.4f,%.4f,%.4f,%.4f,%d,", m_name[m],
                  symmpin_dtype_name(b->o.dtypes[d]), b->o.sizes[s], v_name[v], b->iters[s],
                  b->o.rounds, stat_of(b, m, d, s, v, ST_BEST), stat_of(b, m, d, s, v, ST_MEDIAN),
                  ratio(b, m, d, s, NCCL_MASK, ST_BEST), ratio(b, m, d, s, NCCL_MASK, ST_MEDIAN),
                  !*bad_at(b, d, s, v));
          const double *p = us_at(b, m, d, s, v);
          for (int r = 0; r < b->o.rounds; r++) fprintf(f, "%s%.4f", r ? ";" : "", p[r]);
          fprintf(f, "\n");
        }
  if (fclose(f) != 0) {
    fprintf(stderr, BENCH ": writing %s failed\n", b->o.csv);
    b->loc[0].failed++;
    return;
  }
  printf(BENCH ": wrote %s\n", b->o.csv);
}

static void print_header(bench *b) {
  int v = 0;
  NK(ncclGetVersion(&v));
  printf(BENCH ": %s, %d rank(s), NCCL %d.%d.%d (built against %d.%d.%d), NCCL_NVLS_ENABLE=%s\n",
         b->o.single ? "single process (one thread drives every GPU)" : "one process per GPU", b->n,
         v / 10000, (v % 10000) / 100, v % 100, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
         getenv("NCCL_NVLS_ENABLE") ? getenv("NCCL_NVLS_ENABLE") : "(unset)");
  for (int r = 0; r < b->n; r++) printf(BENCH ": rank %d: %s\n", r, b->gpu_desc[r]);
  printf(BENCH ": NCCL symmetric windows: %s\n",
         b->win_ok ? "registered on every rank"
                   : "NOT registered (communicator without symmetric support): nccl_win is plain "
                     "NCCL on ncclMemAlloc'd buffers");
  if (b->pool_ok)
    printf(BENCH ": symmpin pool: staged slot %zu bytes at 0, direct slot %zu bytes at %zu, "
                 "kernel timeout %" PRIu64 " cycles\n",
           b->slot_bytes[0], b->slot_bytes[1], b->slot_off[1], b->timeout_cycles);
  else
    printf(BENCH ": symmpin pool UNAVAILABLE (%s): symmpin columns are empty\n", b->no_pool_why);
  printf(BENCH ": %d sizes %zu..%zu bytes, dtypes", b->o.nsizes, b->o.sizes[0],
         b->o.sizes[b->o.nsizes - 1]);
  for (int d = 0; d < b->o.ndtypes; d++) printf(" %s", symmpin_dtype_name(b->o.dtypes[d]));
  printf(", %d rounds, seed 0x%016" PRIx64 "%s\n", b->o.rounds, b->o.seed,
         b->o.quick ? ", --quick" : "");
  printf(BENCH ": eager = host launch per call (10 warm-up calls, then N timed); graph = N calls "
               "captured, one warm replay, one timed; CUDA events on rank 0's stream\n");
}

/* ------------------------------------------------------------------------------- the run */

static void bench_run(bench *b, const ncclUniqueId *id, symmpin_comm_key key) {
  b->tid = (uint64_t)syscall(SYS_gettid);
  b->form_ok[0] = b->form_ok[1] = true;
  b->max_bytes = b->o.sizes[b->o.nsizes - 1];
  b->buf_bytes = (b->max_bytes + ((size_t)2 << 20) - 1) / ((size_t)2 << 20) * ((size_t)2 << 20);
  b->reporter = b->loc[0].rank == 0;
  size_t nus = (size_t)M_COUNT * MAX_DTYPES * MAX_SIZES * V_COUNT * (size_t)b->o.rounds;
  b->us = malloc(nus * sizeof(double));
  b->bad = calloc((size_t)MAX_DTYPES * MAX_SIZES * V_COUNT, 1);
  b->host_in = malloc(b->max_bytes);
  for (int v = 0; v < V_COUNT; v++) b->host_out[v] = malloc(b->max_bytes);
  if (!b->us || !b->bad || !b->host_in) die("out of host memory");
  for (int v = 0; v < V_COUNT; v++)
    if (!b->host_out[v]) die("out of host memory");
  for (size_t i = 0; i < nus; i++) b->us[i] = NAN;

  tick("setup", 0);
  setup_devices(b);
  tick("ncclCommInit", 0);
  if (id) {
    CK(cudaSetDevice(b->loc[0].device));
    NK(ncclCommInitRank(&b->loc[0].comm, b->n, *id, b->loc[0].rank));
  } else {
    ncclComm_t comms[SYMMPIN_MAX_RANKS];
    int devs[SYMMPIN_MAX_RANKS];
    for (int r = 0; r < b->n; r++) devs[r] = b->loc[r].device;
    NK(ncclCommInitAll(comms, b->n, devs));
    for (int r = 0; r < b->n; r++) b->loc[r].comm = comms[r];
  }
  for (int l = 0; l < b->nlocal; l++)
    SK(symmpin_board_open(key, b->loc[l].rank, b->n, &b->loc[l].board));
  tick("buffers and windows", 0);
  setup_buffers(b);
  tick("pools", 0);
  setup_pools(b);
  if (b->reporter) {
    print_header(b);
    if (!b->pool_ok) b->loc[0].failed++; /* no symmpin numbers: the run cannot judge anything */
  }

  for (int d = 0; d < b->o.ndtypes; d++)
    for (int s = 0; s < b->o.nsizes; s++) run_size(b, d, s);

  if (b->reporter) {
    print_tables(b);
    print_verdicts(b);
    write_csv(b);
    fflush(stdout);
  }
  teardown(b);
  free(b->us);
  free(b->bad);
  free(b->host_in);
  for (int v = 0; v < V_COUNT; v++) free(b->host_out[v]);
}

static int final_line(int passed, int failed) {
  if (failed == 0) {
    printf(BENCH ": %d result checks passed\n", passed);
    printf(BENCH ": done\n");
    return 0;
  }
  printf(BENCH ": %d passed, %d failed\n", passed, failed);
  return 1;
}

static int visible_ranks(const opts *o) {
  int ngpus = 0;
  cudaError_t e = cudaGetDeviceCount(&ngpus);
  if (e != cudaSuccess || ngpus < 1) {
    fprintf(stderr, BENCH ": no CUDA device (%s)\n", cudaGetErrorString(e));
    return 0;
  }
  int n = o->nranks ? o->nranks : (ngpus < SYMMPIN_MAX_RANKS ? ngpus : SYMMPIN_MAX_RANKS);
  if (n > ngpus) {
    fprintf(stderr, BENCH ": --ranks %d needs %d GPUs, %d visible (NCCL wants one GPU per rank)\n",
            n, n, ngpus);
    return 0;
  }
  return n;
}

static void random_bytes(void *p, size_t n) {
  if (getrandom(p, n, 0) != (ssize_t)n) die("getrandom failed");
}

static bench *bench_new(const opts *o, int n, int nlocal, int first_rank) {
  bench *b = calloc(1, sizeof(*b));
  if (!b) die("out of host memory");
  b->o = *o;
  b->n = n;
  b->nlocal = nlocal;
  b->loc = calloc((size_t)nlocal, sizeof(rank_st));
  if (!b->loc) die("out of host memory");
  for (int l = 0; l < nlocal; l++) {
    b->loc[l].rank = first_rank + l;
    b->loc[l].device = first_rank + l; /* rank r on GPU r */
  }
  return b;
}

static int run_single(const opts *o) {
  int n = visible_ranks(o);
  if (!n) return final_line(0, 1);
  watchdog_start();
  bench *b = bench_new(o, n, n, 0);
  symmpin_comm_key key;
  random_bytes(&key, sizeof(key));
  bench_run(b, NULL, key);
  int passed = 0, failed = 0;
  for (int l = 0; l < n; l++) {
    passed += b->loc[l].passed;
    failed += b->loc[l].failed;
  }
  free(b->loc);
  free(b);
  return final_line(passed, failed);
}

static int run_child(const opts *o) {
  g_rank = o->child_rank;
  ncclUniqueId id;
  const char *hex = o->child_id;
  if (strlen(hex) != 2 * sizeof(id)) die("bad --child id");
  for (size_t i = 0; i < sizeof(id); i++) {
    unsigned x = 0;
    if (sscanf(hex + 2 * i, "%2x", &x) != 1) die("bad --child id");
    ((unsigned char *)&id)[i] = (unsigned char)x;
  }
  int n = o->nranks;
  if (n < 1 || g_rank < 0 || g_rank >= n) die("bad --child rank %d of %d", g_rank, n);
  alarm(3600); /* last resort: the watchdog and the timeouts should fire long before */
  watchdog_start();
  bench *b = bench_new(o, n, 1, g_rank);
  bench_run(b, &id, symmpin_comm_key_of_bytes(&id, sizeof(id)));
  int passed = b->loc[0].passed, failed = b->loc[0].failed;
  dprintf(CHILD_FD, "%d %d %d\n", g_rank, passed, failed);
  free(b->loc);
  free(b);
  return failed ? 1 : 0;
}

/* The parent never creates a CUDA context (it counts devices and makes NCCL's unique id, whose
 * bootstrap root lives here until the children connect), spawns one copy of this program per
 * rank, collects their counts and prints the last line. A rank that dies takes the others down
 * after a grace period instead of leaving them waiting. */
static int run_parent(const opts *o, int argc, char **argv) {
  int n = visible_ranks(o);
  if (!n) return final_line(0, 1);
  ncclUniqueId id;
  NK(ncclGetUniqueId(&id));
  char hex[2 * sizeof(id) + 1];
  for (size_t i = 0; i < sizeof(id); i++)
    snprintf(hex + 2 * i, 3, "%02x", ((unsigned char *)&id)[i]);
  uint64_t seed = o->seed; /* main() drew one if none was given: every child gets the same */
  char nstr[16], seedstr[32];
  snprintf(nstr, sizeof(nstr), "%d", n);
  snprintf(seedstr, sizeof(seedstr), "0x%016" PRIx64, seed);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) die("pipe2: %s", strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], CHILD_FD); /* dup2 clears close-on-exec */
  char **cargv = calloc((size_t)argc + 12, sizeof(char *));
  if (!cargv) die("out of host memory");
  pid_t pids[SYMMPIN_MAX_RANKS];
  int status[SYMMPIN_MAX_RANKS];
  bool done[SYMMPIN_MAX_RANKS] = {0};
  int spawned = 0;
  for (int r = 0; r < n; r++) {
    char rstr[16];
    snprintf(rstr, sizeof(rstr), "%d", r);
    int k = 0;
    cargv[k++] = argv[0];
    for (int i = 1; i < argc; i++) cargv[k++] = argv[i];
    cargv[k++] = "--ranks";
    cargv[k++] = nstr;
    cargv[k++] = "--seed";
    cargv[k++] = seedstr;
    cargv[k++] = "--child";
    cargv[k++] = rstr;
    cargv[k++] = hex;
    cargv[k] = NULL;
    int e = posix_spawn(&pids[r], "/proc/self/exe", &fa, NULL, cargv, environ);
    if (e != 0) {
      fprintf(stderr, BENCH ": posix_spawn of rank %d: %s\n", r, strerror(e));
      break;
    }
    spawned++;
  }
  posix_spawn_file_actions_destroy(&fa);
  free(cargv);
  close(fds[1]);

  int failed = spawned < n ? 1 : 0, passed = 0, left = spawned;
  double first_bad = 0;
  bool killed = false;
  while (left > 0) {
    int st = 0;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      for (int r = 0; r < spawned; r++) {
        if (pids[r] != p) continue;
        done[r] = true;
        status[r] = st;
        left--;
        bool clean = WIFEXITED(st) && WEXITSTATUS(st) <= 1;
        if (!clean && first_bad == 0) first_bad = now_s();
      }
      continue;
    }
    if (p < 0 && errno != EINTR) break;
    if (spawned < n && first_bad == 0) first_bad = now_s(); /* the missing rank never comes */
    if (first_bad > 0 && !killed && now_s() - first_bad > 20) {
      for (int r = 0; r < spawned; r++) {
        if (done[r]) continue;
        fprintf(stderr,
                BENCH ": rank %d still running 20 s after another rank failed: killing it\n", r);
        kill(pids[r], SIGKILL);
      }
      killed = true;
    }
    usleep(50 * 1000);
  }
  bool seen[SYMMPIN_MAX_RANKS] = {0};
  FILE *in = fdopen(fds[0], "r");
  int rr, pp, ff;
  while (in && fscanf(in, "%d %d %d", &rr, &pp, &ff) == 3) {
    if (rr >= 0 && rr < n) seen[rr] = true;
    passed += pp;
    failed += ff;
  }
  if (in) fclose(in);
  for (int r = 0; r < spawned; r++) {
    int st = status[r];
    if (!done[r]) {
      fprintf(stderr, BENCH ": rank %d: lost track of it\n", r);
      failed++;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) > 1 || !seen[r]) {
      if (WIFSIGNALED(st))
        fprintf(stderr, BENCH ": rank %d ended by signal %d\n", r, WTERMSIG(st));
      else
        fprintf(stderr, BENCH ": rank %d ended with exit status %d%s\n", r,
                WIFEXITED(st) ? WEXITSTATUS(st) : -1, seen[r] ? "" : " and reported nothing");
      failed++;
    }
  }
  return final_line(passed, failed);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* Never multicast (NVLS): symmpin does not use it, and the comparison is against what NCCL does
   * without it. A value the user set wins. */
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  opts o;
  int pr = parse_opts(argc, argv, &o);
  if (pr != 0) return usage() - (pr > 0 ? 2 : 0); /* --help: status 0 */
  for (int s = 1; s < o.nsizes; s++)
    if (o.sizes[s] == o.sizes[s - 1]) {
      fprintf(stderr, BENCH ": size %zu given twice\n", o.sizes[s]);
      return usage();
    }
  g_watchdog_s = o.timeout_s + 60;
  if (o.child_rank >= 0) return run_child(&o);
  if (!o.seed_set) {
    random_bytes(&o.seed, sizeof(o.seed));
    o.seed_set = true;
  }
  if (o.single) return run_single(&o);
  return run_parent(&o, argc, argv);
}
