/* Symmetric pools (pool.h): chunks of device memory made with the driver's virtual memory API
 * (cuMemCreate), exported as POSIX file descriptors (handed to peer processes by fdpass.h), and
 * mapped by every rank of the communicator at the same offsets.
 *
 * Why not cudaMalloc and CUDA IPC: freeing exported cudaMalloc memory while a peer still maps it
 * is undefined, so a rank could only free its pool after every peer had unmapped it (a barrier at
 * every destroy, and a leak at every abort), and cudaFree waits for the whole device. Here every
 * rank maps every chunk itself, each mapping holds the physical memory, and the memory goes when
 * the last mapping in any process goes: a rank releases its pool whenever its own kernels are done
 * with it, whatever its peers do, and nothing waits for the device.
 *
 * Every CUDA call runs on the pool's device (the caller's current device is restored) and with the
 * thread's stream-capture mode exchanged to relaxed: another thread of the program may be capturing
 * a CUDA graph in global mode, and symmpin's own allocation must neither fail nor invalidate it.
 * Zeroing goes through a private non-blocking stream for the same reason (no implicit sync with
 * the program's streams). Every CUDA call goes to the driver (driver/cu.h): none of them is a
 * function libsymmpin wraps. */
#include "symmem/pool.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/invariant.h"
#include "common/log.h"
#include "driver/check.h"
#include "symmem/devscope.h"
#include "symmem/fdpass.h"

#define POOL_RECORD_MAGIC 0x53504f32u /* "SPO2": pool record, layout 2 (VMM, fd offers) */
#define POOL_MAX_DEVICES 64
#define FETCH_TIMEOUT_MS 2000u /* a peer's fd server is a thread that answers at once */

/* One rank's export record for one chunk; copied in and out with memcpy, since posts may sit at
 * any alignment inside a board blob. */
typedef struct pool_record {
  uint32_t magic;
  int32_t pid;
  int32_t device; /* ordinal in the exporting process */
  uint32_t reserved;
  uint64_t offset, bytes; /* the chunk: [offset, offset + bytes) of the pool; bytes 0 = no growth */
  uint64_t alloc;         /* the allocation's size: what a peer maps */
  uint8_t uuid[16];       /* the exporting device */
  uint64_t proc_token;    /* the exporting process (fdpass.h) */
  uint64_t offer;         /* the chunk's fd offer there */
  uint8_t unused[56];
} pool_record;
_Static_assert(sizeof(pool_record) == SYMMPIN_POOL_EXPORT_BYTES, "export record size");
_Static_assert(sizeof(symmpin_pool_facts) == 32, "facts are plain bytes of a fixed layout");

typedef struct pool_chunk {
  size_t offset, bytes; /* the chunk's range of the pool */
  size_t alloc;         /* bytes allocated and mapped (a multiple of the granularity) */
  uint64_t handle;      /* this rank's allocation (CUmemGenericAllocationHandle) */
  uint64_t offer;       /* its fd offer (fdpass.h); 0 if none */
  void *local;          /* this rank's mapping of its own allocation */
  void **peer;          /* [nranks]: this rank's own mapping of every rank's chunk (peer[rank] =
                           local); mappings of peers are released by unmapping them */
} pool_chunk;

struct symmpin_pool {
  int rank, nranks, device;
  size_t size; /* agreed size: sum of attached chunks */
  pool_chunk *chunks;
  int nchunks, cap;
  bool has_pending;   /* reserved, not attached yet */
  pool_chunk pending; /* no peer mappings */
  bool provisional;   /* the last chunk was attached by an epoch not yet settled */
  size_t announced;   /* bytes the last reserve exported (0: an empty record) */
};

/* ---- process identity ------------------------------------------------------------------- */

/* Random per process, so that "same pid" in two pid namespaces (containers sharing /dev/shm) is
 * never mistaken for the same process; it also names the process's fd socket (fdpass.h). */
static uint64_t pool_proc_token(void) { return symmpin_fdpass_process_token(); }

static pthread_mutex_t pool_uuid_lock = PTHREAD_MUTEX_INITIALIZER;
static bool pool_uuid_known;
static int pool_uuid_count;
static uint8_t pool_uuids[POOL_MAX_DEVICES][16];

/* The UUID of every device this process sees, read once. */
static symmpin_status pool_uuid_table(int *count, const uint8_t (**uuids)[16]) {
  symmpin_status st = SYMMPIN_OK;
  pthread_mutex_lock(&pool_uuid_lock);
  if (!pool_uuid_known) {
    int n = 0;
    /* Without a usable driver the table is all NULL: no device to name (the banner said why). */
    if (!symmpin_cu_usable() || SYMMPIN_CUDA_CHECK(symmpin_cu.DeviceGetCount(&n)) != CUDA_SUCCESS) {
      st = SYMMPIN_ERR_CUDA;
      goto out;
    }
    if (n > POOL_MAX_DEVICES) n = POOL_MAX_DEVICES;
    for (int d = 0; d < n; d++) {
      CUdevice dev;
      CUuuid uuid;
      if (SYMMPIN_CUDA_CHECK(symmpin_cu.DeviceGet(&dev, d)) != CUDA_SUCCESS ||
          SYMMPIN_CUDA_CHECK(symmpin_cu.DeviceGetUuid(&uuid, dev)) != CUDA_SUCCESS) {
        SYMMPIN_WARN("pool: the properties of device %d cannot be read", d);
        st = SYMMPIN_ERR_CUDA;
        goto out;
      }
      memcpy(pool_uuids[d], uuid.bytes, 16);
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

/* The pool's device current and capture mode relaxed, the thread restored after (devscope.h). */
typedef symmpin_devscope pool_scope;

static symmpin_status pool_scope_enter_gone(const symmpin_pool *p, pool_scope *s, bool *gone) {
  bool g = false;
  symmpin_status st = symmpin_devscope_enter(p->device, s, &g);
  if (st != SYMMPIN_OK) symmpin_devscope_abandon(s);
  if (st != SYMMPIN_OK && !g)
    SYMMPIN_WARN("pool of rank %d: cannot make device %d current", p->rank, p->device);
  if (gone) *gone = g;
  return st;
}

static symmpin_status pool_scope_enter(const symmpin_pool *p, pool_scope *s) {
  return pool_scope_enter_gone(p, s, NULL);
}

static void pool_scope_leave(const symmpin_pool *p, pool_scope *s) {
  (void)p;
  symmpin_devscope_leave(s);
}

/* Logs a failed driver call where it happened (the caller's line). */
#define pool_drv_ok(p, r, what) pool_drv_check((p), (r), (what), __LINE__)
static bool pool_drv_check(const symmpin_pool *p, CUresult r, const char *what, int line) {
  if (r == CUDA_SUCCESS) return true;
  if (SYMMPIN_LOG_ON(SYMMPIN_LOG_WARN))
    symmpin_log_write(SYMMPIN_LOG_WARN, __FILE__, line,
                      "pool of rank %d: %s on device %d failed: CUresult %d", p->rank, what,
                      p->device, (int)r);
  return false;
}

/* ---- mappings --------------------------------------------------------------------------- */

static CUmemAllocationProp pool_prop(int device) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

/* Maps `handle` (alloc bytes) at a new address, read-write from the pool's device. The mapping
 * holds the memory: the handle may be released right after. */
static symmpin_status pool_map(const symmpin_pool *p, CUmemGenericAllocationHandle handle,
                               size_t alloc, void **out) {
  CUdeviceptr va = 0;
  if (!pool_drv_ok(p, symmpin_cu.MemAddressReserve(&va, alloc, 0, 0, 0), "cuMemAddressReserve"))
    return SYMMPIN_ERR_CUDA;
  if (!pool_drv_ok(p, symmpin_cu.MemMap(va, alloc, 0, handle, 0), "cuMemMap")) goto fail_va;
  CUmemAccessDesc access;
  memset(&access, 0, sizeof(access));
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = p->device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  /* Fails where the pool's device cannot reach the memory's (no P2P). */
  if (!pool_drv_ok(p, symmpin_cu.MemSetAccess(va, alloc, &access, 1), "cuMemSetAccess"))
    goto fail_map;
  *out = (void *)(uintptr_t)va;
  return SYMMPIN_OK;
fail_map:
  (void)symmpin_cu.MemUnmap(va, alloc);
fail_va:
  (void)symmpin_cu.MemAddressFree(va, alloc);
  return SYMMPIN_ERR_CUDA;
}

static void pool_unmap(const symmpin_pool *p, void *ptr, size_t alloc) {
  if (!ptr) return;
  CUdeviceptr va = (CUdeviceptr)(uintptr_t)ptr;
  pool_drv_ok(p, symmpin_cu.MemUnmap(va, alloc), "cuMemUnmap");
  pool_drv_ok(p, symmpin_cu.MemAddressFree(va, alloc), "cuMemAddressFree");
}

/* Unmaps this rank's mappings of its peers' chunks. */
static void pool_chunk_unmap_peers(symmpin_pool *p, pool_chunk *c) {
  for (int r = 0; c->peer && r < p->nranks; r++) {
    if (r != p->rank) pool_unmap(p, c->peer[r], c->alloc);
    if (r != p->rank) c->peer[r] = NULL;
  }
}

/* Everything of this rank's own allocation: the offer (no peer can fetch it any more), the
 * mapping, the handle. Peers' mappings of it keep the memory until they go. */
static void pool_chunk_release_own(symmpin_pool *p, pool_chunk *c) {
  if (c->offer) symmpin_fdpass_withdraw(c->offer);
  c->offer = 0;
  pool_unmap(p, c->local, c->alloc);
  c->local = NULL;
  if (c->handle)
    pool_drv_ok(p, symmpin_cu.MemRelease((CUmemGenericAllocationHandle)c->handle), "cuMemRelease");
  c->handle = 0;
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
  *out = p;
  return SYMMPIN_OK;
}

static void pool_chunk_free_host(pool_chunk *c) {
  free(c->peer);
  c->peer = NULL;
}

void symmpin_pool_destroy(symmpin_pool *p) {
  if (!p) return;
  if ((p->nchunks > 0 || p->has_pending) && symmpin_cu_usable()) {
    pool_scope s;
    bool gone = false;
    bool entered = pool_scope_enter_gone(p, &s, &gone) == SYMMPIN_OK;
    if (entered || !gone) {
      /* Without the device current (a broken context) the driver may still unmap: try, so
       * nothing of a peer's stays mapped here. */
      for (int i = 0; i < p->nchunks; i++) {
        pool_chunk_unmap_peers(p, &p->chunks[i]);
        pool_chunk_release_own(p, &p->chunks[i]);
      }
      if (p->has_pending) pool_chunk_release_own(p, &p->pending);
    } else {
      /* At process exit the runtime is already gone and takes every mapping with it; only the
       * offers are this module's. */
      for (int i = 0; i < p->nchunks; i++) symmpin_fdpass_withdraw(p->chunks[i].offer);
      if (p->has_pending) symmpin_fdpass_withdraw(p->pending.offer);
    }
    if (entered) pool_scope_leave(p, &s);
  }
  for (int i = 0; i < p->nchunks; i++) pool_chunk_free_host(&p->chunks[i]);
  free(p->chunks);
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
    rec->alloc = c->alloc;
    rec->offer = c->offer;
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

/* Zeroes a fresh chunk: kernels rely on zeroed flags in fresh slots. */
static symmpin_status pool_zero(const symmpin_pool *p, void *ptr, size_t bytes) {
  CUstream stream = NULL;
  bool ok =
      SYMMPIN_CUDA_CHECK(symmpin_cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING)) == CUDA_SUCCESS;
  if (ok) {
    ok = SYMMPIN_CUDA_CHECK(symmpin_cu.MemsetD8Async((CUdeviceptr)ptr, 0, bytes, stream)) ==
             CUDA_SUCCESS &&
         SYMMPIN_CUDA_CHECK(symmpin_cu.StreamSynchronize(stream)) == CUDA_SUCCESS;
    (void)SYMMPIN_CUDA_CHECK(symmpin_cu.StreamDestroy(stream));
  }
  if (!ok)
    SYMMPIN_WARN("pool of rank %d: a fresh chunk on device %d cannot be zeroed", p->rank,
                 p->device);
  return ok ? SYMMPIN_OK : SYMMPIN_ERR_CUDA;
}

/* The driver makes an exported descriptor without FD_CLOEXEC (cuMemExportToShareableHandle has no
 * flag for it) and fcntl sets it right after: a fork in between would hand the chunk to whatever
 * the child execs, which would hold its memory for its life. So an export holds export_lock from
 * before the driver's call to after the fcntl, and a fork takes it first (pthread_atfork prepare:
 * the fork waits for an export in progress, and none starts during the fork). The handlers are
 * installed at the first export, after the driver's own (prepare handlers run last-installed
 * first): the forking thread waits here before the driver's handlers take the driver's locks, so
 * an export inside the driver can always finish. posix_spawn and vfork (and system() and popen(),
 * which glibc builds on them) run no fork handlers: one that starts in another thread at that very
 * moment can still pass the descriptor on (docs/symmem.md). */
static pthread_mutex_t export_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t export_atfork_once = PTHREAD_ONCE_INIT;
static void export_fork_prepare(void) { pthread_mutex_lock(&export_lock); }
static void export_fork_done(void) { pthread_mutex_unlock(&export_lock); }
static void export_atfork_install(void) {
  pthread_atfork(export_fork_prepare, export_fork_done, export_fork_done);
}

/* Allocates, maps, zeroes and offers one chunk of `alloc` bytes into c (its handle, offer,
 * local). On failure nothing is left. */
static symmpin_status pool_chunk_alloc(symmpin_pool *p, size_t alloc, pool_chunk *c) {
  CUmemAllocationProp prop = pool_prop(p->device);
  CUmemGenericAllocationHandle h = 0;
  char what[64];
  snprintf(what, sizeof(what), "cuMemCreate of %zu bytes", alloc);
  if (!pool_drv_ok(p, symmpin_cu.MemCreate(&h, alloc, &prop, 0), what)) return SYMMPIN_ERR_CUDA;
  c->handle = (uint64_t)h;
  c->alloc = alloc;
  symmpin_status st = pool_map(p, h, alloc, &c->local);
  if (st == SYMMPIN_OK) st = pool_zero(p, c->local, alloc);
  int fd = -1;
  pthread_once(&export_atfork_once, export_atfork_install);
  pthread_mutex_lock(&export_lock); /* no fork until the descriptor is close-on-exec (above) */
  if (st == SYMMPIN_OK && !pool_drv_ok(p,
                                       symmpin_cu.MemExportToShareableHandle(
                                           &fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                                       "cuMemExportToShareableHandle"))
    st = SYMMPIN_ERR_CUDA;
  if (fd >= 0) (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
  pthread_mutex_unlock(&export_lock);
  if (st == SYMMPIN_OK) st = symmpin_fdpass_offer(fd, c->handle, &c->offer);
  if (fd >= 0) close(fd); /* the offer holds its own duplicate */
  if (st != SYMMPIN_OK) pool_chunk_release_own(p, c);
  return st;
}

/* The allocation size for `want` bytes: whole multiples of the allocation granularity and of
 * SYMMPIN_POOL_CHUNK_ALIGN. 0 if the driver cannot say. */
static size_t pool_alloc_size(const symmpin_pool *p, size_t want) {
  CUmemAllocationProp prop = pool_prop(p->device);
  size_t g = 0;
  if (!pool_drv_ok(
          p,
          symmpin_cu.MemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
          "cuMemGetAllocationGranularity") ||
      g == 0)
    return 0;
  size_t unit = g > SYMMPIN_POOL_CHUNK_ALIGN ? g : SYMMPIN_POOL_CHUNK_ALIGN;
  if (unit % g || unit % SYMMPIN_POOL_CHUNK_ALIGN) unit = g * SYMMPIN_POOL_CHUNK_ALIGN;
  if (want > SIZE_MAX - unit) return 0;
  return (want + unit - 1) / unit * unit;
}

symmpin_status symmpin_pool_reserve(symmpin_pool *p, size_t bytes, void *export_rec) {
  if (!p || !export_rec) {
    SYMMPIN_WARN("pool_reserve: %s", !p ? "NULL pool" : "NULL export record");
    return SYMMPIN_ERR_INVALID;
  }
  p->announced = 0; /* a failed reserve announces nothing */
  if (p->provisional) {
    SYMMPIN_BUG("pool_reserve: rank %d: the last grow was never settled", p->rank);
    return SYMMPIN_ERR_INVALID;
  }
  uint8_t uuid[16];
  symmpin_status st = pool_own_uuid(p->device, uuid);
  if (st != SYMMPIN_OK) return st;
  pool_record rec;
  if (bytes <= p->size) {
    pool_record_fill(p, &rec, NULL, uuid);
    memcpy(export_rec, &rec, sizeof(rec));
    return SYMMPIN_OK;
  }
  if (!symmpin_cu_usable()) return SYMMPIN_ERR_UNSUPPORTED;
  /* The chunk covers exactly [size, bytes): the next chunk starts where the planner's pool ended,
   * so a slot the planner appends at the old end lies inside the new chunk. Only the allocation
   * is rounded up (its tail is never addressed through the pool). */
  size_t want = bytes - p->size;
  pool_scope s;
  st = pool_scope_enter(p, &s);
  if (st != SYMMPIN_OK) return st;
  if (p->has_pending && p->pending.bytes != want) {
    /* A grow of another size after a failed one: the old chunk goes. A peer that mapped it in
     * the failed epoch holds it through its own mapping until it settles; nothing here waits. */
    pool_chunk_release_own(p, &p->pending);
    p->has_pending = false;
  }
  if (!p->has_pending) { /* else: the same size as a failed grow: its chunk is exported again */
    size_t alloc = pool_alloc_size(p, want);
    if (alloc == 0) {
      SYMMPIN_WARN("pool_reserve: rank %d cannot grow to %zu bytes", p->rank, bytes);
      st = SYMMPIN_ERR_INVALID;
      goto out;
    }
    pool_chunk c;
    memset(&c, 0, sizeof(c));
    st = pool_chunk_alloc(p, alloc, &c);
    if (st != SYMMPIN_OK) goto out;
    c.offset = p->size;
    c.bytes = want;
    p->pending = c;
    p->has_pending = true;
  }
  pool_record_fill(p, &rec, &p->pending, uuid);
  memcpy(export_rec, &rec, sizeof(rec));
  p->announced = p->pending.bytes;
out:
  pool_scope_leave(p, &s);
  return st;
}

/* A same-process peer's chunk: its handle mapped here while its offer cannot go away. */
typedef struct local_map {
  const symmpin_pool *p;
  size_t alloc;
  void *ptr;
} local_map;

static symmpin_status pool_map_local(uint64_t handle, void *arg) {
  local_map *m = arg;
  return pool_map(m->p, (CUmemGenericAllocationHandle)handle, m->alloc, &m->ptr);
}

/* Maps rank r's chunk described by rec into c->peer[r]: this rank's own mapping of it. */
static symmpin_status pool_map_peer(symmpin_pool *p, pool_chunk *c, int r, const pool_record *rec,
                                    int count, const uint8_t (*uuids)[16]) {
  if (rec->alloc != c->alloc) {
    SYMMPIN_WARN("pool_attach: rank %d allocated %llu bytes for the chunk, rank %d %zu", r,
                 (unsigned long long)rec->alloc, p->rank, c->alloc);
    return SYMMPIN_ERR_DISAGREE;
  }
  bool same_process = rec->pid == (int32_t)getpid() && rec->proc_token == pool_proc_token();
  int dev = same_process ? rec->device : pool_uuid_to_device(rec->uuid, count, uuids);
  if (dev >= 0 && dev != p->device && !symmpin_pool_p2p_ok(p->device, dev)) {
    SYMMPIN_INFO("pool of rank %d: device %d cannot access device %d of rank %d (no P2P)", p->rank,
                 p->device, dev, r);
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  if (same_process) {
    local_map m = {.p = p, .alloc = c->alloc};
    symmpin_status st = symmpin_fdpass_with_local(rec->offer, pool_map_local, &m);
    if (st == SYMMPIN_ERR_DISAGREE)
      SYMMPIN_WARN("pool_attach: rank %d: rank %d's chunk is no longer offered", p->rank, r);
    if (st == SYMMPIN_OK) c->peer[r] = m.ptr;
    return st;
  }
  int fd = -1;
  symmpin_status st = symmpin_fdpass_fetch(rec->proc_token, rec->offer, FETCH_TIMEOUT_MS, &fd);
  if (st != SYMMPIN_OK) {
    SYMMPIN_WARN("pool_attach: rank %d cannot fetch rank %d's chunk from process %d: %s%s",
                 p->rank, r, (int)rec->pid, symmpin_status_name(st),
                 st == SYMMPIN_ERR_IO ? " (no answer: the process ended, or is in another network "
                                        "namespace)"
                                      : "");
    return st;
  }
  CUmemGenericAllocationHandle h = 0;
  char what[64];
  snprintf(what, sizeof(what), "cuMemImportFromShareableHandle (rank %d)", r);
  bool ok = pool_drv_ok(p,
                        symmpin_cu.MemImportFromShareableHandle(
                            &h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                        what);
  close(fd);
  if (!ok) return SYMMPIN_ERR_CUDA;
  st = pool_map(p, h, c->alloc, &c->peer[r]);
  pool_drv_ok(p, symmpin_cu.MemRelease(h), "cuMemRelease"); /* the mapping holds the memory */
  return st;
}

symmpin_status symmpin_pool_attach(symmpin_pool *p, const void *const records[]) {
  if (!p || !records) {
    SYMMPIN_WARN("pool_attach: %s", !p ? "NULL pool" : "NULL records");
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
  if (!c.peer) {
    SYMMPIN_WARN("pool_attach: rank %d: out of memory for %d peer mappings", p->rank, p->nranks);
    st = SYMMPIN_ERR_NOMEM;
    goto out_recs;
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
  if (st != SYMMPIN_OK) pool_chunk_unmap_peers(p, &c);
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

void symmpin_pool_settle(symmpin_pool *p, bool agreed) {
  if (!p || !p->provisional) return;
  p->provisional = false;
  if (agreed) return;
  /* Back to "reserved": this rank's mappings of its peers' new chunks go (no kernel ever used
   * them: the epoch did not agree), its own chunk stays reserved for a retry of the same size. */
  pool_chunk c = p->chunks[--p->nchunks];
  pool_scope s;
  bool entered = pool_scope_enter(p, &s) == SYMMPIN_OK;
  pool_chunk_unmap_peers(p, &c); /* also without the device current: never leave them mapped */
  if (entered) pool_scope_leave(p, &s);
  p->size -= c.bytes;
  pool_chunk_free_host(&c);
  p->pending = c;
  p->has_pending = true;
}

/* ---- lookups ---------------------------------------------------------------------------- */

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

symmpin_status symmpin_pool_device_check(int device, char *why, size_t why_len) {
  if (why && why_len) why[0] = '\0';
  if (!symmpin_cu_usable()) {
    if (why && why_len) snprintf(why, why_len, "%s", symmpin_cu_open()->why);
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  CUdevice dev;
  int vmm = 0, fd = 0;
  if (symmpin_cu.DeviceGet(&dev, device) != CUDA_SUCCESS ||
      symmpin_cu.DeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                    dev) != CUDA_SUCCESS ||
      symmpin_cu.DeviceGetAttribute(&fd,
                                    CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                                    dev) != CUDA_SUCCESS) {
    if (why && why_len) snprintf(why, why_len, "device %d: its attributes cannot be read", device);
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  if (!vmm || !fd) {
    if (why && why_len)
      snprintf(why, why_len, "device %d %s", device,
               !vmm ? "has no virtual memory management"
                    : "cannot export memory as file descriptors");
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  return SYMMPIN_OK;
}

bool symmpin_pool_p2p_ok(int device_a, int device_b) {
  if (device_a == device_b) return true;
  int can = 0;
  CUdevice a, b;
  if (!symmpin_cu_usable() ||
      SYMMPIN_CUDA_IGNORE(symmpin_cu.DeviceGet(&a, device_a)) != CUDA_SUCCESS ||
      SYMMPIN_CUDA_IGNORE(symmpin_cu.DeviceGet(&b, device_b)) != CUDA_SUCCESS ||
      SYMMPIN_CUDA_IGNORE(symmpin_cu.DeviceCanAccessPeer(&can, a, b)) != CUDA_SUCCESS)
    return false;
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
