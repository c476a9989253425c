/* Opening the driver (cu.h). */
#include "driver/cu.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

symmpin_cu_table symmpin_cu;

static symmpin_cu_state state = {.driver_version = -1};
static pthread_once_t once = PTHREAD_ONCE_INIT;

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(state.why, sizeof state.why, fmt, ap);
  va_end(ap);
}

/* Into a local table first: symmpin_cu stays all NULL unless every function is there. */
static void open_driver(void) {
  /* The loader's search (LD_LIBRARY_PATH, the cache): the driver the program's runtime uses too.
   * Never closed: mappings and contexts outlive any caller. */
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    state.no_library = true;
    fail("no CUDA driver (libcuda.so.1: %s)", e ? e : "not found");
    return;
  }
  /* cuGetProcAddress_v2 (the query-result argument) exists from CUDA 12.0 drivers on. */
  PFN_cuGetProcAddress_v12000 get = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
  PFN_cuDriverGetVersion_v2020 version =
      (PFN_cuDriverGetVersion_v2020)dlsym(h, "cuDriverGetVersion");
  int v = -1;
  if (version && version(&v) == CUDA_SUCCESS) state.driver_version = v;
  if (state.driver_version >= 0 && state.driver_version < SYMMPIN_CU_ABI) {
    fail("the driver supports CUDA %d.%d; symmpin needs CUDA 12.0 or newer (driver r525+)",
         state.driver_version / 1000, state.driver_version % 1000 / 10);
    return;
  }
  if (!get || state.driver_version < 0) {
    fail("the driver has %s: older than CUDA 12.0 (r525), or not NVIDIA's",
         !get ? "no cuGetProcAddress_v2" : "no version (cuDriverGetVersion)");
    return;
  }
  symmpin_cu_table t;
  memset(&t, 0, sizeof t);
#define SYMMPIN_CU_RESOLVE(name, ver)                                                              \
  {                                                                                                \
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                       \
    void *fn = NULL;                                                                               \
    CUresult r = get("cu" #name, &fn, SYMMPIN_CU_ABI, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &q);      \
    if (r != CUDA_SUCCESS || q != CU_GET_PROC_ADDRESS_SUCCESS || !fn) {                            \
      fail("the driver does not give %s at the CUDA 12.0 ABI (%s %d)", "cu" #name,                 \
           r != CUDA_SUCCESS ? "CUresult" : "cuGetProcAddress status",                             \
           r != CUDA_SUCCESS ? (int)r : (int)q);                                                   \
      return;                                                                                      \
    }                                                                                              \
    t.name = (PFN_cu##name##_v##ver)fn;                                                            \
  }
  SYMMPIN_CU_FUNCTIONS(SYMMPIN_CU_RESOLVE)
#undef SYMMPIN_CU_RESOLVE
  CUresult r = t.Init(0);
  if (r != CUDA_SUCCESS) {
    const char *name = NULL;
    if (t.GetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "?";
    fail("cuInit failed: %s (%d)", name, (int)r);
    return;
  }
  symmpin_cu = t;
  state.usable = true;
}

const symmpin_cu_state *symmpin_cu_open(void) {
  pthread_once(&once, open_driver);
  return &state;
}

bool symmpin_cu_usable(void) { return symmpin_cu_open()->usable; }

const char *symmpin_cu_error_name(CUresult e) {
  static __thread char buf[32];
  const char *name = NULL;
  if (symmpin_cu.GetErrorName && symmpin_cu.GetErrorName(e, &name) == CUDA_SUCCESS && name)
    return name;
  snprintf(buf, sizeof buf, "CUDA error %d", (int)e);
  return buf;
}
