/* The agreement (agree.h): phases of an epoch over the board, verdicts, and the plan in force. */
#include "agree/agree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/hash.h"
#include "common/log.h"
#include "kernels/allreduce.h"
#include "planner/record.h"
#include "planner/schedule.h"
#include "planner/warmup.h"
#include "symmem/board.h"

#define HELLO_ROUND 1u
#define ROUND_RECORD(e) (3u * (e)-1u)
#define ROUND_PLAN(e) (3u * (e))
#define ROUND_ATTACH(e) (3u * (e) + 1u)
/* Waits poll the board in slices this long, to notice a FAIL by someone else early. */
#define WAIT_SLICE_MS 20u

typedef enum agree_phase {
  PHASE_IDLE,          /* recording; an epoch starts when the schedule says so */
  PHASE_RECORD_POSTED, /* round 3e-1 posted */
  PHASE_PLAN_POSTED,   /* round 3e posted */
  PHASE_ATTACH_POSTED, /* round 3e+1 posted */
} agree_phase;

typedef struct hello_blob {
  int32_t pid, pad;
} hello_blob;

/* The record round's blob: this head, the encoded record (record_bytes), then ntimes
 * symmpin_choice_entry and ngroups symmpin_choice_group_entry (this rank's measurements,
 * choice.h). */
typedef struct record_head {
  uint64_t call_index;      /* the call that closed the record */
  int32_t capturing;        /* that call was being captured: nothing may allocate now */
  uint32_t ntimes;          /* measured shapes after the record */
  uint32_t measuring;       /* this rank measures (ops.shape_times set): probes need every rank */
  uint32_t ngroups;         /* measured groups after the shapes */
  uint64_t group_max_bytes; /* this rank's SYMMPIN_GROUP_MAX_BYTES (0 = none) */
  symmpin_pool_facts facts; /* this rank's GPU, for the P2P check (every epoch: blobs of old
                               rounds are overwritten, so nothing is read from the hello) */
  uint64_t record_bytes;
} record_head;

typedef struct plan_blob {
  uint64_t digest, pool_bytes;
  int32_t p2p_ok; /* this rank's device reaches every peer's */
  int32_t ready;  /* plan made and chunk reserved */
  unsigned char export_rec[SYMMPIN_POOL_EXPORT_BYTES];
} plan_blob;

typedef struct attach_blob {
  int32_t ok;
} attach_blob;

/* What this rank saw of one epoch's record round: enough to name who missed it when the epoch
 * turns out to have failed for good (stop_not_one_host). */
typedef struct record_seen {
  int missing; /* the rank this rank last found missing from the round (-1: none) */
  bool late;   /* this rank posted its record after the epoch had failed for good */
} record_seen;

struct symmpin_agree {
  symmpin_agree_params p;
  agree_phase phase;
  bool attached;     /* this epoch's attach succeeded here: settle it with the verdict */
  bool rollback_due; /* the epoch failed during a capture: settle at the next eager call */
  symmpin_agree_stop stop;
  uint32_t epoch; /* the epoch in progress or last finished */
  symmpin_schedule sched;
  symmpin_record record;   /* the calls since the last record closed */
  symmpin_plan *plan;      /* the agreed plan; NULL before the first GO */
  symmpin_plan *candidate; /* made in this epoch, adopted on GO */
  symmpin_board *board;
  void *blob; /* scratch for the record round */
  size_t blob_cap;
  uint64_t checked[SYMMPIN_KERNEL_MAX_RANKS]; /* route log: calls compared with each peer */
  uint64_t logged;                            /* route log: the last call this rank logged */
  uint64_t *history;     /* route log: this rank's own signatures of its last ROUTE_HISTORY
                          * calls (process memory: a rank far ahead still compares a peer's
                          * recent entries after its own have left the board's ring) */
  uint64_t first_logged; /* route log: the first call logged (the first plan's GO) */
  uint64_t blk_hash;     /* route log: the hash of the block being logged */
  bool blk_whole;        /* ... every call of it logged so far, from its first */
  bool measuring; /* every rank measures, as of the plan in force (symmpin_agree_measuring) */
  /* Scratch for the measurements posted and read with the records (choice.h). */
  symmpin_choice_entry times_out[SYMMPIN_CHOICE_SHAPES];
  symmpin_choice_entry times_in[SYMMPIN_KERNEL_MAX_RANKS][SYMMPIN_CHOICE_SHAPES];
  symmpin_choice_group_entry groups_out[SYMMPIN_CHOICE_GROUPS];
  symmpin_choice_group_entry groups_in[SYMMPIN_KERNEL_MAX_RANKS][SYMMPIN_CHOICE_GROUPS];
  symmpin_plan_shape slower_grouped[SYMMPIN_CHOICE_GROUPS * SYMMPIN_CHOICE_GROUP_CALLS];
  bool cand_measuring;      /* ... as of the candidate */
  bool alarm_reported;      /* the alarm's WARN was printed */
  bool elsewhere_said;      /* "rank r is on another host" was decided and logged */
  int elsewhere_rank;       /* ... that rank r (-1: none found by this rank) */
  record_seen seen;         /* what this rank saw of the record round of the epoch in progress or
                             * last finished */
  record_seen seen_before;  /* ... and of the epoch before that one (stopped_after_leaving) */
  unsigned timeouts_in_row; /* epochs failed by a wait that expired, since the last GO */
};

/* Constants of two modules that must agree. Every rank of a communicator the kernels take has a
 * route log on the board (a rank past the board's logs would never be compared: its routes could
 * differ unseen); and the fixed parts of this rank's posts fit in one board blob. */
_Static_assert(SYMMPIN_BOARD_ROUTE_RANKS >= SYMMPIN_KERNEL_MAX_RANKS,
               "the board keeps route logs for fewer ranks than the kernels take");
_Static_assert(sizeof(record_head) + SYMMPIN_CHOICE_SHAPES * sizeof(symmpin_choice_entry) +
                       SYMMPIN_CHOICE_GROUPS * sizeof(symmpin_choice_group_entry) <=
                   SYMMPIN_BOARD_BLOB_MAX,
               "a record post's head and measurements do not fit in a board blob");
_Static_assert(sizeof(plan_blob) <= SYMMPIN_BOARD_BLOB_MAX, "a plan post does not fit in a blob");

static uint64_t thread_id(void) { return (uint64_t)syscall(SYS_gettid); }

/* ---- what plans are made of: the kernels' slot sizes and sharing classes ---- */

static size_t kernel_slot_bytes(int coll, size_t count, int dtype, int nranks, void *ctx) {
  (void)ctx;
  return symmpin_kernel_slot_bytes(coll, count, dtype, nranks, SYMMPIN_INPUT_STAGED);
}

static bool kernel_supports(int coll, int dtype, int op, void *ctx) {
  (void)ctx;
  return symmpin_kernel_supports(coll, dtype, op);
}

static int kernel_slot_class(int coll, size_t count, int dtype, int nranks) {
  return symmpin_kernel_slot_class(coll, count, dtype, nranks, SYMMPIN_INPUT_STAGED);
}

const symmpin_plan_kernels symmpin_agree_kernels = {
    .slot_bytes = kernel_slot_bytes,
    .supports = kernel_supports,
    .slot_class = kernel_slot_class,
    .nclasses = SYMMPIN_KERNEL_SLOT_CLASSES,
    .class_name = symmpin_kernel_slot_class_name,
};

/* The planner's sharing class: stream x kernel slot class (planner/record.h). Calls of different
 * kernel algorithms never share a slot (LL then copy on one slot timed out on the GPU), and calls
 * on different streams never do. */
static int sharing_class(int stream_ord, int coll, size_t count, int dtype, int nranks) {
  return symmpin_call_class(stream_ord, kernel_slot_class(coll, count, dtype, nranks),
                            SYMMPIN_KERNEL_SLOT_CLASSES);
}

uint64_t symmpin_agree_key(const symmpin_agree_call *call) {
  return symmpin_call_key(call->site, call->stream_ord);
}

/* ---- life ---- */

static void stop(symmpin_agree *a, symmpin_agree_stop why, const char *what) {
  if (a->stop != SYMMPIN_AGREE_RUNNING) return;
  a->stop = why;
  SYMMPIN_INFO("comm %d rank %d/%d: no more plan agreements on this communicator: %s", a->p.comm,
               a->p.rank, a->p.nranks, what);
}

/* The record round of an epoch failed for good (its verdict FAIL: peer_elsewhere or two timeouts
 * in a row in wait_round decided it, on this rank or a peer): say which of the two happened, from
 * what this rank saw of that round. A rank on another host never opens this host's board, which
 * every rank sees there; otherwise a rank on this host missed two agreements in a row: the rank
 * that decided it, and any that waited with it, found it missing from the record round; the rank
 * itself posted its record after the verdict. */
static void stop_not_one_host(symmpin_agree *a, const record_seen *seen) {
  char what[128];
  int away = a->elsewhere_rank;
  for (int r = 0; away < 0 && r < a->p.nranks; r++)
    if (!symmpin_board_rank_attached(a->board, r)) away = r;
  if (away >= 0)
    snprintf(what, sizeof what, "ranks on several hosts: rank %d is missing from this host's board",
             away);
  else if (seen->missing >= 0)
    snprintf(what, sizeof what, "rank %d missed two agreements in a row", seen->missing);
  else if (seen->late)
    snprintf(what, sizeof what, "rank %d (this rank) missed two agreements in a row", a->p.rank);
  else /* a peer decided it, and this rank never saw whom it waited for */
    snprintf(what, sizeof what, "a rank on this host missed two agreements in a row");
  stop(a, SYMMPIN_AGREE_NOT_ONE_HOST, what);
}

symmpin_status symmpin_agree_open(const symmpin_agree_params *p, symmpin_agree **out) {
  if (p->nranks < 1 || p->nranks > SYMMPIN_KERNEL_MAX_RANKS || p->rank < 0 ||
      p->rank >= p->nranks) {
    SYMMPIN_INFO("comm %d: rank %d of %d: the kernels take 1 to %d ranks", p->comm, p->rank,
                 p->nranks, SYMMPIN_KERNEL_MAX_RANKS);
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  symmpin_agree *a = calloc(1, sizeof *a);
  if (!a) {
    SYMMPIN_WARN("comm %d: out of memory for the agreement", p->comm);
    return SYMMPIN_ERR_NOMEM;
  }
  a->p = *p;
  a->elsewhere_rank = -1;
  a->seen = a->seen_before = (record_seen){.missing = -1};
  symmpin_warmup_config wc = {.calls = p->warmup};
  symmpin_status st = symmpin_schedule_init(&a->sched, &wc);
  if (st == SYMMPIN_OK) {
    symmpin_record_init(&a->record, p->comm, p->rank, p->nranks, 0);
    st = symmpin_board_open(p->key, p->rank, p->nranks, &a->board);
  }
  if (st == SYMMPIN_OK) {
    hello_blob hello = {.pid = (int32_t)getpid()};
    st = symmpin_board_post(a->board, HELLO_ROUND, &hello, sizeof hello, thread_id());
  }
  if (st != SYMMPIN_OK) {
    symmpin_agree_close(a);
    return st;
  }
  *out = a;
  return SYMMPIN_OK;
}

void symmpin_agree_close(symmpin_agree *a) {
  if (!a) return;
  if (a->board) symmpin_board_close(a->board);
  symmpin_plan_free(a->plan);
  symmpin_plan_free(a->candidate);
  symmpin_record_free(&a->record);
  symmpin_schedule_free(&a->sched);
  free(a->history);
  free(a->blob);
  free(a);
}

const symmpin_plan *symmpin_agree_plan(const symmpin_agree *a) { return a->plan; }
bool symmpin_agree_measuring(const symmpin_agree *a) { return a->measuring; }
symmpin_agree_stop symmpin_agree_stopped(const symmpin_agree *a) { return a->stop; }

uint32_t symmpin_agree_epoch(const symmpin_agree *a) { return a->epoch; }

/* ---- the epoch ---- */

/* Whether rank `missing`, not posting the record round, is on another host: it never opened the
 * board although the communicator's first all-reduce has completed (so it made that call), or,
 * `timed_out`, it still has not after a whole timeout. A rank that opened the board is on this
 * host, only busy: its epoch fails and is retried. Decides "not one host's" for every rank. */
static bool peer_elsewhere(symmpin_agree *a, int missing, bool timed_out) {
  if (missing < 0 || symmpin_board_rank_attached(a->board, missing)) return false;
  if (a->elsewhere_said) return true;
  if (!timed_out && !(a->p.ops.first_call_done && a->p.ops.first_call_done(a->p.ops.ctx)))
    return false;
  symmpin_board_decide(a->board, ROUND_RECORD(a->epoch), SYMMPIN_VERDICT_FAIL);
  a->elsewhere_said = true;
  a->elsewhere_rank = missing;
  SYMMPIN_INFO("comm %d rank %d: rank %d has not opened this host's board%s: it is on another "
               "host",
               a->p.comm, a->p.rank, missing,
               timed_out ? " within the timeout" : " although the first collective call completed");
  return true;
}

/* Each rank counts its own timeouts in a row, and ranks that reach an epoch a few milliseconds
 * apart can count an epoch apart (the later one leaves on the earlier one's verdict, uncounted):
 * a peer may decide that epoch e failed for good after this rank has left it. The decision on the
 * board stands for every rank: when this rank sees it, in the next epoch (at its close, in its
 * record wait, or as it fails), it stops too, naming the rank it found missing from e's record
 * round (not the peer that stopped, which it would wait for next). `e` is the epoch whose record
 * is in seen_before. Only one epoch back: a rank that left epoch e+1 too before e's stop was
 * decided (an uncounted failure: a wait on its own thread, a shorter SYMMPIN_TIMEOUT_MS) meets the
 * stop by its own timeouts, as before. seen_before.late is false here: a rank that posted late
 * stopped in that epoch. */
static bool stopped_after_leaving(symmpin_agree *a, uint32_t e) {
  if (e == 0 || a->stop != SYMMPIN_AGREE_RUNNING ||
      symmpin_board_verdict(a->board, ROUND_RECORD(e)) != SYMMPIN_VERDICT_FAIL)
    return false;
  stop_not_one_host(a, &a->seen_before);
  return true;
}

/* Wait for every rank's post of `round`, giving up on timeout, on a wait that would deadlock this
 * thread, or as soon as someone else failed the epoch or the agreements (stopped_after_leaving). */
static bool wait_round(symmpin_agree *a, uint32_t round) {
  uint64_t waited = 0;
  for (;;) {
    int missing = -1;
    symmpin_status st = symmpin_board_wait(a->board, round, WAIT_SLICE_MS, thread_id(), &missing);
    if (st == SYMMPIN_OK) {
      if (round == ROUND_RECORD(a->epoch))
        a->timeouts_in_row = 0; /* every rank came: not "in a row" */
      return true;
    }
    if (round == ROUND_RECORD(a->epoch) && missing >= 0) a->seen.missing = missing;
    if (symmpin_board_verdict(a->board, ROUND_ATTACH(a->epoch)) == SYMMPIN_VERDICT_FAIL)
      return false;
    if (round == ROUND_RECORD(a->epoch) && stopped_after_leaving(a, a->epoch - 1)) return false;
    if (a->p.aborting && atomic_load(a->p.aborting)) return false; /* ncclCommAbort: no waiting */
    if (round == ROUND_RECORD(a->epoch) && peer_elsewhere(a, missing, false)) return false;
    if (st == SYMMPIN_ERR_DISAGREE) {
      SYMMPIN_INFO("comm %d rank %d: rank %d is driven by this thread and has not reached this "
                   "point of the agreement (round %u): not waiting",
                   a->p.comm, a->p.rank, missing, round);
      return false;
    }
    if (st != SYMMPIN_ERR_TIMEOUT) return false;
    waited += WAIT_SLICE_MS;
    if (waited >= a->p.timeout_ms) {
      SYMMPIN_WARN("comm %d rank %d: rank %d did not post round %u of the plan agreement within "
                   "%llu ms; this epoch's collectives stay on NCCL",
                   a->p.comm, a->p.rank, missing, round, (unsigned long long)a->p.timeout_ms);
      if (a->p.ops.gave_up) a->p.ops.gave_up(a->p.ops.ctx, round);
      /* A peer on this host that is busy (a checkpoint) costs this epoch, retried later; one
       * that misses the retry as well is not coming back soon: agreements stop for every rank
       * rather than stall each epoch for a whole timeout. */
      if (!peer_elsewhere(a, missing, true) && ++a->timeouts_in_row >= 2) {
        SYMMPIN_INFO("comm %d rank %d: rank %d missed two plan agreements in a row", a->p.comm,
                     a->p.rank, missing);
        symmpin_board_decide(a->board, ROUND_RECORD(a->epoch), SYMMPIN_VERDICT_FAIL);
      }
      return false;
    }
  }
}

static void settle(symmpin_agree *a, bool agreed) {
  if (a->attached) a->p.ops.settle(a->p.ops.ctx, agreed);
  a->attached = false;
}

/* A failed epoch's pool goes back to the agreed size, but that unmaps memory: never while this
 * call is being captured (the decide call may be); then at the next call that is not. */
static void roll_back(symmpin_agree *a, bool capturing) {
  if (!a->attached) return;
  a->rollback_due = capturing;
  if (!capturing) settle(a, false);
}

static bool adopt(symmpin_agree *a) {
  settle(a, true);
  symmpin_plan_free(a->plan);
  a->plan = a->candidate;
  a->candidate = NULL;
  a->measuring = a->cand_measuring;
  a->phase = PHASE_IDLE;
  a->timeouts_in_row = 0;
  symmpin_schedule_agreed(&a->sched, a->plan->nnew > 0);
  SYMMPIN_INFO("comm %d rank %d/%d: epoch %u agreed: %zu of %zu sites pinned, pool %llu bytes "
               "(dedicated %llu, lower bound %llu)",
               a->p.comm, a->p.rank, a->p.nranks, a->epoch, a->plan->npinned, a->plan->nsites,
               (unsigned long long)a->plan->pool_bytes,
               (unsigned long long)a->plan->dedicated_bytes,
               (unsigned long long)a->plan->lower_bound_bytes);
  return true;
}

/* This rank gives up on the epoch. The verdict that stands decides, not the proposal: a peer may
 * have decided GO from every rank's "attached" post (this rank's included) just before this rank's
 * wait expired, and then this rank must adopt the plan too. Returns true if it did. */
static bool epoch_fail(symmpin_agree *a, bool capturing) {
  symmpin_verdict v = symmpin_board_decide(a->board, ROUND_ATTACH(a->epoch), SYMMPIN_VERDICT_FAIL);
  if (v == SYMMPIN_VERDICT_GO && a->phase == PHASE_ATTACH_POSTED && a->candidate) return adopt(a);
  roll_back(a, capturing);
  symmpin_plan_free(a->candidate);
  a->candidate = NULL;
  a->phase = PHASE_IDLE;
  symmpin_schedule_failed(&a->sched);
  if (symmpin_board_verdict(a->board, ROUND_RECORD(a->epoch)) == SYMMPIN_VERDICT_FAIL)
    stop_not_one_host(a, &a->seen);
  /* A peer that saw the last epoch's stop (stopped_after_leaving) may be what failed this one:
   * its CAS on this epoch's verdict came after it read that stop, so this rank reads it too. */
  else if (!stopped_after_leaving(a, a->epoch - 1) && a->stop == SYMMPIN_AGREE_RUNNING)
    SYMMPIN_INFO("comm %d rank %d: plan agreement of epoch %u failed; NCCL until the next one",
                 a->p.comm, a->p.rank, a->epoch);
  return false;
}

/* Call n closes the record: post it (round 3e-1). */
static void epoch_start(symmpin_agree *a, uint64_t n, bool capturing) {
  a->seen_before = a->seen;
  if (stopped_after_leaving(a, a->epoch)) return;
  a->epoch++;
  /* Already failed for good by a peer that waited for this rank's record (stop_not_one_host). */
  bool late = symmpin_board_verdict(a->board, ROUND_RECORD(a->epoch)) == SYMMPIN_VERDICT_FAIL;
  a->seen = (record_seen){.missing = -1, .late = late};
  symmpin_choice_entry *times = a->times_out;
  size_t ntimes =
      a->p.ops.shape_times ? a->p.ops.shape_times(a->p.ops.ctx, times, SYMMPIN_CHOICE_SHAPES) : 0;
  if (ntimes > SYMMPIN_CHOICE_SHAPES) ntimes = SYMMPIN_CHOICE_SHAPES; /* a callback's slip */
  symmpin_choice_group_entry *groups = a->groups_out;
  size_t ngroups = a->p.ops.shape_times && a->p.ops.group_times
                       ? a->p.ops.group_times(a->p.ops.ctx, groups, SYMMPIN_CHOICE_GROUPS)
                       : 0;
  if (ngroups > SYMMPIN_CHOICE_GROUPS) ngroups = SYMMPIN_CHOICE_GROUPS;
  size_t need = sizeof(record_head) + symmpin_record_encoded_bytes(a->record.ncalls) +
                ntimes * sizeof times[0] + ngroups * sizeof groups[0];
  if (need > a->blob_cap) {
    void *nb = realloc(a->blob, need);
    if (!nb) {
      SYMMPIN_WARN("comm %d: out of memory for the call record (%zu bytes)", a->p.comm, need);
      return stop(a, SYMMPIN_AGREE_ERROR, "out of memory");
    }
    a->blob = nb;
    a->blob_cap = need;
  }
  record_head head = {.call_index = n,
                      .capturing = capturing,
                      .ntimes = (uint32_t)ntimes,
                      .measuring = a->p.ops.shape_times != NULL,
                      .ngroups = (uint32_t)ngroups,
                      .group_max_bytes = a->p.group_max_bytes};
  if (a->p.ops.gpu_facts(a->p.ops.ctx, &head.facts) != SYMMPIN_OK)
    return stop(a, SYMMPIN_AGREE_ERROR, "cannot read this GPU's identity");
  size_t len = 0;
  symmpin_status st = symmpin_record_encode(&a->record, (char *)a->blob + sizeof head,
                                            a->blob_cap - sizeof head, &len);
  head.record_bytes = len;
  memcpy(a->blob, &head, sizeof head);
  memcpy((char *)a->blob + sizeof head + len, times, ntimes * sizeof times[0]);
  memcpy((char *)a->blob + sizeof head + len + ntimes * sizeof times[0], groups,
         ngroups * sizeof groups[0]);
  if (st == SYMMPIN_OK)
    st = symmpin_board_post(
        a->board, ROUND_RECORD(a->epoch), a->blob,
        sizeof head + len + ntimes * sizeof times[0] + ngroups * sizeof groups[0], thread_id());
  symmpin_record_restart(&a->record, n);
  if (st != SYMMPIN_OK) return stop(a, SYMMPIN_AGREE_ERROR, "cannot post the call record");
  a->phase = PHASE_RECORD_POSTED;
}

/* What this communicator's plans are made with: the same on every rank. */
/* The kernels' support, less the collectives this rank keeps on NCCL (params.colls_off). */
static bool supports_here(int coll, int dtype, int op, void *ctx) {
  const symmpin_agree *a = ctx;
  if (coll >= 0 && coll < 32 && (a->p.colls_off >> coll & 1u)) return false;
  return symmpin_agree_kernels.supports(coll, dtype, op, symmpin_agree_kernels.ctx);
}

static symmpin_plan_policy plan_policy(const symmpin_agree *a) {
  return (symmpin_plan_policy){
      .mode = a->p.mode,
      .max_bytes = a->p.max_bytes,
      .capture_bytes = a->p.capture_bytes,
      .alignment = SYMMPIN_PLAN_ALIGNMENT,
      .slot_bytes = symmpin_agree_kernels.slot_bytes,
      .supports = supports_here,
      .ctx = (void *)a, /* supports_here's; the kernels' slot_bytes takes none */
      .nranks = a->p.nranks,
  };
}

/* Next call: read every record, make the plan, reserve the pool, post round 3e. */
static void epoch_plan(symmpin_agree *a, bool capturing) {
  uint32_t round = ROUND_RECORD(a->epoch);
  if (!wait_round(a, round)) {
    epoch_fail(a, capturing);
    return;
  }
  int nranks = a->p.nranks;
  symmpin_record records[SYMMPIN_KERNEL_MAX_RANKS];
  const symmpin_record *rp[SYMMPIN_KERNEL_MAX_RANKS];
  symmpin_pool_facts facts[SYMMPIN_KERNEL_MAX_RANKS];
  uint64_t closes[SYMMPIN_KERNEL_MAX_RANKS];
  /* Every rank's measurements, copied out of the board (aligned; validated below). */
  symmpin_choice_entry(*times)[SYMMPIN_CHOICE_SHAPES] = a->times_in;
  const symmpin_choice_entry *tp[SYMMPIN_KERNEL_MAX_RANKS];
  size_t ntimes[SYMMPIN_KERNEL_MAX_RANKS];
  symmpin_choice_group_entry(*groups)[SYMMPIN_CHOICE_GROUPS] = a->groups_in;
  const symmpin_choice_group_entry *gp[SYMMPIN_KERNEL_MAX_RANKS];
  size_t ngroups[SYMMPIN_KERNEL_MAX_RANKS];
  uint64_t group_max = UINT64_MAX; /* the smallest limit any rank posts; UINT64_MAX: none */
  int decoded = 0;
  bool any_capturing = capturing, all_measuring = true;
  for (int r = 0; r < nranks; r++) {
    size_t bytes = 0;
    const char *blob = symmpin_board_blob(a->board, round, r, &bytes);
    record_head head;
    if (!blob || bytes < sizeof head) break;
    memcpy(&head, blob, sizeof head);
    /* A board is another process's word: sizes are checked before anything is read by them. */
    if (head.ntimes > SYMMPIN_CHOICE_SHAPES || head.ngroups > SYMMPIN_CHOICE_GROUPS ||
        head.record_bytes > bytes - sizeof head ||
        bytes - sizeof head - head.record_bytes <
            head.ntimes * sizeof(symmpin_choice_entry) +
                head.ngroups * sizeof(symmpin_choice_group_entry))
      break;
    closes[r] = head.call_index;
    any_capturing |= head.capturing != 0;
    facts[r] = head.facts;
    ntimes[r] = head.ntimes;
    ngroups[r] = head.ngroups;
    all_measuring &= head.measuring != 0;
    if (head.group_max_bytes && head.group_max_bytes < group_max) group_max = head.group_max_bytes;
    const char *after = blob + sizeof head + head.record_bytes;
    memcpy(times[r], after, head.ntimes * sizeof times[r][0]);
    tp[r] = times[r];
    /* Unit entries' call counts are checked where they are read (symmpin_choice_group_verdict). */
    memcpy(groups[r], after + head.ntimes * sizeof times[r][0], head.ngroups * sizeof groups[r][0]);
    gp[r] = groups[r];
    if (symmpin_record_decode(blob + sizeof head, head.record_bytes, &records[r]) != SYMMPIN_OK)
      break;
    rp[r] = &records[r];
    decoded++;
  }
  bool complete = decoded == nranks;
  /* Every rank read the same closing calls: where they differ, all meet at a common call. */
  bool aligned = complete && symmpin_schedule_align(&a->sched, closes, nranks);
  if (complete && !aligned)
    SYMMPIN_INFO("comm %d rank %d: ranks closed their records at different calls (this one at "
                 "%llu): next agreement at a common call",
                 a->p.comm, a->p.rank, (unsigned long long)closes[a->p.rank]);
  plan_blob pb = {0};
  a->cand_measuring = all_measuring;
  if (aligned && !any_capturing) {
    symmpin_plan_policy pol = plan_policy(a);
    pol.group_max_bytes = group_max == UINT64_MAX ? 0 : group_max;
    /* The shapes every rank's measurements send back to NCCL, eager calls and grouped calls
     * apart: the same posts, the same lists. Only where every rank measures (the posts of a
     * rank that does not are empty). */
    symmpin_plan_shape slower[SYMMPIN_CHOICE_SHAPES];
    symmpin_plan_shape *slower_grouped = a->slower_grouped;
    pol.n_nccl_faster = symmpin_choice_verdict(tp, ntimes, nranks, slower, SYMMPIN_CHOICE_SHAPES);
    pol.nccl_faster = slower;
    pol.n_group_nccl_faster =
        symmpin_choice_group_verdict(gp, ngroups, nranks, slower_grouped,
                                     sizeof a->slower_grouped / sizeof a->slower_grouped[0]);
    pol.group_nccl_faster = slower_grouped;
    for (size_t i = 0; i < pol.n_nccl_faster + pol.n_group_nccl_faster; i++) {
      bool grouped = i >= pol.n_nccl_faster;
      const symmpin_plan_shape *x = grouped ? &slower_grouped[i - pol.n_nccl_faster] : &slower[i];
      if (!symmpin_plan_kind_nccl_faster(a->plan, x->coll, x->count, x->dtype, x->op, grouped))
        SYMMPIN_INFO("comm %d rank %d: %s%ss of %llu x %s (%s) ran faster on NCCL on the "
                     "slowest rank: NCCL takes them from the next plan on",
                     a->p.comm, a->p.rank, grouped ? "grouped " : "", symmpin_coll_name(x->coll),
                     (unsigned long long)x->count, symmpin_dtype_name(x->dtype),
                     symmpin_op_name(x->op));
    }
    if (symmpin_plan_make(rp, &pol, a->plan, &a->candidate) == SYMMPIN_OK &&
        a->p.ops.reserve(a->p.ops.ctx, a->candidate->pool_bytes, pb.export_rec) == SYMMPIN_OK) {
      pb.digest = a->candidate->digest;
      pb.pool_bytes = a->candidate->pool_bytes;
      pb.ready = 1;
    }
  }
  for (int r = 0; r < decoded; r++) symmpin_record_free(&records[r]);
  pb.p2p_ok = 1;
  if (complete) {
    char why[160];
    if (a->p.ops.check_peers(a->p.ops.ctx, facts, nranks, why, sizeof why) != SYMMPIN_OK) {
      pb.p2p_ok = 0;
      SYMMPIN_INFO("comm %d rank %d: %s", a->p.comm, a->p.rank, why);
    }
  }
  /* Not ready but without P2P: post anyway, so that every rank learns why and stops. */
  if ((!pb.ready && pb.p2p_ok) || symmpin_board_post(a->board, ROUND_PLAN(a->epoch), &pb, sizeof pb,
                                                     thread_id()) != SYMMPIN_OK) {
    epoch_fail(a, capturing);
    return;
  }
  a->phase = PHASE_PLAN_POSTED;
}

/* Next call: compare digests, map every peer's pool, post round 3e+1. */
static void epoch_attach(symmpin_agree *a, bool capturing) {
  uint32_t round = ROUND_PLAN(a->epoch);
  if (capturing || !wait_round(a, round) ||
      /* Someone gave up while this rank waited: do not grow the pool for a plan nobody uses. */
      symmpin_board_verdict(a->board, ROUND_ATTACH(a->epoch)) == SYMMPIN_VERDICT_FAIL) {
    epoch_fail(a, capturing);
    return;
  }
  const void *exports[SYMMPIN_KERNEL_MAX_RANKS];
  bool same = a->candidate != NULL, p2p = true;
  for (int r = 0; r < a->p.nranks; r++) {
    size_t bytes = 0;
    const plan_blob *pb = symmpin_board_blob(a->board, round, r, &bytes);
    if (!pb || bytes < sizeof *pb) {
      epoch_fail(a, capturing);
      return;
    }
    same = same && pb->ready && pb->digest == a->candidate->digest &&
           pb->pool_bytes == a->candidate->pool_bytes;
    p2p &= pb->p2p_ok != 0;
    exports[r] = pb->export_rec;
  }
  if (!p2p) {
    epoch_fail(a, capturing);
    return stop(a, SYMMPIN_AGREE_NO_P2P, "some pair of GPUs has no peer access (P2P)");
  }
  if (!same) {
    SYMMPIN_WARN("comm %d rank %d: ranks computed different plans from the same records (a "
                 "bug); staying on NCCL",
                 a->p.comm, a->p.rank);
    epoch_fail(a, capturing);
    return;
  }
  attach_blob ab = {.ok = a->p.ops.attach(a->p.ops.ctx, exports, a->candidate) == SYMMPIN_OK};
  a->attached = ab.ok;
  if (symmpin_board_post(a->board, ROUND_ATTACH(a->epoch), &ab, sizeof ab, thread_id()) !=
      SYMMPIN_OK) {
    epoch_fail(a, capturing);
    return;
  }
  a->phase = PHASE_ATTACH_POSTED;
}

/* Next call: everyone attached -> GO, and the candidate becomes the plan. */
static bool epoch_decide(symmpin_agree *a, bool capturing) {
  uint32_t round = ROUND_ATTACH(a->epoch);
  if (!wait_round(a, round)) return epoch_fail(a, capturing);
  bool ok = true;
  for (int r = 0; r < a->p.nranks; r++) {
    size_t bytes = 0;
    const attach_blob *ab = symmpin_board_blob(a->board, round, r, &bytes);
    ok &= ab && bytes >= sizeof *ab && ab->ok;
  }
  if (!ok) return epoch_fail(a, capturing);
  if (symmpin_board_decide(a->board, round, SYMMPIN_VERDICT_GO) != SYMMPIN_VERDICT_GO)
    return epoch_fail(a, capturing);
  return adopt(a);
}

bool symmpin_agree_step(symmpin_agree *a, uint64_t n, const symmpin_agree_call *call) {
  if (a->rollback_due && !call->capturing) roll_back(a, false);
  if (a->stop != SYMMPIN_AGREE_RUNNING) return false; /* nothing more is planned: no record */
  if (a->record.ncalls < SYMMPIN_RECORD_MAX_CALLS) {
    symmpin_call c = {
        .site = symmpin_agree_key(call),
        .count = call->count,
        .dtype = call->dtype,
        .op = call->op,
        .coll = call->coll,
        .stream_ord =
            sharing_class(call->stream_ord, call->coll, call->count, call->dtype, a->p.nranks),
        .in_place = call->in_place,
        .capturing = call->capturing,
        .send_alloc = call->send_alloc,
        .recv_alloc = call->recv_alloc,
    };
    /* Out of memory: the call is not recorded, as past SYMMPIN_RECORD_MAX_CALLS; the next plan sees
     * a shorter record on this rank and keeps the sites it cannot match on NCCL. */
    (void)symmpin_record_append(&a->record, &c, call->group_token);
  }
  switch (a->phase) {
  case PHASE_IDLE: {
    symmpin_plan_policy pol = plan_policy(a);
    /* From shared facts only (a call's capture state is the rank's own): a captured call of a
     * new shape counts too, and an epoch that closes during a capture fails and disarms it. */
    bool missing =
        symmpin_plan_shape_missing(a->plan, &pol, call->coll, call->count, call->dtype, call->op);
    if (symmpin_schedule_call(
            &a->sched, n,
            symmpin_warmup_key(a->p.comm, call->coll, call->count, call->dtype, call->op), missing))
      epoch_start(a, n, call->capturing);
    return false;
  }
  case PHASE_RECORD_POSTED: epoch_plan(a, call->capturing); return false;
  case PHASE_PLAN_POSTED: epoch_attach(a, call->capturing); return false;
  case PHASE_ATTACH_POSTED: return epoch_decide(a, call->capturing);
  }
  return false;
}

symmpin_plan_reason symmpin_agree_route(const symmpin_agree *a, const symmpin_agree_call *call,
                                        const symmpin_plan_site **slot) {
  *slot = NULL;
  if (!a->plan) return SYMMPIN_PLAN_UNPLANNED;
  const symmpin_plan_site *s = NULL;
  symmpin_plan_reason r = symmpin_plan_route(
      a->plan, symmpin_agree_key(call), call->coll, call->count, call->dtype, call->op,
      sharing_class(call->stream_ord, call->coll, call->count, call->dtype, a->p.nranks), &s);
  if (r == SYMMPIN_PLAN_STREAM_OFF_PLAN) {
    /* Pinned, on another stream: still redirected (the peers may call it on the home stream);
     * the caller orders it after the slot's latest kernel on any stream. */
    r = SYMMPIN_PLAN_PINNED;
  }
  if (r == SYMMPIN_PLAN_PINNED)
    r = symmpin_plan_route_kind(a->plan, call->coll, call->count, call->dtype, call->op,
                                call->group_token != 0);
  if (r == SYMMPIN_PLAN_PINNED) *slot = s;
  return r;
}

/* ---- the route check ---- */

/* Alarm word: call (48 bits) << 16 | raising rank << 8 | reason; never 0 for a real alarm. */
static uint64_t alarm_word(symmpin_alarm_reason why, int rank, uint64_t n) {
  return (n & 0xffffffffffffull) << 16 | (uint64_t)(rank & 0xff) << 8 | (uint64_t)why;
}

static symmpin_alarm alarm_of(uint64_t w) {
  symmpin_alarm al = {
      .reason = (symmpin_alarm_reason)(w & 0xff), .rank = (int)(w >> 8 & 0xff), .call = w >> 16};
  if (w != 0 &&
      (al.reason < SYMMPIN_ALARM_ROUTES_DIFFER || al.reason > SYMMPIN_ALARM_KERNEL_FAILED))
    al.reason = SYMMPIN_ALARM_ROUTES_DIFFER; /* a word no rank writes: still an alarm */
  return al;
}

/* A route's signature: every call NCCL takes signs alike (NCCL pairs calls by order: which site
 * or shape is NCCL's business); a redirected call signs its slot and shape, all of which every
 * rank must share. */
static uint64_t route_sig(const symmpin_agree_call *call, const symmpin_plan_site *slot) {
  if (!slot) return 1;
  uint64_t h = symmpin_hash_combine(0x726f757465ull /* "route" */, slot->offset);
  h = symmpin_hash_combine(h, call->count);
  h = symmpin_hash_combine(h, (uint64_t)(uint32_t)call->dtype << 32 | (uint32_t)call->op);
  if (call->coll) h = symmpin_hash_combine(h, (uint64_t)(uint32_t)call->coll);
  return h | 2; /* never 1 (NCCL) nor 0 */
}

/* The route check's reach (docs/design.md "Routing"): calls further back than this are not
 * compared (the board's block ring holds as many). */
#define ROUTE_HISTORY ((uint64_t)SYMMPIN_BOARD_ROUTE_BLOCKS * SYMMPIN_BOARD_ROUTE_BLOCK_CALLS)

void symmpin_agree_route_log(symmpin_agree *a, uint64_t n, const symmpin_agree_call *call,
                             const symmpin_plan_site *slot) {
  if (!a->plan || n <= a->logged) return;
  if (!a->history) {
    a->history = calloc(ROUTE_HISTORY, sizeof *a->history);
    if (!a->history) {
      SYMMPIN_WARN("comm %d rank %d: out of memory for the route log; this rank stops logging",
                   a->p.comm, a->p.rank);
      a->logged = UINT64_MAX; /* peers' checks see nothing new from here: never a false alarm */
      return;
    }
    a->first_logged = n;
    /* The first block is hashed from here: every rank's log begins at the same call (the first
     * plan's GO), so the partial block is the same calls on every rank. */
    a->blk_hash = 0x626c6f636bull; /* "block" */
    a->blk_whole = true;
    a->logged = n - 1;
  }
  uint64_t sig = route_sig(call, slot);
  a->history[n % ROUTE_HISTORY] = sig;
  symmpin_board_route_put(a->board, n, sig, call->site);
  /* The block's hash, put once every call of the block is logged from the first logged call on
   * (a block where a call was not logged has none, on this rank as on its peers). */
  const uint64_t B = SYMMPIN_BOARD_ROUTE_BLOCK_CALLS;
  if ((n - 1) % B == 0) {
    a->blk_hash = 0x626c6f636bull; /* "block" */
    a->blk_whole = true;
  } else if (n != a->logged + 1) {
    a->blk_whole = false;
  }
  a->blk_hash = symmpin_hash_combine(symmpin_hash_combine(a->blk_hash, n), sig);
  if (n % B == 0 && a->blk_whole) symmpin_board_route_block_put(a->board, (n - 1) / B, a->blk_hash);
  a->logged = n;
}

static const char *alarm_text(symmpin_alarm_reason r) {
  switch (r) {
  case SYMMPIN_ALARM_LAUNCH_FAILED: return "could not launch symmpin's kernel for";
  case SYMMPIN_ALARM_KERNEL_FAILED: return "had a kernel give up waiting in";
  default: return "found the ranks routing differently";
  }
}

static void alarm_report(symmpin_agree *a, symmpin_alarm al) {
  if (a->alarm_reported) return;
  a->alarm_reported = true;
  uint64_t sig = 0, site = 0;
  bool mine = symmpin_board_route_get(a->board, a->p.rank, al.call, &sig, &site);
  SYMMPIN_WARN(
      "comm %d rank %d: rank %d %s collective call %llu (this rank: %s at site %016llx); "
      "this communicator is now in error: ncclCommGetAsyncError and every later "
      "collective call report ncclRemoteError, and waiting symmpin kernels give up. Abort the "
      "communicator (ncclCommAbort) to free it.",
      a->p.comm, a->p.rank, al.rank, alarm_text(al.reason), (unsigned long long)al.call,
      !mine      ? "not logged"
      : sig == 1 ? "NCCL"
                 : "symmpin",
      (unsigned long long)site);
}

/* Raise the alarm for ranks that routed call `call` differently; the rank whose alarm stands says
 * why in one WARN: `what` names the call(s) and the routes. */
static void routes_differ(symmpin_agree *a, uint64_t call, const char *what) {
  uint64_t mine = alarm_word(SYMMPIN_ALARM_ROUTES_DIFFER, a->p.rank, call);
  if (symmpin_board_alarm_raise(a->board, mine) != mine) return;
  a->alarm_reported = true;
  SYMMPIN_WARN(
      "comm %d rank %d: ranks routed %s. The ranks reached it from different sites or "
      "streams symmpin could not reconcile; this communicator is now in error: "
      "ncclCommGetAsyncError and every later collective call report ncclRemoteError, and "
      "waiting symmpin kernels give up. Abort the communicator (ncclCommAbort) to free it.",
      a->p.comm, a->p.rank, what);
}

/* Calls of a block whose entries have left a ring: compare the block's hashes. True if they
 * differ (the alarm is raised and reported here). */
static bool block_differs(symmpin_agree *a, int r, uint64_t block) {
  uint64_t mine = 0, theirs = 0;
  if (!symmpin_board_route_block_get(a->board, a->p.rank, block, &mine) ||
      !symmpin_board_route_block_get(a->board, r, block, &theirs) || mine == theirs)
    return false; /* not whole on one side (a call not logged), gone, or alike */
  const uint64_t B = SYMMPIN_BOARD_ROUTE_BLOCK_CALLS;
  uint64_t first = block * B + 1;
  if (first < a->first_logged) first = a->first_logged; /* the first block: from the first logged */
  char what[200];
  snprintf(what, sizeof what,
           "a collective among calls %llu to %llu differently (rank %d's "
           "route log of these calls differs from this rank's; the calls themselves have left the "
           "log)",
           (unsigned long long)first, (unsigned long long)(first + B - 1), r);
  routes_differ(a, first, what);
  return true;
}

/* Compare calls (checked[r], upto] of rank r with this rank's log. This rank's side comes from
 * its own history (ROUTE_HISTORY calls back), the peer's from the board: entry by entry while
 * the peer's ring holds them (so the rank ahead compares what a rank stuck behind logged last),
 * block by block once they have left it (then the peer is ahead by more than the ring). */
static bool routes_compare(symmpin_agree *a, int r, unsigned budget) {
  const uint64_t B = SYMMPIN_BOARD_ROUTE_BLOCK_CALLS;
  if (!a->history) return false; /* nothing logged here yet */
  uint64_t upto = symmpin_board_route_last(a->board, r);
  if (upto > a->logged) upto = a->logged;
  uint64_t from = a->checked[r] + 1;
  /* Before this rank's first logged call (the first plan's GO, the same call on every rank)
   * nobody logged; older than the history, this rank no longer knows its routes. */
  if (from < a->first_logged) from = a->first_logged;
  if (a->logged >= ROUTE_HISTORY && from <= a->logged - ROUTE_HISTORY)
    from = a->logged - ROUTE_HISTORY + 1;
  for (uint64_t next = from; next <= upto && budget > 0; budget--) {
    const uint64_t k = next;
    const uint64_t mine = a->history[k % ROUTE_HISTORY];
    uint64_t theirs = 0, their_site = 0;
    if (!symmpin_board_route_get(a->board, r, k, &theirs, &their_site)) {
      /* The peer logged k (k <= its last, and every rank logs from the same first call) and its
       * ring no longer holds it: its block decides, once both ranks have logged all of it. */
      uint64_t block = (k - 1) / B, last = (block + 1) * B;
      if (last > a->logged || last > symmpin_board_route_last(a->board, r)) break; /* later */
      if (block_differs(a, r, block)) return true;
      a->checked[r] = last;
      next = last + 1;
      continue;
    }
    a->checked[r] = k;
    next = k + 1;
    if (mine == theirs) continue;
    uint64_t my_site = 0, ignored = 0;
    (void)symmpin_board_route_get(a->board, a->p.rank, k, &ignored, &my_site); /* for the message */
    char what[200];
    snprintf(what, sizeof what,
             "collective call %llu differently: this rank %s (site %016llx), "
             "rank %d %s (site %016llx)",
             (unsigned long long)k, mine == 1 ? "to NCCL" : "to symmpin",
             (unsigned long long)my_site, r, theirs == 1 ? "to NCCL" : "to symmpin",
             (unsigned long long)their_site);
    routes_differ(a, k, what);
    return true;
  }
  return false;
}

bool symmpin_agree_route_check(symmpin_agree *a, unsigned budget, symmpin_alarm *out) {
  uint64_t w = symmpin_board_alarm(a->board);
  for (int r = 0; w == 0 && r < a->p.nranks; r++)
    if (r != a->p.rank && routes_compare(a, r, budget)) w = symmpin_board_alarm(a->board);
  if (w == 0) return false;
  *out = alarm_of(w);
  alarm_report(a, *out);
  return true;
}

symmpin_alarm symmpin_agree_raise(symmpin_agree *a, symmpin_alarm_reason why, uint64_t n) {
  uint64_t mine = alarm_word(why, a->p.rank, n);
  uint64_t w = symmpin_board_alarm_raise(a->board, mine);
  if (w == mine) a->alarm_reported = true; /* the raiser has said why itself */
  symmpin_alarm al = alarm_of(w);
  alarm_report(a, al);
  return al;
}
