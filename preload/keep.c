/* Keeps (keep.h): a communicator's pool and error record, freed when its kernels and graphs are
 * done. One process-wide list of retired keeps under a lock that no CUDA call is made under (CUDA's
 * user-object destructors only touch an atomic). */
#include "preload/keep.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "driver/check.h"
#include "symmem/devscope.h"

struct symmpin_keep {
  symmpin_pool *pool;
  int device;
  symmpin_errrec *err;
  _Atomic int graphs; /* graphs holding the keep (one user-object reference each) */
  bool graph_refused_logged;
  CUevent *events; /* taken over at retire */
  int nevents;
  symmpin_keep *next; /* on the retired list */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static symmpin_keep *retired; /* under lock */
static int nretired;          /* under lock */
static pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- error records ---- */

/* A record with two references: reused, or new (host memory mapped into the device's address
 * space; portable, since a record is reused by communicators on any device). */
static symmpin_errrec *errrec_get(void) {
  symmpin_errrec *r = symmpin_errrec_reuse();
  if (r) return r;
  r = calloc(1, sizeof *r);
  if (!r) return NULL;
  void *host = NULL;
  CUdeviceptr dev = 0;
  if (SYMMPIN_CUDA_CHECK(symmpin_cu.MemHostAlloc(&host, sizeof(symmpin_kernel_error),
                                                 CU_MEMHOSTALLOC_DEVICEMAP |
                                                     CU_MEMHOSTALLOC_PORTABLE)) != CUDA_SUCCESS ||
      SYMMPIN_CUDA_CHECK(symmpin_cu.MemHostGetDevicePointer(&dev, host, 0)) != CUDA_SUCCESS) {
    if (host)
      (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.MemFreeHost(host)); /* a record no kernel has seen */
    free(r);
    return NULL;
  }
  r->host = host;
  r->dev = (void *)(uintptr_t)dev;
  memset((void *)r->host, 0, sizeof *r->host);
  atomic_store(&r->refs, 2);
  return r;
}

/* ---- keeps ---- */

symmpin_keep *symmpin_keep_new(symmpin_pool *pool, int device, symmpin_errrec **err) {
  symmpin_keep *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->err = errrec_get();
  if (!k->err) {
    free(k);
    return NULL;
  }
  k->pool = pool;
  k->device = device;
  *err = k->err;
  return k;
}

/* A CUDA user object's destructor: runs on a CUDA thread once a graph holding the keep is gone
 * and its launches are done. It must make no CUDA call; the next drain frees. */
static void graph_gone(void *p) { atomic_fetch_sub(&((symmpin_keep *)p)->graphs, 1); }

bool symmpin_keep_hold_for_graph(symmpin_keep *k, void *stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUgraph graph = NULL;
  CUuserObject obj = NULL;
  bool ok = SYMMPIN_CUDA_CHECK(symmpin_cu.StreamGetCaptureInfo(
                (CUstream)stream, &status, NULL, &graph, NULL, NULL)) == CUDA_SUCCESS &&
            status == CU_STREAM_CAPTURE_STATUS_ACTIVE && graph;
  if (ok) {
    atomic_fetch_add(&k->graphs, 1);
    if (SYMMPIN_CUDA_CHECK(symmpin_cu.UserObjectCreate(
            &obj, k, graph_gone, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)) != CUDA_SUCCESS) {
      atomic_fetch_sub(&k->graphs, 1);
      ok = false;
    } else if (SYMMPIN_CUDA_CHECK(symmpin_cu.GraphRetainUserObject(
                   graph, obj, 1, CU_GRAPH_USER_OBJECT_MOVE)) != CUDA_SUCCESS) {
      /* its destructor gives the reference back */
      (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.UserObjectRelease(obj, 1));
      ok = false;
    }
  }
  if (!ok) {
    if (!k->graph_refused_logged)
      SYMMPIN_WARN("a CUDA graph being captured cannot hold symmpin's pool (a CUDA user object): "
                   "the captured collective fails (its peers run symmpin's kernel for it)");
    k->graph_refused_logged = true;
  }
  return ok;
}

/* Whether everything the keep's kernels do is done. No wait: event queries only. */
static bool keep_done(const symmpin_keep *k) {
  if (atomic_load(&k->graphs) != 0) return false;
  for (int i = 0; i < k->nevents; i++) {
    /* Another failure than "not ready": a broken context, where nothing runs any more. */
    if (SYMMPIN_CUDA_QUERY(symmpin_cu.EventQuery(k->events[i])) == CUDA_ERROR_NOT_READY)
      return false;
  }
  return true;
}

static void keep_free(symmpin_keep *k) {
  for (int i = 0; i < k->nevents; i++)
    (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.EventDestroy(k->events[i]));
  free(k->events);
  symmpin_pool_destroy(k->pool);
  symmpin_errrec_put(k->err);
  free(k);
}

void symmpin_keep_retire(symmpin_keep *k, void *const *events, int n) {
  if (!k) return;
  if (n > 0) {
    k->events = malloc((size_t)n * sizeof *k->events);
    if (k->events) {
      memcpy(k->events, events, (size_t)n * sizeof *k->events);
      k->nevents = n;
    } else {
      /* No memory to remember the events: wait for them here rather than free under kernels. */
      for (int i = 0; i < n; i++) {
        (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.EventSynchronize((CUevent)events[i]));
        (void)SYMMPIN_CUDA_IGNORE(symmpin_cu.EventDestroy((CUevent)events[i]));
      }
    }
  }
  pthread_mutex_lock(&lock);
  k->next = retired;
  retired = k;
  nretired++;
  pthread_mutex_unlock(&lock);
  symmpin_keep_drain();
}

/* Done and freed: true. Runs on the keep's device (the thread left as it was: devscope.h), so a
 * drain on a thread without a device (the watch thread) creates no context anywhere else. */
static bool keep_try_free(symmpin_keep *k) {
  symmpin_devscope s;
  bool gone = false;
  bool entered = symmpin_devscope_enter(k->device, &s, &gone) == SYMMPIN_OK;
  /* At exit nothing runs any more; otherwise the events decide (they need no current device). */
  bool done = gone || keep_done(k);
  if (done) keep_free(k);
  if (entered)
    symmpin_devscope_leave(&s);
  else
    symmpin_devscope_abandon(&s);
  return done;
}

void symmpin_keep_drain(void) {
  if (pthread_mutex_trylock(&drain_lock) != 0) return;
  /* Keeps are only added at the head while this runs, and only the drain unlinks (it is single):
   * walk what is there, unlinking under the lock, checking and freeing outside it. */
  pthread_mutex_lock(&lock);
  symmpin_keep **link = &retired;
  while (*link) {
    symmpin_keep *k = *link;
    *link = k->next; /* out of the list while it is looked at */
    nretired--;
    pthread_mutex_unlock(&lock);
    bool freed = keep_try_free(k);
    pthread_mutex_lock(&lock);
    if (!freed) { /* back where it was (a retire may have pushed at the head meanwhile) */
      k->next = *link;
      *link = k;
      nretired++;
      link = &k->next;
    }
  }
  pthread_mutex_unlock(&lock);
  pthread_mutex_unlock(&drain_lock);
}

int symmpin_keep_pending(void) {
  pthread_mutex_lock(&lock);
  int n = nretired;
  pthread_mutex_unlock(&lock);
  return n;
}
