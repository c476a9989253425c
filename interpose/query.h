/* What the preload asks CUDA and NCCL about, behind plain C signatures (no SDK types), so that
 * CUDA and NCCL headers stay in interpose/. */
#ifndef SYMMPIN_INTERPOSE_QUERY_H
#define SYMMPIN_INTERPOSE_QUERY_H

/* The calling thread's current CUDA device, -1 if the runtime says no. */
int symmpin_query_device(void);
/* Whether `stream` (a cudaStream_t) is capturing a CUDA graph: 1 yes (also an invalidated capture),
 * 0 no, -1 unknown (the query failed). Uses cudaStreamGetCaptureInfo, which is legal during
 * cudaStreamCaptureModeGlobal capture, unlike most CUDA calls. */
int symmpin_query_capturing(void *stream);
/* The real ncclCommUserRank and ncclCommCount of `comm` (an ncclComm_t). Returns the ncclResult_t
 * (0 = success, 7 = ncclInProgress for a non-blocking communicator still initialising); *rank
 * and *nranks are set only on success. */
int symmpin_query_comm(void *comm, int *rank, int *nranks);

#endif
