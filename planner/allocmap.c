/* The allocation map (allocmap.h): a sorted array of non-overlapping ranges, binary search, one
 * read-write lock. A program holds hundreds to a few thousand live GPU allocations, so an array
 * insert (memmove) is cheaper than any tree, and lookups (the all-reduce path) take only the read
 * lock. */
#include "planner/allocmap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

struct symmpin_allocmap {
  pthread_rwlock_t lock;
  symmpin_alloc *v; /* sorted by base, ranges disjoint */
  size_t n, cap;
  uint64_t next_id;
};

symmpin_allocmap *symmpin_allocmap_create(void) {
  symmpin_allocmap *m = calloc(1, sizeof(*m));
  if (!m) {
    SYMMPIN_WARN("allocation map: out of memory");
    return NULL;
  }
  int rc = pthread_rwlock_init(&m->lock, NULL);
  if (rc != 0) {
    SYMMPIN_WARN("allocation map: cannot create its lock: %s", strerror(rc));
    free(m);
    return NULL;
  }
  m->next_id = 1;
  return m;
}

void symmpin_allocmap_destroy(symmpin_allocmap *m) {
  if (!m) return;
  pthread_rwlock_destroy(&m->lock);
  free(m->v);
  free(m);
}

/* Index of the first range whose base is > addr (so the candidate container is the one before). */
static size_t upper_bound(const symmpin_allocmap *m, uintptr_t addr) {
  size_t lo = 0, hi = m->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->v[mid].base <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static bool overlaps(const symmpin_alloc *a, uintptr_t base, size_t size) {
  return a->base < base + size && base < a->base + a->size;
}

symmpin_status symmpin_allocmap_insert(symmpin_allocmap *m, uintptr_t base, size_t size, int kind,
                                       int device, uint64_t stack, uint64_t *id) {
  if (!m || size == 0 || base + size < base) {
    SYMMPIN_WARN("allocation map: invalid range %#lx+%zu%s", (unsigned long)base, size,
                 m ? "" : " (no map)");
    return SYMMPIN_ERR_INVALID;
  }
  pthread_rwlock_wrlock(&m->lock);
  /* Drop ranges that overlap the new one: their frees were missed, the memory is the new one's. */
  size_t pos = upper_bound(m, base);
  size_t first = pos;
  while (first > 0 && overlaps(&m->v[first - 1], base, size)) first--;
  size_t last = pos; /* one past the last overlapping range */
  while (last < m->n && overlaps(&m->v[last], base, size)) last++;
  if (last > first) {
    memmove(&m->v[first], &m->v[last], (m->n - last) * sizeof(*m->v));
    m->n -= last - first;
  }
  pos = first;
  if (m->n == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    symmpin_alloc *v = realloc(m->v, cap * sizeof(*v));
    if (!v) {
      pthread_rwlock_unlock(&m->lock);
      SYMMPIN_WARN("allocation map: out of memory growing to %zu entries; allocation %#lx+%zu "
                   "not recorded", cap, (unsigned long)base, size);
      return SYMMPIN_ERR_NOMEM;
    }
    m->v = v;
    m->cap = cap;
  }
  memmove(&m->v[pos + 1], &m->v[pos], (m->n - pos) * sizeof(*m->v));
  symmpin_alloc *a = &m->v[pos];
  *a = (symmpin_alloc){.id = m->next_id++, .base = base, .size = size, .kind = kind,
                       .device = device, .stack = stack};
  m->n++;
  uint64_t new_id = a->id;
  pthread_rwlock_unlock(&m->lock);
  if (id) *id = new_id;
  return SYMMPIN_OK;
}

symmpin_status symmpin_allocmap_remove(symmpin_allocmap *m, uintptr_t base, symmpin_alloc *removed) {
  if (!m) return SYMMPIN_ERR_INVALID;
  pthread_rwlock_wrlock(&m->lock);
  size_t pos = upper_bound(m, base);
  if (pos == 0 || m->v[pos - 1].base != base) {
    pthread_rwlock_unlock(&m->lock);
    /* Not logged: frees of memory we never saw allocated (before the preload, or by paths we do
     * not wrap) are normal, and the caller decides whether it matters. */
    return SYMMPIN_ERR_INVALID;
  }
  symmpin_alloc gone = m->v[pos - 1];
  memmove(&m->v[pos - 1], &m->v[pos], (m->n - pos) * sizeof(*m->v));
  m->n--;
  pthread_rwlock_unlock(&m->lock);
  if (removed) *removed = gone;
  return SYMMPIN_OK;
}

bool symmpin_allocmap_lookup(symmpin_allocmap *m, uintptr_t addr, symmpin_alloc *out) {
  if (!m) return false;
  bool found = false;
  pthread_rwlock_rdlock(&m->lock);
  size_t pos = upper_bound(m, addr);
  if (pos > 0) {
    const symmpin_alloc *a = &m->v[pos - 1];
    if (addr - a->base < a->size) {
      if (out) *out = *a;
      found = true;
    }
  }
  pthread_rwlock_unlock(&m->lock);
  return found;
}

size_t symmpin_allocmap_count(symmpin_allocmap *m) {
  if (!m) return 0;
  pthread_rwlock_rdlock(&m->lock);
  size_t n = m->n;
  pthread_rwlock_unlock(&m->lock);
  return n;
}
