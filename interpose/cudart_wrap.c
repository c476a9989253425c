/* The CUDA runtime wrappers: allocations and frees, passed through unchanged and recorded in the
 * allocation map (allocation after the real call succeeded, free before the real call, since the
 * address may be reused at once afterwards). */
#include <cuda_runtime_api.h>

#include "interpose/callsite.h"
#include "interpose/real.h"
#include "interpose/wrap.h"

/* Returned when the real runtime function cannot be found (the warning says why). */
#define SYMMPIN_CUDA_MISSING cudaErrorUnknown

static symmpin_real_sym real_malloc = SYMMPIN_REAL_SYM_INIT(SYMMPIN_REAL_CUDART, cudaMalloc);
static symmpin_real_sym real_free = SYMMPIN_REAL_SYM_INIT(SYMMPIN_REAL_CUDART, cudaFree);
static symmpin_real_sym real_malloc_async =
    SYMMPIN_REAL_SYM_INIT(SYMMPIN_REAL_CUDART, cudaMallocAsync);
static symmpin_real_sym real_free_async = SYMMPIN_REAL_SYM_INIT(SYMMPIN_REAL_CUDART, cudaFreeAsync);

SYMMPIN_EXPORT cudaError_t cudaMalloc(void **ptr, size_t size) {
  cudaError_t (*real)(void **, size_t) = symmpin_real_get(&real_malloc);
  if (!real) return SYMMPIN_CUDA_MISSING;
  if (symmpin_wrap_bypass()) return real(ptr, size);
  symmpin_guard_enter();
  uint64_t stack = symmpin_callsite_stack(__builtin_return_address(0));
  cudaError_t rc = real(ptr, size);
  symmpin_event_alloc(SYMMPIN_ALLOC_CUDA_MALLOC, rc == cudaSuccess && ptr ? *ptr : NULL, size,
                      NULL, stack, rc);
  symmpin_guard_leave();
  return rc;
}

SYMMPIN_EXPORT cudaError_t cudaFree(void *ptr) {
  cudaError_t (*real)(void *) = symmpin_real_get(&real_free);
  if (!real) return SYMMPIN_CUDA_MISSING;
  if (symmpin_wrap_bypass()) return real(ptr);
  symmpin_guard_enter();
  symmpin_event_free(SYMMPIN_ALLOC_CUDA_MALLOC, ptr, NULL);
  cudaError_t rc = real(ptr);
  symmpin_event_free_result(SYMMPIN_ALLOC_CUDA_MALLOC, ptr, rc);
  symmpin_guard_leave();
  return rc;
}

SYMMPIN_EXPORT cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream) {
  cudaError_t (*real)(void **, size_t, cudaStream_t) = symmpin_real_get(&real_malloc_async);
  if (!real) return SYMMPIN_CUDA_MISSING;
  if (symmpin_wrap_bypass()) return real(ptr, size, stream);
  symmpin_guard_enter();
  uint64_t stack = symmpin_callsite_stack(__builtin_return_address(0));
  cudaError_t rc = real(ptr, size, stream);
  symmpin_event_alloc(SYMMPIN_ALLOC_CUDA_MALLOC_ASYNC, rc == cudaSuccess && ptr ? *ptr : NULL,
                      size, (void *)stream, stack, rc);
  symmpin_guard_leave();
  return rc;
}

SYMMPIN_EXPORT cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
  cudaError_t (*real)(void *, cudaStream_t) = symmpin_real_get(&real_free_async);
  if (!real) return SYMMPIN_CUDA_MISSING;
  if (symmpin_wrap_bypass()) return real(ptr, stream);
  symmpin_guard_enter();
  symmpin_event_free(SYMMPIN_ALLOC_CUDA_MALLOC_ASYNC, ptr, (void *)stream);
  cudaError_t rc = real(ptr, stream);
  symmpin_event_free_result(SYMMPIN_ALLOC_CUDA_MALLOC_ASYNC, ptr, rc);
  symmpin_guard_leave();
  return rc;
}
