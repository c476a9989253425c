/* TEMPORARY compatibility header (issue 9): the names kernels/allreduce.h had before the rename,
 * kept only so that preload/engine.c and tests/gpu/bench.c build until they switch. Include
 * kernels/allreduce.h in new code; this file (and kernels/layout.h) goes once nothing includes it.
 *
 *   symmpin_oneshot_call / _launch   -> symmpin_kernel_call / symmpin_kernel_launch
 *                                       (field form -> input)
 *   symmpin_oneshot_form, SYMMPIN_FORM_STAGED / _DIRECT
 *                                    -> symmpin_kernel_input, SYMMPIN_INPUT_STAGED / _IN_SLOT
 *   symmpin_oneshot_error            -> symmpin_kernel_error
 *   symmpin_oneshot_slot_bytes       -> symmpin_kernel_slot_bytes
 *   symmpin_oneshot_supports         -> symmpin_kernel_supports
 *   symmpin_oneshot_direct_data_offset -> symmpin_kernel_in_slot_offset
 *   SYMMPIN_MAX_RANKS                -> SYMMPIN_KERNEL_MAX_RANKS */
#ifndef SYMMPIN_KERNELS_ONESHOT_H
#define SYMMPIN_KERNELS_ONESHOT_H

#include <string.h>

#include "kernels/allreduce.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef SYMMPIN_MAX_RANKS
#define SYMMPIN_MAX_RANKS SYMMPIN_KERNEL_MAX_RANKS
#endif

typedef symmpin_kernel_input symmpin_oneshot_form;
#define SYMMPIN_FORM_STAGED SYMMPIN_INPUT_STAGED
#define SYMMPIN_FORM_DIRECT SYMMPIN_INPUT_IN_SLOT

typedef symmpin_kernel_error symmpin_oneshot_error;

/* The old call, field for field (callers initialize `.form` by name). */
typedef struct symmpin_oneshot_call {
  void *slot[SYMMPIN_KERNEL_MAX_RANKS];
  size_t slot_bytes;
  int rank, nranks;
  const void *send;
  void *recv;
  size_t count;
  int dtype;
  int op;
  symmpin_oneshot_form form;
  uint64_t site;
  uint64_t timeout_cycles;
  symmpin_oneshot_error *error;
} symmpin_oneshot_call;

static inline symmpin_status symmpin_oneshot_launch(const symmpin_oneshot_call *c, void *stream) {
  if (!c) return symmpin_kernel_launch(NULL, stream);
  symmpin_kernel_call k;
  memcpy(k.slot, c->slot, sizeof k.slot);
  k.slot_bytes = c->slot_bytes;
  k.rank = c->rank;
  k.nranks = c->nranks;
  k.send = c->send;
  k.recv = c->recv;
  k.count = c->count;
  k.dtype = c->dtype;
  k.op = c->op;
  k.input = c->form;
  k.site = c->site;
  k.timeout_cycles = c->timeout_cycles;
  k.error = c->error;
  return symmpin_kernel_launch(&k, stream);
}

static inline size_t symmpin_oneshot_slot_bytes(size_t count, int dtype, int nranks,
                                                symmpin_oneshot_form form) {
  return symmpin_kernel_slot_bytes(count, dtype, nranks, form);
}

static inline bool symmpin_oneshot_supports(int dtype, int op) {
  return symmpin_kernel_supports(dtype, op);
}

static inline size_t symmpin_oneshot_direct_data_offset(void) {
  return symmpin_kernel_in_slot_offset();
}

#ifdef __cplusplus
}
#endif

#endif
