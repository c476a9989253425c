/* The preload's process-wide state, for the engine and for tests. The event handlers themselves
 * are preload/events.h. */
#ifndef SYMMPIN_PRELOAD_PRELOAD_H
#define SYMMPIN_PRELOAD_PRELOAD_H

#include "planner/allocmap.h"
#include "preload/config.h"

/* The allocation map of the program's allocations (created at initialisation). */
symmpin_allocmap *symmpin_preload_allocmap(void);
/* The calling thread's ncclGroupStart/End depth. */
int symmpin_preload_group_depth(void);
/* What the library's destructor does (interpose/ calls it with the re-entrancy guard set, so
 * symmpin's own CUDA calls are not the program's): release every communicator's engine state,
 * close the trace, print/write statistics. Idempotent. */
void symmpin_preload_exit(void);

/* Tests only: finish the current state (as at exit), forget every communicator and statistic,
 * and start again with `cfg` instead of the environment. */
void symmpin_preload_test_init(const symmpin_config *cfg);

#endif
