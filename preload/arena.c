/* The capture arena (arena.h): slots for captured calls, handed out alike on every rank. */
#include "preload/arena.h"

#include "common/log.h"
#include "kernels/allreduce.h"
#include "preload/config.h"
#include "preload/stats.h"

/* A slot of `bytes` (class klass) for a call captured on stream ordinal `ord` of capture sequence
 * `id`: the lane's slot if it is large enough, else a new one. false when the arena is full. */
static bool arena_slot(symmpin_arena *a, const symmpin_plan *plan, unsigned long long id, int ord,
                       int klass, uint64_t bytes, uint64_t *offset) {
  /* An unknown capture or stream cannot be told apart from another one: never shared. */
  bool shareable = id != 0 && ord >= 0;
  symmpin_arena_lane *lane = NULL;
  for (int i = 0; shareable && i < SYMMPIN_ARENA_LANES && !lane; i++)
    if (a->lanes[i].capture_id == id && a->lanes[i].stream_ord == ord && a->lanes[i].klass == klass)
      lane = &a->lanes[i];
  if (lane && lane->bytes >= bytes) {
    *offset = lane->offset;
    return true;
  }
  if (a->used + bytes > plan->capture_bytes) return false;
  *offset = plan->capture_offset + a->used;
  a->used += bytes;
  if (!shareable) return true;
  if (!lane) lane = &a->lanes[a->lane_next++ % SYMMPIN_ARENA_LANES];
  *lane = (symmpin_arena_lane){
      .capture_id = id, .stream_ord = ord, .klass = klass, .offset = *offset, .bytes = bytes};
  return true;
}

symmpin_reason symmpin_arena_route(symmpin_arena *arena, symmpin_comm *c, const symmpin_plan *plan,
                                   const symmpin_engine_call *ec, symmpin_plan_site *out) {
  const symmpin_coll_call *a = ec->call;
  const symmpin_config *cfg = symmpin_config_get();
  /* The capture state could not be read (ec->capture_id 0): maybe not a capture at all. NCCL,
   * rather than arena bytes a peer that knows better would not take. */
  if (ec->capture_id == 0) return SYMMPIN_REASON_CAPTURE;
  if (symmpin_config_colls_off(cfg) >> a->coll & 1u) return SYMMPIN_REASON_OFF;
  if (!symmpin_kernel_supports(a->coll, a->dtype, a->op)) return SYMMPIN_REASON_TYPE_OP;
  /* The message: the larger buffer (nranks x count for the all-gather and reduce-scatter). */
  uint64_t elems = symmpin_coll_send_count(a->coll, a->count, c->nranks);
  uint64_t relems = symmpin_coll_recv_count(a->coll, a->count, c->nranks);
  if (relems > elems) elems = relems;
  if (cfg->max_bytes && elems * symmpin_dtype_size(a->dtype) > cfg->max_bytes)
    return SYMMPIN_REASON_TOO_LARGE;
  size_t need =
      symmpin_kernel_slot_bytes(a->coll, a->count, a->dtype, c->nranks, SYMMPIN_INPUT_STAGED);
  if (!need) return SYMMPIN_REASON_TYPE_OP;
  need = (need + SYMMPIN_PLAN_ALIGNMENT - 1) / SYMMPIN_PLAN_ALIGNMENT * SYMMPIN_PLAN_ALIGNMENT;
  int klass =
      symmpin_kernel_slot_class(a->coll, a->count, a->dtype, c->nranks, SYMMPIN_INPUT_STAGED);
  uint64_t offset = 0;
  if (!arena_slot(arena, plan, ec->capture_id, ec->stream_ord, klass, need, &offset)) {
    if (!arena->full_logged && plan->capture_bytes) {
      arena->full_logged = true;
      SYMMPIN_INFO("comm %d rank %d: the capture arena (%llu bytes, SYMMPIN_CAPTURE_BYTES) is "
                   "full: collectives captured from now on go to NCCL",
                   c->ordinal, c->rank, (unsigned long long)plan->capture_bytes);
    }
    return SYMMPIN_REASON_CAPTURE;
  }
  symmpin_stats_set_capture(c, plan->capture_bytes, arena->used);
  *out = (symmpin_plan_site){.site = ec->site,
                             .count = a->count,
                             .dtype = a->dtype,
                             .op = a->op,
                             .pinned = true,
                             .offset = offset,
                             .slot_bytes = need,
                             .stream_ord = ec->stream_ord,
                             .epoch = plan->epoch};
  return SYMMPIN_REASON_NONE;
}
