/* FAKE for CPU tests: the knobs of stand_ins.c (query and engine stand-ins). */
#ifndef SYMMPIN_TESTS_STAND_INS_H
#define SYMMPIN_TESTS_STAND_INS_H

#include <stddef.h>
#include <stdint.h>

#include "preload/engine.h"

extern __thread int stand_in_device;
extern int stand_in_capturing;
extern int stand_in_comm_rc; /* what the rank/size query returns (0 = answer below) */
extern int stand_in_comm_rank, stand_in_comm_nranks;
extern size_t stand_in_take_count; /* the engine takes all-reduces of this count */
extern int stand_in_take_rc;
extern int stand_in_releases;
extern int stand_in_drains; /* symmpin_engine_drain calls */
extern int stand_in_prepares;        /* symmpin_engine_prepare calls */
extern int stand_in_prepared_device; /* the device of the last one (-1 before) */
extern int stand_in_failure_reports;
extern int stand_in_polls; /* symmpin_engine_comm_poll calls (async-error queries) */
extern symmpin_engine_call stand_in_last_call;
extern bool stand_in_hold;      /* the engine holds calls it takes in a group when it may */
extern int stand_in_flushes;    /* symmpin_engine_group_flush calls that had calls held */
extern int stand_in_flush_rc;   /* what they return */
extern int stand_in_drops;      /* symmpin_engine_group_drop calls that had calls held */
extern bool stand_in_want_group_end; /* the engine asks for the end of groups it is called in */
extern int stand_in_group_ends;      /* symmpin_engine_group_end calls, and the last one's rc */
extern int stand_in_group_end_rc;
extern uint64_t stand_in_last_index; /* c->collectives seen by the engine */

#endif
