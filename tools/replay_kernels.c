/* What the replay asks the kernels: slot sizes, support and variants, through the kernels' own
 * host functions (staged form, as the preload plans), so the replay sizes slots exactly as the
 * library does. planner/ cannot call kernels/ (arrows point one way), so this binding lives with
 * the tool. */
#include "planner/replay.h"

#include "kernels/layout.h"
#include "kernels/oneshot.h"

int symmpin_replay_variant(size_t count, int dtype, int nranks) {
  return (int)symmpin_oneshot_variant_for(count, dtype, nranks, SYMMPIN_FORM_STAGED);
}

int symmpin_replay_variants(void) { return SYMMPIN_ONESHOT_VARIANT_COUNT; }

const char *symmpin_replay_variant_name(int variant) {
  switch ((symmpin_oneshot_variant)variant) {
  case SYMMPIN_ONESHOT_LL: return "LL";
  case SYMMPIN_ONESHOT_COPY: return "copy";
  case SYMMPIN_ONESHOT_DIRECT: return "direct";
  default: return NULL;
  }
}

size_t symmpin_replay_slot_bytes(size_t count, int dtype, int nranks, void *ctx) {
  (void)ctx;
  return symmpin_oneshot_slot_bytes(count, dtype, nranks, SYMMPIN_FORM_STAGED);
}

bool symmpin_replay_supports(int dtype, int op, void *ctx) {
  (void)ctx;
  return symmpin_oneshot_supports(dtype, op);
}

const char *symmpin_replay_slot_source(void) { return "kernels"; }
