/* Shared slots: sites that can never be in flight together share one slot, i.e. the SAME offset.
 *
 * Why whole slots and never partial overlaps: a slot starts with the kernels' header (per-slot
 * epoch counters and barrier flags, kernels/oneshot_layout.h) and its data units sit at positions that do
 * not depend on the call shape, so calls of different shapes at one offset, ordered by one stream,
 * are exactly what the kernels support (the next call flips parity, the call after that can only
 * start once every peer has finished reading). A site placed at a different offset inside another
 * site's range would have its header overwritten by the other's data: the ranks could read
 * different epochs and hang. So the invariant is: two pinned sites' ranges are either disjoint or
 * start at the same offset; and sites that share an offset never overlap in time.
 *
 * Placement: items in order stream ordinal ascending, then bytes descending, then first
 * appearance; each takes the lowest offset that is either the start of an existing slot whose
 * members are all compatible with it (and whose growth to the item's size hits no other slot),
 * or a free gap (first fit). With groups that partition the sites (the usual shape: a coalesced
 * group of buckets) this is the optimum of the model: the k-th largest member of every group
 * shares the k-th slot of its stream. Items placed by earlier plans never move. */
#include "planner/slots.h"

#include <stdlib.h>
#include <string.h>

#include "common/invariant.h"
#include "common/log.h"

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

bool symmpin_slots_overlap(const symmpin_slot_problem *p, size_t i, size_t j) {
  if (i == j) return false;
  if (p->items[i].stream != p->items[j].stream) return true;
  if (p->ngrouped == 0) return false;
  uint64_t key = i < j ? ((uint64_t)i << 32 | j) : ((uint64_t)j << 32 | i);
  return bsearch(&key, p->grouped, p->ngrouped, sizeof(key), cmp_u64) != NULL;
}

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

/* A slot: the items at one offset. Slots' ranges [start, end) never intersect. */
typedef struct {
  uint64_t start, end;
  long head; /* first member; members chained through next[] */
} slot;

typedef struct {
  slot *v; /* sorted by start */
  size_t n;
  long *next;
  uint64_t old_end; /* the earlier plans' pool: the pool grows by a separate chunk after it */
} slots;

static size_t slot_find(const slots *s, uint64_t start) { /* first slot with .start >= start */
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (s->v[mid].start < start)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static void slot_add(slots *s, uint64_t start, uint64_t bytes, size_t item) {
  size_t k = slot_find(s, start);
  if (k == s->n || s->v[k].start != start) {
    memmove(&s->v[k + 1], &s->v[k], (s->n - k) * sizeof(*s->v));
    s->v[k] = (slot){start, start, -1};
    s->n++;
  }
  if (start + bytes > s->v[k].end) s->v[k].end = start + bytes;
  s->next[item] = s->v[k].head;
  s->v[k].head = (long)item;
}

/* Whether item x (bytes w) may sit at offset o: every slot it would touch starts at o and holds
 * only items that never overlap x in time. */
static bool fits(const symmpin_slot_problem *p, const slots *s, size_t x, uint64_t o) {
  uint64_t w = p->items[x].bytes;
  /* A slot may not cross the end of the earlier plans' pool: the bytes after it come in a new
   * chunk of symmetric memory, mapped separately on every rank (symmem/pool.h). */
  if (o < s->old_end && o + w > s->old_end) return false;
  /* Nor touch the capture arena, which lies among the earlier plans' slots. */
  if (p->reserved_bytes && o < p->reserved_offset + p->reserved_bytes && p->reserved_offset < o + w)
    return false;
  /* slots are disjoint and sorted, so only the one before o and those starting in [o, o+w) can
   * intersect */
  size_t k = slot_find(s, o);
  if (k > 0 && s->v[k - 1].end > o) return false;
  for (; k < s->n && s->v[k].start < o + w; k++) {
    if (s->v[k].start != o) return false;
    for (long m = s->v[k].head; m >= 0; m = s->next[m])
      if (symmpin_slots_overlap(p, x, (size_t)m)) return false;
  }
  return true;
}

/* The invariant (top of this file) for the items this plan placed (todo), against every item,
 * O(n^2): ranges disjoint or starting at one offset, items at one offset never in flight
 * together, none in the reserved bytes. (Items of earlier plans may break it among themselves: a
 * site demoted for a conflict keeps its bytes.) */
static bool placement_holds(const symmpin_slot_problem *p, const order_key *todo, size_t ntodo) {
  for (size_t t = 0; t < ntodo; t++) {
    size_t i = todo[t].index;
    const symmpin_slot_item *a = &p->items[i];
    if (p->reserved_bytes && a->offset < p->reserved_offset + p->reserved_bytes &&
        p->reserved_offset < a->offset + a->bytes)
      return false;
    for (size_t j = 0; j < p->nitems; j++) {
      const symmpin_slot_item *b = &p->items[j];
      if (j != i && symmpin_slots_intersect(a, b) &&
          (a->offset != b->offset || symmpin_slots_overlap(p, i, j)))
        return false;
    }
  }
  return true;
}

static symmpin_status assign_shared(symmpin_slot_problem *p) {
  size_t n = p->nitems, cap = n ? n : 1;
  order_key *todo = malloc(cap * sizeof(*todo));
  slots s = {malloc(cap * sizeof(*s.v)), 0, malloc(cap * sizeof(*s.next)), 0};
  uint64_t *cand = malloc((2 * cap + 1) * sizeof(*cand));
  if (!todo || !s.v || !s.next || !cand) {
    free(todo);
    free(s.v);
    free(s.next);
    free(cand);
    SYMMPIN_WARN("shared slots: out of memory (%zu sites)", n);
    return SYMMPIN_ERR_NOMEM;
  }
  size_t ntodo = 0;
  uint64_t end = p->pool_bytes;
  for (size_t i = 0; i < n; i++) {
    symmpin_slot_item *it = &p->items[i];
    if (!it->placed) {
      todo[ntodo++] = (order_key){it->stream, it->bytes, i};
      continue;
    }
    slot_add(&s, it->offset, it->bytes, i);
    if (it->offset + it->bytes > end) end = it->offset + it->bytes;
  }
  s.old_end = end;
  qsort(todo, ntodo, sizeof(*todo), cmp_order);

  for (size_t t = 0; t < ntodo; t++) {
    size_t x = todo[t].index;
    /* Candidates: 0, every slot start (join it), every slot end (the gap after it). */
    size_t nc = 0;
    cand[nc++] = 0;
    for (size_t k = 0; k < s.n; k++) {
      cand[nc++] = s.v[k].start;
      cand[nc++] = s.v[k].end;
    }
    qsort(cand, nc, sizeof(*cand), cmp_u64);
    uint64_t o = end; /* past every slot: always fits */
    for (size_t c = 0; c < nc; c++)
      if ((c == 0 || cand[c] != cand[c - 1]) && fits(p, &s, x, cand[c])) {
        o = cand[c];
        break;
      }
    p->items[x].offset = o;
    p->items[x].placed = true;
    slot_add(&s, o, p->items[x].bytes, x);
    if (o + p->items[x].bytes > end) end = o + p->items[x].bytes;
  }
  p->pool_bytes = end;
  SYMMPIN_ASSERT_EXPENSIVE(placement_holds(p, todo, ntodo));
  free(todo);
  free(s.v);
  free(s.next);
  free(cand);
  return SYMMPIN_OK;
}

const symmpin_slot_assigner symmpin_slots_shared = {"shared", assign_shared};
