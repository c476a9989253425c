/* symmpin-bench's shared model: options, per-rank state and the run's state, and what each of its
 * files offers the others (docs/bench.md describes the program; bench_main.c is its outline).
 *
 *   bench_main.c    options, --help/--version, the three roles (parent, child, --single), a run
 *   bench_proc.c    processes: spawning one child per rank and collecting them, fatal exits, the
 *                   watchdog that ends a rank which makes no progress
 *   bench_sync.c    the host barrier (board rounds) and bounded waits for the GPU
 *   bench_setup.c   devices, buffers, NCCL windows and symmpin's pool: set-up and teardown
 *   bench_time.c    one size: launches, graph capture, the timed rounds
 *   bench_check.c   inputs and the result checks before and after timing
 *   bench_report.c  the header, the per-size lines and CSV rows as the run goes, tables,
 *                   verdicts and the last line
 *   bench_format.c  those lines and rows as pure functions of numbers (bench_format.h; checked on
 *                   the CPU by test_bench_format) */
#ifndef SYMMPIN_BENCH_H
#define SYMMPIN_BENCH_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/types.h"
#include "kernels/allreduce.h"
#include "symmem/board.h"
#include "symmem/pool.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 27, 0)
#error "symmpin-bench needs NCCL >= 2.27 (symmetric windows)"
#endif

#define BENCH "symmpin-bench"
#define MAX_SIZES 64
#define MAX_DTYPES 2
#define MAX_COLLS SYMMPIN_COLL_COUNT
#define MAX_ROUNDS 64

/* Failed checks end the rank with its number in the message (bench_die). */
#define SYMMPIN_TEST_FAIL bench_die
#include "tests/gpu/gpu_common.h"

enum { V_NCCL, V_WIN, V_STAGED, V_DIRECT, V_COUNT };
enum { M_EAGER, M_GRAPH, M_COUNT };
extern const char *const bench_v_name[V_COUNT];  /* CSV and messages: "symmpin_staged", ... */
extern const char *const bench_v_short[V_COUNT]; /* table columns: "staged", ... */
extern const char *const bench_m_name[M_COUNT];
#define NCCL_MASK ((1u << V_NCCL) | (1u << V_WIN))
#define SYMM_MASK ((1u << V_STAGED) | (1u << V_DIRECT))

typedef struct opts {
  size_t sizes[MAX_SIZES]; /* bytes per rank: all-gather and reduce-scatter, the chunk */
  int nsizes;
  int dtypes[MAX_DTYPES];
  int ndtypes;
  int colls[MAX_COLLS]; /* SYMMPIN_COLL_*, in --colls order */
  int ncolls;
  int rounds;
  int nranks; /* 0: every visible GPU (at most SYMMPIN_KERNEL_MAX_RANKS) */
  bool single, quick, seed_set;
  uint64_t seed;
  unsigned timeout_s;
  const char *csv;
  int child_rank; /* >= 0 in a spawned child */
  const char *child_id;
} opts;

typedef struct rank_st {
  int rank, device;
  cudaStream_t stream;
  cudaEvent_t ev0, ev1;
  ncclComm_t comm;
  symmpin_board *board;
  symmpin_pool *pool;
  void *send;                       /* cudaMalloc'd input of nccl and staged (all: buf_bytes) */
  void *win_send;                   /* ncclMemAlloc'd input of nccl_win */
  void *out[V_COUNT];               /* outputs; out[V_WIN] is ncclMemAlloc'd */
  ncclWindow_t win[2];              /* windows of win_send and out[V_WIN] (NULL: not registered) */
  void *slot[SYMMPIN_KERNEL_SLOT_CLASSES][SYMMPIN_KERNEL_MAX_RANKS]; /* [slot class][rank] */
  symmpin_kernel_error *err[2], *err_dev[2]; /* per form: host view, device view */
  symmpin_kernel_call call[2];
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
  size_t max_buf;   /* the largest buffer of any call: nranks x max_bytes with an all-gather or a
                       reduce-scatter in --colls, else max_bytes */
  size_t buf_bytes; /* device buffers: max_buf rounded up to 2 MiB (NCCL's granularity) */
  bool reporter;    /* drives rank 0: prints and writes the CSV */
  bool win_ok, pool_ok;
  bool form_ok[2]; /* a form is dropped on every rank after a kernel timed out */
  /* A slot per slot class (kernels/allreduce.h: calls of different classes never share slot
   * bytes); 0 bytes: no call of the run has that class. */
  size_t slot_off[SYMMPIN_KERNEL_SLOT_CLASSES], slot_bytes[SYMMPIN_KERNEL_SLOT_CLASSES];
  uint64_t timeout_cycles;
  /* rank 0's per-call microseconds [coll][mode][dtype][size][variant][round]; NAN: none. coll,
   * dtype and size index o.colls, o.dtypes and o.sizes. */
  double *us;
  int iters[MAX_COLLS][MAX_SIZES];
  uint8_t *bad; /* [coll][dtype][size][variant]: a result check failed on some rank */
  uint8_t *host_in, *host_out[V_COUNT], *host_ref; /* max_buf bytes each */
  FILE *csv; /* the reporter's CSV, written a size at a time (NULL: none) */
  char gpu_desc[SYMMPIN_KERNEL_MAX_RANKS][128];
  char no_pool_why[192];
} bench;

static inline double *us_at(bench *b, int c, int m, int d, int s, int v) {
  size_t i =
      ((((size_t)c * M_COUNT + (size_t)m) * MAX_DTYPES + (size_t)d) * MAX_SIZES + (size_t)s) *
          V_COUNT +
      (size_t)v;
  return b->us + i * (size_t)b->o.rounds;
}

static inline uint8_t *bad_at(bench *b, int c, int d, int s, int v) {
  return b->bad + (((size_t)c * MAX_DTYPES + (size_t)d) * MAX_SIZES + (size_t)s) * V_COUNT +
         (size_t)v;
}

/* Elements of a call's larger buffer (count: NCCL's count argument): the all-reduce's, the
 * all-gather's recv, the reduce-scatter's send (nranks x count). */
static inline size_t wide_count(const bench *b, int coll, size_t count) {
  size_t send = symmpin_coll_send_count(coll, count, b->n);
  size_t recv = symmpin_coll_recv_count(coll, count, b->n);
  return send > recv ? send : recv;
}

static inline void tally(rank_st *s, bool ok) {
  if (ok)
    s->passed++;
  else
    s->failed++;
}

/* bench_proc.c */
extern int bench_rank; /* this process's rank in messages; -1 in the parent and with --single */
_Noreturn void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double bench_now(void);
void bench_tick(const char *phase, size_t bytes); /* progress, for the watchdog */
const char *bench_phase(void);
void bench_watchdog_start(unsigned seconds);
int bench_visible_ranks(const opts *o); /* ranks to run (0: cannot run, said why) */
int bench_run_parent(const opts *o, int argc, char **argv); /* spawns the ranks; exit status */
void bench_child_report(int rank, int passed, int failed);

/* bench_sync.c */
void bench_exchange(bench *b, const void *blobs, size_t bytes, const void *out[]);
typedef struct sync_blob {
  uint32_t flags;    /* SB_* */
  uint32_t bad_mask; /* variants whose result check failed on this rank */
  uint64_t hash[2];  /* symmpin outputs [form] when flags has SB_HASH << form */
} sync_blob;
/* Flags: a form timed out; hash[f] is valid (SB_HASH << form). */
enum { SB_TIMEOUT_STAGED = 1u << 0, SB_TIMEOUT_DIRECT = 1u << 1, SB_HASH = 1u << 2 };
sync_blob bench_barrier(bench *b, const sync_blob *mine /* nlocal entries, or NULL */);
void bench_sync_all(bench *b, bool in_section);

/* bench_setup.c */
void bench_setup_devices(bench *b);
void bench_setup_buffers(bench *b);
void bench_setup_pools(bench *b);
void bench_teardown(bench *b);

/* bench_time.c. A shape is (collective, datatype, count); count is NCCL's count argument (the
 * all-gather's and reduce-scatter's per-rank chunk). */
int bench_form_of(int v);
bool bench_exists(const bench *b, int v, int coll, int dtype); /* false: "n/a", never run */
bool bench_usable(const bench *b, int v, int coll, int dtype, size_t count);
/* The slot class (kernels/allreduce.h) of symmpin's call of this shape in input form `form`, whose
 * slot it runs on. */
int bench_slot_class(const bench *b, int coll, int dtype, size_t count, int form);
void bench_issue(bench *b, int v, int coll, int dtype, size_t count, int calls);
void bench_drop_graphs(bench *b);
void bench_run_size(bench *b, int ci, int di, int si);

/* bench_check.c */
void bench_check_size(bench *b, int ci, int di, int si, size_t count);
void bench_recheck_size(bench *b, int ci, int di, int si, size_t count);

/* bench_report.c (the reporter only, but bench_csv_usable) */
int bench_csv_usable(const char *path); /* before the run: 0, or 2 after naming the problem */
void bench_print_header(bench *b);
void bench_report_begin(bench *b);              /* the column header; opens the CSV */
void bench_report_size(bench *b, int c, int d, int s); /* a line per mode, CSV rows, flushed */
void bench_print_tables(bench *b);
void bench_print_verdicts(bench *b);
void bench_report_end(bench *b); /* closes the CSV */
int bench_final_line(int passed, int failed);

#endif
