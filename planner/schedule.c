/* The epoch schedule (schedule.h). */
#include "planner/schedule.h"

#include <string.h>

symmpin_status symmpin_schedule_init(symmpin_schedule *s, const symmpin_warmup_config *cfg) {
  memset(s, 0, sizeof *s);
  symmpin_status st = symmpin_warmup_init(&s->warmup, cfg);
  if (st != SYMMPIN_OK) return st;
  symmpin_epochs_init(&s->epochs, cfg, 0);
  return SYMMPIN_OK;
}

void symmpin_schedule_free(symmpin_schedule *s) { symmpin_warmup_free(&s->warmup); }

/* The interval never lets a record close while the previous agreement is still running. */
static uint64_t interval(const symmpin_schedule *s) {
  return s->epochs.interval > SYMMPIN_AGREEMENT_CALLS ? s->epochs.interval
                                                       : SYMMPIN_AGREEMENT_CALLS + 1;
}

/* The first call after the agreement that started at the last close. */
static bool agreement_over(const symmpin_schedule *s, uint64_t n) {
  return n > s->closed_at + SYMMPIN_AGREEMENT_CALLS;
}

bool symmpin_schedule_call(symmpin_schedule *s, uint64_t n, uint64_t warmup_key,
                           bool shape_missing) {
  s->early = false;
  if (!s->warm) {
    if (!symmpin_warmup_step(&s->warmup, warmup_key)) return false;
    /* The warm-up's record closes here; the next one an interval later if this epoch fails, and
     * two intervals later if it agrees (agreed() adds one more): time for sites that come after
     * the warm-up loop (another stream, a graph capture) to show up in one later record. */
    s->warm = true;
    s->early_armed = true;
    symmpin_warmup_config cfg = {.calls = s->epochs.base};
    symmpin_epochs_init(&s->epochs, &cfg, n);
  } else if (!symmpin_epochs_due(&s->epochs, n)) {
    /* Counted only once the agreement is over: the engine sees no calls during one, and the plan
     * in force is then the same for the engine and the replay. */
    if (!shape_missing || !s->early_armed || !agreement_over(s, n)) return false;
    if (s->missing < SYMMPIN_SCHEDULE_EARLY_CALLS) s->missing++;
    /* At most one record per SYMMPIN_WARMUP calls this way: a program whose shapes never stop
     * changing costs an agreement (and a pool chunk) that often, not every few calls. */
    if (s->missing < SYMMPIN_SCHEDULE_EARLY_CALLS || n < s->closed_at + s->epochs.base) return false;
    s->early = true;
  }
  s->missing = 0;
  s->closed_at = n;
  s->realigned = false;
  return true;
}

bool symmpin_schedule_align(symmpin_schedule *s, const uint64_t *closes, int nranks) {
  uint64_t max = 0;
  bool same = true;
  for (int r = 0; r < nranks; r++) {
    if (closes[r] != closes[0]) same = false;
    if (closes[r] > max) max = closes[r];
  }
  if (!same) {
    s->epochs.next = max + interval(s);
    s->realigned = true;
  }
  return same;
}

void symmpin_schedule_agreed(symmpin_schedule *s, bool planned_new) {
  if (!s->early) {
    symmpin_epochs_advance(&s->epochs, planned_new);
    if (planned_new) s->early_armed = true;
  } else if (planned_new) {
    /* New sites: the interval starts over from here, as after any epoch that planned some. */
    s->epochs.interval = s->epochs.base;
    s->epochs.next = s->closed_at + s->epochs.interval;
  } else {
    s->early_armed = false; /* the missing shapes cannot be planned: wait for the regular epochs */
  }
  if (s->epochs.next < s->closed_at + SYMMPIN_AGREEMENT_CALLS + 1)
    s->epochs.next = s->closed_at + SYMMPIN_AGREEMENT_CALLS + 1;
}

void symmpin_schedule_failed(symmpin_schedule *s) {
  if (s->early) s->early_armed = false;
  /* Retry one interval after the close (the warm-up's close already points there). */
  if (!s->realigned && s->epochs.next <= s->closed_at) s->epochs.next = s->closed_at + interval(s);
  if (s->epochs.next < s->closed_at + SYMMPIN_AGREEMENT_CALLS + 1)
    s->epochs.next = s->closed_at + SYMMPIN_AGREEMENT_CALLS + 1;
  s->realigned = false;
}
