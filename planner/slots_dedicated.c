/* Dedicated slots: every site its own bytes, appended in order of first appearance. The
 * reference the shared assigner is measured against (dedicated_bytes), and the safe choice when
 * nothing may share. */
#include "planner/slots.h"

static symmpin_status assign_dedicated(symmpin_slot_problem *p) {
  uint64_t end = p->pool_bytes;
  for (size_t i = 0; i < p->nitems; i++)
    if (p->items[i].placed && p->items[i].offset + p->items[i].bytes > end)
      end = p->items[i].offset + p->items[i].bytes;
  for (size_t i = 0; i < p->nitems; i++) {
    symmpin_slot_item *it = &p->items[i];
    if (it->placed) continue;
    it->offset = end;
    it->placed = true;
    end += it->bytes;
  }
  p->pool_bytes = end;
  return SYMMPIN_OK;
}

const symmpin_slot_assigner symmpin_slots_dedicated = {"dedicated", assign_dedicated};
