/* The warm-up rule and epoch schedule (warmup.h). Repeat detection is incremental: for every
 * candidate period P keep the length of the trailing run where the sequence equals itself
 * shifted by P; a block of P calls repeated twice ends the sequence exactly when that run
 * reaches P. One pass over the tracked periods per call, no re-scanning of history. */
#include "planner/warmup.h"

#include "common/log.h"
#include "planner/site.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t warmup_calls(const symmpin_warmup_config *cfg) {
  uint32_t n = (cfg && cfg->calls) ? cfg->calls : SYMMPIN_WARMUP_DEFAULT;
  return n < SYMMPIN_WARMUP_MAX ? n : SYMMPIN_WARMUP_MAX;
}

symmpin_status symmpin_warmup_init(symmpin_warmup *w, const symmpin_warmup_config *cfg) {
  memset(w, 0, sizeof(*w));
  w->max_calls = warmup_calls(cfg);
  w->min_calls = w->max_calls < SYMMPIN_WARMUP_MIN_CALLS ? w->max_calls : SYMMPIN_WARMUP_MIN_CALLS;
  w->max_period = w->max_calls / 2;
  if (w->max_period > SYMMPIN_WARMUP_MAX_PERIOD) w->max_period = SYMMPIN_WARMUP_MAX_PERIOD;
  w->ring = calloc((size_t)w->max_period + 1, sizeof(*w->ring));
  w->run = calloc((size_t)w->max_period + 1, sizeof(*w->run));
  if (!w->ring || !w->run) {
    SYMMPIN_WARN("warm-up: out of memory (%u tracked periods)", w->max_period);
    symmpin_warmup_free(w);
    return SYMMPIN_ERR_NOMEM;
  }
  return SYMMPIN_OK;
}

void symmpin_warmup_free(symmpin_warmup *w) {
  free(w->ring);
  free(w->run);
  w->ring = NULL;
  w->run = NULL;
}

bool symmpin_warmup_step(symmpin_warmup *w, uint64_t site) {
  if (w->done) return true;
  uint64_t n = ++w->n;
  uint32_t ring_len = w->max_period + 1;
  uint32_t found = 0;
  for (uint32_t p = 1; p <= w->max_period; p++) {
    if (n > p && w->ring[(n - p) % ring_len] == site) {
      w->run[p]++;
      if (!found && w->run[p] >= p) found = p; /* the shortest repeating block */
    } else {
      w->run[p] = 0;
    }
  }
  w->ring[n % ring_len] = site;
  if (n >= w->max_calls || (n >= w->min_calls && found)) {
    w->done = true;
    w->period = n >= w->min_calls ? found : 0;
  }
  return w->done;
}

void symmpin_epochs_init(symmpin_epochs *e, const symmpin_warmup_config *cfg, uint64_t warmup_end) {
  e->base = warmup_calls(cfg);
  e->interval = e->base;
  e->next = warmup_end + e->interval;
}

void symmpin_epochs_advance(symmpin_epochs *e, bool planned_new) {
  if (planned_new)
    e->interval = e->base;
  else
    e->interval = e->interval >= SYMMPIN_EPOCH_MAX_INTERVAL / 2 ? SYMMPIN_EPOCH_MAX_INTERVAL
                                                                : e->interval * 2;
  e->next += e->interval;
}

uint64_t symmpin_warmup_key(int comm_ordinal, int coll, uint64_t count, int dtype, int op) {
  return symmpin_site_id(0, comm_ordinal, coll, count, dtype, op);
}
