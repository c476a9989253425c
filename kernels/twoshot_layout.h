/* The two-shot algorithm's slot layout: private to kernels/ (and its tests).
 *
 * Plain C so that select.c, the device code (kernels/twoshot.cuh) and the CPU tests share one
 * definition. Callers outside kernels/ use only kernels/allreduce.h.
 *
 * A two-shot slot is [header | data]. The header is the one-shot header (oneshot_layout.h: epochs,
 * barrier flags, timeout word, identities). The input of n ranks is cut into n shards of S 16-byte
 * units (the last one shorter); rank s owns shard s. Logical units of the data area:
 *   - in[q][u]  = q S + u:       unit u of rank q's part of shard s, pushed by rank q into owner
 *                                s's slot (phase 1);
 *   - out[s][u] = (n + s) S + u: unit u of owner s's reduced shard, pushed by s into every rank's
 *                                slot (phase 3);
 * in two parities placed as the one-shot staging units are (symmpin_oneshot_unit_index: they
 * alternate every 32 units, by position only). Consecutive calls on a slot use opposite parities,
 * so a call's pushes never touch what a slower peer still copies out of the previous call, even
 * when the shape (S) changed; the call before that is over on every rank (its second barrier;
 * docs/kernels.md "Two-shot"). The owner's own shard never travels: it reads its input from `send`
 * and writes its result to `recv` directly, so in[s] and out[s] of rank s's slot stay unused.
 *
 * Sequence numbers: a call takes two (one per barrier), e + 1 and e + 2 from the slot's epoch e,
 * wrapping through 0 (the barrier takes a flag in [seq, seq + 3] in wrap-around arithmetic, and
 * the timeout word tags its value, so 0 is an ordinary value here), so the epoch after a call
 * steps by 2 and its bit 1 alternates: the call's parity. */
#ifndef SYMMPIN_KERNELS_TWOSHOT_LAYOUT_H
#define SYMMPIN_KERNELS_TWOSHOT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/oneshot_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Units per shard: ceil(units / n), units = 16-byte vectors of one rank's input. */
SYMMPIN_HD size_t symmpin_twoshot_shard_units(size_t units, int nranks) {
  return (units + (size_t)nranks - 1) / (size_t)nranks;
}

/* The sequence numbers of a call on a slot of epoch e, and its parity. */
SYMMPIN_HD uint32_t symmpin_twoshot_first_seq(uint32_t epoch) { return epoch + 1u; }
SYMMPIN_HD unsigned symmpin_twoshot_parity(uint32_t first_seq) {
  return ((first_seq + 1u) >> 1) & 1u;
}

/* Unit u of source rank q's part of a shard, in the in region (index into the data area, units). */
SYMMPIN_HD size_t symmpin_twoshot_in_index(size_t shard_units, int q, size_t u, unsigned parity) {
  return symmpin_oneshot_unit_index((size_t)q * shard_units + u, parity);
}

/* Unit u of owner s's reduced shard, in the out region. */
SYMMPIN_HD size_t symmpin_twoshot_out_index(size_t shard_units, int nranks, int s, size_t u,
                                            unsigned parity) {
  return symmpin_oneshot_unit_index(((size_t)nranks + (size_t)s) * shard_units + u, parity);
}

/* Data-area bytes: both regions, both parities. */
SYMMPIN_HD size_t symmpin_twoshot_data_bytes(size_t units, int nranks) {
  size_t logical = 2 * (size_t)nranks * symmpin_twoshot_shard_units(units, nranks);
  size_t per_parity = (logical + SYMMPIN_ONESHOT_PARITY_UNITS - 1) / SYMMPIN_ONESHOT_PARITY_UNITS *
                      SYMMPIN_ONESHOT_PARITY_UNITS;
  return 2 * per_parity * SYMMPIN_ONESHOT_UNIT_BYTES;
}

#ifdef __cplusplus
}
#endif

#endif
