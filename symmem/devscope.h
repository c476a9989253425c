/* Running CUDA calls on a given device from any thread, and leaving the thread exactly as it was.
 *
 * symmpin works on threads it does not own: the program's threads (which may have another device
 * current, or be capturing a CUDA graph) and its own watch thread (which has no device at all).
 * Restoring with cudaSetDevice(previous) would be wrong for a thread that had no context: since
 * CUDA 12 cudaSetDevice creates the device's primary context, so a thread that never chose a
 * device would end up with a context on GPU 0 -- in every process of an 8-GPU job. So the scope
 * saves the thread's current context (the driver's cuCtxGetCurrent, possibly none) and puts it
 * back with cuCtxSetCurrent; it also relaxes the thread's stream-capture mode, so that another
 * thread's capture in global mode is neither broken by symmpin's calls nor breaks them.
 * One difference remains for a thread that had no context: the runtime may remember the scope's
 * device as the thread's device, so a later implicit initialization on that thread (none of
 * symmpin's threads makes one) would pick that device rather than 0. */
#ifndef SYMMPIN_SYMMEM_DEVSCOPE_H
#define SYMMPIN_SYMMEM_DEVSCOPE_H

#include <stdbool.h>

#include "common/types.h"

typedef struct symmpin_devscope {
  void *prev_ctx;  /* CUcontext current before, NULL if none */
  int prev_device; /* the device before, when the driver's context functions are missing */
  int prev_mode;   /* enum cudaStreamCaptureMode */
  bool switched;   /* the device was changed */
} symmpin_devscope;

/* Make `device` current (its primary context) with capture mode relaxed. SYMMPIN_ERR_CUDA if the
 * device cannot be made current (the capture mode is relaxed even then: call abandon());
 * *runtime_gone (if not NULL) says whether that is because the process is exiting (the runtime
 * is unloading: nothing to do, nothing to log). Logs nothing above INFO (the failed CUDA call:
 * symmem/cuda_check.h); the caller says what the failure means. */
symmpin_status symmpin_devscope_enter(int device, symmpin_devscope *s, bool *runtime_gone);
/* Put the thread back as it was before a successful enter. */
void symmpin_devscope_leave(symmpin_devscope *s);
/* After a failed enter: the capture mode back (the device was not changed). */
void symmpin_devscope_abandon(symmpin_devscope *s);

#endif
