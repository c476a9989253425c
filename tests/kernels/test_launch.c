/* CPU tests of the kernels' launcher (kernels/launch.c): which image it loads for a device and what
 * it does when the driver refuses one, the kernel functions it keeps per context, and where it
 * asks for programmatic dependent launch.
 *
 * FAKE: launch.c is compiled into this test against a stand-in driver defined below -- the table
 * symmpin_cu of driver/cu.h and symmpin_cu_open/usable/error_name, without libcuda or driver/cu.c
 * -- and stand-in images (kernels/images/images.h's table: an sm_80 and an sm_90 "cubin", then a
 * compute_90 "PTX", as a default build orders them). The stand-in driver:
 *  - reports the CUDA version a test sets (default 12.0, the oldest driver symmpin takes) and
 *    devices of the compute capability a test sets (default 9.0);
 *  - keeps contexts in a fixed array: a context destroyed and made again in its place has the
 *    same address and a new id (cuCtxGetId), as the CUDA driver may give a destroyed context's
 *    address to the next one made (after cudaDeviceReset, or any cuCtxDestroy);
 *  - loads libraries from the images (a cubin, ELF, is refused on request: at the load, or when
 *    its kernel is loaded into a context; PTX too on request), finds kernels by name, and gives a
 *    function per context and kernel (cuKernelGetFunction) that dies with its context;
 *  - fails a launch with a function of another context or of a destroyed one
 *    (CUDA_ERROR_INVALID_HANDLE: a function of an unloaded module, the kindest outcome the real
 *    driver has for it), and records every launch (its context, image, kernel and attributes).
 * Nothing runs. Criterion runs every test in its own process, so launch.c's per-process state
 * (loaded images, each device's choice, the functions it keeps) starts fresh in each. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "driver/cu.h"
#include "kernels/allreduce.h"
#include "kernels/images/images.h"
#include "kernels/select.h"

/* ---- stand-in images: what kernels/images/embed.py generates, in its order ---- */

static const unsigned char sm80_cubin[] = "\177ELF sm_80";
static const unsigned char sm90_cubin[] = "\177ELF sm_90";
static const unsigned char compute90_ptx[] = ".version 8.0\n.target sm_90\n";
const symmpin_kernel_image symmpin_kernel_images[] = {
    {80, 0, sm80_cubin, sizeof sm80_cubin},
    {90, 0, sm90_cubin, sizeof sm90_cubin},
    {90, 1, compute90_ptx, sizeof compute90_ptx},
};
const int symmpin_kernel_image_count = 3;
enum { IMG_SM80, IMG_SM90, IMG_PTX90, IMAGES };

/* ---- stand-in driver: settings ---- */

static int driver_version = 12000;
static int gpu_cc = 90;
static bool capturing; /* the program captures a graph: launches are recorded as captured */
typedef enum { REFUSE_NONE, REFUSE_AT_LOAD, REFUSE_IN_CONTEXT } refusal;
static refusal refuse_cubins, refuse_ptx;

/* ---- contexts ---- */

typedef struct fake_ctx {
  int device;
  _Atomic unsigned long long id; /* 0: destroyed (or never made) */
} fake_ctx;
#define CTXS 4
static fake_ctx ctxs[CTXS];
static _Atomic unsigned long long last_ctx_id;
static __thread fake_ctx *current;

/* Make context `slot` on `device` (again: same address, new id) and make it current here. */
static CUcontext ctx_make(int slot, int device) {
  ctxs[slot].device = device;
  atomic_store(&ctxs[slot].id, atomic_fetch_add(&last_ctx_id, 1) + 1);
  current = &ctxs[slot];
  return (CUcontext)&ctxs[slot];
}

/* Destroy context `slot`: its functions die with it (a launch of one fails from now on). */
static void ctx_destroy(int slot) { atomic_store(&ctxs[slot].id, 0); }

static unsigned long long ctx_id(int slot) { return atomic_load(&ctxs[slot].id); }

static void ctx_set(int slot) { current = slot < 0 ? NULL : &ctxs[slot]; }

static bool alive(const fake_ctx *c) { return c && atomic_load(&c->id) != 0; }

/* ---- libraries, kernels, functions: handles are pointers to these (never freed) ---- */

typedef struct fake_lib {
  int image;
} fake_lib;
static fake_lib libs[IMAGES];

typedef struct fake_kernel {
  int image;
  char name[64];
} fake_kernel;

typedef struct fake_fn {
  unsigned long long ctx_id; /* the context it was loaded into */
  const fake_kernel *kernel;
} fake_fn;

/* What the driver was asked, and every launch; under `lock` (threads launch at once). */
typedef struct launch_rec {
  unsigned long long ctx_id;
  int image;
  char name[64];
  unsigned num_attrs;
  bool pdl;      /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, allowed */
  bool captured; /* made while the program captured a graph */
} launch_rec;
#define MAX_LAUNCHES 64
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static launch_rec launches[MAX_LAUNCHES];
static int nlaunches;     /* recorded (the first MAX_LAUNCHES) */
static long launched;     /* succeeded, all of them */
static long bad_handles;  /* launches refused for a function of another or a dead context */
static int loads[IMAGES]; /* cuLibraryLoadData per image */
static int functions;     /* cuKernelGetFunction that gave a function */

/* A driver object (kernel, function): the driver owns it, the launcher may drop its handle (the
 * probe's function), so every one stays on this list, never freed (no leak for LeakSanitizer). */
typedef struct driver_object {
  struct driver_object *next;
  _Alignas(max_align_t) unsigned char body[];
} driver_object;
static driver_object *objects; /* under lock */

static void *object_new(size_t size) {
  driver_object *o = calloc(1, sizeof *o + size);
  cr_assert_not_null(o);
  pthread_mutex_lock(&lock);
  o->next = objects;
  objects = o;
  pthread_mutex_unlock(&lock);
  return o->body;
}

static bool is_cubin(const void *code) { return memcmp(code, "\177ELF", 4) == 0; }

static refusal refusal_of(int image) {
  return symmpin_kernel_images[image].is_ptx ? refuse_ptx : refuse_cubins;
}

static CUresult fake_get_error_name(CUresult e, const char **name) {
  switch (e) {
  case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; break;
  case CUDA_ERROR_INVALID_IMAGE: *name = "CUDA_ERROR_INVALID_IMAGE"; break;
  case CUDA_ERROR_NO_BINARY_FOR_GPU: *name = "CUDA_ERROR_NO_BINARY_FOR_GPU"; break;
  case CUDA_ERROR_INVALID_HANDLE: *name = "CUDA_ERROR_INVALID_HANDLE"; break;
  case CUDA_ERROR_INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; break;
  default: *name = "CUDA_ERROR_STAND_IN"; break;
  }
  return CUDA_SUCCESS;
}

static CUresult fake_device_get(CUdevice *dev, int ordinal) {
  *dev = ordinal;
  return CUDA_SUCCESS;
}

static CUresult fake_device_attribute(int *v, CUdevice_attribute a, CUdevice dev) {
  (void)dev;
  if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    *v = gpu_cc / 10;
  else if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    *v = gpu_cc % 10;
  else
    return CUDA_ERROR_NOT_SUPPORTED;
  return CUDA_SUCCESS;
}

static CUresult fake_ctx_get_current(CUcontext *ctx) {
  *ctx = (CUcontext)current;
  return CUDA_SUCCESS;
}

static CUresult fake_ctx_get_device(CUdevice *dev) {
  if (!alive(current)) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = current->device;
  return CUDA_SUCCESS;
}

/* NULL: the current context's id, as the driver answers. */
static CUresult fake_ctx_get_id(CUcontext ctx, unsigned long long *id) {
  fake_ctx *c = ctx ? (fake_ctx *)ctx : current;
  if (!alive(c)) return CUDA_ERROR_INVALID_CONTEXT;
  *id = atomic_load(&c->id);
  return CUDA_SUCCESS;
}

static CUresult fake_library_load(CUlibrary *lib, const void *code, CUjit_option *jo, void **jv,
                                  unsigned nj, CUlibraryOption *lo, void **lv, unsigned nl) {
  (void)jo, (void)jv, (void)nj, (void)lo, (void)lv, (void)nl;
  int i = 0;
  while (i < IMAGES && symmpin_kernel_images[i].data != code) i++;
  cr_assert_lt(i, IMAGES, "a library loaded from something else than an image");
  cr_assert_eq(is_cubin(code), !symmpin_kernel_images[i].is_ptx);
  pthread_mutex_lock(&lock);
  loads[i]++;
  pthread_mutex_unlock(&lock);
  if (refusal_of(i) == REFUSE_AT_LOAD) return CUDA_ERROR_INVALID_IMAGE;
  libs[i].image = i;
  *lib = (CUlibrary)&libs[i];
  return CUDA_SUCCESS;
}

static CUresult fake_library_get_kernel(CUkernel *k, CUlibrary lib, const char *name) {
  fake_kernel *fk = object_new(sizeof *fk);
  fk->image = ((fake_lib *)lib)->image;
  snprintf(fk->name, sizeof fk->name, "%s", name);
  *k = (CUkernel)fk;
  return CUDA_SUCCESS;
}

static CUresult fake_kernel_get_function(CUfunction *f, CUkernel k) {
  const fake_kernel *fk = (const fake_kernel *)k;
  if (!alive(current)) return CUDA_ERROR_INVALID_CONTEXT;
  if (refusal_of(fk->image) == REFUSE_IN_CONTEXT) return CUDA_ERROR_NO_BINARY_FOR_GPU;
  fake_fn *fn = object_new(sizeof *fn);
  fn->ctx_id = atomic_load(&current->id);
  fn->kernel = fk;
  pthread_mutex_lock(&lock);
  functions++;
  pthread_mutex_unlock(&lock);
  *f = (CUfunction)fn;
  return CUDA_SUCCESS;
}

static CUresult fake_launch(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra) {
  (void)params, (void)extra;
  const fake_fn *fn = (const fake_fn *)f;
  bool ok = alive(current) && fn->ctx_id == atomic_load(&current->id);
  pthread_mutex_lock(&lock);
  if (!ok) {
    bad_handles++;
  } else {
    if (nlaunches < MAX_LAUNCHES) {
      launch_rec *r = &launches[nlaunches++];
      r->ctx_id = fn->ctx_id;
      r->image = fn->kernel->image;
      snprintf(r->name, sizeof r->name, "%s", fn->kernel->name);
      r->num_attrs = cfg->numAttrs;
      r->captured = capturing;
      for (unsigned i = 0; i < cfg->numAttrs; i++)
        if (cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
            cfg->attrs[i].value.programmaticStreamSerializationAllowed)
          r->pdl = true;
    }
    launched++;
  }
  pthread_mutex_unlock(&lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* The table (driver/cu.h): what launch.c calls; every other entry stays NULL, so a call through
 * one is a crash that names a new dependency. */
symmpin_cu_table symmpin_cu = {
    .GetErrorName = fake_get_error_name,
    .DeviceGet = fake_device_get,
    .DeviceGetAttribute = fake_device_attribute,
    .CtxGetCurrent = fake_ctx_get_current,
    .CtxGetDevice = fake_ctx_get_device,
    .CtxGetId = fake_ctx_get_id,
    .LibraryLoadData = fake_library_load,
    .LibraryGetKernel = fake_library_get_kernel,
    .KernelGetFunction = fake_kernel_get_function,
    .LaunchKernelEx = fake_launch,
};

/* FAKE driver/cu.c: a driver of the version the test set, that every entry point resolved from. */
static symmpin_cu_state stand_in_state = {.usable = true};
const symmpin_cu_state *symmpin_cu_open(void) {
  stand_in_state.driver_version = driver_version;
  return &stand_in_state;
}
bool symmpin_cu_usable(void) { return true; }
const char *symmpin_cu_error_name(CUresult e) {
  const char *name = NULL;
  fake_get_error_name(e, &name);
  return name;
}

/* ---- calls ---- */

#define SLOT_BYTES ((size_t)4 << 20)
#define RANKS 2

/* Two ranks' slots and rank 0's buffers in host memory: the launcher only checks and passes them
 * on (nothing runs). Slot s of rank r at slot_mem[r][s]; a group takes slots 0..n-1. */
static char *slot_mem[RANKS][SYMMPIN_KERNEL_GROUP_MAX];
static char *send_buf, *recv_buf;

static void buffers(void) {
  for (int r = 0; r < RANKS; r++)
    for (int s = 0; s < SYMMPIN_KERNEL_GROUP_MAX; s++)
      slot_mem[r][s] = aligned_alloc(4096, SLOT_BYTES);
  send_buf = aligned_alloc(4096, SLOT_BYTES);
  recv_buf = aligned_alloc(4096, SLOT_BYTES);
}

/* Rank 0's all-reduce (sum) of `count` elements of `dtype` on slot `slot`, staged. */
static symmpin_kernel_call call_of(size_t count, int dtype, int slot) {
  if (!send_buf) buffers();
  symmpin_kernel_call c;
  memset(&c, 0, sizeof c);
  for (int r = 0; r < RANKS; r++) c.slot[r] = slot_mem[r][slot];
  c.slot_bytes = SLOT_BYTES;
  c.rank = 0, c.nranks = RANKS;
  c.coll = SYMMPIN_COLL_ALLREDUCE;
  c.send = send_buf, c.recv = recv_buf;
  c.count = count, c.dtype = dtype, c.op = SYMMPIN_SUM;
  c.input = SYMMPIN_INPUT_STAGED;
  return c;
}

/* An all-reduce small enough for LL, and one for the copy algorithm (above LL, below two-shot). */
static symmpin_kernel_call ll_call(void) { return call_of(1000, SYMMPIN_FLOAT32, 0); }
static symmpin_kernel_call copy_call(void) {
  size_t bytes = symmpin_oneshot_ll_max_bytes(RANKS) + 4096;
  cr_assert_lt(bytes, symmpin_twoshot_min_bytes(RANKS));
  return call_of(bytes / 4, SYMMPIN_FLOAT32, 0);
}

static symmpin_status launch_ll(void) {
  symmpin_kernel_call c = ll_call();
  return symmpin_kernel_launch(&c, NULL);
}

static symmpin_status launch_group(void) {
  symmpin_kernel_call calls[3];
  for (int i = 0; i < 3; i++) calls[i] = call_of(100 + (size_t)i, SYMMPIN_FLOAT32, i);
  return symmpin_kernel_launch_group(calls, 3, NULL);
}

static launch_rec last_launch(void) {
  cr_assert_gt(nlaunches, 0, "nothing was launched");
  return launches[nlaunches - 1];
}

/* ---- the log, into a memory file the test reads back ---- */

static int log_fd = -1;

static void log_to_memory(void) {
  log_fd = memfd_create("symmpin-log", 0);
  cr_assert_geq(log_fd, 0);
  symmpin_log_configure(SYMMPIN_LOG_INFO, log_fd);
}

static const char *log_text(void) {
  static char text[16384];
  ssize_t n = pread(log_fd, text, sizeof text - 1, 0);
  text[n > 0 ? n : 0] = '\0';
  return text;
}

/* ---- the image a device gets ---- */

Test(launch, an_sm_90_gpu_runs_the_sm_90_cubin, .init = log_to_memory) {
  ctx_make(0, 0);
  char why[300] = "x";
  cr_assert_eq(symmpin_kernel_device_check(why, sizeof why), SYMMPIN_OK, "%s", why);
  cr_assert_eq(launch_ll(), SYMMPIN_OK);
  launch_rec l = last_launch();
  cr_assert_eq(l.image, IMG_SM90);
  cr_assert_str_eq(l.name, "symmpin_ll_FLOAT32_SUM");
  cr_assert_eq(loads[IMG_SM90], 1);
  cr_assert_eq(loads[IMG_PTX90] + loads[IMG_SM80], 0);
  cr_assert(strstr(log_text(), "device 0 (sm_90): symmpin's kernels from the sm_90 cubin"), "%s",
            log_text());
}

Test(launch, an_sm_86_gpu_runs_the_sm_80_cubin) {
  gpu_cc = 86;
  ctx_make(0, 0);
  cr_assert_eq(launch_ll(), SYMMPIN_OK);
  cr_assert_eq(last_launch().image, IMG_SM80);
  cr_assert_not(last_launch().pdl, "sm_80 code has no griddepcontrol");
}

Test(launch, each_family_launches_its_own_entry_point) {
  ctx_make(0, 0);
  cr_assert_eq(launch_group(), SYMMPIN_OK);
  cr_assert_str_eq(last_launch().name, "symmpin_group_FLOAT32_SUM");
  symmpin_kernel_call c = copy_call();
  cr_assert_eq(symmpin_kernel_launch(&c, NULL), SYMMPIN_OK);
  cr_assert_str_eq(last_launch().name, "symmpin_copy_FLOAT32_SUM");
  cr_assert_eq(last_launch().image, IMG_SM90);
  cr_assert_eq(loads[IMG_SM90], 1, "the image is loaded once");
}

Test(launch, a_thread_without_a_context_launches_nothing, .init = log_to_memory) {
  ctx_set(-1);
  char why[300] = "";
  cr_assert_eq(symmpin_kernel_device_check(why, sizeof why), SYMMPIN_ERR_UNSUPPORTED);
  cr_assert_str_eq(why, "no CUDA device is current on this thread");
  cr_assert_eq(launch_ll(), SYMMPIN_ERR_CUDA);
  cr_assert_eq(nlaunches, 0);
}

/* ---- a cubin the driver refuses (issue 36, item 4) ---- */

/* The driver refuses the sm_90 cubin (when loading it, or the kernel into the context): the
 * compute_90 PTX serves instead, and the log says which image serves. */
static void ptx_serves_when_the_cubin_is_refused(refusal how) {
  log_to_memory();
  refuse_cubins = how;
  ctx_make(0, 0);
  char why[300] = "x";
  cr_assert_eq(symmpin_kernel_device_check(why, sizeof why), SYMMPIN_OK,
               "the device stays on NCCL: %s", why);
  cr_assert_eq(launch_ll(), SYMMPIN_OK);
  cr_assert_eq(last_launch().image, IMG_PTX90, "launched from image %d", last_launch().image);
  cr_assert_eq(loads[IMG_SM90], 1, "the cubin was tried once");
  cr_assert_eq(loads[IMG_PTX90], 1, "the PTX was loaded once");
  cr_assert(strstr(log_text(), "the driver refused the sm_90 cubin"), "%s", log_text());
  cr_assert(strstr(log_text(), "the compute_90 PTX serves instead"), "%s", log_text());
  cr_assert(strstr(log_text(), "symmpin's kernels from the compute_90 PTX"), "%s", log_text());
}

Test(launch, a_cubin_refused_at_load_falls_back_to_the_ptx) {
  ptx_serves_when_the_cubin_is_refused(REFUSE_AT_LOAD);
}

Test(launch, a_cubin_refused_in_the_context_falls_back_to_the_ptx) {
  ptx_serves_when_the_cubin_is_refused(REFUSE_IN_CONTEXT);
}

Test(launch, a_gpu_whose_cubin_and_ptx_are_refused_stays_on_nccl, .init = log_to_memory) {
  refuse_cubins = REFUSE_AT_LOAD;
  refuse_ptx = REFUSE_IN_CONTEXT;
  ctx_make(0, 0);
  char why[300] = "";
  cr_assert_eq(symmpin_kernel_device_check(why, sizeof why), SYMMPIN_ERR_UNSUPPORTED);
  cr_assert_eq(loads[IMG_PTX90], 1, "the PTX was tried");
  cr_assert(strstr(why, "the CUDA driver cannot load symmpin's kernels for device 0 (sm_90): the "
                        "sm_90 cubin: CUDA_ERROR_INVALID_IMAGE; the compute_90 PTX: "
                        "CUDA_ERROR_NO_BINARY_FOR_GPU"),
            "%s", why);
  cr_assert(strstr(log_text(), "the compute_90 PTX failed too"), "%s", log_text());
  cr_assert_eq(launch_ll(), SYMMPIN_ERR_CUDA);
  cr_assert_eq(nlaunches, 0);
}

Test(launch, a_refused_cubin_with_no_ptx_for_the_gpu_keeps_it_on_nccl, .init = log_to_memory) {
  gpu_cc = 86; /* the sm_80 cubin's; the compute_90 PTX is too new for it */
  refuse_cubins = REFUSE_AT_LOAD;
  ctx_make(0, 0);
  char why[300] = "";
  cr_assert_eq(symmpin_kernel_device_check(why, sizeof why), SYMMPIN_ERR_UNSUPPORTED);
  cr_assert_str_eq(why, "the CUDA driver cannot load symmpin's kernels for device 0 (sm_86): the "
                        "sm_80 cubin: CUDA_ERROR_INVALID_IMAGE, and there is no PTX for it");
  cr_assert_eq(loads[IMG_PTX90], 0);
}

/* ---- functions per context, not per context address (issue 36, item 3) ---- */

/* cudaDeviceReset, then the program goes on: the device's new context has the old one's address.
 * Its launches must use functions loaded into it, not the destroyed context's. */
Test(launch, a_context_made_at_a_destroyed_one_s_address_gets_functions_of_its_own) {
  ctx_make(0, 0);
  cr_assert_eq(launch_ll(), SYMMPIN_OK);
  unsigned long long first = ctx_id(0);
  cr_assert_eq(last_launch().ctx_id, first);
  ctx_destroy(0);
  ctx_make(0, 0); /* the same address, a new context */
  cr_assert_neq(ctx_id(0), first);
  symmpin_status st = launch_ll();
  cr_assert_eq(bad_handles, 0,
               "a launch used a function of the destroyed context (launch returned %s)",
               symmpin_status_name(st));
  cr_assert_eq(st, SYMMPIN_OK);
  cr_assert_eq(last_launch().ctx_id, ctx_id(0));
  /* Then kept for the new context: one function per kernel per context. */
  int before = functions;
  for (int i = 0; i < 3; i++) cr_assert_eq(launch_ll(), SYMMPIN_OK);
  cr_assert_eq(functions, before, "the new context's function is kept");
  cr_assert_eq(bad_handles, 0);
}

/* The program's own context beside the primary one (cuCtxCreate), both live, launching in turn. */
Test(launch, two_live_contexts_of_a_device_launch_their_own_functions) {
  ctx_make(0, 0);
  ctx_make(1, 0);
  for (int i = 0; i < 6; i++) {
    ctx_set(i % 2);
    cr_assert_eq(i % 3 == 2 ? launch_group() : launch_ll(), SYMMPIN_OK, "launch %d", i);
    cr_assert_eq(last_launch().ctx_id, ctx_id(i % 2), "launch %d", i);
  }
  cr_assert_eq(bad_handles, 0);
}

/* Threads launching at once from two contexts of one device (each thread's own current context),
 * while a third context is destroyed and made again at its address: every launch gets its own
 * context's function. */
typedef struct launcher {
  int slot;
  int rounds;
  long failed;
} launcher;
static pthread_barrier_t start;

static void *launch_loop(void *p) {
  launcher *l = p;
  pthread_barrier_wait(&start);
  if (l->slot == 2) {
    for (int i = 0; i < l->rounds; i++) {
      ctx_make(2, 0);
      if (launch_ll() != SYMMPIN_OK) l->failed++;
      ctx_destroy(2);
    }
    return NULL;
  }
  ctx_set(l->slot);
  for (int i = 0; i < l->rounds; i++)
    if ((i % 4 == 3 ? launch_group() : launch_ll()) != SYMMPIN_OK) l->failed++;
  return NULL;
}

Test(launch, threads_on_several_contexts_never_get_each_other_s_functions, .timeout = 60) {
  ctx_make(0, 0);
  ctx_make(1, 0);
  cr_assert_eq(launch_ll(), SYMMPIN_OK); /* the device's code, loaded before the threads start */
  launcher l[3] = {{0, 100000, 0}, {1, 100000, 0}, {2, 20000, 0}};
  pthread_t th[3];
  pthread_barrier_init(&start, NULL, 3);
  for (int i = 0; i < 3; i++) cr_assert_eq(pthread_create(&th[i], NULL, launch_loop, &l[i]), 0);
  for (int i = 0; i < 3; i++) cr_assert_eq(pthread_join(th[i], NULL), 0);
  cr_assert_eq(bad_handles, 0, "%ld launches with another context's function", bad_handles);
  cr_assert_eq(l[0].failed + l[1].failed + l[2].failed, 0);
  cr_assert_eq(launched, 1 + 100000 + 100000 + 20000);
}

/* ---- programmatic dependent launch and the driver's version (issue 36, item 5) ---- */

/* Which launches carry the programmatic-stream-serialization attribute on a driver of `version`:
 * LL and group launches, eager and while the program captures a graph (programmatic edges in
 * graphs came with CUDA 12.3), never the copy algorithm. */
static void pdl_with_driver(int version, bool want) {
  log_to_memory();
  driver_version = version;
  ctx_make(0, 0);
  for (int captured = 0; captured < 2; captured++) {
    capturing = captured;
    cr_assert_eq(launch_ll(), SYMMPIN_OK);
    cr_assert_eq(last_launch().captured, captured);
    cr_assert_eq(last_launch().pdl, want, "LL, driver %d, %s", version,
                 captured ? "captured" : "eager");
    cr_assert_eq(last_launch().num_attrs, want ? 1u : 0u);
    cr_assert_eq(launch_group(), SYMMPIN_OK);
    cr_assert_eq(last_launch().pdl, want, "group, driver %d, %s", version,
                 captured ? "captured" : "eager");
    symmpin_kernel_call c = copy_call();
    cr_assert_eq(symmpin_kernel_launch(&c, NULL), SYMMPIN_OK);
    cr_assert_str_eq(last_launch().name, "symmpin_copy_FLOAT32_SUM");
    cr_assert_not(last_launch().pdl, "the copy algorithm launches plainly");
  }
}

ParameterizedTestParameters(launch, no_pdl_on_drivers_before_cuda_12_3) {
  static int versions[] = {12000, 12010, 12020};
  return cr_make_param_array(int, versions, sizeof versions / sizeof versions[0]);
}
ParameterizedTest(int *version, launch, no_pdl_on_drivers_before_cuda_12_3) {
  pdl_with_driver(*version, false);
  char line[200];
  snprintf(line, sizeof line,
           "symmpin's kernels from the sm_90 cubin, without programmatic dependent launch (the "
           "driver supports CUDA 12.%d; symmpin uses it from 12.3 on)",
           *version % 1000 / 10);
  cr_assert(strstr(log_text(), line), "%s", log_text());
}

ParameterizedTestParameters(launch, pdl_on_drivers_from_cuda_12_3) {
  static int versions[] = {12030, 12080, 13000};
  return cr_make_param_array(int, versions, sizeof versions / sizeof versions[0]);
}
ParameterizedTest(int *version, launch, pdl_on_drivers_from_cuda_12_3) {
  pdl_with_driver(*version, true);
  cr_assert(strstr(log_text(), "symmpin's kernels from the sm_90 cubin, with programmatic "
                               "dependent launch\n"),
            "%s", log_text());
}
