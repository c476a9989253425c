/* The engine: the GPU side of symmpin for one communicator. It owns the symmetric pool and the
 * kernels' error record, gives the agreement (preload/agree.h, CUDA-free) its GPU operations, and
 * launches the kernels for calls whose sites the agreed plan pins. docs/design.md
 * ("Per-communicator life") is the whole protocol in prose.
 *
 * Everything runs under the communicator's lock (preload holds it) and the re-entrancy guard. */
#include "preload/engine.h"

#include <cuda_runtime.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "common/log.h"
#include "kernels/allreduce.h"
#include "preload/agree.h"
#include "preload/config.h"
#include "preload/host.h"
#include "preload/stats.h"
#include "symmem/pool.h"

/* Plan key -> the call site it came from (for statistics), and the sites pinned on some stream. */
typedef struct site_entry {
  uint64_t id;
  uint64_t site;
  UT_hash_handle hh;
} site_entry;

struct symmpin_engine_comm {
  symmpin_agree *agree;      /* NULL when setup failed (then off_reason says why) */
  symmpin_reason off_reason;
  symmpin_pool *pool;
  symmpin_kernel_error *err_host, *err_dev;
  uint64_t timeout_cycles;
  bool timeout_reported;
  site_entry *site_of_key;   /* plan key -> call site, for keys seen while not redirected */
  site_entry *pinned_sites;  /* call sites pinned on at least one stream */
};

static site_entry *site_find(site_entry *set, uint64_t id) {
  site_entry *x = NULL;
  HASH_FIND(hh, set, &id, sizeof id, x);
  return x;
}

static void site_add(site_entry **set, uint64_t id, uint64_t site) {
  if (site_find(*set, id)) return;
  site_entry *x = malloc(sizeof *x);
  if (!x) return; /* statistics only: a missing entry costs a less precise reason */
  x->id = id;
  x->site = site;
  HASH_ADD(hh, *set, id, sizeof x->id, x);
}

static void site_set_free(site_entry **set) {
  site_entry *x, *tmp;
  HASH_ITER(hh, *set, x, tmp) {
    HASH_DEL(*set, x);
    free(x);
  }
}

/* ---- the agreement's GPU operations (ctx is the communicator) ---- */

/* Symmpin's own allocations and mappings must not break a capture that another stream of this
 * thread (or, in global mode, another thread) has in progress: relaxed mode for their duration. */
static enum cudaStreamCaptureMode capture_mode_relax(void) {
  enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&m);
  return m;
}

static void capture_mode_restore(enum cudaStreamCaptureMode m) {
  cudaThreadExchangeStreamCaptureMode(&m);
}

/* CUDA resources, made at the first plan (never during capture): the kernels' error record in
 * host-mapped memory, and the timeout in GPU clocks. */
static symmpin_status engine_cuda_setup(symmpin_comm *c, struct symmpin_engine_comm *e) {
  if (e->err_host) return SYMMPIN_OK;
  if (cudaHostAlloc((void **)&e->err_host, sizeof *e->err_host, cudaHostAllocMapped) != cudaSuccess ||
      cudaHostGetDevicePointer((void **)&e->err_dev, e->err_host, 0) != cudaSuccess) {
    cudaGetLastError();
    SYMMPIN_WARN("comm %d: cannot allocate the kernels' error record", c->ordinal);
    return SYMMPIN_ERR_CUDA;
  }
  memset((void *)e->err_host, 0, sizeof *e->err_host);
  /* What an abort sets and what the async-error query reads, without the communicator's lock. */
  atomic_store(&c->kernel_abort, &e->err_host->abort);
  atomic_store(&c->kernel_failed, &e->err_host->timed_out);
  if (atomic_load(&c->aborting)) e->err_host->abort = 1;
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, c->device) != cudaSuccess || khz <= 0)
    khz = 2000000; /* H100/H200 boost clock, kHz */
  e->timeout_cycles = symmpin_config_get()->kernel_timeout_ms * (uint64_t)khz; /* 0: no deadline */
  return SYMMPIN_OK;
}

static symmpin_status op_gpu_facts(void *ctx, symmpin_pool_facts *out) {
  symmpin_comm *c = ctx;
  return symmpin_pool_facts_get(c->device, out);
}

static symmpin_status op_check_peers(void *ctx, const symmpin_pool_facts *facts, int nranks,
                                     char *why, size_t why_len) {
  (void)ctx;
  return symmpin_pool_check_peers(facts, nranks, why, why_len);
}

static symmpin_status op_reserve(void *ctx, uint64_t bytes, void *export_rec) {
  symmpin_comm *c = ctx;
  struct symmpin_engine_comm *e = c->engine;
  enum cudaStreamCaptureMode mode = capture_mode_relax();
  symmpin_status st = engine_cuda_setup(c, e);
  if (st == SYMMPIN_OK) st = symmpin_pool_reserve(e->pool, bytes, export_rec);
  capture_mode_restore(mode);
  return st;
}

static void op_settle(void *ctx, bool agreed) {
  symmpin_comm *c = ctx;
  enum cudaStreamCaptureMode mode = capture_mode_relax();
  symmpin_pool_settle(c->engine->pool, agreed);
  capture_mode_restore(mode);
}

static symmpin_status op_attach(void *ctx, const void *const exports[], const symmpin_plan *plan) {
  symmpin_comm *c = ctx;
  struct symmpin_engine_comm *e = c->engine;
  enum cudaStreamCaptureMode mode = capture_mode_relax();
  symmpin_status st = symmpin_pool_attach(e->pool, exports);
  capture_mode_restore(mode);
  if (st != SYMMPIN_OK) return st; /* symmem logged why (no P2P is INFO, a failure WARN) */
  /* Every slot must lie inside one chunk (peers' chunks are separate mappings). The chunks follow
   * the plans' pool sizes, the same on every rank, so every rank reaches the same answer. */
  for (size_t i = 0; i < plan->nsites; i++) {
    const symmpin_plan_site *ps = &plan->sites[i];
    if (ps->pinned && !symmpin_pool_fits(e->pool, ps->offset, ps->slot_bytes)) {
      SYMMPIN_WARN("comm %d rank %d: planned slot [%llu, +%llu) crosses a pool chunk (a bug); "
                   "staying on NCCL", c->ordinal, c->rank, (unsigned long long)ps->offset,
                   (unsigned long long)ps->slot_bytes);
      op_settle(ctx, false); /* this rank posts "not attached": back to the agreed size */
      return SYMMPIN_ERR_INTERNAL;
    }
  }
  return SYMMPIN_OK;
}

/* ---- setup ---- */

static void engine_off(symmpin_comm *c, struct symmpin_engine_comm *e, symmpin_reason why,
                       const char *what) {
  e->off_reason = why;
  SYMMPIN_INFO("comm %d rank %d/%d: symmpin stays out of this communicator: %s", c->ordinal,
               c->rank, c->nranks, what);
}

/* The pools allocate through the real cudaMalloc/cudaFree that interpose/ resolved (by name they
 * would bind to libsymmpin's own exported wrappers). Set once the host table has them (a call
 * before interpose's constructor ran allocates by name, through the guarded wrapper). */
static void pool_allocator_install(void) {
  static _Atomic int installed;
  if (atomic_load(&installed)) return;
  const symmpin_host *h = symmpin_host_table();
  if (!h->device_alloc || !h->device_free) return;
  symmpin_device_allocator a = {.alloc = h->device_alloc, .free = h->device_free};
  symmpin_pool_set_allocator(&a);
  atomic_store(&installed, 1);
}

/* Engine state for c on its first all-reduce. A failure leaves a state without agreement (off). */
static struct symmpin_engine_comm *engine_get(symmpin_comm *c) {
  if (c->engine) return c->engine;
  pool_allocator_install();
  struct symmpin_engine_comm *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  c->engine = e;
  const symmpin_config *cfg = symmpin_config_get();
  symmpin_agree_params p = {
      .key = c->key, .comm = c->ordinal, .rank = c->rank, .nranks = c->nranks,
      .warmup = (uint32_t)cfg->warmup, .mode = cfg->planner, .max_bytes = cfg->max_bytes,
      .timeout_ms = cfg->timeout_ms, .aborting = &c->aborting,
      .ops = {.ctx = c, .gpu_facts = op_gpu_facts, .check_peers = op_check_peers,
              .reserve = op_reserve, .attach = op_attach, .settle = op_settle},
  };
  char why[200];
  int cur = -1;
  cudaGetDevice(&cur);
  if (cur != c->device) cudaSetDevice(c->device);
  symmpin_status kernels_ok = symmpin_kernel_device_check(why, sizeof why);
  if (cur != c->device && cur >= 0) cudaSetDevice(cur);
  if (c->nranks > SYMMPIN_KERNEL_MAX_RANKS) {
    engine_off(c, e, SYMMPIN_REASON_COMM, "more ranks than the kernels support");
  } else if (kernels_ok != SYMMPIN_OK) {
    engine_off(c, e, SYMMPIN_REASON_COMM, why);
  } else if (symmpin_pool_create(c->rank, c->nranks, c->device, &e->pool) != SYMMPIN_OK ||
             symmpin_agree_open(&p, &e->agree) != SYMMPIN_OK) { /* no CUDA call yet */
    engine_off(c, e, SYMMPIN_REASON_ERROR, "setup failed (see the warning above)");
  }
  return e;
}

static void stats_publish(symmpin_comm *c, struct symmpin_engine_comm *e, const symmpin_plan *p) {
  for (size_t i = 0; i < p->nsites; i++) {
    if (!p->sites[i].pinned) continue;
    const site_entry *k = site_find(e->site_of_key, p->sites[i].site);
    if (!k) continue;
    site_add(&e->pinned_sites, k->site, k->site);
    symmpin_stats_set_slot(c, k->site, p->sites[i].offset, p->sites[i].slot_bytes);
  }
  symmpin_stats_set_pool(c, (uint32_t)p->npinned, p->dedicated_bytes, p->lower_bound_bytes,
                         symmpin_pool_size(e->pool));
}

/* ---- the per-call path ---- */

static symmpin_reason reason_of(symmpin_plan_reason r) {
  switch (r) {
  case SYMMPIN_PLAN_PINNED: return SYMMPIN_REASON_NONE;
  case SYMMPIN_PLAN_TOO_LARGE: return SYMMPIN_REASON_TOO_LARGE;
  case SYMMPIN_PLAN_UNSUPPORTED: return SYMMPIN_REASON_TYPE_OP;
  case SYMMPIN_PLAN_STREAM_OFF_PLAN:
  case SYMMPIN_PLAN_NO_STREAM: return SYMMPIN_REASON_STREAM;
  case SYMMPIN_PLAN_UNPLANNED: return SYMMPIN_REASON_WARMUP;
  default: return SYMMPIN_REASON_DISAGREE;
  }
}

static symmpin_reason stop_reason(symmpin_agree_stop s) {
  return s == SYMMPIN_AGREE_ERROR ? SYMMPIN_REASON_ERROR : SYMMPIN_REASON_COMM;
}

static void report_kernel_timeout(symmpin_comm *c, struct symmpin_engine_comm *e) {
  if (e->timeout_reported || !e->err_host || !e->err_host->timed_out || e->err_host->aborted)
    return;
  e->timeout_reported = true;
  SYMMPIN_WARN("comm %d rank %d: an all-reduce at site %016llx gave up waiting for rank %d after "
               "SYMMPIN_KERNEL_TIMEOUT_MS; its result is wrong, so this communicator is now in "
               "error (ncclCommGetAsyncError and every later all-reduce report ncclRemoteError). "
               "The ranks called different all-reduces at that point, or rank %d stopped.",
               c->ordinal, c->rank, (unsigned long long)e->err_host->site,
               (int)e->err_host->peer, (int)e->err_host->peer);
}

void symmpin_engine_comm_report_failure(symmpin_comm *c) {
  if (c->engine) report_kernel_timeout(c, c->engine);
}

static bool launch(symmpin_comm *c, struct symmpin_engine_comm *e, const symmpin_engine_call *ec,
                   const symmpin_plan_site *slot) {
  const symmpin_allreduce_call *a = ec->call;
  symmpin_kernel_call k = {
      .slot_bytes = slot->slot_bytes, .rank = c->rank, .nranks = c->nranks,
      .send = a->send, .recv = a->recv, .count = a->count, .dtype = a->dtype, .op = a->op,
      .input = SYMMPIN_INPUT_STAGED, .site = ec->site, .timeout_cycles = e->timeout_cycles,
      .error = e->err_dev,
  };
  for (int r = 0; r < c->nranks; r++) {
    k.slot[r] = symmpin_pool_addr(e->pool, r, slot->offset);
    if (!k.slot[r]) return false;
  }
  int cur = -1;
  cudaGetDevice(&cur);
  if (cur != c->device) cudaSetDevice(c->device);
  symmpin_status st = symmpin_kernel_launch(&k, a->stream);
  if (cur != c->device && cur >= 0) cudaSetDevice(cur);
  return st == SYMMPIN_OK;
}

bool symmpin_engine_allreduce(symmpin_comm *c, const symmpin_engine_call *ec, int *rc,
                              symmpin_reason *reason) {
  if (c->rank < 0 || c->nranks < 1) {
    *reason = SYMMPIN_REASON_COMM; /* not known yet (non-blocking init in progress) */
    return false;
  }
  struct symmpin_engine_comm *e = engine_get(c);
  if (!e) {
    *reason = SYMMPIN_REASON_ERROR;
    return false;
  }
  if (!e->agree) {
    *reason = e->off_reason;
    return false;
  }
  const symmpin_allreduce_call *a = ec->call;
  symmpin_agree_call call = {
      .site = ec->site, .stream_ord = ec->stream_ord, .count = a->count, .dtype = a->dtype,
      .op = a->op, .in_place = a->send == a->recv, .capturing = ec->capturing,
      .group_token = ec->group_depth > 0 ? ec->group_token : 0,
      .send_alloc = ec->send_alloc, .recv_alloc = ec->recv_alloc,
  };
  /* A stop ends the epochs, not an agreed plan: the peers keep redirecting its sites, so this rank
   * must too (sending them to NCCL would leave both sides waiting). */
  if (symmpin_agree_step(e->agree, c->allreduces, &call))
    stats_publish(c, e, symmpin_agree_plan(e->agree));
  const symmpin_plan *plan = symmpin_agree_plan(e->agree);
  uint64_t key = symmpin_agree_key(&call);
  if (!plan) {
    site_add(&e->site_of_key, key, ec->site);
    symmpin_agree_stop stopped = symmpin_agree_stopped(e->agree);
    *reason = stopped ? stop_reason(stopped)
              : ec->capturing ? SYMMPIN_REASON_CAPTURE : SYMMPIN_REASON_WARMUP;
    return false;
  }
  const symmpin_plan_site *slot = NULL;
  *reason = reason_of(symmpin_agree_route(e->agree, &call, &slot));
  if (*reason != SYMMPIN_REASON_NONE) {
    site_add(&e->site_of_key, key, ec->site);
    /* A site pinned on another stream: this stream is new to it (the safety net's count). A site
     * first seen during capture: counted as capture (it gets a slot at an eager epoch). */
    if (*reason == SYMMPIN_REASON_WARMUP && site_find(e->pinned_sites, ec->site))
      *reason = SYMMPIN_REASON_STREAM;
    else if (*reason == SYMMPIN_REASON_WARMUP && ec->capturing)
      *reason = SYMMPIN_REASON_CAPTURE;
    return false;
  }
  if (!launch(c, e, ec, slot)) {
    /* NCCL cannot take this call any more: the peers run symmpin's kernel for it. Report the
     * failure to the program (ncclUnhandledCudaError); the peers' kernels time out naming this
     * rank. */
    SYMMPIN_WARN("comm %d rank %d: launching the all-reduce kernel for site %016llx failed",
                 c->ordinal, c->rank, (unsigned long long)ec->site);
    *rc = 1;
    return true;
  }
  *rc = 0; /* ncclSuccess */
  return true;
}

/* ---- the end ---- */

static void engine_free_host(struct symmpin_engine_comm *e) {
  symmpin_agree_close(e->agree);
  site_set_free(&e->site_of_key);
  site_set_free(&e->pinned_sites);
  free(e);
}

/* ncclCommAbort: recovery from stuck kernels, which the abort word (set before the lock was taken,
 * preload.c) has already told to give up. No barrier and no CUDA call (a device sync would wait
 * for the very kernels being abandoned): the device memory and the host-mapped error record
 * (which a kernel may still be reading) are left to process exit. */
void symmpin_engine_comm_abandon(symmpin_comm *c) {
  struct symmpin_engine_comm *e = c->engine;
  if (!e) return;
  c->engine = NULL;
  engine_free_host(e);
}

/* Before freeing its pool a rank unmaps its peers' pools and waits (briefly) until every rank has
 * done so: freeing memory a peer still maps is undefined in CUDA IPC. */
void symmpin_engine_comm_release(symmpin_comm *c) {
  struct symmpin_engine_comm *e = c->engine;
  if (!e) return;
  c->engine = NULL;
  /* ncclCommFinalize keeps the handle (and so c) valid, and ncclCommGetAsyncError may still ask:
   * keep what the error record says, and stop pointing at it long before it is freed below (the
   * barrier and the device sync come in between). */
  const volatile uint32_t *failed = atomic_exchange(&c->kernel_failed, NULL);
  if (failed && *failed && !e->err_host->aborted) {
    int none = 0;
    atomic_compare_exchange_strong(&c->async_error, &none, SYMMPIN_NCCL_REMOTE_ERROR);
  }
  atomic_store(&c->kernel_abort, NULL);
  if (e->agree && e->pool && symmpin_pool_size(e->pool) > 0) {
    symmpin_pool_unmap_peers(e->pool);
    uint64_t limit = symmpin_config_get()->timeout_ms;
    (void)symmpin_agree_teardown_barrier(e->agree, limit < 2000 ? (unsigned)limit : 2000);
  }
  symmpin_pool_destroy(e->pool); /* synchronizes the device first: no kernel still uses it */
  if (e->err_host) cudaFreeHost((void *)e->err_host);
  engine_free_host(e);
}
