/* The kernels' error records (kernels/allreduce.h symmpin_kernel_error) as the preload shares
 * them: a record is host-mapped memory that a communicator's kernels write and that two owners
 * hold -- the keep of the communicator's GPU resources (keep.h), until its kernels are done, and
 * the communicator's registry entry (comm.h), until no thread can read it through the entry any
 * more. The last owner puts it back for reuse: records are never freed (freeing host memory would
 * synchronize the device), and a handful serve any number of communicator lifetimes.
 *
 * Plain C: the registry (CPU-tested without CUDA) drops its reference here; keep.c allocates. */
#ifndef SYMMPIN_PRELOAD_ERRREC_H
#define SYMMPIN_PRELOAD_ERRREC_H

#include <stdatomic.h>

#include "kernels/allreduce.h"

typedef struct symmpin_errrec {
  symmpin_kernel_error *host, *dev; /* the same record as the host and the kernels address it */
  _Atomic int refs;
  struct symmpin_errrec *next_free;
} symmpin_errrec;

/* Drop one reference; the last puts the record on the free list. Safe on NULL. No CUDA call. */
void symmpin_errrec_put(symmpin_errrec *r);
/* A record from the free list with two references and zeroed contents, or NULL if the list is
 * empty (the caller allocates one). */
symmpin_errrec *symmpin_errrec_reuse(void);
/* Records on the free list (tests). */
int symmpin_errrec_free_count(void);

#endif
