/* Slot assignment: where in the symmetric pool each pinned site's slot goes. One interface, two
 * implementations (dedicated, shared), chosen by the plan policy. The plan (planner/plan.c) builds
 * the problem: the items (sites) with their slot sizes and planned streams, the items already
 * placed by earlier plans (never moved), and which pairs of items share a group.
 *
 * Overlap ("can be in flight together", docs/planner.md): two items on different stream ordinals
 * always overlap (no record proves an order between streams); two items on one stream overlap iff
 * some rank's record has them in the same ncclGroup. Items that can overlap never share a byte.
 *
 * Sharing means sharing a whole slot: two items' ranges are either disjoint or start at the same
 * offset (the kernels keep a header at the slot start; see slots_shared.c). */
#ifndef SYMMPIN_PLANNER_SLOTS_H
#define SYMMPIN_PLANNER_SLOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/types.h"

typedef struct symmpin_slot_item {
  uint64_t bytes;  /* slot bytes, a multiple of the alignment */
  int stream;      /* planned stream ordinal */
  bool placed;     /* in: offset fixed by an earlier plan; out: true for every item */
  uint64_t offset; /* in for placed items, out for the others */
} symmpin_slot_item;

typedef struct symmpin_slot_problem {
  symmpin_slot_item *items;
  size_t nitems;          /* items to place come in order of first appearance */
  const uint64_t *grouped; /* sorted keys (i << 32 | j), i < j: items i, j share a group */
  size_t ngrouped;
  uint64_t alignment;     /* every offset is a multiple of it */
  uint64_t pool_bytes;    /* in: the earlier plan's pool; out: the pool this plan needs */
  uint64_t reserved_offset, reserved_bytes; /* bytes no item may use (the capture arena) */
} symmpin_slot_problem;

typedef struct symmpin_slot_assigner {
  const char *name;
  /* Place every item not yet placed; set pool_bytes. Never moves a placed item. */
  symmpin_status (*assign)(symmpin_slot_problem *p);
} symmpin_slot_assigner;

/* Each site its own bytes, in order of first appearance, growing at the end. */
extern const symmpin_slot_assigner symmpin_slots_dedicated;
/* Sites that can never be in flight together share a slot (same offset; first fit by size within
 * each stream, streams in ordinal order); new sites join a compatible slot, take a free gap, or
 * grow the pool. */
extern const symmpin_slot_assigner symmpin_slots_shared;

/* Whether items i and j can be in flight together (the rule above). */
bool symmpin_slots_overlap(const symmpin_slot_problem *p, size_t i, size_t j);
/* Whether two items' byte ranges intersect. */
static inline bool symmpin_slots_intersect(const symmpin_slot_item *a, const symmpin_slot_item *b) {
  return a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

#endif
