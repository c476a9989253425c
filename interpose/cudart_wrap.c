/* The CUDA runtime wrappers: allocations and frees, passed through unchanged and recorded in the
 * allocation map (allocation after the real call succeeded, free before the real call, since the
 * address may be reused at once afterwards). */
#include <cuda_runtime_api.h>

#include "interpose/callsite.h"
#include "interpose/wrap.h"

/* Returned when the real runtime function cannot be found (the warning says why). */
#define SYMMPIN_CUDA_MISSING cudaErrorUnknown

SYMMPIN_EXPORT cudaError_t cudaMalloc(void **ptr, size_t size) {
  SYMMPIN_WRAP_ENTER(cudaMalloc, SYMMPIN_CUDA_MISSING, (ptr, size));
  uint64_t stack = symmpin_callsite_stack(__builtin_return_address(0));
  cudaError_t rc = real(ptr, size);
  symmpin_event_alloc(SYMMPIN_ALLOC_CUDA_MALLOC, rc == cudaSuccess && ptr ? *ptr : NULL, size,
                      NULL, stack, rc);
  symmpin_guard_leave();
  return rc;
}

SYMMPIN_EXPORT cudaError_t cudaFree(void *ptr) {
  SYMMPIN_WRAP_ENTER(cudaFree, SYMMPIN_CUDA_MISSING, (ptr));
  symmpin_event_free(SYMMPIN_ALLOC_CUDA_MALLOC, ptr, NULL);
  cudaError_t rc = real(ptr);
  symmpin_event_free_result(SYMMPIN_ALLOC_CUDA_MALLOC, ptr, rc);
  symmpin_guard_leave();
  return rc;
}

SYMMPIN_EXPORT cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream) {
  SYMMPIN_WRAP_ENTER(cudaMallocAsync, SYMMPIN_CUDA_MISSING, (ptr, size, stream));
  uint64_t stack = symmpin_callsite_stack(__builtin_return_address(0));
  cudaError_t rc = real(ptr, size, stream);
  symmpin_event_alloc(SYMMPIN_ALLOC_CUDA_MALLOC_ASYNC, rc == cudaSuccess && ptr ? *ptr : NULL,
                      size, (void *)stream, stack, rc);
  symmpin_guard_leave();
  return rc;
}

SYMMPIN_EXPORT cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
  SYMMPIN_WRAP_ENTER(cudaFreeAsync, SYMMPIN_CUDA_MISSING, (ptr, stream));
  symmpin_event_free(SYMMPIN_ALLOC_CUDA_MALLOC_ASYNC, ptr, (void *)stream);
  cudaError_t rc = real(ptr, stream);
  symmpin_event_free_result(SYMMPIN_ALLOC_CUDA_MALLOC_ASYNC, ptr, rc);
  symmpin_guard_leave();
  return rc;
}
