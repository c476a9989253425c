/* The CUDA runtime functions symmpin asks outside the engine (the host table's current device and
 * capture state, interpose/query.c; the banner's facts, interpose/banner_probe.c), and the CPU
 * tests' seam for them.
 *
 * symmpin asks them of its OWN runtime, linked statically into libsymmpin (docs/design.md, "Two
 * CUDA runtimes"): the program's runtime may be of another major version, whose functions of the
 * same name take other arguments. On a machine without a GPU that runtime answers every question
 * with an error, so the CPU tests that check what symmpin does with the answers run their programs
 * on a FAKE libcudart.so.13 (tests/fakes) that defines the marker symbol below. In a process that
 * has the marker, and only there, these questions go to the program's runtime instead: the fake
 * (and what a test preloads after libsymmpin), found like the real functions behind the wrappers
 * (interpose/real.h). No CUDA runtime defines the marker, so no program turns the seam on, and
 * what it costs a program is one dlsym when the library loads. The engine's own CUDA calls
 * (events, launches, pools) never take the seam. */
#ifndef SYMMPIN_INTERPOSE_CUDA_QUERIES_H
#define SYMMPIN_INTERPOSE_CUDA_QUERIES_H

#include <cuda_runtime_api.h>
#include <stdbool.h>

/* Defined (as an int) by tests/fakes/fake_cudart.c alone. */
#define SYMMPIN_CUDA_QUERIES_SEAM_MARKER "symmpin_test_fake_cudart"

typedef struct symmpin_cuda_queries {
  cudaError_t (*get_device)(int *device);
  cudaError_t (*stream_get_capture_info)(cudaStream_t stream, enum cudaStreamCaptureStatus *status,
                                         unsigned long long *id, cudaGraph_t *graph,
                                         const cudaGraphNode_t **deps,
                                         const cudaGraphEdgeData **edges, size_t *ndeps);
  cudaError_t (*driver_get_version)(int *version);
  cudaError_t (*get_device_count)(int *count);
  cudaError_t (*get_device_properties)(struct cudaDeviceProp *prop, int device);
  cudaError_t (*device_can_access_peer)(int *can, int device, int peer);
  cudaError_t (*get_last_error)(void);
  cudaError_t (*peek_at_last_error)(void);
  const char *(*get_error_name)(cudaError_t error);
} symmpin_cuda_queries;

/* The functions in force: symmpin's own runtime's, or with the seam's marker the program's (a
 * function the program's runtime lacks stays symmpin's own). Filled by symmpin_cuda_queries_init;
 * read directly on the per-call path (one load, then the call, as a call into a shared library). */
extern symmpin_cuda_queries symmpin_cuda;

/* Decide once (idempotent, thread-safe); the library's constructors call it before they install
 * anything that uses symmpin_cuda. */
void symmpin_cuda_queries_init(void);
/* Whether the seam is on in this process (the FAKE runtime's marker was found). */
bool symmpin_cuda_queries_faked(void);

#endif
