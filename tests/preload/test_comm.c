/* preload/comm: the communicator registry (lookup, ordinals by key, handle reuse, removal keeping
 * other entries reachable, concurrent readers and writers) and stream ordinals. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>

#include "preload/comm.h"

static void reset(void) { symmpin_comm_registry_reset(); }

static symmpin_comm_key key(uint64_t k) { return (symmpin_comm_key){k * 7 + 1, k ^ 0xabc}; }

TestSuite(comm, .init = reset, .fini = reset);

Test(comm, register_find_unregister) {
  void *h = (void *)0x1000;
  cr_assert_null(symmpin_comm_find(h));
  symmpin_comm *c = symmpin_comm_register(h, key(1), 2, 4, 1, true);
  cr_assert_not_null(c);
  cr_assert_eq(symmpin_comm_find(h), c);
  cr_assert_eq(c->rank, 2);
  cr_assert_eq(c->nranks, 4);
  cr_assert_eq(c->device, 1);
  cr_assert_eq(c->ordinal, 0);
  cr_assert_eq(c->nstreams, 0);
  cr_assert_null(c->engine);
  cr_assert_eq(symmpin_comm_live(), 1);
  symmpin_comm_unregister(c);
  cr_assert_null(symmpin_comm_find(h));
  cr_assert_eq(symmpin_comm_live(), 0);
  cr_assert_null(symmpin_comm_find(NULL));
}

Test(comm, ordinals_follow_keys) {
  /* Two ranks of one communicator driven by this process share an ordinal; a new key gets the
   * next one; a key seen before keeps its ordinal even after its communicators are gone. */
  symmpin_comm *a0 = symmpin_comm_register((void *)0x10, key(5), 0, 2, 0, true);
  symmpin_comm *a1 = symmpin_comm_register((void *)0x20, key(5), 1, 2, 1, true);
  symmpin_comm *b = symmpin_comm_register((void *)0x30, key(6), 0, 1, 0, true);
  cr_assert_eq(a0->ordinal, 0);
  cr_assert_eq(a1->ordinal, 0);
  cr_assert_eq(b->ordinal, 1);
  symmpin_comm_unregister(a0);
  symmpin_comm_unregister(a1);
  cr_assert_eq(symmpin_comm_ordinal(key(5)), 0);
  cr_assert_eq(symmpin_comm_ordinal(key(7)), 2);
  cr_assert_eq(symmpin_comm_ordinal(key(7)), 2);
}

Test(comm, handle_reuse_replaces_stale_entry) {
  void *h = (void *)0x4000;
  symmpin_comm *old = symmpin_comm_register(h, key(1), 0, 2, 0, true);
  symmpin_comm *fresh = symmpin_comm_register(h, key(2), 1, 3, 0, false);
  cr_assert_not_null(fresh);
  cr_assert_eq(symmpin_comm_find(h), fresh);
  cr_assert_eq(fresh->ordinal, 1);
  cr_assert(!fresh->blocking);
  cr_assert_eq(symmpin_comm_live(), 1);
  (void)old; /* freed by the replacement */
}

Test(comm, removal_keeps_others_reachable) {
  /* Many handles: probe chains form; removing every other one must not hide the rest. */
  enum { N = 1500 };
  static symmpin_comm *c[N];
  for (int i = 0; i < N; i++) {
    c[i] = symmpin_comm_register((void *)(uintptr_t)(0x10000 + 64 * i), key((uint64_t)i), 0, 1,
                                 0, true);
    cr_assert_not_null(c[i], "%d", i);
  }
  for (int i = 0; i < N; i += 2) symmpin_comm_unregister(c[i]);
  for (int i = 0; i < N; i++) {
    symmpin_comm *f = symmpin_comm_find((void *)(uintptr_t)(0x10000 + 64 * i));
    if (i % 2)
      cr_assert_eq(f, c[i], "%d", i);
    else
      cr_assert_null(f, "%d", i);
  }
  /* Freed slots are reused. */
  for (int i = 0; i < N; i += 2) {
    c[i] = symmpin_comm_register((void *)(uintptr_t)(0x900000 + 64 * i), key(1), 0, 1, 0, true);
    cr_assert_not_null(c[i]);
  }
  cr_assert_eq(symmpin_comm_live(), N);
}

static void count_one(symmpin_comm *c, void *arg) {
  (void)c;
  (*(int *)arg)++;
}

Test(comm, for_each_visits_live) {
  symmpin_comm_register((void *)0x100, key(1), 0, 1, 0, true);
  symmpin_comm *b = symmpin_comm_register((void *)0x200, key(2), 0, 1, 0, true);
  symmpin_comm_register((void *)0x300, key(3), 0, 1, 0, true);
  symmpin_comm_unregister(b);
  int n = 0;
  symmpin_comm_for_each(count_one, &n);
  cr_assert_eq(n, 2);
}

Test(comm, stream_ordinals) {
  symmpin_comm *c = symmpin_comm_register((void *)0x500, key(1), 0, 1, 0, true);
  pthread_mutex_lock(&c->lock);
  cr_assert_eq(symmpin_comm_stream_ordinal(c, (void *)0xa), 0);
  cr_assert_eq(symmpin_comm_stream_ordinal(c, NULL), 1); /* the legacy stream is a stream too */
  cr_assert_eq(symmpin_comm_stream_ordinal(c, (void *)0xa), 0);
  cr_assert_eq(symmpin_comm_stream_ordinal(c, (void *)0xb), 2);
  for (int i = 3; i < SYMMPIN_MAX_STREAMS_PER_COMM; i++)
    cr_assert_eq(symmpin_comm_stream_ordinal(c, (void *)(uintptr_t)(0x1000 + i)), i);
  cr_assert_eq(symmpin_comm_stream_ordinal(c, (void *)0x99999), -1); /* full */
  cr_assert_eq(symmpin_comm_stream_ordinal(c, (void *)0xb), 2);      /* known ones still work */
  pthread_mutex_unlock(&c->lock);
}

/* cudaStreamPerThread (0x2) is one handle for a different stream on every thread: an ordinal per
 * thread. Under one ordinal, two threads' calls would look like one stream to the engine, which
 * orders a slot's kernels only across different ordinals. */
typedef struct pts_arg {
  symmpin_comm *c;
  int ord;
} pts_arg;

static void *pts_thread(void *p) {
  pts_arg *a = p;
  pthread_mutex_lock(&a->c->lock);
  a->ord = symmpin_comm_stream_ordinal(a->c, (void *)0x2);
  pthread_mutex_unlock(&a->c->lock);
  return NULL;
}

Test(comm, per_thread_stream_is_one_stream_per_thread) {
  symmpin_comm *c = symmpin_comm_register((void *)0x510, key(1), 0, 1, 0, true);
  pthread_mutex_lock(&c->lock);
  cr_assert_eq(symmpin_comm_stream_ordinal(c, (void *)0x2), 0);
  cr_assert_eq(symmpin_comm_stream_ordinal(c, (void *)0x2), 0, "same thread, same ordinal");
  cr_assert_eq(symmpin_comm_stream_ordinal(c, NULL), 1);
  pthread_mutex_unlock(&c->lock);
  pts_arg a = {.c = c};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, pts_thread, &a), 0);
  pthread_join(t, NULL);
  cr_assert_eq(a.ord, 2, "another thread's per-thread stream is another stream");
  /* A thread started after that one ended (glibc reuses its pthread id at once) is yet another
   * thread: its per-thread stream is not the finished thread's. */
  pts_arg b = {.c = c};
  cr_assert_eq(pthread_create(&t, NULL, pts_thread, &b), 0);
  pthread_join(t, NULL);
  cr_assert_eq(b.ord, 3, "a new thread reusing a finished thread's id still gets its own ordinal");
  pthread_mutex_lock(&c->lock);
  cr_assert(symmpin_comm_stream_is_per_thread((void *)0x2));
  cr_assert_not(symmpin_comm_stream_is_per_thread((void *)0x1), "cudaStreamLegacy is one stream");
  pthread_mutex_unlock(&c->lock);
}

/* Readers look up a stable set of handles while writers churn other handles. */
#define STABLE 64
static _Atomic int stop;
static symmpin_comm *stable[STABLE];

static void *reader(void *arg) {
  (void)arg;
  long misses = 0;
  while (!stop)
    for (int i = 0; i < STABLE; i++)
      if (symmpin_comm_find((void *)(uintptr_t)(0x7000000 + 16 * i)) != stable[i]) misses++;
  return (void *)misses;
}

static void *writer(void *arg) {
  long base = (long)arg;
  for (int round = 0; round < 200; round++)
    for (int i = 0; i < 20; i++) {
      symmpin_comm *c = symmpin_comm_register((void *)(uintptr_t)(base + 16 * i), key(9), 0, 1, 0,
                                              true);
      if (!c) return (void *)1;
      if (symmpin_comm_find((void *)(uintptr_t)(base + 16 * i)) != c) return (void *)2;
      symmpin_comm_unregister(c);
    }
  return NULL;
}

Test(comm, concurrent_lookups_and_churn, .timeout = 60) {
  for (int i = 0; i < STABLE; i++)
    stable[i] = symmpin_comm_register((void *)(uintptr_t)(0x7000000 + 16 * i), key(100 + i), 0,
                                      1, 0, true);
  pthread_t r[4], w[4];
  for (long i = 0; i < 4; i++) pthread_create(&r[i], NULL, reader, NULL);
  for (long i = 0; i < 4; i++) pthread_create(&w[i], NULL, writer, (void *)(0x9000000 + i * 0x100000));
  for (int i = 0; i < 4; i++) {
    void *res;
    pthread_join(w[i], &res);
    cr_assert_null(res, "writer %d failed with %ld", i, (long)res);
  }
  stop = 1;
  for (int i = 0; i < 4; i++) {
    void *res;
    pthread_join(r[i], &res);
    cr_assert_eq((long)res, 0, "reader %d missed %ld lookups", i, (long)res);
  }
  cr_assert_eq(symmpin_comm_live(), STABLE);
}
