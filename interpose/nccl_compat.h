/* The NCCL calls symmpin wraps that an older nccl.h than the newest NCCL lacks, declared here
 * exactly as NCCL declares them, so that symmpin builds against any nccl.h from 2.22 on (the
 * toolkit's is 2.28.9, which lacks 2.29's). Each block is copied from the nccl.h of the release
 * that added it and compiled only where the included nccl.h is older; the wrapper itself finds
 * the function in the loaded NCCL at run time (real.h) and fails the call with ncclSystemError
 * when it is not there (docs/compatibility.md).
 *
 * Include after <nccl.h>. */
#ifndef SYMMPIN_INTERPOSE_NCCL_COMPAT_H
#define SYMMPIN_INTERPOSE_NCCL_COMPAT_H

#include <nccl.h>

#ifndef NCCL_VERSION_CODE
#error "include <nccl.h> first"
#endif

/* The declarations below are NCCL's, character for character: not formatted. */
/* clang-format off */

/* NCCL 2.27.3 (nccl.h of nvidia-nccl-cu13 2.27.7). */
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 27, 0)
/* ncclCommShrink flags*/
#define NCCL_SHRINK_DEFAULT 0x00 /* shrink the parent communicator */
#define NCCL_SHRINK_ABORT 0x01   /* First, terminate ongoing parent operations, and then shrink the parent communicator */
ncclResult_t  ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
#endif

/* NCCL 2.28 (nccl.h of nvidia-nccl-cu13 2.28.9; the call came with 2.28.7). */
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 28, 7)
/* ncclCommRevoke flags */
#define NCCL_REVOKE_DEFAULT 0x00 /* reserved for future use; must be 0 */
ncclResult_t  ncclCommRevoke(ncclComm_t comm, int revokeFlags);
#endif

/* NCCL 2.29 (nccl.h of nvidia-nccl-cu13 2.29.7). */
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 0)
ncclResult_t  ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm, ncclConfig_t* config);
/* Communicator suspend flags */
#define NCCL_SUSPEND_MEM 0x01       // Suspend memory (release dynamic allocations)
ncclResult_t  ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t  ncclCommResume(ncclComm_t comm);
#endif

/* clang-format on */

#endif
