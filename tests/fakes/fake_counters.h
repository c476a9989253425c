/* FAKE for CPU tests: call counters and injected failures shared by the fake CUDA runtime and
 * the fake NCCL (each fake library compiles its own copy). */
#ifndef SYMMPIN_TESTS_FAKE_COUNTERS_H
#define SYMMPIN_TESTS_FAKE_COUNTERS_H

#include <pthread.h>
#include <string.h>

#define FAKE_MAX_FNS 64

typedef struct fake_counters {
  pthread_mutex_t lock;
  const char *names[FAKE_MAX_FNS];
  long counts[FAKE_MAX_FNS];
  int n;
  const char *fail_fn; /* one pending injected failure */
  int fail_rc;
} fake_counters;

#define FAKE_COUNTERS_INIT {PTHREAD_MUTEX_INITIALIZER, {0}, {0}, 0, NULL, 0}

/* Count a call of fn; returns the injected rc for it (consumed) or 0. */
static inline int fake_enter(fake_counters *c, const char *fn) {
  int rc = 0;
  pthread_mutex_lock(&c->lock);
  int i = 0;
  while (i < c->n && strcmp(c->names[i], fn) != 0) i++;
  if (i == c->n && c->n < FAKE_MAX_FNS) c->names[c->n++] = fn;
  if (i < FAKE_MAX_FNS) c->counts[i]++;
  if (c->fail_fn && strcmp(c->fail_fn, fn) == 0) {
    rc = c->fail_rc;
    c->fail_fn = NULL;
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

static inline long fake_count(fake_counters *c, const char *fn) {
  long v = 0;
  pthread_mutex_lock(&c->lock);
  for (int i = 0; i < c->n; i++)
    if (strcmp(c->names[i], fn) == 0) v = c->counts[i];
  pthread_mutex_unlock(&c->lock);
  return v;
}

/* fn must be a string literal (kept by pointer). */
static inline void fake_fail_next(fake_counters *c, const char *fn, int rc) {
  pthread_mutex_lock(&c->lock);
  c->fail_fn = fn;
  c->fail_rc = rc;
  pthread_mutex_unlock(&c->lock);
}

#endif
