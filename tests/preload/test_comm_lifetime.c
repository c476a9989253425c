/* preload/comm: entry lifetime (references held across unregister and replacement) and the
 * table's bounds under churn (tombstones reclaimed: lookups stay short, memory stays bounded),
 * alone and with threads racing the writers. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/hash.h"
#include "preload/comm.h"

static void reset(void) { symmpin_comm_registry_reset(); }

static symmpin_comm_key key(uint64_t k) { return (symmpin_comm_key){k * 7 + 1, k ^ 0xabc}; }

static symmpin_comm_registry_stats stats(void) {
  symmpin_comm_registry_stats s;
  symmpin_comm_registry_probe_stats(&s);
  return s;
}

TestSuite(comm_lifetime, .init = reset, .fini = reset);

Test(comm_lifetime, reference_outlives_unregister) {
  void *h = (void *)0x1000;
  symmpin_comm *c = symmpin_comm_register(h, key(1), 3, 4, 2, true);
  symmpin_comm *held = symmpin_comm_acquire(h);
  cr_assert_eq(held, c);
  symmpin_comm_unregister(c);
  cr_assert_null(symmpin_comm_acquire(h));
  cr_assert_null(symmpin_comm_find(h));
  cr_assert_eq(symmpin_comm_live(), 0);
  /* Still the same entry, not freed: a new registration cannot take its memory. */
  symmpin_comm *other = symmpin_comm_register((void *)0x2000, key(2), 0, 1, 0, true);
  cr_assert_neq(other, held);
  cr_assert_eq(stats().entries, 2);
  cr_assert_eq(held->handle, h);
  cr_assert_eq(held->rank, 3);
  cr_assert_eq(held->device, 2);
  symmpin_comm_unregister(held); /* already unregistered: a no-op */
  cr_assert_eq(symmpin_comm_live(), 1);
  symmpin_comm_put(held); /* the last reference: freed now, so its memory is reused */
  symmpin_comm *again = symmpin_comm_register((void *)0x3000, key(3), 0, 1, 0, true);
  cr_assert_eq(again, held);
  cr_assert_eq(stats().entries, 2);
  symmpin_comm_put(NULL);
}

Test(comm_lifetime, replacement_keeps_holders) {
  void *h = (void *)0x4000;
  symmpin_comm *old = symmpin_comm_register(h, key(1), 0, 2, 0, true);
  symmpin_comm *held = symmpin_comm_acquire(h);
  cr_assert_eq(held, old);
  symmpin_comm *fresh = symmpin_comm_register(h, key(2), 1, 2, 0, true); /* destroy was missed */
  cr_assert_neq(fresh, old);
  cr_assert_eq(symmpin_comm_find(h), fresh);
  cr_assert_eq(held->rank, 0); /* the old entry is intact while held */
  symmpin_comm_unregister(old); /* replaced already: must not remove the new entry */
  cr_assert_eq(symmpin_comm_find(h), fresh);
  cr_assert_eq(symmpin_comm_live(), 1);
  symmpin_comm_put(held);
  symmpin_comm *c = symmpin_comm_acquire(h);
  cr_assert_eq(c, fresh);
  symmpin_comm_put(c);
  cr_assert_eq(symmpin_comm_ordinal(key(1)), 0); /* ordinals as before */
  cr_assert_eq(fresh->ordinal, 1);
}

/* Distinct handles: every destroy leaves a tombstone a later create does not find on its way. */
#define CYCLES 100000
#define KEEP 8
static void *churn_handle(long i) { return (void *)(uintptr_t)(0x10000000 + 16 * i); }
static void *kept_handle(long i) { return (void *)(uintptr_t)(0x7000000 + 16 * i); }

Test(comm_lifetime, churn_keeps_lookups_short, .timeout = 120) {
  symmpin_comm *kept[KEEP];
  for (int i = 0; i < KEEP; i++)
    kept[i] = symmpin_comm_register(kept_handle(i), key(100 + i), 0, 1, 0, true);
  for (long i = 0; i < CYCLES; i++) {
    symmpin_comm *c = symmpin_comm_register(churn_handle(i), key((uint64_t)i % 3), 0, 1, 0, true);
    cr_assert_not_null(c, "cycle %ld", i);
    symmpin_comm_unregister(c);
  }
  symmpin_comm_registry_stats s = stats();
  cr_assert_eq(s.live, KEEP);
  cr_assert_gt(s.rebuilds, 0);
  cr_assert_lt(s.tombstones, s.slots / 2);
  cr_assert_eq(s.tables, 2);
  cr_assert_eq(symmpin_comm_ordinal(key(2)), KEEP + 2);
  cr_assert_leq(s.entries, KEEP + 1, "entries %llu: freed entries are not reused",
                (unsigned long long)s.entries);
  /* Unknown handles: a table at most half used is probed a few slots on average. */
  enum { ABSENT = 20000 };
  uint64_t total = 0;
  uint32_t worst = 0;
  for (uint64_t i = 0; i < ABSENT; i++) {
    void *h = (void *)(uintptr_t)(symmpin_hash_mix64(i + 1) | 0x1000);
    cr_assert_null(symmpin_comm_acquire(h));
    uint32_t p = symmpin_comm_registry_probes(h);
    total += p;
    if (p > worst) worst = p;
  }
  double mean = (double)total / ABSENT;
  cr_log_info("after %d cycles: %llu rebuilds, %u tombstones, absent lookups probe %.2f slots "
              "on average, %u at most", CYCLES, (unsigned long long)s.rebuilds, s.tombstones,
              mean, worst);
  cr_assert_leq(mean, 4.0, "absent lookups probe %.2f slots on average", mean);
  cr_assert_leq(worst, 128, "an absent lookup probes %u slots", worst);
  for (int i = 0; i < KEEP; i++) {
    symmpin_comm *c = symmpin_comm_acquire(kept_handle(i));
    cr_assert_eq(c, kept[i], "kept %d", i);
    cr_assert_eq(c->ordinal, i); /* ordinals unchanged by the churn (its keys came later) */
    symmpin_comm_put(c);
    symmpin_comm_unregister(kept[i]);
  }
  cr_assert_eq(symmpin_comm_live(), 0);
  cr_assert_leq(stats().entries, KEEP + 1);
}

/* One handle destroyed and created again and again, while other threads hold its entry. */
#define MAGIC 0x5eed
#define RACE_ROUNDS 5000
#define HOLDERS 2
static _Atomic int race_done;
static _Atomic long race_hits, race_unregisters;

static void *holder(void *arg) {
  (void)arg;
  long hits = 0, bad = 0;
  void *h = (void *)0xabc000;
  while (!atomic_load(&race_done)) {
    sched_yield(); /* let the writer run: the machine may have fewer cores than threads */
    symmpin_comm *c = symmpin_comm_acquire(h);
    if (!c) continue;
    hits++;
    long unregisters = atomic_load(&race_unregisters);
    atomic_fetch_add(&race_hits, 1);
    int rank = c->rank;
    pthread_mutex_lock(&c->lock);
    c->collectives++;
    pthread_mutex_unlock(&c->lock);
    /* While held, nothing may free or reuse it: a freed entry is overwritten, a reused one gets
     * another rank. Hold it until the writer has unregistered it (or for a while). */
    for (int k = 0; k < 64 || (k < 100000 && atomic_load(&race_unregisters) == unregisters); k++) {
      if (c->handle != h || c->device != MAGIC || c->rank != rank || c->nranks != MAGIC + 1) bad++;
      atomic_signal_fence(memory_order_seq_cst);
    }
    symmpin_comm_put(c);
  }
  return (void *)(bad ? -bad : hits);
}

Test(comm_lifetime, holders_race_unregister_and_reregister, .timeout = 120) {
  pthread_t t[HOLDERS];
  for (long i = 0; i < HOLDERS; i++) pthread_create(&t[i], NULL, holder, NULL);
  for (int r = 0; r < RACE_ROUNDS; r++) {
    symmpin_comm *c = symmpin_comm_register((void *)0xabc000, key(1), r, MAGIC + 1, MAGIC, true);
    cr_assert_not_null(c);
    /* Unregister right after a holder took it (or after a while: holders may be slow to start). */
    long seen = atomic_load(&race_hits);
    for (int k = 0; k < 1000 && atomic_load(&race_hits) == seen; k++) sched_yield();
    symmpin_comm_unregister(c);
    atomic_fetch_add(&race_unregisters, 1);
  }
  atomic_store(&race_done, 1);
  long hits = 0;
  for (int i = 0; i < HOLDERS; i++) {
    void *res;
    pthread_join(t[i], &res);
    cr_assert_geq((long)res, 0, "holder %d saw a freed or reused entry %ld times", i,
                  -(long)res);
    hits += (long)res;
  }
  cr_log_info("holders took %ld references", hits);
  cr_assert_gt(hits, 0, "the holders never found the entry: the test proves nothing");
  cr_assert_eq(symmpin_comm_live(), 0);
  cr_assert_leq(stats().entries, HOLDERS + 2);
}

/* Readers must find every stable entry while writers' churn rebuilds the table under them. */
#define STABLE 64
#define WRITERS 2
#define WRITER_CYCLES 40000
static _Atomic int churn_done;
static symmpin_comm *stable[STABLE];

static void *stable_reader(void *arg) {
  (void)arg;
  long wrong = 0;
  while (!atomic_load(&churn_done))
    for (int i = 0; i < STABLE; i++) {
      symmpin_comm *c = symmpin_comm_acquire(kept_handle(i));
      if (c != stable[i]) wrong++;
      symmpin_comm_put(c);
    }
  return (void *)wrong;
}

static void *churn_writer(void *arg) {
  long base = (long)arg * WRITER_CYCLES;
  for (long i = 0; i < WRITER_CYCLES; i++) {
    symmpin_comm *c = symmpin_comm_register(churn_handle(base + i), key(9), 0, 1, 0, true);
    if (!c) return (void *)1;
    if (symmpin_comm_find(churn_handle(base + i)) != c) return (void *)2;
    symmpin_comm_unregister(c);
  }
  return NULL;
}

Test(comm_lifetime, lookups_during_rebuilds, .timeout = 120) {
  for (int i = 0; i < STABLE; i++)
    stable[i] = symmpin_comm_register(kept_handle(i), key(100 + i), 0, 1, 0, true);
  pthread_t r[3], w[WRITERS];
  for (int i = 0; i < 3; i++) pthread_create(&r[i], NULL, stable_reader, NULL);
  for (long i = 0; i < WRITERS; i++) pthread_create(&w[i], NULL, churn_writer, (void *)i);
  for (int i = 0; i < WRITERS; i++) {
    void *res;
    pthread_join(w[i], &res);
    cr_assert_null(res, "writer %d failed with %ld", i, (long)res);
  }
  atomic_store(&churn_done, 1);
  for (int i = 0; i < 3; i++) {
    void *res;
    pthread_join(r[i], &res);
    cr_assert_eq((long)res, 0, "reader %d got a wrong entry %ld times", i, (long)res);
  }
  symmpin_comm_registry_stats s = stats();
  cr_log_info("%llu rebuilds under the readers", (unsigned long long)s.rebuilds);
  cr_assert_gt(s.rebuilds, 20);
  cr_assert_eq(s.live, STABLE);
  cr_assert_leq(s.entries, STABLE + WRITERS + 3);
}
