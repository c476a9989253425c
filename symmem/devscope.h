/* Running CUDA calls on a given device from any thread, and leaving the thread exactly as it was.
 *
 * symmpin works on threads it does not own: the program's threads (which may have another device
 * current, or be capturing a CUDA graph) and its own watch thread (which has no device at all).
 * The scope saves the thread's current context (possibly none), makes the device's primary
 * context current (retained once per process, as the CUDA runtime does for cudaSetDevice: the
 * same context the program's runtime uses) and puts the saved one back on leave; a thread that
 * had no context has none again. It also relaxes the thread's stream-capture mode, so that
 * another thread's capture in global mode is neither broken by symmpin's calls nor breaks them.
 * All through the driver (driver/cu.h). */
#ifndef SYMMPIN_SYMMEM_DEVSCOPE_H
#define SYMMPIN_SYMMEM_DEVSCOPE_H

#include <stdbool.h>

#include "common/types.h"

typedef struct symmpin_devscope {
  void *prev_ctx;  /* CUcontext current before, NULL if none */
  int prev_mode;   /* CUstreamCaptureMode before */
  bool switched;   /* the device was changed */
} symmpin_devscope;

/* Make `device` current (its primary context) with capture mode relaxed. SYMMPIN_ERR_CUDA if the
 * device cannot be made current (the capture mode is relaxed even then: call abandon());
 * *runtime_gone (if not NULL) says whether that is because the process is exiting (the driver
 * is shutting down: nothing to do, nothing to log). Logs nothing above INFO (the failed CUDA call:
 * driver/check.h); the caller says what the failure means. */
symmpin_status symmpin_devscope_enter(int device, symmpin_devscope *s, bool *runtime_gone);
/* The same with the device's primary context current even where the thread has a context of
 * its own on that device: for what must outlive any context of the program's (host memory the
 * kernels write into, reused by later communicators). */
symmpin_status symmpin_devscope_enter_primary(int device, symmpin_devscope *s);
/* Put the thread back as it was before a successful enter. */
void symmpin_devscope_leave(symmpin_devscope *s);
/* After a failed enter: the capture mode back (the device was not changed). */
void symmpin_devscope_abandon(symmpin_devscope *s);

#endif
