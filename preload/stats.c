/* Statistics (stats.h): a uthash of sites per communicator, communicators on one global list. */
#include "preload/stats.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "common/log.h"

typedef struct stats_site {
  uint64_t site;
  symmpin_stats_site_view v; /* v.where's strings live in where_mem */
  char *where_mem;
  UT_hash_handle hh;
} stats_site;

struct symmpin_stats_comm {
  int ordinal, rank, nranks, device;
  pthread_mutex_t lock;
  stats_site *sites; /* uthash keeps insertion order: sites print in order of first call */
  bool has_pool;
  uint32_t planned_sites;
  uint64_t dedicated_bytes, lower_bound_bytes, pool_bytes;
  uint64_t capture_bytes, capture_used_bytes; /* the capture arena, inside pool_bytes */
  const char *nccl_only; /* why symmpin passes the communicator through (static), or NULL */
  struct symmpin_stats_comm *next;
};

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static symmpin_stats_comm *comms; /* newest first */

symmpin_stats_comm *symmpin_stats_comm_open(int ordinal, int rank, int nranks, int device) {
  symmpin_stats_comm *sc = calloc(1, sizeof *sc);
  if (!sc) {
    SYMMPIN_WARN("out of memory for statistics");
    return NULL;
  }
  sc->ordinal = ordinal;
  sc->rank = rank;
  sc->nranks = nranks;
  sc->device = device;
  pthread_mutex_init(&sc->lock, NULL);
  pthread_mutex_lock(&list_lock);
  sc->next = comms;
  comms = sc;
  pthread_mutex_unlock(&list_lock);
  return sc;
}

void symmpin_stats_comm_set_rank(symmpin_stats_comm *sc, int rank, int nranks) {
  if (!sc) return;
  pthread_mutex_lock(&sc->lock);
  sc->rank = rank;
  sc->nranks = nranks;
  pthread_mutex_unlock(&sc->lock);
}

void symmpin_stats_comm_set_nccl_only(symmpin_stats_comm *sc, const char *why) {
  if (!sc) return;
  pthread_mutex_lock(&sc->lock);
  sc->nccl_only = why;
  pthread_mutex_unlock(&sc->lock);
}

/* Caller holds sc->lock. NULL if out of memory. */
static stats_site *site_get(symmpin_stats_comm *sc, uint64_t site) {
  stats_site *s;
  HASH_FIND(hh, sc->sites, &site, sizeof site, s);
  if (s) return s;
  s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->site = site;
  HASH_ADD(hh, sc->sites, site, sizeof site, s);
  return s;
}

/* Keep a copy of the site's first known location (once per site; the caller's strings belong to
 * the loader). Caller holds the lock. */
static void site_where_keep(stats_site *s, const symmpin_site_where *w) {
  if (s->where_mem || !symmpin_site_where_known(w)) return;
  size_t lm = strlen(w->module) + 1, ls = w->symbol ? strlen(w->symbol) + 1 : 0;
  char *mem = malloc(lm + ls);
  if (!mem) return; /* only the location is lost */
  memcpy(mem, w->module, lm);
  if (ls) memcpy(mem + lm, w->symbol, ls);
  s->where_mem = mem;
  s->v.where = (symmpin_site_where){.module = mem, .symbol = ls ? mem + lm : NULL,
                                    .offset = w->offset};
}

void symmpin_stats_record(symmpin_stats_comm *sc, uint64_t site, int coll, uint64_t count,
                          int dtype, int op, symmpin_reason reason) {
  symmpin_stats_record_at(sc, site, NULL, coll, count, dtype, op, reason);
}

void symmpin_stats_record_at(symmpin_stats_comm *sc, uint64_t site, const symmpin_site_where *where,
                             int coll, uint64_t count, int dtype, int op, symmpin_reason reason) {
  if (!sc) return;
  pthread_mutex_lock(&sc->lock);
  stats_site *s = site_get(sc, site);
  if (s) {
    site_where_keep(s, where);
    s->v.count = count;
    s->v.dtype = dtype;
    s->v.op = op;
    s->v.coll = coll;
    s->v.calls++;
    s->v.bytes += count * symmpin_dtype_size(dtype);
    if (reason == SYMMPIN_REASON_NONE)
      s->v.redirected++;
    else
      s->v.nccl++;
    if ((unsigned)reason < SYMMPIN_REASON_COUNT) s->v.reasons[reason]++;
  }
  pthread_mutex_unlock(&sc->lock);
}

void symmpin_stats_record_time(symmpin_stats_comm *sc, uint64_t site, bool redirected, double us) {
  if (!sc || !(us >= 0)) return;
  pthread_mutex_lock(&sc->lock);
  stats_site *s = site_get(sc, site);
  if (s) {
    uint64_t i = s->v.timed[redirected]++;
    s->v.sample_us[redirected][i % SYMMPIN_STATS_TIMED_KEEP] = (float)us;
  }
  pthread_mutex_unlock(&sc->lock);
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

double symmpin_stats_median_us(const symmpin_stats_site_view *v, int path) {
  if (path < 0 || path > 1 || !v->timed[path]) return -1.0;
  size_t n = v->timed[path] < SYMMPIN_STATS_TIMED_KEEP ? (size_t)v->timed[path]
                                                        : SYMMPIN_STATS_TIMED_KEEP;
  float x[SYMMPIN_STATS_TIMED_KEEP];
  memcpy(x, v->sample_us[path], n * sizeof *x);
  qsort(x, n, sizeof *x, cmp_float);
  return n % 2 ? x[n / 2] : (x[n / 2 - 1] + (double)x[n / 2]) / 2.0;
}

double symmpin_stats_least_us(const symmpin_stats_site_view *v, int path) {
  if (path < 0 || path > 1 || !v->timed[path]) return -1.0;
  size_t n = v->timed[path] < SYMMPIN_STATS_TIMED_KEEP ? (size_t)v->timed[path]
                                                        : SYMMPIN_STATS_TIMED_KEEP;
  float least = v->sample_us[path][0];
  for (size_t i = 1; i < n; i++)
    if (v->sample_us[path][i] < least) least = v->sample_us[path][i];
  return least;
}

bool symmpin_stats_want_timing(symmpin_stats_comm *sc, uint64_t site, bool redirected) {
  if (!sc) return false;
  pthread_mutex_lock(&sc->lock);
  stats_site *s;
  HASH_FIND(hh, sc->sites, &site, sizeof site, s);
  /* calls counts the calls recorded so far (this one is recorded after the engine saw it) */
  bool want = !s || s->v.timed[redirected] < SYMMPIN_STATS_TIMED_FIRST ||
              s->v.calls % SYMMPIN_STATS_TIMED_EVERY == 0;
  pthread_mutex_unlock(&sc->lock);
  return want;
}

void symmpin_stats_set_slot(symmpin_comm *c, uint64_t site, uint64_t offset, uint64_t bytes) {
  symmpin_stats_comm *sc = c ? c->stats : NULL;
  if (!sc) return;
  pthread_mutex_lock(&sc->lock);
  stats_site *s = site_get(sc, site);
  if (s) {
    s->v.has_slot = true;
    s->v.slot_offset = offset;
    s->v.slot_bytes = bytes;
  }
  pthread_mutex_unlock(&sc->lock);
}

void symmpin_stats_set_pool(symmpin_comm *c, uint32_t planned_sites, uint64_t dedicated_bytes,
                            uint64_t lower_bound_bytes, uint64_t pool_bytes) {
  symmpin_stats_comm *sc = c ? c->stats : NULL;
  if (!sc) return;
  pthread_mutex_lock(&sc->lock);
  sc->has_pool = true;
  sc->planned_sites = planned_sites;
  sc->dedicated_bytes = dedicated_bytes;
  sc->lower_bound_bytes = lower_bound_bytes;
  sc->pool_bytes = pool_bytes;
  pthread_mutex_unlock(&sc->lock);
}

void symmpin_stats_set_capture(symmpin_comm *c, uint64_t arena_bytes, uint64_t used_bytes) {
  symmpin_stats_comm *sc = c ? c->stats : NULL;
  if (!sc) return;
  pthread_mutex_lock(&sc->lock);
  sc->capture_bytes = arena_bytes;
  sc->capture_used_bytes = used_bytes;
  pthread_mutex_unlock(&sc->lock);
}

bool symmpin_stats_site_get(symmpin_stats_comm *sc, uint64_t site, symmpin_stats_site_view *out) {
  if (!sc) return false;
  pthread_mutex_lock(&sc->lock);
  stats_site *s;
  HASH_FIND(hh, sc->sites, &site, sizeof site, s);
  if (s) *out = s->v;
  pthread_mutex_unlock(&sc->lock);
  return s != NULL;
}

/* Communicators in (ordinal, rank) order, for stable output. Caller holds list_lock; the array
 * is malloc'ed (NULL if none or out of memory). */
static symmpin_stats_comm **sorted(size_t *n) {
  size_t k = 0;
  for (symmpin_stats_comm *c = comms; c; c = c->next) k++;
  *n = 0;
  if (!k) return NULL;
  symmpin_stats_comm **v = malloc(k * sizeof *v);
  if (!v) return NULL;
  k = 0;
  for (symmpin_stats_comm *c = comms; c; c = c->next) v[k++] = c;
  for (size_t i = 1; i < k; i++) /* insertion sort: a handful of communicators */
    for (size_t j = i; j > 0; j--) {
      symmpin_stats_comm *a = v[j - 1], *b = v[j];
      if (a->ordinal < b->ordinal || (a->ordinal == b->ordinal && a->rank <= b->rank)) break;
      v[j - 1] = b;
      v[j] = a;
    }
  *n = k;
  return v;
}

void symmpin_stats_print(FILE *f) {
  pthread_mutex_lock(&list_lock);
  size_t n;
  symmpin_stats_comm **v = sorted(&n);
  fprintf(f, "symmpin stats: %zu communicator(s)\n", n);
  for (size_t i = 0; i < n; i++) {
    symmpin_stats_comm *c = v[i];
    pthread_mutex_lock(&c->lock);
    fprintf(f, "comm %d rank %d/%d device %d", c->ordinal, c->rank, c->nranks, c->device);
    if (c->has_pool)
      fprintf(f, ": pool %" PRIu64 " B, %u sites planned, dedicated %" PRIu64
                 " B, lower bound %" PRIu64 " B",
              c->pool_bytes, c->planned_sites, c->dedicated_bytes, c->lower_bound_bytes);
    if (c->has_pool && c->capture_bytes)
      fprintf(f, "; capture arena %" PRIu64 " B of it, %" PRIu64 " B used", c->capture_bytes,
              c->capture_used_bytes);
    if (c->nccl_only) fprintf(f, "; NCCL only: %s", c->nccl_only);
    fprintf(f, "\n  %-18s %-13s %10s %-5s %-4s %10s %14s %10s %10s %22s  %s\n", "site",
            "collective", "count", "type", "op", "calls", "bytes", "symmpin", "nccl",
            "slot (offset+bytes)", "nccl reasons");
    for (stats_site *s = c->sites; s; s = s->hh.next) {
      char slot[48] = "-";
      if (s->v.has_slot)
        snprintf(slot, sizeof slot, "%" PRIu64 "+%" PRIu64, s->v.slot_offset, s->v.slot_bytes);
      fprintf(f,
              "  0x%016" PRIx64 " %-13s %10" PRIu64 " %-5s %-4s %10" PRIu64 " %14" PRIu64
              " %10" PRIu64 " %10" PRIu64 " %22s ",
              s->site, symmpin_coll_name(s->v.coll), s->v.count, symmpin_dtype_name(s->v.dtype),
              s->v.coll == SYMMPIN_COLL_ALLGATHER ? "-" : symmpin_op_name(s->v.op), s->v.calls,
              s->v.bytes, s->v.redirected, s->v.nccl, slot);
      for (int r = 1; r < SYMMPIN_REASON_COUNT; r++)
        if (s->v.reasons[r])
          fprintf(f, " %s=%" PRIu64, symmpin_reason_name((symmpin_reason)r), s->v.reasons[r]);
      char where[256];
      if (symmpin_site_where_format(&s->v.where, where, sizeof where)) fprintf(f, "  at %s", where);
      fputc('\n', f);
    }
    pthread_mutex_unlock(&c->lock);
  }
  pthread_mutex_unlock(&list_lock);
  free(v);
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

void symmpin_stats_write_json(FILE *f) {
  pthread_mutex_lock(&list_lock);
  size_t n;
  symmpin_stats_comm **v = sorted(&n);
  fprintf(f, "{\"version\": 1, \"comms\": [");
  for (size_t i = 0; i < n; i++) {
    symmpin_stats_comm *c = v[i];
    pthread_mutex_lock(&c->lock);
    fprintf(f, "%s\n  {\"ordinal\": %d, \"rank\": %d, \"nranks\": %d, \"device\": %d",
            i ? "," : "", c->ordinal, c->rank, c->nranks, c->device);
    if (c->has_pool)
      fprintf(f, ", \"pool\": {\"planned_sites\": %u, \"dedicated_bytes\": %" PRIu64
                 ", \"lower_bound_bytes\": %" PRIu64 ", \"pool_bytes\": %" PRIu64
                 ", \"capture_bytes\": %" PRIu64 ", \"capture_used_bytes\": %" PRIu64 "}",
              c->planned_sites, c->dedicated_bytes, c->lower_bound_bytes, c->pool_bytes,
              c->capture_bytes, c->capture_used_bytes);
    if (c->nccl_only) {
      fprintf(f, ", \"nccl_only\": ");
      json_str(f, c->nccl_only);
    }
    fprintf(f, ", \"sites\": [");
    for (stats_site *s = c->sites; s; s = s->hh.next) {
      fprintf(f,
              "%s\n    {\"site\": \"0x%016" PRIx64 "\", \"coll\": \"%s\", \"count\": %" PRIu64
              ", \"dtype\": \"%s\", \"op\": \"%s\", \"calls\": %" PRIu64 ", \"bytes\": %" PRIu64
              ", \"redirected\": %" PRIu64 ", \"nccl\": %" PRIu64 ", \"reasons\": {",
              s == c->sites ? "" : ",", s->site, symmpin_coll_name(s->v.coll), s->v.count,
              symmpin_dtype_name(s->v.dtype), symmpin_op_name(s->v.op), s->v.calls, s->v.bytes,
              s->v.redirected, s->v.nccl);
      bool first = true;
      for (int r = 1; r < SYMMPIN_REASON_COUNT; r++)
        if (s->v.reasons[r]) {
          fprintf(f, "%s\"%s\": %" PRIu64, first ? "" : ", ",
                  symmpin_reason_name((symmpin_reason)r), s->v.reasons[r]);
          first = false;
        }
      fprintf(f, "}");
      if (s->v.has_slot)
        fprintf(f, ", \"slot\": {\"offset\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
                s->v.slot_offset, s->v.slot_bytes);
      if (s->v.timed[0] || s->v.timed[1]) { /* medians and least of the timed calls, null if none */
        fprintf(f, ", \"time_us\": {");
        for (int k = 0; k < 4; k++) {
          int path = k % 2;
          fprintf(f, "%s\"%s%s\": ", k ? ", " : "", path ? "symmpin" : "nccl", k < 2 ? "" : "_least");
          if (s->v.timed[path])
            fprintf(f, "%.3f", k < 2 ? symmpin_stats_median_us(&s->v, path)
                                     : symmpin_stats_least_us(&s->v, path));
          else
            fputs("null", f);
        }
        fprintf(f, ", \"samples\": [%" PRIu64 ", %" PRIu64 "]}", s->v.timed[0], s->v.timed[1]);
      }
      if (symmpin_site_where_known(&s->v.where)) {
        fprintf(f, ", \"where\": {\"module\": ");
        json_str(f, s->v.where.module);
        fprintf(f, ", \"offset\": \"0x%" PRIx64 "\", \"symbol\": ", s->v.where.offset);
        if (s->v.where.symbol)
          json_str(f, s->v.where.symbol);
        else
          fputs("null", f);
        fputc('}', f);
      }
      fprintf(f, "}");
    }
    fprintf(f, "]}");
    pthread_mutex_unlock(&c->lock);
  }
  fprintf(f, "\n]}\n");
  pthread_mutex_unlock(&list_lock);
  free(v);
}

void symmpin_stats_reset(void) {
  pthread_mutex_lock(&list_lock);
  symmpin_stats_comm *c = comms;
  comms = NULL;
  pthread_mutex_unlock(&list_lock);
  while (c) {
    symmpin_stats_comm *next = c->next;
    stats_site *s, *tmp;
    HASH_ITER(hh, c->sites, s, tmp) {
      HASH_DEL(c->sites, s);
      free(s->where_mem);
      free(s);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
    c = next;
  }
}
