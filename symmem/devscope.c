/* Device scopes (devscope.h). */
#include "symmem/devscope.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>

static CUresult (*get_current)(CUcontext *);
static CUresult (*set_current)(CUcontext);
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void resolve(void) {
  enum cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", (void **)&get_current, 12000,
                                       cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    get_current = NULL;
  if (cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", (void **)&set_current, 12000,
                                       cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    set_current = NULL;
  (void)cudaGetLastError();
}

static bool gone(cudaError_t e) {
  return e == cudaErrorCudartUnloading || e == cudaErrorContextIsDestroyed;
}

symmpin_status symmpin_devscope_enter(int device, symmpin_devscope *s, bool *runtime_gone) {
  pthread_once(&once, resolve);
  if (runtime_gone) *runtime_gone = false;
  s->prev_ctx = NULL;
  s->switched = false;
  CUcontext ctx = NULL;
  if (get_current && get_current(&ctx) != CUDA_SUCCESS) ctx = NULL;
  int cur = -1;
  /* Without a context, cudaGetDevice still answers (0): compare only when there is one. */
  cudaError_t e = ctx ? cudaGetDevice(&cur) : cudaSuccess;
  if (e == cudaSuccess && (!ctx || cur != device)) {
    e = cudaSetDevice(device);
    s->switched = e == cudaSuccess;
  }
  if (e != cudaSuccess) {
    if (runtime_gone) *runtime_gone = gone(e);
    (void)cudaGetLastError();
    return SYMMPIN_ERR_CUDA;
  }
  s->prev_ctx = ctx;
  enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&m);
  s->prev_mode = (int)m;
  return SYMMPIN_OK;
}

void symmpin_devscope_leave(symmpin_devscope *s) {
  enum cudaStreamCaptureMode m = (enum cudaStreamCaptureMode)s->prev_mode;
  (void)cudaThreadExchangeStreamCaptureMode(&m);
  if (s->switched && set_current) (void)set_current((CUcontext)s->prev_ctx);
}
