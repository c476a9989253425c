/* When a communicator's warm-up ends, and when its later planning epochs come.
 *
 * Both depend only on the sequence of site ids (and on plan results, which every rank computes
 * alike), never on time or on rank-local facts, so every rank whose sequence is the same ends
 * warm-up at the same call and plans at the same calls. The rule (docs/planner.md):
 *
 *   calls are counted n = 1, 2, ... per communicator; warm-up ends with call n, the first with
 *   - n >= SYMMPIN_WARMUP (the longest warm-up), or
 *   - n >= min(SYMMPIN_WARMUP_MIN_CALLS, SYMMPIN_WARMUP) and the sequence ends with one block of
 *     P calls repeated twice: s[n-2P+1 .. n-P] == s[n-P+1 .. n], for some 1 <= P <= the largest
 *     period tracked (min(SYMMPIN_WARMUP_MAX_PERIOD, SYMMPIN_WARMUP / 2)).
 *
 * Epochs after the first plan (the warm-up's) come every `interval` calls: interval starts at
 * SYMMPIN_WARMUP, doubles after an epoch that planned no new site, and falls back to
 * SYMMPIN_WARMUP after one that did. */
#ifndef SYMMPIN_PLANNER_WARMUP_H
#define SYMMPIN_PLANNER_WARMUP_H

#include <stdbool.h>
#include <stdint.h>

#include "common/types.h"

#define SYMMPIN_WARMUP_DEFAULT 64      /* SYMMPIN_WARMUP when unset */
#define SYMMPIN_WARMUP_MIN_CALLS 16    /* no repeat ends warm-up before this many calls */
#define SYMMPIN_WARMUP_MAX_PERIOD 2048 /* longer loops end warm-up by the SYMMPIN_WARMUP rule */
/* Records are posted on the board (32 bytes a call, SYMMPIN_BOARD_BLOB_MAX = 1 MiB), so no record
 * may span more than 16384 calls: the warm-up limit and the epoch interval are capped there. */
#define SYMMPIN_WARMUP_MAX 16384
/* Longest gap between epochs: a site first seen after a quiet stretch waits at most this many
 * calls for its slot, while an epoch (three host-side board rounds) costs tens of microseconds. */
#define SYMMPIN_EPOCH_MAX_INTERVAL 512

/* What the preload passes (read once from the environment). */
typedef struct symmpin_warmup_config {
  uint32_t calls; /* SYMMPIN_WARMUP: the longest warm-up, in calls; 0 = SYMMPIN_WARMUP_DEFAULT;
                   * values above SYMMPIN_WARMUP_MAX count as SYMMPIN_WARMUP_MAX */
} symmpin_warmup_config;

typedef struct symmpin_warmup {
  uint32_t max_calls, min_calls, max_period;
  uint64_t n;       /* calls seen */
  uint32_t period;  /* the repeat that ended warm-up; 0 if none (yet), or it ended by max_calls */
  bool done;
  uint64_t *ring;   /* the last max_period + 1 site ids, ring[n % (max_period + 1)] */
  uint32_t *run;    /* run[P]: trailing calls i with s[i] == s[i - P] (index 1..max_period) */
} symmpin_warmup;

/* Allocates the detector's state (O(max_period)); the per-call step never allocates. */
symmpin_status symmpin_warmup_init(symmpin_warmup *w, const symmpin_warmup_config *cfg);
void symmpin_warmup_free(symmpin_warmup *w);
/* Feed the next call's key (symmpin_warmup_key). Returns true for the call that ends warm-up and
 * for every call after it (so a caller may ignore the transition). O(max_period). */
bool symmpin_warmup_step(symmpin_warmup *w, uint64_t key);

/* What warm-up looks at: the call's shape on its communicator, not its call site. Every rank of a
 * valid NCCL program makes the same sequence of shapes even where ranks reach a call from different
 * sites, so every rank ends warm-up at the same call; sites decide only what gets pinned. */
uint64_t symmpin_warmup_key(int comm_ordinal, int coll, uint64_t count, int dtype, int op);

/* The planning schedule after warm-up. Call counts as above (n = 1, 2, ...). */
typedef struct symmpin_epochs {
  uint32_t base;      /* SYMMPIN_WARMUP */
  uint64_t interval;
  uint64_t next;      /* the call count at which the next epoch's record closes */
} symmpin_epochs;

/* The first plan's record closed at call count `warmup_end`. */
void symmpin_epochs_init(symmpin_epochs *e, const symmpin_warmup_config *cfg, uint64_t warmup_end);
/* Whether the record closes with call count n (an agreement point). */
static inline bool symmpin_epochs_due(const symmpin_epochs *e, uint64_t n) { return n == e->next; }
/* After planning the epoch that closed at e->next: planned_new = it planned a site it had not
 * seen before (the plan says so: symmpin_plan's new_sites). Schedules the next one. */
void symmpin_epochs_advance(symmpin_epochs *e, bool planned_new);

#endif
