/* The capture arena (docs/design.md "Capture"): calls captured into CUDA graphs never use an eager
 * slot. The first agreed plan reserves the arena after its slots (symmpin_plan.capture_offset and
 * capture_bytes, SYMMPIN_CAPTURE_BYTES); captured calls take slots in it, handed out without any
 * agreement: every rank captures the same calls in the same order (NCCL requires it), so every
 * rank hands out the same offsets, and the route check catches ranks that capture differently.
 *
 * A lane is one capture sequence's stream and slot class: its calls are ordered inside the graph,
 * so they share one slot (a larger call takes a new one, which the lane then keeps). Lanes are
 * reused round-robin; a capture that needs a lane again gets a new slot. Bytes are never given
 * back: a graph may be replayed until the process ends.
 *
 * Plain C, the engine's (engine.c): used under the communicator's lock. */
#ifndef SYMMPIN_PRELOAD_ARENA_H
#define SYMMPIN_PRELOAD_ARENA_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/plan.h"
#include "preload/comm.h"
#include "preload/engine.h"
#include "preload/reason.h"

#define SYMMPIN_ARENA_LANES 32

typedef struct symmpin_arena_lane {
  unsigned long long capture_id; /* 0: free */
  int stream_ord, klass;
  uint64_t offset, bytes;
} symmpin_arena_lane;

/* One communicator's arena; all zero before the first captured call. */
typedef struct symmpin_arena {
  symmpin_arena_lane lanes[SYMMPIN_ARENA_LANES];
  unsigned lane_next; /* the lane a new capture stream takes */
  uint64_t used;      /* bytes handed out (never returned: graphs live on) */
  bool full_logged;
} symmpin_arena;

/* The arena slot under `plan` for the captured call `ec` of communicator c, as a plan entry in
 * *out (the route log and the launch take one): SYMMPIN_REASON_NONE. Otherwise the reason it goes
 * to NCCL (its capture unknown, a datatype or op without kernel, above SYMMPIN_MAX_BYTES, the
 * arena full: one INFO line per communicator), *out untouched. */
symmpin_reason symmpin_arena_route(symmpin_arena *arena, symmpin_comm *c, const symmpin_plan *plan,
                                   const symmpin_engine_call *ec, symmpin_plan_site *out);

#endif
