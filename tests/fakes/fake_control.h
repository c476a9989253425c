/* FAKE for CPU tests: the control functions of the fake libcudart.so.13 and libnccl.so.2 in this
 * folder (they stand in for the CUDA runtime and NCCL on machines without a GPU). Test programs
 * call these to inject errors and read how often each real (fake) function ran. */
#ifndef SYMMPIN_TESTS_FAKE_CONTROL_H
#define SYMMPIN_TESTS_FAKE_CONTROL_H

/* The next call of function `fn` returns `rc` instead of doing its work. */
void fake_cuda_fail_next(const char *fn, int rc);
/* How many times the fake's `fn` ran (also the failed ones). */
long fake_cuda_count(const char *fn);
/* cudaMalloc calls cudaMalloc (and cudaFree) once more from inside itself, through the global
 * symbol, i.e. through symmpin's wrapper when preloaded. */
void fake_cuda_set_nested(int on);
/* What cudaStreamGetCaptureInfo reports: 0 none, 1 active. */
void fake_cuda_set_capturing(int on);

void fake_nccl_fail_next(const char *fn, int rc);
long fake_nccl_count(const char *fn);
/* Non-blocking communicators answer ncclCommUserRank/Count with ncclInProgress this many times. */
void fake_nccl_set_inprogress_queries(int n);

#endif
