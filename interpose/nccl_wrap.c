/* The NCCL wrappers: communicators, groups, NCCL allocations and the collectives symmpin serves
 * (ncclAllReduce, ncclAllGather, ncclReduceScatter). NCCL is not
 * linked: every real function is found at run time (real.h). This is also where the communicator
 * keys of docs/design.md "Identities" are derived from what the ranks share. */
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "interpose/callsite.h"
#include "interpose/nccl_compat.h" /* 2.27-2.29 declarations an older nccl.h lacks */
#include "preload/host.h"
#include "interpose/wrap.h"
#include "common/commkey.h"
#include "common/types.h"

/* common/types.h promises NCCL's numbers; checked here, where nccl.h is visible. */
_Static_assert(SYMMPIN_INT8 == (int)ncclInt8, "int8");
_Static_assert(SYMMPIN_UINT8 == (int)ncclUint8, "uint8");
_Static_assert(SYMMPIN_INT32 == (int)ncclInt32, "int32");
_Static_assert(SYMMPIN_UINT32 == (int)ncclUint32, "uint32");
_Static_assert(SYMMPIN_INT64 == (int)ncclInt64, "int64");
_Static_assert(SYMMPIN_UINT64 == (int)ncclUint64, "uint64");
_Static_assert(SYMMPIN_FLOAT16 == (int)ncclFloat16, "float16");
_Static_assert(SYMMPIN_FLOAT32 == (int)ncclFloat32, "float32");
_Static_assert(SYMMPIN_FLOAT64 == (int)ncclFloat64, "float64");
_Static_assert(SYMMPIN_BFLOAT16 == (int)ncclBfloat16, "bfloat16");
_Static_assert(SYMMPIN_FP8E4M3 == (int)ncclFloat8e4m3, "fp8 e4m3");
_Static_assert(SYMMPIN_FP8E5M2 == (int)ncclFloat8e5m2, "fp8 e5m2");
_Static_assert(SYMMPIN_DTYPE_COUNT == (int)ncclNumTypes, "datatype count");
_Static_assert(SYMMPIN_SUM == (int)ncclSum, "sum");
_Static_assert(SYMMPIN_PROD == (int)ncclProd, "prod");
_Static_assert(SYMMPIN_MAX == (int)ncclMax, "max");
_Static_assert(SYMMPIN_MIN == (int)ncclMin, "min");
_Static_assert(SYMMPIN_AVG == (int)ncclAvg, "avg");
_Static_assert(SYMMPIN_OP_COUNT == (int)ncclNumOps, "op count");

/* Returned when the real NCCL function cannot be found (the warning says why). */
#define SYMMPIN_NCCL_MISSING ncclSystemError

_Static_assert(SYMMPIN_NCCL_REMOTE_ERROR == (int)ncclRemoteError, "ncclRemoteError");
_Static_assert(SYMMPIN_NCCL_UNHANDLED_CUDA_ERROR == (int)ncclUnhandledCudaError,
               "ncclUnhandledCudaError");

/* The communicator key of an init: the unique ids every rank passed (common/commkey.h). */
static void key_of_ids(const ncclUniqueId *ids, int n, uint64_t *hi, uint64_t *lo) {
  symmpin_comm_key k = symmpin_comm_key_of_bytes(ids, (size_t)(n > 0 ? n : 0) * sizeof(ncclUniqueId));
  *hi = k.hi;
  *lo = k.lo;
}

/* NCCL's default is blocking unless the config or NCCL_COMM_BLOCKING says otherwise. */
static bool config_blocking(const ncclConfig_t *config) {
  if (config && config->blocking != NCCL_CONFIG_UNDEF_INT) return config->blocking != 0;
  const char *e = getenv("NCCL_COMM_BLOCKING");
  return !(e && e[0] == '0' && e[1] == '\0');
}

static bool made(ncclResult_t rc) { return rc == ncclSuccess || rc == ncclInProgress; }

SYMMPIN_EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
  SYMMPIN_WRAP_ENTER(ncclMemAlloc, SYMMPIN_NCCL_MISSING, (ptr, size));
  uint64_t stack = symmpin_callsite_stack(__builtin_return_address(0));
  ncclResult_t rc = real(ptr, size);
  symmpin_event_alloc(SYMMPIN_ALLOC_NCCL_MEM, rc == ncclSuccess && ptr ? *ptr : NULL, size, NULL,
                      stack, rc);
  symmpin_guard_leave();
  return rc;
}

SYMMPIN_EXPORT ncclResult_t ncclMemFree(void *ptr) {
  SYMMPIN_WRAP_ENTER(ncclMemFree, SYMMPIN_NCCL_MISSING, (ptr));
  symmpin_event_free(SYMMPIN_ALLOC_NCCL_MEM, ptr, NULL);
  ncclResult_t rc = real(ptr);
  symmpin_event_free_result(SYMMPIN_ALLOC_NCCL_MEM, ptr, rc);
  symmpin_guard_leave();
  return rc;
}

SYMMPIN_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id,
                                             int rank) {
  SYMMPIN_WRAP_ENTER(ncclCommInitRank, SYMMPIN_NCCL_MISSING, (comm, nranks, id, rank));
  int dev = symmpin_host_device(); /* NCCL uses the current device */
  ncclResult_t rc = real(comm, nranks, id, rank);
  uint64_t hi, lo;
  key_of_ids(&id, 1, &hi, &lo);
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, made(rc) && comm ? *comm : NULL, hi, lo, rank,
                          nranks, dev, config_blocking(NULL), rc);
  symmpin_guard_leave();
  return rc;
}

SYMMPIN_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
                                                   int rank, ncclConfig_t *config) {
  SYMMPIN_WRAP_ENTER(ncclCommInitRankConfig, SYMMPIN_NCCL_MISSING,
                     (comm, nranks, id, rank, config));
  int dev = symmpin_host_device();
  ncclResult_t rc = real(comm, nranks, id, rank, config);
  uint64_t hi, lo;
  key_of_ids(&id, 1, &hi, &lo);
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK_CONFIG, made(rc) && comm ? *comm : NULL, hi, lo,
                          rank, nranks, dev, config_blocking(config), rc);
  symmpin_guard_leave();
  return rc;
}

SYMMPIN_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank,
                                                     int nids, ncclUniqueId *ids,
                                                     ncclConfig_t *config) {
  SYMMPIN_WRAP_ENTER(ncclCommInitRankScalable, SYMMPIN_NCCL_MISSING,
                     (comm, nranks, rank, nids, ids, config));
  int dev = symmpin_host_device();
  ncclResult_t rc = real(comm, nranks, rank, nids, ids, config);
  uint64_t hi, lo;
  key_of_ids(ids, ids ? nids : 0, &hi, &lo);
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK_SCALABLE, made(rc) && comm ? *comm : NULL, hi,
                          lo, rank, nranks, dev, config_blocking(config), rc);
  symmpin_guard_leave();
  return rc;
}

/* 16 random bytes per process in every InitAll key. (pid, counter) alone can be predicted by
 * another local user, who could then create the board's name first (the board refuses a name it
 * does not own, so that would only keep the communicator on NCCL). All ranks of an InitAll live
 * in this process, so they still derive the same key. */
static uint64_t init_all_salt[2];
static pthread_once_t init_all_salt_once = PTHREAD_ONCE_INIT;

static void init_all_salt_draw(void) {
  ssize_t want = (ssize_t)sizeof init_all_salt;
  if (getrandom(init_all_salt, sizeof init_all_salt, GRND_NONBLOCK) == want) return;
  /* No entropy yet (early boot) or no getrandom: weaker, but still not (pid, counter) alone. */
  struct timespec a, b;
  clock_gettime(CLOCK_REALTIME, &a);
  clock_gettime(CLOCK_MONOTONIC, &b);
  init_all_salt[0] = (uint64_t)a.tv_sec * 1000000000u + (uint64_t)a.tv_nsec;
  init_all_salt[1] = ((uint64_t)b.tv_sec * 1000000000u + (uint64_t)b.tv_nsec) ^
                     (uint64_t)(uintptr_t)&a ^ (uint64_t)(uintptr_t)init_all_salt;
}

SYMMPIN_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
  static atomic_uint init_all_calls; /* the process's InitAll counter (design.md) */
  SYMMPIN_WRAP_ENTER(ncclCommInitAll, SYMMPIN_NCCL_MISSING, (comms, ndev, devlist));
  ncclResult_t rc = real(comms, ndev, devlist);
  pthread_once(&init_all_salt_once, init_all_salt_draw);
  uint64_t facts[5] = {0x494e4954414c4cULL /* "INITALL" */, (uint64_t)getpid(),
                       atomic_fetch_add(&init_all_calls, 1), init_all_salt[0], init_all_salt[1]};
  symmpin_comm_key k = symmpin_comm_key_of_bytes(facts, sizeof facts);
  uint64_t hi = k.hi, lo = k.lo;
  if (rc == ncclSuccess && comms && ndev > 0) {
    for (int i = 0; i < ndev; i++)
      symmpin_event_comm_init(SYMMPIN_COMM_INIT_ALL, comms[i], hi, lo, i, ndev,
                              devlist ? devlist[i] : i, true, rc);
  } else {
    symmpin_event_comm_init(SYMMPIN_COMM_INIT_ALL, NULL, hi, lo, -1, ndev, -1, true, rc);
  }
  symmpin_guard_leave();
  return rc;
}

SYMMPIN_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                          ncclConfig_t *config) {
  SYMMPIN_WRAP_ENTER(ncclCommSplit, SYMMPIN_NCCL_MISSING, (comm, color, key, newcomm, config));
  uint64_t hi, lo;
  symmpin_event_comm_split_key(comm, color, &hi, &lo);
  int dev = symmpin_host_device();
  ncclResult_t rc = real(comm, color, key, newcomm, config);
  /* The child's rank and size are learned at its first all-reduce (ncclCommUserRank/Count): a
   * non-blocking child may not answer yet. */
  symmpin_event_comm_init(SYMMPIN_COMM_SPLIT, made(rc) && newcomm ? *newcomm : NULL, hi, lo, -1,
                          -1, dev, config_blocking(config), rc);
  symmpin_guard_leave();
  return rc;
}

/* NCCL 2.27+: a child without the excluded ranks (which never call it). The child passes through
 * (events.h symmpin_event_comm_child); with NCCL_SHRINK_ABORT the parent's operations are stopped
 * first, symmpin's kernels of it too, and the parent stays with NCCL. */
SYMMPIN_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList,
                                           int excludeRanksCount, ncclComm_t *newcomm,
                                           ncclConfig_t *config, int shrinkFlags) {
  SYMMPIN_WRAP_ENTER(ncclCommShrink, SYMMPIN_NCCL_MISSING,
                     (comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags));
  bool aborting = (shrinkFlags & NCCL_SHRINK_ABORT) != 0;
  if (aborting) symmpin_event_comm_life(SYMMPIN_COMM_SHRINK_ABORT, comm, true);
  int dev = symmpin_host_device();
  ncclResult_t rc = real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  if (aborting) symmpin_event_comm_life_result(SYMMPIN_COMM_SHRINK_ABORT, comm, rc);
  symmpin_event_comm_child(SYMMPIN_COMM_SHRINK, comm, made(rc) && newcomm ? *newcomm : NULL, dev,
                           config_blocking(config), rc);
  symmpin_guard_leave();
  return rc;
}

/* NCCL 2.28.7+: in-flight operations stop, later ones are refused. NCCL accepts no flag but
 * NCCL_REVOKE_DEFAULT; a call it would refuse for its flags changes nothing in symmpin either. A
 * communicator that ended already (symmpin let go at its finalize) is not stopped again. */
SYMMPIN_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  SYMMPIN_WRAP_ENTER(ncclCommRevoke, SYMMPIN_NCCL_MISSING, (comm, revokeFlags));
  symmpin_event_comm_life(SYMMPIN_COMM_REVOKE, comm, revokeFlags == NCCL_REVOKE_DEFAULT);
  ncclResult_t rc = real(comm, revokeFlags);
  symmpin_event_comm_life_result(SYMMPIN_COMM_REVOKE, comm, rc);
  symmpin_guard_leave();
  return rc;
}

/* NCCL 2.29+: existing ranks pass their communicator (rank -1), new ranks NULL and their rank.
 * The child passes through (events.h); the old communicator is unchanged. */
SYMMPIN_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId,
                                         int rank, ncclComm_t *newcomm, ncclConfig_t *config) {
  SYMMPIN_WRAP_ENTER(ncclCommGrow, SYMMPIN_NCCL_MISSING,
                     (comm, nRanks, uniqueId, rank, newcomm, config));
  int dev = symmpin_host_device();
  ncclResult_t rc = real(comm, nRanks, uniqueId, rank, newcomm, config);
  symmpin_event_comm_child(SYMMPIN_COMM_GROW, comm, made(rc) && newcomm ? *newcomm : NULL, dev,
                           config_blocking(config), rc);
  symmpin_guard_leave();
  return rc;
}

/* NCCL 2.29+: with NCCL_SUSPEND_MEM, NCCL waits for the device, meets every rank and frees its
 * memory; symmpin lets go of the communicator for good (its kernels finish, its pool goes). Other
 * flags suspend nothing in NCCL, and nothing in symmpin. */
SYMMPIN_EXPORT ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  SYMMPIN_WRAP_ENTER(ncclCommSuspend, SYMMPIN_NCCL_MISSING, (comm, flags));
  symmpin_event_comm_life(SYMMPIN_COMM_SUSPEND, comm, (flags & NCCL_SUSPEND_MEM) != 0);
  ncclResult_t rc = real(comm, flags);
  symmpin_event_comm_life_result(SYMMPIN_COMM_SUSPEND, comm, rc);
  symmpin_guard_leave();
  return rc;
}

/* NCCL 2.29+: NCCL's memory comes back; symmpin's does not (the communicator stays with NCCL). */
SYMMPIN_EXPORT ncclResult_t ncclCommResume(ncclComm_t comm) {
  SYMMPIN_WRAP_ENTER(ncclCommResume, SYMMPIN_NCCL_MISSING, (comm));
  symmpin_event_comm_life(SYMMPIN_COMM_RESUME, comm, true);
  ncclResult_t rc = real(comm);
  symmpin_event_comm_life_result(SYMMPIN_COMM_RESUME, comm, rc);
  symmpin_guard_leave();
  return rc;
}

/* The three calls that end a communicator share one shape: symmpin lets go of it around the
 * real call (docs/design.md "End"). Entered with the guard set (SYMMPIN_WRAP_ENTER). */
static ncclResult_t comm_end(ncclResult_t (*real)(ncclComm_t), symmpin_comm_end call,
                             ncclComm_t comm) {
  symmpin_event_comm_end(call, comm);
  ncclResult_t rc = real(comm);
  symmpin_event_comm_end_result(call, comm, rc);
  symmpin_guard_leave();
  return rc;
}

#define SYMMPIN_COMM_END_WRAPPER(name, call)                 \
  SYMMPIN_EXPORT ncclResult_t name(ncclComm_t comm) {        \
    SYMMPIN_WRAP_ENTER(name, SYMMPIN_NCCL_MISSING, (comm)); \
    return comm_end(real, call, comm);                       \
  }
SYMMPIN_COMM_END_WRAPPER(ncclCommDestroy, SYMMPIN_COMM_DESTROY)
SYMMPIN_COMM_END_WRAPPER(ncclCommAbort, SYMMPIN_COMM_ABORT)
SYMMPIN_COMM_END_WRAPPER(ncclCommFinalize, SYMMPIN_COMM_FINALIZE)

/* PyTorch's watchdog (and any careful program) polls this: when NCCL itself reports nothing, the
 * error symmpin holds for the communicator (a symmpin kernel gave up) is reported instead. */
SYMMPIN_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  SYMMPIN_WRAP_REAL(ncclCommGetAsyncError, SYMMPIN_NCCL_MISSING);
  ncclResult_t rc = real(comm, asyncError);
  if (symmpin_wrap_bypass()) return rc;
  if (rc == ncclSuccess && asyncError && *asyncError == ncclSuccess) {
    symmpin_guard_enter();
    int mine = symmpin_event_comm_async_error(comm);
    symmpin_guard_leave();
    if (mine) *asyncError = (ncclResult_t)mine;
  }
  return rc;
}

SYMMPIN_EXPORT ncclResult_t ncclGroupStart(void) {
  SYMMPIN_WRAP_ENTER(ncclGroupStart, SYMMPIN_NCCL_MISSING, ());
  ncclResult_t rc = real();
  symmpin_event_group_start(rc);
  symmpin_guard_leave();
  return rc;
}

SYMMPIN_EXPORT ncclResult_t ncclGroupEnd(void) {
  SYMMPIN_WRAP_ENTER(ncclGroupEnd, SYMMPIN_NCCL_MISSING, ());
  /* symmpin's calls of the group first (what a failure would be reported with, once NCCL ran its
   * own: the peers take part in those). */
  int mine = symmpin_event_group_flush();
  ncclResult_t rc = real();
  symmpin_event_group_end(rc);
  symmpin_guard_leave();
  return rc == ncclSuccess && mine ? (ncclResult_t)mine : rc;
}

/* NCCL 2.22+: ends the group without running it (it estimates its time). symmpin drops what it
 * held for the group too, and leaves the group as ncclGroupEnd does. */
SYMMPIN_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo) {
  SYMMPIN_WRAP_ENTER(ncclGroupSimulateEnd, SYMMPIN_NCCL_MISSING, (simInfo));
  symmpin_event_group_drop();
  ncclResult_t rc = real(simInfo);
  symmpin_event_group_end(rc);
  symmpin_guard_leave();
  return rc;
}

/* The collectives: one event for the three (the collective is part of the call), then NCCL's own
 * call when symmpin did not take it. `count` is NCCL's count argument: the all-gather's sendcount,
 * the reduce-scatter's recvcount. The stack hash is taken here, in the wrapper the program called
 * (the caller's return address), so each wrapper fills its call itself. */
#define SYMMPIN_COLLECTIVE_CALL(c, coll_, send_, recv_, count_, dtype_, op_, comm_, stream_)       \
  symmpin_site_where where;                                                                        \
  uint64_t stack = symmpin_callsite_stack_where(__builtin_return_address(0), &where);              \
  symmpin_coll_call c = {                                                                          \
      .send = (send_),                                                                             \
      .recv = (recv_),                                                                             \
      .count = (count_),                                                                           \
      .dtype = (int)(dtype_),                                                                      \
      .op = (int)(op_),                                                                            \
      .coll = (coll_),                                                                             \
      .comm = (comm_),                                                                             \
      .stream = (void *)(stream_),                                                                 \
      .stack = stack,                                                                              \
      .where = where,                                                                              \
  }

SYMMPIN_EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                                          ncclDataType_t dtype, ncclRedOp_t op, ncclComm_t comm,
                                          cudaStream_t stream) {
  SYMMPIN_WRAP_ENTER(ncclAllReduce, SYMMPIN_NCCL_MISSING,
                     (send, recv, count, dtype, op, comm, stream));
  SYMMPIN_COLLECTIVE_CALL(c, SYMMPIN_COLL_ALLREDUCE, send, recv, count, dtype, op, comm, stream);
  int rc;
  if (!symmpin_event_collective(&c, &rc)) {
    rc = real(send, recv, count, dtype, op, comm, stream);
    symmpin_event_collective_result(&c, rc);
  }
  symmpin_guard_leave();
  return (ncclResult_t)rc;
}

/* An all-gather has no op: its calls carry 0, so a shape is (count, datatype) alone. */
SYMMPIN_EXPORT ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount,
                                          ncclDataType_t dtype, ncclComm_t comm,
                                          cudaStream_t stream) {
  SYMMPIN_WRAP_ENTER(ncclAllGather, SYMMPIN_NCCL_MISSING,
                     (send, recv, sendcount, dtype, comm, stream));
  SYMMPIN_COLLECTIVE_CALL(c, SYMMPIN_COLL_ALLGATHER, send, recv, sendcount, dtype, 0, comm, stream);
  int rc;
  if (!symmpin_event_collective(&c, &rc)) {
    rc = real(send, recv, sendcount, dtype, comm, stream);
    symmpin_event_collective_result(&c, rc);
  }
  symmpin_guard_leave();
  return (ncclResult_t)rc;
}

SYMMPIN_EXPORT ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount,
                                              ncclDataType_t dtype, ncclRedOp_t op, ncclComm_t comm,
                                              cudaStream_t stream) {
  SYMMPIN_WRAP_ENTER(ncclReduceScatter, SYMMPIN_NCCL_MISSING,
                     (send, recv, recvcount, dtype, op, comm, stream));
  SYMMPIN_COLLECTIVE_CALL(c, SYMMPIN_COLL_REDUCESCATTER, send, recv, recvcount, dtype, op, comm,
                          stream);
  int rc;
  if (!symmpin_event_collective(&c, &rc)) {
    rc = real(send, recv, recvcount, dtype, op, comm, stream);
    symmpin_event_collective_result(&c, rc);
  }
  symmpin_guard_leave();
  return (ncclResult_t)rc;
}
