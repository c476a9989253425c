/* FAKE for CPU tests: see engine_fakes.h. */
#include "engine_fakes.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/allreduce.h"
#include "preload/banner.h"
#include "preload/host.h"
#include "symmem/pool.h"

/* ---- the log ---- */

static __thread fake_op ops[FAKE_MAX_OPS];
static __thread size_t nops;
static __thread int current_device;
static __thread bool fail_launch;
/* The thread's last error, kept as the runtime keeps it: a failed call sets it, cudaGetLastError
 * returns and clears it, cudaPeekAtLastError only returns it. */
static __thread cudaError_t last_error;

static cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

static void log_op(fake_op op) {
  if (nops < FAKE_MAX_OPS) ops[nops++] = op;
}

const fake_op *fake_ops(size_t *n) {
  *n = nops;
  return ops;
}
void fake_ops_clear(void) { nops = 0; }
void fake_fail_next_launch(void) { fail_launch = true; }
void fake_set_last_error(int err) { last_error = (cudaError_t)err; }
int fake_last_error(void) { return (int)last_error; }

/* ---- the CUDA runtime functions engine.c uses ---- */

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_error; }
const char *cudaGetErrorName(cudaError_t e) {
  return e == cudaSuccess ? "cudaSuccess" : "cudaErrorFake";
}
cudaError_t cudaGetDevice(int *d) {
  *d = current_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
  current_device = d;
  return cudaSuccess;
}
cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
  (void)mode;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *ev) {
  *ev = (cudaEvent_t)calloc(1, 16);
  return *ev ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags) {
  (void)flags;
  return cudaEventCreate(ev);
}
cudaError_t cudaEventDestroy(cudaEvent_t ev) {
  free(ev);
  return cudaSuccess;
}
/* Kernel launches made on this thread (all, and group launches), and what the elapsed times are
 * (fake_set_elapsed). An event's 16 bytes hold the two launch counts at its record. */
static _Thread_local uint64_t launches_here, group_launches_here;
static _Thread_local float elapsed_kernel = 0.001f, elapsed_other = 0.001f, elapsed_group;

void fake_set_elapsed(float kernel_ms, float other_ms) {
  elapsed_kernel = kernel_ms;
  elapsed_other = other_ms;
}
void fake_set_elapsed_group(float group_ms) { elapsed_group = group_ms; }

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s) {
  memcpy((void *)ev, &launches_here, sizeof launches_here);
  memcpy((char *)ev + 8, &group_launches_here, sizeof group_launches_here);
  log_op((fake_op){.kind = FAKE_RECORD, .stream = s, .event = ev, .offset = -1});
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned flags) {
  (void)flags;
  log_op((fake_op){.kind = FAKE_WAIT, .stream = s, .event = ev, .offset = -1});
  return cudaSuccess;
}
/* No driver entry points: device scopes (symmem/devscope.c) switch with cudaSetDevice alone. */
cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status) {
  (void)symbol, (void)version, (void)flags;
  *fn = NULL;
  *status = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

static _Atomic int events_pending;
void fake_set_events_pending(int pending) { atomic_store(&events_pending, pending); }

cudaError_t cudaEventQuery(cudaEvent_t ev) {
  (void)ev;
  /* Nothing runs: everything has completed, unless a test says the kernels are still running. */
  return atomic_load(&events_pending) ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t ev) {
  (void)ev;
  return cudaSuccess;
}

/* Captures: every stream a call is captured on is capturing its own graph (named by the stream);
 * user objects retained by graphs run their destructors at fake_destroy_graphs. */
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *status,
                                     unsigned long long *id, cudaGraph_t *graph,
                                     const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                     size_t *ndeps) {
  *status = cudaStreamCaptureStatusActive;
  if (id) *id = (unsigned long long)(uintptr_t)stream;
  if (graph) *graph = (cudaGraph_t)stream;
  if (deps) *deps = NULL;
  if (edges) *edges = NULL;
  if (ndeps) *ndeps = 0;
  return cudaSuccess;
}

typedef struct fake_user_object {
  void *ptr;
  cudaHostFn_t destroy;
  int refs;
} fake_user_object;
#define FAKE_MAX_USER_OBJECTS 256
static fake_user_object user_objects[FAKE_MAX_USER_OBJECTS];
static int nuser_objects, graph_refs;
static pthread_mutex_t user_objects_lock = PTHREAD_MUTEX_INITIALIZER;

cudaError_t cudaUserObjectCreate(cudaUserObject_t *obj, void *ptr, cudaHostFn_t destroy,
                                 unsigned int refs, unsigned int flags) {
  (void)flags;
  pthread_mutex_lock(&user_objects_lock);
  cudaError_t e = cudaErrorMemoryAllocation;
  if (nuser_objects < FAKE_MAX_USER_OBJECTS) {
    user_objects[nuser_objects] = (fake_user_object){ptr, destroy, (int)refs};
    *obj = (cudaUserObject_t)&user_objects[nuser_objects++];
    e = cudaSuccess;
  }
  pthread_mutex_unlock(&user_objects_lock);
  return e == cudaSuccess ? e : fail(e);
}

static void user_object_drop(fake_user_object *o, int n) {
  o->refs -= n;
  if (o->refs == 0) o->destroy(o->ptr);
}

cudaError_t cudaUserObjectRelease(cudaUserObject_t obj, unsigned int n) {
  pthread_mutex_lock(&user_objects_lock);
  user_object_drop((fake_user_object *)obj, (int)n);
  pthread_mutex_unlock(&user_objects_lock);
  return cudaSuccess;
}

cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t obj, unsigned int n,
                                      unsigned int flags) {
  (void)graph, (void)obj;
  if (!(flags & cudaGraphUserObjectMove))
    return fail(cudaErrorInvalidValue); /* the engine moves its */
  pthread_mutex_lock(&user_objects_lock);
  graph_refs += (int)n;
  pthread_mutex_unlock(&user_objects_lock);
  return cudaSuccess;
}

int fake_destroy_graphs(void) {
  pthread_mutex_lock(&user_objects_lock);
  int n = graph_refs;
  for (int i = 0; i < nuser_objects; i++)
    if (user_objects[i].refs > 0) user_object_drop(&user_objects[i], user_objects[i].refs);
  graph_refs = 0;
  pthread_mutex_unlock(&user_objects_lock);
  return n;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
  uint64_t at_a, at_b, groups_a, groups_b;
  memcpy(&at_a, (const void *)a, sizeof at_a);
  memcpy(&at_b, (const void *)b, sizeof at_b);
  memcpy(&groups_a, (const char *)a + 8, sizeof groups_a);
  memcpy(&groups_b, (const char *)b + 8, sizeof groups_b);
  *ms = groups_b > groups_a && elapsed_group > 0 ? elapsed_group
        : at_b > at_a                            ? elapsed_kernel
                                                 : elapsed_other;
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags) {
  (void)flags;
  *p = calloc(1, bytes);
  return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned flags) {
  (void)flags;
  *dev = host;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p) {
  free(p);
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr attr, int device) {
  (void)attr;
  (void)device;
  *v = 2000000;
  return cudaSuccess;
}

/* ---- symmem's pool: one host region per rank ---- */

/* Each rank's own region, for the launch log's offsets (any thread of the rank's process may
 * launch: a rank's calls may come from several threads). */
static unsigned char *_Atomic rank_base[SYMMPIN_KERNEL_MAX_RANKS];

#define FAKE_POOL_CAPACITY ((size_t)64 << 20)

static _Atomic int pools_live;
int fake_pools_live(void) { return atomic_load(&pools_live); }

struct symmpin_pool {
  int rank, nranks, device;
  unsigned char *base[SYMMPIN_KERNEL_MAX_RANKS]; /* [rank] is this rank's own region */
  size_t size, before;  /* the size (provisional between attach and settle), and the one before */
  bool pending;
};

typedef struct fake_export {
  unsigned char *base;
  uint64_t bytes;
} fake_export;


symmpin_status symmpin_pool_create(int rank, int nranks, int device, symmpin_pool **out) {
  symmpin_pool *p = calloc(1, sizeof *p);
  if (!p) return SYMMPIN_ERR_NOMEM;
  *p = (symmpin_pool){.rank = rank, .nranks = nranks, .device = device};
  atomic_fetch_add(&pools_live, 1);
  *out = p;
  return SYMMPIN_OK;
}

void symmpin_pool_destroy(symmpin_pool *p) {
  if (!p) return;
  atomic_fetch_sub(&pools_live, 1);
  free(p->base[p->rank]);
  free(p);
}


symmpin_status symmpin_pool_reserve(symmpin_pool *p, size_t bytes, void *export_rec) {
  if (bytes > FAKE_POOL_CAPACITY) return SYMMPIN_ERR_UNSUPPORTED;
  if (!p->base[p->rank] && !(p->base[p->rank] = calloc(1, FAKE_POOL_CAPACITY)))
    return SYMMPIN_ERR_NOMEM;
  atomic_store(&rank_base[p->rank], p->base[p->rank]);
  fake_export x = {.base = p->base[p->rank], .bytes = bytes};
  memset(export_rec, 0, SYMMPIN_POOL_EXPORT_BYTES);
  memcpy(export_rec, &x, sizeof x);
  return SYMMPIN_OK;
}

symmpin_status symmpin_pool_attach(symmpin_pool *p, const void *const records[]) {
  fake_export mine;
  memcpy(&mine, records[p->rank] ? records[p->rank] : &(fake_export){p->base[p->rank], 0},
         sizeof mine);
  for (int r = 0; r < p->nranks; r++) {
    if (r == p->rank) continue;
    fake_export x;
    memcpy(&x, records[r], sizeof x);
    if (x.bytes != mine.bytes) return SYMMPIN_ERR_DISAGREE;
    p->base[r] = x.base;
  }
  /* As the real pool: the new size holds from attach on, provisionally, until settle. */
  p->before = p->size;
  p->pending = true;
  if (mine.bytes > p->size) p->size = mine.bytes;
  return SYMMPIN_OK;
}

void symmpin_pool_settle(symmpin_pool *p, bool agreed) {
  if (p->pending && !agreed) p->size = p->before;
  p->pending = false;
}

size_t symmpin_pool_size(const symmpin_pool *p) { return p->size; }

void *symmpin_pool_addr(const symmpin_pool *p, int r, size_t offset) {
  if (r < 0 || r >= p->nranks || !p->base[r] || offset >= p->size) return NULL;
  return p->base[r] + offset;
}

bool symmpin_pool_fits(const symmpin_pool *p, size_t offset, size_t bytes) {
  return offset + bytes <= p->size;
}

symmpin_status symmpin_pool_device_check(int device, char *why, size_t why_len) {
  (void)device, (void)why, (void)why_len;
  return SYMMPIN_OK;
}

symmpin_status symmpin_pool_facts_get(int device, symmpin_pool_facts *out) {
  memset(out, 0, sizeof *out);
  out->pid = (int32_t)getpid();
  out->device = device;
  out->uuid[0] = (uint8_t)(device + 1);
  return SYMMPIN_OK;
}

symmpin_status symmpin_pool_check_peers(const symmpin_pool_facts *facts, int nranks, char *why,
                                        size_t why_len) {
  (void)facts;
  (void)nranks;
  (void)why;
  (void)why_len;
  return SYMMPIN_OK;
}

/* ---- the kernels' launch ---- */

symmpin_status symmpin_kernel_device_check(char *why, size_t why_len) {
  (void)why;
  (void)why_len;
  return SYMMPIN_OK;
}

symmpin_status symmpin_kernel_launch(const symmpin_kernel_call *call, void *stream) {
  if (fail_launch) { /* as cudaLaunchKernelEx: its error stays on the thread */
    fail_launch = false;
    fail(cudaErrorLaunchFailure);
    return SYMMPIN_ERR_CUDA;
  }
  const unsigned char *slot = call->slot[call->rank];
  const unsigned char *my_base = atomic_load(&rank_base[call->rank]);
  if (!my_base || slot < my_base || slot >= my_base + FAKE_POOL_CAPACITY) return SYMMPIN_ERR_INVALID;
  log_op((fake_op){.kind = FAKE_LAUNCH, .stream = stream, .offset = (int64_t)(slot - my_base),
                   .count = call->count});
  launches_here++;
  return SYMMPIN_OK;
}

symmpin_status symmpin_kernel_launch_group(const symmpin_kernel_call *calls, int n, void *stream) {
  if (fail_launch) { /* as cudaLaunchKernelEx: its error stays on the thread */
    fail_launch = false;
    fail(cudaErrorLaunchFailure);
    return SYMMPIN_ERR_CUDA;
  }
  const unsigned char *my_base = atomic_load(&rank_base[calls[0].rank]);
  for (int i = 0; i < n; i++) {
    const unsigned char *slot = calls[i].slot[calls[i].rank];
    if (!my_base || slot < my_base || slot >= my_base + FAKE_POOL_CAPACITY) return SYMMPIN_ERR_INVALID;
  }
  log_op((fake_op){.kind = FAKE_GROUP, .stream = stream,
                   .offset = (int64_t)((const unsigned char *)calls[0].slot[calls[0].rank] - my_base),
                   .count = (size_t)n});
  launches_here++;
  group_launches_here++;
  return SYMMPIN_OK;
}

/* ---- the host table and the banner probe, installed before main ---- */

static int host_device(void) { return current_device; }
static int host_capturing(void *stream, unsigned long long *capture_id) {
  (void)stream;
  (void)capture_id;
  return 0; /* a call's own capture comes in symmpin_engine_call.capturing */
}

static void probe_versions(symmpin_banner_facts *f) {
  f->nccl_version = 22809; /* 2.28.9: the version symmpin was tested with */
  f->nccl_built = 22809;
  f->cudart_version = 13000; /* a driver that runs symmpin's own CUDA 13.0 runtime */
  f->driver_version = 13000;
  f->cudart_error = 0;
}

__attribute__((constructor)) static void fakes_install(void) {
  symmpin_host h = {.device = host_device, .capturing = host_capturing};
  symmpin_host_install(&h);
  symmpin_banner_probe b = {.versions = probe_versions};
  symmpin_banner_install(&b);
}
