/* The engine: per communicator, warm-up -> agreement over the board -> pinned sites redirected
 * to the one-shot kernels. docs/design.md ("Per-communicator life") is the protocol in prose.
 *
 * Rounds on the communicator's board (symmem/board.h), all posted from inside all-reduce calls:
 *   round 1            hello, posted at the communicator's first all-reduce: it tells the board
 *                      which thread drives each rank, so a wait that would deadlock is seen at once;
 *   epoch e (e >= 1):  round 3e-1  "record":  the call index, this rank's GPU identity and the
 *                                             calls since the last plan;
 *                      round 3e    "plan":    plan digest, P2P row, this rank's pool export;
 *                      round 3e+1  "attached": whether every peer's pool is mapped.
 * Each round is posted at one call and read at the next call on that rank, so a thread that
 * drives several ranks (one call per rank, in turn) never waits for itself. The epoch's verdict
 * lives on its last round (3e+1): GO only after every rank attached; FAIL by anyone who gives up.
 * A FAIL on round 3e-1 as well means "this communicator is not one host's": the engine stops.
 *
 * Plans are keyed by (site, stream ordinal), not by site alone: one site called on two streams is
 * two plan entries, and entries on different streams never share bytes (the planner treats
 * different streams as concurrent), so no call can ever use a slot while another stream does. A
 * site first seen on a new stream goes to NCCL (counted as "stream") until a later epoch plans it.
 *
 * Everything runs under the communicator's lock (preload holds it) and the re-entrancy guard. */
#include "preload/engine.h"

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uthash.h>

#include "common/log.h"
#include "kernels/layout.h"
#include "kernels/oneshot.h"
#include "planner/plan.h"
#include "planner/record.h"
#include "common/hash.h"
#include "planner/site.h"
#include "planner/warmup.h"
#include "preload/config.h"
#include "preload/stats.h"
#include "symmem/board.h"
#include "symmem/pool.h"

#define HELLO_ROUND 1u
#define ROUND_RECORD(e) (3u * (e) - 1u)
#define ROUND_PLAN(e) (3u * (e))
#define ROUND_ATTACH(e) (3u * (e) + 1u)
/* The longest a record posted on the board may grow (calls); later calls of an epoch are not
 * recorded, on every rank alike. */
#define RECORD_MAX_CALLS 16384

typedef enum engine_phase {
  PHASE_IDLE,          /* recording; an epoch starts when the schedule says so */
  PHASE_RECORD_POSTED, /* round 3e-1 posted */
  PHASE_PLAN_POSTED,   /* round 3e posted */
  PHASE_ATTACH_POSTED, /* round 3e+1 posted */
  PHASE_OFF,           /* symmpin stays out of this communicator for good */
} engine_phase;

typedef struct hello_blob {
  int32_t pid, device;
} hello_blob;

typedef struct record_head {
  uint64_t call_index;      /* the communicator's call count when the record closed */
  int32_t capturing;
  int32_t pad;
  symmpin_pool_facts facts; /* this rank's GPU, for the P2P check (every epoch: blobs of old
                               rounds are overwritten, so nothing is read from the hello) */
} record_head;

typedef struct plan_blob {
  uint64_t digest, pool_bytes;
  int32_t p2p_ok;  /* this rank's device reaches every peer's */
  int32_t ready;   /* plan made and chunk reserved */
  unsigned char export_rec[SYMMPIN_POOL_EXPORT_BYTES];
} plan_blob;

typedef struct attach_blob {
  int32_t ok;
} attach_blob;

/* Plan key -> the call site it came from (for statistics), and the sites pinned on some stream. */
typedef struct site_entry {
  uint64_t id;
  uint64_t site;
  UT_hash_handle hh;
} site_entry;

struct symmpin_engine_comm {
  engine_phase phase;
  symmpin_reason off_reason;
  uint32_t epoch;            /* the epoch in progress or last finished */
  uint64_t close_n;          /* the call that closed the current epoch's record */
  symmpin_warmup warmup;
  bool warmup_done;
  symmpin_epochs epochs;
  symmpin_record record;     /* the calls since the last record closed */
  symmpin_plan *plan;        /* the agreed plan; NULL before the first GO */
  symmpin_plan *candidate;   /* made in this epoch, adopted on GO */
  symmpin_board *board;
  symmpin_pool *pool;
  symmpin_oneshot_error *err_host, *err_dev;
  uint64_t timeout_cycles;
  bool timeout_reported;
  void *blob;                /* scratch for the record round */
  size_t blob_cap;
  site_entry *site_of_key;   /* plan key -> call site, for keys seen while not redirected */
  site_entry *pinned_sites;  /* call sites pinned on at least one stream */
};

/* The planner's view of a call's stream: its sharing class (planner/record.h). A slot used by the
 * LL variant and then by the copy variant at another shape timed out on the GPU, so variants never
 * share a slot. */
static int share_class(int stream_ord, const symmpin_allreduce_call *a, int nranks) {
  return symmpin_call_class(
      stream_ord, (int)symmpin_oneshot_variant_for(a->count, a->dtype, nranks, SYMMPIN_FORM_STAGED),
      SYMMPIN_ONESHOT_VARIANT_COUNT);
}

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

static uint64_t thread_id(void) { return (uint64_t)syscall(SYS_gettid); }

static size_t slot_bytes_cb(size_t count, int dtype, int nranks, void *ctx) {
  (void)ctx;
  return symmpin_oneshot_slot_bytes(count, dtype, nranks, SYMMPIN_FORM_STAGED);
}

static bool supports_cb(int dtype, int op, void *ctx) {
  (void)ctx;
  return symmpin_oneshot_supports(dtype, op);
}

static void engine_off(symmpin_comm *c, symmpin_reason why, const char *what) {
  struct symmpin_engine_comm *e = c->engine;
  if (e->phase == PHASE_OFF) return;
  e->phase = PHASE_OFF;
  e->off_reason = why;
  SYMMPIN_INFO("comm %d rank %d/%d: symmpin stays out of this communicator: %s", c->ordinal,
               c->rank, c->nranks, what);
}

/* ---- setup ---- */

static symmpin_status engine_open(symmpin_comm *c, struct symmpin_engine_comm *e) {
  const symmpin_config *cfg = symmpin_config_get();
  symmpin_warmup_config wc = {.calls = (uint32_t)cfg->warmup};
  symmpin_status st = symmpin_warmup_init(&e->warmup, &wc);
  if (st != SYMMPIN_OK) return st;
  symmpin_record_init(&e->record, c->ordinal, c->rank, c->nranks, 0);
  st = symmpin_board_open(c->key, c->rank, c->nranks, &e->board);
  if (st != SYMMPIN_OK) return st;
  st = symmpin_pool_create(c->rank, c->nranks, c->device, &e->pool); /* no CUDA call yet */
  if (st != SYMMPIN_OK) return st;
  hello_blob hello = {.pid = (int32_t)getpid(), .device = c->device};
  return symmpin_board_post(e->board, HELLO_ROUND, &hello, sizeof hello, thread_id());
}

/* Engine state for c on its first all-reduce. A failure leaves a state that is OFF. */
static struct symmpin_engine_comm *engine_get(symmpin_comm *c) {
  if (c->engine) return c->engine;
  struct symmpin_engine_comm *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  c->engine = e;
  e->phase = PHASE_IDLE;
  if (c->nranks > SYMMPIN_MAX_RANKS) {
    engine_off(c, SYMMPIN_REASON_COMM, "more ranks than the kernels support");
  } else if (engine_open(c, e) != SYMMPIN_OK) {
    engine_off(c, SYMMPIN_REASON_ERROR, "setup failed (see the warning above)");
  }
  return e;
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
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, c->device) != cudaSuccess || khz <= 0)
    khz = 2000000; /* H100/H200 boost clock, kHz */
  e->timeout_cycles = symmpin_config_get()->timeout_ms * (uint64_t)khz;
  return SYMMPIN_OK;
}

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

/* ---- the agreement ---- */

/* Wait for every rank's post of `round`, giving up (FAIL on the epoch) on timeout, on a wait that
 * would deadlock this thread, or as soon as someone else failed the epoch. */
static bool wait_round(symmpin_comm *c, struct symmpin_engine_comm *e, uint32_t round) {
  const symmpin_config *cfg = symmpin_config_get();
  uint64_t waited = 0;
  for (;;) {
    int missing = -1;
    symmpin_status st = symmpin_board_wait(e->board, round, 20, thread_id(), &missing);
    if (st == SYMMPIN_OK) return true;
    if (symmpin_board_verdict(e->board, ROUND_ATTACH(e->epoch)) == SYMMPIN_VERDICT_FAIL) return false;
    waited += 20;
    if (st != SYMMPIN_ERR_TIMEOUT && st != SYMMPIN_ERR_DISAGREE) return false;
    if (st == SYMMPIN_ERR_DISAGREE) {
      SYMMPIN_INFO("comm %d rank %d: rank %d is driven by this thread and has not reached this "
                   "point of the agreement (round %u): not waiting", c->ordinal, c->rank, missing, round);
      return false;
    }
    if (waited >= cfg->timeout_ms) {
      SYMMPIN_WARN("comm %d rank %d: rank %d did not post round %u of the plan agreement within "
                   "%llu ms; its all-reduces stay on NCCL", c->ordinal, c->rank, missing, round,
                   (unsigned long long)cfg->timeout_ms);
      if (round == ROUND_RECORD(e->epoch) && e->epoch == 1)
        symmpin_board_decide(e->board, round, SYMMPIN_VERDICT_FAIL); /* not one host's */
      return false;
    }
  }
}

static void epoch_fail(symmpin_comm *c, struct symmpin_engine_comm *e) {
  symmpin_board_decide(e->board, ROUND_ATTACH(e->epoch), SYMMPIN_VERDICT_FAIL);
  symmpin_plan_free(e->candidate);
  e->candidate = NULL;
  e->phase = PHASE_IDLE;
  if (symmpin_board_verdict(e->board, ROUND_RECORD(e->epoch)) == SYMMPIN_VERDICT_FAIL)
    engine_off(c, SYMMPIN_REASON_COMM, "not every rank reached the agreement: ranks on several "
                                       "hosts (or a rank that stopped calling all-reduce)");
  else
    SYMMPIN_INFO("comm %d rank %d: plan agreement of epoch %u failed; NCCL until the next one",
                 c->ordinal, c->rank, e->epoch);
}

/* Call n closes the record: post it (round 3e-1). */
static void epoch_start(symmpin_comm *c, struct symmpin_engine_comm *e, uint64_t n, bool capturing) {
  e->epoch++;
  e->close_n = n;
  size_t need = sizeof(record_head) + symmpin_record_encoded_bytes(e->record.ncalls);
  if (need > e->blob_cap) {
    void *nb = realloc(e->blob, need);
    if (!nb) {
      engine_off(c, SYMMPIN_REASON_ERROR, "out of memory");
      return;
    }
    e->blob = nb;
    e->blob_cap = need;
  }
  record_head head = {.call_index = n, .capturing = capturing};
  if (symmpin_pool_facts_get(c->device, &head.facts) != SYMMPIN_OK) {
    engine_off(c, SYMMPIN_REASON_ERROR, "cannot read this GPU's identity");
    return;
  }
  memcpy(e->blob, &head, sizeof head);
  size_t len = 0;
  symmpin_status st = symmpin_record_encode(&e->record, (char *)e->blob + sizeof head,
                                            e->blob_cap - sizeof head, &len);
  if (st == SYMMPIN_OK)
    st = symmpin_board_post(e->board, ROUND_RECORD(e->epoch), e->blob, sizeof head + len, thread_id());
  symmpin_record_restart(&e->record, n);
  if (st != SYMMPIN_OK) {
    engine_off(c, SYMMPIN_REASON_ERROR, "cannot post the call record");
    return;
  }
  e->phase = PHASE_RECORD_POSTED;
}

/* Next call: read every record, make the plan, reserve the pool, post round 3e. */
static void epoch_plan(symmpin_comm *c, struct symmpin_engine_comm *e, bool capturing) {
  uint32_t round = ROUND_RECORD(e->epoch);
  if (!wait_round(c, e, round)) return epoch_fail(c, e);
  symmpin_record records[SYMMPIN_MAX_RANKS];
  const symmpin_record *rp[SYMMPIN_MAX_RANKS];
  int decoded = 0;
  symmpin_pool_facts facts[SYMMPIN_MAX_RANKS];
  bool aligned = true, any_capturing = capturing;
  uint64_t my_index = 0, first_index = 0, max_index = 0;
  for (int r = 0; r < c->nranks; r++) {
    size_t bytes = 0;
    const char *blob = symmpin_board_blob(e->board, round, r, &bytes);
    record_head head;
    if (!blob || bytes < sizeof head) break;
    memcpy(&head, blob, sizeof head);
    if (r == c->rank) my_index = head.call_index;
    if (r == 0) first_index = head.call_index;
    if (head.call_index != first_index) aligned = false;
    if (head.call_index > max_index) max_index = head.call_index;
    any_capturing |= head.capturing != 0;
    facts[r] = head.facts;
    if (symmpin_record_decode(blob + sizeof head, bytes - sizeof head, &records[r]) != SYMMPIN_OK)
      break;
    rp[r] = &records[r];
    decoded++;
  }
  plan_blob pb = {0};
  if (decoded == c->nranks && aligned && !any_capturing) {
    const symmpin_config *cfg = symmpin_config_get();
    symmpin_plan_policy pol = {
        .mode = cfg->planner == SYMMPIN_PLANNER_DEDICATED ? SYMMPIN_PLAN_DEDICATED : SYMMPIN_PLAN_SHARED,
        .max_bytes = cfg->max_bytes,
        .alignment = 256,
        .slot_bytes = slot_bytes_cb,
        .supports = supports_cb,
        .nranks = c->nranks,
    };
    enum cudaStreamCaptureMode mode = capture_mode_relax();
    if (symmpin_plan_make(rp, &pol, e->plan, &e->candidate) == SYMMPIN_OK &&
        engine_cuda_setup(c, e) == SYMMPIN_OK &&
        symmpin_pool_reserve(e->pool, e->candidate->pool_bytes, pb.export_rec) == SYMMPIN_OK) {
      pb.digest = e->candidate->digest;
      pb.pool_bytes = e->candidate->pool_bytes;
      pb.ready = 1;
    }
    capture_mode_restore(mode);
  }
  for (int r = 0; r < decoded; r++) symmpin_record_free(&records[r]);
  if (!aligned && decoded == c->nranks) {
    /* Ranks closed their records at different calls (their site sequences differ, so warm-up
     * ended apart). Every rank read the same indices: meet at a common call from now on. */
    SYMMPIN_INFO("comm %d rank %d: ranks ended warm-up at different calls (this one at %llu); "
                 "next agreement at a common call", c->ordinal, c->rank, (unsigned long long)my_index);
    e->epochs.next = max_index + e->epochs.interval;
  }
  pb.p2p_ok = 1;
  if (decoded == c->nranks) {
    char why[160];
    if (symmpin_pool_check_peers(facts, c->nranks, why, sizeof why) != SYMMPIN_OK) {
      pb.p2p_ok = 0;
      SYMMPIN_INFO("comm %d rank %d: %s", c->ordinal, c->rank, why);
    }
  }
  if (!pb.ready && pb.p2p_ok) return epoch_fail(c, e);
  if (symmpin_board_post(e->board, ROUND_PLAN(e->epoch), &pb, sizeof pb, thread_id()) != SYMMPIN_OK)
    return epoch_fail(c, e);
  e->phase = PHASE_PLAN_POSTED;
}

/* Next call: compare digests, map every peer's pool, post round 3e+1. */
static void epoch_attach(symmpin_comm *c, struct symmpin_engine_comm *e, bool capturing) {
  uint32_t round = ROUND_PLAN(e->epoch);
  if (capturing || !wait_round(c, e, round)) return epoch_fail(c, e);
  /* Someone gave up while this rank waited: do not grow the pool for a plan nobody will use. */
  if (symmpin_board_verdict(e->board, ROUND_ATTACH(e->epoch)) == SYMMPIN_VERDICT_FAIL)
    return epoch_fail(c, e);
  const void *exports[SYMMPIN_MAX_RANKS];
  bool same = e->candidate != NULL, p2p = true;
  for (int r = 0; r < c->nranks; r++) {
    size_t bytes = 0;
    const plan_blob *pb = symmpin_board_blob(e->board, round, r, &bytes);
    if (!pb || bytes < sizeof *pb) return epoch_fail(c, e);
    same = same && pb->ready && pb->digest == e->candidate->digest &&
           pb->pool_bytes == e->candidate->pool_bytes;
    p2p &= pb->p2p_ok != 0;
    exports[r] = pb->export_rec;
  }
  if (!p2p) {
    epoch_fail(c, e);
    return engine_off(c, SYMMPIN_REASON_COMM, "some pair of GPUs has no peer access (P2P)");
  }
  if (!same) {
    SYMMPIN_WARN("comm %d rank %d: ranks computed different plans from the same records (a "
                 "bug); staying on NCCL", c->ordinal, c->rank);
    return epoch_fail(c, e);
  }
  enum cudaStreamCaptureMode mode = capture_mode_relax();
  attach_blob ab = {.ok = symmpin_pool_attach(e->pool, exports) == SYMMPIN_OK};
  if (!ab.ok) SYMMPIN_WARN("comm %d rank %d: mapping the peers' pools failed", c->ordinal, c->rank);
  /* Every slot must lie inside one chunk (peers' chunks are separate mappings). The chunks follow
   * the plans' pool sizes, the same on every rank, so every rank reaches the same answer. */
  for (size_t i = 0; ab.ok && i < e->candidate->nsites; i++) {
    const symmpin_plan_site *ps = &e->candidate->sites[i];
    if (ps->pinned && !symmpin_pool_fits(e->pool, ps->offset, ps->slot_bytes)) {
      SYMMPIN_WARN("comm %d rank %d: planned slot [%llu, +%llu) crosses a pool chunk (a bug); "
                   "staying on NCCL", c->ordinal, c->rank, (unsigned long long)ps->offset,
                   (unsigned long long)ps->slot_bytes);
      ab.ok = 0;
    }
  }
  capture_mode_restore(mode);
  if (symmpin_board_post(e->board, ROUND_ATTACH(e->epoch), &ab, sizeof ab, thread_id()) != SYMMPIN_OK)
    return epoch_fail(c, e);
  e->phase = PHASE_ATTACH_POSTED;
}

static void stats_publish(symmpin_comm *c, const symmpin_plan *p) {
  struct symmpin_engine_comm *e = c->engine;
  for (size_t i = 0; i < p->nsites; i++) {
    if (!p->sites[i].pinned) continue;
    const site_entry *k = site_find(e->site_of_key, p->sites[i].site);
    if (!k) continue;
    site_add(&e->pinned_sites, k->site, k->site);
    symmpin_stats_set_slot(c, k->site, p->sites[i].offset, p->sites[i].slot_bytes);
  }
  symmpin_stats_set_pool(c, (uint32_t)p->npinned, p->dedicated_bytes, p->lower_bound_bytes,
                         symmpin_pool_size(c->engine->pool));
}

/* Next call: everyone attached -> GO, and the candidate becomes the plan. */
static void epoch_decide(symmpin_comm *c, struct symmpin_engine_comm *e) {
  uint32_t round = ROUND_ATTACH(e->epoch);
  if (!wait_round(c, e, round)) return epoch_fail(c, e);
  bool ok = true;
  for (int r = 0; r < c->nranks; r++) {
    size_t bytes = 0;
    const attach_blob *ab = symmpin_board_blob(e->board, round, r, &bytes);
    ok &= ab && bytes >= sizeof *ab && ab->ok;
  }
  if (symmpin_board_decide(e->board, round, ok ? SYMMPIN_VERDICT_GO : SYMMPIN_VERDICT_FAIL) !=
      SYMMPIN_VERDICT_GO)
    return epoch_fail(c, e);
  symmpin_plan_free(e->plan);
  e->plan = e->candidate;
  e->candidate = NULL;
  e->phase = PHASE_IDLE;
  symmpin_epochs_advance(&e->epochs, e->plan->nnew > 0);
  stats_publish(c, e->plan);
  SYMMPIN_INFO("comm %d rank %d/%d: epoch %u agreed: %zu of %zu sites pinned, pool %llu bytes "
               "(dedicated %llu, lower bound %llu)", c->ordinal, c->rank, c->nranks, e->epoch,
               e->plan->npinned, e->plan->nsites, (unsigned long long)e->plan->pool_bytes,
               (unsigned long long)e->plan->dedicated_bytes,
               (unsigned long long)e->plan->lower_bound_bytes);
}

/* Record call n and move the agreement one step. */
static void engine_step(symmpin_comm *c, struct symmpin_engine_comm *e, const symmpin_engine_call *ec,
                        uint64_t n) {
  const symmpin_allreduce_call *a = ec->call;
  if (e->record.ncalls < RECORD_MAX_CALLS) {
    symmpin_call call = {
        .site = symmpin_call_key(ec->site, ec->stream_ord), .count = a->count, .dtype = a->dtype, .op = a->op,
        .stream_ord = share_class(ec->stream_ord, a, c->nranks), .in_place = a->send == a->recv,
        .capturing = ec->capturing,
        .send_alloc = ec->send_alloc, .recv_alloc = ec->recv_alloc,
    };
    /* Out of memory: the call is not recorded, as past RECORD_MAX_CALLS; the next plan sees a
     * shorter record on this rank and keeps the sites it cannot match on NCCL. */
    (void)symmpin_record_append(&e->record, &call, ec->group_depth > 0 ? ec->group_token : 0);
  }
  switch (e->phase) {
  case PHASE_IDLE: {
    bool due;
    if (!e->warmup_done) {
      due = symmpin_warmup_step(&e->warmup, symmpin_warmup_key(c->ordinal, a->count, a->dtype, a->op));
      if (due) {
        const symmpin_config *cfg = symmpin_config_get();
        symmpin_warmup_config wc = {.calls = (uint32_t)cfg->warmup};
        symmpin_epochs_init(&e->epochs, &wc, n);
        e->warmup_done = true;
      }
    } else {
      due = symmpin_epochs_due(&e->epochs, n);
    }
    if (due) epoch_start(c, e, n, ec->capturing);
    break;
  }
  case PHASE_RECORD_POSTED: epoch_plan(c, e, ec->capturing); break;
  case PHASE_PLAN_POSTED: epoch_attach(c, e, ec->capturing); break;
  case PHASE_ATTACH_POSTED: epoch_decide(c, e); break;
  case PHASE_OFF: break;
  }
  /* A failed epoch left the schedule behind: plan again one interval after the call that closed
   * it (the same call on every rank; ranks notice a failure at different calls). */
  if (e->phase == PHASE_IDLE && e->warmup_done && e->epochs.next <= n)
    e->epochs.next = e->close_n + e->epochs.interval;
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

static void report_kernel_timeout(symmpin_comm *c, struct symmpin_engine_comm *e) {
  if (e->timeout_reported || !e->err_host->timed_out) return;
  e->timeout_reported = true;
  SYMMPIN_WARN("comm %d rank %d: an all-reduce at site %016llx gave up waiting for rank %d after "
               "SYMMPIN_TIMEOUT_MS; its result is wrong. The ranks called different all-reduces "
               "at that point, or rank %d stopped.", c->ordinal, c->rank,
               (unsigned long long)e->err_host->site, (int)e->err_host->peer, (int)e->err_host->peer);
}

static bool launch(symmpin_comm *c, struct symmpin_engine_comm *e, const symmpin_engine_call *ec,
                   const symmpin_plan_site *slot) {
  const symmpin_allreduce_call *a = ec->call;
  symmpin_oneshot_call k = {
      .slot_bytes = slot->slot_bytes, .rank = c->rank, .nranks = c->nranks,
      .send = a->send, .recv = a->recv, .count = a->count, .dtype = a->dtype, .op = a->op,
      .form = SYMMPIN_FORM_STAGED, .site = ec->site, .timeout_cycles = e->timeout_cycles,
      .error = e->err_dev,
  };
  for (int r = 0; r < c->nranks; r++) {
    k.slot[r] = symmpin_pool_addr(e->pool, r, slot->offset);
    if (!k.slot[r]) return false;
  }
  int cur = -1;
  cudaGetDevice(&cur);
  if (cur != c->device) cudaSetDevice(c->device);
  symmpin_status st = symmpin_oneshot_launch(&k, a->stream);
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
  /* OFF stops the epochs, not an agreed plan: the peers keep redirecting its sites, so this rank
   * must too (sending them to NCCL would leave both sides waiting). */
  if (e->phase != PHASE_OFF) engine_step(c, e, ec, c->allreduces);
  if (e->phase == PHASE_OFF && !e->plan) {
    *reason = e->off_reason;
    return false;
  }
  if (!e->plan) {
    site_add(&e->site_of_key, symmpin_call_key(ec->site, ec->stream_ord), ec->site);
    *reason = SYMMPIN_REASON_WARMUP;
    return false;
  }
  report_kernel_timeout(c, e);
  const symmpin_plan_site *slot = NULL;
  uint64_t key = symmpin_call_key(ec->site, ec->stream_ord);
  *reason = reason_of(symmpin_plan_route(e->plan, key, share_class(ec->stream_ord, ec->call, c->nranks),
                                         &slot));
  if (*reason != SYMMPIN_REASON_NONE) {
    site_add(&e->site_of_key, key, ec->site);
    /* A site pinned on another stream: this stream is new to it (the safety net's count). */
    if (*reason == SYMMPIN_REASON_WARMUP && site_find(e->pinned_sites, ec->site))
      *reason = SYMMPIN_REASON_STREAM;
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

/* Before freeing its pool a rank unmaps its peers' pools and waits (briefly) until every rank has
 * done so: freeing memory a peer still maps is undefined in CUDA IPC. The barrier is the board's
 * last round, the same number on every rank whatever epoch each is in. A thread that drives
 * several ranks cannot wait for the others here; it destroys after the short wait. */
#define ROUND_TEARDOWN (UINT32_MAX - 1u)

static void engine_teardown_barrier(symmpin_comm *c, struct symmpin_engine_comm *e) {
  if (!e->board || !e->pool || symmpin_pool_size(e->pool) == 0) return;
  symmpin_pool_unmap_peers(e->pool);
  static const int32_t done = 1;
  if (symmpin_board_post(e->board, ROUND_TEARDOWN, &done, sizeof done, thread_id()) != SYMMPIN_OK)
    return;
  int missing = -1;
  uint64_t limit = symmpin_config_get()->timeout_ms;
  unsigned ms = limit < 2000 ? (unsigned)limit : 2000;
  if (symmpin_board_wait(e->board, ROUND_TEARDOWN, ms, thread_id(), &missing) == SYMMPIN_ERR_TIMEOUT)
    SYMMPIN_INFO("comm %d rank %d: rank %d did not reach the teardown barrier", c->ordinal, c->rank,
                 missing);
}

static void engine_free_host(struct symmpin_engine_comm *e) {
  if (e->board) symmpin_board_close(e->board);
  symmpin_plan_free(e->plan);
  symmpin_plan_free(e->candidate);
  symmpin_record_free(&e->record);
  symmpin_warmup_free(&e->warmup);
  free(e->blob);
  site_set_free(&e->site_of_key);
  site_set_free(&e->pinned_sites);
  free(e);
}

/* ncclCommAbort: recovery from stuck kernels. No barrier and no CUDA call (a device sync would
 * wait for the very kernels being abandoned): the device memory is left to process exit. */
void symmpin_engine_comm_abandon(symmpin_comm *c) {
  struct symmpin_engine_comm *e = c->engine;
  if (!e) return;
  c->engine = NULL;
  engine_free_host(e);
}

void symmpin_engine_comm_release(symmpin_comm *c) {
  struct symmpin_engine_comm *e = c->engine;
  if (!e) return;
  c->engine = NULL;
  engine_teardown_barrier(c, e);
  symmpin_pool_destroy(e->pool); /* synchronizes the device first: no kernel still uses it */
  if (e->err_host) cudaFreeHost((void *)e->err_host);
  engine_free_host(e);
}
