/* FAKE for CPU tests: stand-ins for the two things preload_core calls outside itself, so its
 * event handlers run in-process without CUDA or NCCL:
 *  - preload/host.h (CUDA device, capture state, NCCL rank/size queries), answered from the
 *    variables below and installed before main, as interpose/ installs the real answers;
 *  - preload/engine.h (the engine), which takes an all-reduce exactly when its count is
 *    stand_in_take_count, and counts releases. */
#include "stand_ins.h"

#include "preload/host.h"
#include "preload/engine.h"

__thread int stand_in_device;
int stand_in_capturing;
int stand_in_comm_rc;
int stand_in_comm_rank = -1, stand_in_comm_nranks = -1;
size_t stand_in_take_count = (size_t)-1;
int stand_in_take_rc;
int stand_in_releases;
symmpin_engine_call stand_in_last_call;
uint64_t stand_in_last_index;

static int query_device(void) { return stand_in_device; }
static int query_capturing(void *stream, unsigned long long *capture_id) {
  (void)stream;
  if (capture_id) *capture_id = 7; /* one capture sequence */
  return stand_in_capturing;
}
static int query_comm(void *comm, int *rank, int *nranks) {
  (void)comm;
  if (stand_in_comm_rc) return stand_in_comm_rc;
  *rank = stand_in_comm_rank;
  *nranks = stand_in_comm_nranks;
  return 0;
}

__attribute__((constructor)) static void stand_in_install(void) {
  symmpin_host h = {.device = query_device, .capturing = query_capturing, .comm_rank = query_comm};
  symmpin_host_install(&h);
}

bool stand_in_hold;
int stand_in_flushes, stand_in_flush_rc;
static int held; /* calls held since the last flush, all communicators */

int stand_in_drops;
void symmpin_engine_group_drop(symmpin_comm *c) {
  (void)c;
  if (held) stand_in_drops++;
  held = 0;
}

int stand_in_group_ends, stand_in_group_end_rc;
bool stand_in_want_group_end;
void symmpin_engine_group_end(symmpin_comm *c, int rc) {
  (void)c;
  stand_in_group_ends++;
  stand_in_group_end_rc = rc;
}

int symmpin_engine_group_flush(symmpin_comm *c) {
  (void)c;
  if (!held) return 0;
  held = 0;
  stand_in_flushes++;
  return stand_in_flush_rc;
}

bool symmpin_engine_collective(symmpin_comm *c, symmpin_engine_call *ec, int *rc,
                               symmpin_reason *reason) {
  ec->timing = -1;
  ec->group_end = stand_in_want_group_end && ec->may_batch;
  stand_in_last_call = *ec;
  stand_in_last_index = c->collectives;
  if (ec->call->count == stand_in_take_count) {
    *rc = stand_in_take_rc;
    ec->batched = stand_in_hold && ec->may_batch;
    held += ec->batched;
    stand_in_last_call = *ec;
    return true;
  }
  *reason = SYMMPIN_REASON_WARMUP;
  return false;
}

int stand_in_failure_reports;
void symmpin_engine_comm_report_failure(symmpin_comm *c) {
  (void)c;
  stand_in_failure_reports++;
}

void symmpin_engine_nccl_done(symmpin_comm *c, const symmpin_engine_call *ec, int rc) {
  (void)c, (void)ec, (void)rc;
}

int stand_in_polls;
int stand_in_drains;
void symmpin_engine_drain(void) { stand_in_drains++; }
int stand_in_prepared_device = -1;
int stand_in_prepares;
void symmpin_engine_prepare(int device) {
  stand_in_prepares++;
  stand_in_prepared_device = device;
}

void symmpin_engine_comm_poll(symmpin_comm *c) {
  (void)c;
  stand_in_polls++;
}

void symmpin_engine_comm_release(symmpin_comm *c) {
  (void)c;
  stand_in_releases++;
}

void symmpin_engine_comm_abandon(symmpin_comm *c) {
  (void)c;
  stand_in_releases++;
}
