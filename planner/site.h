/* Call sites: the identity of an all-reduce call site and a per-communicator table that
 * aggregates what was seen at each site (calls, bytes, shapes, streams, buffers).
 *
 * A site id names (where in the program, which communicator, which shape): the preload computes
 * it per call with symmpin_site_id() and the planner pins slots to it. The table is for reports
 * (stats, the replay tool); the planner's decisions use records (planner/record.h). Not
 * thread-safe: the caller serialises per communicator (the preload holds the comm's lock). */
#ifndef SYMMPIN_PLANNER_SITE_H
#define SYMMPIN_PLANNER_SITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/types.h"

/* hash(stack_hash, comm_ordinal, count, dtype, op[, coll]): each input is folded in turn with
 * symmpin_hash_combine (planner/hash.h, a splitmix64 finalizer), starting from a fixed tag, so
 * it is stable across ranks, runs and hosts, and changing any one input changes the id; the
 * collective (common/types.h) is folded in last unless it is the all-reduce, whose ids are as
 * they were before the others. Never 0 (0 means "no site" in traces). */
uint64_t symmpin_site_id(uint64_t stack_hash, int comm_ordinal, int coll, uint64_t count, int dtype,
                         int op);

/* Where a call site is in the program, for people (stats, traces, symmpin-replay): the caller
 * frame that identifies the site, i.e. the first return address outside libsymmpin, as
 *   module: the path of the module that holds it, as the loader knows it (the main program's as
 *           /proc/self/exe reads);
 *   offset: the address of the call instruction (return address - 1) in the module's own
 *           addresses (ELF virtual address), so `addr2line -e MODULE OFFSET` names the call's line;
 *   symbol: the dynamic symbol that contains it, when the module exports one (not demangled).
 * Not part of the site id: paths differ between ranks and installs. The strings are not owned:
 * whoever fills the struct says how long they live. */
typedef struct symmpin_site_where {
  const char *module; /* NULL or "": unknown, and so is the rest */
  const char *symbol; /* NULL: the module exports no symbol for the address */
  uint64_t offset;
} symmpin_site_where;

bool symmpin_site_where_known(const symmpin_site_where *w);
/* "libfoo.so+0x1a2b (symbol)" with the module's basename (no " (...)" without a symbol), cut to
 * cap - 1 bytes with "..." where the symbol does not fit; "" when unknown. Returns the length
 * written. */
size_t symmpin_site_where_format(const symmpin_site_where *w, char *buf, size_t cap);

#define SYMMPIN_SITE_MAX_ALLOCS 8 /* distinct buffer allocations remembered per site and side */

/* One all-reduce as the site table sees it. */
typedef struct symmpin_site_call {
  uint64_t site;
  uint64_t count;
  int dtype, op;
  int coll;                        /* common/types.h's SYMMPIN_COLLS */
  int stream_ord;                  /* -1 unknown */
  bool in_place;
  uint64_t send_alloc, recv_alloc; /* allocation ids, 0 = not in a known allocation */
  uint64_t index;                  /* the call's index on the communicator (0, 1, ...) */
} symmpin_site_call;

typedef struct symmpin_site {
  uint64_t id;
  uint64_t count;                  /* the shape (part of the id, so one per site) */
  int dtype, op;
  int coll;
  uint64_t calls, bytes;           /* bytes: count * element size, summed over calls */
  uint64_t in_place, out_of_place;
  uint64_t streams;                /* bit s: stream ordinal s seen (ordinals >= 63 -> bit 63) */
  uint64_t send_allocs[SYMMPIN_SITE_MAX_ALLOCS], recv_allocs[SYMMPIN_SITE_MAX_ALLOCS];
  int nsend_allocs, nrecv_allocs;  /* distinct ids kept, in order of first use */
  bool allocs_overflow;            /* more distinct ids than kept */
  uint64_t first_call, last_call;  /* call indices on the communicator */
} symmpin_site;

typedef struct symmpin_site_table symmpin_site_table;

symmpin_site_table *symmpin_site_table_create(int comm_ordinal);
void symmpin_site_table_destroy(symmpin_site_table *t);
symmpin_status symmpin_site_table_add(symmpin_site_table *t, const symmpin_site_call *c);
/* The site, or NULL. The pointer stays valid until the table is destroyed. */
const symmpin_site *symmpin_site_table_find(const symmpin_site_table *t, uint64_t site);
/* Sites in order of first call: i in [0, count). */
size_t symmpin_site_table_count(const symmpin_site_table *t);
const symmpin_site *symmpin_site_table_at(const symmpin_site_table *t, size_t i);
int symmpin_site_table_comm(const symmpin_site_table *t);

#endif
