/* FAKE for CPU tests: a stand-in for libcudart.so.13 (same soname, same symbol version node) so
 * that test programs run on machines without a GPU, with libsymmpin.so preloaded or not. "Device"
 * memory is host memory and nothing runs. Kernel registration (__cudaRegister*) is accepted and
 * ignored.
 *
 * Like the real runtime it sits on the driver: it links the fake libcuda.so.1 of this folder
 * (fake_cuda.c) and keeps no device state of its own. cudaSetDevice makes the device's primary
 * context current on the thread, cudaGetDevice reads the current context (0 when none), the
 * capture switch and cudaDriverGetVersion (SYMMPIN_TEST_DRIVER_VERSION, default 13000) are the
 * fake driver's: what symmpin, which asks the driver, sees is what the program sees here. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "fake_control.h"
#include "fake_counters.h"

static fake_counters counters = FAKE_COUNTERS_INIT;
static int nested;
static __thread int in_malloc;
static __thread cudaError_t last_error;

void fake_cuda_fail_next(const char *fn, int rc) { fake_fail_next(&counters, fn, rc); }
long fake_cuda_count(const char *fn) { return fake_count(&counters, fn); }
void fake_cuda_set_nested(int on) { __atomic_store_n(&nested, on, __ATOMIC_SEQ_CST); }
void fake_cuda_set_capturing(int on) { fake_cu_set_capturing(on); }

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

/* Not counted (no lock): a program may ask it on every call, and bench_passthrough should
 * measure symmpin, not the fake's bookkeeping. The current context's device, 0 when none. */
cudaError_t cudaGetDevice(int *dev) {
  *dev = fake_cu_current_device();
  return cudaSuccess;
}

/* The device's primary context becomes the thread's current one (the runtime since CUDA 12). */
cudaError_t cudaSetDevice(int dev) {
  fake_enter(&counters, "cudaSetDevice");
  if (fake_cu_set_device(dev) != CUDA_SUCCESS) return fail(cudaErrorInvalidDevice);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *n) {
  fake_enter(&counters, "cudaGetDeviceCount");
  *n = fake_cu_device_count();
  return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *status,
                                     unsigned long long *id, cudaGraph_t *graph,
                                     const cudaGraphNode_t **deps,
                                     const cudaGraphEdgeData **edges, size_t *ndeps) {
  (void)stream;
  if (!status) return fail(cudaErrorInvalidValue);
  int on = fake_cu_capturing();
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

/* The driver's answer, as the real runtime gives it. */
cudaError_t cudaDriverGetVersion(int *v) {
  if (!v) return fail(cudaErrorInvalidValue);
  return cuDriverGetVersion(v) == CUDA_SUCCESS ? cudaSuccess : fail(cudaErrorUnknown);
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
