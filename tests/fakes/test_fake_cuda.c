/* CPU tests of the FAKE CUDA driver (fake_cuda.c): what it reports as its version, that it gives
 * every function of driver/cu.h's SYMMPIN_CU_FUNCTIONS at the CUDA 12.0 ABI and nothing newer or
 * unknown, the fake machine's answers, the current context and capture switch it shares with the
 * fake runtime (fake_cudart.c), an override through a shim, and the variant of a driver older
 * than CUDA 12.0 (tests/fakes/old/).
 *
 * The drivers are opened by path as symmpin opens libcuda.so.1: SYMMPIN_TEST_FAKES and
 * SYMMPIN_TEST_FAKES_OLD_DRIVER name their folders, SYMMPIN_TEST_FAKE_CU_SHIM the shim (meson).
 * This program links the fake runtime (and so the fake driver) too, as a test program does.
 * Criterion runs every test in a process of its own: environment and fake state start fresh. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/cu.h"
#include "fake_control.h"

static void *open_driver(const char *dir_env) {
  const char *dir = getenv(dir_env);
  cr_assert_not_null(dir, "%s is not set (meson test sets it)", dir_env);
  char path[4096];
  snprintf(path, sizeof path, "%s/libcuda.so.1", dir);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(h, "dlopen %s: %s", path, dlerror());
  return h;
}

static void *fakes(void) { return open_driver("SYMMPIN_TEST_FAKES"); }

static PFN_cuGetProcAddress_v12000 get_v2(void *h) {
  PFN_cuGetProcAddress_v12000 get = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
  cr_assert_not_null(get, "no cuGetProcAddress_v2");
  return get;
}

static int version_of(void *h) {
  PFN_cuDriverGetVersion_v2020 v = (PFN_cuDriverGetVersion_v2020)dlsym(h, "cuDriverGetVersion");
  cr_assert_not_null(v, "no cuDriverGetVersion");
  int version = -1;
  cr_assert_eq(v(&version), CUDA_SUCCESS);
  return version;
}

/* The table as symmpin fills it (driver/cu.c): every function at SYMMPIN_CU_ABI. */
static symmpin_cu_table table(void) {
  PFN_cuGetProcAddress_v12000 get = get_v2(fakes());
  symmpin_cu_table t;
  memset(&t, 0, sizeof t);
#define RESOLVE(name, ver)                                                                         \
  {                                                                                                \
    void *fn = NULL;                                                                               \
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                       \
    cr_assert_eq(get("cu" #name, &fn, SYMMPIN_CU_ABI, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &q),      \
                 CUDA_SUCCESS, "cu" #name);                                                        \
    t.name = (PFN_cu##name##_v##ver)fn;                                                            \
  }
  SYMMPIN_CU_FUNCTIONS(RESOLVE)
#undef RESOLVE
  return t;
}

static symmpin_cu_table initialized(void) {
  symmpin_cu_table t = table();
  cr_assert_eq(t.Init(0), CUDA_SUCCESS);
  return t;
}

/* ---- versions ---- */

Test(fake_cuda, version_is_12000_by_default) {
  unsetenv("SYMMPIN_TEST_DRIVER_VERSION");
  cr_assert_eq(version_of(fakes()), 12000);
  int v = -1;
  cr_assert_eq(cudaDriverGetVersion(&v), cudaSuccess);
  cr_assert_eq(v, 12000, "the fake runtime asks the fake driver: %d", v);
}

Test(fake_cuda, version_from_the_environment) {
  void *h = fakes();
  setenv("SYMMPIN_TEST_DRIVER_VERSION", "12000", 1);
  cr_assert_eq(version_of(h), 12000);
  setenv("SYMMPIN_TEST_DRIVER_VERSION", "11080", 1);
  cr_assert_eq(version_of(h), 11080);
  int v = -1;
  cr_assert_eq(cudaDriverGetVersion(&v), cudaSuccess);
  cr_assert_eq(v, 11080);
}

/* ---- cuGetProcAddress ---- */

Test(fake_cuda, every_listed_function_resolves_at_12000_and_no_newer) {
  void *h = fakes();
  PFN_cuGetProcAddress_v12000 get = get_v2(h);
  PFN_cuGetProcAddress_v11030 get_11 = (PFN_cuGetProcAddress_v11030)dlsym(h, "cuGetProcAddress");
  cr_assert_not_null(get_11, "no cuGetProcAddress (the CUDA 11.3 form)");
  int n = 0;
#define CHECK(name, ver)                                                                           \
  {                                                                                                \
    void *fn = NULL;                                                                               \
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                       \
    cr_assert_eq(get("cu" #name, &fn, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &q), CUDA_SUCCESS, \
                 "cu" #name " at 12000");                                                          \
    cr_assert_eq(q, CU_GET_PROC_ADDRESS_SUCCESS, "cu" #name);                                      \
    cr_assert_not_null(fn, "cu" #name);                                                            \
    void *same = NULL;                                                                             \
    cr_assert_eq(get_11("cu" #name, &same, 12000, CU_GET_PROC_ADDRESS_DEFAULT), CUDA_SUCCESS);     \
    cr_assert_eq(same, fn, "cu" #name ": both forms give the same function");                      \
    fn = (void *)1;                                                                                \
    q = CU_GET_PROC_ADDRESS_SUCCESS;                                                               \
    cr_assert_eq(get("cu" #name, &fn, 12010, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &q),               \
                 CUDA_ERROR_NOT_FOUND, "cu" #name " at 12010");                                    \
    cr_assert_eq(q, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, "cu" #name " at 12010");           \
    cr_assert_null(fn, "cu" #name " at 12010");                                                    \
    n++;                                                                                           \
  }
  SYMMPIN_CU_FUNCTIONS(CHECK)
#undef CHECK
  cr_assert_gt(n, 40, "the list has %d functions", n);
  cr_assert_eq(fake_cu_count("cuGetProcAddress"), 3L * n);
}

Test(fake_cuda, unknown_names_fail) {
  PFN_cuGetProcAddress_v12000 get = get_v2(fakes());
  /* Not in the list: made up, a driver function symmpin does not use, a versioned name, the
   * exported entry points themselves. */
  const char *names[] = {
      "cuNoSuchFunction",   "cuMemAlloc",       "cuEventDestroy_v2", "Init", "",
      "cuDriverGetVersion", "cuGetProcAddress",
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    for (int ver = 12000; ver <= 12010; ver += 10) {
      void *fn = (void *)1;
      CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SUCCESS;
      cr_assert_eq(get(names[i], &fn, ver, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &q),
                   CUDA_ERROR_NOT_FOUND, "'%s' at %d", names[i], ver);
      cr_assert_eq(q, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, "'%s' at %d", names[i], ver);
      cr_assert_null(fn, "'%s'", names[i]);
    }
  void *fn = NULL;
  cr_assert_eq(get("cuInit", &fn, 12000, 4, NULL), CUDA_ERROR_INVALID_VALUE, "unknown flags");
  cr_assert_eq(get("cuInit", NULL, 12000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
  cr_assert_eq(get("cuInit", &fn, 12000, 0, NULL), CUDA_SUCCESS, "the status is optional");
}

/* The exported names are only the entry points and the controls. */
Test(fake_cuda, functions_are_not_exported_by_name) {
  void *h = fakes();
  cr_assert_null(dlsym(h, "cuInit"));
  cr_assert_null(dlsym(h, "cuEventDestroy_v2"));
  cr_assert_null(dlsym(h, "cuCtxGetCurrent"));
  /* symmpin's dlopen by soname finds the very driver the fake runtime uses. */
  void *by_soname = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  cr_assert_eq(by_soname, h);
}

/* A shim in the global scope overrides the fake's function (tests/compat's way of other GPUs). */
Test(fake_cuda, a_shim_in_the_global_scope_overrides) {
  PFN_cuGetProcAddress_v12000 get = get_v2(fakes());
  const char *path = getenv("SYMMPIN_TEST_FAKE_CU_SHIM");
  cr_assert_not_null(path);
  void *fake_fn = NULL;
  cr_assert_eq(get("cuDeviceGetAttribute", &fake_fn, 12000, 0, NULL), CUDA_SUCCESS);
  void *shim = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  cr_assert_not_null(shim, "dlopen %s: %s", path, dlerror());
  void *fn = NULL;
  cr_assert_eq(get("cuDeviceGetAttribute", &fn, 12000, 0, NULL), CUDA_SUCCESS);
  cr_assert_eq(fn, dlsym(shim, "cuDeviceGetAttribute"));
  cr_assert_neq(fn, fake_fn);
  int v = 0;
  cr_assert_eq(((PFN_cuDeviceGetAttribute_v2000)fn)(&v, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0),
               CUDA_SUCCESS);
  cr_assert_eq(v, 42);
  /* Only the name the shim has. */
  void *other = NULL;
  cr_assert_eq(get("cuDeviceGetCount", &other, 12000, 0, NULL), CUDA_SUCCESS);
  cr_assert_null(dlsym(shim, "cuDeviceGetCount"));
}

/* ---- the fake machine ---- */

Test(fake_cuda, nothing_before_cuInit) {
  symmpin_cu_table t = table();
  int n = -1;
  cr_assert_eq(t.DeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  CUcontext c = NULL;
  cr_assert_eq(t.CtxGetCurrent(&c), CUDA_ERROR_NOT_INITIALIZED);
  const char *name = NULL;
  cr_assert_eq(t.GetErrorName(CUDA_ERROR_NOT_INITIALIZED, &name), CUDA_SUCCESS);
  cr_assert_str_eq(name, "CUDA_ERROR_NOT_INITIALIZED");
  cr_assert_eq(fake_cu_count("cuInit"), 0);
  cr_assert_eq(t.Init(1), CUDA_ERROR_INVALID_VALUE);
  cr_assert_eq(t.Init(0), CUDA_SUCCESS);
  cr_assert_eq(t.Init(0), CUDA_SUCCESS);
  cr_assert_eq(fake_cu_count("cuInit"), 3);
  cr_assert_eq(t.DeviceGetCount(&n), CUDA_SUCCESS);
  cr_assert_eq(n, 8);
}

Test(fake_cuda, cuInit_error_from_the_environment) {
  setenv("SYMMPIN_TEST_CUINIT_ERROR", "100", 1);
  symmpin_cu_table t = table();
  cr_assert_eq(t.Init(0), CUDA_ERROR_NO_DEVICE);
  int n = -1;
  cr_assert_eq(t.DeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
}

Test(fake_cuda, eight_gpus_of_compute_capability_9_0) {
  symmpin_cu_table t = initialized();
  int n = 0;
  cr_assert_eq(t.DeviceGetCount(&n), CUDA_SUCCESS);
  cr_assert_eq(n, 8);
  CUdevice d = -1;
  cr_assert_eq(t.DeviceGet(&d, 8), CUDA_ERROR_INVALID_DEVICE);
  cr_assert_eq(t.DeviceGet(&d, -1), CUDA_ERROR_INVALID_DEVICE);
  cr_assert_eq(t.DeviceGet(&d, 5), CUDA_SUCCESS);
  cr_assert_eq(d, 5);
  struct {
    CUdevice_attribute a;
    int want;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
      {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1},
      {CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1},
      {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1980000},
  };
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
    int v = -1;
    cr_assert_eq(t.DeviceGetAttribute(&v, attrs[i].a, d), CUDA_SUCCESS, "attribute %d", attrs[i].a);
    cr_assert_eq(v, attrs[i].want, "attribute %d: %d", attrs[i].a, v);
  }
  int v = -1;
  cr_assert_eq(t.DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d),
               CUDA_ERROR_NOT_SUPPORTED);
  cr_assert_eq(t.DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 8),
               CUDA_ERROR_INVALID_DEVICE);
  char name[64];
  cr_assert_eq(t.DeviceGetName(name, sizeof name, d), CUDA_SUCCESS);
  cr_assert_str_eq(name, "FAKE GPU 5");
  CUuuid u[8];
  for (int i = 0; i < 8; i++) cr_assert_eq(t.DeviceGetUuid(&u[i], i), CUDA_SUCCESS);
  for (int i = 0; i < 8; i++)
    for (int j = i + 1; j < 8; j++)
      cr_assert_neq(memcmp(u[i].bytes, u[j].bytes, 16), 0, "devices %d and %d", i, j);
  CUuuid again;
  cr_assert_eq(t.DeviceGetUuid(&again, 5), CUDA_SUCCESS);
  cr_assert_eq(memcmp(again.bytes, u[5].bytes, 16), 0);
  int can = -1;
  cr_assert_eq(t.DeviceCanAccessPeer(&can, 0, 1), CUDA_ERROR_NOT_SUPPORTED);
  CUcontext c0 = NULL, c7 = NULL, c7b = NULL;
  cr_assert_eq(t.DevicePrimaryCtxRetain(&c0, 0), CUDA_SUCCESS);
  cr_assert_eq(t.DevicePrimaryCtxRetain(&c7, 7), CUDA_SUCCESS);
  cr_assert_eq(t.DevicePrimaryCtxRetain(&c7b, 7), CUDA_SUCCESS);
  cr_assert(c0 && c7 && c0 != c7 && c7 == c7b);
  cr_assert_eq(t.DevicePrimaryCtxRetain(&c0, 8), CUDA_ERROR_INVALID_DEVICE);
}

Test(fake_cuda, error_names) {
  symmpin_cu_table t = table();
  const char *name = NULL;
  cr_assert_eq(t.GetErrorName(CUDA_ERROR_NOT_SUPPORTED, &name), CUDA_SUCCESS);
  cr_assert_str_eq(name, "CUDA_ERROR_NOT_SUPPORTED");
  cr_assert_eq(t.GetErrorName(CUDA_SUCCESS, &name), CUDA_SUCCESS);
  cr_assert_str_eq(name, "CUDA_SUCCESS");
  cr_assert_eq(t.GetErrorName(CUDA_ERROR_DEINITIALIZED, &name), CUDA_SUCCESS);
  cr_assert_str_eq(name, "CUDA_ERROR_DEINITIALIZED");
  cr_assert_eq(t.GetErrorName((CUresult)12345, &name), CUDA_SUCCESS);
  cr_assert_str_eq(name, "CUDA_ERROR_FAKE");
}

/* Everything that would need a device: CUDA_ERROR_NOT_SUPPORTED, counted. */
Test(fake_cuda, device_work_is_not_supported_and_counted) {
  symmpin_cu_table t = initialized();
  CUstream s = NULL;
  CUevent e = NULL;
  void *p = NULL;
  CUdeviceptr dp = 0;
  float ms = 0;
  CUuserObject uo = NULL;
  CUlibrary lib = NULL;
  CUkernel k = NULL;
  CUfunction f = NULL;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  CUmemGenericAllocationHandle mh = 0;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  size_t gran = 0;
  int fd = -1;
  const unsigned char image[16] = {0};
  int n = 0;
#define NS(name, call)                                                                             \
  cr_assert_eq(t.call, CUDA_ERROR_NOT_SUPPORTED, "cu" #name);                                      \
  cr_assert_eq(fake_cu_count("cu" #name), 1, "cu" #name " counted");                               \
  n++;
  NS(StreamCreate, StreamCreate(&s, 0))
  NS(StreamDestroy, StreamDestroy(s))
  NS(StreamSynchronize, StreamSynchronize(s))
  NS(StreamWaitEvent, StreamWaitEvent(s, e, 0))
  NS(StreamQuery, StreamQuery(s))
  NS(EventCreate, EventCreate(&e, 0))
  NS(EventDestroy, EventDestroy(e))
  NS(EventRecord, EventRecord(e, s))
  NS(EventQuery, EventQuery(e))
  NS(EventSynchronize, EventSynchronize(e))
  NS(EventElapsedTime, EventElapsedTime(&ms, e, e))
  NS(MemHostAlloc, MemHostAlloc(&p, 64, 0))
  NS(MemFreeHost, MemFreeHost(p))
  NS(MemHostGetDevicePointer, MemHostGetDevicePointer(&dp, p, 0))
  NS(MemsetD8Async, MemsetD8Async(dp, 0, 64, s))
  NS(UserObjectCreate, UserObjectCreate(&uo, p, NULL, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC))
  NS(UserObjectRelease, UserObjectRelease(uo, 1))
  NS(GraphRetainUserObject, GraphRetainUserObject(NULL, uo, 1, 0))
  NS(LibraryLoadData, LibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0))
  NS(LibraryGetKernel, LibraryGetKernel(&k, lib, "k"))
  NS(KernelGetFunction, KernelGetFunction(&f, k))
  NS(LaunchKernelEx, LaunchKernelEx(&cfg, f, NULL, NULL))
  NS(MemCreate, MemCreate(&mh, 1 << 21, &prop, 0))
  NS(MemRelease, MemRelease(mh))
  NS(MemAddressReserve, MemAddressReserve(&dp, 1 << 21, 0, 0, 0))
  NS(MemAddressFree, MemAddressFree(dp, 1 << 21))
  NS(MemMap, MemMap(dp, 1 << 21, 0, mh, 0))
  NS(MemUnmap, MemUnmap(dp, 1 << 21))
  NS(MemSetAccess, MemSetAccess(dp, 1 << 21, &acc, 1))
  NS(MemExportToShareableHandle,
     MemExportToShareableHandle(&fd, mh, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0))
  NS(MemImportFromShareableHandle,
     MemImportFromShareableHandle(&mh, (void *)(intptr_t)fd,
                                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
  NS(MemGetAllocationGranularity,
     MemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM))
#undef NS
  /* With the 14 functions the fake machine answers and DeviceCanAccessPeer: the whole list. */
  int listed = 0;
#define COUNT(name, ver) listed++;
  SYMMPIN_CU_FUNCTIONS(COUNT)
#undef COUNT
  cr_assert_eq(n + 15, listed, "%d not supported + 15 answered, %d listed", n, listed);
}

Test(fake_cuda, an_injected_failure_hits_the_next_call_only) {
  symmpin_cu_table t = initialized();
  CUcontext c = (CUcontext)1;
  fake_cu_fail_next("cuCtxGetCurrent", CUDA_ERROR_DEINITIALIZED);
  cr_assert_eq(t.CtxGetCurrent(&c), CUDA_ERROR_DEINITIALIZED);
  cr_assert_eq(t.CtxGetCurrent(&c), CUDA_SUCCESS);
  cr_assert_null(c);
  cr_assert_eq(fake_cu_count("cuCtxGetCurrent"), 2);
  /* Pending for one function, not taken by another. */
  fake_cu_fail_next("cuEventQuery", CUDA_ERROR_NOT_READY);
  int n = 0;
  cr_assert_eq(t.DeviceGetCount(&n), CUDA_SUCCESS);
  cr_assert_eq(t.EventQuery(NULL), CUDA_ERROR_NOT_READY);
  cr_assert_eq(t.EventQuery(NULL), CUDA_ERROR_NOT_SUPPORTED);
  fake_cu_fail_next("cuInit", CUDA_ERROR_NO_DEVICE);
  cr_assert_eq(t.Init(0), CUDA_ERROR_NO_DEVICE);
  fake_cu_fail_next("cuDriverGetVersion", CUDA_ERROR_UNKNOWN);
  int v = 0;
  cr_assert_eq(cudaDriverGetVersion(&v), cudaErrorUnknown);
}

Test(fake_cuda, a_name_it_does_not_have_aborts, .signal = SIGABRT, .init = cr_redirect_stderr) {
  fake_cu_count("cuEventDestroy_v2");
}

/* ---- shared with the fake runtime ---- */

/* Asserted on the test's thread (Criterion's asserts belong there). */
struct other_thread {
  symmpin_cu_table *t;
  CUresult get_current, get_device, mode_rc;
  cudaError_t get_rc, set_rc, get_after_rc;
  CUcontext current;
  CUdevice device;
  int runtime_device, runtime_device_after;
  CUstreamCaptureMode mode;
};

static void *other_thread(void *arg) {
  struct other_thread *o = arg;
  o->current = (CUcontext)1;
  o->get_current = o->t->CtxGetCurrent(&o->current);
  o->get_device = o->t->CtxGetDevice(&o->device);
  o->get_rc = cudaGetDevice(&o->runtime_device);
  o->set_rc = cudaSetDevice(5);
  o->get_after_rc = cudaGetDevice(&o->runtime_device_after);
  o->mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  o->mode_rc = o->t->ThreadExchangeStreamCaptureMode(&o->mode);
  return NULL;
}

Test(fake_cuda, cudaSetDevice_makes_the_primary_context_current_on_its_thread) {
  symmpin_cu_table t = initialized();
  CUdevice d = -1;
  cr_assert_eq(t.CtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT, "no context at thread start");
  int rd = -1;
  cr_assert_eq(cudaGetDevice(&rd), cudaSuccess);
  cr_assert_eq(rd, 0, "the runtime's answer without a context");
  cr_assert_eq(cudaSetDevice(3), cudaSuccess);
  cr_assert_eq(t.CtxGetDevice(&d), CUDA_SUCCESS);
  cr_assert_eq(d, 3);
  CUcontext cur = NULL, primary3 = NULL;
  cr_assert_eq(t.CtxGetCurrent(&cur), CUDA_SUCCESS);
  cr_assert_eq(t.DevicePrimaryCtxRetain(&primary3, 3), CUDA_SUCCESS);
  cr_assert_eq(cur, primary3);
  cr_assert_eq(cudaSetDevice(8), cudaErrorInvalidDevice);

  struct other_thread o = {.t = &t, .device = -1, .runtime_device = -1};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, other_thread, &o), 0);
  cr_assert_eq(pthread_join(th, NULL), 0);
  cr_assert_eq(o.get_current, CUDA_SUCCESS);
  cr_assert_null(o.current, "another thread has no current context");
  cr_assert_eq(o.get_device, CUDA_ERROR_INVALID_CONTEXT);
  cr_assert(o.get_rc == cudaSuccess && o.set_rc == cudaSuccess && o.get_after_rc == cudaSuccess);
  cr_assert_eq(o.runtime_device, 0);
  cr_assert_eq(o.runtime_device_after, 5);
  cr_assert_eq(o.mode_rc, CUDA_SUCCESS);
  cr_assert_eq(o.mode, CU_STREAM_CAPTURE_MODE_GLOBAL, "a thread starts in the global mode");

  cr_assert_eq(t.CtxGetDevice(&d), CUDA_SUCCESS);
  cr_assert_eq(d, 3, "this thread still has device 3");
  /* The driver's current context is what the runtime reads. */
  CUcontext primary6 = NULL;
  cr_assert_eq(t.DevicePrimaryCtxRetain(&primary6, 6), CUDA_SUCCESS);
  cr_assert_eq(t.CtxSetCurrent(primary6), CUDA_SUCCESS);
  cr_assert_eq(cudaGetDevice(&rd), cudaSuccess);
  cr_assert_eq(rd, 6);
  cr_assert_eq(t.CtxSetCurrent((CUcontext)(uintptr_t)0x42), CUDA_ERROR_INVALID_CONTEXT);
  cr_assert_eq(t.CtxSetCurrent(NULL), CUDA_SUCCESS);
  cr_assert_eq(cudaGetDevice(&rd), cudaSuccess);
  cr_assert_eq(rd, 0);
  cr_assert_eq(t.CtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
}

Test(fake_cuda, a_context_s_id_is_its_device_s_for_good) {
  symmpin_cu_table t = initialized();
  unsigned long long id = 0;
  cr_assert_eq(t.CtxGetId(NULL, &id), CUDA_ERROR_INVALID_CONTEXT, "no context at thread start");
  cr_assert_eq(cudaSetDevice(4), cudaSuccess);
  cr_assert_eq(t.CtxGetId(NULL, &id), CUDA_SUCCESS, "NULL: the current context");
  cr_assert_eq(id, 5);
  CUcontext primary2 = NULL;
  cr_assert_eq(t.DevicePrimaryCtxRetain(&primary2, 2), CUDA_SUCCESS);
  cr_assert_eq(t.CtxGetId(primary2, &id), CUDA_SUCCESS);
  cr_assert_eq(id, 3);
  cr_assert_eq(t.CtxGetId((CUcontext)(uintptr_t)0x42, &id), CUDA_ERROR_INVALID_CONTEXT);
  cr_assert_eq(t.CtxGetId(primary2, NULL), CUDA_ERROR_INVALID_VALUE);
}

Test(fake_cuda, the_capture_switch_is_the_drivers) {
  symmpin_cu_table t = initialized();
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  cuuint64_t id = 7;
  cr_assert_eq(t.StreamGetCaptureInfo(NULL, &st, &id, NULL, NULL, NULL), CUDA_SUCCESS);
  cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
  cr_assert_eq(id, 0);
  fake_cuda_set_capturing(1); /* the runtime's switch */
  cr_assert_eq(fake_cu_capturing(), 1);
  CUgraph g = (CUgraph)1;
  const CUgraphNode *deps = (const CUgraphNode *)1;
  size_t nd = 9;
  cr_assert_eq(t.StreamGetCaptureInfo((CUstream)0x10, &st, &id, &g, &deps, &nd), CUDA_SUCCESS);
  cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  cr_assert_eq(id, 1);
  cr_assert(g == NULL && deps == NULL && nd == 0);
  enum cudaStreamCaptureStatus rs = cudaStreamCaptureStatusNone;
  cr_assert_eq(cudaStreamGetCaptureInfo(NULL, &rs, NULL, NULL, NULL, NULL, NULL), cudaSuccess);
  cr_assert_eq(rs, cudaStreamCaptureStatusActive);
  fake_cu_set_capturing(0); /* the driver's, seen by the runtime */
  cr_assert_eq(t.StreamGetCaptureInfo(NULL, &st, NULL, NULL, NULL, NULL), CUDA_SUCCESS);
  cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
  cr_assert_eq(cudaStreamGetCaptureInfo(NULL, &rs, NULL, NULL, NULL, NULL, NULL), cudaSuccess);
  cr_assert_eq(rs, cudaStreamCaptureStatusNone);
  cr_assert_eq(t.StreamGetCaptureInfo(NULL, NULL, NULL, NULL, NULL, NULL),
               CUDA_ERROR_INVALID_VALUE);
}

Test(fake_cuda, the_capture_mode_is_exchanged) {
  symmpin_cu_table t = initialized();
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
  cr_assert_eq(t.ThreadExchangeStreamCaptureMode(&m), CUDA_SUCCESS);
  cr_assert_eq(m, CU_STREAM_CAPTURE_MODE_GLOBAL);
  m = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  cr_assert_eq(t.ThreadExchangeStreamCaptureMode(&m), CUDA_SUCCESS);
  cr_assert_eq(m, CU_STREAM_CAPTURE_MODE_RELAXED);
  cr_assert_eq(t.ThreadExchangeStreamCaptureMode(&m), CUDA_SUCCESS);
  cr_assert_eq(m, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
}

/* ---- a driver older than CUDA 12.0 ---- */

Test(fake_cuda, the_old_driver_has_no_cuGetProcAddress_v2_and_reports_11080) {
  unsetenv("SYMMPIN_TEST_DRIVER_VERSION");
  void *old = open_driver("SYMMPIN_TEST_FAKES_OLD_DRIVER");
  void *cur = fakes();
  cr_assert_neq(old, cur, "a file of its own");
  cr_assert_null(dlsym(old, "cuGetProcAddress_v2"));
  PFN_cuGetProcAddress_v11030 get = (PFN_cuGetProcAddress_v11030)dlsym(old, "cuGetProcAddress");
  cr_assert_not_null(get);
  cr_assert_eq(version_of(old), 11080);
  cr_assert_eq(version_of(cur), 12000);
  void *fn = NULL;
  cr_assert_eq(get("cuInit", &fn, 11080, 0), CUDA_SUCCESS);
  cr_assert_not_null(fn);
  cr_assert_eq(get("cuInit", &fn, 12000, 0), CUDA_ERROR_NOT_FOUND, "nothing of CUDA 12.0");
  cr_assert_null(fn);
  /* The environment still decides (a driver without _v2 that claims 12.0). */
  setenv("SYMMPIN_TEST_DRIVER_VERSION", "12000", 1);
  cr_assert_eq(version_of(old), 12000);
}
