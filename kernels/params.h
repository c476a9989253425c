/* The kernels' parameters as the host passes them (by value, through cuLaunchKernelEx) and the
 * device reads them: one definition for launch.c (C) and the device code (kernels/device.cuh), so
 * that both sides agree on every offset. Private to kernels/. Plain C. */
#ifndef SYMMPIN_KERNELS_PARAMS_H
#define SYMMPIN_KERNELS_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/allreduce.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One call. */
typedef struct symmpin_kernel_params {
  char *slot[SYMMPIN_KERNEL_MAX_RANKS];
  const char *send;
  char *recv;
  /* Per rank: the all-reduce's input bytes; the all-gather's and reduce-scatter's chunk (send
   * resp. recv holds nranks chunks of `bytes`, chunk r at r * bytes). */
  size_t bytes;
  size_t units; /* LL lines or 16-byte vectors per rank (of one chunk) */
  int coll;     /* symmpin_coll */
  int rank, nranks;
  int inplace_slot; /* IN_SLOT: recv is this rank's own data area */
  uint64_t site;
  uint64_t timeout; /* clock64 cycles, 0 = never */
  symmpin_kernel_error *error;
  uint32_t id; /* the call's identity (symmpin_kernel_call.call_id) */
} symmpin_kernel_params;

/* Several staged calls, each on its own slot, in one launch (the group kernel). */
typedef struct symmpin_kernel_group_params {
  symmpin_kernel_params call[SYMMPIN_KERNEL_GROUP_MAX];
  unsigned char algo[SYMMPIN_KERNEL_GROUP_MAX];    /* SYMMPIN_ALGO_ONESHOT_LL, _COPY or _TWOSHOT */
  unsigned short first[SYMMPIN_KERNEL_GROUP_MAX];  /* the call's first block in the grid */
  unsigned short blocks[SYMMPIN_KERNEL_GROUP_MAX]; /* each call's own launch geometry */
  unsigned short threads[SYMMPIN_KERNEL_GROUP_MAX];
  int n;
} symmpin_kernel_group_params;

/* Kernel parameters are limited to 4 KiB. */
#ifdef __cplusplus
static_assert(sizeof(symmpin_kernel_group_params) <= 4096, "group parameters over 4 KiB");
#else
_Static_assert(sizeof(symmpin_kernel_group_params) <= 4096, "group parameters over 4 KiB");
#endif

#ifdef __cplusplus
}
#endif

#endif
