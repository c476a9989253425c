/* CPU tests of the pool's memory (symmem/pool.c) and of how it reaches peer processes
 * (symmem/fdpass.c): chunks made with the driver's virtual memory API, offered as file
 * descriptors, mapped by every rank itself, released by each rank whenever it likes.
 *
 * FAKE: pool.c, fdpass.c, devscope.c and driver/check.c are compiled into this test against a
 * stand-in driver defined below -- the table symmpin_cu of driver/cu.h filled with the functions
 * here, and symmpin_cu_open/usable/error_name -- without libcuda or driver/cu.c (and no CUDA
 * runtime at all), so they run without a GPU. The stand-in driver is faithful where it matters
 * here: a "physical allocation" is a memfd, a mapping
 * is an mmap of it at an address reserved with PROT_NONE, an exported handle is a duplicate of the
 * memfd, and memory lives while any handle or mapping of it does (the kernel's own reference
 * counting of the memfd across processes). Two ranks' mappings of one chunk are two addresses of
 * the same pages, as on a GPU. Devices are 0 and 1; P2P between them can be switched off.
 * The GPU side of the same contract is tests/gpu/test_pool.c (processes and threads on GPUs).
 * Criterion runs every test in its own process, so the counters start fresh in each. */
#include <criterion/criterion.h>
#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver/cu.h"
#include "symmem/fdpass.h"
#include "symmem/pool.h"

#define MIB ((size_t)1 << 20)

/* ---- stand-in driver: devices, contexts, streams (what pool.c and devscope.c call) ---------- */

static __thread int cur_device;
static __thread CUstreamCaptureMode cur_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static char the_stream;
static int stream_nonblocking; /* the_stream was created CU_STREAM_NON_BLOCKING */
static int p2p = 1;          /* devices 0 and 1 reach each other */
static int fail_memset;      /* the next cuMemsetD8Async fails */
/* Work that synchronizes with the program's streams (a memset or a synchronize on the legacy
 * default stream, or on a stream that is not non-blocking): the pool must do none. */
static int n_device_sync;

static CUresult fake_get_error_name(CUresult e, const char **name) {
  *name = e == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_STAND_IN";
  return CUDA_SUCCESS;
}

static CUresult fake_device_count(int *count) {
  *count = 2;
  return CUDA_SUCCESS;
}

static CUresult fake_device_uuid(CUuuid *uuid, CUdevice dev) {
  if (dev < 0 || dev >= 2) return CUDA_ERROR_INVALID_DEVICE;
  memset(uuid, 0, sizeof(*uuid));
  uuid->bytes[0] = (char)(dev + 1);
  return CUDA_SUCCESS;
}

/* Contexts as the driver has them: each device has a primary context, made (the first time) by
 * cuDevicePrimaryCtxRetain or by the program's cudaSetDevice; a thread starts with none. */
static char primary_ctx[2];
static int ctx_made[2];
static __thread CUcontext cur_ctx;

/* What the program's cudaSetDevice does: the device's primary context current on the thread. */
static void program_set_device(int device) {
  cur_device = device;
  cur_ctx = (CUcontext)(void *)&primary_ctx[device];
  ctx_made[device] = 1;
}

static CUresult fake_primary_retain(CUcontext *ctx, CUdevice dev) {
  if (dev < 0 || dev >= 2) return CUDA_ERROR_INVALID_DEVICE;
  ctx_made[dev] = 1;
  *ctx = (CUcontext)(void *)&primary_ctx[dev];
  return CUDA_SUCCESS;
}

static CUresult fake_ctx_get_current(CUcontext *ctx) {
  *ctx = cur_ctx;
  return CUDA_SUCCESS;
}

static CUresult fake_ctx_set_current(CUcontext ctx) {
  cur_ctx = ctx;
  if (ctx) cur_device = (int)((char *)(void *)ctx - primary_ctx);
  return CUDA_SUCCESS;
}

static CUresult fake_ctx_get_device(CUdevice *dev) {
  if (!cur_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = cur_device;
  return CUDA_SUCCESS;
}

static CUresult fake_exchange_capture_mode(CUstreamCaptureMode *mode) {
  CUstreamCaptureMode old = cur_mode;
  cur_mode = *mode;
  *mode = old;
  return CUDA_SUCCESS;
}

static CUresult fake_stream_create(CUstream *stream, unsigned int flags) {
  if (!cur_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  stream_nonblocking = (flags & CU_STREAM_NON_BLOCKING) != 0;
  *stream = (CUstream)(void *)&the_stream;
  return CUDA_SUCCESS;
}

/* The legacy default stream (NULL, CU_STREAM_LEGACY), or a stream that is not non-blocking,
 * synchronizes with the program's streams. */
static void note_sync(CUstream stream) {
  if (stream != (CUstream)(void *)&the_stream || !stream_nonblocking) n_device_sync++;
}

static CUresult fake_memset_d8_async(CUdeviceptr ptr, unsigned char value, size_t bytes,
                                     CUstream stream) {
  if (!cur_ctx) return CUDA_ERROR_INVALID_CONTEXT;
  note_sync(stream);
  if (fail_memset) {
    fail_memset = 0;
    return CUDA_ERROR_LAUNCH_FAILED;
  }
  memset((void *)(uintptr_t)ptr, value, bytes);
  return CUDA_SUCCESS;
}

static CUresult fake_stream_synchronize(CUstream stream) {
  note_sync(stream);
  return CUDA_SUCCESS;
}

static CUresult fake_stream_destroy(CUstream stream) {
  (void)stream;
  return CUDA_SUCCESS;
}

static CUresult fake_can_access_peer(int *can, CUdevice device, CUdevice peer) {
  *can = device == peer || p2p;
  return CUDA_SUCCESS;
}

/* ---- stand-in driver: VMM over memfds ------------------------------------------------------ */

typedef struct phys {
  int fd;
  size_t size;
  int device;
  int handles, maps; /* this process's references */
} phys;

typedef struct mapping {
  void *va;
  size_t size;
  phys *ph;
} mapping;

#define MAX_MAPS 64
static mapping maps[MAX_MAPS];
static int live_phys;   /* physical allocations this process still references */
static int n_create;
static size_t create_bytes[16];

static void phys_drop(phys *ph) {
  if (ph->handles || ph->maps) return;
  close(ph->fd);
  free(ph);
  live_phys--;
}

static phys *phys_new(int fd, size_t size, int device) {
  phys *ph = calloc(1, sizeof *ph);
  ph->fd = fd;
  ph->size = size;
  ph->device = device;
  ph->handles = 1;
  live_phys++;
  return ph;
}

static CUresult fake_create(CUmemGenericAllocationHandle *h, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags) {
  (void)flags;
  if (size % (2 * MIB) || prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return CUDA_ERROR_INVALID_VALUE;
  int fd = memfd_create("fake-vram", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)size) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  memset(p, 0xab, size); /* fresh device memory is not zero: the pool must zero it */
  munmap(p, size);
  if (n_create < 16) create_bytes[n_create] = size;
  n_create++;
  *h = (CUmemGenericAllocationHandle)(uintptr_t)phys_new(fd, size, prop->location.id);
  return CUDA_SUCCESS;
}

static CUresult fake_release(CUmemGenericAllocationHandle h) {
  phys *ph = (phys *)(uintptr_t)h;
  if (!ph || ph->handles <= 0) return CUDA_ERROR_INVALID_VALUE;
  ph->handles--;
  phys_drop(ph);
  return CUDA_SUCCESS;
}

static CUresult fake_reserve(CUdeviceptr *va, size_t size, size_t align, CUdeviceptr addr,
                             unsigned long long flags) {
  (void)align, (void)addr, (void)flags;
  void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  *va = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

static CUresult fake_address_free(CUdeviceptr va, size_t size) {
  for (int i = 0; i < MAX_MAPS; i++)
    if (maps[i].va == (void *)(uintptr_t)va) return CUDA_ERROR_INVALID_VALUE; /* still mapped */
  return munmap((void *)(uintptr_t)va, size) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult fake_map(CUdeviceptr va, size_t size, size_t offset,
                         CUmemGenericAllocationHandle h, unsigned long long flags) {
  (void)flags;
  phys *ph = (phys *)(uintptr_t)h;
  if (offset || size != ph->size) return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < MAX_MAPS; i++) {
    if (maps[i].va) continue;
    /* No access until cuMemSetAccess, as on a GPU. */
    if (mmap((void *)(uintptr_t)va, size, PROT_NONE, MAP_SHARED | MAP_FIXED, ph->fd, 0) ==
        MAP_FAILED)
      return CUDA_ERROR_INVALID_VALUE;
    maps[i] = (mapping){(void *)(uintptr_t)va, size, ph};
    ph->maps++;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult fake_unmap(CUdeviceptr va, size_t size) {
  for (int i = 0; i < MAX_MAPS; i++) {
    if (maps[i].va != (void *)(uintptr_t)va) continue;
    if (maps[i].size != size) return CUDA_ERROR_INVALID_VALUE;
    mmap(maps[i].va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    phys *ph = maps[i].ph;
    maps[i] = (mapping){0};
    ph->maps--;
    phys_drop(ph);
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

static CUresult fake_set_access(CUdeviceptr va, size_t size, const CUmemAccessDesc *desc,
                                size_t count) {
  for (int i = 0; i < MAX_MAPS; i++) {
    if (maps[i].va != (void *)(uintptr_t)va) continue;
    for (size_t d = 0; d < count; d++)
      if (desc[d].location.id != maps[i].ph->device && !p2p) return CUDA_ERROR_INVALID_DEVICE;
    return mprotect(maps[i].va, size, PROT_READ | PROT_WRITE) == 0 ? CUDA_SUCCESS
                                                                    : CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

/* As the driver: the exported descriptor is a new one WITHOUT FD_CLOEXEC (the pool sets it). A
 * test can make the export linger with it open, as a busy driver may (export_linger_us). */
static int export_linger_us;

static CUresult fake_export(void *out, CUmemGenericAllocationHandle h,
                            CUmemAllocationHandleType type, unsigned long long flags) {
  (void)flags;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  *(int *)out = fcntl(((phys *)(uintptr_t)h)->fd, F_DUPFD, 0);
  if (export_linger_us) usleep((useconds_t)export_linger_us);
  return CUDA_SUCCESS;
}

/* The importing process gets a handle of its own on the same memory (device: not known from an
 * fd; the test's devices always reach each other when they import). */
static CUresult fake_import(CUmemGenericAllocationHandle *h, void *os, CUmemAllocationHandleType type) {
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  int fd = fcntl((int)(intptr_t)os, F_DUPFD_CLOEXEC, 0);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return CUDA_ERROR_INVALID_VALUE;
  *h = (CUmemGenericAllocationHandle)(uintptr_t)phys_new(fd, (size_t)st.st_size, -1);
  return CUDA_SUCCESS;
}

static CUresult fake_granularity(size_t *g, const CUmemAllocationProp *prop,
                                 CUmemAllocationGranularity_flags option) {
  (void)prop, (void)option;
  *g = 2 * MIB;
  return CUDA_SUCCESS;
}

static int fd_export_supported = 1; /* the device's POSIX-fd export attribute */

static CUresult fake_device_get(CUdevice *dev, int ordinal) {
  if (ordinal < 0 || ordinal >= 2) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

static CUresult fake_device_attribute(int *v, CUdevice_attribute a, CUdevice dev) {
  (void)dev;
  *v = a == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED ? fd_export_supported
       : a == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED      ? 1
                                                                           : 0;
  return CUDA_SUCCESS;
}

/* The table (driver/cu.h), as symmpin_cu_open fills it from a driver; entries pool.c and
 * devscope.c never call stay NULL. */
static const symmpin_cu_table stand_in_table = {
    .GetErrorName = fake_get_error_name,
    .DeviceGet = fake_device_get,
    .DeviceGetCount = fake_device_count,
    .DeviceGetAttribute = fake_device_attribute,
    .DeviceGetUuid = fake_device_uuid,
    .DeviceCanAccessPeer = fake_can_access_peer,
    .DevicePrimaryCtxRetain = fake_primary_retain,
    .CtxGetCurrent = fake_ctx_get_current,
    .CtxSetCurrent = fake_ctx_set_current,
    .CtxGetDevice = fake_ctx_get_device,
    .ThreadExchangeStreamCaptureMode = fake_exchange_capture_mode,
    .StreamCreate = fake_stream_create,
    .StreamDestroy = fake_stream_destroy,
    .StreamSynchronize = fake_stream_synchronize,
    .MemsetD8Async = fake_memset_d8_async,
    .MemCreate = fake_create,
    .MemRelease = fake_release,
    .MemAddressReserve = fake_reserve,
    .MemAddressFree = fake_address_free,
    .MemMap = fake_map,
    .MemUnmap = fake_unmap,
    .MemSetAccess = fake_set_access,
    .MemExportToShareableHandle = fake_export,
    .MemImportFromShareableHandle = fake_import,
    .MemGetAllocationGranularity = fake_granularity,
};

/* FAKE driver/cu.c. driver_usable = 0 (before the pool's first call) plays a process whose driver
 * symmpin could not open: the table all NULL, as symmpin_cu_open leaves it then. */
symmpin_cu_table symmpin_cu = stand_in_table;
static int driver_usable = 1;
static symmpin_cu_state stand_in_state = {.usable = true, .driver_version = 12000};

static void driver_unusable(void) {
  driver_usable = 0;
  memset(&symmpin_cu, 0, sizeof symmpin_cu);
  stand_in_state = (symmpin_cu_state){.driver_version = 11080};
  snprintf(stand_in_state.why, sizeof stand_in_state.why,
           "the driver supports CUDA 11.8; symmpin needs CUDA 12.0 or newer (driver r525+)");
}

const symmpin_cu_state *symmpin_cu_open(void) { return &stand_in_state; }

bool symmpin_cu_usable(void) { return driver_usable != 0; }

const char *symmpin_cu_error_name(CUresult e) {
  const char *name = NULL;
  if (symmpin_cu.GetErrorName && symmpin_cu.GetErrorName(e, &name) == CUDA_SUCCESS && name)
    return name;
  return "CUDA error (stand-in)";
}

/* ---- helpers ------------------------------------------------------------------------------- */

static int live_maps(void) {
  int n = 0;
  for (int i = 0; i < MAX_MAPS; i++) n += maps[i].va != NULL;
  return n;
}

static bool all_zero(const void *p, size_t bytes) {
  const unsigned char *b = p;
  for (size_t i = 0; i < bytes; i++)
    if (b[i]) return false;
  return true;
}

static void reserve_all(symmpin_pool **pools, int nranks, size_t bytes,
                        unsigned char recs[][SYMMPIN_POOL_EXPORT_BYTES], const void **records) {
  for (int r = 0; r < nranks; r++) {
    cr_assert_eq(symmpin_pool_reserve(pools[r], bytes, recs[r]), SYMMPIN_OK, "reserve, rank %d", r);
    records[r] = recs[r];
  }
}

/* One grow of a pool whose ranks all live in this process: every rank reserves, attaches, and
 * settles with the outcome `agreed` (as the agreement's verdict would say). */
static void grow_settled(symmpin_pool **pools, int nranks, size_t bytes, bool agreed) {
  unsigned char recs[4][SYMMPIN_POOL_EXPORT_BYTES];
  const void *records[4];
  reserve_all(pools, nranks, bytes, recs, records);
  for (int r = 0; r < nranks; r++)
    cr_assert_eq(symmpin_pool_attach(pools[r], records), SYMMPIN_OK, "attach, rank %d", r);
  for (int r = 0; r < nranks; r++) symmpin_pool_settle(pools[r], agreed);
}

static void grow(symmpin_pool **pools, int nranks, size_t bytes) {
  grow_settled(pools, nranks, bytes, true);
}

static void two_pools(symmpin_pool *pools[2]) {
  for (int r = 0; r < 2; r++) cr_assert_eq(symmpin_pool_create(r, 2, r, &pools[r]), SYMMPIN_OK);
}

static void expect_nothing_left(void) {
  cr_expect_eq(live_phys, 0, "%d physical allocations are still referenced", live_phys);
  cr_expect_eq(live_maps(), 0, "%d mappings are left", live_maps());
  cr_expect_eq(symmpin_fdpass_offers(), 0, "%d fd offers are left", symmpin_fdpass_offers());
  cr_expect_eq(n_device_sync, 0, "the pool synchronized with the program's streams %d time(s)",
               n_device_sync);
}

/* Both ranks destroy their pools: nothing may be left. */
static void end_pools(symmpin_pool *pools[2]) {
  for (int r = 0; r < 2; r++) symmpin_pool_destroy(pools[r]);
  expect_nothing_left();
}

/* ---- pools ----------------------------------------------------------------------------------- */

Test(pool_vmm, every_rank_maps_every_chunk_itself) {
  symmpin_pool *pools[2];
  two_pools(pools);
  grow(pools, 2, 1000);
  cr_expect_eq(n_create, 2, "one allocation per rank");
  cr_expect_eq(create_bytes[0], SYMMPIN_POOL_CHUNK_ALIGN, "rounded up to the granularity");
  cr_expect_eq(live_maps(), 4, "each rank maps both chunks");
  for (int r = 0; r < 2; r++) {
    unsigned char *mine = symmpin_pool_addr(pools[r], r, 0);
    unsigned char *theirs = symmpin_pool_addr(pools[1 - r], r, 0);
    cr_assert(mine && theirs);
    cr_expect(all_zero(mine, SYMMPIN_POOL_CHUNK_ALIGN), "rank %d's chunk is zeroed", r);
    cr_expect_neq(mine, theirs, "the peer has a mapping of its own");
    mine[999] = (unsigned char)(0x40 + r);
    cr_expect_eq(theirs[999], 0x40 + r, "rank %d's store is seen through its peer's mapping", r);
  }
  grow(pools, 2, 3 * MIB); /* a second chunk: [1000, 3 MiB), allocated as 4 MiB */
  cr_expect_eq(n_create, 4);
  cr_expect_eq(create_bytes[2], 2 * SYMMPIN_POOL_CHUNK_ALIGN);
  cr_expect_eq(symmpin_pool_size(pools[1]), 3 * MIB);
  cr_expect(symmpin_pool_fits(pools[0], 1000, 3 * MIB - 1000));
  cr_expect_not(symmpin_pool_fits(pools[0], 999, 2), "a slot never straddles two chunks");
  end_pools(pools);
}

Test(pool_vmm, a_rank_frees_its_pool_while_its_peer_still_uses_it) {
  symmpin_pool *pools[2];
  two_pools(pools);
  grow(pools, 2, 5 * MIB);
  unsigned char *peer_view = symmpin_pool_addr(pools[1], 0, 0);
  memset(peer_view, 0x5a, 4096); /* the peer's kernel writes into rank 0's pool */
  symmpin_pool_destroy(pools[0]); /* rank 0 is done: no barrier, no wait */
  cr_expect_eq(live_phys, 2, "rank 0's chunk lives on through rank 1's mapping");
  /* Rank 1's kernel still reads and writes rank 0's chunk: no fault, the same bytes. */
  cr_expect_eq(peer_view[4095], 0x5a);
  peer_view[0] = 1;
  cr_expect_eq(symmpin_fdpass_offers(), 1, "rank 0's offer is withdrawn, rank 1's stays");
  symmpin_pool_destroy(pools[1]);
  expect_nothing_left();
}

/* The exported chunk descriptor is close-on-exec only once the pool's fcntl ran after the driver's
 * export: a fork + exec in another thread in between must not hand it to the new program, which
 * would hold the chunk's memory for its life (pool.c: fork handlers wait for an export in
 * progress). One thread exports chunk after chunk, each export lingering 2 ms with the descriptor
 * open (FAKE driver above); another forks and execs ls, which lists its own descriptors. Without
 * the fork handlers most of those children see the chunk (a memfd named fake-vram). */
static _Atomic int exporting;

static void *export_loop(void *arg) {
  symmpin_pool *p = arg;
  unsigned char rec[SYMMPIN_POOL_EXPORT_BYTES];
  for (int i = 0; i < 150; i++) /* each reserve of another size exports a new chunk */
    cr_assert_eq(symmpin_pool_reserve(p, (i % 2 ? 3 : 1) * MIB, rec), SYMMPIN_OK);
  atomic_store(&exporting, 0);
  return NULL;
}

Test(pool_vmm, a_fork_and_exec_during_an_export_never_inherits_the_chunk, .timeout = 60) {
  export_linger_us = 2000;
  symmpin_pool *p;
  cr_assert_eq(symmpin_pool_create(0, 2, 0, &p), SYMMPIN_OK);
  atomic_store(&exporting, 1);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, export_loop, p), 0);
  int children = 0, inherited = 0;
  static char out[1 << 16];
  while (atomic_load(&exporting)) {
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
      dup2(pfd[1], 1);
      execl("/bin/ls", "ls", "-l", "/proc/self/fd/", (char *)NULL);
      _exit(127);
    }
    close(pfd[1]);
    size_t n = 0;
    ssize_t k;
    while ((k = read(pfd[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)k;
    out[n] = '\0';
    close(pfd[0]);
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "ls: %#x", status);
    children++;
    if (strstr(out, "fake-vram")) inherited++;
  }
  pthread_join(t, NULL);
  cr_expect_gt(children, 20, "too few children to race the exports (%d)", children);
  cr_expect_eq(inherited, 0, "%d of %d exec'd children held a chunk's descriptor", inherited,
               children);
  export_linger_us = 0;
  symmpin_pool_destroy(p);
  expect_nothing_left();
}

Test(pool_vmm, a_failed_epoch_goes_back_to_the_old_size_and_reuses_its_chunk) {
  symmpin_pool *pools[2];
  two_pools(pools);
  grow(pools, 2, 1000);
  grow_settled(pools, 2, 3 * MIB, false);
  for (int r = 0; r < 2; r++) {
    cr_expect_eq(symmpin_pool_size(pools[r]), 1000u);
    cr_expect_null(symmpin_pool_addr(pools[r], 1 - r, 2000), "the failed chunk is not addressable");
  }
  cr_expect_eq(live_maps(), 6, "the failed chunk: only each rank's own mapping is left");
  grow(pools, 2, 3 * MIB);
  cr_expect_eq(n_create, 4, "the retry of the same size reuses the reserved chunks");
  cr_expect_eq(symmpin_pool_size(pools[0]), 3 * MIB);
  end_pools(pools);
}

Test(pool_vmm, a_failed_epoch_never_blocks_a_grow_of_another_size) {
  symmpin_pool *pools[2];
  two_pools(pools);
  for (int i = 0; i < 8; i++) grow_settled(pools, 2, (size_t)(i + 1) * 3 * MIB, false);
  cr_expect_eq(live_phys, 2, "each failed size's chunk was released when the next size came");
  grow(pools, 2, 40 * MIB);
  cr_expect_eq(symmpin_pool_size(pools[0]), 40 * MIB);
  end_pools(pools);
}

Test(pool_vmm, a_peer_that_mapped_a_failed_chunk_keeps_it_until_it_settles) {
  symmpin_pool *pools[2];
  two_pools(pools);
  unsigned char recs[2][SYMMPIN_POOL_EXPORT_BYTES];
  const void *records[2];
  reserve_all(pools, 2, 3 * MIB, recs, records);
  cr_assert_eq(symmpin_pool_attach(pools[1], records), SYMMPIN_OK);
  /* Rank 0 never attached (its epoch failed); it now grows to another size, releasing its first
   * chunk, while rank 1 still maps it. */
  symmpin_pool_settle(pools[1], false);
  reserve_all(pools, 2, 5 * MIB, recs, records);
  for (int r = 0; r < 2; r++) cr_assert_eq(symmpin_pool_attach(pools[r], records), SYMMPIN_OK);
  for (int r = 0; r < 2; r++) symmpin_pool_settle(pools[r], true);
  cr_expect_eq(symmpin_pool_size(pools[0]), 5 * MIB);
  end_pools(pools);
}

Test(pool_vmm, no_p2p_between_devices_is_unsupported_and_leaves_nothing) {
  p2p = 0;
  symmpin_pool *pools[2];
  two_pools(pools);
  unsigned char recs[2][SYMMPIN_POOL_EXPORT_BYTES];
  const void *records[2];
  reserve_all(pools, 2, 1000, recs, records);
  for (int r = 0; r < 2; r++)
    cr_expect_eq(symmpin_pool_attach(pools[r], records), SYMMPIN_ERR_UNSUPPORTED, "rank %d", r);
  cr_expect_eq(symmpin_pool_size(pools[0]), 0u);
  end_pools(pools);
}

Test(pool_vmm, a_chunk_that_cannot_be_zeroed_is_released) {
  symmpin_pool *p;
  cr_assert_eq(symmpin_pool_create(0, 1, 0, &p), SYMMPIN_OK);
  unsigned char rec[SYMMPIN_POOL_EXPORT_BYTES];
  fail_memset = 1;
  cr_expect_eq(symmpin_pool_reserve(p, 1000, rec), SYMMPIN_ERR_CUDA);
  cr_expect_eq(live_phys, 0);
  cr_expect_eq(live_maps(), 0);
  symmpin_pool_destroy(p);
  expect_nothing_left();
}

Test(pool_vmm, a_record_that_names_no_offer_is_refused) {
  symmpin_pool *pools[2];
  two_pools(pools);
  unsigned char recs[2][SYMMPIN_POOL_EXPORT_BYTES];
  const void *records[2];
  reserve_all(pools, 2, 1000, recs, records);
  /* A record whose offer token was changed (forged, or of an earlier chunk): the peer's chunk
   * cannot be had, and nothing else of this process is handed out instead. */
  unsigned char forged[SYMMPIN_POOL_EXPORT_BYTES];
  memcpy(forged, recs[0], sizeof forged);
  forged[72 - 1] ^= 0x55; /* the last byte of the offer token (pool.c's record layout) */
  const void *bad[2] = {forged, records[1]};
  cr_expect_eq(symmpin_pool_attach(pools[1], bad), SYMMPIN_ERR_DISAGREE);
  cr_expect_eq(symmpin_pool_size(pools[1]), 0u);
  end_pools(pools);
}

/* Ranks in two processes: the peer's chunk comes through its fd server (fdpass.c). The child is
 * rank 1; records cross through pipes, as through the board. */
Test(pool_vmm, a_peer_process_hands_over_its_chunk_and_may_exit_first) {
  int to_child[2], to_parent[2];
  cr_assert_eq(pipe(to_child), 0);
  cr_assert_eq(pipe(to_parent), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    symmpin_pool *p;
    unsigned char recs[2][SYMMPIN_POOL_EXPORT_BYTES];
    int ok = symmpin_pool_create(1, 2, 1, &p) == SYMMPIN_OK &&
             symmpin_pool_reserve(p, 1000, recs[1]) == SYMMPIN_OK &&
             write(to_parent[1], recs[1], sizeof recs[1]) == (ssize_t)sizeof recs[1] &&
             read(to_child[0], recs[0], sizeof recs[0]) == (ssize_t)sizeof recs[0];
    const void *records[2] = {recs[0], recs[1]};
    ok = ok && symmpin_pool_attach(p, records) == SYMMPIN_OK;
    symmpin_pool_settle(p, true);
    if (ok) {
      unsigned char *own = symmpin_pool_addr(p, 1, 0);
      unsigned char *peer = symmpin_pool_addr(p, 0, 0);
      memset(own, 0x11, 1000);
      ok = peer[10] == 0 || peer[10] == 0x22; /* the parent writes its chunk meanwhile */
    }
    char done = ok ? 'y' : 'n', attached = 0;
    ok = write(to_parent[1], &done, 1) == 1 &&
         read(to_child[0], &attached, 1) == 1; /* the epoch's end: every rank attached */
    symmpin_pool_destroy(p); /* and exits: its chunk must live on in the parent's mapping */
    _exit(ok ? 0 : 1);
  }
  symmpin_pool *p;
  unsigned char recs[2][SYMMPIN_POOL_EXPORT_BYTES];
  cr_assert_eq(symmpin_pool_create(0, 2, 0, &p), SYMMPIN_OK);
  cr_assert_eq(symmpin_pool_reserve(p, 1000, recs[0]), SYMMPIN_OK);
  cr_assert_eq(write(to_child[1], recs[0], sizeof recs[0]), (ssize_t)sizeof recs[0]);
  cr_assert_eq(read(to_parent[0], recs[1], sizeof recs[1]), (ssize_t)sizeof recs[1]);
  const void *records[2] = {recs[0], recs[1]};
  cr_assert_eq(symmpin_pool_attach(p, records), SYMMPIN_OK, "the child's chunk came by fd");
  symmpin_pool_settle(p, true);
  cr_assert_eq(write(to_child[1], "a", 1), 1);
  memset(symmpin_pool_addr(p, 0, 0), 0x22, 1000);
  char done = 0;
  cr_assert_eq(read(to_parent[0], &done, 1), 1);
  cr_expect_eq(done, 'y', "the child saw the parent's chunk and wrote its own");
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed");
  const unsigned char *child_chunk = symmpin_pool_addr(p, 1, 0);
  cr_expect_eq(child_chunk[0], 0x11, "the exited child's chunk still holds what it wrote");
  cr_expect_eq(child_chunk[999], 0x11);
  symmpin_pool_destroy(p);
  expect_nothing_left();
}

Test(pool_vmm, a_device_that_cannot_export_fds_is_unsupported_with_a_reason) {
  char why[120];
  cr_expect_eq(symmpin_pool_device_check(0, why, sizeof why), SYMMPIN_OK);
  cr_expect_str_empty(why);
  fd_export_supported = 0;
  cr_expect_eq(symmpin_pool_device_check(1, why, sizeof why), SYMMPIN_ERR_UNSUPPORTED);
  cr_expect(strstr(why, "device 1 cannot export memory as file descriptors") != NULL, "%s", why);
  cr_expect_eq(symmpin_pool_device_check(7, why, sizeof why), SYMMPIN_ERR_UNSUPPORTED,
               "a device the driver does not know");
}

/* A process whose driver symmpin could not open (too old, or no GPU: driver/cu.h leaves the
 * table all NULL): every pool function that needs the driver refuses -- the device check with the
 * driver's reason -- and none calls it (a call through the empty table would crash the test). */
Test(pool_vmm, without_a_usable_driver_every_pool_function_refuses) {
  driver_unusable();
  char why[200];
  cr_expect_eq(symmpin_pool_device_check(0, why, sizeof why), SYMMPIN_ERR_UNSUPPORTED);
  cr_expect(strstr(why, "CUDA 11.8") != NULL, "the driver's reason: %s", why);
  symmpin_pool_facts facts[2];
  memset(facts, 0, sizeof facts);
  cr_expect_eq(symmpin_pool_facts_get(0, &facts[0]), SYMMPIN_ERR_CUDA);
  cr_expect_eq(symmpin_pool_check_peers(facts, 2, why, sizeof why), SYMMPIN_ERR_CUDA);
  cr_expect_not(symmpin_pool_p2p_ok(0, 1));
  symmpin_pool *p;
  cr_assert_eq(symmpin_pool_create(0, 2, 0, &p), SYMMPIN_OK);
  unsigned char rec[SYMMPIN_POOL_EXPORT_BYTES];
  cr_expect_eq(symmpin_pool_reserve(p, 1000, rec), SYMMPIN_ERR_CUDA);
  symmpin_pool_destroy(p);
  cr_expect_null(cur_ctx, "the thread was given a context");
  cr_expect(!ctx_made[0] && !ctx_made[1], "a context was created");
  expect_nothing_left();
}

/* A thread with no device (symmpin's watch thread, which may free a pool): the pool's calls run on
 * its device and leave the thread without a context, never creating one on device 0. A thread
 * with another device current gets it back. */
Test(pool_vmm, a_thread_is_left_with_the_context_it_had) {
  cur_ctx = NULL;
  symmpin_pool *p;
  cr_assert_eq(symmpin_pool_create(0, 1, 1, &p), SYMMPIN_OK);
  grow(&p, 1, 1000);
  cr_expect_null(cur_ctx, "the thread was left with a context");
  symmpin_pool_destroy(p);
  cr_expect_null(cur_ctx, "the thread was left with a context");
  cr_expect_eq(ctx_made[0], 0, "a context was created on device 0");
  cr_expect_eq(ctx_made[1], 1);
  program_set_device(0);
  cr_assert_eq(symmpin_pool_create(0, 1, 1, &p), SYMMPIN_OK);
  grow(&p, 1, 1000);
  symmpin_pool_destroy(p);
  cr_expect_eq(cur_ctx, (CUcontext)(void *)&primary_ctx[0], "device 0 is no longer current");
  cr_expect_eq(cur_device, 0);
  expect_nothing_left();
}

/* ---- fdpass ------------------------------------------------------------------------------- */

Test(fdpass, a_fetch_gets_the_offered_file_and_nothing_else) {
  int fd = memfd_create("offered", MFD_CLOEXEC);
  cr_assert_geq(fd, 0);
  uint64_t token = 0;
  cr_assert_eq(symmpin_fdpass_offer(fd, 7, &token), SYMMPIN_OK);
  int got = -1;
  uint64_t me = symmpin_fdpass_process_token();
  cr_assert_eq(symmpin_fdpass_fetch(me, token, 1000, &got), SYMMPIN_OK);
  struct stat a, b;
  cr_assert_eq(fstat(fd, &a), 0);
  cr_assert_eq(fstat(got, &b), 0);
  cr_expect(a.st_ino == b.st_ino && a.st_dev == b.st_dev, "the same file");
  close(got);
  cr_expect_eq(symmpin_fdpass_fetch(me, token ^ 1, 1000, &got), SYMMPIN_ERR_DISAGREE,
               "a token never offered");
  symmpin_fdpass_withdraw(token);
  cr_expect_eq(symmpin_fdpass_fetch(me, token, 1000, &got), SYMMPIN_ERR_DISAGREE,
               "a withdrawn offer");
  cr_expect_eq(symmpin_fdpass_offers(), 0);
  close(fd);
}

Test(fdpass, a_process_that_is_gone_answers_nothing) {
  int got = -1;
  /* No server has this name: the fetch fails at once, it does not wait. */
  cr_expect_eq(symmpin_fdpass_fetch(symmpin_fdpass_process_token() ^ 0x5a5a, 1, 1000, &got),
               SYMMPIN_ERR_IO);
}

static symmpin_status note_handle(uint64_t h, void *arg) {
  *(uint64_t *)arg = h;
  return SYMMPIN_OK;
}

Test(fdpass, the_local_handle_is_reached_while_offered) {
  int fd = memfd_create("offered", MFD_CLOEXEC);
  uint64_t token = 0;
  cr_assert_eq(symmpin_fdpass_offer(fd, 1234, &token), SYMMPIN_OK);
  uint64_t seen = 0;
  symmpin_status st = symmpin_fdpass_with_local(token, note_handle, &seen);
  cr_expect_eq(st, SYMMPIN_OK);
  cr_expect_eq(seen, 1234u);
  symmpin_fdpass_withdraw(token);
  cr_expect_eq(symmpin_fdpass_with_local(token, NULL, NULL), SYMMPIN_ERR_DISAGREE);
  close(fd);
}

Test(fdpass, a_forked_child_is_a_process_of_its_own) {
  int fd = memfd_create("offered", MFD_CLOEXEC);
  uint64_t token = 0;
  cr_assert_eq(symmpin_fdpass_offer(fd, 1, &token), SYMMPIN_OK);
  uint64_t parent = symmpin_fdpass_process_token();
  int pipefd[2];
  cr_assert_eq(pipe(pipefd), 0);
  pid_t pid = fork();
  if (pid == 0) {
    /* A data-loader worker: a token of its own, none of the parent's offers, and the parent's
     * server still answers it. */
    int got = -1;
    char r[3] = {symmpin_fdpass_process_token() != parent ? 'y' : 'n',
                 symmpin_fdpass_offers() == 0 ? 'y' : 'n',
                 symmpin_fdpass_fetch(parent, token, 1000, &got) == SYMMPIN_OK ? 'y' : 'n'};
    _exit(write(pipefd[1], r, 3) == 3 ? 0 : 1);
  }
  char r[3] = {0};
  cr_assert_eq(read(pipefd[0], r, 3), 3);
  waitpid(pid, NULL, 0);
  cr_expect_eq(r[0], 'y', "the child has a new process token");
  cr_expect_eq(r[1], 'y', "the child holds none of the parent's offers");
  cr_expect_eq(r[2], 'y', "the parent still serves its offers after the fork");
  cr_expect_eq(symmpin_fdpass_offers(), 1, "the parent's offer is untouched");
  symmpin_fdpass_withdraw(token);
  close(fd);
}

/* The socket's name of this process, as fdpass.c makes it (an attacker can read the names of
 * abstract sockets in /proc/net/unix; it cannot read the tokens, which live in the 0600 board). */
static socklen_t server_address(struct sockaddr_un *a) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "symmpin-fd-%u-%016llx",
                   (unsigned)geteuid(), (unsigned long long)symmpin_fdpass_process_token());
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* A client that connects and then says nothing holds the server for at most its 200 ms limit:
 * a real fetch right behind it is still answered. */
Test(fdpass, a_silent_client_does_not_stop_the_server) {
  int fd = memfd_create("offered", MFD_CLOEXEC);
  uint64_t token = 0;
  cr_assert_eq(symmpin_fdpass_offer(fd, 1, &token), SYMMPIN_OK);
  int silent[4];
  struct sockaddr_un a;
  socklen_t alen = server_address(&a);
  for (int i = 0; i < 4; i++) {
    silent[i] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    cr_assert_eq(connect(silent[i], (struct sockaddr *)&a, alen), 0, "connect: %s",
                 strerror(errno));
  }
  int got = -1;
  cr_expect_eq(symmpin_fdpass_fetch(symmpin_fdpass_process_token(), token, 2000, &got),
               SYMMPIN_OK, "a fetch behind four silent clients");
  if (got >= 0) close(got);
  for (int i = 0; i < 4; i++) close(silent[i]);
  symmpin_fdpass_withdraw(token);
  close(fd);
}

/* Another user of the host (a child that drops to uid 65534; only when run as root): its fetch is
 * refused even with the right token -- it gets no file descriptor -- and its offers are not
 * reachable by us either (its server is not of our euid). */
Test(fdpass, another_user_gets_nothing) {
  if (geteuid() != 0) {
    cr_skip_test("needs root to become another user");
    return;
  }
  int fd = memfd_create("offered", MFD_CLOEXEC);
  uint64_t token = 0;
  cr_assert_eq(symmpin_fdpass_offer(fd, 1, &token), SYMMPIN_OK);
  uint64_t parent = symmpin_fdpass_process_token();
  int pipefd[2];
  cr_assert_eq(pipe(pipefd), 0);
  pid_t pid = fork();
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    /* fdpass's own client refuses a server of another user; an attacker writes its own client:
     * the request as fdpass.c's wire format has it (magic "SFD1", pad, token). */
    int got = -1;
    bool refused = symmpin_fdpass_fetch(parent, token, 1000, &got) != SYMMPIN_OK && got < 0;
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "symmpin-fd-0-%016llx",
                     (unsigned long long)parent);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    struct { uint32_t magic, pad; uint64_t token; } rq = {0x53464431u, 0, token};
    char reply[64];
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl;
    struct iovec iov = {.iov_base = reply, .iov_len = sizeof reply};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                       .msg_controllen = sizeof ctl.buf};
    bool connected = connect(s, (struct sockaddr *)&a, alen) == 0;
    if (connected && send(s, &rq, sizeof rq, MSG_NOSIGNAL) == (ssize_t)sizeof rq &&
        recvmsg(s, &m, 0) > 0 && m.msg_controllen > 0)
      refused = false; /* something came with a file descriptor */
    char r = !connected ? 'c' : refused ? 'y' : 'n';
    _exit(write(pipefd[1], &r, 1) == 1 ? 0 : 1);
  }
  char r = 0;
  cr_assert_eq(read(pipefd[0], &r, 1), 1);
  int status = 0;
  waitpid(pid, &status, 0);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
  cr_expect_eq(r, 'y', "another user fetched an offered fd (%c)", r);
  int got = -1;
  cr_expect_eq(symmpin_fdpass_fetch(parent, token, 1000, &got), SYMMPIN_OK,
               "the server still answers its own user");
  if (got >= 0) close(got);
  symmpin_fdpass_withdraw(token);
  close(fd);
}
