/* Slot sizes for the replay: the kernels' host functions (kernels/oneshot.h, staged form, as the
 * preload plans) when the build provides them, else a stand-in.
 * TODO(kernels): the stand-in below mirrors the LL layout described in docs/design.md (a flag word
 * per 8-byte value, one buffer per epoch parity, per rank, plus a control line); delete it once
 * kernels/geometry.c is always part of the build. */
#include "planner/replay.h"

#ifdef SYMMPIN_REPLAY_KERNELS
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

#else

int symmpin_replay_variant(size_t count, int dtype, int nranks) {
  (void)count, (void)dtype, (void)nranks;
  return 0;
}

int symmpin_replay_variants(void) { return 1; }

const char *symmpin_replay_variant_name(int variant) {
  (void)variant;
  return NULL;
}

size_t symmpin_replay_slot_bytes(size_t count, int dtype, int nranks, void *ctx) {
  (void)ctx;
  size_t esize = symmpin_dtype_size(dtype);
  if (esize == 0 || nranks < 1 || nranks > 8) return 0;
  size_t lines = (count * esize + 7) / 8; /* 8 data bytes + 8 flag bytes per LL line */
  size_t bytes = 2 * (size_t)nranks * lines * 16 + 256;
  return (bytes + 255) & ~(size_t)255;
}

bool symmpin_replay_supports(int dtype, int op, void *ctx) {
  (void)ctx;
  return dtype >= 0 && dtype < SYMMPIN_DTYPE_COUNT && op >= 0 && op < SYMMPIN_OP_COUNT;
}

const char *symmpin_replay_slot_source(void) { return "stand-in"; }

#endif
