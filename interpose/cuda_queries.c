/* symmpin's own CUDA questions and the CPU tests' seam (cuda_queries.h). */
#include "interpose/cuda_queries.h"

#include <dlfcn.h>
#include <pthread.h>

#include "common/log.h"
#include "interpose/real.h"

/* symmpin's own runtime (the static copy: these calls bind inside libsymmpin at link time). */
symmpin_cuda_queries symmpin_cuda = {
    .get_device = cudaGetDevice,
    .stream_get_capture_info = cudaStreamGetCaptureInfo,
    .driver_get_version = cudaDriverGetVersion,
    .get_device_count = cudaGetDeviceCount,
    .get_device_properties = cudaGetDeviceProperties,
    .device_can_access_peer = cudaDeviceCanAccessPeer,
    .get_last_error = cudaGetLastError,
    .peek_at_last_error = cudaPeekAtLastError,
    .get_error_name = cudaGetErrorName,
};

static bool faked;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The program's function `name` into *slot, where it has one. */
#define FROM_PROGRAM(slot, name)                                                                   \
  do {                                                                                             \
    void *p_ = symmpin_real_lookup(SYMMPIN_REAL_CUDART, name);                                     \
    if (p_) *(void **)&(slot) = p_;                                                                \
  } while (0)

static void decide(void) {
  if (!dlsym(RTLD_DEFAULT, SYMMPIN_CUDA_QUERIES_SEAM_MARKER)) return;
  faked = true;
  FROM_PROGRAM(symmpin_cuda.get_device, "cudaGetDevice");
  FROM_PROGRAM(symmpin_cuda.stream_get_capture_info, "cudaStreamGetCaptureInfo");
  FROM_PROGRAM(symmpin_cuda.driver_get_version, "cudaDriverGetVersion");
  FROM_PROGRAM(symmpin_cuda.get_device_count, "cudaGetDeviceCount");
  FROM_PROGRAM(symmpin_cuda.get_device_properties, "cudaGetDeviceProperties");
  FROM_PROGRAM(symmpin_cuda.device_can_access_peer, "cudaDeviceCanAccessPeer");
  FROM_PROGRAM(symmpin_cuda.get_last_error, "cudaGetLastError");
  FROM_PROGRAM(symmpin_cuda.peek_at_last_error, "cudaPeekAtLastError");
  FROM_PROGRAM(symmpin_cuda.get_error_name, "cudaGetErrorName");
  SYMMPIN_TRACE("FAKE CUDA runtime in this process (%s): symmpin's own CUDA questions go to it",
                SYMMPIN_CUDA_QUERIES_SEAM_MARKER);
}

void symmpin_cuda_queries_init(void) { pthread_once(&once, decide); }

bool symmpin_cuda_queries_faked(void) {
  symmpin_cuda_queries_init();
  return faked;
}
