/* The collectives' kernels on a symmetric slot (all-reduce, all-gather, reduce-scatter: common/
 * types.h's SYMMPIN_COLLS): the whole contract between kernels/ and its callers.
 *
 * A "slot" is the same byte range [offset, offset + slot_bytes) of every rank's symmetric pool.
 * The caller passes where that range sits in every rank's pool as mapped in this process
 * (slot[r] for rank r; slot[rank] is the local one). What a slot holds (data, LL lines, flags,
 * epoch counters) belongs to this module alone; callers size slots with
 * symmpin_kernel_slot_bytes(), zero them once when the pool is created, and keep calls of
 * different slot classes apart.
 *
 * Algorithms. The kernels choose the algorithm of a call from its shape (a pure function, the same
 * on every rank): the one-shot family (every rank loads every rank's whole input and reduces all of
 * it: LL, copy, in-slot) for small and mid sizes, two-shot (reduce-scatter then all-gather through
 * the slots) for large staged calls; docs/kernels.md. Callers never name an algorithm; they see the
 * one consequence that binds them, the slot class below.
 *
 * Contract for callers:
 * - Calls on one slot must be ordered (one stream, or streams ordered by events): the kernels keep
 *   per-slot epoch counters in device memory, so they stay correct across CUDA-graph replays.
 *   Epochs are per rank: a rank that misses a call on a slot is one epoch behind its peers from
 *   then on; the call_id in every rank's data turns that into a reported mismatch (error), never
 *   a combination of different calls' data.
 * - Calls on different slots may run concurrently on different streams: slots share nothing.
 * - Every rank must call with the same slot, collective, count, datatype, op and input form, in
 *   the same order.
 * - Calls whose slot classes differ must never use the same slot bytes (symmpin_kernel_slot_class).
 *   Within one class the shape (count, dtype, op) may change from call to call on one slot, as long
 *   as slot_bytes covers the largest.
 * - Results are bitwise identical on every rank: each rank reduces the ranks' inputs in rank order
 *   0, 1, ..., n-1 with the same arithmetic (reduce-scatter: each element in that order too, so
 *   the same bits as the all-reduce's element). An all-gather copies bytes.
 *
 * Datatypes and ops are common/types.h's lists (SYMMPIN_DTYPES, SYMMPIN_OPS). Which of them have
 * kernels is decided in one place, kernels/select.h, checked at compile time against the kernel
 * types in kernels/device.cuh; symmpin_kernel_supports() answers from that table, so a datatype
 * added to the list never reads as supported without a kernel type behind it.
 *
 * Plain C header: no CUDA types, so the preload, the tools and the CPU tests can include it. */
#ifndef SYMMPIN_KERNELS_ALLREDUCE_H
#define SYMMPIN_KERNELS_ALLREDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most ranks one call may have (the kernels keep per-rank state in fixed arrays). */
#define SYMMPIN_KERNEL_MAX_RANKS 8

/* Where a call's input comes from. One form per slot: the staged form's staging units and the
 * in-slot form's data area overlap, so they are different slot classes. */
typedef enum symmpin_kernel_input {
  /* `send` is any local device buffer; the kernel moves it into the slot itself. */
  SYMMPIN_INPUT_STAGED = 0,
  /* The input already sits in this rank's slot at symmpin_kernel_in_slot_offset(); `send`
   * unused. */
  SYMMPIN_INPUT_IN_SLOT = 1,
} symmpin_kernel_input;

/* Where a kernel reports a wait that lasted longer than the timeout. Host-mapped memory
 * (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP) so the host can read it without synchronizing. */
typedef struct symmpin_kernel_error {
  volatile uint32_t timed_out; /* 0, or 1 once a block gave up waiting (deadline or abort) */
  volatile int32_t peer;       /* the rank it waited for */
  volatile uint64_t site;      /* the call site of the call that waited */
  /* Written by the host, read by waiting kernels: nonzero makes every wait give up (the
   * communicator is being aborted). Kernels look at it only once a wait has lasted about a
   * millisecond, so it costs nothing when peers are on time. */
  volatile uint32_t abort;
  volatile uint32_t aborted;   /* 1 once a wait gave up because of `abort` */
  /* 1 once a call gave up because a peer's data on its slot, at the same slot epoch, belonged to
   * another call (another call_id): the ranks' calls on that slot are out of step (a rank
   * skipped or repeated one). timed_out is set too (the call gave up). */
  volatile uint32_t mismatch;
} symmpin_kernel_error;

typedef struct symmpin_kernel_call {
  void *slot[SYMMPIN_KERNEL_MAX_RANKS]; /* the slot in every rank's pool, mapped in this process */
  size_t slot_bytes; /* >= symmpin_kernel_slot_bytes(coll, count, dtype, nranks, input) */
  int rank, nranks;
  /* The collective (symmpin_coll; 0, a zeroed call's, is the all-reduce). All-gather: send holds
   * count elements, recv nranks x count (rank r's at r x count); reduce-scatter: send nranks x
   * count, recv count (the reduction of every rank's chunk `rank`). In place, as NCCL's: send ==
   * recv + rank x count elements (all-gather), recv == send + rank x count (reduce-scatter);
   * other overlaps are refused (SYMMPIN_ERR_UNSUPPORTED). Staged input only. */
  int coll;
  const void *send;            /* staged: any local device buffer, any alignment; in-slot: unused */
  void *recv;                  /* any local device buffer, may equal send (in place); in-slot: may
                                * be the slot's own data area (in place in the slot) */
  size_t count;                /* NCCL's count argument (common/types.h, SYMMPIN_COLLS) */
  int dtype;                   /* symmpin_dtype */
  int op;                      /* symmpin_op */
  symmpin_kernel_input input;
  uint64_t site;               /* only for the timeout message */
  /* The call's identity, the same on every rank for the same call (the preload passes the
   * communicator's all-reduce index): every rank's data carries it, so a rank never combines a
   * peer's data of another call that sits on the slot at the same epoch (a rank that skipped a
   * call); it gives up and reports a mismatch instead. Replays of a captured call share it (the
   * slot epoch tells them apart). 0 is a valid identity like any other. */
  uint32_t call_id;
  uint64_t timeout_cycles;     /* 0 = wait forever; else give up after ~this many GPU clocks */
  symmpin_kernel_error *error; /* device-visible pointer to host-mapped memory, or NULL */
} symmpin_kernel_call;

/* Whether the kernels handle this collective, datatype and op at all (user-defined ops never; the
 * all-gather takes every datatype with a kernel and ignores op). */
bool symmpin_kernel_supports(int coll, int dtype, int op);

/* Bytes a slot needs for this call shape (count: NCCL's count argument, common/types.h): a
 * multiple of 256, monotone in count; 0 if unsupported (unknown collective, unknown or kernel-less
 * datatype, nranks outside 1..SYMMPIN_KERNEL_MAX_RANKS, bad input form: all-gather and
 * reduce-scatter are staged only, a count too large). What one rank exposes so that every peer can
 * finish the call: the all-reduce's and reduce-scatter's whole input, the all-gather's chunk (LL:
 * every rank's lines of it). */
size_t symmpin_kernel_slot_bytes(int coll, size_t count, int dtype, int nranks,
                                 symmpin_kernel_input input);

/* Where the in-slot form expects this rank's input inside its own slot (slot[rank] + return). */
size_t symmpin_kernel_in_slot_offset(void);

/* Slot classes: calls whose slot classes differ must never use the same slot bytes. Each
 * algorithm's safety argument for back-to-back calls on a slot (docs/kernels.md) holds among its
 * own calls only, and the staged and in-slot forms use overlapping areas; an LL call then a copy
 * call on one slot timed out on the GPU. A pure function of the shape, the same on every rank,
 * always in [0, SYMMPIN_KERNEL_SLOT_CLASSES), also for shapes the kernels refuse (such calls are
 * never given a slot, so their class only has to be a valid number). */
#define SYMMPIN_KERNEL_SLOT_CLASSES 4
int symmpin_kernel_slot_class(int coll, size_t count, int dtype, int nranks,
                              symmpin_kernel_input input);
/* A class's name for reports ("LL", "copy", "in-slot", "two-shot"); NULL outside the range. */
const char *symmpin_kernel_slot_class_name(int slot_class);

/* Enqueue the call on `stream` (a cudaStream_t) on the current device, which must be the
 * device of slot[rank]. One kernel launch, no host synchronization; capturable into a CUDA graph.
 * Returns SYMMPIN_ERR_INVALID or SYMMPIN_ERR_UNSUPPORTED without launching anything, or
 * SYMMPIN_ERR_CUDA if the launch failed; each logged once (docs/kernels.md lists the cases).
 * count == 0 returns SYMMPIN_OK without launching (every rank skips alike). */
symmpin_status symmpin_kernel_launch(const symmpin_kernel_call *call, void *stream);

/* The most calls one group launch takes. */
#define SYMMPIN_KERNEL_GROUP_MAX 16

/* Enqueue n calls (1 <= n <= SYMMPIN_KERNEL_GROUP_MAX) as ONE kernel launch on `stream`, as
 * NCCL runs an ncclGroupStart/End: every call staged, the reducing ones (all-reduce,
 * reduce-scatter) all of one datatype and one op (all-gathers join any group), each on its own slot
 * (no two calls' slots overlap: the calls run at the same time; each slot's calls stay ordered, as
 * for symmpin_kernel_launch). Each call's result is bitwise what its own launch gives. Every rank
 * must make the same group. Calls with count 0 are left out. Refuses (launching nothing) what
 * symmpin_kernel_launch refuses, and reducing calls of mixed datatypes or ops, input forms other
 * than staged, and overlapping slots (SYMMPIN_ERR_INVALID). */
symmpin_status symmpin_kernel_launch_group(const symmpin_kernel_call *calls, int n, void *stream);

/* Whether the kernels can run on the current CUDA device: the library carries code for the GPU
 * generations it was built for (meson options gpu_archs, gpu_ptx) and no other. SYMMPIN_ERR_UNSUPPORTED (with
 * the reason in why) for any other GPU: the caller keeps every call on NCCL instead of launching
 * kernels that would fail. Logs nothing (an expected outcome the caller reports once). */
symmpin_status symmpin_kernel_device_check(char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
