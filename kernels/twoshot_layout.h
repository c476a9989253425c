/* The two-shot algorithm's slot layout: private to kernels/ (and its tests).
 *
 * Plain C so that select.c, the device code (kernels/twoshot.cuh) and the CPU tests share one
 * definition. Callers outside kernels/ use only kernels/allreduce.h.
 *
 * A two-shot slot is [header | data]. The header is the one-shot header (oneshot_layout.h: epochs,
 * barrier flags, timeout word, identities). The input of n ranks is cut into n shards of S 16-byte
 * units (the last one shorter); rank s owns shard s. In the slot of rank r, the other ranks
 * q != r are numbered j = (q - r - 1) mod n, 0 .. n-2 (a rank's own parts never travel), and the
 * logical units of the data area are:
 *   - in[j][u]  = j S + u:           unit u of rank q's part of shard r, pushed by rank q into
 *                                    owner r's slot (phase 1);
 *   - out[j][u] = (n - 1 + j) S + u: unit u of owner q's reduced shard, pushed by q into rank r's
 *                                    slot (phase 3);
 * in two parities placed as the one-shot staging units are (symmpin_oneshot_unit_index: they
 * alternate every 32 units, by position only). Consecutive calls on a slot use opposite parities,
 * so a call's pushes never touch what a slower peer still copies out of the previous call, even
 * when the shape (S) changed; the call before that is over on every rank (its second barrier;
 * docs/kernels.md "Two-shot"). The owner's own shard never travels: it reads its input from `send`
 * and writes its result to `recv` directly. 2 (n-1) S units per parity: about 2 x the message.
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

/* Rank q's number in rank r's slot (q != r): 0 .. n-2. */
SYMMPIN_HD size_t symmpin_twoshot_peer_index(int q, int r, int nranks) {
  return (size_t)((q - r - 1 + 2 * nranks) % nranks);
}

/* Unit u of source rank q's part of shard r, in the in region of owner r's slot (index into the
 * data area, in units). */
SYMMPIN_HD size_t symmpin_twoshot_in_index(size_t shard_units, int nranks, int q, int r, size_t u,
                                           unsigned parity) {
  return symmpin_oneshot_unit_index(symmpin_twoshot_peer_index(q, r, nranks) * shard_units + u,
                                    parity);
}

/* Unit u of owner q's reduced shard, in the out region of rank r's slot. */
SYMMPIN_HD size_t symmpin_twoshot_out_index(size_t shard_units, int nranks, int q, int r, size_t u,
                                            unsigned parity) {
  return symmpin_oneshot_unit_index(
      ((size_t)nranks - 1 + symmpin_twoshot_peer_index(q, r, nranks)) * shard_units + u, parity);
}

/* Data-area bytes: both regions, both parities. */
SYMMPIN_HD size_t symmpin_twoshot_data_bytes(size_t units, int nranks) {
  size_t logical = 2 * ((size_t)nranks - 1) * symmpin_twoshot_shard_units(units, nranks);
  size_t per_parity = (logical + SYMMPIN_ONESHOT_PARITY_UNITS - 1) / SYMMPIN_ONESHOT_PARITY_UNITS *
                      SYMMPIN_ONESHOT_PARITY_UNITS;
  return 2 * per_parity * SYMMPIN_ONESHOT_UNIT_BYTES;
}

#ifdef __cplusplus
}
#endif

#endif
