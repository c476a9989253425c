/* The one-shot algorithms' slot layout: private to kernels/ (and its tests).
 *
 * Plain C so that select.c (host logic, C compiler), allreduce.cu and its device headers and the CPU tests
 * share one definition. Callers outside kernels/ use only kernels/allreduce.h.
 *
 * A slot is: [header | data area]. The header holds device-side state that must survive CUDA-graph
 * replays (so it lives in the slot, not in kernel arguments):
 *   - epoch[b]: per-block call counters. Every call advances every entry by the same amount (block b
 *     of a launch with B blocks writes entries b, b+B, b+2B, ...), so all entries stay equal even
 *     when the block count changes between calls. No grid-wide sync is needed to agree on an epoch.
 *   - bar[b][s]: barrier flags; rank s writes the barrier sequence number it reached with block b
 *     into every peer's bar[b][s]. One 32-byte sector per block.
 *   - timeout word: 1 << 32 | the sequence number of the last wait that gave up (one printed line
 *     per call), 64 bits.
 *   - ident[parity][s]: rank s's (epoch, call_id) at its latest barrier (COPY, IN_SLOT, two-shot)
 *     or LL push of that epoch parity.
 * The data area holds, for the in-slot input, the rank's input (contiguous, at
 * SYMMPIN_ONESHOT_HEADER_BYTES = symmpin_kernel_in_slot_offset()); for the staged input, 16-byte
 * "units" in two buffers (parity 0/1) interleaved every SYMMPIN_ONESHOT_PARITY_UNITS units (see
 * symmpin_oneshot_unit_index()). */
#ifndef SYMMPIN_KERNELS_ONESHOT_LAYOUT_H
#define SYMMPIN_KERNELS_ONESHOT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SYMMPIN_HD __host__ __device__ __forceinline__
#else
#define SYMMPIN_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Launch caps: up to 8 simulated ranks' grids must be resident on one GPU at once (the GPU suite
 * runs spin-waiting ranks side by side), so 8 * 32 blocks of 512 threads at <= 64 registers. */
#define SYMMPIN_ONESHOT_MAX_BLOCKS 32
#define SYMMPIN_ONESHOT_MAX_THREADS 512

#define SYMMPIN_ONESHOT_HEADER_BYTES 2048
#define SYMMPIN_ONESHOT_EPOCH_OFFSET 0                                   /* uint32_t[32] */
#define SYMMPIN_ONESHOT_BAR_OFFSET 128                                   /* uint32_t[32][8] */
#define SYMMPIN_ONESHOT_TIMEOUT_OFFSET (128 + 4 * SYMMPIN_ONESHOT_MAX_BLOCKS * 8) /* uint64_t */
/* uint64_t[2][8]: ident[p][s] = epoch << 32 | call_id of rank s's latest barrier of parity p
 * (epoch & 1) on this slot, written by rank s (any block) before it releases its barrier flags.
 * While a rank waits at barrier seq, its peers cannot pass barrier seq + 1 (it needs this rank's
 * flag), so ident[seq & 1][s] still holds rank s's barrier seq once its flag shows seq or more:
 * a rank that reads (seq, another call_id) there knows the calls differ, on every side. */
#define SYMMPIN_ONESHOT_IDENT_OFFSET (SYMMPIN_ONESHOT_TIMEOUT_OFFSET + 8)
#define SYMMPIN_ONESHOT_SLOT_ALIGN 256

/* A unit is 16 bytes: one LL line ({data 4B, flag 4B, data 4B, flag 4B}: 8 data bytes) or one
 * vector of plain data. Staging buffers of the two parities alternate every 32 units (512 B), so
 * a unit's parity depends only on its position, not on the call shape: a call of one parity can
 * never touch a unit of the other, whatever counts earlier calls had. */
#define SYMMPIN_ONESHOT_UNIT_BYTES 16
#define SYMMPIN_ONESHOT_LL_DATA_BYTES 8
#define SYMMPIN_ONESHOT_PARITY_UNITS 32

/* Units of staging for parity `parity` at logical position q (LL: q = source_rank * lines + line;
 * COPY: q = vector index), as an index into the slot's data area (in units). */
SYMMPIN_HD size_t symmpin_oneshot_unit_index(size_t q, unsigned parity) {
  return (2 * (q / SYMMPIN_ONESHOT_PARITY_UNITS) + parity) * SYMMPIN_ONESHOT_PARITY_UNITS +
         q % SYMMPIN_ONESHOT_PARITY_UNITS;
}

/* An LL line is {data, seq, data, check}: each 8-byte half carries its own flag (8-byte writes are
 * what a reader sees whole). `seq` is the slot epoch; `check` mixes in the call's identity, so a
 * line of another call at the same epoch (a rank out of step) never passes: the reader sees the
 * epoch right and the check wrong, and reports it once that has lasted (a line being written can
 * be seen half old, half new for a moment, never for long). With call_id 0 check == seq. */
#define SYMMPIN_ONESHOT_ID_MUL 0x9E3779B1u
SYMMPIN_HD uint32_t symmpin_oneshot_ll_check(uint32_t seq, uint32_t call_id) {
  return seq ^ (call_id * SYMMPIN_ONESHOT_ID_MUL);
}

/* The next epoch / barrier sequence number. 0 is skipped (zeroed slots read 0) by jumping to 2,
 * which keeps consecutive values of opposite parity. */
SYMMPIN_HD uint32_t symmpin_oneshot_seq_next(uint32_t s) {
  return s + 1 == 0 ? 2u : s + 1;
}

#ifdef __cplusplus
}
#endif

#endif
