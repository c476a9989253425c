/* The watch (watch.h). */
#include "preload/watch.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "common/log.h"
#include "preload/comm.h"
#include "preload/engine.h"

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_wake = PTHREAD_COND_INITIALIZER;
static pthread_t watch_thread;
static bool running;
static uint64_t interval;
/* Each thread runs while the generation it was started with is current: a stop ends the thread
 * it joins even if a start on another thread comes between the stop's unlock and its join. */
static uint64_t generation;

typedef struct held {
  symmpin_comm **v;
  size_t n, cap;
} held;

/* Under the registry's lock: take a reference on every live entry (checked after the lock). */
static void hold_one(symmpin_comm *c, void *arg) {
  held *h = arg;
  if (h->n == h->cap) {
    size_t cap = h->cap ? 2 * h->cap : 16;
    symmpin_comm **v = realloc(h->v, cap * sizeof *v);
    if (!v) return; /* this round checks fewer; the next one tries again */
    h->v = v;
    h->cap = cap;
  }
  symmpin_comm *ref = symmpin_comm_acquire(c->handle);
  if (ref) h->v[h->n++] = ref;
}

static void check_all(held *h) {
  h->n = 0;
  symmpin_comm_for_each(hold_one, h);
  for (size_t i = 0; i < h->n; i++) {
    symmpin_comm *c = h->v[i];
    /* Also once in error: a kernel that gave up still has to raise the alarm for its peers
     * (reported once), which nothing else does if this rank makes no more all-reduces. */
    if (!atomic_load(&c->ended) && symmpin_comm_trylock(c)) {
      if (!atomic_load(&c->ended)) symmpin_engine_comm_poll(c);
      symmpin_comm_unlock(c);
    }
    symmpin_comm_put(c);
  }
  /* Pools of ended communicators whose kernels were still running at the end (never waits): also
   * when no communicator is left, so the last one's pool does not stay until exit. */
  symmpin_engine_drain();
}

static void *watch_main(void *arg) {
  const uint64_t mine = (uint64_t)(uintptr_t)arg;
  held h = {0};
  pthread_mutex_lock(&watch_lock);
  while (generation == mine) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += (time_t)(interval / 1000);
    t.tv_nsec += (long)(interval % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
      t.tv_sec++;
      t.tv_nsec -= 1000000000L;
    }
    int rc = 0;
    while (generation == mine && rc != ETIMEDOUT)
      rc = pthread_cond_timedwait(&watch_wake, &watch_lock, &t);
    if (generation != mine) break;
    pthread_mutex_unlock(&watch_lock);
    check_all(&h);
    pthread_mutex_lock(&watch_lock);
  }
  pthread_mutex_unlock(&watch_lock);
  free(h.v);
  return NULL;
}

void symmpin_watch_start(uint64_t interval_ms) {
  if (interval_ms == 0) return;
  pthread_mutex_lock(&watch_lock);
  if (!running) {
    interval = interval_ms;
    /* No signal is ever delivered to this thread: a handler that exits the program must not run
     * here while it holds a communicator's lock. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    running = pthread_create(&watch_thread, NULL, watch_main,
                             (void *)(uintptr_t)++generation) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!running)
      SYMMPIN_WARN("cannot start the watch thread: a divergent call is then caught only at the "
                   "next collective call or ncclCommGetAsyncError");
  }
  pthread_mutex_unlock(&watch_lock);
}

/* The thread to join, if one runs; it is told to stop. */
static bool stop_signal(pthread_t *t) {
  pthread_mutex_lock(&watch_lock);
  bool join = running;
  *t = watch_thread;
  running = false;
  generation++;
  pthread_cond_broadcast(&watch_wake);
  pthread_mutex_unlock(&watch_lock);
  return join;
}

void symmpin_watch_stop(void) {
  pthread_t t;
  if (stop_signal(&t)) pthread_join(t, NULL);
}

void symmpin_watch_stop_by(const struct timespec *deadline) {
  pthread_t t;
  if (!stop_signal(&t)) return;
  /* pthread_timedjoin_np takes CLOCK_REALTIME: the deadline is carried over. */
  struct timespec mono, real, at;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  long long left_ns = (long long)(deadline->tv_sec - mono.tv_sec) * 1000000000LL +
                      (deadline->tv_nsec - mono.tv_nsec);
  if (left_ns < 0) left_ns = 0;
  long long ns = (long long)real.tv_nsec + left_ns;
  at.tv_sec = real.tv_sec + (time_t)(ns / 1000000000LL);
  at.tv_nsec = (long)(ns % 1000000000LL);
  if (pthread_timedjoin_np(t, NULL, &at) != 0) pthread_detach(t);
}
