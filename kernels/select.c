/* The kernels' host logic: what they support, slot sizes, slot classes, algorithm choice and
 * launch geometry.
 *
 * Plain C with no CUDA header so that CPU-only tools (symmpin-replay, planner tests) can size slots
 * and the CPU tests can check the layout. Every function here is a pure function of the call
 * shape, so every rank computes the same answer. */
#include "kernels/select.h"

#include <stdint.h>
#include <stdio.h>

#include "kernels/allreduce.h"
#include "kernels/oneshot_layout.h"
#include "kernels/twoshot_layout.h"

/* Expanded from common/types.h's lists: a datatype or op without an entry in select.h is a compile
 * error here, one with entry 0 is refused, values the lists do not name read 0. */
static const unsigned char dtype_has_kernel[] = {SYMMPIN_DTYPES(SYMMPIN_KERNEL_DTYPE_ENTRY)};
static const unsigned char op_has_kernel[] = {SYMMPIN_OPS(SYMMPIN_KERNEL_OP_ENTRY)};

static const char *const slot_class_names[] = {"LL", "copy", "in-slot", "two-shot"};
_Static_assert(sizeof slot_class_names / sizeof slot_class_names[0] == SYMMPIN_KERNEL_SLOT_CLASSES,
               "one name per slot class");
_Static_assert(SYMMPIN_KERNEL_SLOT_CLASSES == SYMMPIN_ALGO_COUNT,
               "today every algorithm is its own slot class");

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

static size_t div_up(size_t x, size_t by) { return (x + by - 1) / by; }

static bool dtype_ok(int dtype) {
  return dtype >= 0 && (size_t)dtype < sizeof dtype_has_kernel && dtype_has_kernel[dtype] &&
         symmpin_dtype_size(dtype) != 0;
}

/* All-gather and reduce-scatter are staged only: their in-slot form would need a layout of
 * chunks in the slot that no caller has asked for. */
static bool shape_ok(int coll, int dtype, int nranks, symmpin_kernel_input input) {
  bool form = input == SYMMPIN_INPUT_STAGED ||
              (input == SYMMPIN_INPUT_IN_SLOT && coll == SYMMPIN_COLL_ALLREDUCE);
  return coll >= 0 && coll < SYMMPIN_COLL_COUNT && dtype_ok(dtype) && nranks >= 1 &&
         nranks <= SYMMPIN_KERNEL_MAX_RANKS && form;
}

/* Above this many input bytes per rank the slot would need more than ~2^40 bytes: refuse rather
 * than overflow size_t arithmetic below. */
#define SYMMPIN_KERNEL_MAX_INPUT_BYTES ((size_t)1 << 40)

/* Counts per element of a call's larger buffer: nranks x count for the all-gather's recv and the
 * reduce-scatter's send. */
static size_t wide_buffer(int coll, int nranks) {
  return coll == SYMMPIN_COLL_ALLREDUCE ? 1 : (size_t)nranks;
}

/* meson passes the list (top-level meson.build); the CPU compile checks of tests/kernels do not. */
#ifndef SYMMPIN_KERNEL_ARCHS
#define SYMMPIN_KERNEL_ARCHS "unknown"
#endif

const char *symmpin_kernel_archs(void) { return SYMMPIN_KERNEL_ARCHS; }

symmpin_status symmpin_kernel_arch_check(int device, int cc, bool has_code, const char *cuda_error,
                                         char *why, size_t why_len) {
  char gpu[48];
  if (cc > 0)
    snprintf(gpu, sizeof gpu, "device %d, sm_%d", device, cc);
  else
    snprintf(gpu, sizeof gpu, "device %d, compute capability unknown", device);
  if (cc > 0 && cc < SYMMPIN_KERNEL_MIN_CC) {
    /* Even a build that carried code for it: the kernels are written for sm_80 and newer. */
    if (why && why_len)
      snprintf(why, why_len,
               "symmpin's kernels need a GPU of compute capability %d.%d (sm_%d) or newer; this "
               "one is older (%s)",
               SYMMPIN_KERNEL_MIN_CC / 10, SYMMPIN_KERNEL_MIN_CC % 10, SYMMPIN_KERNEL_MIN_CC, gpu);
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  if (!has_code) {
    if (why && why_len)
      snprintf(why, why_len,
               "symmpin's kernels have no code for this GPU (%s): the library carries %s (meson "
               "options gpu_archs, gpu_ptx)%s%s",
               gpu, SYMMPIN_KERNEL_ARCHS, cuda_error ? "; CUDA says: " : "",
               cuda_error ? cuda_error : "");
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  if (why && why_len) why[0] = '\0';
  return SYMMPIN_OK;
}

bool symmpin_kernel_pdl_usable(int cc, int code_arch, int driver_version) {
  return cc >= 90 && code_arch >= 90 && driver_version >= SYMMPIN_KERNEL_PDL_MIN_DRIVER;
}

int symmpin_kernel_image_pick_ptx(const int *arch, const int *is_ptx, int n, int cc) {
  int ptx = -1;
  for (int i = 0; i < n; i++)
    if (is_ptx[i] && arch[i] <= cc && (ptx < 0 || arch[i] > arch[ptx])) ptx = i;
  return ptx;
}

int symmpin_kernel_image_pick(const int *arch, const int *is_ptx, int n, int cc) {
  int cubin = -1;
  for (int i = 0; i < n; i++)
    if (!is_ptx[i] && arch[i] / 10 == cc / 10 && arch[i] <= cc &&
        (cubin < 0 || arch[i] > arch[cubin]))
      cubin = i;
  return cubin >= 0 ? cubin : symmpin_kernel_image_pick_ptx(arch, is_ptx, n, cc);
}

bool symmpin_kernel_supports(int coll, int dtype, int op) {
  if (coll < 0 || coll >= SYMMPIN_COLL_COUNT) return false;
  if (!symmpin_coll_reduces(coll)) return dtype_ok(dtype); /* a copy: no op */
  /* User-defined (PreMulSum) ops are >= SYMMPIN_OP_COUNT: not in the list, so refused. */
  return dtype_ok(dtype) && op >= 0 && (size_t)op < sizeof op_has_kernel && op_has_kernel[op];
}

size_t symmpin_kernel_in_slot_offset(void) { return SYMMPIN_ONESHOT_HEADER_BYTES; }

size_t symmpin_oneshot_ll_max_bytes(int nranks) {
  /* LL pushes 2x the bytes to each of n ranks, the copy algorithm pays one extra NVLink round trip
   * (barrier): LL wins while the pushed volume stays small. Provisional: 512 KiB / n, to be
   * re-measured with symmpin-bench on 2, 4 and 8 GPUs. */
  if (nranks < 1) nranks = 1;
  return ((size_t)512 << 10) / (size_t)nranks;
}

size_t symmpin_twoshot_min_bytes(int nranks) {
  /* Provisional: twice the LL limit (512 KiB at 2 ranks, 128 KiB at 8), to be measured with
   * symmpin-bench on 2, 4 and 8 GPUs. One rank has nothing to scatter. */
  if (nranks < 2) return SIZE_MAX;
  return 2 * symmpin_oneshot_ll_max_bytes(nranks);
}

symmpin_kernel_algo symmpin_kernel_algo_for(int coll, size_t count, int dtype, int nranks,
                                            symmpin_kernel_input input) {
  if (input == SYMMPIN_INPUT_IN_SLOT && coll == SYMMPIN_COLL_ALLREDUCE)
    return SYMMPIN_ALGO_ONESHOT_IN_SLOT;
  /* The LL limit on what one rank pushes per peer: the all-reduce's input, the all-gather's chunk
   * (to every rank), the reduce-scatter's chunks (one to each rank): the same volume rule. */
  size_t bytes = count * symmpin_dtype_size(dtype);
  if (bytes <= symmpin_oneshot_ll_max_bytes(nranks)) return SYMMPIN_ALGO_ONESHOT_LL;
  if (coll != SYMMPIN_COLL_ALLREDUCE) return SYMMPIN_ALGO_ONESHOT_COPY;
  if (bytes >= symmpin_twoshot_min_bytes(nranks)) return SYMMPIN_ALGO_TWOSHOT;
  return SYMMPIN_ALGO_ONESHOT_COPY;
}

int symmpin_kernel_slot_class(int coll, size_t count, int dtype, int nranks,
                              symmpin_kernel_input input) {
  /* One class per algorithm: LL (every rank's flagged lines) and copy (this rank's plain vectors)
   * stage in the same units under their own protocols, and in-slot input lies where they stage;
   * what makes back-to-back calls safe is argued within one algorithm only. The argument holds
   * for the three collectives alike (in each, every rank waits for data of every rank), so an
   * algorithm's class is the same for all of them (docs/kernels.md). */
  return (int)symmpin_kernel_algo_for(coll, count, dtype, nranks, input);
}

const char *symmpin_kernel_slot_class_name(int slot_class) {
  if (slot_class < 0 || slot_class >= SYMMPIN_KERNEL_SLOT_CLASSES) return NULL;
  return slot_class_names[slot_class];
}

size_t symmpin_oneshot_units(size_t count, int dtype, symmpin_kernel_algo algo) {
  size_t bytes = count * symmpin_dtype_size(dtype);
  if (algo == SYMMPIN_ALGO_ONESHOT_LL) return div_up(bytes, SYMMPIN_ONESHOT_LL_DATA_BYTES);
  return div_up(bytes, SYMMPIN_ONESHOT_UNIT_BYTES);
}

/* Staging bytes for `units` logical units: both parities, interleaved in blocks of 32 units. */
static size_t staging_bytes(size_t units) {
  return 2 * round_up(units, SYMMPIN_ONESHOT_PARITY_UNITS) * SYMMPIN_ONESHOT_UNIT_BYTES;
}

/* The all-gather's and reduce-scatter's slot: LL lines of every rank's chunk (what a rank receives:
 * the all-gather's n chunks, the reduce-scatter's n contributions to its own chunk), then the copy
 * algorithm's staging: my chunk (all-gather) or my n chunks, each padded to whole units
 * (reduce-scatter). As for the all-reduce, the LL size at the limit stays the least above it, so
 * slot sizes grow monotonically with count. */
static size_t chunked_data_bytes(int coll, size_t bytes, int nranks) {
  size_t ll_max = symmpin_oneshot_ll_max_bytes(nranks);
  size_t ll_bytes = bytes <= ll_max ? bytes : ll_max;
  size_t data = staging_bytes((size_t)nranks * div_up(ll_bytes, SYMMPIN_ONESHOT_LL_DATA_BYTES));
  if (bytes > ll_max) {
    size_t chunks = coll == SYMMPIN_COLL_REDUCESCATTER ? (size_t)nranks : 1;
    size_t copy = staging_bytes(chunks * div_up(bytes, SYMMPIN_ONESHOT_UNIT_BYTES));
    if (copy > data) data = copy;
  }
  return data;
}

size_t symmpin_kernel_slot_bytes(int coll, size_t count, int dtype, int nranks,
                                 symmpin_kernel_input input) {
  if (!shape_ok(coll, dtype, nranks, input)) return 0;
  size_t esize = symmpin_dtype_size(dtype);
  if (count > SYMMPIN_KERNEL_MAX_INPUT_BYTES / esize / wide_buffer(coll, nranks)) return 0;
  size_t bytes = count * esize;
  size_t data;
  if (coll != SYMMPIN_COLL_ALLREDUCE) {
    data = chunked_data_bytes(coll, bytes, nranks);
  } else if (input == SYMMPIN_INPUT_IN_SLOT) {
    data = bytes;
  } else {
    /* LL needs room for every rank's lines. Above the LL limit the copy algorithm needs only this
     * rank's vectors, but the size keeps at least the LL size at the limit so that slot sizes grow
     * monotonically with count (the planner may size a slot once for a range of counts). */
    size_t ll_max = symmpin_oneshot_ll_max_bytes(nranks);
    size_t ll_bytes = bytes <= ll_max ? bytes : ll_max;
    size_t ll_units = (size_t)nranks * div_up(ll_bytes, SYMMPIN_ONESHOT_LL_DATA_BYTES);
    data = staging_bytes(ll_units);
    if (bytes > ll_max) {
      size_t copy = staging_bytes(div_up(bytes, SYMMPIN_ONESHOT_UNIT_BYTES));
      if (copy > data) data = copy;
    }
    /* Two-shot: in and out regions. Sized from its threshold on (where no slot needs it, a slot
     * sized for it would waste what a smaller count never uses); the max keeps sizes monotone. */
    if (bytes >= symmpin_twoshot_min_bytes(nranks)) {
      size_t two = symmpin_twoshot_data_bytes(div_up(bytes, SYMMPIN_ONESHOT_UNIT_BYTES), nranks);
      if (two > data) data = two;
    }
  }
  return SYMMPIN_ONESHOT_HEADER_BYTES + round_up(data, SYMMPIN_ONESHOT_SLOT_ALIGN);
}

symmpin_kernel_geometry symmpin_kernel_geometry_for(int coll, size_t count, int dtype, int nranks,
                                                    symmpin_kernel_input input) {
  symmpin_kernel_geometry g = {0, 0};
  if (!shape_ok(coll, dtype, nranks, input) || count == 0) return g;
  if (count >
      SYMMPIN_KERNEL_MAX_INPUT_BYTES / symmpin_dtype_size(dtype) / wide_buffer(coll, nranks))
    return g;
  /* All-gather and reduce-scatter: the units of one chunk (each thread moves its units of every
   * chunk, as the all-reduce's moves its units of every rank's input). */
  symmpin_kernel_algo algo = symmpin_kernel_algo_for(coll, count, dtype, nranks, input);
  size_t units = symmpin_oneshot_units(count, dtype, algo);
  /* Two-shot: a block's units are the same units of every shard (it pushes, reduces and copies
   * out exactly those, so a per-block barrier suffices): spread one shard. */
  if (algo == SYMMPIN_ALGO_TWOSHOT) units = symmpin_twoshot_shard_units(units, nranks);
  /* Spread small calls over blocks of 128 threads (more SMs issue NVLink traffic at once), grow
   * the blocks to 512 threads once 32 blocks are used, then loop inside the threads. */
  size_t blocks = div_up(units, 128);
  if (blocks > SYMMPIN_ONESHOT_MAX_BLOCKS) blocks = SYMMPIN_ONESHOT_MAX_BLOCKS;
  size_t threads = round_up(div_up(units, blocks), 32);
  if (threads > SYMMPIN_ONESHOT_MAX_THREADS) threads = SYMMPIN_ONESHOT_MAX_THREADS;
  if (blocks > div_up(units, threads)) blocks = div_up(units, threads); /* no idle blocks */
  g.blocks = (unsigned)blocks;
  g.threads = (unsigned)threads;
  return g;
}
