/* FAKE for CPU tests: a stand-in for the CUDA driver, libcuda.so.1 (same soname), so that
 * libsymmpin.so, which dlopen()s the driver and takes every function it uses with
 * cuGetProcAddress_v2 at the CUDA 12.0 ABI (driver/cu.h), runs on machines without a GPU.
 *
 * What it stands in for: a machine of 8 GPUs of compute capability 9.0 that has no device to run
 * anything on. Device queries (count, attributes, names, UUIDs), primary contexts (each with an id
 * that never changes) and each thread's current context, the stream-capture state and each thread's
 * capture mode are answered;
 * every function that would touch a device (streams, events, host memory, memset, user objects,
 * modules, launches, virtual memory) returns CUDA_ERROR_NOT_SUPPORTED, so the library falls back
 * to NCCL as it does on a machine whose driver finds no GPU. Peer access is not supported either.
 *
 * What it does not do: run, allocate or copy anything; answer any function outside
 * SYMMPIN_CU_FUNCTIONS (driver/cu.h: a function added there must be added here, or this file does
 * not compile); give any entry point newer than the CUDA 12.0 ABI (a cuGetProcAddress request for
 * a version above 12000 fails with CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, so a library that
 * asks for something newer is caught); export the functions under their own names (only
 * cuDriverGetVersion, cuGetProcAddress_v2, cuGetProcAddress and the fake_cu_* controls of
 * fake_control.h are exported; everything else is reached through cuGetProcAddress).
 *
 * cuGetProcAddress returns, for a name it knows, dlsym(RTLD_DEFAULT, name) when that resolves (a
 * test preloads a shim exporting e.g. cuDeviceGetAttribute under that exact, unversioned name to
 * give other answers), else its own function. Like the real driver, every function but
 * cuGetErrorName and cuInit answers CUDA_ERROR_NOT_INITIALIZED until cuInit (or the fake
 * runtime's cudaSetDevice, as the real runtime calls cuInit) ran.
 *
 * The fake runtime (fake_cudart.c, libcudart.so.13) links this library and keeps no device state
 * of its own: its cudaSetDevice makes the device's primary context current here, its cudaGetDevice
 * reads the current context, its capture switch is this one (the fake_cu_* helpers).
 *
 * Environment: SYMMPIN_TEST_DRIVER_VERSION, what cuDriverGetVersion reports (default 12000, the
 * oldest driver symmpin takes: every CPU test that runs the library on the fakes runs it on a CUDA
 * 12.0 driver);
 * SYMMPIN_TEST_CUINIT_ERROR, a CUresult cuInit returns instead of succeeding (default none).
 *
 * Built twice (tests/fakes/meson.build): as the driver above, and with -DFAKE_CUDA_PRE_12 as "a
 * driver older than CUDA 12.0" (tests/fakes/old/, also named libcuda.so.1): no
 * cuGetProcAddress_v2, only the CUDA 11.3 form cuGetProcAddress (which answers versions up to
 * 11080), and a default version of 11080. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/cu.h"
#include "fake_control.h"

#ifdef FAKE_CUDA_PRE_12
#define FAKE_CU_DEFAULT_VERSION 11080
#define FAKE_CU_MAX_ABI 11080
#else
#define FAKE_CU_DEFAULT_VERSION 12000
#define FAKE_CU_MAX_ABI SYMMPIN_CU_ABI
#endif

#define FAKE_CU_DEVICES 8
#define FAKE_CU_CTX_BASE 0x1000u /* device d's primary context is (CUcontext)(0x1000 + d) */

/* --- Counters and injected failures -------------------------------------------------------------
 * Indexed by the list (no lock, no name lookup on a call: symmpin calls the context and capture
 * functions on its per-call path, and bench_passthrough should measure symmpin, not the fake).
 * The same control as fake_counters.h gives the other fakes: a count per function (failed calls
 * included) and one pending failure. */
/* The exported entry points, counted too (cuGetProcAddress: either form). */
#define FAKE_CU_ENTRY_POINTS(X) X(DriverGetVersion, 2020) X(GetProcAddress, 12000)

enum {
#define FAKE_CU_INDEX(name, ver) FAKE_CU_##name,
  SYMMPIN_CU_FUNCTIONS(FAKE_CU_INDEX) FAKE_CU_ENTRY_POINTS(FAKE_CU_INDEX) FAKE_CU_N
#undef FAKE_CU_INDEX
};

static const char *const fake_cu_names[FAKE_CU_N] = {
#define FAKE_CU_NAME(name, ver) [FAKE_CU_##name] = "cu" #name,
    SYMMPIN_CU_FUNCTIONS(FAKE_CU_NAME) FAKE_CU_ENTRY_POINTS(FAKE_CU_NAME)
#undef FAKE_CU_NAME
};

static long counts[FAKE_CU_N];
/* One pending failure: (index + 1) << 32 | (uint32_t)rc, 0 when none. */
static uint64_t pending_failure;
static int initialized;
static int capturing;
static __thread CUcontext current_ctx;
static __thread CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

static int index_of(const char *fn) {
  for (int i = 0; fn && i < FAKE_CU_N; i++)
    if (strcmp(fake_cu_names[i], fn) == 0) return i;
  /* A name the fake does not have is a mistake in the test (e.g. "cuEventDestroy_v2"). */
  fprintf(stderr, "fake libcuda: no function %s (the names are cu + SYMMPIN_CU_FUNCTIONS)\n",
          fn ? fn : "(null)");
  abort();
}

void fake_cu_fail_next(const char *fn, int rc) {
  uint64_t v = (uint64_t)(index_of(fn) + 1) << 32 | (uint32_t)rc;
  __atomic_store_n(&pending_failure, v, __ATOMIC_SEQ_CST);
}

long fake_cu_count(const char *fn) {
  return __atomic_load_n(&counts[index_of(fn)], __ATOMIC_SEQ_CST);
}

/* Count a call of function i; its injected failure (consumed), or 0. */
static CUresult enter_uninitialized(int i) {
  __atomic_fetch_add(&counts[i], 1, __ATOMIC_RELAXED);
  uint64_t v = __atomic_load_n(&pending_failure, __ATOMIC_ACQUIRE);
  if (v && (int)(v >> 32) == i + 1 &&
      __atomic_compare_exchange_n(&pending_failure, &v, 0, false, __ATOMIC_SEQ_CST,
                                  __ATOMIC_RELAXED))
    return (CUresult)(uint32_t)v;
  return CUDA_SUCCESS;
}

/* As enter_uninitialized, then CUDA_ERROR_NOT_INITIALIZED before cuInit. */
static CUresult enter(int i) {
  CUresult rc = enter_uninitialized(i);
  if (rc != CUDA_SUCCESS) return rc;
  return __atomic_load_n(&initialized, __ATOMIC_ACQUIRE) ? CUDA_SUCCESS
                                                         : CUDA_ERROR_NOT_INITIALIZED;
}

#define ENTER(name)                                                                                \
  do {                                                                                             \
    CUresult enter_rc_ = enter(FAKE_CU_##name);                                                    \
    if (enter_rc_ != CUDA_SUCCESS) return enter_rc_;                                               \
  } while (0)

/* A function the fake machine cannot do. */
#define NOT_SUPPORTED(name)                                                                        \
  do {                                                                                             \
    ENTER(name);                                                                                   \
    return CUDA_ERROR_NOT_SUPPORTED;                                                               \
  } while (0)

/* --- Shared with the fake runtime (fake_control.h) -------------------------------------------- */

static CUcontext primary_ctx(int dev) { return (CUcontext)(uintptr_t)(FAKE_CU_CTX_BASE + dev); }

/* The device of a fake primary context, -1 for anything else. */
static int ctx_device(CUcontext ctx) {
  uintptr_t v = (uintptr_t)ctx;
  return v >= FAKE_CU_CTX_BASE && v < FAKE_CU_CTX_BASE + FAKE_CU_DEVICES
             ? (int)(v - FAKE_CU_CTX_BASE)
             : -1;
}

int fake_cu_device_count(void) { return FAKE_CU_DEVICES; }

int fake_cu_set_device(int dev) {
  if (dev < 0 || dev >= FAKE_CU_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
  __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
  current_ctx = primary_ctx(dev);
  return CUDA_SUCCESS;
}

int fake_cu_current_device(void) {
  int d = ctx_device(current_ctx);
  return d < 0 ? 0 : d;
}

void fake_cu_set_capturing(int on) { __atomic_store_n(&capturing, on, __ATOMIC_SEQ_CST); }
int fake_cu_capturing(void) { return __atomic_load_n(&capturing, __ATOMIC_SEQ_CST); }

/* --- The functions of SYMMPIN_CU_FUNCTIONS, answered ------------------------------------------ */

static CUresult CUDAAPI fake_GetErrorName(CUresult error, const char **pStr) {
  CUresult rc = enter_uninitialized(FAKE_CU_GetErrorName);
  if (rc != CUDA_SUCCESS) return rc;
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
#define FAKE_CU_ERROR(e)                                                                           \
  case e: *pStr = #e; break;
    FAKE_CU_ERROR(CUDA_SUCCESS)
    FAKE_CU_ERROR(CUDA_ERROR_INVALID_VALUE)
    FAKE_CU_ERROR(CUDA_ERROR_OUT_OF_MEMORY)
    FAKE_CU_ERROR(CUDA_ERROR_NOT_INITIALIZED)
    FAKE_CU_ERROR(CUDA_ERROR_DEINITIALIZED)
    FAKE_CU_ERROR(CUDA_ERROR_NO_DEVICE)
    FAKE_CU_ERROR(CUDA_ERROR_INVALID_DEVICE)
    FAKE_CU_ERROR(CUDA_ERROR_INVALID_IMAGE)
    FAKE_CU_ERROR(CUDA_ERROR_INVALID_CONTEXT)
    FAKE_CU_ERROR(CUDA_ERROR_NO_BINARY_FOR_GPU)
    FAKE_CU_ERROR(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    FAKE_CU_ERROR(CUDA_ERROR_INVALID_HANDLE)
    FAKE_CU_ERROR(CUDA_ERROR_NOT_FOUND)
    FAKE_CU_ERROR(CUDA_ERROR_NOT_READY)
    FAKE_CU_ERROR(CUDA_ERROR_ILLEGAL_ADDRESS)
    FAKE_CU_ERROR(CUDA_ERROR_LAUNCH_FAILED)
    FAKE_CU_ERROR(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)
    FAKE_CU_ERROR(CUDA_ERROR_NOT_PERMITTED)
    FAKE_CU_ERROR(CUDA_ERROR_NOT_SUPPORTED)
    FAKE_CU_ERROR(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
    FAKE_CU_ERROR(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    FAKE_CU_ERROR(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    FAKE_CU_ERROR(CUDA_ERROR_UNKNOWN)
#undef FAKE_CU_ERROR
  default: *pStr = "CUDA_ERROR_FAKE"; break;
  }
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_Init(unsigned int Flags) {
  CUresult rc = enter_uninitialized(FAKE_CU_Init);
  if (rc != CUDA_SUCCESS) return rc;
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  const char *s = getenv("SYMMPIN_TEST_CUINIT_ERROR");
  if (s && *s && atoi(s) != 0) return (CUresult)atoi(s);
  __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_DeviceGet(CUdevice_v1 *device, int ordinal) {
  ENTER(DeviceGet);
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= FAKE_CU_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_DeviceGetCount(int *count) {
  ENTER(DeviceGetCount);
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = FAKE_CU_DEVICES;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_DeviceGetAttribute(int *pi, CUdevice_attribute attrib,
                                                CUdevice_v1 dev) {
  ENTER(DeviceGetAttribute);
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= FAKE_CU_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *pi = 1; return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    *pi = 1;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *pi = 1980000; return CUDA_SUCCESS; /* kHz */
  default: return CUDA_ERROR_NOT_SUPPORTED;
  }
}

static CUresult CUDAAPI fake_DeviceGetName(char *name, int len, CUdevice_v1 dev) {
  ENTER(DeviceGetName);
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= FAKE_CU_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, (size_t)len, "FAKE GPU %d", dev);
  return CUDA_SUCCESS;
}

/* "FAKE", eleven zeros, then the ordinal. */
static CUresult CUDAAPI fake_DeviceGetUuid(CUuuid *uuid, CUdevice_v1 dev) {
  ENTER(DeviceGetUuid);
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= FAKE_CU_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
  memset(uuid->bytes, 0, sizeof uuid->bytes);
  memcpy(uuid->bytes, "FAKE", 4);
  uuid->bytes[15] = (char)dev;
  return CUDA_SUCCESS;
}

/* As the fake runtime's cudaDeviceCanAccessPeer: the fake GPUs are not connected. */
static CUresult CUDAAPI fake_DeviceCanAccessPeer(int *canAccessPeer, CUdevice_v1 dev,
                                                 CUdevice_v1 peerDev) {
  (void)canAccessPeer, (void)dev, (void)peerDev;
  NOT_SUPPORTED(DeviceCanAccessPeer);
}

static CUresult CUDAAPI fake_DevicePrimaryCtxRetain(CUcontext *pctx, CUdevice_v1 dev) {
  ENTER(DevicePrimaryCtxRetain);
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= FAKE_CU_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
  *pctx = primary_ctx(dev);
  return CUDA_SUCCESS;
}

/* No current context when a thread starts. */
static CUresult CUDAAPI fake_CtxGetCurrent(CUcontext *pctx) {
  ENTER(CtxGetCurrent);
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = current_ctx;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_CtxSetCurrent(CUcontext ctx) {
  ENTER(CtxSetCurrent);
  if (ctx && ctx_device(ctx) < 0) return CUDA_ERROR_INVALID_CONTEXT;
  current_ctx = ctx;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_CtxGetDevice(CUdevice_v1 *device) {
  ENTER(CtxGetDevice);
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (!current_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *device = ctx_device(current_ctx);
  return CUDA_SUCCESS;
}

/* Device d's primary context has id d + 1 for the process's life: the fake machine destroys no
 * context, so no id ever changes. NULL asks for the current context's, as the driver's does. */
static CUresult CUDAAPI fake_CtxGetId(CUcontext ctx, unsigned long long *ctxId) {
  ENTER(CtxGetId);
  if (!ctxId) return CUDA_ERROR_INVALID_VALUE;
  int d = ctx_device(ctx ? ctx : current_ctx);
  if (d < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *ctxId = (unsigned long long)d + 1;
  return CUDA_SUCCESS;
}

/* The 11.3 form (no edge data): every stream is capturing while the switch is on. */
static CUresult CUDAAPI fake_StreamGetCaptureInfo(CUstream hStream,
                                                  CUstreamCaptureStatus *captureStatus_out,
                                                  cuuint64_t *id_out, CUgraph *graph_out,
                                                  const CUgraphNode **dependencies_out,
                                                  size_t *numDependencies_out) {
  (void)hStream;
  ENTER(StreamGetCaptureInfo);
  if (!captureStatus_out) return CUDA_ERROR_INVALID_VALUE;
  int on = fake_cu_capturing();
  *captureStatus_out = on ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  if (id_out) *id_out = on ? 1 : 0;
  if (graph_out) *graph_out = NULL;
  if (dependencies_out) *dependencies_out = NULL;
  if (numDependencies_out) *numDependencies_out = 0;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_ThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  ENTER(ThreadExchangeStreamCaptureMode);
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  CUstreamCaptureMode old = capture_mode;
  capture_mode = *mode;
  *mode = old;
  return CUDA_SUCCESS;
}

/* --- The functions of SYMMPIN_CU_FUNCTIONS the fake machine cannot do ------------------------- */

static CUresult CUDAAPI fake_StreamCreate(CUstream *phStream, unsigned int Flags) {
  (void)phStream, (void)Flags;
  NOT_SUPPORTED(StreamCreate);
}

static CUresult CUDAAPI fake_StreamDestroy(CUstream hStream) {
  (void)hStream;
  NOT_SUPPORTED(StreamDestroy);
}

static CUresult CUDAAPI fake_StreamSynchronize(CUstream hStream) {
  (void)hStream;
  NOT_SUPPORTED(StreamSynchronize);
}

static CUresult CUDAAPI fake_StreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  (void)hStream, (void)hEvent, (void)Flags;
  NOT_SUPPORTED(StreamWaitEvent);
}

static CUresult CUDAAPI fake_StreamQuery(CUstream hStream) {
  (void)hStream;
  NOT_SUPPORTED(StreamQuery);
}

static CUresult CUDAAPI fake_EventCreate(CUevent *phEvent, unsigned int Flags) {
  (void)phEvent, (void)Flags;
  NOT_SUPPORTED(EventCreate);
}

static CUresult CUDAAPI fake_EventDestroy(CUevent hEvent) {
  (void)hEvent;
  NOT_SUPPORTED(EventDestroy);
}

static CUresult CUDAAPI fake_EventRecord(CUevent hEvent, CUstream hStream) {
  (void)hEvent, (void)hStream;
  NOT_SUPPORTED(EventRecord);
}

static CUresult CUDAAPI fake_EventQuery(CUevent hEvent) {
  (void)hEvent;
  NOT_SUPPORTED(EventQuery);
}

static CUresult CUDAAPI fake_EventSynchronize(CUevent hEvent) {
  (void)hEvent;
  NOT_SUPPORTED(EventSynchronize);
}

static CUresult CUDAAPI fake_EventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
  (void)pMilliseconds, (void)hStart, (void)hEnd;
  NOT_SUPPORTED(EventElapsedTime);
}

static CUresult CUDAAPI fake_MemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  (void)pp, (void)bytesize, (void)Flags;
  NOT_SUPPORTED(MemHostAlloc);
}

static CUresult CUDAAPI fake_MemFreeHost(void *p) {
  (void)p;
  NOT_SUPPORTED(MemFreeHost);
}

static CUresult CUDAAPI fake_MemHostGetDevicePointer(CUdeviceptr_v2 *pdptr, void *p,
                                                     unsigned int Flags) {
  (void)pdptr, (void)p, (void)Flags;
  NOT_SUPPORTED(MemHostGetDevicePointer);
}

static CUresult CUDAAPI fake_MemsetD8Async(CUdeviceptr_v2 dstDevice, unsigned char uc, size_t N,
                                           CUstream hStream) {
  (void)dstDevice, (void)uc, (void)N, (void)hStream;
  NOT_SUPPORTED(MemsetD8Async);
}

static CUresult CUDAAPI fake_UserObjectCreate(CUuserObject *object_out, void *ptr, CUhostFn destroy,
                                              unsigned int initialRefcount, unsigned int flags) {
  (void)object_out, (void)ptr, (void)destroy, (void)initialRefcount, (void)flags;
  NOT_SUPPORTED(UserObjectCreate);
}

static CUresult CUDAAPI fake_UserObjectRelease(CUuserObject object, unsigned int count) {
  (void)object, (void)count;
  NOT_SUPPORTED(UserObjectRelease);
}

static CUresult CUDAAPI fake_GraphRetainUserObject(CUgraph graph, CUuserObject object,
                                                   unsigned int count, unsigned int flags) {
  (void)graph, (void)object, (void)count, (void)flags;
  NOT_SUPPORTED(GraphRetainUserObject);
}

static CUresult CUDAAPI fake_LibraryLoadData(CUlibrary *library, const void *code,
                                             CUjit_option *jit_options, void **jit_values,
                                             unsigned int njit, CUlibraryOption *options,
                                             void **values, unsigned int noptions) {
  (void)library, (void)code, (void)jit_options, (void)jit_values, (void)njit;
  (void)options, (void)values, (void)noptions;
  NOT_SUPPORTED(LibraryLoadData);
}

static CUresult CUDAAPI fake_LibraryGetKernel(CUkernel *kernel, CUlibrary library,
                                              const char *name) {
  (void)kernel, (void)library, (void)name;
  NOT_SUPPORTED(LibraryGetKernel);
}

static CUresult CUDAAPI fake_KernelGetFunction(CUfunction *func, CUkernel kernel) {
  (void)func, (void)kernel;
  NOT_SUPPORTED(KernelGetFunction);
}

static CUresult CUDAAPI fake_LaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                            void **kernelParams, void **extra) {
  (void)config, (void)f, (void)kernelParams, (void)extra;
  NOT_SUPPORTED(LaunchKernelEx);
}

static CUresult CUDAAPI fake_MemCreate(CUmemGenericAllocationHandle_v1 *handle, size_t size,
                                       const CUmemAllocationProp_v1 *prop,
                                       unsigned long long flags) {
  (void)handle, (void)size, (void)prop, (void)flags;
  NOT_SUPPORTED(MemCreate);
}

static CUresult CUDAAPI fake_MemRelease(CUmemGenericAllocationHandle_v1 handle) {
  (void)handle;
  NOT_SUPPORTED(MemRelease);
}

static CUresult CUDAAPI fake_MemAddressReserve(CUdeviceptr_v2 *ptr, size_t size, size_t alignment,
                                               CUdeviceptr_v2 addr, unsigned long long flags) {
  (void)ptr, (void)size, (void)alignment, (void)addr, (void)flags;
  NOT_SUPPORTED(MemAddressReserve);
}

static CUresult CUDAAPI fake_MemAddressFree(CUdeviceptr_v2 ptr, size_t size) {
  (void)ptr, (void)size;
  NOT_SUPPORTED(MemAddressFree);
}

static CUresult CUDAAPI fake_MemMap(CUdeviceptr_v2 ptr, size_t size, size_t offset,
                                    CUmemGenericAllocationHandle_v1 handle,
                                    unsigned long long flags) {
  (void)ptr, (void)size, (void)offset, (void)handle, (void)flags;
  NOT_SUPPORTED(MemMap);
}

static CUresult CUDAAPI fake_MemUnmap(CUdeviceptr_v2 ptr, size_t size) {
  (void)ptr, (void)size;
  NOT_SUPPORTED(MemUnmap);
}

static CUresult CUDAAPI fake_MemSetAccess(CUdeviceptr_v2 ptr, size_t size,
                                          const CUmemAccessDesc_v1 *desc, size_t count) {
  (void)ptr, (void)size, (void)desc, (void)count;
  NOT_SUPPORTED(MemSetAccess);
}

static CUresult CUDAAPI fake_MemExportToShareableHandle(void *shareableHandle,
                                                        CUmemGenericAllocationHandle_v1 handle,
                                                        CUmemAllocationHandleType handleType,
                                                        unsigned long long flags) {
  (void)shareableHandle, (void)handle, (void)handleType, (void)flags;
  NOT_SUPPORTED(MemExportToShareableHandle);
}

static CUresult CUDAAPI fake_MemImportFromShareableHandle(CUmemGenericAllocationHandle_v1 *handle,
                                                          void *osHandle,
                                                          CUmemAllocationHandleType shHandleType) {
  (void)handle, (void)osHandle, (void)shHandleType;
  NOT_SUPPORTED(MemImportFromShareableHandle);
}

static CUresult CUDAAPI fake_MemGetAllocationGranularity(size_t *granularity,
                                                         const CUmemAllocationProp_v1 *prop,
                                                         CUmemAllocationGranularity_flags option) {
  (void)granularity, (void)prop, (void)option;
  NOT_SUPPORTED(MemGetAllocationGranularity);
}

/* Each fake has exactly the form the list names (cudaTypedefs.h's PFN_cuNAME_vVERSION). */
#define FAKE_CU_CHECK_FORM(name, ver)                                                              \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&fake_##name), PFN_cu##name##_v##ver),    \
                 "fake_" #name " is not PFN_cu" #name "_v" #ver);
SYMMPIN_CU_FUNCTIONS(FAKE_CU_CHECK_FORM)
#undef FAKE_CU_CHECK_FORM

static void *const fake_cu_functions[FAKE_CU_N] = {
#define FAKE_CU_FN(name, ver) [FAKE_CU_##name] = (void *)fake_##name,
    SYMMPIN_CU_FUNCTIONS(FAKE_CU_FN)
#undef FAKE_CU_FN
};

/* --- The exported entry points ---------------------------------------------------------------- */

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion) {
  CUresult rc = enter_uninitialized(FAKE_CU_DriverGetVersion);
  if (rc != CUDA_SUCCESS) return rc;
  if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
  const char *s = getenv("SYMMPIN_TEST_DRIVER_VERSION");
  *driverVersion = s && *s ? atoi(s) : FAKE_CU_DEFAULT_VERSION;
  return CUDA_SUCCESS;
}

/* Both forms of cuGetProcAddress: a function of the list, at a version up to FAKE_CU_MAX_ABI. */
static CUresult proc_address(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status) {
  CUresult rc = enter_uninitialized(FAKE_CU_GetProcAddress);
  if (rc != CUDA_SUCCESS) return rc;
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                            CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
    return CUDA_ERROR_INVALID_VALUE;
  *pfn = NULL;
  int i = 0;
  while (i < FAKE_CU_N && !(fake_cu_functions[i] && strcmp(fake_cu_names[i], symbol) == 0)) i++;
  if (i == FAKE_CU_N) {
    if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  if (cudaVersion > FAKE_CU_MAX_ABI) {
    if (status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  /* A shim loaded into the global scope overrides the fake (it must export the plain name). */
  void *fn = dlsym(RTLD_DEFAULT, symbol);
  *pfn = fn ? fn : fake_cu_functions[i];
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

/* cuda.h maps cuGetProcAddress to cuGetProcAddress_v2; the plain name is the CUDA 11.3 form. */
#undef cuGetProcAddress

#ifndef FAKE_CUDA_PRE_12
CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *symbolStatus) {
  return proc_address(symbol, pfn, cudaVersion, flags, symbolStatus);
}
#endif

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                  cuuint64_t flags) {
  return proc_address(symbol, pfn, cudaVersion, flags, NULL);
}

_Static_assert(__builtin_types_compatible_p(__typeof__(&cuGetProcAddress),
                                            PFN_cuGetProcAddress_v11030),
               "cuGetProcAddress is the 11.3 form");
