/* FAKE for CPU tests (test_fake_cuda.c): a shim that overrides one function of the fake driver.
 * Loaded into the global scope (LD_PRELOAD, or dlopen with RTLD_GLOBAL), its cuDeviceGetAttribute
 * is what the fake's cuGetProcAddress returns: every attribute of every device is 42. */
#include <cuda.h>

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  (void)attrib, (void)dev;
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  *pi = 42;
  return CUDA_SUCCESS;
}
