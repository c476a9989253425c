/* Device scopes (devscope.h). */
#include "symmem/devscope.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "symmem/cuda_check.h"

static CUresult (*get_current)(CUcontext *);
static CUresult (*set_current)(CUcontext);
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void resolve(void) {
  enum cudaDriverEntryPointQueryResult q;
  if (SYMMPIN_CUDA_IGNORE(cudaGetDriverEntryPointByVersion(
          "cuCtxGetCurrent", (void **)&get_current, 12000, cudaEnableDefault, &q)) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    get_current = NULL;
  if (SYMMPIN_CUDA_IGNORE(cudaGetDriverEntryPointByVersion(
          "cuCtxSetCurrent", (void **)&set_current, 12000, cudaEnableDefault, &q)) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    set_current = NULL;
}

/* Only the runtime unloading means "the process is exiting": a destroyed context elsewhere is
 * an error of this call, not a reason to treat the device as gone. */
static bool gone(cudaError_t e) { return e == cudaErrorCudartUnloading; }

symmpin_status symmpin_devscope_enter(int device, symmpin_devscope *s, bool *runtime_gone) {
  pthread_once(&once, resolve);
  if (runtime_gone) *runtime_gone = false;
  /* Relaxed first, whatever follows: even a failed scope's caller may query events. */
  enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
  (void)SYMMPIN_CUDA_IGNORE(cudaThreadExchangeStreamCaptureMode(&m));
  s->prev_mode = (int)m;
  s->prev_ctx = NULL;
  s->prev_device = -1;
  s->switched = false;
  bool ctx_api = get_current && set_current;
  CUcontext ctx = NULL;
  if (ctx_api && get_current(&ctx) != CUDA_SUCCESS) ctx = NULL;
  int cur = -1;
  /* Without a context, cudaGetDevice still answers (0): compare only when there is one (or when
   * the driver's context functions are missing: then the device is restored by number). */
  cudaError_t e = ctx || !ctx_api ? SYMMPIN_CUDA_IGNORE(cudaGetDevice(&cur)) : cudaSuccess;
  if (e == cudaSuccess && (!ctx_api ? cur != device : !ctx || cur != device)) {
    e = SYMMPIN_CUDA_IGNORE(cudaSetDevice(device));
    s->switched = e == cudaSuccess;
  }
  if (e != cudaSuccess) {
    if (runtime_gone) *runtime_gone = gone(e);
    s->switched = false;
    return SYMMPIN_ERR_CUDA;
  }
  s->prev_ctx = ctx;
  s->prev_device = cur;
  return SYMMPIN_OK;
}

void symmpin_devscope_leave(symmpin_devscope *s) {
  if (s->switched) {
    if (get_current && set_current)
      (void)set_current((CUcontext)s->prev_ctx);
    else if (s->prev_device >= 0)
      (void)SYMMPIN_CUDA_IGNORE(cudaSetDevice(s->prev_device));
  }
  enum cudaStreamCaptureMode m = (enum cudaStreamCaptureMode)s->prev_mode;
  (void)SYMMPIN_CUDA_IGNORE(cudaThreadExchangeStreamCaptureMode(&m));
}

void symmpin_devscope_abandon(symmpin_devscope *s) {
  enum cudaStreamCaptureMode m = (enum cudaStreamCaptureMode)s->prev_mode;
  (void)SYMMPIN_CUDA_IGNORE(cudaThreadExchangeStreamCaptureMode(&m));
}
