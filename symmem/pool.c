/* Symmetric pools (pool.h): chunks of cudaMalloc'd device memory, exported with CUDA IPC handles,
 * mapped by every rank of the communicator at the same offsets.
 *
 * Chunks are allocated and freed only through the pool's device allocator (pool.h), never by
 * calling cudaMalloc/cudaFree by name when one is set: inside libsymmpin.so those names bind to
 * the library's own exported wrappers. No other function this file calls is one the library
 * exports (interpose/symmpin.map).
 *
 * Every CUDA call runs on the pool's device (the caller's current device is restored) and with the
 * thread's stream-capture mode exchanged to relaxed: another thread of the program may be capturing
 * a CUDA graph in global mode, and symmpin's own allocation must neither fail nor invalidate it.
 * Zeroing goes through a private non-blocking stream for the same reason (no implicit sync with
 * the program's streams). */
#include "symmem/pool.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define POOL_RECORD_MAGIC 0x53504f31u /* "SPO1": pool record, layout 1 */
#define POOL_MAX_DEVICES 64

/* One rank's export record for one chunk; copied in and out with memcpy, since posts may sit at
 * any alignment inside a board blob. */
typedef struct pool_record {
  uint32_t magic;
  int32_t pid;
  int32_t device; /* ordinal in the exporting process */
  uint32_t reserved;
  uint64_t offset, bytes; /* the chunk: [offset, offset + bytes) of the pool; bytes 0 = no growth */
  uint8_t uuid[16];       /* the exporting device */
  uint64_t proc_token;
  uint64_t ptr;           /* the chunk's address in the exporting process (same-process peers) */
  cudaIpcMemHandle_t handle;
} pool_record;
_Static_assert(sizeof(pool_record) == SYMMPIN_POOL_EXPORT_BYTES, "export record size");
_Static_assert(sizeof(symmpin_pool_facts) == 32, "facts are plain bytes of a fixed layout");

typedef struct pool_chunk {
  size_t offset, bytes;
  void *local;          /* this rank's memory */
  void **peer;          /* [nranks]: every rank's chunk as mapped here (peer[rank] = local) */
  unsigned char *ipc;   /* [nranks]: 1 where peer[r] came from cudaIpcOpenMemHandle */
} pool_chunk;

/* Chunks of failed grows a pool keeps until destroy() (see symmpin_pool_reserve). */
#define POOL_MAX_ORPHANS 4

struct symmpin_pool {
  int rank, nranks, device;
  symmpin_device_allocator alloc; /* the process's allocator when the pool was created */
  size_t size; /* agreed size: sum of attached chunks */
  pool_chunk *chunks;
  int nchunks, cap;
  bool has_pending;   /* reserved, not attached yet */
  pool_chunk pending; /* only offset, bytes, local */
  bool provisional;   /* the last chunk was attached by an epoch not yet settled */
  void **orphans;     /* chunks reserved by failed epochs and replaced by a reserve of another
                         size: peers may still map them, so they are freed only by destroy() */
  int norphans;
  size_t announced;   /* bytes the last reserve exported (0: an empty record) */
  bool unmapped;      /* unmap_peers() ran: only own chunks remain */
};

/* ---- device allocator ----------------------------------------------------------------------- */

static pthread_mutex_t pool_allocator_lock = PTHREAD_MUTEX_INITIALIZER;
static symmpin_device_allocator pool_allocator; /* {NULL, NULL}: cudaMalloc/cudaFree by name */

void symmpin_pool_set_allocator(const symmpin_device_allocator *a) {
  if (a && (!a->alloc || !a->free)) {
    SYMMPIN_WARN("pool: a device allocator without its %s function is refused; keeping the current "
                 "one", a->alloc ? "free" : "alloc");
    return;
  }
  pthread_mutex_lock(&pool_allocator_lock);
  if (a)
    pool_allocator = *a;
  else
    memset(&pool_allocator, 0, sizeof(pool_allocator));
  pthread_mutex_unlock(&pool_allocator_lock);
}

static symmpin_device_allocator pool_allocator_now(void) {
  pthread_mutex_lock(&pool_allocator_lock);
  symmpin_device_allocator a = pool_allocator;
  pthread_mutex_unlock(&pool_allocator_lock);
  return a;
}

static cudaError_t pool_dev_alloc(const symmpin_pool *p, void **ptr, size_t bytes) {
  return p->alloc.alloc ? (cudaError_t)p->alloc.alloc(ptr, bytes) : cudaMalloc(ptr, bytes);
}

static cudaError_t pool_dev_free(const symmpin_pool *p, void *ptr) {
  return p->alloc.free ? (cudaError_t)p->alloc.free(ptr) : cudaFree(ptr);
}

/* ---- process identity ------------------------------------------------------------------- */

static _Atomic uint64_t pool_token;

/* Random per process, so that "same pid" in two pid namespaces (containers sharing /dev/shm) is
 * never mistaken for the same process. */
static uint64_t pool_proc_token(void) {
  uint64_t t = atomic_load(&pool_token);
  if (t) return t;
  uint64_t r = 0;
  if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
        ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&r;
  }
  if (r == 0) r = 1;
  uint64_t expected = 0;
  if (!atomic_compare_exchange_strong(&pool_token, &expected, r)) r = expected;
  return r;
}

static pthread_mutex_t pool_uuid_lock = PTHREAD_MUTEX_INITIALIZER;
static bool pool_uuid_known;
static int pool_uuid_count;
static uint8_t pool_uuids[POOL_MAX_DEVICES][16];

/* The UUID of every device this process sees, read once (cudaGetDeviceProperties is slow). */
static symmpin_status pool_uuid_table(int *count, const uint8_t (**uuids)[16]) {
  symmpin_status st = SYMMPIN_OK;
  pthread_mutex_lock(&pool_uuid_lock);
  if (!pool_uuid_known) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      SYMMPIN_WARN("pool: cudaGetDeviceCount failed: %s", cudaGetErrorString(e));
      (void)cudaGetLastError();
      st = SYMMPIN_ERR_CUDA;
      goto out;
    }
    if (n > POOL_MAX_DEVICES) n = POOL_MAX_DEVICES;
    for (int d = 0; d < n; d++) {
      struct cudaDeviceProp prop;
      e = cudaGetDeviceProperties(&prop, d);
      if (e != cudaSuccess) {
        SYMMPIN_WARN("pool: cudaGetDeviceProperties(%d) failed: %s", d, cudaGetErrorString(e));
        (void)cudaGetLastError();
        st = SYMMPIN_ERR_CUDA;
        goto out;
      }
      memcpy(pool_uuids[d], prop.uuid.bytes, 16);
    }
    pool_uuid_count = n;
    pool_uuid_known = true;
  }
  *count = pool_uuid_count;
  *uuids = (const uint8_t(*)[16])pool_uuids;
out:
  pthread_mutex_unlock(&pool_uuid_lock);
  return st;
}

/* -1 if this process does not see the GPU. */
static int pool_uuid_to_device(const uint8_t uuid[16], int count, const uint8_t (*uuids)[16]) {
  for (int d = 0; d < count; d++)
    if (memcmp(uuids[d], uuid, 16) == 0) return d;
  return -1;
}

/* ---- device scope ----------------------------------------------------------------------- */

/* At process exit the runtime may already be unloading: nothing to do then, and nothing to log. */
static bool pool_runtime_gone(cudaError_t e) {
  return e == cudaErrorCudartUnloading || e == cudaErrorContextIsDestroyed;
}

typedef struct pool_scope {
  int prev_device;
  enum cudaStreamCaptureMode prev_mode;
} pool_scope;

static symmpin_status pool_scope_enter(const symmpin_pool *p, pool_scope *s) {
  cudaError_t e = cudaGetDevice(&s->prev_device);
  if (e == cudaSuccess && s->prev_device != p->device) e = cudaSetDevice(p->device);
  if (e != cudaSuccess) {
    if (!pool_runtime_gone(e))
      SYMMPIN_WARN("pool of rank %d: cannot make device %d current: %s", p->rank, p->device,
                   cudaGetErrorString(e));
    (void)cudaGetLastError();
    return SYMMPIN_ERR_CUDA;
  }
  s->prev_mode = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&s->prev_mode);
  return SYMMPIN_OK;
}

static void pool_scope_leave(const symmpin_pool *p, pool_scope *s) {
  (void)cudaThreadExchangeStreamCaptureMode(&s->prev_mode);
  if (s->prev_device != p->device) (void)cudaSetDevice(s->prev_device);
}

/* Logs a failed CUDA call where it happened (the caller's line) and clears the (non-sticky) error
 * so that the program's next cudaGetLastError does not see symmpin's failure. */
#define pool_cuda_ok(p, e, what) pool_cuda_check((p), (e), (what), __LINE__)
static bool pool_cuda_check(const symmpin_pool *p, cudaError_t e, const char *what, int line) {
  if (e == cudaSuccess) return true;
  if (SYMMPIN_LOG_ON(SYMMPIN_LOG_WARN))
    symmpin_log_write(SYMMPIN_LOG_WARN, __FILE__, line,
                      "pool of rank %d: %s on device %d failed: %s", p->rank, what, p->device,
                      cudaGetErrorString(e));
  (void)cudaGetLastError();
  return false;
}

/* ---- create / destroy ------------------------------------------------------------------- */

symmpin_status symmpin_pool_create(int rank, int nranks, int device, symmpin_pool **out) {
  if (!out || nranks < 1 || rank < 0 || rank >= nranks || device < 0) {
    SYMMPIN_WARN("pool_create: bad rank %d of %d or device %d%s", rank, nranks, device,
                 out ? "" : " (no output pointer)");
    return SYMMPIN_ERR_INVALID;
  }
  symmpin_pool *p = calloc(1, sizeof(*p));
  if (!p) {
    SYMMPIN_WARN("pool_create: out of memory (rank %d of %d)", rank, nranks);
    return SYMMPIN_ERR_NOMEM;
  }
  p->rank = rank;
  p->nranks = nranks;
  p->device = device;
  p->alloc = pool_allocator_now();
  *out = p;
  return SYMMPIN_OK;
}

/* Unmaps what this chunk mapped from other processes and forgets every peer's address. */
static void pool_chunk_unmap(symmpin_pool *p, pool_chunk *c) {
  for (int r = 0; r < p->nranks; r++) {
    if (c->ipc && c->ipc[r]) {
      pool_cuda_ok(p, cudaIpcCloseMemHandle(c->peer[r]), "cudaIpcCloseMemHandle");
      c->ipc[r] = 0;
    }
    if (c->peer && r != p->rank) c->peer[r] = NULL;
  }
}

symmpin_status symmpin_pool_unmap_peers(symmpin_pool *p) {
  if (!p) {
    SYMMPIN_WARN("pool_unmap_peers: NULL pool");
    return SYMMPIN_ERR_INVALID;
  }
  if (p->unmapped) return SYMMPIN_OK;
  symmpin_status st = SYMMPIN_OK;
  if (p->nchunks > 0) {
    pool_scope s;
    st = pool_scope_enter(p, &s);
    if (st != SYMMPIN_OK) return st;
    /* Our kernels that read or write peers' chunks must be done before the mappings go. */
    cudaError_t e = cudaDeviceSynchronize();
    if (pool_runtime_gone(e)) {
      (void)cudaGetLastError();
    } else {
      if (!pool_cuda_ok(p, e, "cudaDeviceSynchronize")) st = SYMMPIN_ERR_CUDA;
      for (int i = 0; i < p->nchunks; i++) pool_chunk_unmap(p, &p->chunks[i]);
    }
    pool_scope_leave(p, &s);
  }
  p->unmapped = true;
  return st;
}

static void pool_chunk_free_host(pool_chunk *c) {
  free(c->peer);
  free(c->ipc);
  c->peer = NULL;
  c->ipc = NULL;
}

void symmpin_pool_destroy(symmpin_pool *p) {
  if (!p) return;
  if (p->nchunks > 0 || p->has_pending || p->norphans > 0) {
    pool_scope s;
    if (pool_scope_enter(p, &s) == SYMMPIN_OK) {
      /* Our own queued work must finish before its memory goes; peers' use of our chunks is
       * the caller's barrier (see unmap_peers). */
      cudaError_t e = cudaDeviceSynchronize();
      if (!pool_runtime_gone(e)) {
        pool_cuda_ok(p, e, "cudaDeviceSynchronize");
        for (int i = 0; i < p->nchunks; i++) {
          pool_chunk_unmap(p, &p->chunks[i]);
          pool_cuda_ok(p, pool_dev_free(p, p->chunks[i].local), "freeing a chunk");
        }
        if (p->has_pending)
          pool_cuda_ok(p, pool_dev_free(p, p->pending.local), "freeing the reserved chunk");
        for (int i = 0; i < p->norphans; i++)
          pool_cuda_ok(p, pool_dev_free(p, p->orphans[i]), "freeing a chunk of a failed epoch");
      } else {
        /* At process exit the runtime is already gone and takes every mapping with it. */
        (void)cudaGetLastError();
      }
      pool_scope_leave(p, &s);
    }
  }
  for (int i = 0; i < p->nchunks; i++) pool_chunk_free_host(&p->chunks[i]);
  free(p->chunks);
  free(p->orphans);
  free(p);
}

/* ---- reserve / attach ------------------------------------------------------------------- */

static void pool_record_fill(const symmpin_pool *p, pool_record *rec, const pool_chunk *c,
                             const uint8_t uuid[16]) {
  memset(rec, 0, sizeof(*rec));
  rec->magic = POOL_RECORD_MAGIC;
  rec->pid = (int32_t)getpid();
  rec->device = p->device;
  rec->proc_token = pool_proc_token();
  rec->offset = p->size;
  if (uuid) memcpy(rec->uuid, uuid, 16);
  if (c) {
    rec->bytes = c->bytes;
    rec->ptr = (uint64_t)(uintptr_t)c->local;
  }
}

static symmpin_status pool_own_uuid(int device, uint8_t uuid[16]) {
  int count;
  const uint8_t(*uuids)[16];
  symmpin_status st = pool_uuid_table(&count, &uuids);
  if (st != SYMMPIN_OK) return st;
  if (device >= count) {
    SYMMPIN_WARN("pool: device %d is not among the %d devices this process sees", device, count);
    return SYMMPIN_ERR_INVALID;
  }
  memcpy(uuid, uuids[device], 16);
  return SYMMPIN_OK;
}

/* Allocates and zeroes one chunk; kernels rely on zeroed flags in fresh slots. */
static symmpin_status pool_chunk_alloc(const symmpin_pool *p, size_t bytes, void **out) {
  void *ptr = NULL;
  cudaStream_t stream = NULL;
  char what[64];
  snprintf(what, sizeof(what), "allocating a %zu-byte chunk", bytes);
  if (!pool_cuda_ok(p, pool_dev_alloc(p, &ptr, bytes), what)) return SYMMPIN_ERR_CUDA;
  if (!pool_cuda_ok(p, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                    "cudaStreamCreateWithFlags"))
    goto fail_free;
  if (!pool_cuda_ok(p, cudaMemsetAsync(ptr, 0, bytes, stream), "cudaMemsetAsync") ||
      !pool_cuda_ok(p, cudaStreamSynchronize(stream), "cudaStreamSynchronize"))
    goto fail_stream;
  pool_cuda_ok(p, cudaStreamDestroy(stream), "cudaStreamDestroy");
  *out = ptr;
  return SYMMPIN_OK;

fail_stream:
  pool_cuda_ok(p, cudaStreamDestroy(stream), "cudaStreamDestroy");
fail_free:
  pool_cuda_ok(p, pool_dev_free(p, ptr), "freeing a chunk that could not be zeroed");
  return SYMMPIN_ERR_CUDA;
}

symmpin_status symmpin_pool_reserve(symmpin_pool *p, size_t bytes, void *export_rec) {
  if (!p || !export_rec || p->unmapped) {
    SYMMPIN_WARN("pool_reserve: %s", !p            ? "NULL pool"
                                     : !export_rec ? "NULL export record"
                                                   : "its peers are unmapped (torn down)");
    return SYMMPIN_ERR_INVALID;
  }
  p->announced = 0; /* a failed reserve announces nothing */
  if (p->provisional) {
    SYMMPIN_WARN("pool_reserve: rank %d: the last grow was never settled (a bug)", p->rank);
    return SYMMPIN_ERR_INVALID;
  }
  uint8_t uuid[16];
  symmpin_status st = pool_own_uuid(p->device, uuid);
  if (st != SYMMPIN_OK) return st;
  pool_record rec;
  if (bytes <= p->size) {
    pool_record_fill(p, &rec, NULL, uuid);
    memcpy(export_rec, &rec, sizeof(rec));
    p->announced = 0;
    return SYMMPIN_OK;
  }
  /* The chunk covers exactly [size, bytes): the next chunk starts where the planner's pool ended,
   * so a slot the planner appends at the old end lies inside the new chunk. Only the allocation
   * is rounded up (its tail is never addressed through the pool). */
  size_t want = bytes - p->size;
  if (want > SIZE_MAX - SYMMPIN_POOL_CHUNK_ALIGN) {
    SYMMPIN_WARN("pool_reserve: rank %d cannot grow to %zu bytes (too large)", p->rank, bytes);
    return SYMMPIN_ERR_INVALID;
  }
  size_t alloc = (want + SYMMPIN_POOL_CHUNK_ALIGN - 1) / SYMMPIN_POOL_CHUNK_ALIGN * SYMMPIN_POOL_CHUNK_ALIGN;

  pool_scope s;
  st = pool_scope_enter(p, &s);
  if (st != SYMMPIN_OK) return st;
  if (p->has_pending && p->pending.bytes != want) {
    /* A grow of another size after a failed one: peers may still map the old chunk, which must not
     * be freed under their mappings (undefined in CUDA IPC); it waits for destroy() as an orphan,
     * and this grow gets a chunk of its own. A few at most: a pool whose grows keep failing stops
     * growing rather than holding ever more memory the program may need. */
    if (p->norphans >= POOL_MAX_ORPHANS) {
      SYMMPIN_WARN("pool_reserve: rank %d: %d grows of changing sizes failed; the pool stays at %zu "
                   "bytes", p->rank, p->norphans + 1, p->size);
      st = SYMMPIN_ERR_UNSUPPORTED;
      goto out;
    }
    void **o = realloc(p->orphans, (size_t)(p->norphans + 1) * sizeof(*o));
    if (!o) {
      SYMMPIN_WARN("pool_reserve: rank %d: out of memory for an orphaned chunk", p->rank);
      st = SYMMPIN_ERR_NOMEM;
      goto out;
    }
    p->orphans = o;
    p->orphans[p->norphans++] = p->pending.local;
    p->has_pending = false;
    memset(&p->pending, 0, sizeof(p->pending));
  }
  if (!p->has_pending) { /* else: the same size as a failed grow: its chunk is exported again */
    void *ptr = NULL;
    st = pool_chunk_alloc(p, alloc, &ptr);
    if (st != SYMMPIN_OK) goto out;
    p->pending.offset = p->size;
    p->pending.bytes = want;
    p->pending.local = ptr;
    p->has_pending = true;
  }
  pool_record_fill(p, &rec, &p->pending, uuid);
  if (!pool_cuda_ok(p, cudaIpcGetMemHandle(&rec.handle, p->pending.local), "cudaIpcGetMemHandle")) {
    st = SYMMPIN_ERR_CUDA;
    goto out;
  }
  memcpy(export_rec, &rec, sizeof(rec));
  p->announced = p->pending.bytes;
out:
  pool_scope_leave(p, &s);
  return st;
}

/* Maps rank r's chunk described by rec into c->peer[r]. */
static symmpin_status pool_map_peer(symmpin_pool *p, pool_chunk *c, int r, const pool_record *rec,
                                    int count, const uint8_t (*uuids)[16]) {
  bool same_process = rec->pid == (int32_t)getpid() && rec->proc_token == pool_proc_token();
  if (same_process) {
    /* One process driving several ranks: the pointer is valid here as is; only peer access from
     * our device to theirs must be on. */
    if (rec->device != p->device) {
      if (!symmpin_pool_p2p_ok(p->device, rec->device)) {
        SYMMPIN_INFO("pool of rank %d: device %d cannot access device %d of rank %d (no P2P)",
                     p->rank, p->device, rec->device, r);
        return SYMMPIN_ERR_UNSUPPORTED;
      }
      cudaError_t e = cudaDeviceEnablePeerAccess(rec->device, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
      } else if (!pool_cuda_ok(p, e, "cudaDeviceEnablePeerAccess")) {
        return SYMMPIN_ERR_CUDA;
      }
    }
    c->peer[r] = (void *)(uintptr_t)rec->ptr;
    return SYMMPIN_OK;
  }
  int dev = pool_uuid_to_device(rec->uuid, count, uuids);
  if (dev >= 0 && dev != p->device && !symmpin_pool_p2p_ok(p->device, dev)) {
    SYMMPIN_INFO("pool of rank %d: device %d cannot access device %d of rank %d (no P2P)", p->rank,
                 p->device, dev, r);
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  /* The driver refcounts a handle opened twice in one context (two ranks of this process on the
   * same device mapping one peer), so each chunk simply opens and closes its own reference. */
  void *ptr = NULL;
  char what[64];
  snprintf(what, sizeof(what), "cudaIpcOpenMemHandle (rank %d)", r);
  if (!pool_cuda_ok(p, cudaIpcOpenMemHandle(&ptr, rec->handle, cudaIpcMemLazyEnablePeerAccess),
                    what))
    return SYMMPIN_ERR_CUDA;
  c->peer[r] = ptr;
  c->ipc[r] = 1;
  return SYMMPIN_OK;
}

symmpin_status symmpin_pool_attach(symmpin_pool *p, const void *const records[]) {
  if (!p || !records || p->unmapped) {
    SYMMPIN_WARN("pool_attach: %s", !p         ? "NULL pool"
                                    : !records ? "NULL records"
                                               : "its peers are unmapped (torn down)");
    return SYMMPIN_ERR_INVALID;
  }
  size_t exp_bytes = p->has_pending ? p->announced : 0;
  pool_record *recs = calloc((size_t)p->nranks, sizeof(*recs));
  if (!recs) {
    SYMMPIN_WARN("pool_attach: rank %d: out of memory for %d records", p->rank, p->nranks);
    return SYMMPIN_ERR_NOMEM;
  }
  symmpin_status st = SYMMPIN_OK;
  for (int r = 0; r < p->nranks; r++) {
    if (r == p->rank) continue;
    if (!records[r]) {
      SYMMPIN_WARN("pool_attach: rank %d got no record from rank %d", p->rank, r);
      st = SYMMPIN_ERR_INVALID;
      goto out_recs;
    }
    memcpy(&recs[r], records[r], sizeof(recs[r]));
    if (recs[r].magic != POOL_RECORD_MAGIC) {
      SYMMPIN_WARN("pool_attach: rank %d: rank %d's record is not a pool record", p->rank, r);
      st = SYMMPIN_ERR_INVALID;
      goto out_recs;
    }
    if (recs[r].offset != p->size || recs[r].bytes != exp_bytes) {
      SYMMPIN_WARN("pool_attach: rank %d grows [%llu, +%llu), rank %d grows [%zu, +%zu)", r,
                   (unsigned long long)recs[r].offset, (unsigned long long)recs[r].bytes, p->rank,
                   p->size, exp_bytes);
      st = SYMMPIN_ERR_DISAGREE;
      goto out_recs;
    }
  }
  if (exp_bytes == 0) goto out_recs; /* nobody grows */

  if (p->nchunks == p->cap) {
    int cap = p->cap ? p->cap * 2 : 4;
    pool_chunk *chunks = realloc(p->chunks, (size_t)cap * sizeof(*chunks));
    if (!chunks) {
      SYMMPIN_WARN("pool_attach: rank %d: out of memory for %d chunks", p->rank, cap);
      st = SYMMPIN_ERR_NOMEM;
      goto out_recs;
    }
    p->chunks = chunks;
    p->cap = cap;
  }
  pool_chunk c = p->pending;
  c.peer = calloc((size_t)p->nranks, sizeof(*c.peer));
  c.ipc = calloc((size_t)p->nranks, 1);
  if (!c.peer || !c.ipc) {
    SYMMPIN_WARN("pool_attach: rank %d: out of memory for %d peer mappings", p->rank, p->nranks);
    st = SYMMPIN_ERR_NOMEM;
    goto out_chunk;
  }
  c.peer[p->rank] = c.local;

  int count;
  const uint8_t(*uuids)[16];
  st = pool_uuid_table(&count, &uuids);
  if (st != SYMMPIN_OK) goto out_chunk;
  pool_scope s;
  st = pool_scope_enter(p, &s);
  if (st != SYMMPIN_OK) goto out_chunk;
  for (int r = 0; r < p->nranks && st == SYMMPIN_OK; r++)
    if (r != p->rank) st = pool_map_peer(p, &c, r, &recs[r], count, uuids);
  if (st != SYMMPIN_OK) pool_chunk_unmap(p, &c);
  pool_scope_leave(p, &s);
  if (st != SYMMPIN_OK) goto out_chunk;

  p->chunks[p->nchunks++] = c;
  p->size += c.bytes;
  p->has_pending = false;
  p->provisional = true;
  p->announced = 0;
  memset(&p->pending, 0, sizeof(p->pending));
  free(recs);
  return SYMMPIN_OK;

out_chunk:
  pool_chunk_free_host(&c);
out_recs:
  free(recs);
  return st;
}

/* ---- lookups ---------------------------------------------------------------------------- */

void symmpin_pool_settle(symmpin_pool *p, bool agreed) {
  if (!p || !p->provisional) return;
  p->provisional = false;
  if (agreed) return;
  /* Back to "reserved": this rank's peers' chunks are unmapped (no kernel ever used them: the
   * epoch did not agree), its own chunk stays reserved for a retry of the same size. */
  pool_chunk c = p->chunks[--p->nchunks];
  pool_scope s;
  if (pool_scope_enter(p, &s) == SYMMPIN_OK) {
    pool_chunk_unmap(p, &c);
    pool_scope_leave(p, &s);
  }
  p->size -= c.bytes;
  p->pending = (pool_chunk){.offset = c.offset, .bytes = c.bytes, .local = c.local};
  p->has_pending = true;
  pool_chunk_free_host(&c);
}

size_t symmpin_pool_size(const symmpin_pool *p) { return p ? p->size : 0; }

/* The chunk holding `offset`; chunks are in offset order and few, and the redirect path
 * resolves its slot addresses once per plan, so a linear scan is enough. */
static const pool_chunk *pool_chunk_at(const symmpin_pool *p, size_t offset) {
  for (int i = 0; i < p->nchunks; i++) {
    const pool_chunk *c = &p->chunks[i];
    if (offset >= c->offset && offset - c->offset < c->bytes) return c;
  }
  return NULL;
}

void *symmpin_pool_addr(const symmpin_pool *p, int r, size_t offset) {
  if (!p || r < 0 || r >= p->nranks) return NULL;
  const pool_chunk *c = pool_chunk_at(p, offset);
  if (!c || !c->peer[r]) return NULL;
  return (unsigned char *)c->peer[r] + (offset - c->offset);
}

bool symmpin_pool_fits(const symmpin_pool *p, size_t offset, size_t bytes) {
  if (!p) return false;
  const pool_chunk *c = pool_chunk_at(p, offset);
  return c && bytes <= c->bytes - (offset - c->offset);
}

bool symmpin_pool_contains(const symmpin_pool *p, const void *addr, size_t *offset) {
  if (!p || !addr) return false;
  uintptr_t a = (uintptr_t)addr;
  for (int i = 0; i < p->nchunks; i++) {
    const pool_chunk *c = &p->chunks[i];
    uintptr_t base = (uintptr_t)c->local;
    if (a >= base && a - base < c->bytes) {
      if (offset) *offset = c->offset + (size_t)(a - base);
      return true;
    }
  }
  return false;
}

/* ---- eligibility ------------------------------------------------------------------------ */

bool symmpin_pool_p2p_ok(int device_a, int device_b) {
  if (device_a == device_b) return true;
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, device_a, device_b) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return can != 0;
}

symmpin_status symmpin_pool_facts_get(int device, symmpin_pool_facts *out) {
  if (!out || device < 0) {
    SYMMPIN_WARN("pool_facts_get: %s (device %d)", out ? "bad device" : "NULL output", device);
    return SYMMPIN_ERR_INVALID;
  }
  symmpin_pool_facts f;
  memset(&f, 0, sizeof(f));
  symmpin_status st = pool_own_uuid(device, f.uuid);
  if (st != SYMMPIN_OK) return st;
  f.proc_token = pool_proc_token();
  f.pid = (int32_t)getpid();
  f.device = device;
  *out = f;
  return SYMMPIN_OK;
}

static void pool_why(char *why, size_t len, const char *fmt, int a, int b, int c, int d) {
  if (why && len) snprintf(why, len, fmt, a, b, c, d);
}

symmpin_status symmpin_pool_check_peers(const symmpin_pool_facts *facts, int nranks, char *why,
                                        size_t why_len) {
  if (why && why_len) why[0] = '\0';
  if (!facts || nranks < 1) {
    SYMMPIN_WARN("pool_check_peers: %s", !facts ? "NULL facts" : "fewer than one rank");
    return SYMMPIN_ERR_INVALID;
  }
  int count;
  const uint8_t(*uuids)[16];
  symmpin_status st = pool_uuid_table(&count, &uuids);
  if (st != SYMMPIN_OK) return st;
  int *dev = malloc((size_t)nranks * sizeof(*dev));
  if (!dev) {
    SYMMPIN_WARN("pool_check_peers: out of memory for %d ranks", nranks);
    return SYMMPIN_ERR_NOMEM;
  }
  /* Devices as ordinals of this process, found by UUID: ordinals differ between processes that
   * see different CUDA_VISIBLE_DEVICES. -1: not visible here. */
  for (int r = 0; r < nranks; r++) dev[r] = pool_uuid_to_device(facts[r].uuid, count, uuids);
  for (int i = 0; i < nranks && st == SYMMPIN_OK; i++) {
    for (int j = i + 1; j < nranks && st == SYMMPIN_OK; j++) {
      if (memcmp(facts[i].uuid, facts[j].uuid, 16) == 0) continue; /* one GPU */
      if (dev[i] < 0 || dev[j] < 0) continue; /* left to attach(): see pool.h */
      if (!symmpin_pool_p2p_ok(dev[i], dev[j]) || !symmpin_pool_p2p_ok(dev[j], dev[i])) {
        pool_why(why, why_len, "no P2P between rank %d (device %d) and rank %d (device %d)", i,
                 dev[i], j, dev[j]);
        st = SYMMPIN_ERR_UNSUPPORTED;
      }
    }
  }
  free(dev);
  return st;
}
