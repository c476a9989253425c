/* The one-shot all-reduce algorithms (kernels/select.h, docs/kernels.md): every rank loads every
 * rank's whole input and reduces all of it.
 *  - ONESHOT_LL (staged, small): each rank pushes its input as 16-byte LL lines {data, epoch, data,
 *    check} (check: the epoch mixed with the call's identity) into every rank's slot, then waits on
 *    its own slot for every rank's lines of this epoch and reduces them in rank order. No barrier.
 *  - ONESHOT_COPY (staged, large): copy-in to this rank's slot, one start barrier, load every rank's
 *    data, reduce in rank order. Two staging parities make an end barrier unnecessary.
 *  - ONESHOT_IN_SLOT: input already in the slot; start barrier, load/reduce/store, end barrier.
 * The all-gather and reduce-scatter (P.coll) run through the same two staged algorithms, which move
 * each byte once, so one-shot is already bandwidth-optimal for them (no two-shot):
 *  - all-gather: LL pushes my chunk into every rank's slot, as the all-reduce pushes its input, and
 *    every rank stores each rank's lines to that rank's chunk of recv; COPY stages my chunk, and
 *    after the start barrier every rank copies every rank's chunk out of its slot.
 *  - reduce-scatter: LL pushes chunk c of my input into rank c's slot only (region: my rank), and
 *    every rank reduces the n lines it received in rank order; COPY stages all n chunks (chunk c at
 *    units c * units ..), and after the start barrier rank r reduces chunk r of every rank's slot.
 * Every rank still waits for data of every rank in every call, so the slot-reuse arguments of each
 * algorithm (docs/kernels.md) hold across the three collectives: they share its slot class.
 * Included by kernels/allreduce.cu after kernels/device.cuh. */
#ifndef SYMMPIN_KERNELS_ONESHOT_CUH
#define SYMMPIN_KERNELS_ONESHOT_CUH

#include "kernels/device.cuh"

namespace {

constexpr int kRoundUnits = 2; /* IN_SLOT in place: units per thread held in registers per round */

/* ---- LL algorithm ---- */

/* LL, push: my lines into every rank's slot (mine included), region of source rank P.rank: my
 * whole input (all-reduce), my chunk (all-gather), or chunk s to rank s only (reduce-scatter). */
__device__ __forceinline__ void ll_push(const Params &P, uint32_t seq, const Geo &g) {
  const int n = P.nranks;
  const uint32_t check = symmpin_oneshot_ll_check(seq, P.id);
  const size_t L = P.units;
  const size_t first = g.first();
  const size_t stride = g.stride();
  const unsigned parity = seq & 1;
  /* Who this rank is at this epoch, in every rank's header (as barriers do): a peer whose call
   * waits for lines this call never pushes (another shape) sees the other call there. */
  if (g.b == 0 && g.t < (unsigned)n)
    st_volatile_u64((uint64_t *)(P.slot[g.t] + SYMMPIN_ONESHOT_IDENT_OFFSET) + parity * kMaxRanks + P.rank,
                    (uint64_t)seq << 32 | P.id);
  for (size_t l = first; l < L; l += stride) {
    size_t off = l * SYMMPIN_ONESHOT_LL_DATA_BYTES;
    size_t valid = P.bytes - off < 8 ? P.bytes - off : 8;
    size_t u = symmpin_oneshot_unit_index((size_t)P.rank * L + l, parity);
    uint32_t w[2];
    if (P.coll == SYMMPIN_COLL_REDUCESCATTER) {
#pragma unroll
      for (int s = 0; s < kMaxRanks; s++) {
        if (s < n) {
          load_user<8>(P.send + (size_t)s * P.bytes + off, valid, w);
          st_volatile_v4(P.slot[s] + kHeader + u * SYMMPIN_ONESHOT_UNIT_BYTES,
                         make_uint4(w[0], seq, w[1], check));
        }
      }
      continue;
    }
    load_user<8>(P.send + off, valid, w);
    uint4 line = make_uint4(w[0], seq, w[1], check);
#pragma unroll
    for (int s = 0; s < kMaxRanks; s++)
      if (s < n) st_volatile_v4(P.slot[s] + kHeader + u * SYMMPIN_ONESHOT_UNIT_BYTES, line);
  }
}

/* LL, then: wait for every rank's line of this epoch and reduce in rank order (all-gather: store
 * rank s's line to chunk s of recv). The same thread pushed these input bytes (ll_push, same
 * grid), so in place (all-reduce: recv == send; all-gather: send is chunk `rank` of recv;
 * reduce-scatter: recv is chunk `rank` of send) is safe: every byte it stores is one it read. */
template <class D, int OP>
__device__ __forceinline__ void ll_reduce(const Params &P, uint32_t seq, const Geo &g,
                                          int *abort_flag) {
  const int n = P.nranks;
  const size_t L = P.units;
  const size_t first = g.first();
  const size_t stride = g.stride();
  const unsigned parity = seq & 1;
  const uint32_t check = symmpin_oneshot_ll_check(seq, P.id);
  const char *own = P.slot[P.rank] + kHeader;
  for (size_t l = first; l < L; l += stride) {
    uint32_t in[kMaxRanks][2];
    unsigned pending = (1u << n) - 1;
    long long start = clock64();
    long long odd_since = 0; /* a line of this epoch with another call's check seen since */
    int odd_rank = -1;
    bool gave_up = false;
    while (pending) {
      bool odd = false;
#pragma unroll
      for (int s = 0; s < kMaxRanks; s++) {
        if (pending & (1u << s)) {
          size_t u = symmpin_oneshot_unit_index((size_t)s * L + l, parity);
          uint4 v = ld_volatile_v4(own + u * SYMMPIN_ONESHOT_UNIT_BYTES);
          if (v.y == seq && v.w == check) {
            in[s][0] = v.x, in[s][1] = v.z;
            pending &= ~(1u << s);
          } else if (v.y == seq) {
            odd = true;
            odd_rank = s;
          }
        }
      }
      if (!pending) break;
      /* The epoch right and the call wrong, for longer than a line takes to land whole: the
       * peer's data at this epoch is another call's (the ranks are out of step). */
      long long now = clock64();
      if (!odd) {
        odd_since = 0;
      } else if (!odd_since) {
        odd_since = now;
      } else if (now - odd_since > kTornCycles) {
        report_timeout(P, odd_rank, seq, true);
        gave_up = true;
        break;
      }
      /* Past ~1 ms: a rank whose identity word shows this epoch with another call is out of
       * step (it may push fewer lines than this call waits for: they would never come). */
      bool mismatch = false;
      int late = __ffs(pending) - 1;
      if ((uint64_t)(now - start) >= kAbortPollCycles)
        for (int s = 0; s < n && !mismatch; s++)
          if ((pending & (1u << s)) && peer_out_of_step(P, s, seq)) mismatch = true, late = s;
      if (mismatch || expired(P, start)) {
        report_timeout(P, late, seq, mismatch);
        gave_up = true;
        break;
      }
    }
    if (gave_up) {
      *abort_flag = 1; /* a group's later calls of this block need not wait too */
      break;
    }
    size_t off = l * SYMMPIN_ONESHOT_LL_DATA_BYTES;
    size_t valid = P.bytes - off < 8 ? P.bytes - off : 8;
    if (P.coll == SYMMPIN_COLL_ALLGATHER) {
#pragma unroll
      for (int s = 0; s < kMaxRanks; s++)
        if (s < n) store_user<8>(P.recv + (size_t)s * P.bytes + off, valid, in[s]);
      continue;
    }
    uint32_t out[2];
    reduce_packs<D, OP, 8>(in, n, out);
    store_user<8>(P.recv + off, valid, out);
  }
}

template <class D, int OP>
__device__ __forceinline__ void ll_kernel(const Params &P) {
  __shared__ int abort_flag; /* written when a wait gives up; read only by group_kernel */
  if (threadIdx.x == 0) abort_flag = 0;
  griddep_wait();
  const Geo g = launch_geo();
  const uint32_t seq = call_seq(P, g);
  ll_push(P, seq, g);
  ll_reduce<D, OP>(P, seq, g, &abort_flag);
  griddep_launch_dependents();
  epochs_advance(P, seq, g);
}

/* ---- COPY and IN_SLOT algorithms ---- */

template <class D, int OP>
__device__ __forceinline__ void reduce_unit(const Params &P, size_t data_off, uint32_t (&out)[4]) {
  uint32_t in[kMaxRanks][4];
#pragma unroll
  for (int s = 0; s < kMaxRanks; s++) {
    if (s < P.nranks) {
      uint4 v = ld_volatile_v4(P.slot[s] + kHeader + data_off);
      in[s][0] = v.x, in[s][1] = v.y, in[s][2] = v.z, in[s][3] = v.w;
    }
  }
  reduce_packs<D, OP, 16>(in, P.nranks, out);
}

/* COPY, copy-in into this parity's staging units. Each block copies exactly the units it (and the
 * same block on every peer) reduces later, so only a per-block barrier is needed. Reduce-scatter:
 * units v of every chunk c (staged at c * units + v), the units of every chunk a block reduces. */
__device__ __forceinline__ void copy_in(const Params &P, uint32_t seq, const Geo &g) {
  const size_t V = P.units;
  const size_t first = g.first();
  const size_t stride = g.stride();
  const unsigned parity = seq & 1;
  constexpr size_t U = SYMMPIN_ONESHOT_UNIT_BYTES;
  const int chunks = P.coll == SYMMPIN_COLL_REDUCESCATTER ? P.nranks : 1;
  for (size_t v = first; v < V; v += stride) {
    size_t off = v * U;
    for (int c = 0; c < chunks; c++) {
      uint32_t w[4];
      load_user<16>(P.send + (size_t)c * P.bytes + off, P.bytes - off < U ? P.bytes - off : U, w);
      *(uint4 *)(P.slot[P.rank] + kHeader + symmpin_oneshot_unit_index((size_t)c * V + v, parity) * U) =
          make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

/* COPY, then: the start barrier and the reduction. No end barrier: the next call stages into the
 * other parity, and the call after that runs only after its own start barrier proved every peer
 * finished this call (docs/kernels.md). */
template <class D, int OP>
__device__ __forceinline__ void copy_reduce(const Params &P, uint32_t seq, int *abort_flag,
                                            const Geo &g) {
  const size_t V = P.units;
  const size_t first = g.first();
  const size_t stride = g.stride();
  const unsigned parity = seq & 1;
  constexpr size_t U = SYMMPIN_ONESHOT_UNIT_BYTES;
  if (!barrier(P, seq, abort_flag, g)) return;
  /* Reduce-scatter: my chunk of every rank's staging. */
  const size_t base = P.coll == SYMMPIN_COLL_REDUCESCATTER ? (size_t)P.rank * V : 0;
  for (size_t v = first; v < V; v += stride) {
    size_t off = v * U;
    size_t valid = P.bytes - off < U ? P.bytes - off : U;
    size_t data_off = symmpin_oneshot_unit_index(base + v, parity) * U;
    if (P.coll == SYMMPIN_COLL_ALLGATHER) {
#pragma unroll
      for (int s = 0; s < kMaxRanks; s++) {
        if (s < P.nranks) {
          uint4 x = ld_volatile_v4(P.slot[s] + kHeader + data_off);
          const uint32_t w[4] = {x.x, x.y, x.z, x.w};
          store_user<16>(P.recv + (size_t)s * P.bytes + off, valid, w);
        }
      }
      continue;
    }
    uint32_t out[4];
    reduce_unit<D, OP>(P, data_off, out);
    store_user<16>(P.recv + off, valid, out);
  }
}

template <class D, int OP, bool kInSlot>
__device__ __forceinline__ void bar_kernel(const Params &P) {
  __shared__ int abort_flag;
  if (threadIdx.x == 0) abort_flag = 0;
  const Geo g = launch_geo();
  const size_t V = P.units;
  const size_t first = g.first();
  const size_t stride = g.stride();
  uint32_t seq = call_seq(P, g);
  constexpr size_t U = SYMMPIN_ONESHOT_UNIT_BYTES;

  if constexpr (!kInSlot) {
    copy_in(P, seq, g);
    copy_reduce<D, OP>(P, seq, &abort_flag, g);
  } else if (!P.inplace_slot) {
    bool ok = barrier(P, seq, &abort_flag, g);
    if (ok) {
      for (size_t v = first; v < V; v += stride) {
        uint32_t out[4];
        reduce_unit<D, OP>(P, v * U, out);
        store_user<16>(P.recv + v * U, P.bytes - v * U < U ? P.bytes - v * U : U, out);
      }
      /* End barrier: peers may still read my data area; the caller may overwrite it next. */
      seq = symmpin_oneshot_seq_next(seq);
      barrier(P, seq, &abort_flag, g);
    }
  } else {
    /* In place in the slot: results may replace my data only after every peer has read it, so
     * reduce a round into registers, barrier, then store. Every block runs the same number of
     * rounds so that all epoch entries advance alike. */
    bool ok = barrier(P, seq, &abort_flag, g);
    const size_t per_round = stride * kRoundUnits;
    const size_t rounds = (V + per_round - 1) / per_round;
    for (size_t r = 0; ok && r < rounds; r++) {
      uint32_t out[kRoundUnits][4];
#pragma unroll
      for (int k = 0; k < kRoundUnits; k++) {
        size_t v = r * per_round + (size_t)k * stride + first;
        if (v < V) reduce_unit<D, OP>(P, v * U, out[k]);
      }
      seq = symmpin_oneshot_seq_next(seq);
      ok = barrier(P, seq, &abort_flag, g);
      if (!ok) break;
#pragma unroll
      for (int k = 0; k < kRoundUnits; k++) {
        size_t v = r * per_round + (size_t)k * stride + first;
        if (v < V) store_user<16>(P.recv + v * U, P.bytes - v * U < U ? P.bytes - v * U : U, out[k]);
      }
    }
  }
  epochs_advance(P, seq, g);
}

} // namespace

#endif
