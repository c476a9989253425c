/* symmpin-bench's resources: streams, events and kernel error records per rank; the buffers of
 * every variant (each of buf_bytes: the largest buffer of any collective) and NCCL's symmetric
 * windows; symmpin's pool with its two slots, grown as the engine grows it (symmem/grow.h); and
 * the teardown of all of it in the order CUDA needs. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "symmem/grow.h"
#include "tests/gpu/bench.h"

void bench_setup_devices(bench *b) {
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    SYMMPIN_TEST_CUDA(cudaSetDevice(s->device));
    SYMMPIN_TEST_CUDA(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    SYMMPIN_TEST_CUDA(cudaEventCreate(&s->ev0));
    SYMMPIN_TEST_CUDA(cudaEventCreate(&s->ev1));
    for (int f = 0; f < 2; f++) {
      void *h = NULL, *d = NULL;
      SYMMPIN_TEST_CUDA(cudaHostAlloc(&h, sizeof(symmpin_kernel_error), cudaHostAllocMapped));
      memset(h, 0, sizeof(symmpin_kernel_error));
      SYMMPIN_TEST_CUDA(cudaHostGetDevicePointer(&d, h, 0));
      s->err[f] = h;
      s->err_dev[f] = d;
    }
    int khz = 0;
    SYMMPIN_TEST_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, s->device));
    uint64_t cycles = khz > 0 ? (uint64_t)khz * 1000u * 10u : 20000000000ull; /* ~10 s */
    if (cycles > b->timeout_cycles) b->timeout_cycles = cycles;
  }
}

void bench_setup_buffers(bench *b) {
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    SYMMPIN_TEST_CUDA(cudaSetDevice(s->device));
    SYMMPIN_TEST_CUDA(cudaMalloc(&s->send, b->buf_bytes));
    for (int v = 0; v < V_COUNT; v++)
      if (v != V_WIN) SYMMPIN_TEST_CUDA(cudaMalloc(&s->out[v], b->buf_bytes));
    SYMMPIN_TEST_NCCL(ncclMemAlloc(&s->win_send, b->buf_bytes));
    SYMMPIN_TEST_NCCL(ncclMemAlloc(&s->out[V_WIN], b->buf_bytes));
  }
  /* Window registration is collective: every rank registers the same sizes in the same order; one
   * thread driving several ranks groups them. NCCL leaves *win NULL when the communicator has no
   * symmetric support (e.g. one rank): nccl_win is then plain NCCL on ncclMemAlloc'd memory. */
  for (int w = 0; w < 2; w++) {
    if (b->nlocal > 1) SYMMPIN_TEST_NCCL(ncclGroupStart());
    for (int l = 0; l < b->nlocal; l++) {
      rank_st *s = &b->loc[l];
      SYMMPIN_TEST_NCCL(ncclCommWindowRegister(s->comm, w ? s->out[V_WIN] : s->win_send,
                                               b->buf_bytes, &s->win[w], NCCL_WIN_COLL_SYMMETRIC));
    }
    if (b->nlocal > 1) SYMMPIN_TEST_NCCL(ncclGroupEnd());
  }
}

typedef struct hello_blob {
  symmpin_pool_facts facts;
  uint32_t win_ok;
  char desc[96];
} hello_blob;

/* Pools as the engine gets them: facts -> check_peers, then the growth protocol (reserve -> post
 * the export record -> attach -> agree on the outcome, since attach can fail on one rank only).
 * Every rank walks the same rounds. */
/* The slots: one per slot class, each as large as the largest call of that class in the run, laid
 * out one after another (4 KiB apart). Calls of different classes never share slot bytes, as the
 * kernels require (kernels/allreduce.h: an LL call then a copy call on one slot timed out on the
 * GPU); calls of one class share their slot, one size at a time. */
static size_t lay_out_slots(bench *b) {
  memset(b->slot_bytes, 0, sizeof b->slot_bytes);
  for (int k = 0; k < b->o.ncolls; k++)
    for (int d = 0; d < b->o.ndtypes; d++)
      for (int i = 0; i < b->o.nsizes; i++)
        for (int f = 0; f < 2; f++) {
          int coll = b->o.colls[k], dtype = b->o.dtypes[d];
          size_t c = b->o.sizes[i] / symmpin_dtype_size(dtype);
          size_t need = symmpin_kernel_slot_bytes(coll, c, dtype, b->n, (symmpin_kernel_input)f);
          int cls = symmpin_kernel_slot_class(coll, c, dtype, b->n, (symmpin_kernel_input)f);
          if (need > b->slot_bytes[cls]) b->slot_bytes[cls] = need; /* 0: no such form */
        }
  size_t off = 0;
  for (int cls = 0; cls < SYMMPIN_KERNEL_SLOT_CLASSES; cls++) {
    b->slot_off[cls] = off;
    off += (b->slot_bytes[cls] + 4095) / 4096 * 4096;
  }
  return off;
}

void bench_setup_pools(bench *b) {
  size_t total = lay_out_slots(b);

  hello_blob hello[SYMMPIN_KERNEL_MAX_RANKS];
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    SYMMPIN_TEST_OK(symmpin_pool_facts_get(s->device, &hello[l].facts));
    hello[l].win_ok = s->win[0] != NULL && s->win[1] != NULL;
    struct cudaDeviceProp prop;
    SYMMPIN_TEST_CUDA(cudaGetDeviceProperties(&prop, s->device));
    char bus[32] = "?";
    SYMMPIN_TEST_CUDA(cudaDeviceGetPCIBusId(bus, sizeof(bus), s->device));
    snprintf(hello[l].desc, sizeof(hello[l].desc), "GPU %d %.48s (%s, pid %d)", s->device,
             prop.name, bus, (int)getpid());
  }
  const void *out[SYMMPIN_KERNEL_MAX_RANKS];
  bench_exchange(b, hello, sizeof(hello_blob), out);
  symmpin_pool_facts facts[SYMMPIN_KERNEL_MAX_RANKS];
  b->win_ok = true;
  for (int r = 0; r < b->n; r++) {
    const hello_blob *h = out[r];
    facts[r] = h->facts;
    b->win_ok &= h->win_ok != 0;
    snprintf(b->gpu_desc[r], sizeof(b->gpu_desc[r]), "%s", h->desc);
  }
  symmpin_pool *pools[SYMMPIN_KERNEL_MAX_RANKS];
  symmpin_board *boards[SYMMPIN_KERNEL_MAX_RANKS];
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    SYMMPIN_TEST_OK(symmpin_pool_create(s->rank, b->n, s->device, &s->pool));
    pools[l] = s->pool;
    boards[l] = s->board;
  }
  /* Every rank reaches the same answer: the same facts, and every rank sees the same GPUs (one
   * process, or children with the parent's environment). */
  char why[160] = "";
  if (symmpin_pool_check_peers(facts, b->n, why, sizeof(why)) != SYMMPIN_OK) {
    b->pool_ok = false;
    snprintf(b->no_pool_why, sizeof(b->no_pool_why), "%s", why);
    return;
  }
  unsigned timeout_s = b->o.timeout_s < UINT_MAX / 1000 ? b->o.timeout_s : UINT_MAX / 1000;
  symmpin_pool_grow_args ga = {.nranks = b->n,
                               .bytes = total,
                               .round = b->round + 1,
                               .timeout_ms = timeout_s * 1000u,
                               .tid = b->tid};
  symmpin_status st = symmpin_pool_grow(pools, boards, b->nlocal, &ga, why, sizeof(why));
  b->round += SYMMPIN_POOL_GROW_ROUNDS;
  if (st == SYMMPIN_ERR_TIMEOUT) bench_die("growing the pool: %s", why);
  b->pool_ok = st == SYMMPIN_OK;
  if (!b->pool_ok) {
    snprintf(b->no_pool_why, sizeof(b->no_pool_why), "%s", why[0] ? why : "another rank failed");
    return;
  }
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    for (int cls = 0; cls < SYMMPIN_KERNEL_SLOT_CLASSES; cls++) {
      if (!b->slot_bytes[cls]) continue; /* no call of the run has that class */
      if (!symmpin_pool_fits(s->pool, b->slot_off[cls], b->slot_bytes[cls]))
        bench_die("pool of %zu bytes does not fit slot [%zu, +%zu)", symmpin_pool_size(s->pool),
                  b->slot_off[cls], b->slot_bytes[cls]);
      for (int r = 0; r < b->n; r++) {
        s->slot[cls][r] = symmpin_pool_addr(s->pool, r, b->slot_off[cls]);
        if (!s->slot[cls][r])
          bench_die("no address for rank %d's slot at offset %zu", r, b->slot_off[cls]);
      }
    }
  }
}

void bench_teardown(bench *b) {
  bench_tick("teardown", 0);
  bench_sync_all(b, false);
  bench_drop_graphs(b);
  bench_barrier(b, NULL); /* nobody runs a collective on the windows any more */
  for (int l = 0; l < b->nlocal; l++)
    for (int w = 0; w < 2; w++)
      if (b->loc[l].win[w])
        SYMMPIN_TEST_NCCL(ncclCommWindowDeregister(b->loc[l].comm, b->loc[l].win[w]));
  bench_barrier(b, NULL);
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    SYMMPIN_TEST_CUDA(cudaSetDevice(s->device));
    SYMMPIN_TEST_NCCL(ncclMemFree(s->win_send));
    SYMMPIN_TEST_NCCL(ncclMemFree(s->out[V_WIN]));
    SYMMPIN_TEST_CUDA(cudaFree(s->send));
    for (int v = 0; v < V_COUNT; v++)
      if (v != V_WIN) SYMMPIN_TEST_CUDA(cudaFree(s->out[v]));
  }
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    SYMMPIN_TEST_CUDA(cudaSetDevice(s->device));
    /* This rank's kernels are done (bench_sync_all); its peers hold their own mappings. */
    symmpin_pool_destroy(s->pool);
    s->pool = NULL;
    SYMMPIN_TEST_NCCL(ncclCommDestroy(s->comm));
    for (int f = 0; f < 2; f++) SYMMPIN_TEST_CUDA(cudaFreeHost(s->err[f]));
    SYMMPIN_TEST_CUDA(cudaEventDestroy(s->ev0));
    SYMMPIN_TEST_CUDA(cudaEventDestroy(s->ev1));
    SYMMPIN_TEST_CUDA(cudaStreamDestroy(s->stream));
  }
  for (int l = 0; l < b->nlocal; l++) symmpin_board_close(b->loc[l].board);
}
