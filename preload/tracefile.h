/* The process's trace file (SYMMPIN_TRACE): one file per process, named by expanding the pattern
 * with the rank of the process's first communicator. Events are buffered in memory until a
 * comm-init tells that rank; once the process has a communicator whose rank is not known yet (a
 * split, a non-blocking init), the file opens with rank "u" when the buffer fills first, or at
 * exit. A process that never creates a communicator writes no file: its events are dropped at
 * exit, and those that do not fit the buffer before the first communicator are left out (the
 * file then says how many, in an INFO line when it opens). Thread-safe; never allocates per
 * event (the buffer is allocated at start). */
#ifndef SYMMPIN_PRELOAD_TRACEFILE_H
#define SYMMPIN_PRELOAD_TRACEFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "planner/trace.h"

#define SYMMPIN_TRACEFILE_EARLY_EVENTS 4096 /* events held before the rank is known */
#define SYMMPIN_TRACEFILE_WHERES 4096       /* stacks whose location is written (power of two) */

/* Start tracing to `pattern` (%r, %p, %h; planner/trace.h). `early` events are buffered before
 * the rank is known (0 = SYMMPIN_TRACEFILE_EARLY_EVENTS). */
symmpin_status symmpin_tracefile_start(const char *pattern, size_t early);
bool symmpin_tracefile_on(void);
/* An event with the defaults the trace format reads back for unwritten fields (comm, device,
 * rank, parent, stream_ord -1; the rest 0), the calling thread's id and the time filled in. */
void symmpin_tracefile_event_init(symmpin_trace_event *ev, symmpin_trace_call call);
/* The process has a communicator (its rank may not be known yet): from now on the file may open
 * (with rank "u" when the buffer fills or at exit). Before this, nothing opens a file. */
void symmpin_tracefile_allow_open(void);
/* The rank is known (the first communicator's; also allows the open): opens the file and writes
 * the buffered events. Later calls do nothing. */
void symmpin_tracefile_set_rank(int rank);
void symmpin_tracefile_add(symmpin_trace_event *ev);
/* The same, preceded the first time ev->stack is seen by a "#where=" line for it (when `where` is
 * known). The location's strings must stay valid until the file is open (the loader's are). At
 * most SYMMPIN_TRACEFILE_WHERES stacks are described per process; the rest get none. */
void symmpin_tracefile_add_at(symmpin_trace_event *ev, const symmpin_site_where *where);
void symmpin_tracefile_flush(void);
/* Flush and close (opening with rank "u" first if no rank came but a communicator did; writing
 * nothing if none came). Tracing is off afterwards. */
void symmpin_tracefile_stop(void);
/* The expanded path once the file is open ("" before). */
const char *symmpin_tracefile_path(void);

#endif
