/* The allocation map: which GPU allocation (base, size, how it was made, by which call site)
 * holds a given device address. An interval map over non-overlapping ranges.
 *
 * Thread-safe (an internal read-write lock): the allocation wrappers insert and remove from any
 * thread while all-reduce wrappers look addresses up. Lookups copy the record out, so no pointer
 * into the map escapes the lock. */
#ifndef SYMMPIN_PLANNER_ALLOCMAP_H
#define SYMMPIN_PLANNER_ALLOCMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/types.h"

typedef struct symmpin_alloc {
  uint64_t id;     /* 1, 2, ... in order of allocation in this process; 0 = none */
  uintptr_t base;
  size_t size;
  int kind;        /* symmpin_alloc_kind (preload/events.h): how it was made */
  int device;      /* CUDA device current at allocation time */
  uint64_t stack;  /* stack hash of the allocating call */
} symmpin_alloc;

typedef struct symmpin_allocmap symmpin_allocmap;

symmpin_allocmap *symmpin_allocmap_create(void);
void symmpin_allocmap_destroy(symmpin_allocmap *m);

/* Record [base, base+size). An existing range that overlaps it is dropped first (its free was
 * missed, e.g. memory released by a path we do not wrap), so the map never holds overlaps.
 * The new record's id is returned in *id (may be NULL). */
symmpin_status symmpin_allocmap_insert(symmpin_allocmap *m, uintptr_t base, size_t size, int kind,
                                       int device, uint64_t stack, uint64_t *id);
/* Remove the allocation that starts at base; *removed (may be NULL) receives it.
 * SYMMPIN_ERR_INVALID if no allocation starts there. */
symmpin_status symmpin_allocmap_remove(symmpin_allocmap *m, uintptr_t base, symmpin_alloc *removed);
/* The allocation containing addr, copied to *out. false if none. */
bool symmpin_allocmap_lookup(symmpin_allocmap *m, uintptr_t addr, symmpin_alloc *out);
size_t symmpin_allocmap_count(symmpin_allocmap *m);

#endif
