/* FAKE for CPU tests: a 'user' library like libtorch_cuda: it has libnccl.so.2 as NEEDED and is
 * dlopen'ed RTLD_LOCAL by the test program, so NCCL sits outside the global scope and
 * dlsym(RTLD_NEXT) from libsymmpin cannot see it. */
#include <nccl.h>
#include <stdlib.h>

/* One communicator, one all-reduce of n floats (value v), destroy. Returns the all-reduce's
 * result code; *out receives recv[0]. */
int fakeuser_run(int n, float v, float *out) {
  ncclUniqueId id;
  ncclComm_t comm;
  ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc == ncclSuccess) rc = ncclCommInitRank(&comm, 2, id, 0);
  if (rc != ncclSuccess) return 1000 + (int)rc;
  float *send = malloc((size_t)n * sizeof *send), *recv = malloc((size_t)n * sizeof *recv);
  for (int i = 0; i < n; i++) send[i] = v;
  rc = ncclAllReduce(send, recv, (size_t)n, ncclFloat32, ncclSum, comm, NULL);
  *out = recv[0];
  free(send);
  free(recv);
  ncclCommDestroy(comm);
  return (int)rc;
}
