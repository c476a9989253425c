/* FAKE for CPU tests: see engine_fakes.h. This file defines the driver table symmpin_cu and
 * symmpin_cu_open/usable/error_name itself: the tests link neither libcuda nor driver/cu.c. */
#include "engine_fakes.h"

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/cu.h"
#include "kernels/allreduce.h"
#include "preload/banner.h"
#include "preload/host.h"
#include "symmem/pool.h"

/* ---- the log ---- */

static __thread fake_op ops[FAKE_MAX_OPS];
static __thread size_t nops;
static __thread bool fail_launch;

static void log_op(fake_op op) {
  if (nops < FAKE_MAX_OPS) ops[nops++] = op;
}

const fake_op *fake_ops(size_t *n) {
  *n = nops;
  return ops;
}
void fake_ops_clear(void) { nops = 0; }
void fake_fail_next_launch(void) { fail_launch = true; }

/* ---- contexts and the capture mode: the thread's state, as the driver keeps it ---- */

typedef struct fake_ctx {
  int device;
  bool primary;
} fake_ctx;
static fake_ctx primaries[FAKE_DEVICES], owns[FAKE_DEVICES];
static _Atomic int primary_retains[FAKE_DEVICES];
static _Atomic int host_allocs_outside_primary;
static __thread fake_ctx *cur_ctx; /* a thread starts without a context */
static __thread CUstreamCaptureMode cur_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

void *fake_ctx_primary(int device) { return &primaries[device]; }
void *fake_ctx_own(int device) { return &owns[device]; }
void fake_ctx_set(void *ctx) { cur_ctx = ctx; }
void *fake_ctx_get(void) { return cur_ctx; }
void fake_set_capture_mode(int mode) { cur_mode = (CUstreamCaptureMode)mode; }
int fake_capture_mode(void) { return (int)cur_mode; }
int fake_primary_retains(int device) { return atomic_load(&primary_retains[device]); }
int fake_host_allocs_outside_primary(void) { return atomic_load(&host_allocs_outside_primary); }

/* An op logged with the context it was enqueued in. */
static fake_op op_here(fake_op op) {
  op.device = cur_ctx ? cur_ctx->device : -1;
  op.primary = cur_ctx && cur_ctx->primary;
  return op;
}

/* ---- the driver functions engine.c, keep.c, timing.c and devscope.c use (FAKE) ---- */

static CUresult fake_cuGetErrorName(CUresult e, const char **name) {
  switch (e) {
  case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; return CUDA_SUCCESS;
  case CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; return CUDA_SUCCESS;
  case CUDA_ERROR_NOT_READY: *name = "CUDA_ERROR_NOT_READY"; return CUDA_SUCCESS;
  default: *name = NULL; return CUDA_ERROR_INVALID_VALUE;
  }
}

static CUresult fake_cuDeviceGet(CUdevice *dev, int ordinal) {
  if (ordinal < 0 || ordinal >= FAKE_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}
static CUresult fake_cuDeviceGetAttribute(int *v, CUdevice_attribute attr, CUdevice dev) {
  (void)attr;
  if (dev < 0 || dev >= FAKE_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
  *v = 2000000; /* kHz: the only attribute asked (the clock rate) */
  return CUDA_SUCCESS;
}
static CUresult fake_cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  if (dev < 0 || dev >= FAKE_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
  atomic_fetch_add(&primary_retains[dev], 1);
  *ctx = (CUcontext)(void *)&primaries[dev];
  return CUDA_SUCCESS;
}
static CUresult fake_cuCtxGetCurrent(CUcontext *ctx) {
  *ctx = (CUcontext)(void *)cur_ctx;
  return CUDA_SUCCESS;
}
static CUresult fake_cuCtxSetCurrent(CUcontext ctx) {
  cur_ctx = (fake_ctx *)(void *)ctx;
  return CUDA_SUCCESS;
}
static CUresult fake_cuCtxGetDevice(CUdevice *dev) {
  if (!cur_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = cur_ctx->device;
  return CUDA_SUCCESS;
}
static CUresult fake_cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  CUstreamCaptureMode old = cur_mode;
  cur_mode = *mode;
  *mode = old;
  return CUDA_SUCCESS;
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

static CUresult fake_cuEventCreate(CUevent *ev, unsigned flags) {
  (void)flags;
  if (!cur_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *ev = (CUevent)calloc(1, 16);
  return *ev ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult fake_cuEventDestroy(CUevent ev) {
  free(ev);
  return CUDA_SUCCESS;
}
static CUresult fake_cuEventRecord(CUevent ev, CUstream s) {
  if (!cur_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  memcpy((void *)ev, &launches_here, sizeof launches_here);
  memcpy((char *)ev + 8, &group_launches_here, sizeof group_launches_here);
  log_op(op_here((fake_op){.kind = FAKE_RECORD, .stream = s, .event = ev, .offset = -1}));
  return CUDA_SUCCESS;
}
static CUresult fake_cuStreamWaitEvent(CUstream s, CUevent ev, unsigned flags) {
  (void)flags;
  if (!cur_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  log_op(op_here((fake_op){.kind = FAKE_WAIT, .stream = s, .event = ev, .offset = -1}));
  return CUDA_SUCCESS;
}

static _Atomic int events_pending;
void fake_set_events_pending(int pending) { atomic_store(&events_pending, pending); }

static CUresult fake_cuEventQuery(CUevent ev) {
  (void)ev;
  /* Nothing runs: everything has completed, unless a test says the kernels are still running. */
  return atomic_load(&events_pending) ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}
static CUresult fake_cuEventSynchronize(CUevent ev) {
  (void)ev;
  return CUDA_SUCCESS;
}
static CUresult fake_cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  uint64_t at_a, at_b, groups_a, groups_b;
  memcpy(&at_a, (const void *)a, sizeof at_a);
  memcpy(&at_b, (const void *)b, sizeof at_b);
  memcpy(&groups_a, (const char *)a + 8, sizeof groups_a);
  memcpy(&groups_b, (const char *)b + 8, sizeof groups_b);
  *ms = groups_b > groups_a && elapsed_group > 0 ? elapsed_group
        : at_b > at_a                            ? elapsed_kernel
                                                 : elapsed_other;
  return CUDA_SUCCESS;
}

/* Captures: every stream a call is captured on is capturing its own graph (named by the stream);
 * user objects retained by graphs run their destructors at fake_destroy_graphs. The CUDA 11.3
 * form (driver/cu.h asks for it): no edge data. */
static CUresult fake_cuStreamGetCaptureInfo(CUstream stream, CUstreamCaptureStatus *status,
                                            cuuint64_t *id, CUgraph *graph,
                                            const CUgraphNode **deps, size_t *ndeps) {
  *status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (id) *id = (cuuint64_t)(uintptr_t)stream;
  if (graph) *graph = (CUgraph)stream;
  if (deps) *deps = NULL;
  if (ndeps) *ndeps = 0;
  return CUDA_SUCCESS;
}

typedef struct fake_user_object {
  void *ptr;
  CUhostFn destroy;
  int refs;
} fake_user_object;
#define FAKE_MAX_USER_OBJECTS 256
static fake_user_object user_objects[FAKE_MAX_USER_OBJECTS];
static int nuser_objects, graph_refs;
static pthread_mutex_t user_objects_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult fake_cuUserObjectCreate(CUuserObject *obj, void *ptr, CUhostFn destroy,
                                        unsigned int refs, unsigned int flags) {
  (void)flags;
  pthread_mutex_lock(&user_objects_lock);
  CUresult e = CUDA_ERROR_OUT_OF_MEMORY;
  if (nuser_objects < FAKE_MAX_USER_OBJECTS) {
    user_objects[nuser_objects] = (fake_user_object){ptr, destroy, (int)refs};
    *obj = (CUuserObject)(void *)&user_objects[nuser_objects++];
    e = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&user_objects_lock);
  return e;
}

static void user_object_drop(fake_user_object *o, int n) {
  o->refs -= n;
  if (o->refs == 0) o->destroy(o->ptr);
}

static CUresult fake_cuUserObjectRelease(CUuserObject obj, unsigned int n) {
  pthread_mutex_lock(&user_objects_lock);
  user_object_drop((fake_user_object *)(void *)obj, (int)n);
  pthread_mutex_unlock(&user_objects_lock);
  return CUDA_SUCCESS;
}

static CUresult fake_cuGraphRetainUserObject(CUgraph graph, CUuserObject obj, unsigned int n,
                                             unsigned int flags) {
  (void)graph, (void)obj;
  if (!(flags & CU_GRAPH_USER_OBJECT_MOVE))
    return CUDA_ERROR_INVALID_VALUE; /* the engine moves its */
  pthread_mutex_lock(&user_objects_lock);
  graph_refs += (int)n;
  pthread_mutex_unlock(&user_objects_lock);
  return CUDA_SUCCESS;
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

static CUresult fake_cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
  (void)flags;
  if (!cur_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (!cur_ctx->primary) atomic_fetch_add(&host_allocs_outside_primary, 1);
  *p = calloc(1, bytes);
  return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult fake_cuMemHostGetDevicePointer(CUdeviceptr *dev, void *host, unsigned flags) {
  (void)flags;
  if (!cur_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = (CUdeviceptr)(uintptr_t)host;
  return CUDA_SUCCESS;
}
static CUresult fake_cuMemFreeHost(void *p) {
  free(p);
  return CUDA_SUCCESS;
}

/* The table (driver/cu.h). Entries the code under test never calls stay NULL: the engine's pool
 * and the kernels' launch are faked whole below, so a call through one of them is a crash that
 * names a new dependency. */
symmpin_cu_table symmpin_cu = {
    .GetErrorName = fake_cuGetErrorName,
    .DeviceGet = fake_cuDeviceGet,
    .DeviceGetAttribute = fake_cuDeviceGetAttribute,
    .DevicePrimaryCtxRetain = fake_cuDevicePrimaryCtxRetain,
    .CtxGetCurrent = fake_cuCtxGetCurrent,
    .CtxSetCurrent = fake_cuCtxSetCurrent,
    .CtxGetDevice = fake_cuCtxGetDevice,
    .StreamGetCaptureInfo = fake_cuStreamGetCaptureInfo,
    .ThreadExchangeStreamCaptureMode = fake_cuThreadExchangeStreamCaptureMode,
    .StreamWaitEvent = fake_cuStreamWaitEvent,
    .EventCreate = fake_cuEventCreate,
    .EventDestroy = fake_cuEventDestroy,
    .EventRecord = fake_cuEventRecord,
    .EventQuery = fake_cuEventQuery,
    .EventSynchronize = fake_cuEventSynchronize,
    .EventElapsedTime = fake_cuEventElapsedTime,
    .MemHostAlloc = fake_cuMemHostAlloc,
    .MemFreeHost = fake_cuMemFreeHost,
    .MemHostGetDevicePointer = fake_cuMemHostGetDevicePointer,
    .UserObjectCreate = fake_cuUserObjectCreate,
    .UserObjectRelease = fake_cuUserObjectRelease,
    .GraphRetainUserObject = fake_cuGraphRetainUserObject,
};

/* FAKE driver/cu.c: a driver for CUDA 13.0 that every entry point resolved from. */
static const symmpin_cu_state fake_state = {.usable = true, .driver_version = 13000};
const symmpin_cu_state *symmpin_cu_open(void) { return &fake_state; }
bool symmpin_cu_usable(void) { return true; }
const char *symmpin_cu_error_name(CUresult e) {
  static __thread char buf[32];
  const char *name = NULL;
  if (symmpin_cu.GetErrorName(e, &name) == CUDA_SUCCESS && name) return name;
  snprintf(buf, sizeof buf, "CUDA error %d", (int)e);
  return buf;
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

/* As cuLaunchKernelEx: a failure (a test's, or no current context) is returned, never kept. */
symmpin_status symmpin_kernel_launch(const symmpin_kernel_call *call, void *stream) {
  if (fail_launch || !cur_ctx) {
    fail_launch = false;
    return SYMMPIN_ERR_CUDA;
  }
  const unsigned char *slot = call->slot[call->rank];
  const unsigned char *my_base = atomic_load(&rank_base[call->rank]);
  if (!my_base || slot < my_base || slot >= my_base + FAKE_POOL_CAPACITY) return SYMMPIN_ERR_INVALID;
  log_op(op_here((fake_op){.kind = FAKE_LAUNCH,
                           .stream = stream,
                           .offset = (int64_t)(slot - my_base),
                           .count = call->count,
                           .coll = call->coll,
                           .slot_bytes = call->slot_bytes}));
  launches_here++;
  return SYMMPIN_OK;
}

symmpin_status symmpin_kernel_launch_group(const symmpin_kernel_call *calls, int n, void *stream) {
  if (fail_launch || !cur_ctx) {
    fail_launch = false;
    return SYMMPIN_ERR_CUDA;
  }
  const unsigned char *my_base = atomic_load(&rank_base[calls[0].rank]);
  for (int i = 0; i < n; i++) {
    const unsigned char *slot = calls[i].slot[calls[i].rank];
    if (!my_base || slot < my_base || slot >= my_base + FAKE_POOL_CAPACITY) return SYMMPIN_ERR_INVALID;
  }
  log_op(op_here(
      (fake_op){.kind = FAKE_GROUP,
                .stream = stream,
                .offset = (int64_t)((const unsigned char *)calls[0].slot[calls[0].rank] - my_base),
                .count = (size_t)n,
                .coll = calls[0].coll}));
  launches_here++;
  group_launches_here++;
  return SYMMPIN_OK;
}

/* ---- the host table and the banner probe, installed before main ---- */

/* As interpose/query.c: the current context's device, 0 without one (as cudaGetDevice). */
static int host_device(void) { return cur_ctx ? cur_ctx->device : 0; }
static int host_capturing(void *stream, unsigned long long *capture_id) {
  (void)stream;
  (void)capture_id;
  return 0; /* a call's own capture comes in symmpin_engine_call.capturing */
}

static void probe_versions(symmpin_banner_facts *f) {
  f->nccl_version = 22809; /* 2.28.9: the version symmpin was tested with */
  f->nccl_built = 22809;
  f->driver_version = 13000; /* a driver for CUDA 13.0, which symmpin opened (driver/cu.h) */
  f->driver_usable = 1;
}

__attribute__((constructor)) static void fakes_install(void) {
  for (int d = 0; d < FAKE_DEVICES; d++) {
    primaries[d] = (fake_ctx){.device = d, .primary = true};
    owns[d] = (fake_ctx){.device = d, .primary = false};
  }
  symmpin_host h = {.device = host_device, .capturing = host_capturing};
  symmpin_host_install(&h);
  symmpin_banner_probe b = {.versions = probe_versions};
  symmpin_banner_install(&b);
}
