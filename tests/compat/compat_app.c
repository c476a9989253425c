/* A small NCCL 'program' for tests/compat, linked against the FAKE libcudart and libnccl of
 * tests/fakes (CPU only): two communicators initialised one after the other (the banner must
 * appear once per process, not per communicator), then destroyed. Prints "ok" and exits 0. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>

int main(void) {
  if (cudaSetDevice(0) != cudaSuccess) return 1;
  ncclComm_t comm[2];
  for (int i = 0; i < 2; i++) {
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm[i], 1, id, 0) != ncclSuccess) {
      printf("FAIL init %d\n", i);
      return 1;
    }
  }
  for (int i = 0; i < 2; i++) ncclCommDestroy(comm[i]);
  printf("ok\n");
  return 0;
}
