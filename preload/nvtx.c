/* NVTX ranges and marks (nvtx.h). The one file that includes the NVTX v3 header (tests/structure
 * holds the tree to that): header-only C, it makes symmpin need no NVTX library. Its first call
 * (nvtxDomainCreateA, at symmpin_nvtx_init) loads the injection library NVTX_INJECTION64_PATH
 * names, where a tool such as Nsight Systems set it; with none, every NVTX function becomes a
 * no-op and nvtxDomainCreateA answers NULL, which leaves symmpin_nvtx_on() false for good.
 *
 * A CPU-only build without the toolkit's headers compiles this file with SYMMPIN_NVTX_HEADERS=0:
 * the domain is never made. */
#include "preload/nvtx.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/types.h"

#ifndef SYMMPIN_NVTX_HEADERS
#define SYMMPIN_NVTX_HEADERS 1
#endif
#if SYMMPIN_NVTX_HEADERS
#define NVTX_AS_SYSTEM_HEADER /* NVIDIA's code: not held to the project's warnings */
#include <nvToolsExt.h>       /* the toolkit's include/nvtx3 (meson.build: nvtx_dep) */
#endif

_Atomic(void *) symmpin_nvtx_domain;

/* ---- which sites and communicators were marked (only with a tool attached) ----
 * One entry per (communicator ordinal, rank, site, kind of call), and two per communicator and
 * rank for its own marks (to NCCL, in error): whether the key's latest call ran on symmpin, and
 * the reasons already marked. Open addressing in a table made at init; full, it marks no new key.
 */
enum { KIND_EAGER = 1, KIND_GROUPED, KIND_CAPTURED, KIND_COMM, KIND_ERROR };
typedef struct mark_entry {
  uint64_t site;
  int ordinal, rank;
  uint8_t kind; /* 0: free */
  bool on_symmpin;
  uint32_t marked; /* bit r: reason r was marked for this key */
} mark_entry;
_Static_assert(SYMMPIN_REASON_COUNT <= 32, "one bit per reason in mark_entry.marked");
#define MARK_ENTRIES 4096 /* a power of two */
static mark_entry *marks;
static pthread_mutex_t marks_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init(void) {
#if SYMMPIN_NVTX_HEADERS
  nvtxDomainHandle_t d = nvtxDomainCreateA("symmpin");
  if (!d) return;                              /* no tool */
  marks = calloc(MARK_ENTRIES, sizeof *marks); /* NULL: ranges and plan marks only */
  atomic_store_explicit(&symmpin_nvtx_domain, (void *)d, memory_order_release);
#endif
}

void symmpin_nvtx_init(void) { pthread_once(&init_once, init); }

/* The entry of a key, added if new; NULL when the table is full or missing. marks_lock held. */
static mark_entry *mark_entry_of(int ordinal, int rank, uint64_t site, uint8_t kind) {
  if (!marks) return NULL;
  uint64_t h = (site ^ ((uint64_t)(uint32_t)ordinal << 32 | (uint32_t)rank << 4 | kind)) *
               0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < MARK_ENTRIES; i++) {
    mark_entry *m = &marks[((h >> 32) + i) & (MARK_ENTRIES - 1)];
    if (!m->kind) {
      *m = (mark_entry){.site = site, .ordinal = ordinal, .rank = rank, .kind = kind};
      return m;
    }
    if (m->site == site && m->ordinal == ordinal && m->rank == rank && m->kind == kind) return m;
  }
  return NULL;
}

/* Whether reason r is still to be marked for the key (and from now on, it is not). */
static bool mark_first(int ordinal, int rank, uint64_t site, uint8_t kind, symmpin_reason r) {
  pthread_mutex_lock(&marks_lock);
  mark_entry *m = mark_entry_of(ordinal, rank, site, kind);
  bool first = m && !(m->marked & 1u << r);
  if (first) m->marked |= 1u << r;
  pthread_mutex_unlock(&marks_lock);
  return first;
}

/* ---- NVTX ---- */

#define COLOR_ONE_SHOT 0xff76b900u
#define COLOR_TWO_SHOT 0xff1f77b4u
#define COLOR_CAPTURED 0xff9467bdu
#define COLOR_GROUP 0xffff7f0eu
#define COLOR_PLAN 0xff2ca02cu
#define COLOR_NCCL 0xffd62728u

#if SYMMPIN_NVTX_HEADERS
static nvtxEventAttributes_t attributes(const char *name, uint32_t color) {
  nvtxEventAttributes_t a;
  memset(&a, 0, sizeof a);
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = color;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  return a;
}
#endif

static void push(const char *name, uint32_t color) {
#if SYMMPIN_NVTX_HEADERS
  nvtxEventAttributes_t a = attributes(name, color);
  nvtxDomainRangePushEx((nvtxDomainHandle_t)atomic_load(&symmpin_nvtx_domain), &a);
#else
  (void)name;
  (void)color;
#endif
}

static void mark(const char *name, uint32_t color) {
#if SYMMPIN_NVTX_HEADERS
  nvtxEventAttributes_t a = attributes(name, color);
  nvtxDomainMarkEx((nvtxDomainHandle_t)atomic_load(&symmpin_nvtx_domain), &a);
#else
  (void)name;
  (void)color;
#endif
}

void symmpin_nvtx_pop_on(void) {
#if SYMMPIN_NVTX_HEADERS
  nvtxDomainRangePop((nvtxDomainHandle_t)atomic_load(&symmpin_nvtx_domain));
#endif
}

/* ---- names ---- */

/* The kernel family the kernels choose for a call (kernels/allreduce.h: the slot class is the
 * algorithm, and only two-shot is not of the one-shot family). */
static bool two_shot(const symmpin_kernel_call *k) {
  const char *cls = symmpin_kernel_slot_class_name(
      symmpin_kernel_slot_class(k->coll, k->count, k->dtype, k->nranks, k->input));
  return cls && !strcmp(cls, "two-shot");
}

static uint64_t bytes_of(const symmpin_kernel_call *k) {
  return (uint64_t)k->count * symmpin_dtype_size(k->dtype);
}

/* Append to the name in buf (cut at cap - 1 bytes). */
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
  if (*len >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
  va_end(ap);
  if (n > 0) *len = *len + (size_t)n < cap ? *len + (size_t)n : cap - 1;
}

void symmpin_nvtx_call_push_on(const symmpin_kernel_call *k, bool capturing,
                               const symmpin_site_where *where) {
  char name[512];
  size_t len = 0;
  bool two = two_shot(k);
  put(name, sizeof name, &len, "%s %" PRIu64 " B %s", symmpin_coll_name(k->coll), bytes_of(k),
      symmpin_dtype_name(k->dtype));
  if (symmpin_coll_reduces(k->coll)) put(name, sizeof name, &len, " %s", symmpin_op_name(k->op));
  put(name, sizeof name, &len, " %s%s site 0x%016" PRIx64, capturing ? "captured " : "",
      two ? "two-shot" : "one-shot", k->site);
  char at[256];
  if (where && symmpin_site_where_format(where, at, sizeof at))
    put(name, sizeof name, &len, " at %s", at);
  push(name, capturing ? COLOR_CAPTURED : two ? COLOR_TWO_SHOT : COLOR_ONE_SHOT);
}

void symmpin_nvtx_group_push_on(const symmpin_kernel_call *calls, int n, bool capturing) {
  char name[512];
  size_t len = 0;
  uint64_t bytes = 0;
  bool one_coll = true, one_dtype = true, one_op = true, any_one = false, any_two = false;
  for (int i = 0; i < n; i++) {
    const symmpin_kernel_call *k = &calls[i];
    bytes += bytes_of(k);
    one_coll &= k->coll == calls[0].coll;
    one_dtype &= k->dtype == calls[0].dtype;
    one_op &= symmpin_coll_reduces(k->coll) && k->op == calls[0].op;
    if (two_shot(k))
      any_two = true;
    else
      any_one = true;
  }
  put(name, sizeof name, &len, "%s group of %d: %" PRIu64 " B",
      one_coll ? symmpin_coll_name(calls[0].coll) : "mixed", n, bytes);
  if (one_dtype) put(name, sizeof name, &len, " %s", symmpin_dtype_name(calls[0].dtype));
  if (one_op) put(name, sizeof name, &len, " %s", symmpin_op_name(calls[0].op));
  put(name, sizeof name, &len, " %s%s sites", capturing ? "captured " : "",
      any_one && any_two ? "one-shot+two-shot"
      : any_two          ? "two-shot"
                         : "one-shot");
  for (int i = 0; i < n; i++) put(name, sizeof name, &len, " 0x%016" PRIx64, calls[i].site);
  push(name, capturing ? COLOR_CAPTURED : COLOR_GROUP);
}

void symmpin_nvtx_mark_plan_on(const symmpin_comm *c, const symmpin_agree *a) {
  const symmpin_plan *p = symmpin_agree_plan(a);
  char name[160];
  snprintf(name, sizeof name, "comm %d rank %d/%d: epoch %u agreed: %zu of %zu sites pinned",
           c->ordinal, c->rank, c->nranks, symmpin_agree_epoch(a), p ? p->npinned : 0,
           p ? p->nsites : 0);
  mark(name, COLOR_PLAN);
}

void symmpin_nvtx_call_routed_on(const symmpin_comm *c, const symmpin_engine_call *ec,
                                 symmpin_reason r) {
  if (r == SYMMPIN_REASON_PROBE || r == SYMMPIN_REASON_ERROR || (unsigned)r >= SYMMPIN_REASON_COUNT)
    return;
  uint8_t kind = ec->capturing ? KIND_CAPTURED : ec->group_depth > 0 ? KIND_GROUPED : KIND_EAGER;
  pthread_mutex_lock(&marks_lock);
  mark_entry *m = mark_entry_of(c->ordinal, c->rank, ec->site, kind);
  bool back = false;
  if (m && r == SYMMPIN_REASON_NONE) {
    m->on_symmpin = true;
  } else if (m && m->on_symmpin) {
    m->on_symmpin = false;
    back = !(m->marked & 1u << r);
    m->marked |= 1u << r;
  }
  pthread_mutex_unlock(&marks_lock);
  if (!back) return;
  char name[160];
  snprintf(name, sizeof name, "comm %d rank %d/%d: %ssite 0x%016" PRIx64 " to NCCL: %s", c->ordinal,
           c->rank, c->nranks,
           kind == KIND_GROUPED    ? "grouped calls of "
           : kind == KIND_CAPTURED ? "captured calls of "
                                   : "",
           ec->site, symmpin_reason_name(r));
  mark(name, COLOR_NCCL);
}

void symmpin_nvtx_mark_comm_on(const symmpin_comm *c, symmpin_reason r, const char *why) {
  if ((unsigned)r >= SYMMPIN_REASON_COUNT || !mark_first(c->ordinal, c->rank, 0, KIND_COMM, r))
    return;
  char name[320];
  snprintf(name, sizeof name, "comm %d rank %d/%d: to NCCL: %s%s%s%s", c->ordinal, c->rank,
           c->nranks, symmpin_reason_name(r), why && why[0] ? " (" : "", why ? why : "",
           why && why[0] ? ")" : "");
  mark(name, COLOR_NCCL);
}

void symmpin_nvtx_mark_error_on(const symmpin_comm *c, int code) {
  if (!mark_first(c->ordinal, c->rank, 0, KIND_ERROR, SYMMPIN_REASON_ERROR)) return;
  char name[160];
  snprintf(name, sizeof name, "comm %d rank %d/%d: in error: %s", c->ordinal, c->rank, c->nranks,
           code == SYMMPIN_NCCL_REMOTE_ERROR           ? "ncclRemoteError"
           : code == SYMMPIN_NCCL_UNHANDLED_CUDA_ERROR ? "ncclUnhandledCudaError"
                                                       : "an NCCL error");
  mark(name, COLOR_NCCL);
}

void symmpin_nvtx_mark_stop_on(const symmpin_comm *c, symmpin_agree_stop stop) {
  const char *why = stop == SYMMPIN_AGREE_NOT_ONE_HOST
                        ? "no more plan agreements: ranks on several hosts"
                    : stop == SYMMPIN_AGREE_NO_P2P
                        ? "no more plan agreements: a pair of its GPUs has no P2P access"
                        : "no more plan agreements: a failure (see the WARN line)";
  symmpin_nvtx_mark_comm_on(
      c, stop == SYMMPIN_AGREE_ERROR ? SYMMPIN_REASON_ERROR : SYMMPIN_REASON_COMM, why);
}
