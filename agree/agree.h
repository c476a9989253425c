/* The agreement: how the ranks of one communicator come to one plan, epoch after epoch, over the
 * communicator's board (symmem/board.h), without ever waiting inside a collective of the program.
 * Plain C and CUDA-free: the GPU side (the pool, the P2P facts) comes in through
 * symmpin_agree_ops, so the CPU tests run the real protocol with threads or processes as ranks.
 *
 * Rounds on the board, all posted from inside all-reduce calls:
 *   round 1            hello, posted at the communicator's first all-reduce: it tells the board
 *                      which thread drives each rank, so a wait that would deadlock is seen at once;
 *   epoch e (e >= 1):  round 3e-1  "record":   the closing call, this rank's GPU and its record;
 *                      round 3e    "plan":     plan digest, P2P verdict, this rank's pool export;
 *                      round 3e+1  "attached": whether every peer's pool is mapped.
 * Each round is posted at one call and read at the next call on that rank, so a thread that
 * drives several ranks (one call per rank, in turn) never waits for itself. The epoch's verdict
 * lives on its last round (3e+1) and is decided once, by compare-and-swap: GO only by a rank that
 * read every rank's "attached" post; FAIL by anyone who gives up. Every rank acts on the verdict
 * that stands, not on its own proposal, so all ranks end an epoch with the same verdict and, on
 * GO, the same plan (also a rank whose wait expired just as the last post landed). A failed
 * epoch is retried later (a peer busy on the host costs one failed epoch, not symmpin for the
 * run). A FAIL on round 3e-1 as well means "this communicator is not one host's": decided only
 * for a rank that never opened the board although it has certainly made its first all-reduce
 * (ops.first_call_done), or still had not after a whole timeout; symmpin then stays out.
 *
 * When records close is planner/schedule.h (shared with symmpin-replay); what a plan is,
 * planner/plan.h. Not thread-safe: the caller serialises calls per communicator. */
#ifndef SYMMPIN_PRELOAD_AGREE_H
#define SYMMPIN_PRELOAD_AGREE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/commkey.h"
#include "common/types.h"
#include "planner/plan.h"
#include "agree/choice.h"
#include "symmem/pool.h"

/* The GPU side of an epoch, supplied by the engine (CPU tests supply fakes). Every function may
 * fail; a failure fails the epoch on every rank (never a plan some rank cannot use). */
typedef struct symmpin_agree_ops {
  void *ctx;
  /* This rank's GPU identity, posted so that every rank can check the pairs of GPUs. */
  symmpin_status (*gpu_facts)(void *ctx, symmpin_pool_facts *out);
  /* Whether one pool can span these GPUs (symmpin_pool_check_peers); the reason in why if not. */
  symmpin_status (*check_peers)(void *ctx, const symmpin_pool_facts *facts, int nranks, char *why,
                                size_t why_len);
  /* Step 1 of growing the pool to `bytes` (symmpin_pool_reserve): export_rec receives
   * SYMMPIN_POOL_EXPORT_BYTES to post. */
  symmpin_status (*reserve)(void *ctx, uint64_t bytes, void *export_rec);
  /* Step 2 (symmpin_pool_attach): map every peer's export; then every pinned slot of `plan` must
   * be usable. */
  symmpin_status (*attach)(void *ctx, const void *const exports[], const symmpin_plan *plan);
  /* Step 3 (symmpin_pool_settle), on a rank whose attach succeeded: the epoch's verdict. Not
   * agreed: the pool goes back to the size every rank still has. */
  void (*settle)(void *ctx, bool agreed);
  /* May be NULL: whether the communicator's first all-reduce has completed on the GPU. Then
   * every rank has issued it, and so has opened the board if it is on this host (ranks open it
   * before their first all-reduce goes to NCCL): a rank that has not is on another host, known
   * at once instead of after SYMMPIN_TIMEOUT_MS. */
  bool (*first_call_done)(void *ctx);
  /* May be NULL (SYMMPIN_CHOOSE=static): this rank's measured medians per shape (choice.h), at
   * most cap; posted with the record, so that every rank sends the same shapes back to NCCL
   * (symmpin_choice_verdict) in the plan of that epoch. */
  size_t (*shape_times)(void *ctx, symmpin_choice_entry *out, size_t cap);
  /* May be NULL: the same for groups (choice.h, symmpin_choice_group_export), at most cap;
   * posted with the record, so that every rank sends the same shapes' grouped calls back to
   * NCCL (symmpin_choice_group_verdict). */
  size_t (*group_times)(void *ctx, symmpin_choice_group_entry *out, size_t cap);
  /* Test hook, may be NULL: called when a wait for `round` gave up, before this rank proposes
   * FAIL (the CPU tests let a peer post and decide at exactly that moment). */
  void (*gave_up)(void *ctx, uint32_t round);
} symmpin_agree_ops;

/* SYMMPIN_TIMEOUT_MS when unset: the longest wait for a peer's post. */
#define SYMMPIN_AGREE_TIMEOUT_MS_DEFAULT 10000

typedef struct symmpin_agree_params {
  symmpin_comm_key key; /* names the board */
  int comm;             /* communicator ordinal (records, plans, logs) */
  int rank, nranks;
  uint32_t warmup;      /* SYMMPIN_WARMUP */
  symmpin_plan_mode mode;
  uint64_t max_bytes;   /* SYMMPIN_MAX_BYTES */
  uint64_t capture_bytes; /* SYMMPIN_CAPTURE_BYTES: the plans' capture arena */
  /* SYMMPIN_GROUP_MAX_BYTES (0 = none): posted with the record; the plan takes the smallest any
   * rank posts (planner/plan.h group_max_bytes), so every rank applies the same one. */
  uint64_t group_max_bytes;
  /* Bit c set: the collective c (common/types.h) is kept on NCCL (SYMMPIN_ALLGATHER=0, ...): the
   * plans pin none of its sites. A rank-local setting: ranks that set it differently make
   * different plans, whose digests differ, so that communicator stays on NCCL (never a hang). */
  unsigned colls_off;
  uint64_t timeout_ms;  /* longest wait for a peer's post */
  const _Atomic int *aborting; /* may be NULL; nonzero: every wait gives up at once (abort) */
  symmpin_agree_ops ops;
} symmpin_agree_params;

typedef struct symmpin_agree symmpin_agree;

/* Open the board and post the hello (never waits for peers). SYMMPIN_ERR_UNSUPPORTED for more
 * ranks than the kernels take (SYMMPIN_KERNEL_MAX_RANKS). */
symmpin_status symmpin_agree_open(const symmpin_agree_params *p, symmpin_agree **out);
/* Close the board and free the host state (no CUDA, no waiting). Safe on NULL. */
void symmpin_agree_close(symmpin_agree *a);

/* One collective call of the communicator, as the planner records it. */
typedef struct symmpin_agree_call {
  uint64_t site;       /* planner/site.h */
  int stream_ord;      /* stream ordinal on the communicator; -1 unknown */
  uint64_t count;      /* NCCL's count argument (common/types.h) */
  int dtype, op;
  int coll; /* common/types.h's SYMMPIN_COLLS; 0 = all-reduce */
  bool in_place;
  bool capturing;      /* its stream is capturing a CUDA graph (then nothing may block or allocate) */
  uint64_t group_token; /* planner/record.h; 0 outside groups (a call's kind: plan.h
                         * symmpin_plan_route_kind) */
  uint64_t send_alloc, recv_alloc;
} symmpin_agree_call;

/* Call n (n = 1, 2, ... on this communicator): record it and move the agreement one step (at most
 * one board round per call). Returns true when this call agreed a new plan (GO). */
bool symmpin_agree_step(symmpin_agree *a, uint64_t n, const symmpin_agree_call *call);

/* The agreed plan, NULL before the first GO. Valid until the next step. */
const symmpin_plan *symmpin_agree_plan(const symmpin_agree *a);
/* Whether every rank measures (ops.shape_times set on every rank, as posted with the records of
 * the plan in force): only then may pinned calls go to NCCL as probes (choice.h), the same calls
 * on every rank. Changes only at a GO, the same call on every rank. */
bool symmpin_agree_measuring(const symmpin_agree *a);
/* Whether epochs have stopped for good, and why. An agreed plan stays in force after a stop: the
 * peers keep redirecting its sites, so this rank must too. */
typedef enum symmpin_agree_stop {
  SYMMPIN_AGREE_RUNNING = 0,
  SYMMPIN_AGREE_NOT_ONE_HOST, /* some rank never reached the first agreement (ranks on other hosts) */
  SYMMPIN_AGREE_NO_P2P,       /* some pair of GPUs cannot reach each other */
  SYMMPIN_AGREE_ERROR,        /* a host-side failure (memory, the board): logged where it happened */
} symmpin_agree_stop;
symmpin_agree_stop symmpin_agree_stopped(const symmpin_agree *a);
/* The epoch in progress or last finished (1, 2, ...; 0 before the first): after a step that
 * agreed a plan, that plan's epoch, as the INFO line "epoch E agreed" numbers it. */
uint32_t symmpin_agree_epoch(const symmpin_agree *a);

/* The per-call decision for `call` under the agreed plan: PINNED with *slot set, or why not: its
 * shape's route, then its kind's rules (planner/plan.h symmpin_plan_route_kind: a grouped call
 * above the plan's group_max_bytes, a kind measured faster on NCCL). The
 * key and sharing class are the ones the record used (planner/record.h, kernels' slot classes).
 * The stream a call is made on never changes the decision (docs/design.md "Routing"): a pinned
 * site called on a stream other than its home is still PINNED, and the caller orders kernels on
 * the slot across streams (the engine's per-slot events). */
symmpin_plan_reason symmpin_agree_route(const symmpin_agree *a, const symmpin_agree_call *call,
                                        const symmpin_plan_site **slot);

/* ---- the route check (docs/design.md "Routing") ----
 * From the first plan on, every rank logs how it routed each all-reduce on the board (no wait)
 * and compares the peers' logs with its own, a bounded number of entries per call. Ranks that
 * routed one call differently (one in symmpin's kernel, one in NCCL, or two slots) would hang or
 * compute wrong results: the first rank to see it raises the communicator's alarm on the board,
 * and every rank reads the alarm at its next call or async-error query. An alarm is final: the
 * caller puts the communicator in its error state. */
typedef enum symmpin_alarm_reason {
  SYMMPIN_ALARM_NONE = 0,
  SYMMPIN_ALARM_ROUTES_DIFFER = 1, /* ranks routed one call differently */
  SYMMPIN_ALARM_LAUNCH_FAILED = 2, /* a rank could not launch a kernel its peers run */
  SYMMPIN_ALARM_KERNEL_FAILED = 3, /* a rank's kernel gave up waiting (deadline) */
} symmpin_alarm_reason;

/* What an alarm says (decoded from the board word). */
typedef struct symmpin_alarm {
  symmpin_alarm_reason reason;
  int rank;      /* the rank that raised it */
  uint64_t call; /* the call it is about */
} symmpin_alarm;

/* Log call n's route: slot NULL for NCCL. Only once a plan exists (earlier calls all go to NCCL
 * on every rank). */
void symmpin_agree_route_log(symmpin_agree *a, uint64_t n, const symmpin_agree_call *call,
                             const symmpin_plan_site *slot);
/* Compare up to `budget` new log entries per peer and read the alarm. Returns true (and the
 * alarm in *out) once the communicator is in alarm; the first time it logs one WARN naming the
 * call, the ranks and their sites. Never waits. */
bool symmpin_agree_route_check(symmpin_agree *a, unsigned budget, symmpin_alarm *out);
/* Raise the alarm for call n on this rank's own account (a launch failure, a kernel that gave
 * up). Returns the alarm that stands. */
symmpin_alarm symmpin_agree_raise(symmpin_agree *a, symmpin_alarm_reason why, uint64_t n);
/* The plan key of a call (site on its stream), as plans and statistics use it. */
uint64_t symmpin_agree_key(const symmpin_agree_call *call);

/* What plans are made of: the kernels' slot sizes, support and slot classes for staged input, as
 * the engine launches them. symmpin-replay plans with this same binding. */
extern const symmpin_plan_kernels symmpin_agree_kernels;

#endif
