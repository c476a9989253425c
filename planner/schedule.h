/* The epoch schedule of one communicator on one rank: when warm-up ends, at which calls records
 * close (the agreement points), where ranks meet again when their records closed at different
 * calls, and when a failed epoch is retried.
 *
 * ONE implementation for the engine (agree/agree.c) and for symmpin-replay, so that the replay
 * plans exactly as the preload would. Everything here is a function of the rank's own call
 * sequence and of facts every rank reads alike from the board (the ranks' closing calls, the
 * verdict, the plan), never of time: every rank with the same sequence closes at the same calls.
 *
 *   warm-up   the record closes at the call W that ends warm-up (planner/warmup.h); the next
 *             closes at W + 2 x SYMMPIN_WARMUP if that epoch agrees (time for sites that come
 *             after the warm-up loop, on another stream or in a graph capture, to be recorded),
 *             at W + SYMMPIN_WARMUP if it fails;
 *   agreed    the next record closes `interval` calls after this one (interval: warmup.h);
 *   failed    retried `interval` calls after the close (the same call on every rank, although
 *             ranks notice a failure at different calls);
 *   misaligned  ranks closed at different calls (their shapes differed during warm-up): the epoch
 *             fails, and every rank closes next at max(closes) + interval;
 *   early     once a plan exists, the SYMMPIN_SCHEDULE_EARLY_CALLS-th call since the last
 *             agreement ended whose shape the plan lacks (symmpin_plan_shape_missing: the same on
 *             every rank) closes the record, though never within SYMMPIN_WARMUP calls of the
 *             last close: a program that moves to new shapes (other token counts, another batch
 *             size) gets them planned within about SYMMPIN_WARMUP calls instead of an interval
 *             of up to 512, and one whose shapes never stop changing pays an agreement per
 *             SYMMPIN_WARMUP calls at most. An early epoch that plans nothing new disarms this rule
 *             until a later epoch does, so shapes that cannot be planned never cost more than one
 *             extra epoch.
 *
 * An agreement spans the closing call and the SYMMPIN_AGREEMENT_CALLS calls after it (its board
 * rounds are read at consecutive calls), so records never close closer together than that. */
#ifndef SYMMPIN_PLANNER_SCHEDULE_H
#define SYMMPIN_PLANNER_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/types.h"
#include "planner/warmup.h"

/* Calls after the closing call that an agreement needs (plan, attach, decide). */
#define SYMMPIN_AGREEMENT_CALLS 3
/* The closing call and the two after it (plan, attach) allocate and map memory: an epoch where any
 * rank captures a CUDA graph at one of them fails on every rank. */
#define SYMMPIN_AGREEMENT_UNCAPTURED_CALLS 3
/* The most calls one record holds: later calls of an epoch are not recorded, on every rank alike
 * (a record is posted as one board blob; planner/record.h sizes it). */
#define SYMMPIN_RECORD_MAX_CALLS 16384

/* Calls of shapes the plan lacks that close a record early (schedule "early" above). */
#define SYMMPIN_SCHEDULE_EARLY_CALLS 8

typedef struct symmpin_schedule {
  symmpin_warmup warmup;
  symmpin_epochs epochs;
  bool warm;          /* warm-up has ended */
  uint64_t closed_at; /* the call count that closed the last record; 0 = none yet */
  bool realigned;     /* the epoch in progress was found misaligned (the next close is set) */
  bool early;         /* the epoch in progress closed early */
  bool early_armed;   /* the early rule may close a record */
  uint32_t missing;   /* calls of shapes the plan lacks since the last agreement ended */
} symmpin_schedule;

symmpin_status symmpin_schedule_init(symmpin_schedule *s, const symmpin_warmup_config *cfg);
void symmpin_schedule_free(symmpin_schedule *s);

/* Call n of the communicator (n = 1, 2, ...; every call, in order, at least those after the
 * agreement in progress) with its warm-up key (symmpin_warmup_key) and whether the plan in force
 * lacks its shape (symmpin_plan_shape_missing). True if this call closes the rank's record: an
 * agreement starts here. The caller must not start another agreement before this one ended
 * (agreed() or failed()). */
bool symmpin_schedule_call(symmpin_schedule *s, uint64_t n, uint64_t warmup_key,
                           bool shape_missing);

/* The ranks' closing calls of the epoch in progress (closes[r] for rank r, as posted). True if they
 * are all equal; otherwise the epoch cannot agree and the next close is max + interval. */
bool symmpin_schedule_align(symmpin_schedule *s, const uint64_t *closes, int nranks);

/* The epoch in progress ended: agreed (planned_new: its plan decided sites it had not seen before,
 * symmpin_plan.nnew > 0), or failed. */
void symmpin_schedule_agreed(symmpin_schedule *s, bool planned_new);
void symmpin_schedule_failed(symmpin_schedule *s);

#endif
