/* symmpin's one door to CUDA: the driver API, opened at run time, at the CUDA 12.0 ABI.
 *
 * libsymmpin carries no CUDA runtime (docs/design.md, "One driver, no runtime"). Every CUDA call
 * symmpin makes for itself goes through the table below, which this module fills once from
 * libcuda.so.1 with cuGetProcAddress_v2 asking for the function as CUDA 12.0 defined it (version
 * 12000). Any driver from r525 on answers those, so one build runs on every driver PyTorch's
 * CUDA 12 and 13 wheels run on, and the functions keep one form whatever newer headers say (cuda.h
 * of CUDA 13 maps cuStreamGetCaptureInfo to a _v3 with graph edges; at 12000 the driver gives the
 * _v2 below). This module is the only place that names a cu* function: callers write
 * symmpin_cu.EventRecord(...), with the types of cuda.h and the PFN types of cudaTypedefs.h.
 *
 * The program's own CUDA calls never come here: the wrappers pass them to the program's runtime,
 * whatever its version. Both meet in the driver: the program's cudaSetDevice makes a primary
 * context current, which is what symmpin's CtxGetCurrent sees, and streams, events and graphs are
 * driver objects both sides take as they are. The driver keeps no "last error", so nothing symmpin
 * does here can hide or clear an error the program has pending.
 *
 * Nothing happens at load: the driver is opened by the first symmpin_cu_open() (the first
 * communicator, or the first question about the current device). */
#ifndef SYMMPIN_DRIVER_CU_H
#define SYMMPIN_DRIVER_CU_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI every entry point is asked for: CUDA 12.0 (drivers r525 and newer). */
#define SYMMPIN_CU_ABI 12000

/* Every driver function symmpin uses: X(name without "cu", the cudaTypedefs.h version of the form
 * that version SYMMPIN_CU_ABI returns). A function added here is resolved, checked and faked
 * (tests/fakes/fake_cuda.c) with the rest. */
#define SYMMPIN_CU_FUNCTIONS(X)                                                                    \
  X(GetErrorName, 6000)                                                                            \
  X(Init, 2000)                                                                                    \
  X(DeviceGet, 2000)                                                                               \
  X(DeviceGetCount, 2000)                                                                          \
  X(DeviceGetAttribute, 2000)                                                                      \
  X(DeviceGetName, 2000)                                                                           \
  X(DeviceGetUuid, 11040)                                                                          \
  X(DeviceCanAccessPeer, 4000)                                                                     \
  X(DevicePrimaryCtxRetain, 7000)                                                                  \
  X(CtxGetCurrent, 4000)                                                                           \
  X(CtxSetCurrent, 4000)                                                                           \
  X(CtxGetDevice, 2000)                                                                            \
  X(CtxGetId, 12000)                                                                               \
  X(StreamGetCaptureInfo, 11030)                                                                   \
  X(ThreadExchangeStreamCaptureMode, 10010)                                                        \
  X(StreamCreate, 2000)                                                                            \
  X(StreamDestroy, 4000)                                                                           \
  X(StreamSynchronize, 2000)                                                                       \
  X(StreamWaitEvent, 3020)                                                                         \
  X(StreamQuery, 2000)                                                                             \
  X(EventCreate, 2000)                                                                             \
  X(EventDestroy, 4000)                                                                            \
  X(EventRecord, 2000)                                                                             \
  X(EventQuery, 2000)                                                                              \
  X(EventSynchronize, 2000)                                                                        \
  X(EventElapsedTime, 2000)                                                                        \
  X(MemHostAlloc, 2020)                                                                            \
  X(MemFreeHost, 2000)                                                                             \
  X(MemHostGetDevicePointer, 3020)                                                                 \
  X(MemsetD8Async, 3020)                                                                           \
  X(UserObjectCreate, 11030)                                                                       \
  X(UserObjectRelease, 11030)                                                                      \
  X(GraphRetainUserObject, 11030)                                                                  \
  X(LibraryLoadData, 12000)                                                                        \
  X(LibraryGetKernel, 12000)                                                                       \
  X(KernelGetFunction, 12000)                                                                      \
  X(LaunchKernelEx, 11060)                                                                         \
  X(MemCreate, 10020)                                                                              \
  X(MemRelease, 10020)                                                                             \
  X(MemAddressReserve, 10020)                                                                      \
  X(MemAddressFree, 10020)                                                                         \
  X(MemMap, 10020)                                                                                 \
  X(MemUnmap, 10020)                                                                               \
  X(MemSetAccess, 10020)                                                                           \
  X(MemExportToShareableHandle, 10020)                                                             \
  X(MemImportFromShareableHandle, 10020)                                                           \
  X(MemGetAllocationGranularity, 10020)

typedef struct symmpin_cu_table {
#define SYMMPIN_CU_FIELD(name, ver) PFN_cu##name##_v##ver name;
  SYMMPIN_CU_FUNCTIONS(SYMMPIN_CU_FIELD)
#undef SYMMPIN_CU_FIELD
} symmpin_cu_table;

/* The functions, once symmpin_cu_open() said usable (before: all NULL). Read directly on the
 * per-call path: one load, then the call. */
extern symmpin_cu_table symmpin_cu;

/* What opening the driver found. */
typedef struct symmpin_cu_state {
  bool usable;        /* every function resolved and cuInit(0) succeeded */
  bool no_library;    /* libcuda.so.1 could not be loaded at all */
  int driver_version; /* cuDriverGetVersion (12040 = CUDA 12.4), -1 when unknown */
  /* When not usable: why, for one INFO line ("no libcuda.so.1: ...", "the driver supports CUDA
   * 11.8; symmpin needs 12.0 or newer (r525+)", "cuInit failed: CUDA_ERROR_NO_DEVICE (100)"). */
  char why[200];
} symmpin_cu_state;

/* Open libcuda.so.1 and fill the table, once per process (thread-safe; later calls return the
 * same answer at the cost of one pthread_once). Logs nothing: the caller reports the outcome. */
const symmpin_cu_state *symmpin_cu_open(void);

/* symmpin_cu_open()->usable. */
bool symmpin_cu_usable(void);

/* "CUDA_ERROR_NOT_READY" for a CUresult (the driver's name when the table is open, else a number
 * as text in a static buffer of this thread). */
const char *symmpin_cu_error_name(CUresult e);

#ifdef __cplusplus
}
#endif

#endif
