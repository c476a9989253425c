/* The host table (host.h). Installed once at load, read on every call: a plain copy published
 * with release/acquire through a flag. */
#include "preload/host.h"

#include <stdatomic.h>

static symmpin_host table;
static _Atomic int installed;

void symmpin_host_install(const symmpin_host *h) {
  table = *h;
  atomic_store_explicit(&installed, 1, memory_order_release);
}

static const symmpin_host *get(void) {
  return atomic_load_explicit(&installed, memory_order_acquire) ? &table : NULL;
}

int symmpin_host_device(void) {
  const symmpin_host *h = get();
  return h && h->device ? h->device() : -1;
}

int symmpin_host_capture_id(void *stream, unsigned long long *capture_id) {
  const symmpin_host *h = get();
  unsigned long long id = 0;
  int r = h && h->capturing ? h->capturing(stream, &id) : -1;
  if (capture_id) *capture_id = r == 1 ? id : 0;
  return r;
}

int symmpin_host_capturing(void *stream) { return symmpin_host_capture_id(stream, NULL); }

int symmpin_host_comm_rank(void *comm, int *rank, int *nranks) {
  const symmpin_host *h = get();
  return h && h->comm_rank ? h->comm_rank(comm, rank, nranks) : 2 /* ncclSystemError */;
}

const symmpin_host *symmpin_host_table(void) {
  static const symmpin_host none;
  const symmpin_host *h = get();
  return h ? h : &none;
}
