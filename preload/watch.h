/* The watch: one thread per process that runs the async-error query's check (the board's alarm,
 * the peers' route logs, a kernel that gave up: symmpin_engine_comm_poll) on every communicator,
 * every SYMMPIN_WATCH_MS. Ranks learn of a divergent call at their next all-reduce or
 * ncclCommGetAsyncError; a rank blocked in a stream synchronization behind it, in a program that
 * polls nothing, would wait for ever. The watch puts such a communicator in its error state, whose
 * abort word makes the waiting kernels give up, so the program's synchronization returns and its
 * next NCCL call reports the error. The check reads host memory only; each tick also frees what
 * ended communicators left to their kernels (symmpin_engine_drain: event queries on the pool's
 * device, never a wait; nothing at all when nothing is left). Never waits for a communicator's
 * lock (a thread inside an all-reduce does the same check itself). */
#ifndef SYMMPIN_PRELOAD_WATCH_H
#define SYMMPIN_PRELOAD_WATCH_H

#include <stdint.h>
#include <time.h>

/* Start the thread (once per process; a forked child has none and starts none: symmpin is off
 * there). interval_ms 0: no watch. */
void symmpin_watch_start(uint64_t interval_ms);
/* Stop and join it (tests). */
void symmpin_watch_stop(void);
/* Stop it and join it until `deadline` (CLOCK_MONOTONIC; the process's exit, which must not wait
 * on a thread that may wait for a lock the exiting thread holds). Past the deadline the thread is
 * left to end by itself: it takes no communicator's lock but by trylock, and holds references. */
void symmpin_watch_stop_by(const struct timespec *deadline);

#endif
