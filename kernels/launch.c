/* symmpin_kernel_launch, symmpin_kernel_launch_group and symmpin_kernel_device_check
 * (kernels/allreduce.h) on the host: the checks of a call, its kernel parameters, the kernels'
 * images and each device's choice among them, and the launches, all through the driver
 * (driver/cu.h). The device
 * code: kernels/allreduce.cu, embedded as one CUDA 12 cubin per architecture and PTX for newer
 * GPUs (kernels/images); its entry points are found by name (kernels/names.h). */
#include "kernels/allreduce.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "driver/cu.h"
#include "kernels/images/images.h"
#include "kernels/names.h"
#include "kernels/oneshot_layout.h"
#include "kernels/params.h"
#include "kernels/select.h"

/* ---- the entry points' names, from the lists (names.h) ---- */

#define STR_(x) #x
#define STR(x) STR_(x)
#define SYMMPIN_KERNEL_ENTRY(family, number, dtype, op)                                            \
  [SYMMPIN_KERNEL_INDEX(number, SYMMPIN_##dtype, SYMMPIN_##op)] =                                  \
      STR(SYMMPIN_KERNEL_NAME(family, dtype, op)),
/* NULL where a datatype or op has no kernel. */
static const char *const kernel_names[SYMMPIN_KERNEL_COUNT] = {SYMMPIN_KERNEL_ENTRIES};

static int kernel_index(int family, int dtype, int op) {
  if (family < 0 || family >= SYMMPIN_KERNEL_FAMILY_COUNT || dtype < 0 ||
      dtype >= SYMMPIN_DTYPE_COUNT || op < 0 || op >= SYMMPIN_OP_COUNT)
    return -1;
  int i = SYMMPIN_KERNEL_INDEX(family, dtype, op);
  return kernel_names[i] ? i : -1;
}

/* ---- the kernels' images and each device's choice among them ---- */

/* Each image is loaded once per process as a context-independent library (cuLibraryLoadData, CUDA
 * 12.0): its kernels are loaded into whichever context launches them, the device's primary one or
 * a context of the program's, and none dies with a context. Kept for the process: unloading a
 * library while a captured graph still launches its kernels would break the graph. */
#define MAX_IMAGES 16
static CUlibrary libraries[MAX_IMAGES];                             /* under load_lock */
static _Atomic(CUkernel) kernels[MAX_IMAGES][SYMMPIN_KERNEL_COUNT]; /* found at first use */

/* The kernels as functions of one context of a device (cuKernelGetFunction), each found at its
 * first launch there. Keyed by the context's id (cuCtxGetId: unique for the process's life), never
 * by its address: a context made after cudaDeviceReset or cuCtxDestroy can get the address of the
 * one that went, and that one's functions went with it. The key follows the context that launches:
 * a launch from another context (the device's new primary context after a reset, or a context of
 * the program's own beside it) re-keys the cache to it. Read without a lock: `seq` is odd while the
 * key changes (under load_lock), and a read counts only when `seq` was even and the same before
 * and after it (a seqlock), so no launch gets a function of another context. */
typedef struct fn_cache {
  _Atomic unsigned long seq;
  _Atomic unsigned long long ctx_id;
  _Atomic(CUfunction) fn[SYMMPIN_KERNEL_COUNT]; /* NULL: not found yet in this context */
} fn_cache;

#define MAX_DEVICES 64
typedef struct device_code {
  _Atomic int state; /* 0 not tried, 1 loaded, 2 no code or failed (why says why) */
  int cc;            /* compute capability x10, 0 unknown */
  int image;         /* the index in symmpin_kernel_images */
  bool pdl;          /* the LL kernel is launched with programmatic dependent launch */
  char why[256];
  fn_cache fns;
} device_code;
static device_code devices[MAX_DEVICES];
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* The device of the calling thread's current context, -1 if none. */
static int current_device(void) {
  CUdevice dev = -1;
  if (!symmpin_cu_usable() || symmpin_cu.CtxGetDevice(&dev) != CUDA_SUCCESS) return -1;
  return (int)dev;
}

static CUkernel kernel_of(int image, int index) {
  CUkernel k = atomic_load_explicit(&kernels[image][index], memory_order_acquire);
  if (k) return k;
  CUresult r = symmpin_cu.LibraryGetKernel(&k, libraries[image], kernel_names[index]);
  if (r != CUDA_SUCCESS) {
    SYMMPIN_WARN("all-reduce kernel: %s not found in the loaded image: %s", kernel_names[index],
                 symmpin_cu_error_name(r));
    return NULL;
  }
  atomic_store_explicit(&kernels[image][index], k, memory_order_release);
  return k;
}

/* Kernel `index` in the context `ctx_id`, if the cache has it; NULL if not, or if the cache
 * changed key meanwhile. */
static CUfunction fn_cache_find(fn_cache *c, unsigned long long ctx_id, int index) {
  unsigned long seq = atomic_load(&c->seq);
  if ((seq & 1) || atomic_load(&c->ctx_id) != ctx_id) return NULL;
  CUfunction f = atomic_load(&c->fn[index]);
  return atomic_load(&c->seq) == seq ? f : NULL;
}

/* Keep kernel `index`'s function `f` of context `ctx_id`, the cache emptied and re-keyed first if
 * it held another context's. */
static void fn_cache_keep(fn_cache *c, unsigned long long ctx_id, int index, CUfunction f) {
  pthread_mutex_lock(&load_lock);
  if (atomic_load(&c->ctx_id) != ctx_id) {
    atomic_fetch_add(&c->seq, 1); /* odd: readers miss while the key and the functions change */
    atomic_store(&c->ctx_id, ctx_id);
    for (int i = 0; i < SYMMPIN_KERNEL_COUNT; i++) atomic_store(&c->fn[i], NULL);
    atomic_fetch_add(&c->seq, 1);
  }
  atomic_store(&c->fn[index], f);
  pthread_mutex_unlock(&load_lock);
}

/* Kernel `index` of the device's image as a function of the current context. */
static CUfunction function_of(device_code *d, int index) {
  unsigned long long ctx_id = 0;
  bool keyed = symmpin_cu.CtxGetId(NULL, &ctx_id) == CUDA_SUCCESS;
  CUfunction f = keyed ? fn_cache_find(&d->fns, ctx_id, index) : NULL;
  if (f) return f;
  CUkernel k = kernel_of(d->image, index);
  if (!k) return NULL;
  CUresult r = symmpin_cu.KernelGetFunction(&f, k);
  if (r != CUDA_SUCCESS) {
    SYMMPIN_WARN("all-reduce kernel: %s cannot be loaded into the current context: %s",
                 kernel_names[index], symmpin_cu_error_name(r));
    return NULL;
  }
  if (keyed) fn_cache_keep(&d->fns, ctx_id, index, f);
  return f;
}

/* Load image i (under load_lock) and load its probe kernel into the current context: with lazy
 * loading (CUDA 12.2+) nothing else would load before the first launch. */
static CUresult image_load(int i) {
  CUresult r = CUDA_SUCCESS;
  if (!libraries[i])
    r = symmpin_cu.LibraryLoadData(&libraries[i], symmpin_kernel_images[i].data, NULL, NULL, 0,
                                   NULL, NULL, 0);
  int probe = kernel_index(SYMMPIN_ALGO_ONESHOT_LL, SYMMPIN_FLOAT32, SYMMPIN_SUM);
  CUkernel k = NULL;
  CUfunction f = NULL;
  if (r == CUDA_SUCCESS && probe >= 0)
    r = symmpin_cu.LibraryGetKernel(&k, libraries[i], kernel_names[probe]);
  if (r == CUDA_SUCCESS) r = symmpin_cu.KernelGetFunction(&f, k);
  if (r == CUDA_SUCCESS) atomic_store(&kernels[i][probe], k);
  return r;
}

/* "sm_90 cubin", "compute_90 PTX": image i as the log names it. */
static const char *image_name(int i, char *buf, size_t len) {
  const symmpin_kernel_image *im = &symmpin_kernel_images[i];
  snprintf(buf, len, "%s_%d %s", im->is_ptx ? "compute" : "sm", im->arch,
           im->is_ptx ? "PTX" : "cubin");
  return buf;
}

/* The driver refused the cubin picked for the device (`refused`): give it the PTX for the GPU, if
 * the build carries one, which the driver compiles (docs/compatibility.md). Returns the PTX's
 * outcome and makes it d->image; `refused` with d->image unchanged when there is none. Logs which
 * image serves and appends what was tried to `tried` (for d->why, if nothing serves). */
static CUresult load_ptx_instead(int device, device_code *d, const int *arch, const int *is_ptx,
                                 int n, CUresult refused, char *tried, size_t len) {
  int ptx = symmpin_kernel_image_pick_ptx(arch, is_ptx, n, d->cc);
  size_t at = strlen(tried);
  if (ptx < 0) {
    snprintf(tried + at, len - at, ", and there is no PTX for it");
    return refused;
  }
  char cubin_name[32], ptx_name[32];
  image_name(d->image, cubin_name, sizeof cubin_name);
  image_name(ptx, ptx_name, sizeof ptx_name);
  CUresult r = image_load(ptx);
  SYMMPIN_INFO("device %d: the driver refused the %s (%s); the %s %s", device, cubin_name,
               symmpin_cu_error_name(refused), ptx_name,
               r == CUDA_SUCCESS ? "serves instead" : "failed too");
  snprintf(tried + at, len - at, "; the %s: %s", ptx_name, symmpin_cu_error_name(r));
  d->image = ptx;
  return r;
}

/* Whether the device's LL and group launches take programmatic dependent launch (select.h), and
 * the INFO line naming the image that serves the device, with or without PDL: why not, where only
 * the driver's version keeps it off. */
static void pdl_decide(int device, device_code *d) {
  int code_arch = symmpin_kernel_images[d->image].arch;
  int driver = symmpin_cu_open()->driver_version;
  d->pdl = symmpin_kernel_pdl_usable(d->cc, code_arch, driver);
  char no_pdl[96] = "", name[32];
  if (!d->pdl && symmpin_kernel_pdl_usable(d->cc, code_arch, SYMMPIN_KERNEL_PDL_MIN_DRIVER))
    snprintf(no_pdl, sizeof no_pdl,
             " (the driver supports CUDA %d.%d; symmpin uses it from %d.%d on)", driver / 1000,
             driver % 1000 / 10, SYMMPIN_KERNEL_PDL_MIN_DRIVER / 1000,
             SYMMPIN_KERNEL_PDL_MIN_DRIVER % 1000 / 10);
  SYMMPIN_INFO("device %d (sm_%d): symmpin's kernels from the %s, %s programmatic dependent "
               "launch%s",
               device, d->cc, image_name(d->image, name, sizeof name), d->pdl ? "with" : "without",
               no_pdl);
}

/* The compute capability of `device`, x10; 0 where the driver does not say. */
static int compute_capability(int device) {
  CUdevice dev;
  int major = 0, minor = 0;
  if (symmpin_cu.DeviceGet(&dev, device) == CUDA_SUCCESS &&
      symmpin_cu.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ==
          CUDA_SUCCESS &&
      symmpin_cu.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) ==
          CUDA_SUCCESS)
    return major * 10 + minor;
  return 0;
}

static void load(int device, device_code *d) {
  d->cc = compute_capability(device);
  int arch[MAX_IMAGES], is_ptx[MAX_IMAGES], n = 0;
  for (; n < symmpin_kernel_image_count && n < MAX_IMAGES; n++) {
    arch[n] = symmpin_kernel_images[n].arch;
    is_ptx[n] = symmpin_kernel_images[n].is_ptx;
  }
  d->image = d->cc > 0 ? symmpin_kernel_image_pick(arch, is_ptx, n, d->cc) : -1;
  CUresult r = d->image >= 0 ? image_load(d->image) : CUDA_SUCCESS;
  char name[32], tried[160]; /* what the driver refused */
  if (r != CUDA_SUCCESS) {
    snprintf(tried, sizeof tried, "the %s: %s", image_name(d->image, name, sizeof name),
             symmpin_cu_error_name(r));
    if (!is_ptx[d->image]) r = load_ptx_instead(device, d, arch, is_ptx, n, r, tried, sizeof tried);
  }
  if (r != CUDA_SUCCESS) {
    /* Code exists for this GPU, and the driver would not load it: say so (not "no code"). */
    snprintf(d->why, sizeof d->why,
             "the CUDA driver cannot load symmpin's kernels for device %d (sm_%d): %s", device,
             d->cc, tried);
    atomic_store(&d->state, 2);
    return;
  }
  /* The words of the refusal (select.c); the code, when there is some, decides PDL. */
  if (symmpin_kernel_arch_check(device, d->cc, d->image >= 0, NULL, d->why, sizeof d->why) !=
      SYMMPIN_OK) {
    atomic_store(&d->state, 2);
    return;
  }
  pdl_decide(device, d);
  atomic_store(&d->state, 1);
}

/* The current device's code, loaded at the first call on it; NULL (why set) if it has none. */
static device_code *device_code_get(int *device_out) {
  int device = current_device();
  if (device_out) *device_out = device;
  if (device < 0 || device >= MAX_DEVICES) return NULL;
  device_code *d = &devices[device];
  if (atomic_load(&d->state) == 0) {
    pthread_mutex_lock(&load_lock);
    if (atomic_load(&d->state) == 0) load(device, d);
    pthread_mutex_unlock(&load_lock);
  }
  return atomic_load(&d->state) == 1 ? d : NULL;
}

/* Every refusal below is logged here, once, where it starts (the caller only falls back). */
symmpin_status symmpin_kernel_device_check(char *why, size_t why_len) {
  int device = -1;
  device_code *d = device_code_get(&device);
  if (d) {
    if (why && why_len) why[0] = '\0';
    return SYMMPIN_OK;
  }
  if (why && why_len) {
    if (device >= 0 && device < MAX_DEVICES)
      snprintf(why, why_len, "%s", devices[device].why);
    else if (!symmpin_cu_usable())
      snprintf(why, why_len, "the CUDA driver cannot serve symmpin: %s", symmpin_cu_open()->why);
    else
      snprintf(why, why_len, "no CUDA device is current on this thread");
  }
  return SYMMPIN_ERR_UNSUPPORTED;
}

/* ---- one call's checks and parameters ---- */

static bool overlaps(const void *a, size_t an, const void *b, size_t bn) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y + bn && y < x + an;
}

/* The kernel of a call: an all-gather copies bytes, so any (datatype, op) entry point runs it; it
 * takes its datatype's SUM one. */
static int call_op(const symmpin_kernel_call *c) {
  return symmpin_coll_reduces(c->coll) ? c->op : SYMMPIN_SUM;
}

/* Where the call's buffers may overlap: identical all-reduce buffers, NCCL's in-place forms of the
 * other two (threads read every byte they later write themselves, kernels/oneshot.cuh). Anything
 * else (shifted overlaps, a buffer inside the slot's staging) is refused. */
static bool buffers_ok(const symmpin_kernel_call *c, size_t bytes, size_t send_bytes,
                       size_t recv_bytes, const char *own) {
  const char *send = (const char *)c->send, *recv = (const char *)c->recv;
  if (overlaps(send, send_bytes, own, c->slot_bytes) ||
      overlaps(recv, recv_bytes, own, c->slot_bytes))
    return false;
  if (!overlaps(send, send_bytes, recv, recv_bytes)) return true;
  switch (c->coll) {
  case SYMMPIN_COLL_ALLREDUCE: return send == recv;
  case SYMMPIN_COLL_ALLGATHER: return send == recv + (size_t)c->rank * bytes;
  case SYMMPIN_COLL_REDUCESCATTER: return recv == send + (size_t)c->rank * bytes;
  default: return false;
  }
}

/* Check one call and fill its kernel parameters, algorithm and geometry. Every refusal is logged
 * here, once, where it starts (the caller only falls back). SYMMPIN_OK with g->blocks == 0: count
 * 0, nothing to launch. */
static symmpin_status prepare(const symmpin_kernel_call *c, symmpin_kernel_params *P,
                              symmpin_kernel_algo *algo, symmpin_kernel_geometry *g) {
  if (!c || c->nranks < 1 || c->nranks > SYMMPIN_KERNEL_MAX_RANKS || c->rank < 0 ||
      c->rank >= c->nranks || c->coll < 0 || c->coll >= SYMMPIN_COLL_COUNT ||
      (c->input != SYMMPIN_INPUT_STAGED && c->input != SYMMPIN_INPUT_IN_SLOT)) {
    if (c)
      SYMMPIN_WARN("collective kernel: bad call (%s, rank %d of %d, input form %d)",
                   symmpin_coll_name(c->coll), c->rank, c->nranks, (int)c->input);
    else
      SYMMPIN_WARN("collective kernel: bad call (NULL)");
    return SYMMPIN_ERR_INVALID;
  }
  const char *coll = symmpin_coll_name(c->coll);
  if (!symmpin_kernel_supports(c->coll, c->dtype, c->op)) {
    SYMMPIN_WARN("%s kernel: datatype %d / op %d not supported", coll, c->dtype, c->op);
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  if (c->coll != SYMMPIN_COLL_ALLREDUCE && c->input != SYMMPIN_INPUT_STAGED) {
    SYMMPIN_WARN("%s kernel: staged input only", coll);
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  *g = (symmpin_kernel_geometry){0, 0};
  if (c->count == 0) return SYMMPIN_OK; /* nothing to move; every rank skips alike */
  size_t need = symmpin_kernel_slot_bytes(c->coll, c->count, c->dtype, c->nranks, c->input);
  if (need == 0) {
    SYMMPIN_WARN("%s kernel: count %zu too large", coll, c->count);
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  if (c->slot_bytes < need) {
    SYMMPIN_WARN("%s kernel: slot of %zu bytes, call needs %zu", coll, c->slot_bytes, need);
    return SYMMPIN_ERR_INVALID;
  }
  for (int r = 0; r < c->nranks; r++) {
    if (!c->slot[r] || ((uintptr_t)c->slot[r] % SYMMPIN_ONESHOT_UNIT_BYTES) != 0) {
      SYMMPIN_WARN("%s kernel: slot of rank %d is NULL or not 16-byte aligned", coll, r);
      return SYMMPIN_ERR_INVALID;
    }
  }
  size_t esize = symmpin_dtype_size(c->dtype);
  size_t bytes = c->count * esize;
  size_t send_bytes = symmpin_coll_send_count(c->coll, c->count, c->nranks) * esize;
  size_t recv_bytes = symmpin_coll_recv_count(c->coll, c->count, c->nranks) * esize;
  if (!c->recv || (c->input == SYMMPIN_INPUT_STAGED && !c->send)) {
    SYMMPIN_WARN("%s kernel: NULL buffer", coll);
    return SYMMPIN_ERR_INVALID;
  }
  const char *own = (const char *)c->slot[c->rank];
  char *data = (char *)c->slot[c->rank] + symmpin_kernel_in_slot_offset();
  int inplace_slot = 0;
  if (c->input == SYMMPIN_INPUT_STAGED) {
    if (!buffers_ok(c, bytes, send_bytes, recv_bytes, own)) {
      SYMMPIN_WARN("%s kernel: staged buffers overlap each other (other than in place) or the "
                   "slot",
                   coll);
      return SYMMPIN_ERR_UNSUPPORTED;
    }
  } else if (overlaps(c->recv, bytes, own, c->slot_bytes)) {
    if (c->recv != data) {
      SYMMPIN_WARN("all-reduce kernel: in-slot recv overlaps the slot but is not its data area");
      return SYMMPIN_ERR_UNSUPPORTED;
    }
    inplace_slot = 1;
  }

  *algo = symmpin_kernel_algo_for(c->coll, c->count, c->dtype, c->nranks, c->input);
  *g = symmpin_kernel_geometry_for(c->coll, c->count, c->dtype, c->nranks, c->input);
  if (kernel_index((int)*algo, c->dtype, call_op(c)) < 0 || g->blocks == 0) {
    SYMMPIN_WARN("%s kernel: no kernel for dtype %d op %d (algorithm %d)", coll, c->dtype, c->op,
                 (int)*algo);
    return SYMMPIN_ERR_INTERNAL;
  }
  memset(P, 0, sizeof *P);
  for (int r = 0; r < c->nranks; r++) P->slot[r] = (char *)c->slot[r];
  P->send = (const char *)c->send;
  P->recv = (char *)c->recv;
  P->bytes = bytes;
  P->units = symmpin_oneshot_units(c->count, c->dtype, *algo);
  P->coll = c->coll;
  P->rank = c->rank;
  P->nranks = c->nranks;
  P->inplace_slot = inplace_slot;
  P->site = c->site;
  P->timeout = c->timeout_cycles;
  P->error = c->error;
  P->id = c->call_id;
  return SYMMPIN_OK;
}

/* ---- launches ---- */

/* Launch entry point `index` with `params` on `stream`; with programmatic dependent launch when
 * asked and the device's code has it (kernels/device.cuh, griddep_wait()). */
static symmpin_status launch_on(int index, void *params, symmpin_kernel_geometry g, void *stream,
                                bool pdl_wanted) {
  device_code *d = device_code_get(NULL);
  CUfunction fn = d ? function_of(d, index) : NULL;
  if (!fn) {
    if (!d) SYMMPIN_WARN("all-reduce kernel: no kernel code for the current device");
    return SYMMPIN_ERR_CUDA;
  }
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = g.blocks;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = g.threads;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = (CUstream)stream;
  CUlaunchAttribute pdl[1];
  memset(pdl, 0, sizeof pdl);
  pdl[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  pdl[0].value.programmaticStreamSerializationAllowed = 1;
  if (pdl_wanted && d->pdl) {
    cfg.attrs = pdl;
    cfg.numAttrs = 1;
  }
  void *args[1] = {params};
  CUresult r = symmpin_cu.LaunchKernelEx(&cfg, fn, args, NULL);
  if (r != CUDA_SUCCESS) {
    SYMMPIN_WARN("all-reduce kernel: launch failed: %s", symmpin_cu_error_name(r));
    return SYMMPIN_ERR_CUDA;
  }
  return SYMMPIN_OK;
}

symmpin_status symmpin_kernel_launch(const symmpin_kernel_call *c, void *stream) {
  symmpin_kernel_params P;
  symmpin_kernel_algo algo = SYMMPIN_ALGO_ONESHOT_LL;
  symmpin_kernel_geometry g;
  symmpin_status st = prepare(c, &P, &algo, &g);
  if (st != SYMMPIN_OK || g.blocks == 0) return st;
  /* The latency-bound algorithm takes programmatic dependent launch: see griddep_wait(). */
  return launch_on(kernel_index((int)algo, c->dtype, call_op(c)), &P, g, stream,
                   algo == SYMMPIN_ALGO_ONESHOT_LL);
}

/* The most blocks one group launch has: each call gets blocks of its own, and a group that needs
 * more is launched in parts. One call's cap (SYMMPIN_ONESHOT_MAX_BLOCKS), so that the co-residency
 * argument of docs/kernels.md "Geometry" holds for groups too: 128 failed on 2 x H200 with 8
 * simulated ranks (4 grids of up to 128 spin-waiting blocks per GPU cannot all be resident). */
#define GROUP_MAX_BLOCKS SYMMPIN_ONESHOT_MAX_BLOCKS

symmpin_status symmpin_kernel_launch_group(const symmpin_kernel_call *calls, int n, void *stream) {
  if (!calls || n < 1 || n > SYMMPIN_KERNEL_GROUP_MAX) {
    SYMMPIN_WARN("collective kernel: bad group of %d calls", n);
    return SYMMPIN_ERR_INVALID;
  }
  /* The group's kernel: its reducing calls' datatype and op (the first one's); all-gathers copy
   * bytes in any kernel, so a group of all-gathers only takes the first one's. */
  const symmpin_kernel_call *key = &calls[0];
  for (int i = 0; i < n; i++)
    if (symmpin_coll_reduces(calls[i].coll)) {
      key = &calls[i];
      break;
    }
  /* Check every call before launching any part. */
  for (int i = 0; i < n; i++) {
    const symmpin_kernel_call *c = &calls[i];
    if ((symmpin_coll_reduces(c->coll) && (c->dtype != key->dtype || c->op != key->op)) ||
        c->input != SYMMPIN_INPUT_STAGED) {
      SYMMPIN_WARN("collective kernel: a group mixes datatypes, ops or input forms");
      return SYMMPIN_ERR_INVALID;
    }
    for (int j = 0; j < i; j++)
      if (overlaps(c->slot[c->rank], c->slot_bytes, calls[j].slot[calls[j].rank],
                   calls[j].slot_bytes)) {
        SYMMPIN_WARN("collective kernel: calls %d and %d of a group share slot bytes", j, i);
        return SYMMPIN_ERR_INVALID;
      }
    symmpin_kernel_params P;
    symmpin_kernel_algo algo = SYMMPIN_ALGO_ONESHOT_LL;
    symmpin_kernel_geometry g;
    symmpin_status st = prepare(c, &P, &algo, &g);
    if (st != SYMMPIN_OK) return st;
  }
  int index = kernel_index(SYMMPIN_KERNEL_FAMILY_GROUP, key->dtype, call_op(key));
  if (index < 0) return SYMMPIN_ERR_INTERNAL; /* supports() said yes: every family has it */
  /* Then the launches: calls in order, each on blocks of its own, a new launch whenever the next
   * call's blocks would pass GROUP_MAX_BLOCKS. */
  symmpin_kernel_group_params G;
  memset(&G, 0, sizeof G);
  symmpin_kernel_geometry grid = {0, 0};
  for (int i = 0; i < n; i++) {
    symmpin_kernel_algo algo = SYMMPIN_ALGO_ONESHOT_LL;
    symmpin_kernel_geometry g;
    (void)prepare(&calls[i], &G.call[G.n], &algo, &g); /* checked above */
    if (g.blocks == 0) continue;                       /* count 0 */
    if (G.n > 0 && grid.blocks + g.blocks > (unsigned)GROUP_MAX_BLOCKS) {
      symmpin_status st = launch_on(index, &G, grid, stream, true);
      if (st != SYMMPIN_OK) return st;
      G.call[0] = G.call[G.n];
      G.n = 0;
      grid = (symmpin_kernel_geometry){0, 0};
    }
    G.algo[G.n] = (unsigned char)algo;
    G.first[G.n] = (unsigned short)grid.blocks;
    G.blocks[G.n] = (unsigned short)g.blocks;
    G.threads[G.n] = (unsigned short)g.threads;
    G.n++;
    grid.blocks += g.blocks;
    if (g.threads > grid.threads) grid.threads = g.threads;
  }
  if (G.n == 0) return SYMMPIN_OK;
  return launch_on(index, &G, grid, stream, true);
}
