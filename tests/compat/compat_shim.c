/* FAKE for CPU tests: preloaded AFTER libsymmpin.so, it answers the version banner's questions in
 * place of the fake NCCL and driver (tests/fakes), whose answers are fixed: ncclGetVersion (the
 * real-symbol lookup from libsymmpin finds this one first) returns SYMMPIN_TEST_NCCL_VERSION, and
 * two "FAKE H200" GPUs (sm_90) have P2P access from 0 to 1 only: the fake driver's
 * cuGetProcAddress_v2 hands out the process's definition of a name where there is one, as a
 * driver shim would. The driver's version is not the shim's to give (symmpin reads it from
 * libcuda.so.1 itself): the test sets SYMMPIN_TEST_DRIVER_VERSION. The program's runtime version is
 * read from the loaded libcudart.so.13 itself, the fake. */
#include <cuda.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

ncclResult_t ncclGetVersion(int *version) {
  const char *v = getenv("SYMMPIN_TEST_NCCL_VERSION");
  if (v && strcmp(v, "fail") == 0) return ncclSystemError;
  *version = v ? atoi(v) : NCCL_VERSION_CODE;
  return ncclSuccess;
}

/* The driver's functions of the CUDA 12.0 ABI, under their base names (cuda.h renames none of
 * these four). */
CUresult cuDeviceGetCount(int *n) {
  *n = 2;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  if (dev < 0 || dev > 1 || len < 1) return CUDA_ERROR_INVALID_DEVICE;
  strncpy(name, "FAKE H200", (size_t)len);
  name[len - 1] = '\0';
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute attr, CUdevice dev) {
  if (dev < 0 || dev > 1) return CUDA_ERROR_INVALID_DEVICE;
  if (attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    *v = 9;
  else if (attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    *v = 0;
  else
    return CUDA_ERROR_NOT_SUPPORTED;
  return CUDA_SUCCESS;
}

CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
  *can = dev == 0 && peer == 1;
  return CUDA_SUCCESS;
}
