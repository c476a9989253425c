/* A communicator's call record: the collectives one rank made since the last plan (the first
 * record is the warm-up), in call order. The plan is computed from every rank's record
 * (planner/plan.h), so the record is also what a rank posts on the board: encode/decode give a
 * flat blob of it.
 *
 * Group indices: the caller passes a group token (any non-zero value that is the same for all
 * calls between one ncclGroupStart and its ncclGroupEnd on the calling thread and differs from the
 * previous group's, e.g. a per-thread count of outermost ncclGroupStart calls; 0 outside groups);
 * the record renumbers tokens 1, 2, ... in order of first appearance, so indices are the same on
 * every rank although tokens (thread ids, counters) are not. A group's calls must be contiguous in
 * this communicator's record, which holds because one thread issues them back to back.
 *
 * Not thread-safe: the caller serialises per communicator. */
#ifndef SYMMPIN_PLANNER_RECORD_H
#define SYMMPIN_PLANNER_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/types.h"

typedef struct symmpin_call {
  uint64_t site;
  uint64_t count;       /* NCCL's count argument (common/types.h) */
  int32_t dtype, op;    /* op: 0 for an all-gather */
  int32_t coll;         /* the collective (common/types.h's SYMMPIN_COLLS; 0 = all-reduce) */
  int32_t stream_ord;   /* stream ordinal on the communicator; -1 unknown (never pinned) */
  uint32_t group;       /* group index within this record, 0 = not in a group */
  bool in_place, capturing;
  uint64_t send_alloc, recv_alloc; /* allocation ids: local facts, not posted on the board */
} symmpin_call;

typedef struct symmpin_record {
  int comm;             /* communicator ordinal */
  int rank, nranks;
  uint64_t first_call;  /* the communicator's call index of calls[0] (0 for the warm-up) */
  symmpin_call *calls;
  size_t ncalls, cap;
  uint32_t ngroups;     /* group indices handed out so far */
  uint64_t last_token;  /* token of the last grouped call, for renumbering */
} symmpin_record;

/* How a call enters a record, the same in the preload and in symmpin-replay:
 * - its key is its site alone, not its stream: which stream a rank uses is a rank-local fact, and
 *   ranks that route one call differently hang or compute wrong results (docs/design.md
 *   "Routing"). A site's slot belongs to the stream of its first call (its home); the engine
 *   splices a call made on another stream into the home stream's order with events, so a slot is
 *   still never used by two unordered streams (the safety net of docs/planner.md);
 * - the "stream" the planner sees is a sharing class: stream ordinal x kernel variant, since slots
 *   may be shared over time only by calls of one kernel slot class (kernels/allreduce.h). */
uint64_t symmpin_call_key(uint64_t site, int stream_ord);
int symmpin_call_class(int stream_ord, int variant, int nvariants);

void symmpin_record_init(symmpin_record *r, int comm, int rank, int nranks, uint64_t first_call);
void symmpin_record_free(symmpin_record *r);
/* Forget the calls (keeps the memory) and start again at call index first_call. */
void symmpin_record_restart(symmpin_record *r, uint64_t first_call);
/* Append one call; c->group is ignored, group_token decides it (see above). */
symmpin_status symmpin_record_append(symmpin_record *r, const symmpin_call *c, uint64_t group_token);

/* The board blob: a fixed header and 32 bytes per call, native byte order (the board never
 * leaves the host). Allocation ids are not encoded. */
size_t symmpin_record_encoded_bytes(size_t ncalls);
/* SYMMPIN_ERR_INVALID if cap is too small (*len then holds the bytes needed). */
symmpin_status symmpin_record_encode(const symmpin_record *r, void *buf, size_t cap, size_t *len);
/* Into a fresh record (symmpin_record_free it). SYMMPIN_ERR_INVALID on a malformed blob. */
symmpin_status symmpin_record_decode(const void *buf, size_t len, symmpin_record *out);

#endif
