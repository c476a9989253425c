/* The communicator registry (comm.h): a fixed-capacity open-addressed table keyed by handle, read
 * without locks on every all-reduce, written under one mutex at comm init/end. */
#include "preload/comm.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/hash.h"

#define TABLE_SLOTS 4096u /* live + dead communicators a process may have; power of two */
#define TOMBSTONE ((uintptr_t)1)

/* A slot's entry is stored before its handle is published (release), so a reader that matches
 * the handle (acquire) sees a complete entry. Removal turns the handle into a tombstone, which
 * keeps probe chains intact for the other handles. */
typedef struct slot {
  _Atomic(uintptr_t) handle;
  _Atomic(symmpin_comm *) entry;
} slot;

static slot table[TABLE_SLOTS];
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static symmpin_comm_key *keys; /* ordinal -> key */
static size_t nkeys, cap_keys;
static size_t live;

static uint32_t slot_of(uintptr_t h) { return (uint32_t)symmpin_hash_mix64(h) & (TABLE_SLOTS - 1); }

symmpin_comm *symmpin_comm_find(void *handle) {
  uintptr_t h = (uintptr_t)handle;
  if (h <= TOMBSTONE) return NULL;
  uint32_t i0 = slot_of(h);
  for (uint32_t k = 0; k < TABLE_SLOTS; k++) {
    slot *s = &table[(i0 + k) & (TABLE_SLOTS - 1)];
    uintptr_t cur = atomic_load_explicit(&s->handle, memory_order_acquire);
    if (cur == 0) return NULL;
    if (cur == h) return atomic_load_explicit(&s->entry, memory_order_relaxed);
  }
  return NULL;
}

int symmpin_comm_stream_ordinal(symmpin_comm *c, void *stream) {
  for (int i = 0; i < c->nstreams; i++)
    if (c->streams[i] == stream) return i;
  if (c->nstreams >= SYMMPIN_MAX_STREAMS_PER_COMM) return -1;
  c->streams[c->nstreams] = stream;
  return c->nstreams++;
}

/* Caller holds reg_lock. */
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

symmpin_comm *symmpin_comm_register(void *handle, symmpin_comm_key key, int rank, int nranks,
                                    int device, bool blocking) {
  uintptr_t h = (uintptr_t)handle;
  if (h <= TOMBSTONE) return NULL;
  symmpin_comm *c = calloc(1, sizeof *c);
  if (!c) {
    SYMMPIN_WARN("out of memory for a communicator entry");
    return NULL;
  }
  c->handle = handle;
  c->key = key;
  c->rank = rank;
  c->nranks = nranks;
  c->device = device;
  c->blocking = blocking;
  pthread_mutex_init(&c->lock, NULL);

  symmpin_comm *replaced = NULL;
  pthread_mutex_lock(&reg_lock);
  c->ordinal = ordinal_locked(key);
  uint32_t i0 = slot_of(h);
  slot *free_slot = NULL, *same = NULL;
  for (uint32_t k = 0; k < TABLE_SLOTS; k++) {
    slot *s = &table[(i0 + k) & (TABLE_SLOTS - 1)];
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
  if (same) {
    /* The old communicator's destroy never reached us; its handle was reused. */
    replaced = atomic_exchange_explicit(&same->entry, c, memory_order_release);
  } else if (free_slot && c->ordinal >= 0) {
    atomic_store_explicit(&free_slot->entry, c, memory_order_relaxed);
    atomic_store_explicit(&free_slot->handle, h, memory_order_release);
    live++;
  } else {
    pthread_mutex_unlock(&reg_lock);
    SYMMPIN_WARN("communicator table full (%u entries): comm %p stays with NCCL", TABLE_SLOTS,
                 handle);
    pthread_mutex_destroy(&c->lock);
    free(c);
    return NULL;
  }
  pthread_mutex_unlock(&reg_lock);
  if (replaced) {
    SYMMPIN_INFO("comm %p registered again: dropping the stale entry (ordinal %d)", handle,
                 replaced->ordinal);
    pthread_mutex_destroy(&replaced->lock);
    free(replaced);
  }
  return c;
}

void symmpin_comm_unregister(symmpin_comm *c) {
  if (!c) return;
  uintptr_t h = (uintptr_t)c->handle;
  pthread_mutex_lock(&reg_lock);
  uint32_t i0 = slot_of(h);
  for (uint32_t k = 0; k < TABLE_SLOTS; k++) {
    slot *s = &table[(i0 + k) & (TABLE_SLOTS - 1)];
    uintptr_t cur = atomic_load_explicit(&s->handle, memory_order_relaxed);
    if (cur == 0) break;
    if (cur == h) {
      if (atomic_load_explicit(&s->entry, memory_order_relaxed) == c) {
        atomic_store_explicit(&s->handle, TOMBSTONE, memory_order_release);
        atomic_store_explicit(&s->entry, NULL, memory_order_relaxed);
        live--;
      }
      break;
    }
  }
  pthread_mutex_unlock(&reg_lock);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

void symmpin_comm_for_each(void (*fn)(symmpin_comm *c, void *arg), void *arg) {
  pthread_mutex_lock(&reg_lock);
  for (uint32_t i = 0; i < TABLE_SLOTS; i++) {
    uintptr_t cur = atomic_load_explicit(&table[i].handle, memory_order_relaxed);
    if (cur > TOMBSTONE) fn(atomic_load_explicit(&table[i].entry, memory_order_relaxed), arg);
  }
  pthread_mutex_unlock(&reg_lock);
}

size_t symmpin_comm_live(void) {
  pthread_mutex_lock(&reg_lock);
  size_t n = live;
  pthread_mutex_unlock(&reg_lock);
  return n;
}

void symmpin_comm_registry_reset(void) {
  pthread_mutex_lock(&reg_lock);
  for (uint32_t i = 0; i < TABLE_SLOTS; i++) {
    uintptr_t cur = atomic_load_explicit(&table[i].handle, memory_order_relaxed);
    symmpin_comm *c = atomic_load_explicit(&table[i].entry, memory_order_relaxed);
    if (cur > TOMBSTONE && c) {
      pthread_mutex_destroy(&c->lock);
      free(c);
    }
    atomic_store(&table[i].handle, 0);
    atomic_store(&table[i].entry, NULL);
  }
  free(keys);
  keys = NULL;
  nkeys = cap_keys = 0;
  live = 0;
  pthread_mutex_unlock(&reg_lock);
}
