/* The two-shot all-reduce (kernels/select.h SYMMPIN_ALGO_TWOSHOT, docs/kernels.md "Two-shot"):
 * reduce-scatter then all-gather through the slots, for large staged calls. Rank s owns shard s
 * of the input (kernels/twoshot_layout.h):
 *   1. push: every rank stores its shard s into owner s's in[rank] (NVLink writes, no round trip);
 *   2. barrier;
 *   3. reduce: owner s reduces in rank order its own shard (read from `send`) and in[q] of every
 *      peer q, writes the result to `recv` and stores it into every peer's out[s];
 *   4. barrier;
 *   5. copy out: every rank copies out[s] of every peer s into `recv`.
 * Each rank moves 2 (n-1)/n x the message over NVLink (one-shot: (n-1) x, read) and reduces only
 * its shard. All remote traffic is stores, which need no round trip per access.
 *
 * Blocks and barriers: thread t of block b handles the same unit positions u of every shard in
 * every phase, on every rank (the geometry is a pure function of the shape). So what block b of a
 * peer pushed for block b of the owner, and what the owner pushed back, is covered by the
 * per-block barrier (device.cuh), and in place (recv == send) is safe: a thread reads its input
 * units (phases 1 and 3) before it writes the same units of recv (phases 3 and 5).
 * Included by kernels/allreduce.cu after kernels/device.cuh. */
#ifndef SYMMPIN_KERNELS_TWOSHOT_CUH
#define SYMMPIN_KERNELS_TWOSHOT_CUH

#include "kernels/device.cuh"
#include "kernels/twoshot_layout.h"

namespace {

/* Units a thread keeps in flight while copying (loads issued together, then the stores): a
 * thread's loads would otherwise wait for one another behind each store. */
constexpr int kTwoshotBatch = 4;
/* Ranks whose parts of a unit are loaded together when reducing. */
constexpr int kTwoshotReduceGroup = 4;

/* Unit g (16-byte vector of one rank's input) of `send`, as many bytes as the input has there. */
__device__ __forceinline__ uint4 load_send_unit(const Params &P, size_t g) {
  constexpr size_t U = SYMMPIN_ONESHOT_UNIT_BYTES;
  uint32_t w[4];
  size_t off = g * U;
  load_user<16>(P.send + off, P.bytes - off < U ? P.bytes - off : U, w);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ void store_recv_unit(const Params &P, size_t g, uint4 v) {
  constexpr size_t U = SYMMPIN_ONESHOT_UNIT_BYTES;
  uint32_t w[4] = {v.x, v.y, v.z, v.w};
  size_t off = g * U;
  store_user<16>(P.recv + off, P.bytes - off < U ? P.bytes - off : U, w);
}

__device__ __forceinline__ char *twoshot_unit(const Params &P, int rank, size_t index) {
  return P.slot[rank] + kHeader + index * SYMMPIN_ONESHOT_UNIT_BYTES;
}

/* Phase 1: my part of every peer's shard, into that peer's in[my rank]. */
__device__ __forceinline__ void twoshot_push(const Params &P, size_t S, unsigned parity, const Geo &g) {
  const int n = P.nranks, r = P.rank;
  const size_t V = P.units, first = g.first(), stride = g.stride();
  for (int k = 1; k < n; k++) {
    const int s = (r + k) % n; /* peers in a rotating order: not every rank onto rank 0 first */
    for (size_t u0 = first; u0 < S; u0 += stride * kTwoshotBatch) {
      uint4 v[kTwoshotBatch];
#pragma unroll
      for (int j = 0; j < kTwoshotBatch; j++) {
        size_t u = u0 + (size_t)j * stride, gu = (size_t)s * S + u;
        if (u < S && gu < V) v[j] = load_send_unit(P, gu);
      }
#pragma unroll
      for (int j = 0; j < kTwoshotBatch; j++) {
        size_t u = u0 + (size_t)j * stride, gu = (size_t)s * S + u;
        if (u < S && gu < V)
          st_volatile_v4(twoshot_unit(P, s, symmpin_twoshot_in_index(S, n, r, s, u, parity)), v[j]);
      }
    }
  }
}

/* Phase 3: reduce my shard in rank order (my own input straight from send), write it to recv
 * and into every peer's out[my rank]. */
template <class D, int OP>
__device__ __forceinline__ void twoshot_reduce(const Params &P, size_t S, unsigned parity, const Geo &g) {
  const int n = P.nranks, r = P.rank;
  const size_t V = P.units, first = g.first(), stride = g.stride();
  for (size_t u = first; u < S && (size_t)r * S + u < V; u += stride) {
    const size_t gu = (size_t)r * S + u;
    /* Ranks in groups of kTwoshotReduceGroup: their loads (local memory) in flight together, and
     * fewer registers held than all eight (the kernels run at <= 64 registers: launch bounds). */
    PackAcc<D, OP> acc;
#pragma unroll
    for (int q0 = 0; q0 < kMaxRanks; q0 += kTwoshotReduceGroup) {
      if (q0 < n) {
        uint4 v[kTwoshotReduceGroup];
#pragma unroll
        for (int j = 0; j < kTwoshotReduceGroup; j++) {
          const int q = q0 + j;
          if (q < n)
            v[j] = q == r ? load_send_unit(P, gu)
                          : ld_volatile_v4(twoshot_unit(P, r, symmpin_twoshot_in_index(S, n, q, r, u, parity)));
        }
#pragma unroll
        for (int j = 0; j < kTwoshotReduceGroup; j++)
          if (q0 + j < n) acc.add(v[j], q0 + j == 0);
      }
    }
    const uint4 res = acc.result(n);
    for (int k = 1; k < n; k++) {
      const int s = (r + k) % n;
      st_volatile_v4(twoshot_unit(P, s, symmpin_twoshot_out_index(S, n, r, s, u, parity)), res);
    }
    store_recv_unit(P, gu, res);
  }
}

/* Phase 5: every peer's reduced shard from my out region into recv. */
__device__ __forceinline__ void twoshot_copy_out(const Params &P, size_t S, unsigned parity, const Geo &g) {
  const int n = P.nranks, r = P.rank;
  const size_t V = P.units, first = g.first(), stride = g.stride();
  for (int k = 1; k < n; k++) {
    const int s = (r + k) % n;
    for (size_t u0 = first; u0 < S; u0 += stride * kTwoshotBatch) {
      uint4 v[kTwoshotBatch];
#pragma unroll
      for (int j = 0; j < kTwoshotBatch; j++) {
        size_t u = u0 + (size_t)j * stride, gu = (size_t)s * S + u;
        if (u < S && gu < V)
          v[j] = ld_volatile_v4(twoshot_unit(P, r, symmpin_twoshot_out_index(S, n, s, r, u, parity)));
      }
#pragma unroll
      for (int j = 0; j < kTwoshotBatch; j++) {
        size_t u = u0 + (size_t)j * stride, gu = (size_t)s * S + u;
        if (u < S && gu < V) store_recv_unit(P, gu, v[j]);
      }
    }
  }
}

/* The whole call on this block (own launch or a group's blocks), from the slot's epoch as this
 * block read it. Two barriers (sequence numbers epoch + 1, epoch + 2: twoshot_layout.h). Returns
 * the slot's epoch after the call. */
template <class D, int OP>
__device__ __forceinline__ uint32_t twoshot_run(const Params &P, uint32_t epoch, int *abort_flag,
                                                const Geo &g) {
  const size_t S = symmpin_twoshot_shard_units(P.units, P.nranks);
  const uint32_t seq = symmpin_twoshot_first_seq(epoch);
  const unsigned parity = symmpin_twoshot_parity(seq);
  twoshot_push(P, S, parity, g);
  if (barrier(P, seq, abort_flag, g)) {
    twoshot_reduce<D, OP>(P, S, parity, g);
    if (barrier(P, seq + 1u, abort_flag, g)) twoshot_copy_out(P, S, parity, g);
  }
  return seq + 1u; /* also after a timeout: the slot is not used again (kernels/allreduce.h) */
}

/* The slot's epoch as block b sees it at the start of a call (every thread reads it before
 * epochs_advance moves it). */
__device__ __forceinline__ uint32_t slot_epoch(const Params &P, const Geo &g) {
  return ld_volatile_u32(&epochs(P)[g.b]);
}

template <class D, int OP>
__device__ __forceinline__ void twoshot_kernel(const Params &P) {
  __shared__ int abort_flag;
  if (threadIdx.x == 0) abort_flag = 0;
  griddep_wait(); /* no-op unless launched with PDL (it is not today): then it must come first */
  const Geo g = launch_geo();
  epochs_advance(P, twoshot_run<D, OP>(P, slot_epoch(P, g), &abort_flag, g), g);
}

} // namespace

#endif
