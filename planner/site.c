/* Site ids and the per-communicator site table (site.h). Entries are allocated one by one (their
 * addresses are handed out and must stay put) and indexed twice: by id in a uthash table and by
 * order of first call in an array, so reports list sites in program order. */
#include "planner/site.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "common/hash.h"
#include "common/log.h"

uint64_t symmpin_site_id(uint64_t stack_hash, int comm_ordinal, int coll, uint64_t count, int dtype,
                         int op) {
  uint64_t h = 0x73796d6d70696e31ULL; /* "symmpin1": bump the tag if the recipe ever changes */
  h = symmpin_hash_combine(h, stack_hash);
  h = symmpin_hash_combine(h, (uint64_t)(int64_t)comm_ordinal);
  h = symmpin_hash_combine(h, count);
  h = symmpin_hash_combine(h, (uint64_t)(int64_t)dtype);
  h = symmpin_hash_combine(h, (uint64_t)(int64_t)op);
  /* The collective last, and only when it is not the all-reduce: an all-reduce's id is what it
   * was before the other collectives came (traces and reports keep their ids). */
  if (coll != SYMMPIN_COLL_ALLREDUCE)
    h = symmpin_hash_combine(h, 0x636f6c6c00ULL | (uint64_t)(uint32_t)coll);
  return h ? h : 1;
}

bool symmpin_site_where_known(const symmpin_site_where *w) {
  return w && w->module && w->module[0];
}

size_t symmpin_site_where_format(const symmpin_site_where *w, char *buf, size_t cap) {
  if (!cap) return 0;
  buf[0] = '\0';
  if (!symmpin_site_where_known(w)) return 0;
  const char *slash = strrchr(w->module, '/');
  const char *base = slash && slash[1] ? slash + 1 : w->module;
  int n = snprintf(buf, cap, "%s+0x%" PRIx64, base, w->offset);
  if (n < 0) {
    buf[0] = '\0';
    return 0;
  }
  size_t len = (size_t)n < cap ? (size_t)n : cap - 1;
  if (!w->symbol || !w->symbol[0] || len + 4 >= cap) return len; /* room for " (x)" at least */
  int m = snprintf(buf + len, cap - len, " (%s)", w->symbol);
  if (m > 0 && (size_t)m < cap - len) return len + (size_t)m;
  /* Cut: keep what fits, end in "...)". */
  if (cap - len < 8) { /* not even " (...)": drop the symbol */
    buf[len] = '\0';
    return len;
  }
  memcpy(buf + cap - 5, "...)", 5);
  return cap - 1;
}

typedef struct entry {
  symmpin_site s;
  UT_hash_handle hh;
} entry;

struct symmpin_site_table {
  int comm;
  entry *by_id;    /* uthash head */
  entry **order;   /* by first call */
  size_t n, cap;
};

symmpin_site_table *symmpin_site_table_create(int comm_ordinal) {
  symmpin_site_table *t = calloc(1, sizeof(*t));
  if (!t) {
    SYMMPIN_WARN("site table of comm %d: out of memory", comm_ordinal);
    return NULL;
  }
  t->comm = comm_ordinal;
  return t;
}

void symmpin_site_table_destroy(symmpin_site_table *t) {
  if (!t) return;
  HASH_CLEAR(hh, t->by_id);
  for (size_t i = 0; i < t->n; i++) free(t->order[i]);
  free(t->order);
  free(t);
}

static void remember_alloc(uint64_t *ids, int *n, bool *overflow, uint64_t id) {
  if (id == 0) return;
  for (int i = 0; i < *n; i++)
    if (ids[i] == id) return;
  if (*n < SYMMPIN_SITE_MAX_ALLOCS)
    ids[(*n)++] = id;
  else
    *overflow = true;
}

symmpin_status symmpin_site_table_add(symmpin_site_table *t, const symmpin_site_call *c) {
  if (!t || !c) return SYMMPIN_ERR_INVALID;
  entry *e;
  HASH_FIND(hh, t->by_id, &c->site, sizeof(c->site), e);
  if (!e) {
    if (t->n == t->cap) {
      size_t cap = t->cap ? t->cap * 2 : 16;
      entry **o = realloc(t->order, cap * sizeof(*o));
      if (!o) goto nomem;
      t->order = o;
      t->cap = cap;
    }
    e = calloc(1, sizeof(*e));
    if (!e) goto nomem;
    e->s.id = c->site;
    e->s.count = c->count;
    e->s.dtype = c->dtype;
    e->s.coll = c->coll;
    e->s.op = c->op;
    e->s.first_call = c->index;
    HASH_ADD(hh, t->by_id, s.id, sizeof(e->s.id), e);
    t->order[t->n++] = e;
  }
  symmpin_site *s = &e->s;
  s->calls++;
  s->bytes += c->count * symmpin_dtype_size(c->dtype); /* NCCL's count: the chunk of the others */
  if (c->in_place)
    s->in_place++;
  else
    s->out_of_place++;
  if (c->stream_ord >= 0) s->streams |= 1ULL << (c->stream_ord < 63 ? c->stream_ord : 63);
  remember_alloc(s->send_allocs, &s->nsend_allocs, &s->allocs_overflow, c->send_alloc);
  remember_alloc(s->recv_allocs, &s->nrecv_allocs, &s->allocs_overflow, c->recv_alloc);
  s->last_call = c->index;
  return SYMMPIN_OK;
nomem:
  SYMMPIN_WARN("site table of comm %d: out of memory (%zu sites)", t->comm, t->n);
  return SYMMPIN_ERR_NOMEM;
}

const symmpin_site *symmpin_site_table_find(const symmpin_site_table *t, uint64_t site) {
  if (!t) return NULL;
  entry *e;
  HASH_FIND(hh, t->by_id, &site, sizeof(site), e);
  return e ? &e->s : NULL;
}

size_t symmpin_site_table_count(const symmpin_site_table *t) { return t ? t->n : 0; }

const symmpin_site *symmpin_site_table_at(const symmpin_site_table *t, size_t i) {
  return (t && i < t->n) ? &t->order[i]->s : NULL;
}

int symmpin_site_table_comm(const symmpin_site_table *t) { return t ? t->comm : -1; }
