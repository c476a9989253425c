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
  bool json;                  /* one JSON document instead of the text report */
  symmpin_slot_bytes_fn slot_bytes;
  symmpin_supports_fn supports;
  void *ctx;
} symmpin_replay_options;

/* Reads every path, prints the report to out. SYMMPIN_ERR_IO / _INVALID / _UNSUPPORTED when a
 * trace cannot be read. */
symmpin_status symmpin_replay_run(const char *const *paths, int npaths,
                                  const symmpin_replay_options *o, FILE *out);

/* The slot size function the replay uses (replay_slots.c): the kernels' own when built with them. */
size_t symmpin_replay_slot_bytes(size_t count, int dtype, int nranks, void *ctx);
bool symmpin_replay_supports(int dtype, int op, void *ctx);
/* The kernels' slot class of a call shape (staged input) and how many there are: calls of
 * different classes never share slot bytes (kernels/allreduce.h; planner/record.h's sharing
 * classes); 0 and 1 with the stand-in. */
int symmpin_replay_variant(size_t count, int dtype, int nranks);
int symmpin_replay_variants(void);
/* A slot class's name for reports ("LL", "copy", "in-slot"); NULL with the stand-in. */
const char *symmpin_replay_variant_name(int variant);
/* "kernels" or "stand-in": which one the above is. */
const char *symmpin_replay_slot_source(void);

#endif
