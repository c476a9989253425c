/* The trace (trace.h, docs/trace-format.md): a table of fields drives both the writer and the
 * reader, so a field is declared once. The writer formats by hand into its buffer (no stdio, no
 * malloc after open) under one mutex; the reader slurps a whole file and parses it line by line. */
#include "planner/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/invariant.h"
#include "common/log.h"

/* ---- call names ---- */

static const char *const call_names[SYMMPIN_TRACE_CALL_COUNT] = {
    [SYMMPIN_TRACE_UNKNOWN] = "unknown",
    [SYMMPIN_TRACE_CUDA_MALLOC] = "cudaMalloc",
    [SYMMPIN_TRACE_CUDA_FREE] = "cudaFree",
    [SYMMPIN_TRACE_CUDA_MALLOC_ASYNC] = "cudaMallocAsync",
    [SYMMPIN_TRACE_CUDA_FREE_ASYNC] = "cudaFreeAsync",
    [SYMMPIN_TRACE_NCCL_MEM_ALLOC] = "ncclMemAlloc",
    [SYMMPIN_TRACE_NCCL_MEM_FREE] = "ncclMemFree",
    [SYMMPIN_TRACE_COMM_INIT_RANK] = "ncclCommInitRank",
    [SYMMPIN_TRACE_COMM_INIT_RANK_CONFIG] = "ncclCommInitRankConfig",
    [SYMMPIN_TRACE_COMM_INIT_RANK_SCALABLE] = "ncclCommInitRankScalable",
    [SYMMPIN_TRACE_COMM_INIT_ALL] = "ncclCommInitAll",
    [SYMMPIN_TRACE_COMM_SPLIT] = "ncclCommSplit",
    [SYMMPIN_TRACE_COMM_DESTROY] = "ncclCommDestroy",
    [SYMMPIN_TRACE_COMM_ABORT] = "ncclCommAbort",
    [SYMMPIN_TRACE_COMM_FINALIZE] = "ncclCommFinalize",
    [SYMMPIN_TRACE_GROUP_START] = "ncclGroupStart",
    [SYMMPIN_TRACE_GROUP_END] = "ncclGroupEnd",
    [SYMMPIN_TRACE_ALL_REDUCE] = "ncclAllReduce",
    [SYMMPIN_TRACE_COMM_SHRINK] = "ncclCommShrink",
    [SYMMPIN_TRACE_COMM_REVOKE] = "ncclCommRevoke",
    [SYMMPIN_TRACE_COMM_GROW] = "ncclCommGrow",
    [SYMMPIN_TRACE_COMM_SUSPEND] = "ncclCommSuspend",
    [SYMMPIN_TRACE_COMM_RESUME] = "ncclCommResume",
    [SYMMPIN_TRACE_ALL_GATHER] = "ncclAllGather",
    [SYMMPIN_TRACE_REDUCE_SCATTER] = "ncclReduceScatter",
};

int symmpin_trace_call_coll(symmpin_trace_call c) {
  switch (c) {
  case SYMMPIN_TRACE_ALL_REDUCE: return SYMMPIN_COLL_ALLREDUCE;
  case SYMMPIN_TRACE_ALL_GATHER: return SYMMPIN_COLL_ALLGATHER;
  case SYMMPIN_TRACE_REDUCE_SCATTER: return SYMMPIN_COLL_REDUCESCATTER;
  default: return -1;
  }
}

symmpin_trace_call symmpin_trace_coll_call(int coll) {
  switch (coll) {
  case SYMMPIN_COLL_ALLREDUCE: return SYMMPIN_TRACE_ALL_REDUCE;
  case SYMMPIN_COLL_ALLGATHER: return SYMMPIN_TRACE_ALL_GATHER;
  case SYMMPIN_COLL_REDUCESCATTER: return SYMMPIN_TRACE_REDUCE_SCATTER;
  default: return SYMMPIN_TRACE_UNKNOWN;
  }
}

const char *symmpin_trace_call_name(symmpin_trace_call c) {
  return ((unsigned)c < SYMMPIN_TRACE_CALL_COUNT) ? call_names[c] : call_names[0];
}

symmpin_trace_call symmpin_trace_call_from_name(const char *name) {
  for (int c = 1; c < SYMMPIN_TRACE_CALL_COUNT; c++)
    if (strcmp(name, call_names[c]) == 0) return (symmpin_trace_call)c;
  return SYMMPIN_TRACE_UNKNOWN;
}

/* ---- the field table ---- */

/* Which calls write a field: one bit per call kind. */
#define C(x) (1u << SYMMPIN_TRACE_##x)
#define ALLOCS (C(CUDA_MALLOC) | C(CUDA_MALLOC_ASYNC) | C(NCCL_MEM_ALLOC))
#define FREES (C(CUDA_FREE) | C(CUDA_FREE_ASYNC) | C(NCCL_MEM_FREE))
#define INITS                                                                                      \
  (C(COMM_INIT_RANK) | C(COMM_INIT_RANK_CONFIG) | C(COMM_INIT_RANK_SCALABLE) | C(COMM_INIT_ALL) |  \
   C(COMM_SPLIT) | CHILDREN)
#define CHILDREN (C(COMM_SHRINK) | C(COMM_GROW)) /* communicators symmpin passes through */
#define LIFE (C(COMM_REVOKE) | C(COMM_SUSPEND) | C(COMM_RESUME))
#define ENDS (C(COMM_DESTROY) | C(COMM_ABORT) | C(COMM_FINALIZE))
#define GROUPS (C(GROUP_START) | C(GROUP_END))
/* The collectives' events share their fields; the all-gather has no op. */
#define AR (C(ALL_REDUCE) | C(ALL_GATHER) | C(REDUCE_SCATTER))
#define REDUCING (C(ALL_REDUCE) | C(REDUCE_SCATTER))
#define ALL_CALLS (~0u)
_Static_assert(SYMMPIN_TRACE_CALL_COUNT <= 32, "one bit per call kind in an unsigned");

typedef enum { F_U64, F_HEX, F_INT, F_DTYPE, F_OP } field_type;

typedef struct {
  const char *key;
  size_t off;
  field_type type;
  unsigned calls;
} field;

#define E(m) offsetof(symmpin_trace_event, m)
static const field fields[] = {
    {"rc", E(rc), F_INT, ALL_CALLS},
    {"dev", E(device), F_INT, ALL_CALLS},
    {"ptr", E(ptr), F_HEX, ALLOCS | FREES},
    {"size", E(size), F_U64, ALLOCS},
    {"alloc", E(alloc), F_U64, ALLOCS | FREES},
    {"stack", E(stack), F_HEX, ALLOCS | INITS | AR},
    {"stream", E(stream), F_HEX, C(CUDA_MALLOC_ASYNC) | C(CUDA_FREE_ASYNC) | AR},
    {"comm", E(comm), F_INT, INITS | ENDS | LIFE | AR},
    {"key_hi", E(key_hi), F_HEX, INITS},
    {"key_lo", E(key_lo), F_HEX, INITS},
    {"rank", E(rank), F_INT, INITS | AR},
    {"nranks", E(nranks), F_INT, INITS | AR},
    {"color", E(color), F_INT, C(COMM_SPLIT)},
    {"parent", E(parent), F_INT, C(COMM_SPLIT) | CHILDREN},
    {"depth", E(depth), F_INT, GROUPS},
    {"site", E(site), F_HEX, AR},
    {"count", E(count), F_U64, AR},
    {"dtype", E(dtype), F_DTYPE, AR},
    {"op", E(op), F_OP, REDUCING},
    {"send_alloc", E(send_alloc), F_U64, AR},
    {"send_off", E(send_off), F_U64, AR},
    {"recv_alloc", E(recv_alloc), F_U64, AR},
    {"recv_off", E(recv_off), F_U64, AR},
    {"send_ptr", E(send_ptr), F_HEX, AR},
    {"recv_ptr", E(recv_ptr), F_HEX, AR},
    {"stream_ord", E(stream_ord), F_INT, AR},
    {"capturing", E(capturing), F_INT, AR},
    {"path", E(path), F_INT, AR},
    {"reason", E(reason), F_INT, AR},
};
#undef E
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static uint64_t *u64_at(symmpin_trace_event *ev, const field *f) {
  return (uint64_t *)((char *)ev + f->off);
}
static int *int_at(symmpin_trace_event *ev, const field *f) { return (int *)((char *)ev + f->off); }

/* ---- formatting (no stdio: this runs inside intercepted calls, under the writer's lock) ---- */

typedef struct {
  char *p, *end;
  bool full;
} out_buf;

static void put_str(out_buf *o, const char *s) {
  size_t n = strlen(s);
  if ((size_t)(o->end - o->p) < n) {
    o->full = true;
    return;
  }
  memcpy(o->p, s, n);
  o->p += n;
}

static void put_u64(out_buf *o, uint64_t v, int base) {
  char tmp[24];
  int n = 0;
  do {
    unsigned d = (unsigned)(v % (unsigned)base);
    tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
    v /= (unsigned)base;
  } while (v);
  if (base == 16) put_str(o, "0x");
  if ((size_t)(o->end - o->p) < (size_t)n) {
    o->full = true;
    return;
  }
  while (n) *o->p++ = tmp[--n];
}

static void put_int(out_buf *o, int v) {
  if (v < 0) {
    put_str(o, "-");
    put_u64(o, (uint64_t)(-(int64_t)v), 10);
  } else {
    put_u64(o, (uint64_t)v, 10);
  }
}

int symmpin_trace_format_event(const symmpin_trace_event *ev, char *buf, size_t cap) {
  out_buf o = {buf, buf + cap, false};
  put_u64(&o, ev->seq, 10);
  put_str(&o, " ");
  put_u64(&o, ev->t_ns, 10);
  put_str(&o, " ");
  put_u64(&o, ev->tid, 10);
  put_str(&o, " ");
  put_str(&o, symmpin_trace_call_name(ev->call));
  unsigned bit = ((unsigned)ev->call < SYMMPIN_TRACE_CALL_COUNT) ? 1u << ev->call : 0;
  symmpin_trace_event *e = (symmpin_trace_event *)ev; /* the accessors only read through it */
  for (size_t i = 0; i < NFIELDS; i++) {
    const field *f = &fields[i];
    if (!(f->calls & bit)) continue;
    put_str(&o, " ");
    put_str(&o, f->key);
    put_str(&o, "=");
    switch (f->type) {
    case F_U64: put_u64(&o, *u64_at(e, f), 10); break;
    case F_HEX: put_u64(&o, *u64_at(e, f), 16); break;
    case F_INT: put_int(&o, *int_at(e, f)); break;
    case F_DTYPE:
    case F_OP: {
      /* Names when known, the number otherwise (e.g. a PreMulSum op), so every value round-trips. */
      int v = *int_at(e, f);
      const char *name = f->type == F_DTYPE ? symmpin_dtype_name(v) : symmpin_op_name(v);
      if (strcmp(name, "?") != 0)
        put_str(&o, name);
      else
        put_int(&o, v);
      break;
    }
    }
  }
  if (o.full) return -1;
  return (int)(o.p - buf);
}

/* "#where=" values: bytes that would end a token or a line (space and below, DEL) and '%' itself
 * become %XX, so a path with spaces stays one token. Returns false (nothing written past what
 * fits) when s does not fit whole. */
static bool put_encoded(out_buf *o, const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  for (; *s && !o->full; s++) {
    unsigned char c = (unsigned char)*s;
    if (c <= 0x20 || c == 0x7f || c == '%') {
      if (o->end - o->p < 3) {
        o->full = true;
        break;
      }
      *o->p++ = '%';
      *o->p++ = hex[c >> 4];
      *o->p++ = hex[c & 15];
    } else if (o->p < o->end) {
      *o->p++ = (char)c;
    } else {
      o->full = true;
    }
  }
  return !o->full;
}

int symmpin_trace_format_where(uint64_t stack, const symmpin_site_where *where, char *buf,
                               size_t cap) {
  if (!symmpin_site_where_known(where)) return -1;
  out_buf o = {buf, buf + cap, false};
  put_str(&o, "#where=");
  put_u64(&o, stack, 16);
  put_str(&o, " ");
  if (!put_encoded(&o, where->module)) return -1;
  put_str(&o, "+");
  put_u64(&o, where->offset, 16);
  if (o.full) return -1;
  if (where->symbol && where->symbol[0]) {
    /* A symbol too long for the line is cut (it is for people; the offset is exact). */
    char *before = o.p;
    put_str(&o, " ");
    put_encoded(&o, where->symbol);
    if (o.p == before + 1) o.p = before; /* not one character fitted: no symbol */
  }
  return (int)(o.p - buf);
}

/* ---- parsing ---- */

/* Whole-token integer parse: decimal, or hex with a 0x prefix; optional '-' for ints. */
static bool parse_u64(const char *s, uint64_t *out) {
  if (*s == '\0' || *s == '-' || *s == '+' || *s == ' ') return false;
  int base = 10;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s += 2;
    if (*s == '\0') return false;
  }
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, base);
  if (errno || *end != '\0') return false;
  *out = v;
  return true;
}

static bool parse_int(const char *s, int *out) {
  bool neg = *s == '-';
  uint64_t v;
  if (!parse_u64(neg ? s + 1 : s, &v)) return false;
  if (v > (neg ? 2147483648ULL : 2147483647ULL)) return false;
  *out = neg ? (int)(-(int64_t)v) : (int)v;
  return true;
}

static void event_defaults(symmpin_trace_event *ev) {
  memset(ev, 0, sizeof(*ev));
  ev->comm = -1;
  ev->device = -1;
  ev->rank = -1;
  ev->parent = -1;
  ev->stream_ord = -1;
}

static bool parse_field(symmpin_trace_event *ev, const char *key, const char *val) {
  for (size_t i = 0; i < NFIELDS; i++) {
    const field *f = &fields[i];
    if (strcmp(f->key, key) != 0) continue;
    switch (f->type) {
    case F_U64:
    case F_HEX: return parse_u64(val, u64_at(ev, f));
    case F_INT: return parse_int(val, int_at(ev, f));
    case F_DTYPE:
    case F_OP: {
      int v = f->type == F_DTYPE ? symmpin_dtype_from_name(val) : symmpin_op_from_name(val);
      if (v >= 0) {
        *int_at(ev, f) = v;
        return true;
      }
      return parse_int(val, int_at(ev, f));
    }
    }
  }
  return true; /* an unknown key: a newer writer's field, skipped */
}

symmpin_status symmpin_trace_parse_event(const char *line, symmpin_trace_event *out) {
  char tmp[4096];
  size_t len = strlen(line);
  while (len && (line[len - 1] == '\r' || line[len - 1] == '\n')) len--;
  if (len == 0 || len >= sizeof(tmp)) return SYMMPIN_ERR_INVALID;
  memcpy(tmp, line, len);
  tmp[len] = '\0';

  symmpin_trace_event ev;
  event_defaults(&ev);
  char *save = NULL;
  char *tok[4];
  for (int i = 0; i < 4; i++) {
    tok[i] = strtok_r(i ? NULL : tmp, " \t", &save);
    if (!tok[i]) return SYMMPIN_ERR_INVALID;
  }
  if (!parse_u64(tok[0], &ev.seq) || !parse_u64(tok[1], &ev.t_ns) || !parse_u64(tok[2], &ev.tid))
    return SYMMPIN_ERR_INVALID;
  ev.call = symmpin_trace_call_from_name(tok[3]);
  for (char *t; (t = strtok_r(NULL, " \t", &save));) {
    char *eq = strchr(t, '=');
    if (!eq || eq == t) return SYMMPIN_ERR_INVALID;
    *eq = '\0';
    if (!parse_field(&ev, t, eq + 1)) return SYMMPIN_ERR_INVALID;
  }
  *out = ev;
  return SYMMPIN_OK;
}

bool symmpin_trace_event_bounded(const symmpin_trace_event *ev, char *why, size_t cap) {
  const char *what = NULL;
  long long v = 0, min = -1, max = 0;
  if (ev->nranks < -1 || ev->nranks > SYMMPIN_TRACE_MAX_RANKS)
    what = "nranks", v = ev->nranks, max = SYMMPIN_TRACE_MAX_RANKS;
  else if (ev->rank < -1 || ev->rank >= SYMMPIN_TRACE_MAX_RANKS)
    what = "rank", v = ev->rank, max = SYMMPIN_TRACE_MAX_RANKS - 1;
  else if (ev->comm < -1)
    what = "comm", v = ev->comm, max = INT32_MAX;
  else if (ev->parent < -1)
    what = "parent", v = ev->parent, max = INT32_MAX;
  else if (ev->stream_ord < -1 || ev->stream_ord > SYMMPIN_TRACE_MAX_STREAM_ORD)
    what = "stream_ord", v = ev->stream_ord, max = SYMMPIN_TRACE_MAX_STREAM_ORD;
  else if (ev->count > SYMMPIN_TRACE_MAX_COUNT)
    what = "count", v = (long long)(ev->count > INT64_MAX ? INT64_MAX : ev->count), min = 0,
    max = (long long)SYMMPIN_TRACE_MAX_COUNT;
  if (!what) return true;
  if (why && cap) snprintf(why, cap, "%s=%lld is out of range (%lld to %lld)", what, v, min, max);
  return false;
}

/* ---- writer ---- */

struct symmpin_trace_writer {
  pthread_mutex_t lock;
  int fd;
  bool failed; /* a write failed: logged once, later events are dropped */
  uint64_t seq;
  size_t used;
  char path[512];
  char buf[SYMMPIN_TRACE_BUFFER];
};

/* Caller holds the lock. One write(2) per call, repeated only for partial writes. */
static symmpin_status drain(symmpin_trace_writer *w) {
  size_t done = 0;
  while (done < w->used && !w->failed) {
    ssize_t n = write(w->fd, w->buf + done, w->used - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      SYMMPIN_WARN("trace %s: write failed (%s); tracing stops", w->path,
                   n < 0 ? strerror(errno) : "no progress");
      w->failed = true;
    } else {
      done += (size_t)n;
    }
  }
  w->used = 0;
  return w->failed ? SYMMPIN_ERR_IO : SYMMPIN_OK;
}

static void put_header_line(out_buf *o, const char *key, const char *sval, int64_t ival, bool num) {
  put_str(o, "#");
  put_str(o, key);
  put_str(o, "=");
  if (!num) {
    put_str(o, sval);
  } else {
    if (ival < 0) put_str(o, "-");
    put_u64(o, ival < 0 ? (uint64_t)0 - (uint64_t)ival : (uint64_t)ival, 10);
  }
  put_str(o, "\n");
}

symmpin_status symmpin_trace_writer_open(const char *path, const symmpin_trace_header *h,
                                         symmpin_trace_writer **out) {
  if (!path || !h || !out) return SYMMPIN_ERR_INVALID;
  symmpin_trace_writer *w = calloc(1, sizeof(*w));
  if (!w) {
    SYMMPIN_WARN("trace %s: out of memory", path);
    return SYMMPIN_ERR_NOMEM;
  }
  /* Never through a link another local user planted at a predictable name. */
  w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (w->fd < 0) {
    SYMMPIN_WARN("trace %s: cannot create (%s)", path, strerror(errno));
    free(w);
    return SYMMPIN_ERR_IO;
  }
  pthread_mutex_init(&w->lock, NULL);
  snprintf(w->path, sizeof(w->path), "%s", path);

  /* Header values run to the end of their line, so newlines in them would break it. */
  char host[sizeof(h->host)], prog[sizeof(h->program)];
  snprintf(host, sizeof(host), "%s", h->host);
  snprintf(prog, sizeof(prog), "%s", h->program);
  for (char *p = host; *p; p++)
    if (*p == '\n' || *p == '\r') *p = '?';
  for (char *p = prog; *p; p++)
    if (*p == '\n' || *p == '\r') *p = '?';
  out_buf o = {w->buf, w->buf + sizeof(w->buf), false};
  put_str(&o, "#symmpin-trace ");
  put_u64(&o, SYMMPIN_TRACE_VERSION, 10);
  put_str(&o, "\n");
  put_header_line(&o, "host", host, 0, false);
  put_header_line(&o, "pid", NULL, h->pid, true);
  put_header_line(&o, "rank", NULL, h->rank, true);
  put_header_line(&o, "program", prog, 0, false);
  put_header_line(&o, "start_unix_ns", NULL, (int64_t)h->start_unix_ns, true);
  put_str(&o, "#fields=seq t_ns tid call key=value...\n");
  w->used = (size_t)(o.p - w->buf);
  *out = w;
  return SYMMPIN_OK;
}

symmpin_status symmpin_trace_writer_add(symmpin_trace_writer *w, symmpin_trace_event *ev) {
  if (!w || !ev) return SYMMPIN_ERR_INVALID;
  symmpin_status st = SYMMPIN_OK;
  pthread_mutex_lock(&w->lock);
  if (w->failed) {
    pthread_mutex_unlock(&w->lock);
    return SYMMPIN_ERR_IO;
  }
  if (sizeof(w->buf) - w->used < SYMMPIN_TRACE_LINE_MAX + 1) st = drain(w);
  if (st == SYMMPIN_OK) {
    ev->seq = ++w->seq;
    int n = symmpin_trace_format_event(ev, w->buf + w->used, SYMMPIN_TRACE_LINE_MAX);
    if (n < 0) {
      /* Only a bug gets here: the longest line the current fields make is ~700 bytes. */
      w->seq--;
      st = SYMMPIN_ERR_INTERNAL;
    } else {
      w->used += (size_t)n;
      w->buf[w->used++] = '\n';
    }
  }
  pthread_mutex_unlock(&w->lock);
  if (st == SYMMPIN_ERR_INTERNAL)
    SYMMPIN_BUG("trace %s: a %s event does not fit in %d bytes; event dropped", w->path,
                symmpin_trace_call_name(ev->call), SYMMPIN_TRACE_LINE_MAX);
  return st;
}

symmpin_status symmpin_trace_writer_add_where(symmpin_trace_writer *w, uint64_t stack,
                                              const symmpin_site_where *where) {
  if (!w) return SYMMPIN_ERR_INVALID;
  if (!symmpin_site_where_known(where)) return SYMMPIN_OK;
  symmpin_status st = SYMMPIN_OK;
  pthread_mutex_lock(&w->lock);
  if (w->failed) {
    pthread_mutex_unlock(&w->lock);
    return SYMMPIN_ERR_IO;
  }
  if (sizeof(w->buf) - w->used < SYMMPIN_TRACE_WHERE_MAX + 1) st = drain(w);
  if (st == SYMMPIN_OK) {
    int n = symmpin_trace_format_where(stack, where, w->buf + w->used, SYMMPIN_TRACE_WHERE_MAX);
    if (n > 0) { /* a module path longer than the line: no location, nothing else lost */
      w->used += (size_t)n;
      w->buf[w->used++] = '\n';
    }
  }
  pthread_mutex_unlock(&w->lock);
  return st;
}

symmpin_status symmpin_trace_writer_flush(symmpin_trace_writer *w) {
  if (!w) return SYMMPIN_ERR_INVALID;
  pthread_mutex_lock(&w->lock);
  symmpin_status st = drain(w);
  pthread_mutex_unlock(&w->lock);
  return st;
}

void symmpin_trace_writer_close(symmpin_trace_writer *w) {
  if (!w) return;
  symmpin_trace_writer_flush(w);
  close(w->fd);
  pthread_mutex_destroy(&w->lock);
  free(w);
}

/* ---- reader ---- */

/* %XX-decode one token in place; false on a bad escape or an empty result. */
static bool decode_in_place(char *s) {
  char *w = s;
  for (char *r = s; *r; r++) {
    if (*r != '%') {
      *w++ = *r;
      continue;
    }
    int v = 0;
    for (int k = 1; k <= 2; k++) {
      char c = r[k];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      v = v * 16 + d;
    }
    if (v == 0) return false;
    *w++ = (char)v;
    r += 2;
  }
  *w = '\0';
  return w != s;
}

/* "<stack> <module>+<offset> [<symbol>]" (the value of a "#where=" line); tokens after these are
 * ignored (room for later additions). The strings go into one allocation, owned by the file. */
static symmpin_status parse_where(const char *value, symmpin_trace_where *out) {
  char tmp[SYMMPIN_TRACE_WHERE_MAX * 2];
  if (strlen(value) >= sizeof(tmp)) return SYMMPIN_ERR_INVALID;
  strcpy(tmp, value);
  char *save = NULL;
  char *stack = strtok_r(tmp, " \t", &save);
  char *place = stack ? strtok_r(NULL, " \t", &save) : NULL;
  char *symbol = place ? strtok_r(NULL, " \t", &save) : NULL;
  char *plus = place ? strrchr(place, '+') : NULL;
  if (!plus || plus == place) return SYMMPIN_ERR_INVALID;
  *plus = '\0';
  symmpin_trace_where w = {0};
  if (!parse_u64(stack, &w.stack) || !parse_u64(plus + 1, &w.where.offset) ||
      !decode_in_place(place) || (symbol && !decode_in_place(symbol)))
    return SYMMPIN_ERR_INVALID;
  size_t lm = strlen(place) + 1, ls = symbol ? strlen(symbol) + 1 : 0;
  char *mem = malloc(lm + ls);
  if (!mem) return SYMMPIN_ERR_NOMEM;
  memcpy(mem, place, lm);
  if (symbol) memcpy(mem + lm, symbol, ls);
  w.where.module = mem;
  w.where.symbol = symbol ? mem + lm : NULL;
  *out = w;
  return SYMMPIN_OK;
}

static void where_free(symmpin_trace_where *w) { free((char *)w->where.module); }

/* Sorting by stack, ties in file order, so that the last line of a stack can win. */
typedef struct where_key {
  uint64_t stack;
  size_t index;
} where_key;

static int cmp_where_key(const void *a, const void *b) {
  const where_key *x = a, *y = b;
  if (x->stack != y->stack) return x->stack < y->stack ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Sort by stack and keep, of several lines for one stack, the last one read. */
static symmpin_status wheres_settle(symmpin_trace_file *f) {
  size_t n = f->nwheres;
  if (n < 2) return SYMMPIN_OK;
  where_key *keys = malloc(n * sizeof(*keys));
  symmpin_trace_where *v = malloc(n * sizeof(*v));
  if (!keys || !v) {
    free(keys);
    free(v);
    return SYMMPIN_ERR_NOMEM;
  }
  for (size_t i = 0; i < n; i++) keys[i] = (where_key){f->wheres[i].stack, i};
  qsort(keys, n, sizeof(*keys), cmp_where_key);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const symmpin_trace_where *w = &f->wheres[keys[i].index];
    if (k && v[k - 1].stack == w->stack) {
      where_free(&v[k - 1]);
      v[k - 1] = *w;
    } else {
      v[k++] = *w;
    }
  }
  free(keys);
  free(f->wheres);
  f->wheres = v;
  f->nwheres = k;
  return SYMMPIN_OK;
}

const symmpin_site_where *symmpin_trace_file_where(const symmpin_trace_file *f, uint64_t stack) {
  if (!f) return NULL;
  size_t lo = 0, hi = f->nwheres;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (f->wheres[mid].stack < stack)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < f->nwheres && f->wheres[lo].stack == stack ? &f->wheres[lo].where : NULL;
}

static void parse_header_line(symmpin_trace_header *h, const char *line) {
  const char *eq = strchr(line, '=');
  if (!eq) return; /* a comment */
  size_t klen = (size_t)(eq - line);
  const char *v = eq + 1;
  int iv;
  uint64_t uv;
#define KEY(k) (klen == strlen(k) && strncmp(line, k, klen) == 0)
  if (KEY("host"))
    snprintf(h->host, sizeof(h->host), "%s", v);
  else if (KEY("program"))
    snprintf(h->program, sizeof(h->program), "%s", v);
  else if (KEY("pid") && parse_int(v, &iv))
    h->pid = iv;
  else if (KEY("rank") && parse_int(v, &iv))
    h->rank = iv;
  else if (KEY("start_unix_ns") && parse_u64(v, &uv))
    h->start_unix_ns = uv;
#undef KEY
}

symmpin_status symmpin_trace_read(const char *path, symmpin_trace_file *out) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    SYMMPIN_WARN("trace %s: cannot open (%s)", path, strerror(errno));
    return SYMMPIN_ERR_IO;
  }
  char *text = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (cap - len < 65536) {
      size_t ncap = cap ? cap * 2 : 1u << 20;
      /* Never more than the bound and a little (to see that the file goes past it: below). */
      if (ncap > SYMMPIN_TRACE_MAX_FILE_BYTES + 65536) ncap = SYMMPIN_TRACE_MAX_FILE_BYTES + 65536;
      char *t = realloc(text, ncap + 1);
      if (!t) {
        SYMMPIN_WARN("trace %s: out of memory reading %zu bytes", path, ncap);
        free(text);
        fclose(fp);
        return SYMMPIN_ERR_NOMEM;
      }
      text = t;
      cap = ncap;
    }
    size_t n = fread(text + len, 1, cap - len, fp);
    len += n;
    if (n == 0) break;
    if (len > SYMMPIN_TRACE_MAX_FILE_BYTES) {
      SYMMPIN_WARN("trace %s: more than %llu bytes (SYMMPIN_TRACE_MAX_FILE_BYTES): cut it (its "
                   "first lines hold the warm-up and the first epochs)",
                   path, (unsigned long long)SYMMPIN_TRACE_MAX_FILE_BYTES);
      free(text);
      fclose(fp);
      return SYMMPIN_ERR_INVALID;
    }
  }
  bool io_error = ferror(fp);
  fclose(fp);
  if (io_error) {
    SYMMPIN_WARN("trace %s: read error after %zu bytes", path, len);
    free(text);
    return SYMMPIN_ERR_IO;
  }
  text[len] = '\0';

  symmpin_trace_file f;
  memset(&f, 0, sizeof(f));
  f.header.rank = -1;
  snprintf(f.path, sizeof(f.path), "%s", path);
  symmpin_status st = SYMMPIN_OK;
  size_t ecap = 0, wcap = 0, lineno = 0;
  bool first = true;
  for (char *line = text; line < text + len && st == SYMMPIN_OK;) {
    lineno++;
    char *nl = strchr(line, '\n');
    bool complete = nl != NULL;
    if (nl) *nl = '\0';
    char *next = nl ? nl + 1 : text + len;
    size_t ll = strlen(line);
    if (ll && line[ll - 1] == '\r') line[--ll] = '\0';
    if (first) {
      first = false;
      int version = 0;
      if (strncmp(line, "#symmpin-trace ", 15) != 0 || !parse_int(line + 15, &version)) {
        SYMMPIN_WARN("trace %s: not a symmpin trace (no '#symmpin-trace' line)", path);
        st = SYMMPIN_ERR_INVALID;
      } else if (version < SYMMPIN_TRACE_VERSION_MIN || version > SYMMPIN_TRACE_VERSION) {
        SYMMPIN_WARN("trace %s: version %d, this reader knows %d to %d", path, version,
                     SYMMPIN_TRACE_VERSION_MIN, SYMMPIN_TRACE_VERSION);
        st = SYMMPIN_ERR_UNSUPPORTED;
      }
      f.header.version = version;
    } else if (strncmp(line, "#where=", 7) == 0) {
      /* A location line, complete or not at all: a malformed one is skipped and counted. */
      symmpin_trace_where w;
      symmpin_status ws = complete ? parse_where(line + 7, &w) : SYMMPIN_ERR_INVALID;
      if (ws == SYMMPIN_ERR_NOMEM) {
        SYMMPIN_WARN("trace %s: out of memory (%zu locations)", path, f.nwheres);
        st = ws;
        break;
      }
      if (ws != SYMMPIN_OK) {
        f.skipped++;
      } else if (f.nwheres == SYMMPIN_TRACE_MAX_WHERES) {
        SYMMPIN_WARN("trace %s line %zu: more than %u \"#where=\" lines", path, lineno,
                     SYMMPIN_TRACE_MAX_WHERES);
        where_free(&w);
        st = SYMMPIN_ERR_INVALID;
        break;
      } else {
        if (f.nwheres == wcap) {
          wcap = wcap ? wcap * 2 : 16;
          symmpin_trace_where *v = realloc(f.wheres, wcap * sizeof(*v));
          if (!v) {
            SYMMPIN_WARN("trace %s: out of memory (%zu locations)", path, wcap);
            where_free(&w);
            st = SYMMPIN_ERR_NOMEM;
            break;
          }
          f.wheres = v;
        }
        f.wheres[f.nwheres++] = w;
      }
    } else if (line[0] == '#') {
      parse_header_line(&f.header, line + 1);
    } else if (ll > 0) {
      symmpin_trace_event ev;
      /* A last line without newline was cut by a crash mid-write: never trust it. */
      char why[96];
      if (!complete || symmpin_trace_parse_event(line, &ev) != SYMMPIN_OK) {
        f.skipped++;
      } else if (!symmpin_trace_event_bounded(&ev, why, sizeof why)) {
        SYMMPIN_WARN("trace %s line %zu: %s %s: not a trace this reader takes", path, lineno,
                     symmpin_trace_call_name(ev.call), why);
        st = SYMMPIN_ERR_INVALID;
        break;
      } else if (f.nevents == SYMMPIN_TRACE_MAX_EVENTS) {
        SYMMPIN_WARN("trace %s line %zu: more than %u events (SYMMPIN_TRACE_MAX_EVENTS): cut it "
                     "(its first lines hold the warm-up and the first epochs)",
                     path, lineno, SYMMPIN_TRACE_MAX_EVENTS);
        st = SYMMPIN_ERR_INVALID;
        break;
      } else {
        if (f.nevents == ecap) {
          ecap = ecap ? ecap * 2 : 1024;
          symmpin_trace_event *v = realloc(f.events, ecap * sizeof(*v));
          if (!v) {
            SYMMPIN_WARN("trace %s: out of memory (%zu events)", path, ecap);
            st = SYMMPIN_ERR_NOMEM;
            break;
          }
          f.events = v;
        }
        f.events[f.nevents++] = ev;
      }
    }
    line = next;
  }
  free(text);
  if (st == SYMMPIN_OK && first) {
    SYMMPIN_WARN("trace %s: empty file", path);
    st = SYMMPIN_ERR_INVALID;
  }
  if (st == SYMMPIN_OK && wheres_settle(&f) != SYMMPIN_OK) {
    SYMMPIN_WARN("trace %s: out of memory sorting %zu locations", path, f.nwheres);
    st = SYMMPIN_ERR_NOMEM;
  }
  if (st != SYMMPIN_OK) {
    symmpin_trace_file_free(&f);
    return st;
  }
  if (f.skipped)
    SYMMPIN_WARN("trace %s: %zu malformed or incomplete line(s) skipped", path, f.skipped);
  *out = f;
  return SYMMPIN_OK;
}

void symmpin_trace_file_free(symmpin_trace_file *f) {
  if (!f) return;
  free(f->events);
  f->events = NULL;
  f->nevents = 0;
  for (size_t i = 0; i < f->nwheres; i++) where_free(&f->wheres[i]);
  free(f->wheres);
  f->wheres = NULL;
  f->nwheres = 0;
}
