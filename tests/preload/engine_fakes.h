/* FAKE for CPU tests: what preload/engine.c calls outside itself, in one process where threads play
 * the ranks (tests/preload/test_engine.c):
 *  - the CUDA runtime functions the engine uses: events and stream waits are logged per thread,
 *    nothing runs, every event has completed (unless a test says otherwise); a stream that
 *    captures captures a graph of its own, whose user objects a test can destroy; the thread's
 *    last error is kept as the runtime keeps it;
 *  - symmem's pool: host memory, one region per rank, "exported" as its address (the ranks share
 *    the process, so a peer's region is mapped by using that address);
 *  - the kernels' launch (one call or a group): logged per thread with the slot's offset in the
 *    rank's pool, nothing runs (select.c, the kernels' host logic, is the real one);
 *  - the host table (current device per thread; no stream captures) and the banner's probe
 *    (a tested NCCL, a driver that runs symmpin's own CUDA runtime).
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
} fake_op;

#define FAKE_MAX_OPS 4096

/* This thread's log since the last fake_ops_clear. */
const fake_op *fake_ops(size_t *n);
void fake_ops_clear(void);

/* The next kernel launch on this thread fails (SYMMPIN_ERR_CUDA), once, leaving its CUDA error on
 * the thread as cudaLaunchKernelEx does. */
void fake_fail_next_launch(void);

/* This thread's last CUDA error (what cudaGetLastError would return), as an int: a test sets it
 * to play an error of the program's own that is pending when it calls NCCL, and reads it after.
 * Fake calls that fail set it, as the runtime does. */
void fake_set_last_error(int err);
int fake_last_error(void);

/* What cudaEventElapsedTime reports on this thread between two events: kernel_ms when a kernel
 * launch (single or group) was made on this thread between their records, else other_ms (NCCL's
 * call, which the fakes do not run). Default 0.001 ms both. */
void fake_set_elapsed(float kernel_ms, float other_ms);
/* ... but group_ms when a group launch (symmpin_kernel_launch_group) was made between them
 * (0, the default: kernel_ms): a group kernel slower or faster than single ones. */
void fake_set_elapsed_group(float group_ms);

/* cudaEventQuery reports every event as not completed yet (1), or completed (0, the default):
 * kernels that are still running, or done. */
void fake_set_events_pending(int pending);
/* Pools created and not destroyed, in the process. */
int fake_pools_live(void);
/* Destroy every CUDA graph that captured a call: their user objects' destructors run. Returns the
 * references the graphs held. */
int fake_destroy_graphs(void);

#endif
