/* One-shot all-reduce kernels on a symmetric slot: the C entry points.
 *
 * A "slot" is the same byte range [offset, offset + slot_bytes) of every rank's symmetric pool.
 * The caller passes where that range sits in every rank's pool as mapped in this process
 * (slot[r] for rank r; slot[rank] is the local one). The layout inside a slot (data, LL lines,
 * flags, epoch counters) belongs to this module alone; callers only size slots with
 * symmpin_oneshot_slot_bytes() and zero them once when the pool is created.
 *
 * Contract for callers:
 * - Calls on one slot must be ordered (one stream, or streams ordered by events): the kernels keep
 *   per-slot epoch counters in device memory, so they stay correct across CUDA-graph replays.
 * - Calls on different slots may run concurrently on different streams: slots share nothing.
 * - Every rank must call with the same slot, count, datatype, op and form, in the same order.
 * - Results are bitwise identical on every rank: each rank reduces the ranks' inputs in rank order
 *   0, 1, ..., n-1 with the same arithmetic.
 *
 * Plain C header: no CUDA types, so the planner-side code and CPU tests can include it. */
#ifndef SYMMPIN_KERNELS_ONESHOT_H
#define SYMMPIN_KERNELS_ONESHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SYMMPIN_MAX_RANKS 8

typedef enum symmpin_oneshot_form {
  /* The kernel first copies the local user buffer `send` into this rank's part of the slot. */
  SYMMPIN_FORM_STAGED = 0,
  /* The input already sits in the slot's data area (symmpin_oneshot_direct_data()); `send` unused. */
  SYMMPIN_FORM_DIRECT = 1,
} symmpin_oneshot_form;

/* Where a kernel reports a barrier that waited longer than the timeout. Host-mapped memory
 * (cudaHostAlloc ... cudaHostAllocMapped) so the host can read it without synchronizing. */
typedef struct symmpin_oneshot_error {
  volatile uint32_t timed_out; /* 0, or 1 once a block gave up waiting */
  volatile int32_t peer;       /* the rank it waited for */
  volatile uint64_t site;      /* the call site of the call that waited */
} symmpin_oneshot_error;

typedef struct symmpin_oneshot_call {
  void *slot[SYMMPIN_MAX_RANKS]; /* the slot in every rank's pool, as mapped in this process */
  size_t slot_bytes;             /* must be >= symmpin_oneshot_slot_bytes(count, dtype, nranks, form) */
  int rank, nranks;
  const void *send;              /* staged: any local device buffer, any alignment; direct: unused */
  void *recv;                    /* any local device buffer, may equal send (in place) */
  size_t count;
  int dtype;                     /* symmpin_dtype */
  int op;                        /* symmpin_op */
  symmpin_oneshot_form form;
  uint64_t site;                 /* only for the timeout message */
  uint64_t timeout_cycles;       /* 0 = wait forever; else give up after ~this many GPU clocks */
  symmpin_oneshot_error *error;  /* device-visible pointer to host-mapped memory, or NULL */
} symmpin_oneshot_call;

/* Bytes a slot needs for this call shape (a multiple of 256). 0 if unsupported. */
size_t symmpin_oneshot_slot_bytes(size_t count, int dtype, int nranks, symmpin_oneshot_form form);

/* Where the direct form expects this rank's input inside its own slot (slot[rank] + return). */
size_t symmpin_oneshot_direct_data_offset(void);

/* Whether the kernels handle this datatype and op at all. */
bool symmpin_oneshot_supports(int dtype, int op);

/* Launch geometry chosen for a call shape (pure host logic, tested on the CPU). */
typedef struct symmpin_oneshot_geometry {
  unsigned blocks, threads;
} symmpin_oneshot_geometry;
symmpin_oneshot_geometry symmpin_oneshot_geometry_for(size_t count, int dtype, int nranks,
                                                      symmpin_oneshot_form form);

/* Enqueue the all-reduce on `stream` (a cudaStream_t) on the current device, which must be the
 * device of slot[rank]. Asynchronous; capturable into a CUDA graph. Returns SYMMPIN_ERR_INVALID or
 * SYMMPIN_ERR_UNSUPPORTED without launching anything, or SYMMPIN_ERR_CUDA if the launch failed. */
symmpin_status symmpin_oneshot_launch(const symmpin_oneshot_call *call, void *stream);

#ifdef __cplusplus
}
#endif

#endif
