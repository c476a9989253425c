/* CPU tests of where a pool's chunks come from (symmpin_pool_set_allocator, symmem/pool.h): with an
 * allocator set, every chunk allocation and free goes through it and pool.c never calls
 * cudaMalloc/cudaFree by name (inside libsymmpin.so those names are the library's own wrappers).
 *
 * symmem/pool.c is compiled into this test against the stand-in CUDA runtime below instead of
 * libcudart, so the allocation paths run without a GPU: "device" memory is host memory, two
 * devices that reach each other, one process (peers are mapped through their pointers, no IPC).
 * Criterion runs every test in its own process, so the counters and pool.c's process-wide state
 * start fresh in each. The GPU side of the same contract is tests/gpu/test_pool.c. */
#include <criterion/criterion.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symmem/pool.h"

#define MIB ((size_t)1 << 20)

/* ---- stand-in CUDA runtime: what pool.c calls, counting cudaMalloc/cudaFree ---------------- */

static int n_cuda_malloc, n_cuda_free;
static int fail_memset; /* the next cudaMemsetAsync fails */
static cudaError_t last_error;
static __thread int cur_device;
static __thread enum cudaStreamCaptureMode cur_mode = cudaStreamCaptureModeGlobal;
static char the_stream;

static cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
  n_cuda_malloc++;
  *ptr = calloc(1, bytes);
  return *ptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void *ptr) {
  n_cuda_free++;
  free(ptr);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count) {
  *count = 2;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
  if (device < 0 || device >= 2) return fail(cudaErrorInvalidDevice);
  memset(prop, 0, sizeof(*prop));
  prop->uuid.bytes[0] = (char)(device + 1);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  *device = cur_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= 2) return fail(cudaErrorInvalidDevice);
  cur_device = device;
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
  enum cudaStreamCaptureMode old = cur_mode;
  cur_mode = *mode;
  *mode = old;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

const char *cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error (stand-in)" : "stand-in CUDA error";
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
  (void)flags;
  *stream = (cudaStream_t)(void *)&the_stream;
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream) {
  (void)stream;
  if (fail_memset) {
    fail_memset = 0;
    return fail(cudaErrorLaunchFailure);
  }
  memset(ptr, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  (void)stream;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  (void)stream;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *ptr) {
  memset(handle, 0, sizeof(*handle));
  memcpy(handle->reserved, &ptr, sizeof(ptr));
  return cudaSuccess;
}

/* Peers live in this process: pool.c must use their pointers and never open a handle. */
cudaError_t cudaIpcOpenMemHandle(void **ptr, cudaIpcMemHandle_t handle, unsigned int flags) {
  (void)ptr, (void)handle, (void)flags;
  return fail(cudaErrorNotSupported);
}

cudaError_t cudaIpcCloseMemHandle(void *ptr) {
  (void)ptr;
  return fail(cudaErrorNotSupported);
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer) {
  (void)device, (void)peer;
  *can = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  (void)peer, (void)flags;
  return cudaSuccess;
}

/* ---- the injected allocator ---------------------------------------------------------------- */

static int n_alloc, n_free, alloc_rc;
static size_t alloc_bytes[8];
static void *live[8]; /* chunks handed out and not freed yet */

static int test_alloc(void **ptr, size_t bytes) {
  if (alloc_rc) {
    n_alloc++;
    return alloc_rc;
  }
  void *p = malloc(bytes);
  if (!p || n_alloc >= 8) return (int)cudaErrorMemoryAllocation;
  memset(p, 0xab, bytes); /* the pool must zero what it gets */
  alloc_bytes[n_alloc] = bytes;
  live[n_alloc++] = p;
  *ptr = p;
  return 0;
}

static int test_free(void *ptr) {
  for (int i = 0; i < 8; i++)
    if (live[i] && live[i] == ptr) {
      live[i] = NULL;
      n_free++;
      free(ptr);
      return 0;
    }
  cr_expect(false, "the allocator was asked to free %p, which it never gave out", ptr);
  return (int)cudaErrorInvalidValue;
}

static const symmpin_device_allocator test_allocator = {test_alloc, test_free};

static int live_chunks(void) {
  int n = 0;
  for (int i = 0; i < 8; i++) n += live[i] != NULL;
  return n;
}

static bool all_zero(const void *p, size_t bytes) {
  const unsigned char *b = p;
  for (size_t i = 0; i < bytes; i++)
    if (b[i]) return false;
  return true;
}

/* One grow of a pool whose ranks all live in this process: every rank reserves, attaches, and
 * settles with the outcome `agreed` (as the agreement's verdict would say). */
static void grow_settled(symmpin_pool **pools, int nranks, size_t bytes, bool agreed) {
  unsigned char recs[4][SYMMPIN_POOL_EXPORT_BYTES];
  const void *records[4];
  for (int r = 0; r < nranks; r++) {
    cr_assert_eq(symmpin_pool_reserve(pools[r], bytes, recs[r]), SYMMPIN_OK, "reserve, rank %d", r);
    records[r] = recs[r];
  }
  for (int r = 0; r < nranks; r++)
    cr_assert_eq(symmpin_pool_attach(pools[r], records), SYMMPIN_OK, "attach, rank %d", r);
  for (int r = 0; r < nranks; r++) symmpin_pool_settle(pools[r], agreed);
}

static void grow(symmpin_pool **pools, int nranks, size_t bytes) {
  grow_settled(pools, nranks, bytes, true);
}

/* ---- tests --------------------------------------------------------------------------------- */

Test(pool_alloc, cuda_malloc_by_name_without_an_allocator) {
  symmpin_pool *p = NULL;
  cr_assert_eq(symmpin_pool_create(0, 1, 0, &p), SYMMPIN_OK);
  grow(&p, 1, 1000);
  cr_expect_eq(symmpin_pool_size(p), 1000u);
  cr_expect_eq(n_cuda_malloc, 1);
  symmpin_pool_destroy(p);
  cr_expect_eq(n_cuda_free, 1);
}

Test(pool_alloc, every_chunk_through_the_allocator) {
  symmpin_pool_set_allocator(&test_allocator);
  symmpin_pool *pools[2] = {NULL, NULL};
  for (int r = 0; r < 2; r++) cr_assert_eq(symmpin_pool_create(r, 2, r, &pools[r]), SYMMPIN_OK);

  grow(pools, 2, 1000);
  cr_expect_eq(n_alloc, 2, "one chunk per rank");
  cr_expect_eq(alloc_bytes[0], SYMMPIN_POOL_CHUNK_ALIGN, "rounded up to the chunk alignment");
  for (int r = 0; r < 2; r++) {
    void *mine = symmpin_pool_addr(pools[r], r, 0);
    cr_expect_eq(mine, live[r], "rank %d's chunk is the allocator's memory", r);
    cr_expect(all_zero(mine, SYMMPIN_POOL_CHUNK_ALIGN), "rank %d's chunk is zeroed", r);
    cr_expect_eq(symmpin_pool_addr(pools[1 - r], r, 0), mine, "the peer sees rank %d's chunk", r);
  }

  grow(pools, 2, 3 * MIB); /* a second chunk: [1000, 3 MiB), allocated as 4 MiB */
  cr_expect_eq(n_alloc, 4);
  cr_expect_eq(alloc_bytes[2], 2 * SYMMPIN_POOL_CHUNK_ALIGN);
  cr_expect_eq(symmpin_pool_size(pools[0]), 3 * MIB);

  for (int r = 0; r < 2; r++) cr_expect_eq(symmpin_pool_unmap_peers(pools[r]), SYMMPIN_OK);
  for (int r = 0; r < 2; r++) symmpin_pool_destroy(pools[r]);
  cr_expect_eq(n_free, 4);
  cr_expect_eq(live_chunks(), 0, "every chunk freed by the allocator that made it");
  cr_expect_eq(n_cuda_malloc, 0, "cudaMalloc never called by name");
  cr_expect_eq(n_cuda_free, 0, "cudaFree never called by name");
}

Test(pool_alloc, reserved_chunk_freed_through_the_allocator) {
  symmpin_pool_set_allocator(&test_allocator);
  symmpin_pool *p = NULL;
  cr_assert_eq(symmpin_pool_create(0, 2, 0, &p), SYMMPIN_OK);
  unsigned char rec[SYMMPIN_POOL_EXPORT_BYTES];
  cr_assert_eq(symmpin_pool_reserve(p, 4096, rec), SYMMPIN_OK); /* never attached */
  cr_expect_eq(n_alloc, 1);
  symmpin_pool_destroy(p);
  cr_expect_eq(n_free, 1);
  cr_expect_eq(n_cuda_malloc + n_cuda_free, 0);
}

Test(pool_alloc, failed_allocation_changes_nothing) {
  symmpin_pool_set_allocator(&test_allocator);
  symmpin_pool *p = NULL;
  cr_assert_eq(symmpin_pool_create(0, 1, 0, &p), SYMMPIN_OK);
  unsigned char rec[SYMMPIN_POOL_EXPORT_BYTES];
  alloc_rc = (int)cudaErrorMemoryAllocation;
  cr_expect_eq(symmpin_pool_reserve(p, 4096, rec), SYMMPIN_ERR_CUDA);
  cr_expect_eq(cudaGetLastError(), cudaSuccess, "the error is not left to the program");
  cr_expect_eq(symmpin_pool_size(p), 0u);
  alloc_rc = 0;
  grow(&p, 1, 4096); /* nothing was left reserved */
  cr_expect_eq(symmpin_pool_size(p), 4096u);
  symmpin_pool_destroy(p);
  cr_expect_eq(n_free, 1);
  cr_expect_eq(live_chunks(), 0);
  cr_expect_eq(n_cuda_malloc + n_cuda_free, 0);
}

Test(pool_alloc, chunk_that_cannot_be_zeroed_goes_back_to_the_allocator) {
  symmpin_pool_set_allocator(&test_allocator);
  symmpin_pool *p = NULL;
  cr_assert_eq(symmpin_pool_create(0, 1, 0, &p), SYMMPIN_OK);
  unsigned char rec[SYMMPIN_POOL_EXPORT_BYTES];
  fail_memset = 1;
  cr_expect_eq(symmpin_pool_reserve(p, 4096, rec), SYMMPIN_ERR_CUDA);
  cr_expect_eq(cudaGetLastError(), cudaSuccess, "the error is not left to the program");
  cr_expect_eq(n_alloc, 1);
  cr_expect_eq(n_free, 1);
  cr_expect_eq(n_cuda_free, 0);
  symmpin_pool_destroy(p);
}

Test(pool_alloc, pool_keeps_the_allocator_it_was_created_with) {
  symmpin_pool *before = NULL, *after = NULL;
  cr_assert_eq(symmpin_pool_create(0, 1, 0, &before), SYMMPIN_OK);
  symmpin_pool_set_allocator(&test_allocator);
  cr_assert_eq(symmpin_pool_create(0, 1, 0, &after), SYMMPIN_OK);
  grow(&before, 1, 4096);
  grow(&after, 1, 4096);
  cr_expect_eq(n_cuda_malloc, 1);
  cr_expect_eq(n_alloc, 1);
  symmpin_pool_set_allocator(NULL); /* back to by-name calls: chunks still go home */
  symmpin_pool_destroy(before);
  symmpin_pool_destroy(after);
  cr_expect_eq(n_cuda_free, 1);
  cr_expect_eq(n_free, 1);
}

Test(pool_alloc, incomplete_allocator_is_refused) {
  symmpin_pool_set_allocator(&test_allocator);
  const symmpin_device_allocator no_free = {test_alloc, NULL};
  const symmpin_device_allocator no_alloc = {NULL, test_free};
  symmpin_pool_set_allocator(&no_free);
  symmpin_pool_set_allocator(&no_alloc);
  symmpin_pool *p = NULL;
  cr_assert_eq(symmpin_pool_create(0, 1, 0, &p), SYMMPIN_OK);
  grow(&p, 1, 4096);
  cr_expect_eq(n_alloc, 1, "the earlier allocator stays");
  symmpin_pool_destroy(p);
  cr_expect_eq(n_free, 1);

  symmpin_pool_set_allocator(NULL);
  cr_assert_eq(symmpin_pool_create(0, 1, 0, &p), SYMMPIN_OK);
  grow(&p, 1, 4096);
  cr_expect_eq(n_cuda_malloc, 1, "NULL: cudaMalloc by name again");
  symmpin_pool_destroy(p);
  cr_expect_eq(n_cuda_free, 1);
}

/* ---- a grow whose epoch failed (issue 10: never block later growth) ---- */

Test(pool_alloc, failed_epoch_goes_back_to_the_old_size_and_reuses_its_chunk) {
  symmpin_pool_set_allocator(&test_allocator);
  symmpin_pool *pools[2] = {NULL, NULL};
  for (int r = 0; r < 2; r++) cr_assert_eq(symmpin_pool_create(r, 2, r, &pools[r]), SYMMPIN_OK);
  grow(pools, 2, 1000);
  grow_settled(pools, 2, 5000, false); /* attached everywhere, but the epoch failed */
  for (int r = 0; r < 2; r++) {
    cr_expect_eq(symmpin_pool_size(pools[r]), 1000u, "rank %d back to the agreed size", r);
    cr_expect_null(symmpin_pool_addr(pools[r], 1 - r, 1000), "the failed chunk is not mapped");
  }
  cr_expect_eq(n_alloc, 4);
  grow(pools, 2, 5000); /* the retry of the same size: the reserved chunks are exported again */
  cr_expect_eq(n_alloc, 4, "no new allocation for a retry of the same size");
  for (int r = 0; r < 2; r++) {
    cr_expect_eq(symmpin_pool_size(pools[r]), 5000u);
    cr_expect_not_null(symmpin_pool_addr(pools[r], 1 - r, 1000));
  }
  for (int r = 0; r < 2; r++) symmpin_pool_unmap_peers(pools[r]);
  for (int r = 0; r < 2; r++) symmpin_pool_destroy(pools[r]);
  cr_expect_eq(live_chunks(), 0);
}

Test(pool_alloc, failed_epoch_never_blocks_a_grow_of_another_size) {
  symmpin_pool_set_allocator(&test_allocator);
  symmpin_pool *pools[2] = {NULL, NULL};
  for (int r = 0; r < 2; r++) cr_assert_eq(symmpin_pool_create(r, 2, r, &pools[r]), SYMMPIN_OK);
  grow_settled(pools, 2, 4096, false);
  cr_expect_eq(symmpin_pool_size(pools[0]), 0u);
  grow(pools, 2, 3 * MIB); /* another size: a new chunk; the failed one waits for destroy */
  cr_expect_eq(symmpin_pool_size(pools[0]), 3 * MIB);
  cr_expect_eq(n_alloc, 4);
  cr_expect_eq(live_chunks(), 4, "the failed epoch's chunks are not freed while peers may map them");
  for (int r = 0; r < 2; r++) symmpin_pool_unmap_peers(pools[r]);
  for (int r = 0; r < 2; r++) symmpin_pool_destroy(pools[r]);
  cr_expect_eq(live_chunks(), 0, "destroy frees them all");
}

Test(pool_alloc, a_grow_must_be_settled_before_the_next) {
  symmpin_pool_set_allocator(&test_allocator);
  symmpin_pool *p = NULL;
  cr_assert_eq(symmpin_pool_create(0, 1, 0, &p), SYMMPIN_OK);
  unsigned char rec[SYMMPIN_POOL_EXPORT_BYTES];
  const void *records[1] = {rec};
  cr_assert_eq(symmpin_pool_reserve(p, 4096, rec), SYMMPIN_OK);
  cr_assert_eq(symmpin_pool_attach(p, records), SYMMPIN_OK);
  cr_expect_eq(symmpin_pool_reserve(p, 8192, rec), SYMMPIN_ERR_INVALID, "unsettled");
  symmpin_pool_settle(p, true);
  symmpin_pool_settle(p, false); /* nothing pending: a no-op, the agreed size stays */
  cr_expect_eq(symmpin_pool_size(p), 4096u);
  cr_expect_eq(symmpin_pool_reserve(p, 8192, rec), SYMMPIN_OK);
  symmpin_pool_destroy(p);
  cr_expect_eq(live_chunks(), 0);
}
