/* Stack hashes from module-relative return addresses, with a lock-free per-address cache that
 * also keeps each address's location for reports (callsite.h). */
#include "interpose/callsite.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "interpose/real.h"
#include "common/hash.h"

#define CACHE_SLOTS 8192u /* distinct return addresses remembered; power of two */
#define CACHE_PROBES 32

/* A slot is written once: hash and flag first, then the address is published with release, so a
 * reader that sees the address also sees its hash. Slots are never overwritten. */
typedef struct frame_slot {
  _Atomic(uintptr_t) addr;
  uint64_t hash;
  bool ours; /* inside libsymmpin: skipped when walking the stack */
  symmpin_site_where where; /* for reports; not part of the hash */
} frame_slot;

static frame_slot cache[CACHE_SLOTS];
static atomic_int cache_full_warned;
static atomic_int stack_depth = SYMMPIN_STACK_DEPTH_DEFAULT;

void symmpin_callsite_set_depth(int depth) {
  if (depth < 1) depth = 1;
  if (depth > SYMMPIN_STACK_DEPTH_MAX) depth = SYMMPIN_STACK_DEPTH_MAX;
  if (depth > 1) {
    void *prime[2];
    backtrace(prime, 2);
  }
  atomic_store(&stack_depth, depth);
}

int symmpin_callsite_depth(void) { return atomic_load_explicit(&stack_depth, memory_order_relaxed); }

static uint64_t hash_string(const char *s) {
  uint64_t h = 0x5359u; /* fixed tag: the same on every rank */
  size_t n = strlen(s);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w = 0;
    memcpy(&w, s + i, n - i < 8 ? n - i : 8);
    h = symmpin_hash_combine(h, w);
  }
  return symmpin_hash_combine(h, n);
}

/* The main program's path: the loader names it "" (and dladdr by argv[0], relative to a directory
 * the program may have left), so read it once from /proc. */
static char exe_path[4096];
static pthread_once_t exe_once = PTHREAD_ONCE_INIT;
static void exe_read(void) {
  ssize_t n = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
  exe_path[n > 0 ? n : 0] = '\0';
}

/* The location for people: the call instruction (return address - 1, which is also inside the
 * calling function when a call ends it) in the module's own addresses, so that addr2line takes it
 * as is, in shared objects (load bias subtracted) and fixed-address executables (bias 0) alike. */
static void where_compute(const void *addr, symmpin_site_where *w) {
  memset(w, 0, sizeof *w);
  if ((uintptr_t)addr < 2) return;
  const char *call = (const char *)addr - 1;
  Dl_info info;
  struct link_map *lm = NULL;
  if (!dladdr1(call, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm) return;
  const char *module = lm->l_name;
  if (!module || !module[0]) {
    pthread_once(&exe_once, exe_read);
    module = exe_path[0] ? exe_path : info.dli_fname;
  }
  if (!module || !module[0]) return;
  w->module = module;
  w->offset = (uintptr_t)call - (uintptr_t)lm->l_addr;
  w->symbol = info.dli_sname && info.dli_sname[0] ? info.dli_sname : NULL;
}

/* The uncached part: dladdr. An address in no known module (JIT code) hashes as "?" + 0 so that
 * every rank still agrees, at the cost of telling such callers apart. */
static void frame_compute(const void *addr, frame_slot *s) {
  Dl_info info;
  const char *name = "?";
  uintptr_t rel = 0;
  s->ours = false;
  memset(&s->where, 0, sizeof s->where);
  if (dladdr(addr, &info) && info.dli_fbase) {
    if (info.dli_fname && info.dli_fname[0]) {
      const char *slash = strrchr(info.dli_fname, '/');
      name = slash ? slash + 1 : info.dli_fname;
    } else {
      name = "<main>";
    }
    rel = (uintptr_t)addr - (uintptr_t)info.dli_fbase;
    s->ours = symmpin_real_is_ours(addr);
    if (!s->ours) where_compute(addr, &s->where);
  }
  s->hash = symmpin_hash_combine(hash_string(name), rel);
}

static const frame_slot *frame_lookup(const void *addr, frame_slot *tmp) {
  uintptr_t a = (uintptr_t)addr;
  uint32_t i0 = (uint32_t)symmpin_hash_mix64(a) & (CACHE_SLOTS - 1);
  for (uint32_t k = 0; k < CACHE_PROBES; k++) {
    frame_slot *s = &cache[(i0 + k) & (CACHE_SLOTS - 1)];
    uintptr_t cur = atomic_load_explicit(&s->addr, memory_order_acquire);
    if (cur == a) return s;
    if (cur != 0) continue;
    /* Empty: claim it with the sentinel 1, fill the hash, then publish the address. */
    uintptr_t expect = 0;
    if (atomic_compare_exchange_strong(&s->addr, &expect, (uintptr_t)1)) {
      frame_compute(addr, s);
      atomic_store_explicit(&s->addr, a, memory_order_release);
      return s;
    }
    if (expect == a) return s;
    if (expect == 1) break; /* another thread is filling it: compute privately this time */
  }
  if (atomic_exchange(&cache_full_warned, 1) == 0)
    SYMMPIN_INFO("call-site cache crowded: hashing some return addresses without the cache");
  frame_compute(addr, tmp);
  return tmp;
}

uint64_t symmpin_callsite_frame_hash(const void *addr) {
  frame_slot tmp;
  return frame_lookup(addr, &tmp)->hash;
}

bool symmpin_callsite_frame_where(const void *addr, symmpin_site_where *where) {
  frame_slot tmp;
  const frame_slot *s = frame_lookup(addr, &tmp);
  *where = s->ours ? (symmpin_site_where){0} : s->where;
  return symmpin_site_where_known(where);
}

/* Folds frames in call order (innermost first); our own frames are skipped. The first frame used
 * is the one that identifies the site: its location goes to *where (if not NULL). */
static uint64_t hash_frames(void *const *frames, int n, int depth, symmpin_site_where *where) {
  uint64_t h = 0x53544b; /* "STK" */
  int used = 0;
  if (where) *where = (symmpin_site_where){0};
  for (int i = 0; i < n && used < depth; i++) {
    frame_slot tmp;
    const frame_slot *s = frame_lookup(frames[i], &tmp);
    if (s->ours) continue;
    if (used == 0 && where) *where = s->where;
    h = symmpin_hash_combine(h, s->hash);
    used++;
  }
  h = symmpin_hash_combine(h, (uint64_t)used);
  return h ? h : 1;
}

uint64_t symmpin_callsite_hash_frames(void *const *frames, int n) {
  return hash_frames(frames, n, n, NULL);
}

uint64_t symmpin_callsite_hash_frames_where(void *const *frames, int n, symmpin_site_where *where) {
  return hash_frames(frames, n, n, where);
}

uint64_t symmpin_callsite_stack_where(void *ret0, symmpin_site_where *where) {
  int depth = symmpin_callsite_depth();
  if (depth <= 1) return hash_frames(&ret0, 1, 1, where);
  /* Room for our own frames (this function, the wrapper) on top of the program's. */
  void *frames[SYMMPIN_STACK_DEPTH_MAX + 8];
  int n = backtrace(frames, depth + 8);
  return hash_frames(frames, n, depth, where);
}

uint64_t symmpin_callsite_stack(void *ret0) { return symmpin_callsite_stack_where(ret0, NULL); }
