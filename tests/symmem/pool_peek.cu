// Test kernels for tests/gpu/test_pool.c: fill a pool range with a rank's pattern, and check a
// (possibly peer's) range by loading it directly from the GPU, which is what symmpin's kernels do.
#include <cuda_runtime.h>

#include "pool_pattern.h"

static __global__ void fill_kernel(uint64_t *dst, uint64_t first, size_t words, uint64_t seed,
                                   int rank) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = symmpin_test_pattern(seed, rank, first + i);
}

static __global__ void check_kernel(const volatile uint64_t *src, uint64_t first, size_t words,
                                    uint64_t seed, int rank, unsigned long long *bad) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
       i += (size_t)gridDim.x * blockDim.x)
    mine += src[i] != symmpin_test_pattern(seed, rank, first + i);
  if (mine) atomicAdd(bad, mine);
}

extern "C" int symmpin_test_fill(void *dst, uint64_t first_word, size_t words, uint64_t seed,
                                 int rank) {
  fill_kernel<<<256, 256>>>((uint64_t *)dst, first_word, words, seed, rank);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return (int)e;
}

extern "C" int symmpin_test_check(const void *src, uint64_t first_word, size_t words, uint64_t seed,
                                  int rank, unsigned long long *mismatches) {
  unsigned long long *bad = nullptr;
  cudaError_t e = cudaMalloc(&bad, sizeof(*bad));
  if (e != cudaSuccess) return (int)e;
  e = cudaMemset(bad, 0, sizeof(*bad));
  if (e == cudaSuccess) {
    check_kernel<<<256, 256>>>((const volatile uint64_t *)src, first_word, words, seed, rank, bad);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(mismatches, bad, sizeof(*bad), cudaMemcpyDeviceToHost);
  cudaFree(bad);
  return (int)e;
}
