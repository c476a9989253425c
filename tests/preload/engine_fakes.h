/* FAKE for CPU tests: what preload/engine.c calls outside itself, in one process where threads play
 * the ranks (tests/preload/test_engine.c):
 *  - the CUDA driver (driver/cu.h): the table symmpin_cu filled with fake functions, and
 *    symmpin_cu_open/usable/error_name (no libcuda, no driver/cu.c): a driver for CUDA 13.0 that
 *    serves symmpin. Contexts are per thread, as the driver's: a thread starts with none; each
 *    device has one primary context (what the program's cudaSetDevice makes current, and what
 *    cuDevicePrimaryCtxRetain returns); a program may have contexts of its own. Events, stream
 *    waits and kernel launches are logged per thread with the device of the context current for
 *    them; nothing runs, every event has completed (unless a test says otherwise); what needs a
 *    current context (creating events, recording, waiting, launching, host allocations) fails
 *    with CUDA_ERROR_INVALID_CONTEXT without one, as the driver does. A stream that captures
 *    captures a graph of its own, whose user objects a test can destroy. The driver keeps no
 *    "last error": the thread's state a program can see is its current context and capture mode;
 *  - symmem's pool: host memory, one region per rank, "exported" as its address (the ranks share
 *    the process, so a peer's region is mapped by using that address);
 *  - the kernels' launch (one call or a group): logged per thread with the slot's offset in the
 *    rank's pool, nothing runs (select.c, the kernels' host logic, is the real one);
 *  - the host table (the current context's device per thread, 0 without one as the program's
 *    cudaGetDevice answers; no stream captures) and the banner's probe (a tested NCCL, a driver
 *    for CUDA 13.0 that symmpin opened).
 * The real GPU side is proven by the GPU suite; this proves the engine's decisions. */
#ifndef SYMMPIN_TESTS_PRELOAD_ENGINE_FAKES_H
#define SYMMPIN_TESTS_PRELOAD_ENGINE_FAKES_H

#include <stddef.h>
#include <stdint.h>

typedef enum fake_op_kind { FAKE_LAUNCH, FAKE_GROUP, FAKE_RECORD, FAKE_WAIT } fake_op_kind;

typedef struct fake_op {
  fake_op_kind kind;
  void *stream;    /* where it was enqueued */
  void *event;     /* RECORD, WAIT */
  int64_t offset;  /* LAUNCH: the slot's offset in this rank's pool; GROUP: the first call's */
  size_t count;    /* LAUNCH; GROUP: the calls in the launch */
  int coll;        /* LAUNCH: the call's collective (common/types.h); GROUP: the first call's */
  size_t slot_bytes; /* LAUNCH: the slot's size the call was given */
  int device;      /* the device of the context current when it was enqueued */
  int primary;     /* that context was the device's primary context (1) or the program's own (0) */
} fake_op;

#define FAKE_MAX_OPS 4096
#define FAKE_DEVICES 8

/* This thread's log since the last fake_ops_clear. */
const fake_op *fake_ops(size_t *n);
void fake_ops_clear(void);

/* The next kernel launch on this thread fails (SYMMPIN_ERR_CUDA), once, as a failed
 * cuLaunchKernelEx does (its CUresult is returned; the driver keeps no error for later). */
void fake_fail_next_launch(void);

/* Contexts (CUcontext). fake_ctx_primary: device's primary context, what the program's
 * cudaSetDevice(device) makes current; fake_ctx_own: a context the program made itself on device
 * (cuCtxCreate), another than the primary. fake_ctx_set makes one current on this thread (NULL:
 * none, a thread that never made a CUDA call), as the program would; fake_ctx_get reads it. */
void *fake_ctx_primary(int device);
void *fake_ctx_own(int device);
void fake_ctx_set(void *ctx);
void *fake_ctx_get(void);
/* This thread's stream-capture mode (a CUstreamCaptureMode; a thread starts in global mode). */
void fake_set_capture_mode(int mode);
int fake_capture_mode(void);
/* cuDevicePrimaryCtxRetain calls for device, in the process. */
int fake_primary_retains(int device);
/* Host allocations (cuMemHostAlloc) made while no primary context was current (the program's own
 * context, which the program may destroy with everything allocated in it), in the process. */
int fake_host_allocs_outside_primary(void);

/* What cuEventElapsedTime reports on this thread between two events: kernel_ms when a kernel
 * launch (single or group) was made on this thread between their records, else other_ms (NCCL's
 * call, which the fakes do not run). Default 0.001 ms both. */
void fake_set_elapsed(float kernel_ms, float other_ms);
/* ... but group_ms when a group launch (symmpin_kernel_launch_group) was made between them
 * (0, the default: kernel_ms): a group kernel slower or faster than single ones. */
void fake_set_elapsed_group(float group_ms);

/* cuEventQuery reports every event as not completed yet (1), or completed (0, the default):
 * kernels that are still running, or done. */
void fake_set_events_pending(int pending);
/* Pools created and not destroyed, in the process. */
int fake_pools_live(void);
/* Destroy every CUDA graph that captured a call: their user objects' destructors run. Returns the
 * references the graphs held. */
int fake_destroy_graphs(void);

#endif
