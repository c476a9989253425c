/* symmpin-bench's timing of one size of one collective: the calls of every variant (eager launches
 * and captured graphs), timed sections between CUDA events on rank 0's stream, and the alternating
 * rounds, between the result checks before and after (bench_check.c). */
#include <string.h>

#include "tests/gpu/bench.h"

int bench_form_of(int v) { return v == V_STAGED ? SYMMPIN_INPUT_STAGED : SYMMPIN_INPUT_IN_SLOT; }

/* Whether the kernels have this variant's input form for the collective at all, the kernels' own
 * answer (kernels/select.c): today the in-slot form (direct) is the all-reduce's only, so direct is
 * "n/a" for the all-gather and the reduce-scatter, shown so and never run. */
bool bench_exists(const bench *b, int v, int coll, int dtype) {
  if (v == V_NCCL || v == V_WIN) return true;
  return symmpin_kernel_slot_bytes(coll, 1, dtype, b->n, (symmpin_kernel_input)bench_form_of(v)) !=
         0;
}

/* Whether a variant runs for this shape; the same answer on every rank (agreed flags, pure
 * functions of the shape). */
bool bench_usable(const bench *b, int v, int coll, int dtype, size_t count) {
  if (v == V_NCCL || v == V_WIN) return true;
  int f = bench_form_of(v);
  if (!b->pool_ok || !b->form_ok[f]) return false;
  size_t need = symmpin_kernel_slot_bytes(coll, count, dtype, b->n, (symmpin_kernel_input)f);
  return need != 0 && need <= b->slot_bytes[bench_slot_class(b, coll, dtype, count, f)];
}

int bench_slot_class(const bench *b, int coll, int dtype, size_t count, int form) {
  return symmpin_kernel_slot_class(coll, count, dtype, b->n, (symmpin_kernel_input)form);
}

static void prepare_calls(bench *b, int coll, int dtype, size_t count) {
  for (int l = 0; l < b->nlocal && b->pool_ok; l++) {
    rank_st *s = &b->loc[l];
    for (int f = 0; f < 2; f++) {
      symmpin_kernel_call *c = &s->call[f];
      int cls = bench_slot_class(b, coll, dtype, count, f);
      memset(c, 0, sizeof(*c));
      for (int r = 0; r < b->n; r++) c->slot[r] = s->slot[cls][r];
      c->slot_bytes = b->slot_bytes[cls];
      c->rank = s->rank;
      c->nranks = b->n;
      c->coll = coll;
      c->send = f == SYMMPIN_INPUT_STAGED ? s->send : NULL;
      c->recv = s->out[f == SYMMPIN_INPUT_STAGED ? V_STAGED : V_DIRECT];
      c->count = count;
      c->dtype = dtype;
      c->op = SYMMPIN_SUM;
      c->input = (symmpin_kernel_input)f;
      c->site = 0xBE0C0000u + (uint64_t)f;
      c->timeout_cycles = b->timeout_cycles;
      c->error = s->err_dev[f];
    }
  }
}

/* One NCCL call of the collective; count is NCCL's count argument (sendcount, recvcount). */
static void nccl_call(int coll, const void *send, void *recv, size_t count, int dtype,
                      ncclComm_t comm, cudaStream_t stream) {
  ncclDataType_t t = (ncclDataType_t)dtype;
  switch (coll) {
  case SYMMPIN_COLL_ALLREDUCE:
    SYMMPIN_TEST_NCCL(ncclAllReduce(send, recv, count, t, ncclSum, comm, stream));
    break;
  case SYMMPIN_COLL_ALLGATHER:
    SYMMPIN_TEST_NCCL(ncclAllGather(send, recv, count, t, comm, stream));
    break;
  case SYMMPIN_COLL_REDUCESCATTER:
    SYMMPIN_TEST_NCCL(ncclReduceScatter(send, recv, count, t, ncclSum, comm, stream));
    break;
  default: bench_die("unknown collective %d", coll);
  }
}

/* `calls` back-to-back calls of one variant on every local rank (one thread driving several
 * ranks groups NCCL's calls, as single-process programs must). */
void bench_issue(bench *b, int v, int coll, int dtype, size_t count, int calls) {
  for (int i = 0; i < calls; i++) {
    if (v == V_NCCL || v == V_WIN) {
      if (b->nlocal > 1) SYMMPIN_TEST_NCCL(ncclGroupStart());
      for (int l = 0; l < b->nlocal; l++) {
        rank_st *s = &b->loc[l];
        nccl_call(coll, v == V_NCCL ? s->send : s->win_send, s->out[v], count, dtype, s->comm,
                  s->stream);
      }
      if (b->nlocal > 1) SYMMPIN_TEST_NCCL(ncclGroupEnd());
    } else {
      int f = bench_form_of(v);
      for (int l = 0; l < b->nlocal; l++) {
        rank_st *s = &b->loc[l];
        if (b->nlocal > 1) SYMMPIN_TEST_CUDA(cudaSetDevice(s->device));
        SYMMPIN_TEST_OK(symmpin_kernel_launch(&s->call[f], s->stream));
      }
    }
  }
}

/* Captures `calls` calls of variant v into one graph per local rank (each rank's stream). Every
 * capture ends before any graph is instantiated: while one stream of the process captures in
 * global mode, cudaGraphInstantiate is not permitted (--single has one stream per rank). */
static void capture(bench *b, int v, int coll, int dtype, size_t count, int calls) {
  cudaGraph_t g[SYMMPIN_KERNEL_MAX_RANKS];
  for (int l = 0; l < b->nlocal; l++)
    SYMMPIN_TEST_CUDA(cudaStreamBeginCapture(b->loc[l].stream, cudaStreamCaptureModeGlobal));
  bench_issue(b, v, coll, dtype, count, calls);
  for (int l = 0; l < b->nlocal; l++) {
    g[l] = NULL;
    SYMMPIN_TEST_CUDA(cudaStreamEndCapture(b->loc[l].stream, &g[l]));
  }
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    SYMMPIN_TEST_CUDA(cudaSetDevice(s->device));
    SYMMPIN_TEST_CUDA(cudaGraphInstantiate(&s->exec[v], g[l], 0));
    SYMMPIN_TEST_CUDA(cudaGraphDestroy(g[l]));
    SYMMPIN_TEST_CUDA(cudaGraphUpload(s->exec[v], s->stream));
  }
  bench_sync_all(b, false);
}

void bench_drop_graphs(bench *b) {
  for (int l = 0; l < b->nlocal; l++) {
    for (int v = 0; v < V_COUNT; v++) {
      if (b->loc[l].exec[v]) SYMMPIN_TEST_CUDA(cudaGraphExecDestroy(b->loc[l].exec[v]));
      b->loc[l].exec[v] = NULL;
    }
  }
}

/* One timed section, after the caller's barrier: warm-up calls (they absorb the ranks' start skew
 * and NCCL's first-call costs), then `iters` calls between two events on rank 0's stream. Returns
 * microseconds per call as this thread's first rank sees it. */
static double section(bench *b, int m, int v, int coll, int dtype, size_t count, int iters) {
  rank_st *s0 = &b->loc[0];
  if (m == M_EAGER) {
    bench_issue(b, v, coll, dtype, count, iters < 10 ? 2 : 10);
    SYMMPIN_TEST_CUDA(cudaEventRecord(s0->ev0, s0->stream));
    bench_issue(b, v, coll, dtype, count, iters);
    SYMMPIN_TEST_CUDA(cudaEventRecord(s0->ev1, s0->stream));
  } else {
    for (int l = 0; l < b->nlocal; l++)
      SYMMPIN_TEST_CUDA(cudaGraphLaunch(b->loc[l].exec[v], b->loc[l].stream));
    SYMMPIN_TEST_CUDA(cudaEventRecord(s0->ev0, s0->stream));
    for (int l = 0; l < b->nlocal; l++)
      SYMMPIN_TEST_CUDA(cudaGraphLaunch(b->loc[l].exec[v], b->loc[l].stream));
    SYMMPIN_TEST_CUDA(cudaEventRecord(s0->ev1, s0->stream));
  }
  bench_sync_all(b, true);
  float ms = 0;
  SYMMPIN_TEST_CUDA(cudaEventElapsedTime(&ms, s0->ev0, s0->ev1));
  return 1000.0 * (double)ms / (double)iters;
}

/* bytes: the call's larger buffer (nranks x the chunk for the all-gather and reduce-scatter). */
static int iters_for(const bench *b, size_t bytes) {
  size_t it = ((size_t)512 << 20) / (bytes ? bytes : 1); /* ~512 MiB per section, 8..500 calls */
  if (it > 500) it = 500;
  if (it < 8) it = 8;
  if (b->o.quick) it = it / 5 < 3 ? 3 : it / 5;
  return (int)it;
}

/* One (collective, dtype, size): check, capture, R rounds of eager then graph of every variant,
 * recheck. */
void bench_run_size(bench *b, int ci, int di, int si) {
  int coll = b->o.colls[ci], dtype = b->o.dtypes[di];
  size_t bytes = b->o.sizes[si], es = symmpin_dtype_size(dtype);
  if (bytes % es) return; /* every rank skips alike; the tables print "-" */
  size_t count = bytes / es;
  int iters = iters_for(b, wide_count(b, coll, count) * es);
  b->iters[ci][si] = iters;
  prepare_calls(b, coll, dtype, count);
  bench_check_size(b, ci, di, si, count);

  bench_tick("capture", bytes);
  for (int v = 0; v < V_COUNT; v++)
    if (bench_usable(b, v, coll, dtype, count)) capture(b, v, coll, dtype, count, iters);

  for (int round = 0; round < b->o.rounds; round++) {
    for (int m = 0; m < M_COUNT; m++) {
      for (int v = 0; v < V_COUNT; v++) {
        bench_tick(m == M_EAGER ? "eager timing" : "graph timing", bytes);
        bench_sync_all(b, false);
        bench_barrier(b, NULL);
        /* usable() after the barrier: a form dropped there is skipped by every rank. */
        if (!bench_usable(b, v, coll, dtype, count) || (m == M_GRAPH && !b->loc[0].exec[v]))
          continue;
        double t = section(b, m, v, coll, dtype, count, iters);
        if (b->reporter) us_at(b, ci, m, di, si, v)[round] = t;
      }
    }
  }
  bench_sync_all(b, false);
  bench_drop_graphs(b);
  bench_recheck_size(b, ci, di, si, count);
}
