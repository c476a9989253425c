/* The facts of the version banner (preload/banner.h), gathered where the CUDA and NCCL headers and
 * the real symbols are, and installed as the banner's probe when the library loads.
 *
 * NCCL is not linked: its version comes from the real ncclGetVersion, found like the wrapped
 * functions (real.h; symmpin does not wrap ncclGetVersion, and the lookup never accepts an address
 * inside libsymmpin, so this cannot call back into symmpin). Two CUDA runtimes are described:
 * symmpin's own (static, linked in: its version is the header's, and its first answer tells
 * whether the driver can run it) and the program's, every libcudart.so.<major> already loaded,
 * found with RTLD_NOLOAD, which never loads anything. The driver and GPU questions go through
 * interpose/cuda_queries.h (the CPU tests' seam). */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "interpose/cuda_queries.h"
#include "interpose/real.h"
#include "preload/banner.h"

_Static_assert(cudaErrorInsufficientDriver == SYMMPIN_CUDA_ERROR_INSUFFICIENT_DRIVER,
               "banner.h's number for cudaErrorInsufficientDriver");
_Static_assert(cudaErrorCallRequiresNewerDriver == SYMMPIN_CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER,
               "banner.h's number for cudaErrorCallRequiresNewerDriver");

/* The program's runtimes: the majors a program may have loaded (CUDA 11 to 14). */
static void probe_program_cudarts(symmpin_banner_facts *f) {
  for (int major = 11; major <= 14 && f->nprogram_cudarts < SYMMPIN_BANNER_MAX_CUDARTS; major++) {
    char name[32];
    snprintf(name, sizeof name, "libcudart.so.%d", major);
    void *h = dlopen(name, RTLD_NOLOAD | RTLD_LAZY);
    if (!h) continue;
    /* cudaRuntimeGetVersion(int *) has the same form in every major version and only reports the
     * library's own version (it initialises nothing). */
    cudaError_t (*get)(int *) = (cudaError_t(*)(int *))dlsym(h, "cudaRuntimeGetVersion");
    int v = -1;
    if (!get || get(&v) != cudaSuccess || v <= 0) v = -1;
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
  f->cudart_version = CUDART_VERSION; /* symmpin's own runtime is the one of these headers */
  v = -1;
  if (symmpin_cuda.driver_get_version(&v) == cudaSuccess && v >= 0) f->driver_version = v;
  /* The runtime's first real question: its error when the driver cannot run it (too old, no GPU).
   * symmpin's runtime keeps its own error state, apart from the program's. */
  bool clear = symmpin_cuda.peek_at_last_error() == cudaSuccess;
  int n = 0;
  cudaError_t e = symmpin_cuda.get_device_count(&n);
  f->cudart_error = (int)e;
  if (e != cudaSuccess) {
    const char *name = symmpin_cuda.get_error_name(e);
    snprintf(f->cudart_error_name, sizeof f->cudart_error_name, "%s", name ? name : "");
    if (clear) (void)symmpin_cuda.get_last_error();
  }
  probe_program_cudarts(f);
}

static void probe_gpu(int device, symmpin_banner_facts *f) {
  /* A failure below is symmpin's runtime's own error, cleared at the end (unless one was pending:
   * under the tests' seam the runtime asked is the program's, whose error stays for it to read). */
  bool clear = symmpin_cuda.peek_at_last_error() == cudaSuccess;
  if (device < 0 && symmpin_cuda.get_device(&device) != cudaSuccess) device = -1;
  f->device = device;
  struct cudaDeviceProp prop;
  if (device >= 0 && symmpin_cuda.get_device_properties(&prop, device) == cudaSuccess) {
    snprintf(f->gpu_name, sizeof f->gpu_name, "%.*s", (int)sizeof f->gpu_name - 1, prop.name);
    f->cc = prop.major * 10 + prop.minor;
  }
  int n = 0;
  if (symmpin_cuda.get_device_count(&n) == cudaSuccess) {
    f->ngpus = n;
    if (n > SYMMPIN_BANNER_MAX_GPUS) n = SYMMPIN_BANNER_MAX_GPUS;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        int can = 0;
        if (i != j && symmpin_cuda.device_can_access_peer(&can, i, j) == cudaSuccess)
          f->p2p[i][j] = can ? 1 : 0;
      }
  }
  if (clear) (void)symmpin_cuda.get_last_error();
}

/* Priority 101, like the host table (query.c): installed before any wrapped call can need it. */
__attribute__((constructor(101))) static void symmpin_banner_probe_install(void) {
  symmpin_cuda_queries_init();
  symmpin_banner_probe p = {.versions = probe_versions, .gpu = probe_gpu};
  symmpin_banner_install(&p);
}
