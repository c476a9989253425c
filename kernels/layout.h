/* TEMPORARY compatibility header (issue 9): the preload includes this for its sharing class
 * (stream ordinal x kernel variant). The slot-sharing rule is now public, in kernels/allreduce.h:
 *
 *   symmpin_oneshot_variant_for(count, dtype, nranks, SYMMPIN_FORM_STAGED)
 *       -> symmpin_kernel_slot_class(count, dtype, nranks, SYMMPIN_INPUT_STAGED)
 *   SYMMPIN_ONESHOT_VARIANT_COUNT -> SYMMPIN_KERNEL_SLOT_CLASSES
 *
 * Same numbers as before (LL 0, copy 1, in-slot 2 of 3). The slot layout itself moved to
 * kernels/oneshot_layout.h, private to kernels/. This file goes once the preload stops including
 * it. */
#ifndef SYMMPIN_KERNELS_LAYOUT_H
#define SYMMPIN_KERNELS_LAYOUT_H

#include "kernels/allreduce.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SYMMPIN_ONESHOT_VARIANT_COUNT SYMMPIN_KERNEL_SLOT_CLASSES

static inline int symmpin_oneshot_variant_for(size_t count, int dtype, int nranks, int form) {
  return symmpin_kernel_slot_class(count, dtype, nranks, (symmpin_kernel_input)form);
}

#ifdef __cplusplus
}
#endif

#endif
