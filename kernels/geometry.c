/* Host-side logic of the one-shot kernels: slot sizes, variant choice and launch geometry.
 *
 * Plain C with no CUDA header so that CPU-only tools (trace replay, planner tests) can size slots
 * and the CPU tests can check the layout. Every function here is a pure function of the call
 * shape, so every rank computes the same answer. */
#include "kernels/layout.h"
#include "kernels/oneshot.h"

#include <stdint.h>

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

static size_t div_up(size_t x, size_t by) { return (x + by - 1) / by; }

static int shape_ok(int dtype, int nranks, int form) {
  return symmpin_dtype_size(dtype) != 0 && nranks >= 1 && nranks <= SYMMPIN_MAX_RANKS &&
         (form == SYMMPIN_FORM_STAGED || form == SYMMPIN_FORM_DIRECT);
}

/* Above this many input bytes per rank the slot would need more than ~2^40 bytes: refuse rather
 * than overflow size_t arithmetic below. */
#define SYMMPIN_ONESHOT_MAX_INPUT_BYTES ((size_t)1 << 40)

bool symmpin_oneshot_supports(int dtype, int op) {
  /* Every NCCL datatype and every built-in op; user-defined (PreMulSum) ops are >= OP_COUNT. */
  return dtype >= 0 && dtype < SYMMPIN_DTYPE_COUNT && op >= 0 && op < SYMMPIN_OP_COUNT;
}

size_t symmpin_oneshot_direct_data_offset(void) { return SYMMPIN_ONESHOT_HEADER_BYTES; }

size_t symmpin_oneshot_ll_max_bytes(int nranks) {
  /* LL pushes 2x the bytes to each of n ranks, the copy variant pays one extra NVLink round trip
   * (barrier): LL wins while the pushed volume stays small. Provisional: 512 KiB / n, to be
   * re-measured with symmpin-bench on 2, 4 and 8 GPUs. */
  if (nranks < 1) nranks = 1;
  return ((size_t)512 << 10) / (size_t)nranks;
}

symmpin_oneshot_variant symmpin_oneshot_variant_for(size_t count, int dtype, int nranks,
                                                    int form) {
  if (form == SYMMPIN_FORM_DIRECT) return SYMMPIN_ONESHOT_DIRECT;
  size_t bytes = count * symmpin_dtype_size(dtype);
  return bytes <= symmpin_oneshot_ll_max_bytes(nranks) ? SYMMPIN_ONESHOT_LL : SYMMPIN_ONESHOT_COPY;
}

size_t symmpin_oneshot_units(size_t count, int dtype, symmpin_oneshot_variant v) {
  size_t bytes = count * symmpin_dtype_size(dtype);
  if (v == SYMMPIN_ONESHOT_LL) return div_up(bytes, SYMMPIN_ONESHOT_LL_DATA_BYTES);
  return div_up(bytes, SYMMPIN_ONESHOT_UNIT_BYTES);
}

/* Staging bytes for `units` logical units: both parities, interleaved in blocks of 32 units. */
static size_t staging_bytes(size_t units) {
  return 2 * round_up(units, SYMMPIN_ONESHOT_PARITY_UNITS) * SYMMPIN_ONESHOT_UNIT_BYTES;
}

size_t symmpin_oneshot_slot_bytes(size_t count, int dtype, int nranks, symmpin_oneshot_form form) {
  if (!shape_ok(dtype, nranks, (int)form)) return 0;
  size_t esize = symmpin_dtype_size(dtype);
  if (count > SYMMPIN_ONESHOT_MAX_INPUT_BYTES / esize) return 0;
  size_t bytes = count * esize;
  size_t data;
  if (form == SYMMPIN_FORM_DIRECT) {
    data = bytes;
  } else {
    /* LL needs room for every rank's lines. Above the LL limit the copy variant needs only this
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
  }
  return SYMMPIN_ONESHOT_HEADER_BYTES + round_up(data, SYMMPIN_ONESHOT_SLOT_ALIGN);
}

symmpin_oneshot_geometry symmpin_oneshot_geometry_for(size_t count, int dtype, int nranks,
                                                      symmpin_oneshot_form form) {
  symmpin_oneshot_geometry g = {0, 0};
  if (!shape_ok(dtype, nranks, (int)form) || count == 0) return g;
  if (count > SYMMPIN_ONESHOT_MAX_INPUT_BYTES / symmpin_dtype_size(dtype)) return g;
  size_t units = symmpin_oneshot_units(count, dtype,
                                       symmpin_oneshot_variant_for(count, dtype, nranks, form));
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
