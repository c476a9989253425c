/* FAKE for CPU tests: a stand-in for libcudart.so.13 (same soname, same symbol version node) so
 * that test programs run on machines without a GPU, with libsymmpin.so preloaded or not. "Device"
 * memory is host memory; there is one device per thread (cudaSetDevice) and nothing runs. Kernel
 * registration (__cudaRegister*) is accepted and ignored.
 *
 * It also defines the marker of symmpin's test seam (interpose/cuda_queries.h): in a process that
 * loaded this fake, symmpin asks its own CUDA questions outside the engine (current device,
 * capture state, driver version, the banner's GPU facts) of this fake instead of its own static
 * runtime, which on a machine without a GPU could only fail. The answers below are the fake's:
 * the driver version is SYMMPIN_TEST_DRIVER_VERSION (default 13000, CUDA 13.0). */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "fake_control.h"
#include "fake_counters.h"

/* The seam's marker: its presence is what symmpin looks for (the value is not read). */
int symmpin_test_fake_cudart = 1;

static fake_counters counters = FAKE_COUNTERS_INIT;
static int nested;
static int capturing;
static __thread int current_device;
static __thread int in_malloc;
static __thread cudaError_t last_error;

void fake_cuda_fail_next(const char *fn, int rc) { fake_fail_next(&counters, fn, rc); }
long fake_cuda_count(const char *fn) { return fake_count(&counters, fn); }
void fake_cuda_set_nested(int on) { __atomic_store_n(&nested, on, __ATOMIC_SEQ_CST); }
void fake_cuda_set_capturing(int on) { __atomic_store_n(&capturing, on, __ATOMIC_SEQ_CST); }

static cudaError_t fail(cudaError_t rc) {
  last_error = rc;
  return rc;
}

cudaError_t cudaMalloc(void **ptr, size_t size) {
  int rc = fake_enter(&counters, "cudaMalloc");
  if (rc) return fail((cudaError_t)rc);
  if (!ptr) return fail(cudaErrorInvalidValue);
  if (__atomic_load_n(&nested, __ATOMIC_SEQ_CST) && !in_malloc) {
    /* The global cudaMalloc/cudaFree (looked up, so the compiler cannot bind the call to this
     * file's definition): symmpin's wrappers when preloaded, which must not record them. */
    cudaError_t (*g_malloc)(void **, size_t) = (cudaError_t(*)(void **, size_t))dlsym(RTLD_DEFAULT, "cudaMalloc");
    cudaError_t (*g_free)(void *) = (cudaError_t(*)(void *))dlsym(RTLD_DEFAULT, "cudaFree");
    if (!g_malloc || !g_free) return fail(cudaErrorUnknown);
    in_malloc = 1;
    void *inner = NULL;
    cudaError_t irc = g_malloc(&inner, 64);
    if (irc == cudaSuccess) irc = g_free(inner);
    in_malloc = 0;
    if (irc != cudaSuccess) return fail(irc);
  }
  *ptr = calloc(1, size ? size : 1);
  return *ptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void *ptr) {
  int rc = fake_enter(&counters, "cudaFree");
  if (rc) return fail((cudaError_t)rc);
  free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream) {
  (void)stream;
  int rc = fake_enter(&counters, "cudaMallocAsync");
  if (rc) return fail((cudaError_t)rc);
  if (!ptr) return fail(cudaErrorInvalidValue);
  *ptr = calloc(1, size ? size : 1);
  return *ptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
  (void)stream;
  int rc = fake_enter(&counters, "cudaFreeAsync");
  if (rc) return fail((cudaError_t)rc);
  free(ptr);
  return cudaSuccess;
}

/* Not counted (no lock): symmpin asks these on its per-call path, and bench_passthrough should
 * measure symmpin, not the fake's bookkeeping. */
cudaError_t cudaGetDevice(int *dev) {
  *dev = current_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev) {
  fake_enter(&counters, "cudaSetDevice");
  if (dev < 0 || dev >= 8) return fail(cudaErrorInvalidDevice);
  current_device = dev;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *n) {
  fake_enter(&counters, "cudaGetDeviceCount");
  *n = 8;
  return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *status,
                                     unsigned long long *id, cudaGraph_t *graph,
                                     const cudaGraphNode_t **deps,
                                     const cudaGraphEdgeData **edges, size_t *ndeps) {
  (void)stream;
  if (!status) return fail(cudaErrorInvalidValue);
  int on = __atomic_load_n(&capturing, __ATOMIC_SEQ_CST);
  *status = on ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  if (id) *id = on ? 1 : 0;
  if (graph) *graph = NULL;
  if (deps) *deps = NULL;
  if (edges) *edges = NULL;
  if (ndeps) *ndeps = 0;
  return cudaSuccess;
}

/* The program's runtime version, as the banner names it (distinct from symmpin's own 13.0, so a
 * test sees which one a line reports). */
cudaError_t cudaRuntimeGetVersion(int *v) {
  *v = 13010;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v) {
  const char *s = getenv("SYMMPIN_TEST_DRIVER_VERSION");
  *v = s ? atoi(s) : 13000;
  return cudaSuccess;
}

/* No GPU facts: the banner reads them as unknown (tests/compat's shim gives some). */
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device) {
  (void)p, (void)device;
  return fail(cudaErrorNotSupported);
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer) {
  (void)can, (void)device, (void)peer;
  return fail(cudaErrorNotSupported);
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char *cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error (fake)" : "fake CUDA error";
}

const char *cudaGetErrorName(cudaError_t e) {
  return e == cudaSuccess ? "cudaSuccess" : "cudaErrorFake";
}

/* Kernel registration that nvcc-generated constructors run at load time. */
static void *fake_fatbin_handle;

void **__cudaRegisterFatBinary(void *fatCubin) {
  (void)fatCubin;
  return &fake_fatbin_handle;
}

void __cudaRegisterFatBinaryEnd(void **handle) { (void)handle; }
void __cudaUnregisterFatBinary(void **handle) { (void)handle; }

void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int threadLimit, void *tid, void *bid,
                            void *bDim, void *gDim, int *wSize) {
  (void)handle, (void)hostFun, (void)deviceFun, (void)deviceName, (void)threadLimit;
  (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
}

void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName,
                       int ext, size_t size, int constant, int global) {
  (void)handle, (void)hostVar, (void)deviceAddress, (void)deviceName;
  (void)ext, (void)size, (void)constant, (void)global;
}
