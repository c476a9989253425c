/* Device scopes (devscope.h). */
#include "symmem/devscope.h"

#include <pthread.h>

#include "driver/check.h"

/* Each device's primary context, retained once per process and never released, as the CUDA
 * runtime does: releasing it could destroy the context that holds symmpin's mappings while a
 * peer still uses them. The program's runtime retains the same context for its cudaSetDevice. */
#define DEVSCOPE_MAX_DEVICES 64
static CUcontext primary[DEVSCOPE_MAX_DEVICES];
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult primary_context(int device, CUcontext *ctx) {
  if (device < 0 || device >= DEVSCOPE_MAX_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&primary_lock);
  CUresult e = CUDA_SUCCESS;
  if (!primary[device]) {
    CUdevice dev;
    e = SYMMPIN_CUDA_IGNORE(symmpin_cu.DeviceGet(&dev, device));
    if (e == CUDA_SUCCESS)
      e = SYMMPIN_CUDA_IGNORE(symmpin_cu.DevicePrimaryCtxRetain(&primary[device], dev));
    if (e != CUDA_SUCCESS) primary[device] = NULL;
  }
  *ctx = primary[device];
  pthread_mutex_unlock(&primary_lock);
  return e;
}

static symmpin_status enter(int device, symmpin_devscope *s, bool *runtime_gone, bool primary_only);

symmpin_status symmpin_devscope_enter(int device, symmpin_devscope *s, bool *runtime_gone) {
  return enter(device, s, runtime_gone, false);
}

symmpin_status symmpin_devscope_enter_primary(int device, symmpin_devscope *s) {
  return enter(device, s, NULL, true);
}

static symmpin_status enter(int device, symmpin_devscope *s, bool *runtime_gone,
                            bool primary_only) {
  if (runtime_gone) *runtime_gone = false;
  s->prev_ctx = NULL;
  s->prev_mode = (int)CU_STREAM_CAPTURE_MODE_RELAXED;
  s->switched = false;
  if (!symmpin_cu_usable()) return SYMMPIN_ERR_CUDA;
  /* Relaxed first, whatever follows: even a failed scope's caller may query events. */
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
  (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.ThreadExchangeStreamCaptureMode(&m));
  s->prev_mode = (int)m;
  CUcontext cur = NULL;
  CUresult e = SYMMPIN_CUDA_IGNORE(symmpin_cu.CtxGetCurrent(&cur));
  CUdevice cur_dev = -1;
  if (e == CUDA_SUCCESS && cur) e = SYMMPIN_CUDA_IGNORE(symmpin_cu.CtxGetDevice(&cur_dev));
  CUcontext want = NULL;
  /* The device's primary context, unless the thread has a context of that device current
   * already (a program's own context counts: its streams live there) and any will do. */
  if (e == CUDA_SUCCESS && (!cur || cur_dev != device || primary_only)) {
    e = primary_context(device, &want);
    if (e == CUDA_SUCCESS && want != cur) {
      e = SYMMPIN_CUDA_IGNORE(symmpin_cu.CtxSetCurrent(want));
      s->switched = e == CUDA_SUCCESS;
    }
  }
  if (e != CUDA_SUCCESS) {
    /* Only the driver shutting down means "the process is exiting". */
    if (runtime_gone) *runtime_gone = e == CUDA_ERROR_DEINITIALIZED;
    s->switched = false;
    return SYMMPIN_ERR_CUDA;
  }
  s->prev_ctx = cur;
  return SYMMPIN_OK;
}

void symmpin_devscope_leave(symmpin_devscope *s) {
  if (s->switched) (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.CtxSetCurrent((CUcontext)s->prev_ctx));
  CUstreamCaptureMode m = (CUstreamCaptureMode)s->prev_mode;
  (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.ThreadExchangeStreamCaptureMode(&m));
}

void symmpin_devscope_abandon(symmpin_devscope *s) {
  if (!symmpin_cu_usable()) return;
  CUstreamCaptureMode m = (CUstreamCaptureMode)s->prev_mode;
  (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.ThreadExchangeStreamCaptureMode(&m));
}
