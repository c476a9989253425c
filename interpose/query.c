/* CUDA and NCCL queries for the preload (query.h). The CUDA runtime is linked (libcudart.so.13 is
 * NEEDED); NCCL is not, so its query functions are resolved like the wrapped ones. */
#include "interpose/query.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "interpose/real.h"

int symmpin_query_device(void) {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) return -1;
  return dev;
}

int symmpin_query_capturing(void *stream) {
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamGetCaptureInfo((cudaStream_t)stream, &st, NULL, NULL, NULL, NULL, NULL) !=
      cudaSuccess)
    return -1;
  return st != cudaStreamCaptureStatusNone;
}

static symmpin_real_sym real_user_rank = SYMMPIN_REAL_SYM_INIT(SYMMPIN_REAL_NCCL, ncclCommUserRank);
static symmpin_real_sym real_count = SYMMPIN_REAL_SYM_INIT(SYMMPIN_REAL_NCCL, ncclCommCount);

int symmpin_query_comm(void *comm, int *rank, int *nranks) {
  ncclResult_t (*user_rank)(const ncclComm_t, int *) = symmpin_real_get(&real_user_rank);
  ncclResult_t (*count)(const ncclComm_t, int *) = symmpin_real_get(&real_count);
  if (!user_rank || !count) return ncclSystemError;
  int r = -1, n = -1;
  ncclResult_t rc = user_rank((ncclComm_t)comm, &r);
  if (rc == ncclSuccess) rc = count((ncclComm_t)comm, &n);
  if (rc != ncclSuccess) return rc;
  *rank = r;
  *nranks = n;
  return ncclSuccess;
}
