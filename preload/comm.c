/* The communicator registry (comm.h): a fixed-capacity open-addressed table keyed by handle, read
 * without locks on every all-reduce, written under one mutex at comm init/end.
 *
 * Two things make the lock-free readers safe against the writers:
 * - Entries live in nodes that are never given back to malloc (until the tests' reset): a freed
 *   node goes on a free list and is reused by a later register. A reader may therefore touch the
 *   reference count of any node it finds in any slot, however stale; it takes a reference only if
 *   the node is registered, then checks that the node is still the handle's, and drops it if not.
 * - Tombstones (removed slots) are reclaimed by rebuilding: the live entries are copied into the
 *   other of two slot arrays, which is then published with one pointer store. The array left
 *   behind is reused by the next rebuild, while a reader may still be probing it: each array has
 *   a generation (odd while it is being rewritten), and a reader that ends a probe with a miss
 *   trusts it only if the generation did not move (a hit is checked on the node, as above). So
 *   two arrays exist, whatever the churn, and a reader never waits for a writer. */
#include "preload/comm.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/hash.h"
#include "common/invariant.h"
#include "common/log.h"
#include "preload/errrec.h"
#include "preload/events.h" /* SYMMPIN_NCCL_REMOTE_ERROR */

#if defined(__SANITIZE_ADDRESS__)
#define SYMMPIN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SYMMPIN_ASAN 1
#endif
#endif
#ifdef SYMMPIN_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#ifdef SYMMPIN_COMM_TEST_HOOKS
void (*symmpin_comm_test_hook)(enum symmpin_comm_test_point at);
#define TEST_POINT(at)                                      \
  do {                                                      \
    if (symmpin_comm_test_hook) symmpin_comm_test_hook(at); \
  } while (0)
#else
#define TEST_POINT(at) ((void)0)
#endif

#define TABLE_SLOTS 4096u /* live + removed communicators a table holds; power of two */
#define TOMBSTONE ((uintptr_t)1)
/* Rebuild once the table is half used and at least this many slots are tombstones: unknown
 * handles then probe a table at most about half full (expected < 3 slots), and each rebuild
 * (2 * TABLE_SLOTS slot writes) is paid for by at least this many removals. */
#define REBUILD_TOMBSTONES (TABLE_SLOTS / 16)
#define FREED_BYTE 0xdb /* written over a freed entry: a late user reads nonsense, not old data */

/* refs counts 2 per holder plus 1 while registered (the registry's reference); 0 = free. A
 * reader takes a reference only while the low bit is set, so a free node is never revived. */
typedef struct node {
  _Atomic(uint64_t) refs;
  struct node *next_free; /* free list (lock-free push, pop under reg_lock) */
  struct node *next_all;  /* every node, for the reset */
  symmpin_comm c;
} node;

/* A slot's entry is stored before its handle is published (release), so a reader that matches
 * the handle (acquire) finds the node. Removal turns the handle into a tombstone, which keeps
 * probe chains intact for the other handles. */
typedef struct slot {
  _Atomic(uintptr_t) handle;
  _Atomic(node *) entry;
} slot;

typedef struct table {
  _Atomic(uint64_t) gen; /* odd while a rebuild rewrites this array */
  slot slots[TABLE_SLOTS];
} table;

static table tables[2];
static _Atomic(table *) current = &tables[0];
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
/* Under reg_lock: */
static symmpin_comm_key *keys; /* ordinal -> key */
static size_t nkeys, cap_keys;
static size_t live;
static uint32_t used, tombs; /* non-empty and tombstone slots of the current table */
static uint64_t rebuilds, nodes;
static node *all_nodes;
static _Atomic(node *) free_nodes;

static uint32_t slot_of(uintptr_t h) { return (uint32_t)symmpin_hash_mix64(h) & (TABLE_SLOTS - 1); }

static node *node_of(symmpin_comm *c) { return (node *)((char *)c - offsetof(node, c)); }

/* ---- references ---- */

static void node_free(node *n) {
  symmpin_errrec_put(n->c.err_rec);
  pthread_mutex_destroy(&n->c.lock);
  memset(&n->c, FREED_BYTE, sizeof n->c);
  POISON(&n->c, sizeof n->c);
  node *head = atomic_load_explicit(&free_nodes, memory_order_relaxed);
  do n->next_free = head;
  while (!atomic_compare_exchange_weak_explicit(&free_nodes, &head, n, memory_order_release,
                                                memory_order_relaxed));
}

static void node_drop(node *n, uint64_t by) {
  if (atomic_fetch_sub_explicit(&n->refs, by, memory_order_acq_rel) == by) node_free(n);
}

/* A reference to n if it is registered as h's entry. n may be any node ever published, in any
 * state: only refs is read before the reference is held. */
static bool node_ref(node *n, uintptr_t h) {
  uint64_t r = atomic_load_explicit(&n->refs, memory_order_acquire);
  do {
    if (!(r & 1)) return false;
  } while (!atomic_compare_exchange_weak_explicit(&n->refs, &r, r + 2, memory_order_acquire,
                                                  memory_order_acquire));
  if ((uintptr_t)n->c.handle == h) return true; /* stable: written before refs became odd */
  node_drop(n, 2);                              /* reused for another handle */
  return false;
}

/* ---- lookups ---- */

/* The slot chain of h in t: the node of h's slot, or NULL at an empty slot or after every slot. */
static node *probe(table *t, uintptr_t h, uint32_t *probes) {
  uint32_t i0 = slot_of(h), k;
  node *n = NULL;
  for (k = 0; k < TABLE_SLOTS; k++) {
    slot *s = &t->slots[(i0 + k) & (TABLE_SLOTS - 1)];
    uintptr_t cur = atomic_load_explicit(&s->handle, memory_order_acquire);
    if (cur == 0) break;
    if (cur == h) {
      n = atomic_load_explicit(&s->entry, memory_order_relaxed);
      break;
    }
  }
  if (probes) *probes = k < TABLE_SLOTS ? k + 1 : k;
  return n;
}

symmpin_comm *symmpin_comm_acquire(void *handle) {
  uintptr_t h = (uintptr_t)handle;
  if (h <= TOMBSTONE) return NULL;
  for (;;) {
    table *t = atomic_load_explicit(&current, memory_order_acquire);
    uint64_t gen = atomic_load_explicit(&t->gen, memory_order_acquire);
    if (gen & 1) continue; /* t was retired and is being rewritten: current has moved on */
    TEST_POINT(SYMMPIN_COMM_AT_TABLE);
    node *n = probe(t, h, NULL);
    TEST_POINT(SYMMPIN_COMM_AT_PROBED);
    if (n) {
      if (node_ref(n, h)) return &n->c;
      continue; /* a stale slot (removed, or a retired array): look again in the current one */
    }
    /* A miss counts only if no rebuild rewrote t under the probe (seqlock read side). */
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&t->gen, memory_order_relaxed) == gen) return NULL;
  }
}

void symmpin_comm_put(symmpin_comm *c) {
  if (c) node_drop(node_of(c), 2);
}

symmpin_comm *symmpin_comm_find(void *handle) {
  symmpin_comm *c = symmpin_comm_acquire(handle);
  symmpin_comm_put(c); /* the caller guarantees the registry's reference outlives its use */
  return c;
}

bool symmpin_comm_stream_is_per_thread(const void *stream) {
  return stream == (const void *)(uintptr_t)0x2; /* cudaStreamPerThread; no CUDA header here */
}

/* The thread a per-thread default stream belongs to: a number drawn once per thread from a
 * process-wide counter (never 0, never reused). Not pthread_self(): glibc hands a finished thread's
 * id to the next thread at once, which would make a new thread's stream the old one's. */
unsigned long symmpin_comm_thread_id(void) {
  static _Atomic unsigned long next_id = 1;
  static _Thread_local unsigned long mine;
  if (!mine) mine = atomic_fetch_add(&next_id, 1);
  return mine;
}

static unsigned long stream_owner(const void *stream) {
  return symmpin_comm_stream_is_per_thread(stream) ? symmpin_comm_thread_id() : 0;
}

/* ---- the entry's lock ---- */

void symmpin_comm_lock(symmpin_comm *c) {
  pthread_mutex_lock(&c->lock);
  atomic_store_explicit(&c->lock_owner, symmpin_comm_thread_id(), memory_order_relaxed);
}

bool symmpin_comm_trylock(symmpin_comm *c) {
  if (pthread_mutex_trylock(&c->lock) != 0) return false;
  atomic_store_explicit(&c->lock_owner, symmpin_comm_thread_id(), memory_order_relaxed);
  return true;
}

bool symmpin_comm_lock_by(symmpin_comm *c, const struct timespec *deadline) {
  /* pthread_mutex_timedlock takes CLOCK_REALTIME (pthread_mutex_clocklock is glibc 2.30, newer
   * than the wheel's 2.28: common/glibc_compat.h): the deadline is carried over, as in watch.c. */
  struct timespec mono, real, at;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  long long left_ns = (long long)(deadline->tv_sec - mono.tv_sec) * 1000000000LL +
                      (deadline->tv_nsec - mono.tv_nsec);
  if (left_ns < 0) left_ns = 0;
  long long ns = (long long)real.tv_nsec + left_ns;
  at.tv_sec = real.tv_sec + (time_t)(ns / 1000000000LL);
  at.tv_nsec = (long)(ns % 1000000000LL);
  int rc;
  do rc = pthread_mutex_timedlock(&c->lock, &at);
  while (rc == EINTR);
  if (rc != 0) return false;
  atomic_store_explicit(&c->lock_owner, symmpin_comm_thread_id(), memory_order_relaxed);
  return true;
}

void symmpin_comm_unlock(symmpin_comm *c) {
  atomic_store_explicit(&c->lock_owner, 0, memory_order_relaxed);
  pthread_mutex_unlock(&c->lock);
}

/* Only this thread writes its own id there, so reading it back is exact for "me"; another
 * thread's id or 0 both mean "not me". */
bool symmpin_comm_locked_here(const symmpin_comm *c) {
  return atomic_load_explicit(&c->lock_owner, memory_order_relaxed) == symmpin_comm_thread_id();
}

/* ---- failure and abort ---- */

int symmpin_comm_fail(symmpin_comm *c, int code, const char *why) {
  if (code == 0) return atomic_load(&c->async_error);
  int none = 0;
  bool first = atomic_compare_exchange_strong(&c->async_error, &none, code);
  volatile uint32_t *kernels = atomic_load(&c->kernel_abort);
  if (kernels) *kernels = 1;
  if (first && why)
    SYMMPIN_INFO("comm %d rank %d: in error from now on (%s): ncclCommGetAsyncError and every "
                 "later collective call report %d",
                 c->ordinal, c->rank, why, code);
  return first ? code : none;
}

void symmpin_comm_signal_abort(symmpin_comm *c) {
  atomic_store(&c->aborting, 1);
  volatile uint32_t *kernels = atomic_load(&c->kernel_abort);
  if (kernels) *kernels = 1;
}

int symmpin_comm_async_error(symmpin_comm *c) {
  const volatile uint32_t *failed = atomic_load_explicit(&c->kernel_failed, memory_order_acquire);
  if (failed && *failed && !atomic_load(&c->aborting))
    return symmpin_comm_fail(c, SYMMPIN_NCCL_REMOTE_ERROR, "a kernel gave up waiting for a peer");
  return atomic_load(&c->async_error);
}

int symmpin_comm_stream_ordinal(symmpin_comm *c, void *stream) {
  unsigned long owner = stream_owner(stream);
  for (int i = 0; i < c->nstreams; i++)
    if (c->streams[i] == stream && c->stream_thread[i] == owner) return i;
  if (c->nstreams >= SYMMPIN_MAX_STREAMS_PER_COMM) return -1;
  c->streams[c->nstreams] = stream;
  c->stream_thread[c->nstreams] = owner;
  return c->nstreams++;
}

/* ---- writers (reg_lock held) ---- */

static int ordinal_locked(symmpin_comm_key key) {
  for (size_t i = 0; i < nkeys; i++)
    if (keys[i].hi == key.hi && keys[i].lo == key.lo) return (int)i;
  if (nkeys == cap_keys) {
    size_t cap = cap_keys ? cap_keys * 2 : 16;
    symmpin_comm_key *k = realloc(keys, cap * sizeof *k);
    if (!k) {
      SYMMPIN_WARN("out of memory for communicator keys");
      return -1;
    }
    keys = k;
    cap_keys = cap;
  }
  keys[nkeys] = key;
  return (int)nkeys++;
}

int symmpin_comm_ordinal(symmpin_comm_key key) {
  pthread_mutex_lock(&reg_lock);
  int o = ordinal_locked(key);
  pthread_mutex_unlock(&reg_lock);
  return o;
}

/* A free node (its c poisoned and unregistered) or a new one; NULL when memory runs out. Only
 * writers pop, so the free list has no ABA (pushes alone cannot bring a popped head back). */
static node *node_get_locked(void) {
  node *n = atomic_load_explicit(&free_nodes, memory_order_acquire);
  while (n && !atomic_compare_exchange_weak_explicit(&free_nodes, &n, n->next_free,
                                                     memory_order_acquire, memory_order_acquire))
    ;
  if (n) {
    UNPOISON(&n->c, sizeof n->c);
    memset(&n->c, 0, sizeof n->c);
    return n;
  }
  n = calloc(1, sizeof *n);
  if (!n) return NULL;
  n->next_all = all_nodes;
  all_nodes = n;
  nodes++;
  return n;
}

/* The live slot of n, or NULL. */
static slot *slot_of_node_locked(table *t, node *n) {
  uintptr_t h = (uintptr_t)n->c.handle;
  uint32_t i0 = slot_of(h);
  for (uint32_t k = 0; k < TABLE_SLOTS; k++) {
    slot *s = &t->slots[(i0 + k) & (TABLE_SLOTS - 1)];
    uintptr_t cur = atomic_load_explicit(&s->handle, memory_order_relaxed);
    if (cur == 0) return NULL;
    if (cur == h) return atomic_load_explicit(&s->entry, memory_order_relaxed) == n ? s : NULL;
  }
  return NULL;
}

/* Move the live entries into the other array and publish it. Readers still in the old array
 * are fine until the next rebuild rewrites it, which they notice by its generation. */
static void rebuild_locked(void) {
  table *old = atomic_load_explicit(&current, memory_order_relaxed);
  table *t = old == &tables[0] ? &tables[1] : &tables[0];
  uint64_t gen = atomic_load_explicit(&t->gen, memory_order_relaxed);
  atomic_store_explicit(&t->gen, gen + 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release); /* odd before any slot changes (seqlock) */
  for (uint32_t i = 0; i < TABLE_SLOTS; i++) {
    atomic_store_explicit(&t->slots[i].handle, 0, memory_order_relaxed);
    atomic_store_explicit(&t->slots[i].entry, NULL, memory_order_relaxed);
  }
  TEST_POINT(SYMMPIN_COMM_AT_CLEARED);
  uint32_t n = 0;
  for (uint32_t i = 0; i < TABLE_SLOTS; i++) {
    uintptr_t h = atomic_load_explicit(&old->slots[i].handle, memory_order_relaxed);
    if (h <= TOMBSTONE) continue;
    uint32_t j = slot_of(h);
    while (atomic_load_explicit(&t->slots[j].handle, memory_order_relaxed) != 0)
      j = (j + 1) & (TABLE_SLOTS - 1);
    atomic_store_explicit(&t->slots[j].entry,
                          atomic_load_explicit(&old->slots[i].entry, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&t->slots[j].handle, h, memory_order_relaxed);
    n++;
  }
  atomic_store_explicit(&t->gen, gen + 2, memory_order_release);
  atomic_store_explicit(&current, t, memory_order_release);
  used = n;
  tombs = 0;
  rebuilds++;
}

static void maybe_rebuild_locked(void) {
  if (used >= TABLE_SLOTS / 2 && tombs >= REBUILD_TOMBSTONES) rebuild_locked();
}

/* Unpublish n (its slot s becomes a tombstone) and drop the registry's reference. */
static void unpublish_locked(slot *s, node *n) {
  if (s) {
    atomic_store_explicit(&s->handle, TOMBSTONE, memory_order_release);
    atomic_store_explicit(&s->entry, NULL, memory_order_relaxed);
    tombs++;
  } else {
    SYMMPIN_BUG("comm %p: registered but not in the table", n->c.handle);
  }
  live--;
  node_drop(n, 1); /* after the tombstone: a reader refused by refs then sees the tombstone */
}

static symmpin_comm *register_entry(void *handle, symmpin_comm_key key, int rank, int nranks,
                                    int device, bool blocking, const char *passthrough) {
  uintptr_t h = (uintptr_t)handle;
  if (h <= TOMBSTONE) return NULL;
  pthread_mutex_lock(&reg_lock);
  node *n = node_get_locked();
  if (!n) {
    pthread_mutex_unlock(&reg_lock);
    SYMMPIN_WARN("out of memory for a communicator entry");
    return NULL;
  }
  symmpin_comm *c = &n->c;
  c->handle = handle;
  c->key = key;
  c->rank = rank;
  c->nranks = nranks;
  c->device = device;
  c->blocking = blocking;
  c->passthrough = passthrough;
  c->keyless = passthrough != NULL;
  pthread_mutex_init(&c->lock, NULL);
  /* A pass-through entry takes no ordinal: ordinals must stay the same on every rank. */
  c->ordinal = passthrough ? -1 : ordinal_locked(key);

  table *t = atomic_load_explicit(&current, memory_order_relaxed);
  uint32_t i0 = slot_of(h);
  slot *free_slot = NULL, *same = NULL;
  for (uint32_t k = 0; k < TABLE_SLOTS; k++) {
    slot *s = &t->slots[(i0 + k) & (TABLE_SLOTS - 1)];
    uintptr_t cur = atomic_load_explicit(&s->handle, memory_order_relaxed);
    if (cur == h) {
      same = s;
      break;
    }
    if (cur == TOMBSTONE && !free_slot) free_slot = s;
    if (cur == 0) {
      if (!free_slot) free_slot = s;
      break;
    }
  }
  if (!same && (!free_slot || (c->ordinal < 0 && !passthrough))) {
    node_free(n); /* never registered: nobody can hold it */
    pthread_mutex_unlock(&reg_lock);
    SYMMPIN_WARN("communicator table full (%u entries): comm %p stays with NCCL", TABLE_SLOTS,
                 handle);
    return NULL;
  }
  /* Registered from here: release, so a reader whose reference sees the bit sees the fields. */
  atomic_store_explicit(&n->refs, 1, memory_order_release);
  node *replaced = NULL;
  if (same) {
    /* The old communicator's destroy never reached us; its handle was reused. */
    replaced = atomic_exchange_explicit(&same->entry, n, memory_order_release);
    SYMMPIN_INFO("comm %p registered again: dropping the stale entry (ordinal %d)", handle,
                 replaced->c.ordinal);
    node_drop(replaced, 1); /* holders keep it until their put */
  } else {
    if (atomic_load_explicit(&free_slot->handle, memory_order_relaxed) == TOMBSTONE)
      tombs--;
    else
      used++;
    atomic_store_explicit(&free_slot->entry, n, memory_order_relaxed);
    atomic_store_explicit(&free_slot->handle, h, memory_order_release);
    live++;
    maybe_rebuild_locked();
  }
  pthread_mutex_unlock(&reg_lock);
  return c;
}

symmpin_comm *symmpin_comm_register(void *handle, symmpin_comm_key key, int rank, int nranks,
                                    int device, bool blocking) {
  return register_entry(handle, key, rank, nranks, device, blocking, NULL);
}

symmpin_comm *symmpin_comm_register_passthrough(void *handle, int rank, int nranks, int device,
                                                bool blocking, const char *why) {
  symmpin_comm_key none = {0, 0};
  return register_entry(handle, none, rank, nranks, device, blocking, why ? why : "pass-through");
}

void symmpin_comm_unregister(symmpin_comm *c) {
  if (!c) return;
  node *n = node_of(c);
  pthread_mutex_lock(&reg_lock);
  /* Registered (low bit) only while the registry's reference is there; only writers clear it. */
  if (atomic_load_explicit(&n->refs, memory_order_relaxed) & 1) {
    unpublish_locked(slot_of_node_locked(atomic_load_explicit(&current, memory_order_relaxed), n),
                     n);
    maybe_rebuild_locked();
  }
  pthread_mutex_unlock(&reg_lock);
}

void symmpin_comm_for_each(void (*fn)(symmpin_comm *c, void *arg), void *arg) {
  pthread_mutex_lock(&reg_lock);
  table *t = atomic_load_explicit(&current, memory_order_relaxed);
  for (uint32_t i = 0; i < TABLE_SLOTS; i++) {
    uintptr_t cur = atomic_load_explicit(&t->slots[i].handle, memory_order_relaxed);
    node *n = atomic_load_explicit(&t->slots[i].entry, memory_order_relaxed);
    if (cur > TOMBSTONE) fn(&n->c, arg);
  }
  pthread_mutex_unlock(&reg_lock);
}

/* The readers' walk (acquire's rules): any node found in any slot may be looked at, a reference
 * is taken only on a registered one, and a rebuild under the walk makes it start again (a few
 * times: the exit must not spin). */
void symmpin_comm_for_each_unlocked(void (*fn)(symmpin_comm *c, void *arg), void *arg) {
  for (int attempt = 0; attempt < 3; attempt++) {
    table *t = atomic_load_explicit(&current, memory_order_acquire);
    uint64_t gen = atomic_load_explicit(&t->gen, memory_order_acquire);
    if (gen & 1) continue;
    for (uint32_t i = 0; i < TABLE_SLOTS; i++) {
      uintptr_t h = atomic_load_explicit(&t->slots[i].handle, memory_order_acquire);
      if (h <= TOMBSTONE) continue;
      node *n = atomic_load_explicit(&t->slots[i].entry, memory_order_relaxed);
      if (!n || !node_ref(n, h)) continue;
      fn(&n->c, arg);
      node_drop(n, 2);
    }
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&t->gen, memory_order_relaxed) == gen) return;
  }
}

size_t symmpin_comm_live(void) {
  pthread_mutex_lock(&reg_lock);
  size_t n = live;
  pthread_mutex_unlock(&reg_lock);
  return n;
}

void symmpin_comm_registry_probe_stats(symmpin_comm_registry_stats *out) {
  pthread_mutex_lock(&reg_lock);
  *out = (symmpin_comm_registry_stats){.slots = TABLE_SLOTS, .live = (uint32_t)live,
                                       .tombstones = tombs, .tables = 2, .rebuilds = rebuilds,
                                       .entries = nodes};
  pthread_mutex_unlock(&reg_lock);
}

uint32_t symmpin_comm_registry_probes(void *handle) {
  uint32_t k;
  pthread_mutex_lock(&reg_lock);
  (void)probe(atomic_load_explicit(&current, memory_order_relaxed), (uintptr_t)handle, &k);
  pthread_mutex_unlock(&reg_lock);
  return k;
}

void symmpin_comm_registry_reset(void) {
  pthread_mutex_lock(&reg_lock);
  for (int a = 0; a < 2; a++) {
    table *t = &tables[a];
    atomic_fetch_add(&t->gen, 1);
    for (uint32_t i = 0; i < TABLE_SLOTS; i++) {
      atomic_store(&t->slots[i].handle, 0);
      atomic_store(&t->slots[i].entry, NULL);
    }
    atomic_fetch_add(&t->gen, 1);
  }
  atomic_store(&current, &tables[0]);
  while (all_nodes) {
    node *n = all_nodes;
    all_nodes = n->next_all;
    if (atomic_load(&n->refs) != 0) pthread_mutex_destroy(&n->c.lock);
    UNPOISON(&n->c, sizeof n->c);
    free(n);
  }
  atomic_store(&free_nodes, NULL);
  nodes = 0;
  free(keys);
  keys = NULL;
  nkeys = cap_keys = 0;
  live = 0;
  used = tombs = 0;
  rebuilds = 0;
  pthread_mutex_unlock(&reg_lock);
}
