/* Error records' reuse (errrec.h): one free list under one lock. */
#include "preload/errrec.h"

#include <pthread.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static symmpin_errrec *free_list;
static int nfree;

void symmpin_errrec_put(symmpin_errrec *r) {
  if (!r || atomic_fetch_sub(&r->refs, 1) != 1) return;
  pthread_mutex_lock(&lock);
  r->next_free = free_list;
  free_list = r;
  nfree++;
  pthread_mutex_unlock(&lock);
}

symmpin_errrec *symmpin_errrec_reuse(void) {
  pthread_mutex_lock(&lock);
  symmpin_errrec *r = free_list;
  if (r) {
    free_list = r->next_free;
    nfree--;
  }
  pthread_mutex_unlock(&lock);
  if (!r) return NULL;
  memset((void *)r->host, 0, sizeof *r->host);
  r->next_free = NULL;
  atomic_store(&r->refs, 2);
  return r;
}

int symmpin_errrec_free_count(void) {
  pthread_mutex_lock(&lock);
  int n = nfree;
  pthread_mutex_unlock(&lock);
  return n;
}
