/* Timing pairs: how long one all-reduce takes on its stream, for
 *   - the choice by measurement (SYMMPIN_CHOOSE=measure: agree/choice.h decides which calls, the
 *     first 16 per shape and path, and takes the samples), and
 *   - the statistics (SYMMPIN_MEASURE: symmpin_stats_want_timing decides).
 * A sampled eager call is timed with a pair of CUDA events recorded around NCCL's call or
 * symmpin's kernel on the call's stream, on the communicator's device; a finished pair is read at
 * a later call (an event query, never a wait). At most SYMMPIN_TIMING_PAIRS are in flight per
 * communicator: a call that finds none free is not sampled. Never inside a capture (the events
 * would become graph nodes). A call inside a group is not timed alone (NCCL runs a group's calls
 * at ncclGroupEnd): the choice times a whole group instead, from before its first call to after
 * the real ncclGroupEnd, on the stream of its calls (symmpin_timing_group_start/end).
 *
 * The engine's (engine.c): called under the communicator's lock, with the re-entrancy guard set. */
#ifndef SYMMPIN_PRELOAD_TIMING_H
#define SYMMPIN_PRELOAD_TIMING_H

#include <stdbool.h>

#include "agree/choice.h"
#include "preload/comm.h"
#include "preload/engine.h"

#define SYMMPIN_TIMING_PAIRS 64
#define SYMMPIN_TIMING_READS_PER_CALL 4

/* One communicator's pairs; made at the first call that may be sampled (NULL before). */
typedef struct symmpin_timing symmpin_timing;

/* Start timing call `ec` if it is sampled: symmpin's kernel (redirected) or NCCL's call; the
 * choice takes the sample only if choice_may (probes and redirected calls while measuring).
 * Makes *timing when c times at all (a choice, or SYMMPIN_MEASURE with statistics). Returns the
 * pair to end (symmpin_timing_end), or -1: not sampled, or no pair could be started. */
int symmpin_timing_start(symmpin_timing **timing, symmpin_comm *c, symmpin_choice *choice,
                         const symmpin_engine_call *ec, bool redirected, bool choice_may);
/* End pair `pair` (-1: none) after the call on `stream`, the communicator's device current; !ok
 * (the call failed) gives the pair up. */
void symmpin_timing_end(symmpin_timing *timing, int pair, void *stream, bool ok);
/* The same after NCCL's call, from outside any device scope: on c's device, as at the start (the
 * legacy stream is per device). */
void symmpin_timing_end_on_device(symmpin_timing *timing, const symmpin_comm *c, int pair,
                                  void *stream, bool ok);
/* A group's pair (the choice's unit, choice.h), started at its first call on `stream`, before
 * anything of the group is enqueued; -1 if none could be started. Makes *timing if needed. */
int symmpin_timing_group_start(symmpin_timing **timing, symmpin_comm *c, void *stream);
/* End a group's pair after the real ncclGroupEnd, from outside any device scope: the sample goes
 * to the unit `sig` on its path (choice.h symmpin_choice_group_add); !ok gives the pair up. */
void symmpin_timing_group_end(symmpin_timing *timing, const symmpin_comm *c, int pair, void *stream,
                              uint64_t sig, bool redirected, bool ok);
/* Read up to SYMMPIN_TIMING_READS_PER_CALL finished pairs into the statistics and the choice.
 * Never from a capturing call, and with the capture mode relaxed (an event query is "unsafe"
 * while another thread captures in global mode): the caller's part. Safe on NULL. */
void symmpin_timing_read(symmpin_timing *timing, symmpin_comm *c, symmpin_choice *choice);
/* Destroy the events (never blocks, also for pairs still in flight) and free. Safe on NULL. */
void symmpin_timing_free(symmpin_timing *timing);

#endif
