/* FAKE for CPU tests: preloaded AFTER libsymmpin.so, it answers the version banner's questions in
 * place of the fake runtime and NCCL (tests/fakes), whose answers are fixed: ncclGetVersion (the
 * real-symbol lookup from libsymmpin finds this one first) returns SYMMPIN_TEST_NCCL_VERSION, and
 * the CUDA runtime describes two "FAKE H200" GPUs (sm_90) with P2P access from 0 to 1 only. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

ncclResult_t ncclGetVersion(int *version) {
  const char *v = getenv("SYMMPIN_TEST_NCCL_VERSION");
  if (v && strcmp(v, "fail") == 0) return ncclSystemError;
  *version = v ? atoi(v) : NCCL_VERSION_CODE;
  return ncclSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v) {
  *v = 13000;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v) {
  *v = 13010;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *n) {
  *n = 2;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device) {
  if (device < 0 || device > 1) return cudaErrorInvalidDevice;
  memset(p, 0, sizeof *p);
  strcpy(p->name, "FAKE H200");
  p->major = 9;
  p->minor = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer) {
  *can = device == 0 && peer == 1;
  return cudaSuccess;
}
