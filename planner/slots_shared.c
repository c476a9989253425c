/* Shared slots: first fit by decreasing size, stream class by stream class.
 *
 * Why this order: on one stream, with groups that partition the sites (the usual case: a
 * coalesced group of buckets), each group's members stack from the class base and every other
 * site lands on the base, so a class needs exactly its lower bound (max(largest slot, largest
 * group sum)); classes are contiguous, so the next stream's class starts where this one ends and
 * the pool equals the sum of the class bounds. Items placed by earlier plans stay where they are;
 * a new item takes the lowest gap that no overlapping item occupies. */
#include "planner/slots.h"

#include <stdio.h>
#include <stdlib.h>

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

bool symmpin_slots_overlap(const symmpin_slot_problem *p, size_t i, size_t j) {
  if (i == j) return false;
  if (p->items[i].stream != p->items[j].stream) return true;
  uint64_t key = i < j ? ((uint64_t)i << 32 | j) : ((uint64_t)j << 32 | i);
  return bsearch(&key, p->grouped, p->ngrouped, sizeof(key), cmp_u64) != NULL;
}

/* Placement order: stream ordinal ascending, then bytes descending, then first appearance. */
typedef struct {
  int stream;
  uint64_t bytes;
  size_t index;
} order_key;

static int cmp_order(const void *a, const void *b) {
  const order_key *x = a, *y = b;
  if (x->stream != y->stream) return x->stream < y->stream ? -1 : 1;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

typedef struct {
  uint64_t lo, hi;
} range;

static int cmp_range(const void *a, const void *b) {
  const range *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static symmpin_status assign_shared(symmpin_slot_problem *p) {
  size_t n = p->nitems;
  order_key *todo = malloc((n ? n : 1) * sizeof(*todo));
  range *busy = malloc((n ? n : 1) * sizeof(*busy));
  if (!todo || !busy) {
    free(todo);
    free(busy);
    fprintf(stderr, "symmpin: shared slots: out of memory (%zu sites)\n", n);
    return SYMMPIN_ERR_NOMEM;
  }
  size_t ntodo = 0;
  uint64_t end = p->pool_bytes;
  for (size_t i = 0; i < n; i++) {
    if (!p->items[i].placed)
      todo[ntodo++] = (order_key){p->items[i].stream, p->items[i].bytes, i};
    else if (p->items[i].offset + p->items[i].bytes > end)
      end = p->items[i].offset + p->items[i].bytes;
  }
  qsort(todo, ntodo, sizeof(*todo), cmp_order);

  for (size_t t = 0; t < ntodo; t++) {
    size_t x = todo[t].index;
    size_t nb = 0;
    for (size_t y = 0; y < n; y++)
      if (p->items[y].placed && symmpin_slots_overlap(p, x, y))
        busy[nb++] = (range){p->items[y].offset, p->items[y].offset + p->items[y].bytes};
    qsort(busy, nb, sizeof(*busy), cmp_range);
    /* Lowest offset whose [off, off + bytes) misses every busy range. Offsets stay aligned: every
     * range starts and ends on a multiple of the alignment. */
    uint64_t off = 0;
    for (size_t k = 0; k < nb && busy[k].lo < off + p->items[x].bytes; k++)
      if (busy[k].hi > off) off = busy[k].hi;
    p->items[x].offset = off;
    p->items[x].placed = true;
    if (off + p->items[x].bytes > end) end = off + p->items[x].bytes;
  }
  p->pool_bytes = end;
  free(todo);
  free(busy);
  return SYMMPIN_OK;
}

const symmpin_slot_assigner symmpin_slots_shared = {"shared", assign_shared};
