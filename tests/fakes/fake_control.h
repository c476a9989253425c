/* FAKE for CPU tests: the control functions of the fake libcuda.so.1, libcudart.so.13 and
 * libnccl.so.2 in this folder (they stand in for the CUDA driver, the CUDA runtime and NCCL on
 * machines without a GPU). Test programs call these to inject errors and read how often each real
 * (fake) function ran. */
#ifndef SYMMPIN_TESTS_FAKE_CONTROL_H
#define SYMMPIN_TESTS_FAKE_CONTROL_H

/* The next call of function `fn` returns `rc` instead of doing its work. */
void fake_cuda_fail_next(const char *fn, int rc);
/* How many times the fake's `fn` ran (also the failed ones). */
long fake_cuda_count(const char *fn);
/* cudaMalloc calls cudaMalloc (and cudaFree) once more from inside itself, through the global
 * symbol, i.e. through symmpin's wrapper when preloaded. */
void fake_cuda_set_nested(int on);
/* What cudaStreamGetCaptureInfo (and the driver's cuStreamGetCaptureInfo) reports: 0 none, 1
 * active. The same switch as fake_cu_set_capturing. */
void fake_cuda_set_capturing(int on);

/* The fake driver (fake_cuda.c). Function names are the driver's base names, "cu" and a name of
 * driver/cu.h's SYMMPIN_CU_FUNCTIONS ("cuEventDestroy", not "cuEventDestroy_v2"), or
 * "cuDriverGetVersion", "cuGetProcAddress" (either form); any other name aborts. */
/* The next call of driver function `fn` returns CUresult `rc` instead of doing its work. */
void fake_cu_fail_next(const char *fn, int rc);
/* How many times the fake driver's `fn` ran (also the failed ones). */
long fake_cu_count(const char *fn);
/* What cuStreamGetCaptureInfo reports for every stream: 0 none, 1 active. */
void fake_cu_set_capturing(int on);
int fake_cu_capturing(void);
/* The fake runtime's device (none of these is counted): the fake machine's 8 devices; make dev's
 * primary context current on this thread (and count the driver as initialized), as the real
 * runtime's cudaSetDevice does; CUresult, CUDA_ERROR_INVALID_DEVICE outside 0..7; the device of
 * this thread's current context, 0 when none (the real runtime's cudaGetDevice answer). */
int fake_cu_device_count(void);
int fake_cu_set_device(int dev);
int fake_cu_current_device(void);

void fake_nccl_fail_next(const char *fn, int rc);
long fake_nccl_count(const char *fn);
/* Non-blocking communicators answer ncclCommUserRank/Count with ncclInProgress this many times. */
void fake_nccl_set_inprogress_queries(int n);

#endif
