/* symmpin-replay's engine: load the traces of all ranks of a job, rebuild each communicator's
 * per-rank call sequence, and run the planner on it exactly as the preload would (same warm-up
 * rule, same epochs, same plan function, the kernels' slot sizes). CPU only. */
#ifndef SYMMPIN_PLANNER_REPLAY_H
#define SYMMPIN_PLANNER_REPLAY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "planner/plan.h"
#include "common/types.h"

typedef struct symmpin_replay_options {
  symmpin_plan_mode mode;
  uint32_t warmup;            /* SYMMPIN_WARMUP; 0 = default */
  uint64_t max_bytes;         /* SYMMPIN_MAX_BYTES */
  uint64_t capture_bytes;     /* SYMMPIN_CAPTURE_BYTES: the plans' capture arena, as the library's */
  bool json;                  /* one JSON document instead of the text report */
  const symmpin_plan_kernels *kernels; /* the library's binding: agree/agree.h */
} symmpin_replay_options;

/* Reads every path, prints the report to out. SYMMPIN_ERR_IO / _INVALID / _UNSUPPORTED when a
 * trace cannot be read. */
symmpin_status symmpin_replay_run(const char *const *paths, int npaths,
                                  const symmpin_replay_options *o, FILE *out);

#endif
