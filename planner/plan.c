/* Plans (plan.h): the agreement rule over all ranks' records, the overlap facts the slot
 * assigners need (planner/slots.h), and the O(1) lookup table.
 *
 * Determinism: every loop runs over arrays in record order or plan order; hash tables are only
 * probed, never iterated, so the result cannot depend on addresses or on hash layout. */
#include "planner/plan.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "common/hash.h"
#include "common/log.h"
#include "planner/slots.h"

static const char *const reason_names[SYMMPIN_PLAN_REASON_COUNT] = {
    [SYMMPIN_PLAN_PINNED] = "pinned",
    [SYMMPIN_PLAN_NOT_ALL_RANKS] = "not on all ranks",
    [SYMMPIN_PLAN_DIFFERS] = "differs between ranks",
    [SYMMPIN_PLAN_TOO_LARGE] = "too large",
    [SYMMPIN_PLAN_UNSUPPORTED] = "unsupported dtype or op",
    [SYMMPIN_PLAN_NO_STREAM] = "stream unknown",
    [SYMMPIN_PLAN_CONFLICT] = "overlaps a site sharing its bytes",
    [SYMMPIN_PLAN_STREAM_OFF_PLAN] = "stream off-plan",
    [SYMMPIN_PLAN_UNPLANNED] = "not planned yet",
    [SYMMPIN_PLAN_NCCL_FASTER] = "NCCL measured faster",
    [SYMMPIN_PLAN_GROUP_TOO_LARGE] = "too large in a group",
    [SYMMPIN_PLAN_GROUP_NCCL_FASTER] = "NCCL measured faster in groups",
};

const char *symmpin_plan_reason_name(symmpin_plan_reason r) {
  return (unsigned)r < SYMMPIN_PLAN_REASON_COUNT ? reason_names[r] : "?";
}

const char *const symmpin_plan_mode_names[] = {
    [SYMMPIN_PLAN_SHARED] = "shared", [SYMMPIN_PLAN_DEDICATED] = "dedicated", NULL};

const char *symmpin_plan_mode_name(symmpin_plan_mode m) {
  return m == SYMMPIN_PLAN_DEDICATED ? "dedicated" : "shared";
}

int symmpin_plan_mode_from_name(const char *name) {
  for (int m = 0; symmpin_plan_mode_names[m]; m++)
    if (strcmp(name, symmpin_plan_mode_names[m]) == 0) return m;
  return -1;
}

/* ---- the lookup table ---- */

struct symmpin_plan_index {
  uint64_t site;
  size_t i; /* into sites[] */
  UT_hash_handle hh;
};

/* A call shape, the key of the routing table (no padding: uthash compares the bytes). */
typedef struct shape_key {
  uint64_t count;
  int32_t dtype, op;
  int32_t coll, pad; /* pad: zero, so that keys compare byte for byte */
} shape_key;

typedef struct shape_index {
  shape_key key;
  size_t i; /* into sites[]: the pinned site that routes this shape (index_shapes) */
  UT_hash_handle hh;
} shape_index;

typedef struct plan_impl {
  symmpin_plan pub;
  symmpin_plan_index *entries; /* storage, one per site */
  symmpin_plan_index *head;    /* uthash head */
  shape_index *shapes;         /* storage, one per pinned site at most */
  shape_index *shape_head;     /* uthash head */
  shape_index *slow;           /* storage: shapes measured faster on NCCL, one per site at most */
  shape_index *slow_head;      /* uthash head */
  shape_index *kind_slow;      /* storage: the shapes of eager_slow, then of group_slow */
  shape_index *eager_slow_head, *group_slow_head; /* uthash heads */
} plan_impl;

void symmpin_plan_free(symmpin_plan *p) {
  if (!p) return;
  plan_impl *pi = (plan_impl *)p;
  HASH_CLEAR(hh, pi->head);
  free(pi->entries);
  HASH_CLEAR(hh, pi->shape_head);
  free(pi->shapes);
  HASH_CLEAR(hh, pi->slow_head);
  free(pi->slow);
  HASH_CLEAR(hh, pi->eager_slow_head);
  HASH_CLEAR(hh, pi->group_slow_head);
  free(pi->kind_slow);
  free(p->eager_slow);
  free(p->group_slow);
  free(p->sites);
  free(pi);
}

const symmpin_plan_site *symmpin_plan_find(const symmpin_plan *p, uint64_t site) {
  if (!p) return NULL;
  const plan_impl *pi = (const plan_impl *)p;
  symmpin_plan_index *e;
  HASH_FIND(hh, pi->head, &site, sizeof(site), e);
  return e ? &p->sites[e->i] : NULL;
}

/* Whether a call's message, its larger buffer (the all-gather's recv, the reduce-scatter's send:
 * nranks x count elements; the all-reduce's count), is at most `limit` bytes. */
static bool fits(int coll, uint64_t count, uint64_t esize, int nranks, uint64_t limit) {
  uint64_t elems_max =
      limit / esize / (coll == SYMMPIN_COLL_ALLREDUCE || nranks < 1 ? 1 : (uint64_t)nranks);
  return count <= elems_max;
}

const symmpin_plan_site *symmpin_plan_for_shape(const symmpin_plan *p, int coll, uint64_t count,
                                                int dtype, int op) {
  if (!p) return NULL;
  const plan_impl *pi = (const plan_impl *)p;
  shape_key k = {.count = count, .dtype = dtype, .op = op, .coll = coll};
  shape_index *e;
  HASH_FIND(hh, pi->shape_head, &k, sizeof k, e);
  return e ? &p->sites[e->i] : NULL;
}

bool symmpin_plan_shape_nccl_faster(const symmpin_plan *p, int coll, uint64_t count, int dtype,
                                    int op) {
  if (!p) return false;
  const plan_impl *pi = (const plan_impl *)p;
  shape_key k = {.count = count, .dtype = dtype, .op = op, .coll = coll};
  shape_index *e;
  HASH_FIND(hh, pi->slow_head, &k, sizeof k, e);
  return e != NULL;
}

static bool in_index(shape_index *head, int coll, uint64_t count, int dtype, int op) {
  shape_key k = {.count = count, .dtype = dtype, .op = op, .coll = coll};
  shape_index *e;
  HASH_FIND(hh, head, &k, sizeof k, e);
  return e != NULL;
}

bool symmpin_plan_kind_nccl_faster(const symmpin_plan *p, int coll, uint64_t count, int dtype,
                                   int op, bool grouped) {
  if (!p) return false;
  const plan_impl *pi = (const plan_impl *)p;
  return symmpin_plan_shape_nccl_faster(p, coll, count, dtype, op) ||
         in_index(grouped ? pi->group_slow_head : pi->eager_slow_head, coll, count, dtype, op);
}

symmpin_plan_reason symmpin_plan_route_kind(const symmpin_plan *p, int coll, uint64_t count,
                                            int dtype, int op, bool grouped) {
  const plan_impl *pi = (const plan_impl *)p;
  if (!grouped || !p->groups_alike)
    return p->n_eager_slow && in_index(pi->eager_slow_head, coll, count, dtype, op)
               ? SYMMPIN_PLAN_NCCL_FASTER
               : SYMMPIN_PLAN_PINNED;
  uint64_t esize = symmpin_dtype_size(dtype);
  if (p->group_max_bytes && (!esize || !fits(coll, count, esize, p->nranks, p->group_max_bytes)))
    return SYMMPIN_PLAN_GROUP_TOO_LARGE;
  if (p->n_group_slow && in_index(pi->group_slow_head, coll, count, dtype, op))
    return SYMMPIN_PLAN_GROUP_NCCL_FASTER;
  return SYMMPIN_PLAN_PINNED;
}

symmpin_plan_reason symmpin_plan_route(const symmpin_plan *p, uint64_t site, int coll,
                                       uint64_t count, int dtype, int op, int stream_ord,
                                       const symmpin_plan_site **entry) {
  const symmpin_plan_site *s = symmpin_plan_for_shape(p, coll, count, dtype, op);
  if (entry) *entry = s;
  if (s) return stream_ord == s->stream_ord ? SYMMPIN_PLAN_PINNED : SYMMPIN_PLAN_STREAM_OFF_PLAN;
  /* No pinned site has this shape: NCCL, with the reason the plan gave this site if it has one. */
  const symmpin_plan_site *own = symmpin_plan_find(p, site);
  return own && !own->pinned ? own->reason : SYMMPIN_PLAN_UNPLANNED;
}

bool symmpin_plan_shape_missing(const symmpin_plan *p, const symmpin_plan_policy *pol, int coll,
                                uint64_t count, int dtype, int op) {
  if (!p || count == 0) return false;
  if (pol->supports && !pol->supports(coll, dtype, op, pol->ctx)) return false;
  size_t esize = symmpin_dtype_size(dtype);
  if (!esize || (pol->max_bytes && !fits(coll, count, esize, pol->nranks, pol->max_bytes)))
    return false;
  if (!pol->slot_bytes || !pol->slot_bytes(coll, (size_t)count, dtype, pol->nranks, pol->ctx))
    return false;
  return symmpin_plan_for_shape(p, coll, count, dtype, op) == NULL &&
         !symmpin_plan_shape_nccl_faster(p, coll, count, dtype, op);
}

/* Index the pinned sites by shape; of several with one shape, the one of the earliest epoch, then
 * the smallest id, routes them all: a shape's slot never moves when a later epoch pins another
 * site of that shape (it moves only if its site is demoted). */
static bool index_shapes(plan_impl *pi) {
  symmpin_plan *p = &pi->pub;
  pi->shapes = calloc(p->nsites ? p->nsites : 1, sizeof(*pi->shapes));
  if (!pi->shapes) return false;
  size_t n = 0;
  for (size_t i = 0; i < p->nsites; i++) {
    const symmpin_plan_site *s = &p->sites[i];
    if (!s->pinned) continue;
    shape_key k = {.count = s->count, .dtype = s->dtype, .op = s->op, .coll = s->coll};
    shape_index *e;
    HASH_FIND(hh, pi->shape_head, &k, sizeof k, e);
    if (e) {
      const symmpin_plan_site *cur = &p->sites[e->i];
      if (s->epoch < cur->epoch || (s->epoch == cur->epoch && s->site < cur->site)) e->i = i;
      continue;
    }
    e = &pi->shapes[n++];
    e->key = k;
    e->i = i;
    HASH_ADD(hh, pi->shape_head, key, sizeof(e->key), e);
  }
  /* The shapes measured faster on NCCL. */
  pi->slow = calloc(p->nsites ? p->nsites : 1, sizeof(*pi->slow));
  if (!pi->slow) return false;
  n = 0;
  for (size_t i = 0; i < p->nsites; i++) {
    const symmpin_plan_site *s = &p->sites[i];
    if (s->reason != SYMMPIN_PLAN_NCCL_FASTER) continue;
    shape_key k = {.count = s->count, .dtype = s->dtype, .op = s->op, .coll = s->coll};
    shape_index *e;
    HASH_FIND(hh, pi->slow_head, &k, sizeof k, e);
    if (e) continue;
    e = &pi->slow[n++];
    e->key = k;
    e->i = i;
    HASH_ADD(hh, pi->slow_head, key, sizeof(e->key), e);
  }
  /* The shapes whose calls of one kind go to NCCL (distinct in each list: apply_measured). */
  pi->kind_slow = calloc(p->n_eager_slow + p->n_group_slow + 1, sizeof(*pi->kind_slow));
  if (!pi->kind_slow) return false;
  n = 0;
  for (size_t i = 0; i < p->n_eager_slow + p->n_group_slow; i++) {
    bool g = i >= p->n_eager_slow;
    const symmpin_plan_shape *x = g ? &p->group_slow[i - p->n_eager_slow] : &p->eager_slow[i];
    shape_index *e = &pi->kind_slow[n++];
    e->key = (shape_key){.count = x->count, .dtype = x->dtype, .op = x->op, .coll = x->coll};
    e->i = i;
    if (g)
      HASH_ADD(hh, pi->group_slow_head, key, sizeof(e->key), e);
    else
      HASH_ADD(hh, pi->eager_slow_head, key, sizeof(e->key), e);
  }
  return true;
}

static bool same_shape(const symmpin_plan_shape *a, int coll, uint64_t count, int dtype, int op) {
  return a->coll == coll && a->count == count && a->dtype == dtype && a->op == op;
}

static bool shape_listed(const symmpin_plan_shape *v, size_t n, int coll, uint64_t count, int dtype,
                         int op) {
  for (size_t i = 0; i < n; i++)
    if (same_shape(&v[i], coll, count, dtype, op)) return true;
  return false;
}

/* The site's shape as a symmpin_plan_shape. */
static symmpin_plan_shape site_shape(const symmpin_plan_site *s) {
  return (symmpin_plan_shape){.count = s->count, .dtype = s->dtype, .op = s->op, .coll = s->coll};
}

/* ---- building ---- */

/* Whether a site of this shape was seen in a group. */
static bool shape_in_groups(const symmpin_plan *p, const symmpin_plan_shape *x) {
  for (size_t i = 0; i < p->nsites; i++)
    if (p->sites[i].grouped &&
        same_shape(x, p->sites[i].coll, p->sites[i].count, p->sites[i].dtype, p->sites[i].op))
      return true;
  return false;
}

/* Whether a measurement sends all of this shape's calls to NCCL (its sites demoted): an earlier
 * plan demoted it; or both kinds lost; or its eager calls lost and no rank calls it in a group;
 * or a kind lost and the ranks group differently (then a call's kind is no shared fact). */
static bool demoted_whole(const symmpin_plan *prev, const symmpin_plan *p,
                          const symmpin_plan_shape *x) {
  if (symmpin_plan_shape_nccl_faster(prev, x->coll, x->count, x->dtype, x->op)) return true;
  bool e = shape_listed(p->eager_slow, p->n_eager_slow, x->coll, x->count, x->dtype, x->op);
  bool g = shape_listed(p->group_slow, p->n_group_slow, x->coll, x->count, x->dtype, x->op);
  return (e || g) && (!p->groups_alike || (e && g) || (e && !shape_in_groups(p, x)));
}

/* Append the shapes of v not yet in out (out has room for all of them). */
static void add_shapes(symmpin_plan_shape *out, size_t *n, const symmpin_plan_shape *v, size_t nv) {
  for (size_t i = 0; v && i < nv; i++)
    if (!shape_listed(out, *n, v[i].coll, v[i].count, v[i].dtype, v[i].op)) out[(*n)++] = v[i];
}

/* Drop from a list the shapes a demoted site now carries (symmpin_plan_shape_nccl_faster). */
static void drop_carried(symmpin_plan_shape *v, size_t *n, const symmpin_plan *prev,
                         const symmpin_plan *p) {
  size_t k = 0;
  for (size_t i = 0; i < *n; i++) {
    bool carried = false;
    for (size_t j = 0; j < p->nsites && !carried; j++)
      carried =
          p->sites[j].reason == SYMMPIN_PLAN_NCCL_FASTER &&
          same_shape(&v[i], p->sites[j].coll, p->sites[j].count, p->sites[j].dtype, p->sites[j].op);
    if (!carried &&
        !symmpin_plan_shape_nccl_faster(prev, v[i].coll, v[i].count, v[i].dtype, v[i].op))
      v[k++] = v[i];
  }
  *n = k;
}

/* Demotions by measurement (plan.h, the policy's lists and the earlier plan's), final: the
 * shapes whose calls of one kind go to NCCL (eager_slow, group_slow: earlier ones, then the
 * policy's), and the sites of shapes demoted whole (demoted_whole): a new one is not pinned, an
 * earlier one is no longer (its bytes stay reserved: calls issued before may still run). */
static symmpin_status apply_measured(const symmpin_plan_policy *pol, const symmpin_plan *prev,
                                     symmpin_plan *p, size_t nold) {
  size_t ne = (prev ? prev->n_eager_slow : 0) + (pol->nccl_faster ? pol->n_nccl_faster : 0);
  size_t ng =
      (prev ? prev->n_group_slow : 0) + (pol->group_nccl_faster ? pol->n_group_nccl_faster : 0);
  p->eager_slow = malloc((ne ? ne : 1) * sizeof(*p->eager_slow));
  p->group_slow = malloc((ng ? ng : 1) * sizeof(*p->group_slow));
  if (!p->eager_slow || !p->group_slow) return SYMMPIN_ERR_NOMEM;
  if (prev) add_shapes(p->eager_slow, &p->n_eager_slow, prev->eager_slow, prev->n_eager_slow);
  add_shapes(p->eager_slow, &p->n_eager_slow, pol->nccl_faster, pol->n_nccl_faster);
  if (prev) add_shapes(p->group_slow, &p->n_group_slow, prev->group_slow, prev->n_group_slow);
  add_shapes(p->group_slow, &p->n_group_slow, pol->group_nccl_faster, pol->n_group_nccl_faster);
  for (size_t i = 0; i < p->nsites; i++) {
    symmpin_plan_site *ps = &p->sites[i];
    symmpin_plan_shape x = site_shape(ps);
    if (!demoted_whole(prev, p, &x)) continue;
    if (i >= nold && ps->reason == SYMMPIN_PLAN_PINNED) {
      ps->reason = SYMMPIN_PLAN_NCCL_FASTER;
      ps->slot_bytes = 0;
    } else if (i < nold && ps->pinned) {
      ps->pinned = false;
      ps->reason = SYMMPIN_PLAN_NCCL_FASTER;
    }
  }
  drop_carried(p->eager_slow, &p->n_eager_slow, prev, p);
  drop_carried(p->group_slow, &p->n_group_slow, prev, p);
  return SYMMPIN_OK;
}

/* What this epoch's records say about one site. */
typedef struct seen {
  uint64_t site;
  size_t order;       /* discovery order */
  int ranks_with;     /* ranks whose record has it */
  int last_rank;
  bool bad;           /* some position holding it differs between ranks */
  bool grouped;       /* some rank's record has a call of it inside a group */
  long pos0;          /* first position in rank 0's record, -1 if none */
  uint64_t calls0;    /* calls in rank 0's record */
  long plan_i;        /* index in the new plan's sites[], -1 until known */
  UT_hash_handle hh;
} seen;

/* Growable arrays of plain values. */
typedef struct {
  uint64_t *v;
  size_t n, cap;
} u64vec;

static bool u64vec_push(u64vec *a, uint64_t x) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 64;
    uint64_t *v = realloc(a->v, cap * sizeof(*v));
    if (!v) return false;
    a->v = v;
    a->cap = cap;
  }
  a->v[a->n++] = x;
  return true;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static bool same_call(const symmpin_call *a, const symmpin_call *b) {
  return a->site == b->site && a->coll == b->coll && a->count == b->count && a->dtype == b->dtype &&
         a->op == b->op && a->stream_ord == b->stream_ord;
}

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

typedef struct builder {
  const symmpin_record *const *rec;
  const symmpin_plan_policy *pol;
  int nranks;
  seen *table;         /* uthash head */
  seen **order;        /* by discovery */
  size_t nseen;
  long *item_of_site;  /* plan site -> slot item, -1 if none */
  size_t *site_of_item;
  symmpin_slot_item *items;
  size_t nitems;
  /* Groups: for each run of one group in one rank's record, the distinct items called in it on
   * their planned stream: members[run_start[k] .. run_start[k+1]). */
  u64vec members, run_start;
  u64vec grouped;
  bool groups_alike; /* this epoch's records have the same calls in the same groups */
} builder;

static void builder_free(builder *b) {
  HASH_CLEAR(hh, b->table);
  for (size_t i = 0; i < b->nseen; i++) free(b->order[i]);
  free(b->order);
  free(b->item_of_site);
  free(b->site_of_item);
  free(b->items);
  free(b->members.v);
  free(b->run_start.v);
  free(b->grouped.v);
}

static seen *seen_get(builder *b, uint64_t site, symmpin_status *st) {
  seen *s;
  HASH_FIND(hh, b->table, &site, sizeof(site), s);
  if (s) return s;
  if ((b->nseen & (b->nseen - 1)) == 0) { /* grow at powers of two */
    seen **o = realloc(b->order, (b->nseen ? b->nseen * 2 : 1) * sizeof(*o));
    if (!o) goto nomem;
    b->order = o;
  }
  s = calloc(1, sizeof(*s));
  if (!s) goto nomem;
  s->site = site;
  s->order = b->nseen;
  s->last_rank = -1;
  s->pos0 = -1;
  s->plan_i = -1;
  HASH_ADD(hh, b->table, site, sizeof(s->site), s);
  b->order[b->nseen++] = s;
  return s;
nomem:
  SYMMPIN_WARN("plan: out of memory (%zu sites)", b->nseen);
  *st = SYMMPIN_ERR_NOMEM;
  return NULL;
}

/* Every site of every record, and which ones the ranks disagree on. */
static symmpin_status scan_records(builder *b, bool *same_sequence) {
  symmpin_status st = SYMMPIN_OK;
  size_t maxlen = 0;
  bool same_start = true;
  for (int r = 0; r < b->nranks; r++) {
    const symmpin_record *rec = b->rec[r];
    if (rec->ncalls > maxlen) maxlen = rec->ncalls;
    if (rec->first_call != b->rec[0]->first_call) same_start = false;
    for (size_t i = 0; i < rec->ncalls; i++) {
      seen *s = seen_get(b, rec->calls[i].site, &st);
      if (!s) return st;
      if (s->last_rank != r) {
        s->last_rank = r;
        s->ranks_with++;
      }
      if (r == 0) {
        if (s->pos0 < 0) s->pos0 = (long)i;
        s->calls0++;
      }
      if (rec->calls[i].group) s->grouped = true;
    }
  }
  /* Groups alike: the same group index at every position of records of one length (indices
   * count a record's groups from its start, so equal indices are equal groups). */
  b->groups_alike = same_start;
  for (int r = 1; r < b->nranks && b->groups_alike; r++) {
    const symmpin_record *rec = b->rec[r];
    b->groups_alike = rec->ncalls == b->rec[0]->ncalls;
    for (size_t i = 0; i < rec->ncalls && b->groups_alike; i++)
      b->groups_alike = rec->calls[i].group == b->rec[0]->calls[i].group;
  }
  /* Position by position: a call that is not the same on every rank taints every site found at
   * that position (records of different start or length count as differing there too). */
  bool same = same_start;
  for (size_t i = 0; i < maxlen; i++) {
    bool agree = same_start;
    for (int r = 0; r < b->nranks && agree; r++)
      agree = i < b->rec[r]->ncalls && same_call(&b->rec[r]->calls[i], &b->rec[0]->calls[i]);
    if (agree) continue;
    same = false;
    for (int r = 0; r < b->nranks; r++) {
      if (i >= b->rec[r]->ncalls) continue;
      seen *s;
      HASH_FIND(hh, b->table, &b->rec[r]->calls[i].site, sizeof(uint64_t), s);
      s->bad = true;
    }
  }
  *same_sequence = same;
  return SYMMPIN_OK;
}

/* Decide a site first seen in this epoch (before placement). */
static symmpin_plan_reason decide(const builder *b, const seen *s, symmpin_plan_site *out) {
  const symmpin_plan_policy *pol = b->pol;
  if (s->ranks_with < b->nranks) return SYMMPIN_PLAN_NOT_ALL_RANKS;
  if (s->bad) return SYMMPIN_PLAN_DIFFERS;
  int dtype = out->dtype, op = out->op, coll = out->coll;
  if (coll < 0 || coll >= SYMMPIN_COLL_COUNT || dtype < 0 || dtype >= SYMMPIN_DTYPE_COUNT ||
      op < 0 || op >= SYMMPIN_OP_COUNT ||
      (pol->supports && !pol->supports(coll, dtype, op, pol->ctx)))
    return SYMMPIN_PLAN_UNSUPPORTED;
  uint64_t esize = symmpin_dtype_size(dtype);
  if (pol->max_bytes && !fits(coll, out->count, esize, b->nranks, pol->max_bytes))
    return SYMMPIN_PLAN_TOO_LARGE;
  if (out->stream_ord < 0) return SYMMPIN_PLAN_NO_STREAM;
  size_t bytes = pol->slot_bytes(coll, (size_t)out->count, dtype, b->nranks, pol->ctx);
  if (bytes == 0) return SYMMPIN_PLAN_UNSUPPORTED;
  out->slot_bytes = bytes;
  return SYMMPIN_PLAN_PINNED;
}

static long item_for_site(const builder *b, uint64_t site) {
  seen *s;
  HASH_FIND(hh, b->table, &site, sizeof(site), s);
  return (s && s->plan_i >= 0) ? b->item_of_site[s->plan_i] : -1;
}

/* Collect group runs (distinct items per run, on their planned stream) and the sorted pair keys. */
static symmpin_status collect_groups(builder *b) {
  for (int r = 0; r < b->nranks; r++) {
    const symmpin_record *rec = b->rec[r];
    for (size_t i = 0; i < rec->ncalls;) {
      uint32_t g = rec->calls[i].group;
      size_t j = i;
      while (j < rec->ncalls && rec->calls[j].group == g) j++;
      if (g != 0) {
        size_t start = b->members.n;
        for (size_t k = i; k < j; k++) {
          long it = item_for_site(b, rec->calls[k].site);
          if (it < 0 || b->items[it].stream != rec->calls[k].stream_ord) continue;
          bool dup = false;
          for (size_t m = start; m < b->members.n && !dup; m++) dup = b->members.v[m] == (uint64_t)it;
          if (!dup && !u64vec_push(&b->members, (uint64_t)it)) goto nomem;
        }
        if (b->members.n - start >= 2) {
          if (!u64vec_push(&b->run_start, start)) goto nomem;
          for (size_t x = start; x < b->members.n; x++)
            for (size_t y = x + 1; y < b->members.n; y++) {
              uint64_t a = b->members.v[x], c = b->members.v[y];
              uint64_t key = a < c ? (a << 32 | c) : (c << 32 | a);
              if (!u64vec_push(&b->grouped, key)) goto nomem;
            }
        } else {
          b->members.n = start;
        }
      }
      i = j;
    }
  }
  if (!u64vec_push(&b->run_start, b->members.n)) goto nomem; /* sentinel */
  if (b->grouped.n) qsort(b->grouped.v, b->grouped.n, sizeof(uint64_t), cmp_u64);
  size_t u = 0;
  for (size_t k = 0; k < b->grouped.n; k++)
    if (u == 0 || b->grouped.v[k] != b->grouped.v[u - 1]) b->grouped.v[u++] = b->grouped.v[k];
  b->grouped.n = u;
  return SYMMPIN_OK;
nomem:
  SYMMPIN_WARN("plan: out of memory collecting groups");
  return SYMMPIN_ERR_NOMEM;
}

/* Per-stream maxima for the lower bound: a short list (a communicator uses a few streams). */
typedef struct {
  u64vec stream, best;
} stream_max;

static bool stream_max_put(stream_max *m, int stream, uint64_t bytes) {
  size_t k = 0;
  while (k < m->stream.n && m->stream.v[k] != (uint64_t)stream) k++;
  if (k == m->stream.n && !(u64vec_push(&m->stream, (uint64_t)stream) && u64vec_push(&m->best, 0)))
    return false;
  if (bytes > m->best.v[k]) m->best.v[k] = bytes;
  return true;
}

/* The most slot bytes that can be in flight at once: per stream, the largest pinned slot or the
 * largest group of pinned slots on it, whichever is more; summed over streams (streams are never
 * ordered, so all can be busy at once). 0 if out of memory (a report value only). */
static uint64_t lower_bound(const builder *b, const symmpin_plan *plan) {
  stream_max m = {{0}, {0}};
  bool ok = true;
  for (size_t it = 0; it < b->nitems && ok; it++) {
    const symmpin_plan_site *s = &plan->sites[b->site_of_item[it]];
    if (s->pinned) ok = stream_max_put(&m, s->stream_ord, s->slot_bytes);
  }
  for (size_t k = 0; k + 1 < b->run_start.n && ok; k++) {
    size_t lo = b->run_start.v[k], hi = b->run_start.v[k + 1];
    /* Sum per stream over this run's pinned members (runs are short: quadratic is fine). */
    for (size_t x = lo; x < hi && ok; x++) {
      int stream = b->items[b->members.v[x]].stream;
      bool first_of_stream = true;
      for (size_t y = lo; y < x; y++)
        if (b->items[b->members.v[y]].stream == stream) first_of_stream = false;
      if (!first_of_stream) continue;
      uint64_t sum = 0;
      for (size_t y = x; y < hi; y++) {
        const symmpin_plan_site *sy = &plan->sites[b->site_of_item[b->members.v[y]]];
        if (b->items[b->members.v[y]].stream == stream && sy->pinned) sum += sy->slot_bytes;
      }
      ok = stream_max_put(&m, stream, sum);
    }
  }
  uint64_t total = 0;
  for (size_t k = 0; k < m.best.n; k++) total += m.best.v[k];
  free(m.stream.v);
  free(m.best.v);
  return ok ? total : 0;
}

static uint64_t plan_digest(const symmpin_plan *p) {
  uint64_t h = symmpin_hash_combine(0x706c616e31ULL /* "plan1" */, (uint64_t)(int64_t)p->comm);
  h = symmpin_hash_combine(h, p->epoch);
  h = symmpin_hash_combine(h, (uint64_t)p->mode);
  h = symmpin_hash_combine(h, p->nsites);
  for (size_t i = 0; i < p->nsites; i++) {
    const symmpin_plan_site *s = &p->sites[i];
    h = symmpin_hash_combine(h, s->site);
    h = symmpin_hash_combine(h, (uint64_t)s->pinned << 32 | (uint32_t)s->reason);
    h = symmpin_hash_combine(h, s->offset);
    h = symmpin_hash_combine(h, s->slot_bytes);
    h = symmpin_hash_combine(h, (uint64_t)(int64_t)s->stream_ord);
  }
  h = symmpin_hash_combine(h, p->capture_offset);
  h = symmpin_hash_combine(h, p->capture_bytes);
  /* The group rules: what a call's kind changes. */
  h = symmpin_hash_combine(h, p->groups_alike);
  h = symmpin_hash_combine(h, p->n_eager_slow);
  h = symmpin_hash_combine(h, p->n_group_slow);
  h = symmpin_hash_combine(h, p->group_max_bytes);
  for (size_t i = 0; i < p->n_eager_slow + p->n_group_slow; i++) {
    const symmpin_plan_shape *x =
        i < p->n_eager_slow ? &p->eager_slow[i] : &p->group_slow[i - p->n_eager_slow];
    h = symmpin_hash_combine(h, x->count);
    h = symmpin_hash_combine(h, (uint64_t)(uint32_t)x->dtype << 32 | (uint32_t)x->op);
    if (x->coll) h = symmpin_hash_combine(h, (uint64_t)x->coll); /* all-reduce digests as before */
  }
  for (size_t i = 0; i < p->nsites; i++) h = symmpin_hash_combine(h, p->sites[i].grouped);
  return symmpin_hash_combine(h, p->pool_bytes);
}

static symmpin_status check_inputs(const symmpin_record *const *records,
                                   const symmpin_plan_policy *pol, const symmpin_plan *prev) {
  if (!records || !pol || pol->nranks < 1 || !pol->slot_bytes) goto bad;
  if (pol->alignment & (pol->alignment - 1)) goto bad;
  for (int r = 0; r < pol->nranks; r++) {
    const symmpin_record *rec = records[r];
    if (!rec || rec->rank != r || rec->nranks != pol->nranks || rec->comm != records[0]->comm)
      goto bad;
  }
  if (prev && (prev->comm != records[0]->comm || prev->nranks != pol->nranks)) goto bad;
  return SYMMPIN_OK;
bad:
  SYMMPIN_WARN("plan: invalid input (records must be ranks 0..n-1 of one communicator, alignment "
               "a power of two, slot_bytes set)");
  return SYMMPIN_ERR_INVALID;
}

symmpin_status symmpin_plan_make(const symmpin_record *const *records,
                                 const symmpin_plan_policy *pol, const symmpin_plan *prev,
                                 symmpin_plan **out) {
  symmpin_status st = check_inputs(records, pol, prev);
  if (st != SYMMPIN_OK) return st;
  builder b = {.rec = records, .pol = pol, .nranks = pol->nranks};
  plan_impl *pi = calloc(1, sizeof(*pi));
  if (!pi) {
    SYMMPIN_WARN("plan: out of memory (comm %d)", records[0]->comm);
    return SYMMPIN_ERR_NOMEM;
  }
  symmpin_plan *p = &pi->pub;
  p->comm = records[0]->comm;
  p->nranks = pol->nranks;
  p->epoch = prev ? prev->epoch + 1 : 0;
  p->mode = pol->mode;
  p->alignment = pol->alignment ? pol->alignment : 256;

  st = scan_records(&b, &p->same_sequence);
  if (st != SYMMPIN_OK) goto fail;

  /* Sites: the previous plan's, unchanged, then the new ones in discovery order. */
  size_t nold = prev ? prev->nsites : 0, nnew = 0;
  for (size_t i = 0; i < b.nseen; i++)
    if (!symmpin_plan_find(prev, b.order[i]->site)) nnew++;
  p->nsites = nold + nnew;
  p->nnew = nnew;
  p->sites = calloc(p->nsites ? p->nsites : 1, sizeof(*p->sites));
  b.item_of_site = malloc((p->nsites ? p->nsites : 1) * sizeof(*b.item_of_site));
  b.site_of_item = malloc((p->nsites ? p->nsites : 1) * sizeof(*b.site_of_item));
  b.items = calloc(p->nsites ? p->nsites : 1, sizeof(*b.items));
  if (!p->sites || !b.item_of_site || !b.site_of_item || !b.items) goto nomem;
  if (nold) memcpy(p->sites, prev->sites, nold * sizeof(*p->sites));
  for (size_t i = 0; i < nold; i++) {
    seen *s;
    HASH_FIND(hh, b.table, &p->sites[i].site, sizeof(uint64_t), s);
    if (s) s->plan_i = (long)i;
    if (s && s->grouped) p->sites[i].grouped = true;
  }
  size_t k = nold;
  for (size_t i = 0; i < b.nseen; i++) {
    seen *s = b.order[i];
    if (s->plan_i >= 0) continue;
    symmpin_plan_site *ps = &p->sites[k];
    s->plan_i = (long)k++;
    /* Shape and stream from the site's first call in rank 0's record, else any rank's. */
    const symmpin_call *c = NULL;
    if (s->pos0 >= 0) {
      c = &records[0]->calls[s->pos0];
    } else {
      for (int r = 1; r < b.nranks && !c; r++)
        for (size_t j = 0; j < records[r]->ncalls && !c; j++)
          if (records[r]->calls[j].site == s->site) c = &records[r]->calls[j];
    }
    *ps = (symmpin_plan_site){.site = s->site,
                              .count = c->count,
                              .dtype = c->dtype,
                              .op = c->op,
                              .coll = c->coll,
                              .grouped = s->grouped,
                              .stream_ord = c->stream_ord,
                              .epoch = p->epoch,
                              .calls = s->calls0};
    ps->reason = decide(&b, s, ps);
    if (ps->reason != SYMMPIN_PLAN_PINNED) ps->slot_bytes = 0;
    ps->slot_bytes = align_up(ps->slot_bytes, p->alignment);
  }

  p->groups_alike = (prev ? prev->groups_alike : true) && b.groups_alike;
  p->group_max_bytes = pol->group_max_bytes;
  st = apply_measured(pol, prev, p, nold);
  if (st != SYMMPIN_OK) goto nomem;

  /* Slot items: every site holding bytes from earlier plans (pinned or demoted: their bytes stay
   * reserved, calls issued before a demotion may still be in flight), then the new candidates. */
  for (size_t i = 0; i < p->nsites; i++) {
    const symmpin_plan_site *ps = &p->sites[i];
    bool holds = i < nold ? ps->slot_bytes > 0 : ps->reason == SYMMPIN_PLAN_PINNED;
    b.item_of_site[i] = holds ? (long)b.nitems : -1;
    if (!holds) continue;
    b.site_of_item[b.nitems] = i;
    b.items[b.nitems++] = (symmpin_slot_item){.bytes = ps->slot_bytes, .stream = ps->stream_ord,
                                              .placed = i < nold, .offset = ps->offset};
  }
  st = collect_groups(&b);
  if (st != SYMMPIN_OK) goto fail;

  /* Earlier sites sharing bytes that this epoch shows in one group: the later one goes to NCCL. */
  symmpin_slot_problem prob = {.items = b.items, .nitems = b.nitems, .grouped = b.grouped.v,
                               .ngrouped = b.grouped.n, .alignment = p->alignment,
                               .pool_bytes = prev ? prev->pool_bytes : 0,
                               .reserved_offset = prev ? prev->capture_offset : 0,
                               .reserved_bytes = prev ? prev->capture_bytes : 0};
  for (size_t g = 0; g < b.grouped.n; g++) {
    size_t x = (size_t)(b.grouped.v[g] >> 32), y = (size_t)(b.grouped.v[g] & 0xffffffffu);
    symmpin_plan_site *sx = &p->sites[b.site_of_item[x]], *sy = &p->sites[b.site_of_item[y]];
    if (b.site_of_item[y] >= nold || !sx->pinned || !sy->pinned) continue;
    if (symmpin_slots_intersect(&b.items[x], &b.items[y])) {
      sy->pinned = false;
      sy->reason = SYMMPIN_PLAN_CONFLICT;
    }
  }

  const symmpin_slot_assigner *as =
      pol->mode == SYMMPIN_PLAN_DEDICATED ? &symmpin_slots_dedicated : &symmpin_slots_shared;
  st = as->assign(&prob);
  if (st != SYMMPIN_OK) goto fail;
  p->pool_bytes = prob.pool_bytes;
  /* The capture arena: placed once, after the slots of the plan that first asks for one; later
   * plans place their new slots after it (offsets never move). */
  if (prev && prev->capture_bytes) {
    p->capture_offset = prev->capture_offset;
    p->capture_bytes = prev->capture_bytes;
  } else if (pol->capture_bytes) {
    p->capture_offset = align_up(p->pool_bytes, p->alignment);
    p->capture_bytes = align_up(pol->capture_bytes, p->alignment);
    p->pool_bytes = p->capture_offset + p->capture_bytes;
  }
  for (size_t it = 0; it < b.nitems; it++) {
    symmpin_plan_site *ps = &p->sites[b.site_of_item[it]];
    if (b.site_of_item[it] >= nold) {
      ps->offset = b.items[it].offset;
      ps->pinned = true;
    }
  }
  for (size_t i = 0; i < p->nsites; i++) {
    if (!p->sites[i].pinned) continue;
    p->npinned++;
    p->dedicated_bytes += p->sites[i].slot_bytes;
  }
  p->lower_bound_bytes = lower_bound(&b, p);
  p->digest = plan_digest(p);

  pi->entries = calloc(p->nsites ? p->nsites : 1, sizeof(*pi->entries));
  if (!pi->entries) goto nomem;
  for (size_t i = 0; i < p->nsites; i++) {
    symmpin_plan_index *e = &pi->entries[i];
    e->site = p->sites[i].site;
    e->i = i;
    HASH_ADD(hh, pi->head, site, sizeof(e->site), e);
  }
  p->index = pi->head;
  if (!index_shapes(pi)) goto nomem;
  builder_free(&b);
  *out = p;
  return SYMMPIN_OK;
nomem:
  SYMMPIN_WARN("plan: out of memory (comm %d, %zu sites)", p->comm, b.nseen);
  st = SYMMPIN_ERR_NOMEM;
fail:
  builder_free(&b);
  symmpin_plan_free(p);
  return st;
}
