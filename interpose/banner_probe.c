/* The facts of the version banner (preload/banner.h), gathered where the CUDA and NCCL headers and
 * the real symbols are, and installed as the banner's probe when the library loads.
 *
 * NCCL is not linked: its version comes from the real ncclGetVersion, found like the wrapped
 * functions (real.h; symmpin does not wrap ncclGetVersion, and the lookup never accepts an address
 * inside libsymmpin, so this cannot call back into symmpin). The CUDA runtime is symmpin's own
 * (libcudart.so.13, linked); another runtime already loaded by the program (a CUDA 12 PyTorch) is
 * found by soname with RTLD_NOLOAD, which never loads anything. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "interpose/real.h"
#include "preload/banner.h"

static void probe_versions(symmpin_banner_facts *f) {
  f->nccl_built = NCCL_VERSION_CODE;
  ncclResult_t (*get_version)(int *) =
      (ncclResult_t(*)(int *))symmpin_real_lookup(SYMMPIN_REAL_NCCL, "ncclGetVersion");
  int v = -1;
  if (get_version && get_version(&v) == ncclSuccess && v > 0) f->nccl_version = v;
  /* Another major version of the CUDA runtime, loaded by the program itself. */
  for (int major = 11; major <= 13; major++) {
    if (major == CUDART_VERSION / 1000) continue; /* ours */
    char name[32];
    snprintf(name, sizeof name, "libcudart.so.%d", major);
    void *h = dlopen(name, RTLD_NOLOAD | RTLD_LAZY);
    if (!h) continue;
    dlclose(h); /* drops the reference NOLOAD took; the library stays loaded */
    snprintf(f->other_cudart, sizeof f->other_cudart, "%s", name);
    break;
  }
}

static void probe_gpu(int device, symmpin_banner_facts *f) {
  /* A failure below is not the program's error: cleared at the end, unless the program had one
   * pending already (then it stays for the program to read). */
  bool clear = cudaPeekAtLastError() == cudaSuccess;
  int v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) f->cudart_version = v;
  if (cudaDriverGetVersion(&v) == cudaSuccess) f->driver_version = v;
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) device = -1;
  f->device = device;
  struct cudaDeviceProp prop;
  if (device >= 0 && cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
    snprintf(f->gpu_name, sizeof f->gpu_name, "%.*s", (int)sizeof f->gpu_name - 1, prop.name);
    f->cc = prop.major * 10 + prop.minor;
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess) {
    f->ngpus = n;
    if (n > SYMMPIN_BANNER_MAX_GPUS) n = SYMMPIN_BANNER_MAX_GPUS;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        int can = 0;
        if (i != j && cudaDeviceCanAccessPeer(&can, i, j) == cudaSuccess)
          f->p2p[i][j] = can ? 1 : 0;
      }
  }
  if (clear) (void)cudaGetLastError();
}

/* Priority 101, like the host table (query.c): installed before any wrapped call can need it. */
__attribute__((constructor(101))) static void symmpin_banner_probe_install(void) {
  symmpin_banner_probe p = {.versions = probe_versions, .gpu = probe_gpu};
  symmpin_banner_install(&p);
}
