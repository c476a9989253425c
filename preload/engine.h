/* The engine: per communicator, the GPU side (pool, the kernels' error record) around the CUDA-free
 * agreement (agree/agree.h), and the redirect of collectives to symmpin's kernels. events.c
 * calls it from the event handlers; it owns c->engine. Everything here runs with the per-thread
 * re-entrancy guard set, so symmpin's own CUDA calls are not recorded as the program's. */
#ifndef SYMMPIN_PRELOAD_ENGINE_H
#define SYMMPIN_PRELOAD_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "preload/comm.h"
#include "preload/events.h"
#include "preload/reason.h"

/* Facts about one collective call the preload has already computed. */
typedef struct symmpin_engine_call {
  const symmpin_coll_call *call;
  uint64_t site;       /* site id (planner/site.h) */
  int stream_ord;      /* stream ordinal on the communicator */
  int group_depth;     /* this thread's ncclGroup depth at the call */
  uint64_t group_token; /* same non-zero value for every call of one outermost group of this
                           thread, 0 outside groups (planner/record.h) */
  bool capturing;      /* the stream is capturing a CUDA graph */
  unsigned long long capture_id; /* then the capture sequence's id (0 = unknown) */
  uint64_t send_alloc, recv_alloc; /* allocation ids (0 = unknown) */
  int timing;          /* set by the engine: a timing the NCCL call must end (-1 = none) */
  bool may_batch;      /* in a group: the engine may hold the call for one launch at the group's
                          end (the caller then calls symmpin_engine_group_flush for it) */
  bool batched;        /* set by the engine: the call is held for that launch */
  bool group_end;      /* set by the engine (only where may_batch): call symmpin_engine_group_end
                          after the real outermost ncclGroupEnd, whatever path the call took */
} symmpin_engine_call;

/* Decide and, if symmpin takes it, enqueue the collective call. Returns true when taken (*rc = the
 * ncclResult_t to return). Otherwise *reason says why NCCL must run it, and if ec->timing >= 0
 * the caller calls symmpin_engine_nccl_done after NCCL's call. */
bool symmpin_engine_collective(symmpin_comm *c, symmpin_engine_call *ec, int *rc,
                               symmpin_reason *reason);
/* The outermost ncclGroupEnd of the thread that made c's batched calls: launch them (one kernel
 * per stream and datatype). 0, or the ncclResult_t to report from ncclGroupEnd (the communicator
 * is then in error: the peers run those calls). Caller holds c->lock. */
int symmpin_engine_group_flush(symmpin_comm *c);

/* After the real outermost ncclGroupEnd of a group in which the engine asked for it (ec.group_end)
 * or held calls: the group's time, for the choice by measurement (rc: ncclGroupEnd's result; an
 * error drops it). Caller holds c->lock. */
void symmpin_engine_group_end(symmpin_comm *c, int rc);

/* ncclGroupSimulateEnd: NCCL runs nothing of the group, so neither does symmpin: drop c's held
 * calls (calls launched before the group's end, where a group was split, have run: a known
 * limit). Caller holds c->lock. */
void symmpin_engine_group_drop(symmpin_comm *c);

/* NCCL has enqueued a call the engine is timing (SYMMPIN_MEASURE): end the timing (rc: NCCL's
 * result; an error drops it). Caller holds c->lock. */
void symmpin_engine_nccl_done(symmpin_comm *c, const symmpin_engine_call *ec, int rc);
/* A kernel of c gave up waiting (the communicator is in error): log once which call site and
 * which peer. Caller holds c->lock. */
void symmpin_engine_comm_report_failure(symmpin_comm *c);
/* The async-error query's check: the board's alarm and the peers' route logs (agree.h); enters
 * the error state on an alarm. Caller holds c->lock. */
void symmpin_engine_comm_poll(symmpin_comm *c);
/* The communicator ends (destroy/abort/finalize) or the process exits: release its state. */
void symmpin_engine_comm_release(symmpin_comm *c);
/* ncclCommAbort: drop the state without waiting for peers or the device (the kernels may be the
 * stuck ones the program is aborting); device memory goes once they have given up
 * (preload/keep.h). */
void symmpin_engine_comm_abandon(symmpin_comm *c);
/* Load the kernels for `device` ahead of a communicator's first collective call (the driver opened,
 * the device's image loaded and its first kernel found: the work that would otherwise stall that
 * call), from the communicator's init, where NCCL's own set-up takes far longer. Never fails
 * visibly: a failure is found again, and reported, at the first collective call. */
void symmpin_engine_prepare(int device);
/* Free what ended communicators left to their kernels, where those are done (never waits).
 * The watch thread calls it every tick, also when no communicator is left. */
void symmpin_engine_drain(void);

#endif
