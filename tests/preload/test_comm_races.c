/* preload/comm: the registry's races, made to happen every time. This executable builds its own
 * comm.c with SYMMPIN_COMM_TEST_HOOKS, which stops a lookup (on a reader thread) or a rebuild (on
 * the writer) exactly where another thread's write matters, then checks the lookup's answer. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

#include "preload/comm.h"

static symmpin_comm_key key(uint64_t k) { return (symmpin_comm_key){k * 7 + 1, k ^ 0xabc}; }

/* The reader stops once at `stop_at`, tells the test, and waits for it to go on. */
static enum symmpin_comm_test_point stop_at;
static __thread int is_reader, stopped;
static sem_t reader_stopped, reader_go, reader_done;
static int rebuilds_cleared, release_at_rebuild; /* writer side: rebuilds seen by the hook */
static void *lookup_handle;
static symmpin_comm *lookup_result;

static void hook(enum symmpin_comm_test_point at) {
  if (is_reader && !stopped && at == stop_at) {
    stopped = 1;
    sem_post(&reader_stopped);
    sem_wait(&reader_go);
  }
  if (!is_reader && at == SYMMPIN_COMM_AT_CLEARED && ++rebuilds_cleared == release_at_rebuild) {
    /* The rebuild is rewriting an array: let the stopped reader probe it now, mid-rewrite. */
    sem_post(&reader_go);
    sem_wait(&reader_done);
  }
}

static void *reader(void *arg) {
  (void)arg;
  is_reader = 1;
  lookup_result = symmpin_comm_acquire(lookup_handle);
  sem_post(&reader_done);
  return NULL;
}

static void setup(void) {
  symmpin_comm_registry_reset();
  sem_init(&reader_stopped, 0, 0);
  sem_init(&reader_go, 0, 0);
  sem_init(&reader_done, 0, 0);
  rebuilds_cleared = release_at_rebuild = 0;
  lookup_result = NULL;
  symmpin_comm_test_hook = hook;
}

static void teardown(void) {
  symmpin_comm_test_hook = NULL;
  symmpin_comm_registry_reset();
}

TestSuite(comm_races, .init = setup, .fini = teardown, .timeout = 60);

static pthread_t start_reader(void *handle, enum symmpin_comm_test_point at) {
  pthread_t t;
  lookup_handle = handle;
  stop_at = at;
  pthread_create(&t, NULL, reader, NULL);
  sem_wait(&reader_stopped);
  return t;
}

Test(comm_races, miss_in_an_array_being_rewritten_is_retried) {
  void *h = (void *)0x5000;
  symmpin_comm *c = symmpin_comm_register(h, key(1), 0, 1, 0, true);
  /* The reader holds the current array; two rebuilds later that array is the one rewritten. */
  pthread_t t = start_reader(h, SYMMPIN_COMM_AT_TABLE);
  release_at_rebuild = 2;
  for (long i = 0; rebuilds_cleared < 2; i++) {
    cr_assert_lt(i, 100000, "no second rebuild");
    symmpin_comm *x = symmpin_comm_register((void *)(uintptr_t)(0x10000000 + 16 * i), key(2), 0, 1,
                                            0, true);
    symmpin_comm_unregister(x);
  }
  pthread_join(t, NULL);
  cr_assert_eq(lookup_result, c, "a live entry was reported absent (%p)", (void *)lookup_result);
  symmpin_comm_put(lookup_result);
}

Test(comm_races, entry_reused_for_another_handle_is_refused) {
  void *h = (void *)0x6000, *other = (void *)0x7000;
  symmpin_comm *c = symmpin_comm_register(h, key(1), 0, 1, 0, true);
  pthread_t t = start_reader(h, SYMMPIN_COMM_AT_PROBED); /* it has found c in h's slot */
  symmpin_comm_unregister(c);                            /* freed: nobody holds it */
  symmpin_comm *o = symmpin_comm_register(other, key(2), 0, 1, 0, true);
  cr_assert_eq(o, c, "the freed entry was not reused: the race did not happen");
  sem_post(&reader_go);
  pthread_join(t, NULL);
  cr_assert_null(lookup_result, "a lookup of a destroyed handle got another handle's entry");
}

Test(comm_races, stale_slot_finds_the_new_entry) {
  void *h = (void *)0x8000;
  symmpin_comm *c = symmpin_comm_register(h, key(1), 0, 1, 0, true);
  pthread_t t = start_reader(h, SYMMPIN_COMM_AT_PROBED); /* it has found c in h's slot */
  symmpin_comm *held = symmpin_comm_acquire(h);         /* so c cannot be reused below */
  symmpin_comm_unregister(c);
  symmpin_comm *fresh = symmpin_comm_register(h, key(1), 0, 1, 0, true);
  cr_assert_neq(fresh, c);
  sem_post(&reader_go);
  pthread_join(t, NULL);
  cr_assert_eq(lookup_result, fresh, "got %p, want the new entry %p", (void *)lookup_result,
               (void *)fresh);
  symmpin_comm_put(lookup_result);
  symmpin_comm_put(held);
}

Test(comm_races, reference_taken_before_unregister_keeps_the_entry) {
  void *h = (void *)0x9000;
  symmpin_comm *c = symmpin_comm_register(h, key(1), 5, 8, 3, true);
  /* The reader has found c; the destroy on this thread completes before it takes its reference:
   * it must get nothing rather than a freed entry. */
  pthread_t t = start_reader(h, SYMMPIN_COMM_AT_PROBED);
  symmpin_comm_unregister(c);
  sem_post(&reader_go);
  pthread_join(t, NULL);
  cr_assert_null(lookup_result);
  cr_assert_eq(symmpin_comm_live(), 0);
}
