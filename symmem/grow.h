/* Growing symmetric pools in one blocking call, for tools and tests (symmpin-bench, test_pool).
 *
 * symmpin_pool_grow() runs pool.h's two-step protocol over the board (board.h) from start to end:
 * every rank reserves its chunk and posts the export record (round k), waits for every rank's
 * record, attaches every peer's chunk, posts whether it attached (round k+1), waits again, and
 * decides round k+1's verdict: GO only if every rank attached. It returns SYMMPIN_OK exactly when
 * that verdict is GO, so every rank that returns OK knows every other rank can use the new chunk.
 *
 * The engine (preload/) runs the same steps, but spread over consecutive intercepted calls: post
 * at one call, read at the next. It cannot block: it runs inside the program's all-reduce, and a
 * thread driving several ranks (one ncclAllReduce per rank inside ncclGroupStart/End) posts rank
 * 1's round only in the call after rank 0's, so a blocking wait in rank 0's call would wait for
 * itself. This helper blocks, so its caller must hand it every rank its thread drives at once
 * (`nlocal` pools and boards): it posts for all of them before it waits.
 *
 * Not during CUDA-graph capture (pool.h: reserve and attach allocate and map memory). */
#ifndef SYMMPIN_SYMMEM_GROW_H
#define SYMMPIN_SYMMEM_GROW_H

#include <stddef.h>
#include <stdint.h>

#include "common/types.h"
#include "symmem/board.h"
#include "symmem/pool.h"

/* Board rounds one growth uses: args->round and args->round + 1. */
#define SYMMPIN_POOL_GROW_ROUNDS 2u

typedef struct symmpin_pool_grow_args {
  int nranks;          /* ranks of the communicator (every board's nranks) */
  size_t bytes;        /* the pool size every rank grows to (no growth: <= the current size) */
  uint32_t round;      /* the first of the two rounds; above every round these ranks posted */
  unsigned timeout_ms; /* the longest wait for one round */
  uint64_t tid;        /* the calling thread's id for posts and waits (board.h; 0 = unknown) */
} symmpin_pool_grow_args;

/* Grow the pools of the `nlocal` ranks this thread drives (pools[l] and boards[l] belong to one
 * rank; the same rank count and board key for all) to args->bytes, with every other rank of the
 * communicator calling it with the same args (tid aside) at the same point.
 *
 * Returns SYMMPIN_OK when every rank attached (the verdict of round args->round + 1 is GO).
 * Otherwise: the status of the first step that failed here (reserve or attach: pool.h logs those;
 * SYMMPIN_ERR_TIMEOUT when a rank did not post a round within the timeout; SYMMPIN_ERR_DISAGREE
 * when a missing rank is driven by this thread but was not passed in, or ranks asked for
 * different sizes), or SYMMPIN_ERR_DISAGREE when this thread's steps succeeded but another
 * rank's did not. The reason, naming the rank, goes to `why` (if why_len > 0); nothing of its own
 * is logged: callers say what a failed growth means for them.
 *
 * Every rank posts both rounds whatever happens (a rank that timed out in round k posts "not
 * attached" in round k+1 and decides FAIL), so peers are released rather than left waiting, and
 * the caller's next round is args->round + SYMMPIN_POOL_GROW_ROUNDS in every case. Every rank
 * settles its pool with the verdict (symmpin_pool_settle), so after a failure every pool has its
 * old size again; an equal request later re-exports the reserved chunk (pool.h). */
symmpin_status symmpin_pool_grow(symmpin_pool *const pools[], symmpin_board *const boards[],
                                 int nlocal, const symmpin_pool_grow_args *args, char *why,
                                 size_t why_len);

#endif
