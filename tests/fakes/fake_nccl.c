/* FAKE for CPU tests: a stand-in for libnccl.so.2 (same soname, unversioned symbols like the
 * real one). One process plays every rank: a communicator is a small struct; an all-reduce of a
 * sum writes send * nranks into recv (what nranks equal contributions would give) for int32 and
 * float32, and copies for other types. Non-blocking communicators can be made to answer
 * ncclInProgress for a while. */
#include <nccl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_control.h"
#include "fake_counters.h"
#include "interpose/nccl_compat.h" /* the 2.27-2.29 calls, also where nccl.h is older */

#define FAKE_COMM_MAGIC 0x46414b45u /* "FAKE" */

struct ncclComm {
  unsigned magic;
  int rank, nranks, device;
  int blocking;
  int inprogress_left;
  int finalized;
  int revoked, suspended; /* ncclCommRevoke, ncclCommSuspend(NCCL_SUSPEND_MEM): calls refused */
};

static fake_counters counters = FAKE_COUNTERS_INIT;
static int inprogress_queries;
static unsigned id_counter;
static __thread int group_depth;
static __thread int current_device_hint;

void fake_nccl_fail_next(const char *fn, int rc) { fake_fail_next(&counters, fn, rc); }
long fake_nccl_count(const char *fn) { return fake_count(&counters, fn); }
void fake_nccl_set_inprogress_queries(int n) { __atomic_store_n(&inprogress_queries, n, __ATOMIC_SEQ_CST); }

static int valid(const struct ncclComm *c) { return c && c->magic == FAKE_COMM_MAGIC; }

const char *ncclGetErrorString(ncclResult_t rc) { return rc == ncclSuccess ? "no error (fake)" : "fake NCCL error"; }
const char *ncclGetLastError(ncclComm_t comm) { (void)comm; return ""; }

ncclResult_t ncclGetVersion(int *version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  int rc = fake_enter(&counters, "ncclGetUniqueId");
  if (rc) return (ncclResult_t)rc;
  memset(id, 0, sizeof *id);
  unsigned k = __atomic_add_fetch(&id_counter, 1, __ATOMIC_SEQ_CST);
  pid_t pid = getpid();
  memcpy(id->internal, "fakeid", 6);
  memcpy(id->internal + 8, &pid, sizeof pid);
  memcpy(id->internal + 16, &k, sizeof k);
  return ncclSuccess;
}

static ncclResult_t make_comm(ncclComm_t *out, int nranks, int rank, int blocking) {
  if (!out || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  struct ncclComm *c = calloc(1, sizeof *c);
  if (!c) return ncclSystemError;
  c->magic = FAKE_COMM_MAGIC;
  c->rank = rank;
  c->nranks = nranks;
  c->device = current_device_hint;
  c->blocking = blocking;
  c->inprogress_left = blocking ? 0 : __atomic_load_n(&inprogress_queries, __ATOMIC_SEQ_CST);
  *out = c;
  return blocking ? ncclSuccess : ncclInProgress;
}

static int blocking_of(const ncclConfig_t *config) {
  return !(config && config->blocking != NCCL_CONFIG_UNDEF_INT && config->blocking == 0);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  (void)id;
  int rc = fake_enter(&counters, "ncclCommInitRank");
  if (rc) return (ncclResult_t)rc;
  return make_comm(comm, nranks, rank, 1);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  (void)id;
  int rc = fake_enter(&counters, "ncclCommInitRankConfig");
  if (rc) return (ncclResult_t)rc;
  return make_comm(comm, nranks, rank, blocking_of(config));
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nids,
                                      ncclUniqueId *ids, ncclConfig_t *config) {
  (void)ids;
  int rc = fake_enter(&counters, "ncclCommInitRankScalable");
  if (rc) return (ncclResult_t)rc;
  if (nids < 1) return ncclInvalidArgument;
  return make_comm(comm, nranks, rank, blocking_of(config));
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
  int rc = fake_enter(&counters, "ncclCommInitAll");
  if (rc) return (ncclResult_t)rc;
  for (int i = 0; i < ndev; i++) {
    ncclResult_t r = make_comm(&comms[i], ndev, i, 1);
    if (r != ncclSuccess) return r;
    comms[i]->device = devlist ? devlist[i] : i;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config) {
  (void)key;
  int rc = fake_enter(&counters, "ncclCommSplit");
  if (rc) return (ncclResult_t)rc;
  if (!valid(comm) || !newcomm) return ncclInvalidArgument;
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = NULL;
    return ncclSuccess;
  }
  /* Every rank picks the same color in the tests: the child has the parent's shape. */
  ncclResult_t r = make_comm(newcomm, comm->nranks, comm->rank, blocking_of(config));
  if (r == ncclSuccess || r == ncclInProgress) (*newcomm)->device = comm->device;
  return r;
}

static ncclResult_t end_comm(const char *fn, ncclComm_t comm, int free_it) {
  int rc = fake_enter(&counters, fn);
  if (rc) return (ncclResult_t)rc;
  if (!valid(comm)) return ncclInvalidArgument;
  if (free_it) {
    comm->magic = 0;
    free(comm);
  } else {
    comm->finalized = 1;
  }
  return ncclSuccess;
}

/* The 2.27-2.29 calls, as NCCL documents them: excluded ranks never call ncclCommShrink (the child
 * has the others, renumbered); a revoked or suspended communicator refuses collectives
 * (ncclInvalidUsage) until a resume; a grown child has the new size. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags) {
  (void)shrinkFlags;
  int rc = fake_enter(&counters, "ncclCommShrink");
  if (rc) return (ncclResult_t)rc;
  if (!valid(comm) || !newcomm || !excludeRanksList || excludeRanksCount <= 0 ||
      excludeRanksCount >= comm->nranks)
    return ncclInvalidArgument;
  int below = 0;
  for (int i = 0; i < excludeRanksCount; i++) {
    if (excludeRanksList[i] == comm->rank) return ncclInvalidArgument;
    below += excludeRanksList[i] < comm->rank;
  }
  ncclResult_t r =
      make_comm(newcomm, comm->nranks - excludeRanksCount, comm->rank - below, blocking_of(config));
  if (r == ncclSuccess || r == ncclInProgress) (*newcomm)->device = comm->device;
  return r;
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  int rc = fake_enter(&counters, "ncclCommRevoke");
  if (rc) return (ncclResult_t)rc;
  if (!comm) return ncclSuccess;
  if (!valid(comm) || revokeFlags != NCCL_REVOKE_DEFAULT || comm->revoked || comm->finalized)
    return ncclInvalidArgument;
  comm->revoked = 1;
  return ncclSuccess;
}

ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                          ncclComm_t *newcomm, ncclConfig_t *config) {
  int rc = fake_enter(&counters, "ncclCommGrow");
  if (rc) return (ncclResult_t)rc;
  if (!newcomm || nRanks <= 0 || (comm && (!valid(comm) || nRanks <= comm->nranks || rank != -1)) ||
      (!comm && (!uniqueId || rank < 0)))
    return ncclInvalidArgument;
  ncclResult_t r = make_comm(newcomm, nRanks, comm ? comm->rank : rank, blocking_of(config));
  if (comm && (r == ncclSuccess || r == ncclInProgress)) (*newcomm)->device = comm->device;
  return r;
}

ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  int rc = fake_enter(&counters, "ncclCommSuspend");
  if (rc) return (ncclResult_t)rc;
  if (!valid(comm)) return ncclInvalidArgument;
  if (flags & NCCL_SUSPEND_MEM) comm->suspended = 1;
  return ncclSuccess;
}

ncclResult_t ncclCommResume(ncclComm_t comm) {
  int rc = fake_enter(&counters, "ncclCommResume");
  if (rc) return (ncclResult_t)rc;
  if (!valid(comm)) return ncclInvalidArgument;
  comm->suspended = 0;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return end_comm("ncclCommFinalize", comm, 0); }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return end_comm("ncclCommDestroy", comm, 1); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return end_comm("ncclCommAbort", comm, 1); }

static ncclResult_t query(const char *fn, ncclComm_t comm) {
  int rc = fake_enter(&counters, fn);
  if (rc) return (ncclResult_t)rc;
  if (!valid(comm)) return ncclInvalidArgument;
  if (comm->inprogress_left > 0) {
    comm->inprogress_left--;
    return ncclInProgress;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  ncclResult_t r = query("ncclCommUserRank", comm);
  if (r == ncclSuccess) *rank = comm->rank;
  return r;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  ncclResult_t r = query("ncclCommCount", comm);
  if (r == ncclSuccess) *count = comm->nranks;
  return r;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
  if (!valid(comm)) return ncclInvalidArgument;
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err) {
  if (!valid(comm)) return ncclInvalidArgument;
  *err = comm->inprogress_left > 0 ? ncclInProgress : ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) {
  int rc = fake_enter(&counters, "ncclGroupStart");
  if (rc) return (ncclResult_t)rc;
  group_depth++;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  int rc = fake_enter(&counters, "ncclGroupEnd");
  if (group_depth > 0) group_depth--;
  return (ncclResult_t)rc;
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo) {
  int rc = fake_enter(&counters, "ncclGroupSimulateEnd");
  if (group_depth > 0) group_depth--;
  if (simInfo) simInfo->estimatedTime = 1.0f;
  return (ncclResult_t)rc;
}

ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
  int rc = fake_enter(&counters, "ncclMemAlloc");
  if (rc) return (ncclResult_t)rc;
  if (!ptr) return ncclInvalidArgument;
  *ptr = calloc(1, size ? size : 1);
  return *ptr ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclMemFree(void *ptr) {
  int rc = fake_enter(&counters, "ncclMemFree");
  if (rc) return (ncclResult_t)rc;
  free(ptr);
  return ncclSuccess;
}

/* FAKE all-gather and reduce-scatter, as if every rank sent what this one sends (the FAKE
 * all-reduce's rule): the gather repeats the chunk nranks times; the scatter of float/int32 sums
 * to n x this rank's chunk `rank`, other types copy it. Counted like the real calls. */
static size_t fake_elem(ncclDataType_t dtype) {
  return dtype == ncclFloat64 || dtype == ncclInt64 || dtype == ncclUint64 ? 8
         : dtype == ncclFloat16 || dtype == ncclBfloat16                   ? 2
         : dtype == ncclInt8 || dtype == ncclUint8                         ? 1
                                                                           : 4;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t dtype,
                           ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  int rc = fake_enter(&counters, "ncclAllGather");
  if (rc) return (ncclResult_t)rc;
  if (!valid(comm) || comm->finalized) return ncclInvalidArgument;
  if (comm->revoked || comm->suspended) return ncclInvalidUsage;
  if (!send || !recv) return ncclInvalidArgument;
  size_t b = count * fake_elem(dtype);
  for (int r = 0; r < comm->nranks; r++)
    if ((const char *)recv + r * b != send) memmove((char *)recv + r * b, send, b);
  return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t dtype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  int rc = fake_enter(&counters, "ncclReduceScatter");
  if (rc) return (ncclResult_t)rc;
  if (!valid(comm) || comm->finalized) return ncclInvalidArgument;
  if (comm->revoked || comm->suspended) return ncclInvalidUsage;
  if (!send || !recv) return ncclInvalidArgument;
  int n = comm->nranks, me = comm->rank < 0 ? 0 : comm->rank;
  size_t b = count * fake_elem(dtype);
  const char *mine = (const char *)send + (size_t)me * b;
  if (op == ncclSum && dtype == ncclFloat32) {
    for (size_t i = 0; i < count; i++) ((float *)recv)[i] = ((const float *)mine)[i] * (float)n;
  } else if (op == ncclSum && dtype == ncclInt32) {
    for (size_t i = 0; i < count; i++) ((int32_t *)recv)[i] = ((const int32_t *)mine)[i] * n;
  } else if (mine != recv) {
    memmove(recv, mine, b);
  }
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t dtype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  int rc = fake_enter(&counters, "ncclAllReduce");
  if (rc) return (ncclResult_t)rc;
  if (!valid(comm) || comm->finalized) return ncclInvalidArgument;
  if (comm->revoked || comm->suspended) return ncclInvalidUsage;
  if (!send || !recv) return ncclInvalidArgument;
  int n = comm->nranks;
  if (op == ncclSum && dtype == ncclFloat32) {
    const float *s = send;
    float *r = recv;
    for (size_t i = 0; i < count; i++) r[i] = s[i] * (float)n;
  } else if (op == ncclSum && dtype == ncclInt32) {
    const int32_t *s = send;
    int32_t *r = recv;
    for (size_t i = 0; i < count; i++) r[i] = s[i] * n;
  } else {
    size_t elem = dtype == ncclFloat64 || dtype == ncclInt64 || dtype == ncclUint64 ? 8
                  : dtype == ncclFloat16 || dtype == ncclBfloat16                  ? 2
                  : dtype == ncclInt8 || dtype == ncclUint8                        ? 1
                                                                                   : 4;
    if (send != recv) memmove(recv, send, count * elem);
  }
  return ncclSuccess;
}
