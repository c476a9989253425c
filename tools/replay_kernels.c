/* What the replay asks the kernels: slot sizes, support and slot classes, through the kernels' own
 * public host functions (kernels/allreduce.h, staged input, as the preload plans), so the replay
 * sizes and separates slots exactly as the library does. planner/ cannot call kernels/ (arrows
 * point one way), so this binding lives with the tool. */
#include "planner/replay.h"

#include "kernels/allreduce.h"

int symmpin_replay_variant(size_t count, int dtype, int nranks) {
  return symmpin_kernel_slot_class(count, dtype, nranks, SYMMPIN_INPUT_STAGED);
}

int symmpin_replay_variants(void) { return SYMMPIN_KERNEL_SLOT_CLASSES; }

const char *symmpin_replay_variant_name(int variant) {
  return symmpin_kernel_slot_class_name(variant);
}

size_t symmpin_replay_slot_bytes(size_t count, int dtype, int nranks, void *ctx) {
  (void)ctx;
  return symmpin_kernel_slot_bytes(count, dtype, nranks, SYMMPIN_INPUT_STAGED);
}

bool symmpin_replay_supports(int dtype, int op, void *ctx) {
  (void)ctx;
  return symmpin_kernel_supports(dtype, op);
}

const char *symmpin_replay_slot_source(void) { return "kernels"; }
