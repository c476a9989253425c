/* The facts of the version banner (preload/banner.h), gathered where the CUDA and NCCL headers and
 * the real symbols are, and installed as the banner's probe when the library loads.
 *
 * NCCL is not linked: its version comes from the real ncclGetVersion, found like the wrapped
 * functions (real.h; symmpin does not wrap ncclGetVersion, and the lookup never accepts an address
 * inside libsymmpin, so this cannot call back into symmpin). The driver is symmpin's one door to
 * CUDA (driver/cu.h): opening it says whether it can serve symmpin. The program's CUDA runtimes are
 * every libcudart.so.<major> already loaded, found with RTLD_NOLOAD, which never loads anything. */
#include <dlfcn.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "driver/cu.h"
#include "interpose/real.h"
#include "preload/banner.h"

_Static_assert(SYMMPIN_CU_ABI == SYMMPIN_CUDA_MIN_DRIVER,
               "the driver policy's minimum is the ABI symmpin asks the driver for");

/* The program's runtimes: the majors a program may have loaded (CUDA 11 to 14). */
static void probe_program_cudarts(symmpin_banner_facts *f) {
  for (int major = 11; major <= 14 && f->nprogram_cudarts < SYMMPIN_BANNER_MAX_CUDARTS; major++) {
    char name[32];
    snprintf(name, sizeof name, "libcudart.so.%d", major);
    void *h = dlopen(name, RTLD_NOLOAD | RTLD_LAZY);
    if (!h) continue;
    /* cudaRuntimeGetVersion(int *) has the same form in every major version and only reports the
     * library's own version (it initialises nothing). */
    int (*get)(int *) = (int (*)(int *))dlsym(h, "cudaRuntimeGetVersion");
    int v = -1;
    if (!get || get(&v) != 0 || v <= 0) v = -1;
    dlclose(h); /* drops the reference NOLOAD took; the library stays loaded */
    f->program_cudart[f->nprogram_cudarts].major = major;
    f->program_cudart[f->nprogram_cudarts].version = v;
    f->nprogram_cudarts++;
  }
}

static void probe_versions(symmpin_banner_facts *f) {
  f->nccl_built = NCCL_VERSION_CODE;
  ncclResult_t (*get_version)(int *) =
      (ncclResult_t(*)(int *))symmpin_real_lookup(SYMMPIN_REAL_NCCL, "ncclGetVersion");
  int v = -1;
  if (get_version && get_version(&v) == ncclSuccess && v > 0) f->nccl_version = v;
  const symmpin_cu_state *cu = symmpin_cu_open();
  /* No libcuda.so.1 at all reads as version 0 (banner.h); a driver that gave no version, -1. */
  f->driver_version = cu->driver_version >= 0 ? cu->driver_version : cu->no_library ? 0 : -1;
  f->driver_usable = cu->usable ? 1 : 0;
  snprintf(f->driver_why, sizeof f->driver_why, "%s", cu->why);
  probe_program_cudarts(f);
}

static void probe_gpu(int device, symmpin_banner_facts *f) {
  if (!symmpin_cu_usable()) return;
  if (device < 0) {
    CUcontext ctx = NULL;
    CUdevice d;
    device = symmpin_cu.CtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx &&
                     symmpin_cu.CtxGetDevice(&d) == CUDA_SUCCESS
                 ? (int)d
                 : -1;
  }
  f->device = device;
  CUdevice dev;
  int major = 0, minor = 0;
  if (device >= 0 && symmpin_cu.DeviceGet(&dev, device) == CUDA_SUCCESS) {
    char name[sizeof f->gpu_name];
    if (symmpin_cu.DeviceGetName(name, (int)sizeof name, dev) == CUDA_SUCCESS) {
      name[sizeof name - 1] = '\0';
      snprintf(f->gpu_name, sizeof f->gpu_name, "%s", name);
    }
    if (symmpin_cu.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ==
            CUDA_SUCCESS &&
        symmpin_cu.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) ==
            CUDA_SUCCESS)
      f->cc = major * 10 + minor;
  }
  int n = 0;
  if (symmpin_cu.DeviceGetCount(&n) == CUDA_SUCCESS) {
    f->ngpus = n;
    if (n > SYMMPIN_BANNER_MAX_GPUS) n = SYMMPIN_BANNER_MAX_GPUS;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        CUdevice a, b;
        int can = 0;
        if (i != j && symmpin_cu.DeviceGet(&a, i) == CUDA_SUCCESS &&
            symmpin_cu.DeviceGet(&b, j) == CUDA_SUCCESS &&
            symmpin_cu.DeviceCanAccessPeer(&can, a, b) == CUDA_SUCCESS)
          f->p2p[i][j] = can ? 1 : 0;
      }
  }
}

/* Priority 101, like the host table (query.c): installed before any wrapped call can need it. */
__attribute__((constructor(101))) static void symmpin_banner_probe_install(void) {
  symmpin_banner_probe p = {.versions = probe_versions, .gpu = probe_gpu};
  symmpin_banner_install(&p);
}
