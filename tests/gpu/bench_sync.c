/* symmpin-bench's waits: the host barrier between ranks (board rounds, which also spread kernel
 * timeouts, failed checks and output hashes) and the bounded wait for this thread's GPU work. */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "tests/gpu/bench.h"

/* One board round: every local rank posts its blob, then this thread spins (bounded) until every
 * rank posted; out[r] points at rank r's blob. A blob stays readable until its rank posts twice
 * more, and no rank posts round k+1 before it read round k, so copying before the next exchange
 * is enough. Spinning, not sleeping: the release skew between ranks is what the next timed
 * section's warm-up calls must absorb. */
void bench_exchange(bench *b, const void *blobs, size_t bytes, const void *out[]) {
  b->round++;
  for (int l = 0; l < b->nlocal; l++)
    SYMMPIN_TEST_OK(symmpin_board_post(b->loc[l].board, b->round,
                                       (const char *)blobs + (size_t)l * bytes, bytes, b->tid));
  double t0 = 0;
  for (unsigned spins = 1; !symmpin_board_round_complete(b->loc[0].board, b->round); spins++) {
    if ((spins & 255) == 0) {
      if (t0 == 0) t0 = bench_now();
      sched_yield();
      if (bench_now() - t0 > b->o.timeout_s) {
        int missing = -1;
        (void)symmpin_board_wait(b->loc[0].board, b->round, 0, 0, &missing);
        bench_die("host barrier (board round %u): rank %d did not arrive within %u s", b->round,
                  missing, b->o.timeout_s);
      }
    }
  }
  for (int r = 0; r < b->n; r++) {
    size_t got = 0;
    out[r] = symmpin_board_blob(b->loc[0].board, b->round, r, &got);
    if (!out[r] || got != bytes)
      bench_die("board round %u: rank %d's blob is %s (%zu bytes, expected %zu)", b->round, r,
                out[r] ? "the wrong size" : "missing", got, bytes);
  }
}

/* Timeouts the kernels reported on this thread's ranks since the forms were last agreed on. */
static uint32_t local_timeouts(bench *b) {
  uint32_t flags = 0;
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    for (int f = 0; f < 2; f++) {
      if (!b->pool_ok || !b->form_ok[f] || !s->err[f]->timed_out) continue;
      fprintf(stderr, BENCH ": rank %d: symmpin %s kernel timed out waiting for rank %d\n", s->rank,
              f ? "direct" : "staged", (int)s->err[f]->peer);
      tally(s, false);
      flags |= f ? SB_TIMEOUT_DIRECT : SB_TIMEOUT_STAGED;
    }
  }
  return flags;
}

/* A barrier that also spreads timeouts, failed checks and output hashes: returns the OR of every
 * rank's flags and bad masks; with hashes, every local rank compares them with every rank's. */
sync_blob bench_barrier(bench *b, const sync_blob *mine /* nlocal entries, or NULL */) {
  sync_blob local[SYMMPIN_KERNEL_MAX_RANKS];
  uint32_t to = local_timeouts(b);
  for (int l = 0; l < b->nlocal; l++) {
    if (mine)
      local[l] = mine[l];
    else
      memset(&local[l], 0, sizeof(local[l]));
    local[l].flags |= to;
  }
  const void *out[SYMMPIN_KERNEL_MAX_RANKS];
  bench_exchange(b, local, sizeof(sync_blob), out);
  sync_blob all = {0, 0, {0, 0}};
  sync_blob got[SYMMPIN_KERNEL_MAX_RANKS];
  for (int r = 0; r < b->n; r++) {
    memcpy(&got[r], out[r], sizeof(got[r]));
    all.flags |= got[r].flags;
    all.bad_mask |= got[r].bad_mask;
  }
  for (int f = 0; f < 2; f++) {
    if (b->form_ok[f] && (all.flags & (f ? SB_TIMEOUT_DIRECT : SB_TIMEOUT_STAGED))) {
      b->form_ok[f] = false;
      if (b->reporter)
        fprintf(stderr, BENCH ": symmpin %s dropped for the rest of the run after a timeout\n",
                f ? "direct" : "staged");
    }
  }
  if (mine) {
    /* Every rank reduces in rank order 0..n-1 with the same arithmetic: outputs must be bitwise
     * equal across ranks. */
    for (int l = 0; l < b->nlocal; l++) {
      for (int f = 0; f < 2; f++) {
        uint32_t bit = SB_HASH << f;
        if (!(local[l].flags & bit)) continue;
        bool same = true;
        for (int r = 0; r < b->n; r++)
          same &= !(got[r].flags & bit) || got[r].hash[f] == local[l].hash[f];
        if (!same) {
          fprintf(stderr, BENCH ": rank %d: symmpin %s output differs between ranks\n",
                  b->loc[l].rank, f ? "direct" : "staged");
          all.bad_mask |= 1u << (f ? V_DIRECT : V_STAGED);
        }
        tally(&b->loc[l], same);
      }
    }
  }
  return all;
}

/* Waits for every local stream, bounded. During timed sections a symmpin timeout is fatal: the
 * calls still queued behind it would each wait ~10 s more. */
void bench_sync_all(bench *b, bool in_section) {
  double t0 = bench_now();
  for (unsigned spins = 1;; spins++) {
    bool busy = false;
    for (int l = 0; l < b->nlocal; l++) {
      cudaError_t e = cudaStreamQuery(b->loc[l].stream);
      if (e == cudaErrorNotReady)
        busy = true;
      else
        SYMMPIN_TEST_CUDA(e);
    }
    if (!busy) return;
    if ((spins & 1023) == 0) {
      for (int l = 0; l < b->nlocal; l++) {
        rank_st *s = &b->loc[l];
        ncclResult_t ae = ncclSuccess;
        SYMMPIN_TEST_NCCL(ncclCommGetAsyncError(s->comm, &ae));
        if (ae != ncclSuccess && ae != ncclInProgress)
          bench_die("rank %d: NCCL asynchronous error: %s", s->rank, ncclGetErrorString(ae));
        for (int f = 0; f < 2 && in_section && b->pool_ok; f++)
          if (b->form_ok[f] && s->err[f]->timed_out)
            bench_die(
                "rank %d: symmpin %s kernel timed out (waited for rank %d) in a timed section",
                s->rank, f ? "direct" : "staged", (int)s->err[f]->peer);
      }
      if (bench_now() - t0 > b->o.timeout_s)
        bench_die("GPU work did not finish within %u s (phase %s)", b->o.timeout_s, bench_phase());
    }
    sched_yield();
  }
}
