/* The one list of the functions libsymmpin.so wraps and exports. Everything that must agree with
 * it is generated from it: the real-symbol table (real_table.c: one lazily resolved pointer per
 * name), the export map (symmpin.map.in, run through the C preprocessor at build time), and the
 * CI check that `nm -D` of the built library shows exactly these names (tests/interpose/
 * list_wrapped.c prints the list for it). A wrapper defined without an entry here would not be
 * exported (the map's `local: *` hides it, and programs would reach the real library directly);
 * an entry without a wrapper fails the link of the export check.
 *
 * X(lib, name): lib is CUDART or NCCL, the library whose real function the wrapper calls. Every
 * name is exported whatever the loaded library has (ncclCommShrink came with NCCL 2.27,
 * ncclCommRevoke with 2.28.7, ncclCommGrow, ncclCommSuspend and ncclCommResume with 2.29): a call
 * of one the loaded NCCL lacks fails with ncclSystemError (real.h), where without symmpin the
 * program could not have resolved it at all.
 * No #include: the export map is preprocessed from this file alone. */
#ifndef SYMMPIN_INTERPOSE_WRAPPED_H
#define SYMMPIN_INTERPOSE_WRAPPED_H

#define SYMMPIN_WRAPPED(X)                                                                         \
  X(CUDART, cudaMalloc)                                                                            \
  X(CUDART, cudaFree)                                                                              \
  X(CUDART, cudaMallocAsync)                                                                       \
  X(CUDART, cudaFreeAsync)                                                                         \
  X(NCCL, ncclMemAlloc)                                                                            \
  X(NCCL, ncclMemFree)                                                                             \
  X(NCCL, ncclCommInitRank)                                                                        \
  X(NCCL, ncclCommInitRankConfig)                                                                  \
  X(NCCL, ncclCommInitRankScalable)                                                                \
  X(NCCL, ncclCommInitAll)                                                                         \
  X(NCCL, ncclCommSplit)                                                                           \
  X(NCCL, ncclCommDestroy)                                                                         \
  X(NCCL, ncclCommAbort)                                                                           \
  X(NCCL, ncclCommFinalize)                                                                        \
  X(NCCL, ncclCommGetAsyncError)                                                                   \
  X(NCCL, ncclCommShrink)                                                                          \
  X(NCCL, ncclCommRevoke)                                                                          \
  X(NCCL, ncclCommGrow)                                                                            \
  X(NCCL, ncclCommSuspend)                                                                         \
  X(NCCL, ncclCommResume)                                                                          \
  X(NCCL, ncclGroupStart)                                                                          \
  X(NCCL, ncclGroupEnd)                                                                            \
  X(NCCL, ncclGroupSimulateEnd)                                                                    \
  X(NCCL, ncclAllReduce)                                                                           \
  X(NCCL, ncclAllGather)                                                                           \
  X(NCCL, ncclReduceScatter)

#endif
