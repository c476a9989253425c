/* The one list of the functions libsymmpin.so wraps and exports. Everything that must agree with
 * it is generated from it: the real-symbol table (real_table.c: one lazily resolved pointer per
 * name), the export map (symmpin.map.in, run through the C preprocessor at build time), and the
 * CI check that `nm -D` of the built library shows exactly these names (tests/interpose/
 * list_wrapped.c prints the list for it). A wrapper defined without an entry here would not be
 * exported (the map's `local: *` hides it, and programs would reach the real library directly);
 * an entry without a wrapper fails the link of the export check.
 *
 * X(lib, name): lib is CUDART or NCCL, the library whose real function the wrapper calls.
 * No #include: the export map is preprocessed from this file alone. */
#ifndef SYMMPIN_INTERPOSE_WRAPPED_H
#define SYMMPIN_INTERPOSE_WRAPPED_H

#define SYMMPIN_WRAPPED(X)            \
  X(CUDART, cudaMalloc)               \
  X(CUDART, cudaFree)                 \
  X(CUDART, cudaMallocAsync)          \
  X(CUDART, cudaFreeAsync)            \
  X(NCCL, ncclMemAlloc)               \
  X(NCCL, ncclMemFree)                \
  X(NCCL, ncclCommInitRank)           \
  X(NCCL, ncclCommInitRankConfig)     \
  X(NCCL, ncclCommInitRankScalable)   \
  X(NCCL, ncclCommInitAll)            \
  X(NCCL, ncclCommSplit)              \
  X(NCCL, ncclCommDestroy)            \
  X(NCCL, ncclCommAbort)              \
  X(NCCL, ncclCommFinalize)           \
  X(NCCL, ncclCommGetAsyncError)      \
  X(NCCL, ncclGroupStart)             \
  X(NCCL, ncclGroupEnd)               \
  X(NCCL, ncclGroupSimulateEnd)       \
  X(NCCL, ncclAllReduce)

#endif
