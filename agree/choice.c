/* Per-shape choice by measurement (choice.h). */
#include "agree/choice.h"

#include <stdlib.h>
#include <string.h>

#include "common/hash.h"

const char *const symmpin_choice_mode_names[] = {[SYMMPIN_CHOOSE_MEASURE] = "measure",
                                                 [SYMMPIN_CHOOSE_STATIC] = "static", NULL};

typedef struct shape_samples {
  symmpin_plan_shape shape;
  float us[2][SYMMPIN_CHOICE_SAMPLES]; /* [redirected] */
  unsigned n[2];
  uint32_t calls; /* pinned eager calls seen (symmpin_choice_probe) */
} shape_samples;

/* Open addressing over twice the shapes (never more than half full): the probe and the timing
 * decisions look a shape up on every pinned eager call. */
#define SLOTS (2 * SYMMPIN_CHOICE_SHAPES)

/* Groups: a count per first shape (probes), samples per unit. Short lists, looked up once per
 * group. */
typedef struct group_head {
  symmpin_plan_shape first;
  uint32_t groups;
} group_head;

typedef struct unit_samples {
  symmpin_choice_unit unit;
  float us[2][SYMMPIN_CHOICE_SAMPLES]; /* [redirected] */
  unsigned n[2];
} unit_samples;

struct symmpin_choice {
  shape_samples s[SYMMPIN_CHOICE_SHAPES];
  size_t n;
  unsigned char slot[SLOTS]; /* 0 free, else 1 + index into s */
  group_head heads[SYMMPIN_CHOICE_HEADS];
  size_t nheads;
  unit_samples units[SYMMPIN_CHOICE_GROUPS];
  size_t nunits;
};

symmpin_choice *symmpin_choice_new(void) { return calloc(1, sizeof(symmpin_choice)); }
void symmpin_choice_free(symmpin_choice *ch) { free(ch); }

static bool same_shape(const symmpin_plan_shape *a, const symmpin_plan_shape *b) {
  return a->coll == b->coll && a->count == b->count && a->dtype == b->dtype && a->op == b->op;
}

/* The shape's samples, added if there is room (add); NULL otherwise. */
static shape_samples *find(symmpin_choice *ch, const symmpin_plan_shape *shape, bool add) {
  uint64_t h = symmpin_hash_combine(shape->count, (uint64_t)(uint32_t)shape->dtype << 32 |
                                                      (uint32_t)shape->op);
  for (size_t i = h % SLOTS;; i = (i + 1) % SLOTS) {
    if (ch->slot[i] == 0) {
      if (!add || ch->n == SYMMPIN_CHOICE_SHAPES) return NULL;
      shape_samples *s = &ch->s[ch->n++];
      memset(s, 0, sizeof *s);
      s->shape = *shape;
      ch->slot[i] = (unsigned char)ch->n; /* 1 + its index */
      return s;
    }
    shape_samples *s = &ch->s[ch->slot[i] - 1];
    if (same_shape(&s->shape, shape)) return s;
  }
}

bool symmpin_choice_probe(symmpin_choice *ch, const symmpin_plan_shape *shape) {
  shape_samples *s = ch ? find(ch, shape, true) : NULL;
  if (!s) return false;
  uint32_t j = s->calls < UINT32_MAX ? s->calls++ : s->calls;
  return j < 2 * SYMMPIN_CHOICE_SAMPLES && (j & 1);
}

bool symmpin_choice_want(symmpin_choice *ch, const symmpin_plan_shape *shape, bool redirected) {
  if (!ch) return false;
  shape_samples *s = find(ch, shape, false);
  return s && s->n[redirected] < SYMMPIN_CHOICE_SAMPLES;
}

void symmpin_choice_add(symmpin_choice *ch, const symmpin_plan_shape *shape, bool redirected,
                        double us) {
  if (!ch || !(us >= 0)) return;
  /* Never adds: which shapes are tracked follows the probes (the same calls on every rank), not
   * which timings this rank happened to get. */
  shape_samples *s = find(ch, shape, false);
  if (s && s->n[redirected] < SYMMPIN_CHOICE_SAMPLES) s->us[redirected][s->n[redirected]++] = (float)us;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* Median in nanoseconds (the lower middle of an even count), 0 without samples. */
static uint32_t median_ns(const float *v, unsigned n) {
  if (n == 0) return 0;
  float t[SYMMPIN_CHOICE_SAMPLES];
  memcpy(t, v, n * sizeof *t);
  qsort(t, n, sizeof *t, cmp_float);
  double ns = (double)t[(n - 1) / 2] * 1000.0;
  return ns >= 4e9 ? UINT32_MAX : (uint32_t)(ns + 0.5);
}

size_t symmpin_choice_export(const symmpin_choice *ch, symmpin_choice_entry *out, size_t cap) {
  size_t k = 0;
  for (size_t i = 0; ch && i < ch->n && k < cap; i++) {
    const shape_samples *s = &ch->s[i];
    if (!s->n[0] && !s->n[1]) continue;
    out[k++] = (symmpin_choice_entry){.count = s->shape.count,
                                      .dtype = s->shape.dtype,
                                      .op = s->shape.op,
                                      .coll = s->shape.coll,
                                      .nccl_ns = median_ns(s->us[0], s->n[0]),
                                      .symmpin_ns = median_ns(s->us[1], s->n[1]),
                                      .nccl_n = s->n[0],
                                      .symmpin_n = s->n[1]};
  }
  return k;
}

static const symmpin_choice_entry *entry_of(const symmpin_choice_entry *e, size_t n,
                                            const symmpin_choice_entry *like) {
  for (size_t i = 0; i < n; i++)
    if (e[i].coll == like->coll && e[i].count == like->count && e[i].dtype == like->dtype &&
        e[i].op == like->op)
      return &e[i];
  return NULL;
}

size_t symmpin_choice_verdict(const symmpin_choice_entry *const *entries, const size_t *n,
                              int nranks, symmpin_plan_shape *out, size_t cap) {
  if (nranks < 1 || !entries || !n) return 0;
  size_t k = 0;
  for (size_t i = 0; i < n[0] && k < cap; i++) {
    const symmpin_choice_entry *first = &entries[0][i];
    uint32_t nccl = 0, sym = 0;
    bool known = true;
    for (int r = 0; r < nranks && known; r++) {
      const symmpin_choice_entry *e = entries[r] ? entry_of(entries[r], n[r], first) : NULL;
      known = e && e->nccl_n >= SYMMPIN_CHOICE_MIN && e->symmpin_n >= SYMMPIN_CHOICE_MIN;
      if (!known) break;
      if (e->nccl_ns > nccl) nccl = e->nccl_ns;
      if (e->symmpin_ns > sym) sym = e->symmpin_ns;
    }
    if (known && sym > nccl)
      out[k++] = (symmpin_plan_shape){
          .count = first->count, .dtype = first->dtype, .op = first->op, .coll = first->coll};
  }
  return k;
}

/* ---- groups ---- */

void symmpin_choice_unit_init(symmpin_choice_unit *u) {
  memset(u, 0, sizeof *u);
  u->sig = 0x67726f7570ull; /* "group" */
}

void symmpin_choice_unit_add(symmpin_choice_unit *u, const symmpin_plan_shape *shape) {
  if (u->ncalls < SYMMPIN_CHOICE_GROUP_CALLS) u->calls[u->ncalls] = *shape;
  if (u->ncalls <= SYMMPIN_CHOICE_GROUP_CALLS) u->ncalls++; /* past the end: too long, stays so */
  u->sig = symmpin_hash_combine(u->sig, shape->count);
  u->sig =
      symmpin_hash_combine(u->sig, (uint64_t)(uint32_t)shape->dtype << 32 | (uint32_t)shape->op);
  if (shape->coll) u->sig = symmpin_hash_combine(u->sig, (uint64_t)(uint32_t)shape->coll);
}

bool symmpin_choice_group_probe(symmpin_choice *ch, const symmpin_plan_shape *first, bool *timed) {
  *timed = false;
  if (!ch) return false;
  group_head *h = NULL;
  for (size_t i = 0; i < ch->nheads && !h; i++)
    if (same_shape(&ch->heads[i].first, first)) h = &ch->heads[i];
  if (!h && ch->nheads < SYMMPIN_CHOICE_HEADS) {
    h = &ch->heads[ch->nheads++];
    *h = (group_head){.first = *first};
  }
  if (!h) return false;
  uint32_t j = h->groups < UINT32_MAX ? h->groups++ : h->groups;
  *timed = j < 2 * SYMMPIN_CHOICE_SAMPLES;
  return *timed && (j & 1);
}

static bool same_unit(const symmpin_choice_unit *a, const symmpin_choice_unit *b) {
  return a->sig == b->sig && a->ncalls == b->ncalls && a->ncalls <= SYMMPIN_CHOICE_GROUP_CALLS &&
         memcmp(a->calls, b->calls, a->ncalls * sizeof a->calls[0]) == 0;
}

static unit_samples *unit_find(symmpin_choice *ch, uint64_t sig) {
  for (size_t i = 0; ch && i < ch->nunits; i++)
    if (ch->units[i].unit.sig == sig) return &ch->units[i];
  return NULL;
}

bool symmpin_choice_group_want(symmpin_choice *ch, const symmpin_choice_unit *u, bool redirected) {
  if (!ch || u->ncalls == 0 || u->ncalls > SYMMPIN_CHOICE_GROUP_CALLS) return false;
  unit_samples *s = NULL;
  for (size_t i = 0; i < ch->nunits && !s; i++)
    if (same_unit(&ch->units[i].unit, u)) s = &ch->units[i];
  if (!s) {
    /* Another unit of that signature (a hash collision) is not tracked: samples go by sig. */
    if (unit_find(ch, u->sig) || ch->nunits == SYMMPIN_CHOICE_GROUPS) return false;
    s = &ch->units[ch->nunits++];
    memset(s, 0, sizeof *s);
    s->unit = *u;
  }
  return s->n[redirected] < SYMMPIN_CHOICE_SAMPLES;
}

void symmpin_choice_group_add(symmpin_choice *ch, uint64_t sig, bool redirected, double us) {
  unit_samples *s = us >= 0 ? unit_find(ch, sig) : NULL;
  if (s && s->n[redirected] < SYMMPIN_CHOICE_SAMPLES)
    s->us[redirected][s->n[redirected]++] = (float)us;
}

size_t symmpin_choice_group_export(const symmpin_choice *ch, symmpin_choice_group_entry *out,
                                   size_t cap) {
  size_t k = 0;
  for (size_t i = 0; ch && i < ch->nunits && k < cap; i++) {
    const unit_samples *s = &ch->units[i];
    if (!s->n[0] && !s->n[1]) continue;
    out[k++] = (symmpin_choice_group_entry){.unit = s->unit,
                                            .nccl_ns = median_ns(s->us[0], s->n[0]),
                                            .symmpin_ns = median_ns(s->us[1], s->n[1]),
                                            .nccl_n = s->n[0],
                                            .symmpin_n = s->n[1]};
  }
  return k;
}

size_t symmpin_choice_group_verdict(const symmpin_choice_group_entry *const *entries,
                                    const size_t *n, int nranks, symmpin_plan_shape *out,
                                    size_t cap) {
  if (nranks < 1 || !entries || !n) return 0;
  size_t k = 0;
  for (size_t i = 0; entries[0] && i < n[0]; i++) {
    const symmpin_choice_unit *first = &entries[0][i].unit;
    if (first->ncalls > SYMMPIN_CHOICE_GROUP_CALLS) continue;
    uint32_t nccl = 0, sym = 0;
    bool known = true;
    for (int r = 0; r < nranks && known; r++) {
      const symmpin_choice_group_entry *e = NULL;
      for (size_t j = 0; entries[r] && j < n[r] && !e; j++)
        if (same_unit(&entries[r][j].unit, first)) e = &entries[r][j];
      known = e && e->nccl_n >= SYMMPIN_CHOICE_MIN && e->symmpin_n >= SYMMPIN_CHOICE_MIN;
      if (!known) break;
      if (e->nccl_ns > nccl) nccl = e->nccl_ns;
      if (e->symmpin_ns > sym) sym = e->symmpin_ns;
    }
    if (!known || sym <= nccl) continue;
    for (uint32_t c = 0; c < first->ncalls; c++) {
      bool dup = false;
      for (size_t j = 0; j < k && !dup; j++) dup = same_shape(&out[j], &first->calls[c]);
      if (dup) continue;
      if (k == cap) return k;
      out[k++] = first->calls[c];
    }
  }
  return k;
}
