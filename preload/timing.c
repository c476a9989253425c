/* Timing pairs (timing.h): CUDA event pairs around sampled all-reduces, read without waiting. */
#include "preload/timing.h"

#include <stdlib.h>

#include "common/invariant.h"
#include "preload/config.h"
#include "preload/stats.h"
#include "driver/check.h"
#include "symmem/devscope.h"

typedef struct timing_pair {
  CUevent start, end; /* created on first use */
  uint64_t site;
  symmpin_plan_shape shape;
  bool redirected;
  bool for_stats, for_choice; /* who asked */
  bool group;                 /* a whole group's (for the choice), of the unit `unit` */
  uint64_t unit;
  enum { PAIR_FREE, PAIR_STARTED, PAIR_ENDED } state;
} timing_pair;

struct symmpin_timing {
  timing_pair pairs[SYMMPIN_TIMING_PAIRS];
  unsigned next; /* where the next read looks */
};

/* Events belong to the call's device: c's device current for the records, the thread put back as
 * it was after (symmem/devscope.h). false: it cannot be made current. */
static bool device_enter(const symmpin_comm *c, symmpin_devscope *s) {
  if (symmpin_devscope_enter(c->device, s, NULL) == SYMMPIN_OK) return true;
  symmpin_devscope_abandon(s);
  return false;
}

static bool measure_for_stats(const symmpin_comm *c) {
  return c->stats && symmpin_config_get()->measure;
}

/* A free pair with its start recorded on `stream` (c's device current for it), or -1. */
static int pair_start(symmpin_timing *timing, symmpin_comm *c, void *stream) {
  for (int i = 0; i < SYMMPIN_TIMING_PAIRS; i++) {
    timing_pair *t = &timing->pairs[i];
    if (t->state != PAIR_FREE) continue;
    symmpin_devscope s; /* only sampled calls pay for the device switch */
    if (!device_enter(c, &s)) return -1;
    bool ok =
        (t->start || SYMMPIN_CUDA_IGNORE(symmpin_cu.EventCreate(&t->start, CU_EVENT_DEFAULT)) ==
                         CUDA_SUCCESS) &&
        (t->end ||
         SYMMPIN_CUDA_IGNORE(symmpin_cu.EventCreate(&t->end, CU_EVENT_DEFAULT)) == CUDA_SUCCESS) &&
        SYMMPIN_CUDA_IGNORE(symmpin_cu.EventRecord(t->start, (CUstream)stream)) == CUDA_SUCCESS;
    symmpin_devscope_leave(&s);
    if (!ok) return -1;
    *t = (timing_pair){.start = t->start, .end = t->end, .state = PAIR_STARTED};
    return i;
  }
  return -1; /* all in flight: this call is not sampled */
}

int symmpin_timing_start(symmpin_timing **timing, symmpin_comm *c, symmpin_choice *choice,
                         const symmpin_engine_call *ec, bool redirected, bool choice_may) {
  if (ec->capturing || ec->group_depth > 0) return -1;
  if (!*timing) {
    if (!choice && !measure_for_stats(c)) return -1;
    if (!(*timing = calloc(1, sizeof **timing))) return -1;
  }
  const symmpin_coll_call *a = ec->call;
  symmpin_plan_shape shape = {.count = a->count, .dtype = a->dtype, .op = a->op, .coll = a->coll};
  bool for_choice = choice_may && symmpin_choice_want(choice, &shape, redirected);
  bool for_stats =
      measure_for_stats(c) && symmpin_stats_want_timing(c->stats, ec->site, redirected);
  if (!for_choice && !for_stats) return -1;
  int i = pair_start(*timing, c, ec->call->stream);
  if (i < 0) return -1;
  timing_pair *t = &(*timing)->pairs[i];
  t->site = ec->site;
  t->shape = shape;
  t->redirected = redirected;
  t->for_stats = for_stats;
  t->for_choice = for_choice;
  return i;
}

int symmpin_timing_group_start(symmpin_timing **timing, symmpin_comm *c, void *stream) {
  if (!*timing && !(*timing = calloc(1, sizeof **timing))) return -1;
  int i = pair_start(*timing, c, stream);
  if (i >= 0) (*timing)->pairs[i].group = (*timing)->pairs[i].for_choice = true;
  return i;
}

void symmpin_timing_group_end(symmpin_timing *timing, const symmpin_comm *c, int pair, void *stream,
                              uint64_t sig, bool redirected, bool ok) {
  if (pair < 0 || !timing || !timing->pairs[pair].group) return;
  timing->pairs[pair].unit = sig;
  timing->pairs[pair].redirected = redirected;
  symmpin_timing_end_on_device(timing, c, pair, stream, ok);
}

void symmpin_timing_end(symmpin_timing *timing, int pair, void *stream, bool ok) {
  SYMMPIN_ASSERT(pair < SYMMPIN_TIMING_PAIRS);
  if (pair < 0 || !timing || timing->pairs[pair].state != PAIR_STARTED) return;
  timing_pair *t = &timing->pairs[pair];
  t->state =
      ok && SYMMPIN_CUDA_IGNORE(symmpin_cu.EventRecord(t->end, (CUstream)stream)) == CUDA_SUCCESS
          ? PAIR_ENDED
          : PAIR_FREE;
}

void symmpin_timing_end_on_device(symmpin_timing *timing, const symmpin_comm *c, int pair,
                                  void *stream, bool ok) {
  if (pair < 0 || !timing) return;
  symmpin_devscope s;
  bool entered = device_enter(c, &s); /* without the device the pair is given up */
  symmpin_timing_end(timing, pair, stream, ok && entered);
  if (entered) symmpin_devscope_leave(&s);
}

void symmpin_timing_read(symmpin_timing *timing, symmpin_comm *c, symmpin_choice *choice) {
  if (!timing) return;
  for (int k = 0, reads = 0; k < SYMMPIN_TIMING_PAIRS && reads < SYMMPIN_TIMING_READS_PER_CALL;
       k++) {
    timing_pair *t = &timing->pairs[timing->next++ % SYMMPIN_TIMING_PAIRS];
    if (t->state != PAIR_ENDED) continue;
    reads++;
    CUresult q = SYMMPIN_CUDA_QUERY(symmpin_cu.EventQuery(t->end));
    if (q == CUDA_ERROR_NOT_READY) continue;
    float ms = 0;
    if (q == CUDA_SUCCESS &&
        SYMMPIN_CUDA_IGNORE(symmpin_cu.EventElapsedTime(&ms, t->start, t->end)) == CUDA_SUCCESS) {
      if (t->for_stats) symmpin_stats_record_time(c->stats, t->site, t->redirected, ms * 1000.0);
      if (t->for_choice && t->group)
        symmpin_choice_group_add(choice, t->unit, t->redirected, ms * 1000.0);
      else if (t->for_choice)
        symmpin_choice_add(choice, &t->shape, t->redirected, ms * 1000.0);
    }
    t->state = PAIR_FREE;
  }
}

void symmpin_timing_free(symmpin_timing *timing) {
  if (!timing) return;
  for (int i = 0; i < SYMMPIN_TIMING_PAIRS; i++) { /* never blocks, also for pending events */
    if (timing->pairs[i].start)
      (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.EventDestroy(timing->pairs[i].start));
    if (timing->pairs[i].end)
      (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.EventDestroy(timing->pairs[i].end));
  }
  free(timing);
}
