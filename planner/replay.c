/* symmpin-replay's engine (replay.h): traces -> per communicator, per rank call sequences ->
 * warm-up, epochs and plans as the preload computes them -> a text or JSON report.
 *
 * Communicators are matched across files by their 128-bit key (from the comm-init events), not by
 * ordinal: ordinals agree between ranks of one communicator, but two disjoint split children can
 * have the same ordinal in different processes. A file whose events carry no key falls back to
 * the ordinal.
 *
 * Plans speak in keys (a site on one stream, planner/record.h); reports speak in the user's call
 * sites: every key the replay builds is remembered with the site and stream it stands for, and
 * with where the site is in the program when a trace says so ("#where=" lines). */
#include "planner/replay.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "common/invariant.h"
#include "common/log.h"
#include "planner/record.h"
#include "planner/schedule.h"
#include "planner/site.h"
#include "planner/trace.h"
#include "planner/warmup.h"

#define SYMMPIN_MAX_RANKS_PER_FILE 64 /* ranks of one communicator one process may drive */
/* What one replay takes (with the trace reader's bounds, planner/trace.h): lookups are linear in
 * these, and a forged trace must not make the replay run for hours. A real job has a handful of
 * communicators and of threads that make groups. */
#define SYMMPIN_REPLAY_MAX_COMMS 4096   /* communicators in all the traces together */
#define SYMMPIN_REPLAY_MAX_THREADS 4096 /* threads making ncclGroupStart/End in one trace */

typedef struct rank_data {
  int rank;
  int file;                 /* index into the loaded files */
  symmpin_call *calls;      /* in call order; .group holds the raw group token until recorded */
  size_t ncalls, cap;
  symmpin_site_table *sites;   /* per call site, all streams together */
  symmpin_site_table *entries; /* per plan key (a site on one stream): that stream's calls only */
  /* what the simulation found */
  uint64_t warmup_end;      /* call count that ended warm-up; 0 if it never did */
  uint32_t period;
} rank_data;

/* What a plan key stands for. The key is a hash of (site, stream): it cannot be undone, so the
 * replay notes the pair when it makes the key, as the preload does for its statistics. */
typedef struct key_info {
  uint64_t key, site;
  int stream;               /* stream ordinal, -1 unknown */
  int klass;                /* the sharing class the planner sees (planner/record.h) */
  int variant;              /* the kernel variant of the site's shape */
  long listed;              /* index among the report's entries; -1 until listed */
  const symmpin_site_where *where; /* from the first file that locates the site's stack; NULL */
  UT_hash_handle hh;
} key_info;

typedef struct comm_data {
  uint64_t key_hi, key_lo;
  int ordinal;              /* as in the first file that showed it */
  int nranks;
  rank_data **ranks;        /* [nranks], NULL where no trace has the rank */
  key_info *keys;           /* uthash by key: every plan key any rank made */
  /* the simulation */
  symmpin_plan *plan;       /* last plan; NULL if warm-up never ended everywhere */
  uint64_t *rank_digest;    /* [nranks] the digest each rank computed */
  bool complete, agreed;
  int epochs;               /* agreed */
  int failed_epochs;        /* closed but not agreed (misaligned, captured) */
} comm_data;

typedef struct thread_state {
  uint64_t tid;
  int depth;
  uint64_t token;
} thread_state;

typedef struct loaded {
  symmpin_trace_file *files;
  int nfiles;
  comm_data *comms;
  size_t ncomms;
  size_t unattributed;      /* all-reduces whose rank could not be told */
  const symmpin_plan_kernels *kernels;
} loaded;

/* Splits learn rank and size lazily, so a communicator may grow as events come in. */
static bool comm_grow(comm_data *c, int nranks) {
  if (nranks <= c->nranks) return true;
  rank_data **r = realloc(c->ranks, (size_t)nranks * sizeof(*r));
  if (!r) return false;
  memset(r + c->nranks, 0, (size_t)(nranks - c->nranks) * sizeof(*r));
  c->ranks = r;
  c->nranks = nranks;
  return true;
}

/* Index of the communicator with this key (or, unkeyed, this ordinal), added if new; -1 if out of
 * memory, -2 past SYMMPIN_REPLAY_MAX_COMMS. Indices, not pointers: the array moves as it grows. */
static long comm_get(loaded *L, uint64_t hi, uint64_t lo, int ordinal, int nranks) {
  bool keyed = hi || lo;
  for (size_t i = 0; i < L->ncomms; i++) {
    comm_data *c = &L->comms[i];
    if (keyed ? (c->key_hi == hi && c->key_lo == lo)
              : (!c->key_hi && !c->key_lo && c->ordinal == ordinal))
      return comm_grow(c, nranks) ? (long)i : -1;
  }
  if (L->ncomms >= SYMMPIN_REPLAY_MAX_COMMS) return -2;
  comm_data *v = realloc(L->comms, (L->ncomms + 1) * sizeof(*v));
  if (!v) return -1;
  L->comms = v;
  comm_data *c = &L->comms[L->ncomms];
  memset(c, 0, sizeof(*c));
  c->key_hi = hi;
  c->key_lo = lo;
  c->ordinal = ordinal;
  if (!comm_grow(c, nranks > 0 ? nranks : 1)) return -1;
  return (long)L->ncomms++;
}

static rank_data *rank_get(comm_data *c, int rank, int file, int ordinal) {
  if (rank < 0 || rank >= c->nranks) return NULL;
  if (!c->ranks[rank]) {
    rank_data *r = calloc(1, sizeof(*r));
    if (!r) return NULL;
    r->rank = rank;
    r->file = file;
    r->sites = symmpin_site_table_create(ordinal);
    r->entries = symmpin_site_table_create(ordinal);
    if (!r->sites || !r->entries) {
      symmpin_site_table_destroy(r->sites);
      symmpin_site_table_destroy(r->entries);
      free(r);
      return NULL;
    }
    c->ranks[rank] = r;
  }
  return c->ranks[rank];
}

static key_info *key_find(const comm_data *c, uint64_t key) {
  key_info *k = NULL;
  HASH_FIND(hh, c->keys, &key, sizeof(key), k);
  return k;
}

/* Remember what a key stands for; NULL if out of memory. Two pairs with one key (a 64-bit hash
 * collision) would share a plan entry in the preload too; the first pair names it. */
static key_info *key_note(comm_data *c, uint64_t key, uint64_t site, int stream, int klass,
                          int variant) {
  key_info *k = key_find(c, key);
  if (k) return k;
  k = calloc(1, sizeof(*k));
  if (!k) return NULL;
  *k = (key_info){.key = key, .site = site, .stream = stream, .klass = klass, .variant = variant,
                  .listed = -1};
  HASH_ADD(hh, c->keys, key, sizeof(k->key), k);
  return k;
}

/* Where a site is, from any key that stands for it; NULL when no trace says. */
static const symmpin_site_where *site_where(const comm_data *c, uint64_t site) {
  for (const key_info *k = c->keys; k; k = k->hh.next)
    if (k->site == site && k->where) return k->where;
  return NULL;
}

static bool is_init(symmpin_trace_call c) {
  return c == SYMMPIN_TRACE_COMM_INIT_RANK || c == SYMMPIN_TRACE_COMM_INIT_RANK_CONFIG ||
         c == SYMMPIN_TRACE_COMM_INIT_RANK_SCALABLE || c == SYMMPIN_TRACE_COMM_INIT_ALL ||
         c == SYMMPIN_TRACE_COMM_SPLIT;
}

/* What one file said about one communicator ordinal. */
typedef struct file_comm {
  int ordinal;
  long comm; /* index into loaded.comms */
  int ranks[SYMMPIN_MAX_RANKS_PER_FILE], devices[SYMMPIN_MAX_RANKS_PER_FILE];
  int nranks_here;
} file_comm;

static symmpin_status load_file(loaded *L, int fi) {
  const symmpin_trace_file *f = &L->files[fi];
  file_comm *fc = NULL;
  size_t nfc = 0;
  thread_state *ts = NULL;
  size_t nts = 0;
  uint64_t next_token = 0;
  symmpin_status st = SYMMPIN_OK;

  for (size_t e = 0; e < f->nevents && st == SYMMPIN_OK; e++) {
    const symmpin_trace_event *ev = &f->events[e];
    if (is_init(ev->call)) {
      if (ev->rc != 0 || ev->comm < 0) continue;
      long ci = comm_get(L, ev->key_hi, ev->key_lo, ev->comm, ev->nranks);
      if (ci == -2) {
        SYMMPIN_WARN("%s: more than %d communicators in the traces (SYMMPIN_REPLAY_MAX_COMMS)",
                     f->path, SYMMPIN_REPLAY_MAX_COMMS);
        st = SYMMPIN_ERR_INVALID;
        break;
      }
      if (ci < 0) goto nomem;
      comm_data *c = &L->comms[ci];
      size_t k = 0;
      while (k < nfc && fc[k].ordinal != ev->comm) k++;
      if (k == nfc) {
        file_comm *v = realloc(fc, (nfc + 1) * sizeof(*v));
        if (!v) goto nomem;
        fc = v;
        memset(&fc[nfc], 0, sizeof(fc[nfc]));
        fc[nfc++].ordinal = ev->comm;
      }
      fc[k].comm = ci;
      if (fc[k].nranks_here < SYMMPIN_MAX_RANKS_PER_FILE && ev->rank >= 0) {
        fc[k].ranks[fc[k].nranks_here] = ev->rank;
        fc[k].devices[fc[k].nranks_here++] = ev->device;
      }
      if (!rank_get(c, ev->rank, fi, ev->comm) && ev->rank >= 0) goto nomem;
      continue;
    }
    if (ev->call == SYMMPIN_TRACE_GROUP_START || ev->call == SYMMPIN_TRACE_GROUP_END) {
      if (ev->rc != 0) continue;
      size_t k = 0;
      while (k < nts && ts[k].tid != ev->tid) k++;
      if (k == nts && nts >= SYMMPIN_REPLAY_MAX_THREADS) {
        SYMMPIN_WARN("%s: more than %d threads make groups (SYMMPIN_REPLAY_MAX_THREADS)", f->path,
                     SYMMPIN_REPLAY_MAX_THREADS);
        st = SYMMPIN_ERR_INVALID;
        break;
      }
      if (k == nts) {
        thread_state *v = realloc(ts, (nts + 1) * sizeof(*v));
        if (!v) goto nomem;
        ts = v;
        ts[nts++] = (thread_state){ev->tid, 0, 0};
      }
      /* Count depth ourselves (the recorded depth is the same when present); a group opens a new
       * token only at depth 0 -> 1, nested groups belong to the outermost one. */
      if (ev->call == SYMMPIN_TRACE_GROUP_START) {
        if (ts[k].depth++ == 0) ts[k].token = ++next_token;
      } else if (ts[k].depth > 0 && --ts[k].depth == 0) {
        ts[k].token = 0;
      }
      continue;
    }
    int coll = symmpin_trace_call_coll(ev->call);
    if (coll < 0 || ev->comm < 0) continue;
    size_t k = 0;
    while (k < nfc && fc[k].ordinal != ev->comm) k++;
    if (k == nfc) { /* no comm-init seen for it (trace started late): cannot place it */
      L->unattributed++;
      continue;
    }
    int rank = ev->rank;
    if (rank < 0) { /* older traces: the only rank here, or the one on this device */
      if (fc[k].nranks_here == 1) rank = fc[k].ranks[0];
      for (int i = 0; i < fc[k].nranks_here && rank < 0; i++)
        if (fc[k].devices[i] == ev->device) rank = fc[k].ranks[i];
    }
    comm_data *c = &L->comms[fc[k].comm];
    if (!comm_grow(c, ev->nranks)) goto nomem;
    rank_data *r = rank >= 0 ? rank_get(c, rank, fi, ev->comm) : NULL;
    if (!r) {
      L->unattributed++;
      continue;
    }
    uint64_t token = 0;
    for (size_t t = 0; t < nts; t++)
      if (ts[t].tid == ev->tid) token = ts[t].token;
    if (r->ncalls == r->cap) {
      size_t cap = r->cap ? r->cap * 2 : 256;
      symmpin_call *v = realloc(r->calls, cap * sizeof(*v));
      if (!v) goto nomem;
      r->calls = v;
      r->cap = cap;
    }
    bool in_place = ev->send_ptr == ev->recv_ptr ||
                    (ev->send_alloc && ev->send_alloc == ev->recv_alloc &&
                     ev->send_off == ev->recv_off);
    /* Keys and sharing classes as the preload makes them (planner/record.h), with the comm's
     * size as the preload knows it at the call. */
    int nranks = ev->nranks > 0 ? ev->nranks : c->nranks;
    int variant = L->kernels->slot_class(coll, ev->count, ev->dtype, nranks);
    int klass = symmpin_call_class(ev->stream_ord, variant, L->kernels->nclasses);
    uint64_t key = symmpin_call_key(ev->site, ev->stream_ord);
    key_info *ki = key_note(c, key, ev->site, ev->stream_ord, klass, variant);
    if (!ki) goto nomem;
    if (!ki->where && f->nwheres) ki->where = symmpin_trace_file_where(f, ev->stack);
    r->calls[r->ncalls] = (symmpin_call){.site = key,
                                         .count = ev->count,
                                         .dtype = ev->dtype,
                                         .op = ev->op,
                                         .coll = coll,
                                         .stream_ord = klass,
                                         .group = (uint32_t)token,
                                         .in_place = in_place,
                                         .capturing = ev->capturing != 0,
                                         .send_alloc = ev->send_alloc,
                                         .recv_alloc = ev->recv_alloc};
    symmpin_site_call sc = {.site = ev->site,
                            .count = ev->count,
                            .dtype = ev->dtype,
                            .op = ev->op,
                            .coll = coll,
                            .stream_ord = ev->stream_ord,
                            .in_place = in_place,
                            .send_alloc = ev->send_alloc,
                            .recv_alloc = ev->recv_alloc,
                            .index = r->ncalls};
    r->ncalls++;
    st = symmpin_site_table_add(r->sites, &sc);
    sc.site = key;
    if (st == SYMMPIN_OK) st = symmpin_site_table_add(r->entries, &sc);
  }
  free(fc);
  free(ts);
  return st;
nomem:
  SYMMPIN_WARN("out of memory reading %s", f->path);
  free(fc);
  free(ts);
  return SYMMPIN_ERR_NOMEM;
}

/* A record of calls [from, to) of one rank, group tokens renumbered as the preload's record does. */
static symmpin_status make_record(const rank_data *r, int comm, int nranks, size_t from, size_t to,
                                  symmpin_record *rec) {
  symmpin_record_init(rec, comm, r->rank, nranks, from);
  for (size_t i = from; i < to; i++) {
    symmpin_call c = r->calls[i];
    symmpin_status st = symmpin_record_append(rec, &c, c.group);
    if (st != SYMMPIN_OK) {
      symmpin_record_free(rec);
      return st;
    }
  }
  return SYMMPIN_OK;
}

/* Whether any rank captured a CUDA graph during the epoch's agreement: at its closing call
 * (0-based index close - 1) or the calls after it where the engine plans and maps the pool
 * (SYMMPIN_AGREEMENT_UNCAPTURED_CALLS in all); the engine fails such an epoch on every rank. */
static bool captured_during_agreement(const comm_data *c, const uint64_t *close) {
  for (int r = 0; r < c->nranks; r++)
    for (uint64_t i = close[r] - 1;
         i < close[r] - 1 + SYMMPIN_AGREEMENT_UNCAPTURED_CALLS && i < c->ranks[r]->ncalls; i++)
      if (c->ranks[r]->calls[i].capturing) return true;
  return false;
}

/* The preload's epochs on the traces: every rank runs the shared schedule (planner/schedule.h)
 * over its own calls; at each agreement point the ranks' closing calls are compared as the board
 * shows them to the engine, and the epoch is planned from each rank's record since its last close,
 * or fails as the engine's would (closes that differ, a capture during the agreement). The GPU
 * side (pool growth, P2P) is assumed to succeed. */
static symmpin_status simulate(comm_data *c, const symmpin_replay_options *o, int ordinal) {
  symmpin_warmup_config cfg = {o->warmup};
  size_t n = c->nranks > 0 ? (size_t)c->nranks : 1;
  uint64_t *pos = calloc(n, sizeof(*pos)), *start = calloc(n, sizeof(*start));
  uint64_t *close = calloc(n, sizeof(*close));
  symmpin_schedule *sched = calloc(n, sizeof(*sched));
  symmpin_record *recs = calloc(n, sizeof(*recs));
  const symmpin_record **rp = calloc(n, sizeof(*rp));
  c->rank_digest = calloc(n, sizeof(*c->rank_digest));
  symmpin_status st = SYMMPIN_OK;
  int ready = 0;
  if (!pos || !start || !close || !sched || !recs || !rp || !c->rank_digest) {
    SYMMPIN_WARN("comm %d: out of memory simulating %zu ranks", ordinal, n);
    st = SYMMPIN_ERR_NOMEM;
    goto out;
  }
  c->complete = true;
  for (int r = 0; r < c->nranks; r++) c->complete = c->complete && c->ranks[r];
  if (!c->complete) goto out;
  for (; ready < c->nranks; ready++) {
    st = symmpin_schedule_init(&sched[ready], &cfg);
    if (st != SYMMPIN_OK) goto out;
  }

  symmpin_plan_policy pol = {.mode = o->mode, .max_bytes = o->max_bytes,
                             .capture_bytes = o->capture_bytes,
                             .alignment = SYMMPIN_PLAN_ALIGNMENT,
                             .slot_bytes = o->kernels->slot_bytes,
                             .supports = o->kernels->supports, .ctx = o->kernels->ctx,
                             .nranks = c->nranks};
  for (;;) {
    /* Every rank runs to its next closing call; the agreement then needs the calls after it. */
    bool reached = true;
    for (int r = 0; r < c->nranks; r++) {
      rank_data *rd = c->ranks[r];
      close[r] = 0;
      while (pos[r] < rd->ncalls && !close[r]) {
        const symmpin_call *k = &rd->calls[pos[r]++];
        bool missing =
            symmpin_plan_shape_missing(c->plan, &pol, k->coll, k->count, k->dtype, k->op);
        if (symmpin_schedule_call(
                &sched[r], pos[r],
                symmpin_warmup_key(c->ordinal, k->coll, k->count, k->dtype, k->op), missing))
          close[r] = pos[r];
      }
      if (close[r] && !rd->warmup_end) {
        rd->warmup_end = close[r];
        rd->period = sched[r].warmup.period;
      }
      reached = reached && close[r] && close[r] + SYMMPIN_AGREEMENT_CALLS <= rd->ncalls;
    }
    if (!reached) break;
    bool aligned = true;
    for (int r = 0; r < c->nranks; r++) aligned = symmpin_schedule_align(&sched[r], close, c->nranks);
    symmpin_plan *next = NULL;
    if (aligned && !captured_during_agreement(c, close)) {
      for (int r = 0; r < c->nranks && st == SYMMPIN_OK; r++) {
        uint64_t to = close[r] - start[r] > SYMMPIN_RECORD_MAX_CALLS ? start[r] + SYMMPIN_RECORD_MAX_CALLS : close[r];
        st = make_record(c->ranks[r], ordinal, c->nranks, start[r], to, &recs[r]);
        rp[r] = &recs[r];
      }
      /* Every rank runs the same function on the same records; do it per rank, as they would. */
      for (int r = 0; r < c->nranks && st == SYMMPIN_OK; r++) {
        symmpin_plan *mine = NULL;
        st = symmpin_plan_make(rp, &pol, c->plan, &mine);
        if (st != SYMMPIN_OK) break;
        c->rank_digest[r] = mine->digest;
        if (!next)
          next = mine;
        else
          symmpin_plan_free(mine);
      }
      for (int r = 0; r < c->nranks; r++) symmpin_record_free(&recs[r]);
      if (st != SYMMPIN_OK) {
        symmpin_plan_free(next);
        break;
      }
    }
    if (next) {
      symmpin_plan_free(c->plan);
      c->plan = next;
      c->epochs++;
    } else {
      c->failed_epochs++;
    }
    for (int r = 0; r < c->nranks; r++) {
      if (next)
        symmpin_schedule_agreed(&sched[r], next->nnew > 0);
      else
        symmpin_schedule_failed(&sched[r]);
      start[r] = close[r]; /* the engine restarts its record at the close, whatever the verdict */
    }
  }
  if (c->plan) {
    c->agreed = true;
    for (int r = 1; r < c->nranks; r++) c->agreed = c->agreed && c->rank_digest[r] == c->rank_digest[0];
  }
out:
  for (int r = 0; r < ready; r++) symmpin_schedule_free(&sched[r]);
  free(pos);
  free(start);
  free(close);
  free(sched);
  free(recs);
  free(rp);
  return st; /* failures were logged where they happened */
}

/* ---- reporting ---- */

/* The first rank that has a trace: its site table stands for the communicator. */
static const rank_data *first_rank(const comm_data *c) {
  for (int r = 0; r < c->nranks; r++)
    if (c->ranks[r]) return c->ranks[r];
  return NULL;
}

static bool same_sequence(const comm_data *c) {
  const rank_data *a = first_rank(c);
  if (!c->complete || !a) return false;
  for (int r = 0; r < c->nranks; r++) {
    const rank_data *b = c->ranks[r];
    if (b->ncalls != a->ncalls) return false;
    for (size_t i = 0; i < a->ncalls; i++)
      if (b->calls[i].site != a->calls[i].site || b->calls[i].stream_ord != a->calls[i].stream_ord)
        return false;
  }
  return true;
}

static void json_str(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(out, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(out, "\\u%04x", ch);
    else
      fputc(ch, out);
  }
  fputc('"', out);
}

/* A row of the report: one plan key, i.e. one site on one stream, with the calls the first rank
 * that made it made on that stream. */
typedef struct entry_row {
  const key_info *k;
  const symmpin_site *agg;
  int rank;
} entry_row;

/* Every key any rank made, in the first rank's call order, then those only later ranks made; sets
 * each key's .listed to its row. *n = 0 and NULL when there is none; NULL with *nomem set when
 * out of memory. */
static entry_row *list_entries(const comm_data *c, size_t *n, bool *nomem) {
  *n = 0;
  *nomem = false;
  size_t nkeys = HASH_COUNT(c->keys);
  if (nkeys == 0) return NULL;
  entry_row *rows = calloc(nkeys, sizeof(*rows));
  if (!rows) {
    *nomem = true;
    return NULL;
  }
  for (key_info *k = c->keys; k; k = k->hh.next) k->listed = -1;
  for (int r = 0; r < c->nranks; r++) {
    const rank_data *rd = c->ranks[r];
    if (!rd) continue;
    for (size_t i = 0; i < symmpin_site_table_count(rd->entries) && *n < nkeys; i++) {
      const symmpin_site *e = symmpin_site_table_at(rd->entries, i);
      key_info *k = key_find(c, e->id);
      if (!k || k->listed >= 0) continue;
      k->listed = (long)*n;
      rows[(*n)++] = (entry_row){k, e, r};
    }
  }
  return rows;
}

/* The plan's decision for a key, with the reason a key outside every plan gets. */
typedef struct decision {
  bool pinned;
  uint64_t offset, slot;
  long epoch; /* -1: not in the plan */
  const char *reason;
  uint64_t via; /* the pinned site whose slot its calls use (routing by shape); 0 if none */
} decision;

static decision key_decision(const comm_data *c, uint64_t key, const symmpin_site *shape) {
  const symmpin_plan_site *ps = c->plan ? symmpin_plan_find(c->plan, key) : NULL;
  const symmpin_plan_site *via =
      c->plan ? symmpin_plan_for_shape(c->plan, shape->coll, shape->count, shape->dtype, shape->op)
              : NULL;
  decision d = {.epoch = -1, .via = via ? via->site : 0};
  if (ps) {
    d = (decision){ps->pinned, ps->offset, ps->slot_bytes, (long)ps->epoch,
                   symmpin_plan_reason_name(ps->reason), d.via};
  } else {
    d.reason = c->complete ? symmpin_plan_reason_name(SYMMPIN_PLAN_UNPLANNED)
                           : "ranks missing from the traces";
  }
  return d;
}

/* Sets of keys some rank called inside one ncclGroup (in flight together, so the planner must not
 * let them share bytes), as sorted row indices, each distinct set once. Needs list_entries first. */
typedef struct row_set {
  long *v;
  size_t n;
} row_set;

static int cmp_long(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return x < y ? -1 : x > y;
}

static void sets_free(row_set *sets, size_t n) {
  for (size_t i = 0; i < n; i++) free(sets[i].v);
  free(sets);
}

static row_set *groups_together(const comm_data *c, size_t *nsets, bool *nomem) {
  row_set *sets = NULL;
  size_t n = 0;
  long *run = NULL;
  *nomem = false;
  for (int r = 0; r < c->nranks; r++) {
    const rank_data *rd = c->ranks[r];
    if (!rd || rd->ncalls == 0) continue;
    long *v = realloc(run, rd->ncalls * sizeof(*v));
    if (!v) goto nomem;
    run = v;
    for (size_t i = 0; i < rd->ncalls;) {
      size_t j = i, m = 0;
      /* A group's calls are contiguous on the comm (one thread issues them); tokens are unique. */
      while (j < rd->ncalls && rd->calls[i].group && rd->calls[j].group == rd->calls[i].group) {
        const key_info *k = key_find(c, rd->calls[j].site);
        if (k && k->listed >= 0) run[m++] = k->listed;
        j++;
      }
      i = j > i ? j : i + 1;
      if (m < 2) continue;
      qsort(run, m, sizeof(*run), cmp_long);
      size_t u = 1;
      for (size_t q = 1; q < m; q++)
        if (run[q] != run[u - 1]) run[u++] = run[q];
      if (u < 2) continue;
      bool seen = false;
      for (size_t q = 0; q < n && !seen; q++)
        seen = sets[q].n == u && memcmp(sets[q].v, run, u * sizeof(*run)) == 0;
      if (seen) continue;
      row_set *w = realloc(sets, (n + 1) * sizeof(*w));
      if (!w) goto nomem;
      sets = w;
      sets[n].v = malloc(u * sizeof(*run));
      if (!sets[n].v) goto nomem;
      memcpy(sets[n].v, run, u * sizeof(*run));
      sets[n++].n = u;
    }
  }
  free(run);
  *nsets = n;
  return sets;
nomem:
  free(run);
  sets_free(sets, n);
  *nsets = 0;
  *nomem = true;
  return NULL;
}

static void streams_list(FILE *out, uint64_t mask) {
  bool first = true;
  for (int s = 0; s < 64; s++)
    if (mask >> s & 1) {
      fprintf(out, first ? "%d" : " %d", s);
      first = false;
    }
}

static symmpin_status report_json(const loaded *L, const symmpin_replay_options *o, FILE *out) {
  fprintf(out, "{\"version\":1,\"mode\":\"%s\",\"warmup\":%u,\"max_bytes\":%" PRIu64
               ",\"unattributed_calls\":%zu,\"files\":[",
          symmpin_plan_mode_name(o->mode), o->warmup ? o->warmup : SYMMPIN_WARMUP_DEFAULT,
          o->max_bytes, L->unattributed);
  for (int f = 0; f < L->nfiles; f++) {
    if (f) fputc(',', out);
    json_str(out, L->files[f].path);
  }
  fprintf(out, "],\"comms\":[");
  for (size_t i = 0; i < L->ncomms; i++) {
    const comm_data *c = &L->comms[i];
    const symmpin_plan *p = c->plan;
    size_t nrows = 0, nsets = 0;
    bool nomem;
    entry_row *rows = list_entries(c, &nrows, &nomem);
    row_set *sets = nomem ? NULL : groups_together(c, &nsets, &nomem);
    if (nomem) {
      free(rows);
      SYMMPIN_WARN("out of memory writing the report (comm %d)", c->ordinal);
      return SYMMPIN_ERR_NOMEM;
    }
    fprintf(out, "%s{\"comm\":%d,\"key\":\"%016" PRIx64 "%016" PRIx64 "\",\"nranks\":%d,"
                 "\"ranks_present\":[",
            i ? "," : "", c->ordinal, c->key_hi, c->key_lo, c->nranks);
    bool first = true;
    for (int r = 0; r < c->nranks; r++)
      if (c->ranks[r]) {
        fprintf(out, first ? "%d" : ",%d", r);
        first = false;
      }
    fprintf(out, "],\"calls\":[");
    for (int r = 0; r < c->nranks; r++)
      fprintf(out, r ? ",%zu" : "%zu", c->ranks[r] ? c->ranks[r]->ncalls : 0);
    fprintf(out, "],\"warmup_end\":[");
    for (int r = 0; r < c->nranks; r++)
      fprintf(out, r ? ",%" PRIu64 : "%" PRIu64, c->ranks[r] ? c->ranks[r]->warmup_end : 0);
    fprintf(out, "],\"complete\":%s,\"same_sequence\":%s,\"agreed\":%s,\"epochs\":%d,\"failed_epochs\":%d,"
                 "\"digest\":\"%016" PRIx64 "\",\"pool_bytes\":%" PRIu64 ",\"dedicated_bytes\":%" PRIu64
                 ",\"planned_bytes\":%" PRIu64 ",\"capture_bytes\":%" PRIu64
                 ",\"lower_bound_bytes\":%" PRIu64 ",\"sites\":[",
            c->complete ? "true" : "false", same_sequence(c) ? "true" : "false",
            c->agreed ? "true" : "false", c->epochs, c->failed_epochs, p ? p->digest : 0, p ? p->pool_bytes : 0,
            p ? p->dedicated_bytes : 0, p ? p->pool_bytes - p->capture_bytes : 0,
            p ? p->capture_bytes : 0, p ? p->lower_bound_bytes : 0);
    /* One entry per (site, stream): what the plan decides for, with that stream's calls. */
    for (size_t k = 0; k < nrows; k++) {
      const key_info *ki = rows[k].k;
      const symmpin_site *s = rows[k].agg;
      decision d = key_decision(c, ki->key, s);
      const char *kernel = L->kernels->class_name(ki->variant);
      fprintf(out, "%s{\"site\":\"%016" PRIx64 "\",\"stream\":%d,\"class\":%d,\"kernel\":",
              k ? "," : "", ki->site, ki->stream, ki->klass);
      if (kernel)
        json_str(out, kernel);
      else
        fputs("null", out);
      fprintf(out,
              ",\"rank\":%d,\"coll\":\"%s\",\"calls\":%" PRIu64 ",\"bytes\":%" PRIu64
              ",\"count\":%" PRIu64 ",\"dtype\":\"%s\",\"op\":\"%s\",\"in_place\":%" PRIu64
              ",\"out_of_place\":%" PRIu64 ",\"pinned\":%s,\"offset\":%" PRIu64
              ",\"slot_bytes\":%" PRIu64 ",\"epoch\":%ld,\"reason\":",
              rows[k].rank, symmpin_coll_name(s->coll), s->calls, s->bytes, s->count,
              symmpin_dtype_name(s->dtype), symmpin_op_name(s->op), s->in_place, s->out_of_place,
              d.pinned ? "true" : "false", d.offset, d.slot, d.epoch);
      json_str(out, d.reason);
      if (d.via) /* where its calls go: the slot of the pinned site of its shape */
        fprintf(out, ",\"routed_to\":\"%016" PRIx64 "\"", d.via);
      if (ki->where) { /* only when a trace locates the site: older traces print as before */
        fprintf(out, ",\"where\":{\"module\":");
        json_str(out, ki->where->module);
        fprintf(out, ",\"offset\":\"0x%" PRIx64 "\",\"symbol\":", ki->where->offset);
        if (ki->where->symbol)
          json_str(out, ki->where->symbol);
        else
          fputs("null", out);
        fputc('}', out);
      }
      fputc('}', out);
    }
    /* Entries some rank called inside one group, as indices into "sites": they may never share
     * bytes (docs/planner.md), which a reader can check against the offsets. */
    fprintf(out, "],\"in_flight_together\":[");
    for (size_t q = 0; q < nsets; q++) {
      fputs(q ? ",[" : "[", out);
      for (size_t m = 0; m < sets[q].n; m++) fprintf(out, m ? ",%ld" : "%ld", sets[q].v[m]);
      fputc(']', out);
    }
    fprintf(out, "]}");
    free(rows);
    sets_free(sets, nsets);
  }
  fprintf(out, "]}\n");
  return SYMMPIN_OK;
}

/* "site S, stream N" for a plan key. Every plan key is a call's (site, stream); without asserts
 * a key no call made is printed as itself. */
static void print_entry_name(FILE *out, const comm_data *c, uint64_t key) {
  const key_info *k = key_find(c, key);
  SYMMPIN_ASSERT(k != NULL);
  if (!k)
    fprintf(out, "plan key %016" PRIx64 " (no call site known)", key);
  else if (k->stream < 0)
    fprintf(out, "%016" PRIx64 " on an unknown stream", k->site);
  else
    fprintf(out, "%016" PRIx64 " on stream %d", k->site, k->stream);
}

static symmpin_status report_text(const loaded *L, const symmpin_replay_options *o, FILE *out) {
  fprintf(out, "symmpin-replay: %d trace file(s), planner %s, warm-up %u, max bytes %" PRIu64
               ", slot sizes from the kernels\n",
          L->nfiles, symmpin_plan_mode_name(o->mode), o->warmup ? o->warmup : SYMMPIN_WARMUP_DEFAULT,
          o->max_bytes);
  if (L->unattributed)
    fprintf(out, "  %zu all-reduce(s) could not be attributed to a communicator rank\n",
            L->unattributed);
  for (size_t i = 0; i < L->ncomms; i++) {
    const comm_data *c = &L->comms[i];
    const rank_data *r0 = first_rank(c);
    fprintf(out, "\ncommunicator %d (key %016" PRIx64 "%016" PRIx64 "), %d rank(s)\n", c->ordinal,
            c->key_hi, c->key_lo, c->nranks);
    for (int r = 0; r < c->nranks; r++) {
      const rank_data *rd = c->ranks[r];
      if (!rd) {
        fprintf(out, "  rank %d: no trace\n", r);
        continue;
      }
      fprintf(out, "  rank %d: %s, %zu all-reduce(s), warm-up ", r, L->files[rd->file].path,
              rd->ncalls);
      if (!rd->warmup_end)
        fprintf(out, "did not end\n");
      else if (rd->period)
        fprintf(out, "ended at call %" PRIu64 " (a loop of %u call(s) seen twice)\n",
                rd->warmup_end, rd->period);
      else
        fprintf(out, "ended at call %" PRIu64 " (the limit, no loop seen)\n", rd->warmup_end);
    }
    fprintf(out, "  same sequence of sites on every rank: %s\n", same_sequence(c) ? "yes" : "no");
    if (!r0) continue;
    fprintf(out, "  call sites (rank %d):\n", r0->rank);
    for (size_t k = 0; k < symmpin_site_table_count(r0->sites); k++) {
      const symmpin_site *s = symmpin_site_table_at(r0->sites, k);
      char where[192];
      symmpin_site_where_format(site_where(c, s->id), where, sizeof where);
      fprintf(out,
              "    %016" PRIx64 "  %s%s%" PRIu64 " call(s), %" PRIu64 " bytes, %s count %" PRIu64
              " %s %s, stream(s) {",
              s->id, where, where[0] ? "  " : "", s->calls, s->bytes, symmpin_coll_name(s->coll),
              s->count, symmpin_dtype_name(s->dtype),
              s->coll == SYMMPIN_COLL_ALLGATHER ? "-" : symmpin_op_name(s->op));
      streams_list(out, s->streams);
      fprintf(out, "}, in-place %" PRIu64 " / out-of-place %" PRIu64 ", calls #%" PRIu64
                   "..#%" PRIu64 "\n",
              s->in_place, s->out_of_place, s->first_call, s->last_call);
    }
    /* Allocations: ids recorded at the sites, described by the rank's allocation events. */
    fprintf(out, "  allocations holding communication buffers (rank %d):\n", r0->rank);
    const symmpin_trace_file *f = &L->files[r0->file];
    for (size_t e = 0; e < f->nevents; e++) {
      const symmpin_trace_event *ev = &f->events[e];
      if (ev->call != SYMMPIN_TRACE_CUDA_MALLOC && ev->call != SYMMPIN_TRACE_CUDA_MALLOC_ASYNC &&
          ev->call != SYMMPIN_TRACE_NCCL_MEM_ALLOC)
        continue;
      if (!ev->alloc) continue;
      bool send = false, recv = false;
      for (size_t k = 0; k < symmpin_site_table_count(r0->sites); k++) {
        const symmpin_site *s = symmpin_site_table_at(r0->sites, k);
        for (int a = 0; a < s->nsend_allocs; a++) send = send || s->send_allocs[a] == ev->alloc;
        for (int a = 0; a < s->nrecv_allocs; a++) recv = recv || s->recv_allocs[a] == ev->alloc;
      }
      const char *use = send && recv ? "send and recv" : send ? "send" : recv ? "recv" : NULL;
      if (use)
        fprintf(out, "    alloc %" PRIu64 ": %s of %" PRIu64 " bytes at 0x%" PRIx64
                     " on device %d (stack %016" PRIx64 "), used as %s buffer\n",
                ev->alloc, symmpin_trace_call_name(ev->call), ev->size, ev->ptr, ev->device,
                ev->stack, use);
    }
    if (!c->complete) {
      fprintf(out, "  agreement: FAIL (ranks missing from the traces): everything stays on NCCL\n");
      continue;
    }
    if (!c->plan) {
      if (c->failed_epochs)
        fprintf(out, "  no plan: %d epoch(s) could not agree (ranks closed at different calls, "
                     "or a graph was being captured)\n", c->failed_epochs);
      else
        fprintf(out, "  no plan: warm-up did not end on every rank within the trace\n");
      continue;
    }
    const symmpin_plan *p = c->plan;
    fprintf(out, "  plan after %d agreed epoch(s)", c->epochs);
    if (c->failed_epochs)
      fprintf(out, " and %d that could not agree (ranks closed at different calls, or a graph "
                   "was being captured)", c->failed_epochs);
    fprintf(out, ", mode %s (a site called on two streams is planned once per stream):\n",
            symmpin_plan_mode_name(p->mode));
    for (int r = 0; r < c->nranks; r++)
      fprintf(out, "    rank %d computes digest %016" PRIx64 "\n", r, c->rank_digest[r]);
    for (size_t k = 0; k < p->nsites; k++) {
      const symmpin_plan_site *s = &p->sites[k];
      const key_info *ki = key_find(c, s->site);
      const char *kernel = ki ? L->kernels->class_name(ki->variant) : NULL;
      fputs("    ", out);
      print_entry_name(out, c, s->site);
      if (s->pinned) {
        fprintf(out, ": pinned at offset %" PRIu64 ", slot %" PRIu64 " bytes", s->offset,
                s->slot_bytes);
        if (kernel) fprintf(out, ", %s kernel", kernel);
        const symmpin_plan_site *via =
            symmpin_plan_for_shape(p, s->coll, s->count, s->dtype, s->op);
        if (via && via != s) /* routing is by shape: an earlier site of this shape takes its calls */
          fprintf(out, ", but its calls go to the slot of %016" PRIx64 " (same shape)", via->site);
        fprintf(out, " (epoch %u)\n", s->epoch);
      } else {
        /* Calls route by shape (planner/plan.h): a pinned site of this shape takes them. */
        const symmpin_plan_site *via =
            symmpin_plan_for_shape(p, s->coll, s->count, s->dtype, s->op);
        if (via)
          fprintf(out, ": not pinned (%s), but its calls go to the slot of %016" PRIx64
                       " (same shape) (epoch %u)\n",
                  symmpin_plan_reason_name(s->reason), via->site, s->epoch);
        else
          fprintf(out, ": NCCL, %s (epoch %u)\n", symmpin_plan_reason_name(s->reason), s->epoch);
      }
    }
    fprintf(out, "  pool %" PRIu64 " bytes: slots %" PRIu64 " (dedicated would be %" PRIu64
                 ", lower bound %" PRIu64 ") and a capture arena of %" PRIu64
                 "; %zu of %zu site/stream pair(s) pinned\n",
            p->pool_bytes, p->pool_bytes - p->capture_bytes, p->dedicated_bytes,
            p->lower_bound_bytes, p->capture_bytes, p->npinned, p->nsites);
    fprintf(out, "  agreement: %s\n", c->agreed ? "GO (every rank computes the same plan)"
                                                : "FAIL (plans differ between ranks)");
  }
  return SYMMPIN_OK;
}

symmpin_status symmpin_replay_run(const char *const *paths, int npaths,
                                  const symmpin_replay_options *o, FILE *out) {
  loaded L = {.kernels = o->kernels};
  symmpin_status st = SYMMPIN_OK;
  L.files = calloc((size_t)(npaths > 0 ? npaths : 1), sizeof(*L.files));
  if (!L.files) {
    SYMMPIN_WARN("out of memory for %d traces", npaths);
    return SYMMPIN_ERR_NOMEM;
  }
  for (int i = 0; i < npaths && st == SYMMPIN_OK; i++) {
    st = symmpin_trace_read(paths[i], &L.files[i]);
    if (st == SYMMPIN_OK) L.nfiles++;
  }
  for (int i = 0; i < L.nfiles && st == SYMMPIN_OK; i++) st = load_file(&L, i);
  for (size_t i = 0; i < L.ncomms && st == SYMMPIN_OK; i++)
    st = simulate(&L.comms[i], o, L.comms[i].ordinal);
  if (st == SYMMPIN_OK) st = (o->json ? report_json : report_text)(&L, o, out);

  for (size_t i = 0; i < L.ncomms; i++) {
    comm_data *c = &L.comms[i];
    for (int r = 0; r < c->nranks; r++)
      if (c->ranks[r]) {
        free(c->ranks[r]->calls);
        symmpin_site_table_destroy(c->ranks[r]->sites);
        symmpin_site_table_destroy(c->ranks[r]->entries);
        free(c->ranks[r]);
      }
    free(c->ranks);
    key_info *k, *tmp;
    HASH_ITER(hh, c->keys, k, tmp) {
      HASH_DEL(c->keys, k);
      free(k);
    }
    free(c->rank_digest);
    symmpin_plan_free(c->plan);
  }
  free(L.comms);
  for (int i = 0; i < L.nfiles; i++) symmpin_trace_file_free(&L.files[i]);
  free(L.files);
  return st;
}
