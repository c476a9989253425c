/* FAKE for CPU tests: preloaded AFTER libsymmpin.so, it answers the version banner's questions in
 * place of the fake runtime and NCCL (tests/fakes), whose answers are fixed: ncclGetVersion (the
 * real-symbol lookup from libsymmpin finds this one first) returns SYMMPIN_TEST_NCCL_VERSION, and,
 * through symmpin's test seam (interpose/cuda_queries.h: on because the fake runtime is loaded),
 * the driver supports CUDA 13.1 and two "FAKE H200" GPUs (sm_90) have P2P access from 0 to 1 only.
 * symmpin's own runtime version is not asked (it is the one symmpin was built with), nor is the
 * program's asked here (it is read from the loaded libcudart.so.13 itself, the fake). */
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
