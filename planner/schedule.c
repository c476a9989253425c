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

bool symmpin_schedule_call(symmpin_schedule *s, uint64_t n, uint64_t warmup_key) {
  bool due;
  if (!s->warm) {
    due = symmpin_warmup_step(&s->warmup, warmup_key);
    s->warm = due;
  } else {
    due = symmpin_epochs_due(&s->epochs, n);
  }
  if (due) {
    s->closed_at = n;
    s->epochs.next = n;
    s->realigned = false;
  }
  return due;
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
  symmpin_epochs_advance(&s->epochs, planned_new);
  if (s->epochs.next < s->closed_at + SYMMPIN_AGREEMENT_CALLS + 1)
    s->epochs.next = s->closed_at + SYMMPIN_AGREEMENT_CALLS + 1;
}

void symmpin_schedule_failed(symmpin_schedule *s) {
  if (!s->realigned) s->epochs.next = s->closed_at + interval(s);
  s->realigned = false;
}
