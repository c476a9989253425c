/* What preload/ asks of CUDA and NCCL besides the events themselves, supplied by interpose/ (the
 * only module that includes their headers and resolves the real functions). interpose/ installs
 * the table once when the library loads, so the arrows point one way: interpose -> preload.
 *
 * Until it is installed (a wrapped call before the library's constructors ran, or a CPU test that
 * installs nothing) every answer is the safe "unknown": no device, capture state unknown (treated
 * as capturing: nothing is allocated or agreed), communicator rank unknown. */
#ifndef SYMMPIN_PRELOAD_HOST_H
#define SYMMPIN_PRELOAD_HOST_H

#include <stddef.h>

typedef struct symmpin_host {
  /* The calling thread's current CUDA device, -1 if the runtime says no. */
  int (*device)(void);
  /* Whether `stream` (a cudaStream_t) is capturing a CUDA graph: 1 yes (also an invalidated
   * capture), 0 no, -1 unknown. When 1 and capture_id is not NULL, *capture_id is the capture
   * sequence's id (unique in the process: cudaStreamGetCaptureInfo's). */
  int (*capturing)(void *stream, unsigned long long *capture_id);
  /* The real ncclCommUserRank and ncclCommCount of `comm`: the ncclResult_t (0 = success,
   * 7 = ncclInProgress while a non-blocking init runs); rank and nranks set only on success. */
  int (*comm_rank)(void *comm, int *rank, int *nranks);
} symmpin_host;

/* Install the table (copied; any member may be NULL = unknown). */
void symmpin_host_install(const symmpin_host *h);

/* The answers, or the safe defaults above. */
int symmpin_host_device(void);
int symmpin_host_capturing(void *stream);
/* The same, with the capture sequence's id in *capture_id when capturing (else 0). */
int symmpin_host_capture_id(void *stream, unsigned long long *capture_id);
int symmpin_host_comm_rank(void *comm, int *rank, int *nranks);
/* The whole table (members NULL until installed). */
const symmpin_host *symmpin_host_table(void);

#endif
