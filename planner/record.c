/* Call records (record.h) and their board encoding. */
#include "planner/record.h"
#include "planner/schedule.h" /* SYMMPIN_RECORD_MAX_CALLS */

#include "common/hash.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

void symmpin_record_init(symmpin_record *r, int comm, int rank, int nranks, uint64_t first_call) {
  memset(r, 0, sizeof(*r));
  r->comm = comm;
  r->rank = rank;
  r->nranks = nranks;
  r->first_call = first_call;
}

void symmpin_record_free(symmpin_record *r) {
  if (!r) return;
  free(r->calls);
  r->calls = NULL;
  r->ncalls = r->cap = 0;
}

void symmpin_record_restart(symmpin_record *r, uint64_t first_call) {
  r->ncalls = 0;
  r->ngroups = 0;
  r->last_token = 0;
  r->first_call = first_call;
}

symmpin_status symmpin_record_append(symmpin_record *r, const symmpin_call *c, uint64_t group_token) {
  if (!r || !c) return SYMMPIN_ERR_INVALID;
  if (r->ncalls == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 256;
    symmpin_call *v = realloc(r->calls, cap * sizeof(*v));
    if (!v) {
      SYMMPIN_WARN("call record of comm %d rank %d: out of memory (%zu calls)", r->comm, r->rank,
                   cap);
      return SYMMPIN_ERR_NOMEM;
    }
    r->calls = v;
    r->cap = cap;
  }
  symmpin_call *d = &r->calls[r->ncalls++];
  *d = *c;
  if (group_token == 0) {
    d->group = 0;
  } else {
    /* A new token opens a new group; the previous grouped call's token continues its group. */
    if (group_token != r->last_token || r->ngroups == 0) r->ngroups++;
    d->group = r->ngroups;
  }
  r->last_token = group_token;
  return SYMMPIN_OK;
}

/* ---- board encoding ---- */

#define RECORD_MAGIC 0x32435250u /* "PRC2": calls carry their collective */

typedef struct blob_header {
  uint32_t magic;
  uint32_t ncalls;
  int32_t comm, rank, nranks;
  uint32_t reserved;
  uint64_t first_call;
} blob_header;
_Static_assert(sizeof(blob_header) == 32, "record blob header layout");

typedef struct blob_call {
  uint64_t site;
  uint64_t count;
  uint32_t group;
  int16_t stream_ord;
  uint8_t dtype, op;
  uint8_t flags; /* bit 0 in place, bit 1 capturing */
  uint8_t coll;  /* symmpin_coll; 255 for a value outside the list */
  uint8_t pad[6];
} blob_call;
_Static_assert(sizeof(blob_call) == 32, "record blob call layout");

/* dtype and op are NCCL enums; anything outside 0..254 (e.g. a PreMulSum op handle) is not ours
 * and stays "unsupported" as 255. */
static uint8_t clamp_u8(int v) { return (uint8_t)(v >= 0 && v < 255 ? v : 255); }

size_t symmpin_record_encoded_bytes(size_t ncalls) {
  return sizeof(blob_header) + ncalls * sizeof(blob_call);
}

symmpin_status symmpin_record_encode(const symmpin_record *r, void *buf, size_t cap, size_t *len) {
  if (!r || !len || r->ncalls > UINT32_MAX) return SYMMPIN_ERR_INVALID;
  size_t need = symmpin_record_encoded_bytes(r->ncalls);
  if (!buf || cap < need) {
    *len = need;
    SYMMPIN_WARN("call record of comm %d rank %d: %zu calls need %zu bytes, blob holds %zu",
                 r->comm, r->rank, r->ncalls, need, buf ? cap : 0);
    return SYMMPIN_ERR_INVALID;
  }
  blob_header h = {RECORD_MAGIC, (uint32_t)r->ncalls, r->comm, r->rank, r->nranks, 0,
                   r->first_call};
  memcpy(buf, &h, sizeof(h));
  char *p = (char *)buf + sizeof(h);
  for (size_t i = 0; i < r->ncalls; i++, p += sizeof(blob_call)) {
    const symmpin_call *c = &r->calls[i];
    /* A stream ordinal that does not fit int16 is "unknown". */
    blob_call b = {
        c->site,
        c->count,
        c->group,
        (int16_t)(c->stream_ord >= -1 && c->stream_ord <= INT16_MAX ? c->stream_ord : -1),
        clamp_u8(c->dtype),
        clamp_u8(c->op),
        (uint8_t)((c->in_place ? 1 : 0) | (c->capturing ? 2 : 0)),
        clamp_u8(c->coll),
        {0}};
    memcpy(p, &b, sizeof(b));
  }
  *len = need;
  return SYMMPIN_OK;
}

symmpin_status symmpin_record_decode(const void *buf, size_t len, symmpin_record *out) {
  blob_header h;
  if (!buf || !out || len < sizeof(h)) goto bad;
  memcpy(&h, buf, sizeof(h));
  /* A peer's words: never more calls than a rank records (and the length must say so too). */
  if (h.magic != RECORD_MAGIC || h.ncalls > SYMMPIN_RECORD_MAX_CALLS ||
      len != symmpin_record_encoded_bytes(h.ncalls))
    goto bad;
  symmpin_record r;
  symmpin_record_init(&r, h.comm, h.rank, h.nranks, h.first_call);
  if (h.ncalls) {
    r.calls = malloc(h.ncalls * sizeof(*r.calls));
    if (!r.calls) {
      SYMMPIN_WARN("call record of comm %d rank %d: out of memory decoding %u calls", h.comm,
                   h.rank, h.ncalls);
      return SYMMPIN_ERR_NOMEM;
    }
  }
  r.cap = r.ncalls = h.ncalls;
  const char *p = (const char *)buf + sizeof(h);
  for (size_t i = 0; i < r.ncalls; i++, p += sizeof(blob_call)) {
    blob_call b;
    memcpy(&b, p, sizeof(b));
    r.calls[i] = (symmpin_call){.site = b.site,
                                .count = b.count,
                                .dtype = b.dtype,
                                .op = b.op,
                                .coll = b.coll,
                                .stream_ord = b.stream_ord,
                                .group = b.group,
                                .in_place = b.flags & 1,
                                .capturing = (b.flags & 2) != 0};
    if (b.group > r.ngroups) r.ngroups = b.group;
  }
  *out = r;
  return SYMMPIN_OK;
bad:
  SYMMPIN_WARN("call record: malformed board blob (%zu bytes%s)", len,
               buf && len >= sizeof(h) ? "" : ", shorter than its header");
  return SYMMPIN_ERR_INVALID;
}

uint64_t symmpin_call_key(uint64_t site, int stream_ord) {
  (void)stream_ord; /* rank-local: never part of what decides a call's route (record.h) */
  return site;
}

int symmpin_call_class(int stream_ord, int variant, int nvariants) {
  return stream_ord < 0 ? -1 : stream_ord * nvariants + variant;
}
