/* symmpin-bench's result checks: inputs that any rank can recompute for every rank, the check of
 * every variant's output before timing (all-reduce and reduce-scatter: against a float64
 * reference, symmpin also bitwise against NCCL on <= 2 ranks; all-gather: bitwise against every
 * rank's input, a copy; symmpin's outputs across ranks where they are the same buffer), and the
 * recheck of symmpin's outputs after timing. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/gpu/bench.h"

/* Rank r's input element i for one (dtype, size): +-[0.5, 2), never zero, a pure function of
 * (key, i) so that any rank can recompute every rank's inputs for the reference. */
static float input_value(uint64_t rank_key, size_t i) {
  uint64_t h = symmpin_test_splitmix64(rank_key + (uint64_t)i);
  float mag = 0.5f + 1.5f * (float)(h >> 40) * (1.0f / 16777216.0f);
  return (h & 1) ? -mag : mag;
}

static uint64_t rank_key(uint64_t size_seed, int r) {
  return symmpin_test_splitmix64(size_seed ^ (0x100000001B3ull * (uint64_t)(r + 1)));
}

/* The all-reduce (collective 0) keeps the inputs of the runs from before the other collectives. */
static uint64_t size_seed(uint64_t seed, int coll, int dtype, size_t bytes) {
  return symmpin_test_splitmix64(
      seed ^
      symmpin_test_splitmix64(((uint64_t)dtype << 56) ^ ((uint64_t)coll << 48) ^ (uint64_t)bytes));
}

/* Only bf16 and f32: the options accept no other datatype. */
static void fill_input(void *dst, int dtype, size_t count, uint64_t key) {
  size_t es = symmpin_dtype_size(dtype);
  for (size_t i = 0; i < count; i++)
    symmpin_test_encode(dtype, input_value(key, i), 0, (char *)dst + i * es);
}

/* The input element as the GPU sees it (after rounding to the dtype), exactly, in double. */
static double input_elem(int dtype, uint64_t key, size_t i) {
  float v = input_value(key, i);
  return dtype == SYMMPIN_BFLOAT16
             ? (double)symmpin_test_bf16_to_float(symmpin_test_bf16_from_float(v))
             : (double)v;
}

static double decode(int dtype, const void *p, size_t i) {
  return symmpin_test_decode(dtype, (const char *)p + i * symmpin_dtype_size(dtype));
}

static uint64_t hash_bytes(const void *p, size_t n) { /* FNV-1a over 8-byte words */
  const uint8_t *q = p;
  uint64_t h = 1469598103934665603ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, q + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < n; i++) h = (h ^ q[i]) * 1099511628211ull;
  return h ^ n;
}

/* Checks one local rank's outputs of a reducing collective (in b->host_out) against a float64
 * reference over every rank's inputs: element i of the all-reduce's output sums the ranks'
 * elements i, of the reduce-scatter's output their elements rank x count + i (rank's chunk of
 * their inputs). NCCL may add in any order and round every partial sum to the output type:
 * |got - ref| <= u_out |ref| + (n-1) u_out S (S = sum of |x_i|). symmpin accumulates in float in
 * rank order and rounds once (docs/kernels.md): u_out |ref| + 2 n 2^-24 S; on <= 2 ranks a sum
 * rounds once in any order, so symmpin must also be bitwise equal to NCCL's output wherever
 * NCCL's is right. Returns the mask of variants that failed; prints the first bad element. */
static uint32_t compare_reduced(bench *b, const rank_st *s, int coll, int dtype, size_t count,
                                uint64_t sseed, uint32_t ran) {
  uint64_t keys[SYMMPIN_KERNEL_MAX_RANKS];
  for (int r = 0; r < b->n; r++) keys[r] = rank_key(sseed, r);
  size_t es = symmpin_dtype_size(dtype);
  size_t base = coll == SYMMPIN_COLL_REDUCESCATTER ? (size_t)s->rank * count : 0;
  double uo = symmpin_test_unit_roundoff(dtype), ua = ldexp(1.0, -24);
  uint32_t bad = 0;
  for (size_t i = 0; i < count; i++) {
    double ref = 0, S = 0;
    for (int r = 0; r < b->n; r++) {
      double x = input_elem(dtype, keys[r], base + i);
      ref += x;
      S += fabs(x);
    }
    bool nccl_ok = false;
    for (int v = 0; v < V_COUNT; v++) {
      if (!(ran & (1u << v))) continue;
      double got = decode(dtype, b->host_out[v], i);
      bool symm = v == V_STAGED || v == V_DIRECT;
      double tol = symm ? uo * fabs(ref) + 2.0 * b->n * ua * S
                        : uo * fabs(ref) + (double)(b->n - 1) * uo * S;
      bool ok = fabs(got - ref) <= tol; /* false for NaN (the poison) */
      if (v == V_NCCL) nccl_ok = ok;
      bool bitwise = true;
      if (ok && symm && b->n <= 2 && nccl_ok && (ran & (1u << V_NCCL)))
        bitwise = ok = memcmp(b->host_out[v] + i * es, b->host_out[V_NCCL] + i * es, es) == 0;
      if (!ok && !(bad & (1u << v))) {
        bad |= 1u << v;
        char extra[96] = "";
        if (!bitwise)
          snprintf(extra, sizeof(extra), ", not bitwise equal to NCCL's %.9g",
                   decode(dtype, b->host_out[V_NCCL], i));
        fprintf(stderr,
                BENCH ": rank %d: %s %s %s %zu bytes: element %zu is %.9g, reference %.9g "
                      "(tolerance %.3g)%s\n",
                s->rank, symmpin_coll_name(coll), bench_v_name[v], symmpin_dtype_name(dtype),
                count * es, i, got, ref, tol, extra);
      }
    }
  }
  return bad;
}

/* Checks one local rank's all-gather outputs (in b->host_out) against b->host_ref, every rank's
 * input in rank order: a copy, so every variant bitwise, at any rank count (symmpin is then
 * bitwise NCCL's wherever NCCL's is right). Returns the mask of variants that failed; prints the
 * first bad element. */
static uint32_t compare_gathered(bench *b, const rank_st *s, int dtype, size_t count,
                                 uint32_t ran) {
  size_t es = symmpin_dtype_size(dtype), total = (size_t)b->n * count;
  uint32_t bad = 0;
  for (int v = 0; v < V_COUNT; v++) {
    if (!(ran & (1u << v)) || memcmp(b->host_out[v], b->host_ref, total * es) == 0) continue;
    bad |= 1u << v;
    size_t i = 0;
    while (i < total && memcmp(b->host_out[v] + i * es, b->host_ref + i * es, es) == 0) i++;
    fprintf(stderr,
            BENCH ": rank %d: allgather %s %s %zu bytes: element %zu (rank %zu's element %zu) is "
                  "%.9g, expected %.9g bitwise\n",
            s->rank, bench_v_name[v], symmpin_dtype_name(dtype), count * es, i, i / count,
            i % count, decode(dtype, b->host_out[v], i), decode(dtype, b->host_ref, i));
  }
  return bad;
}

/* Fresh inputs on every rank, poisoned outputs, one call of every variant, then the checks. */
void bench_check_size(bench *b, int ci, int di, int si, size_t count) {
  int coll = b->o.colls[ci], dtype = b->o.dtypes[di];
  size_t es = symmpin_dtype_size(dtype), bytes = count * es;
  size_t send_count = symmpin_coll_send_count(coll, count, b->n);
  size_t send_bytes = send_count * es;
  size_t recv_bytes = symmpin_coll_recv_count(coll, count, b->n) * es;
  uint64_t sseed = size_seed(b->o.seed, coll, dtype, bytes);
  bool in_slot = bench_usable(b, V_DIRECT, coll, dtype, count);
  bench_tick("check", bytes);
  bench_sync_all(b, false);
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    SYMMPIN_TEST_CUDA(cudaSetDevice(s->device));
    fill_input(b->host_in, dtype, send_count, rank_key(sseed, s->rank));
    SYMMPIN_TEST_CUDA(
        cudaMemcpyAsync(s->send, b->host_in, send_bytes, cudaMemcpyHostToDevice, s->stream));
    SYMMPIN_TEST_CUDA(
        cudaMemcpyAsync(s->win_send, b->host_in, send_bytes, cudaMemcpyHostToDevice, s->stream));
    if (in_slot)
      SYMMPIN_TEST_CUDA(cudaMemcpyAsync(
          (char *)s->slot[bench_slot_class(b, coll, dtype, count, SYMMPIN_INPUT_IN_SLOT)][s->rank] +
              symmpin_kernel_in_slot_offset(),
          b->host_in, send_bytes, cudaMemcpyHostToDevice, s->stream));
    for (int v = 0; v < V_COUNT; v++)
      SYMMPIN_TEST_CUDA(cudaMemsetAsync(s->out[v], 0xFF, recv_bytes, s->stream));
    SYMMPIN_TEST_CUDA(cudaStreamSynchronize(s->stream)); /* host_in is reused by the next rank */
  }
  if (coll == SYMMPIN_COLL_ALLGATHER) /* what every rank must receive: every rank's input */
    for (int r = 0; r < b->n; r++)
      fill_input(b->host_ref + (size_t)r * bytes, dtype, count, rank_key(sseed, r));
  bench_barrier(b, NULL); /* every rank's inputs are in place before anyone reads a peer's */
  uint32_t ran = 0;
  for (int v = 0; v < V_COUNT; v++) {
    if (!bench_usable(b, v, coll, dtype, count)) continue;
    bench_issue(b, v, coll, dtype, count, 1);
    ran |= 1u << v;
  }
  bench_sync_all(b, false); /* a timeout here ends after ~10 s and drops the form (next barrier) */
  sync_blob mine[SYMMPIN_KERNEL_MAX_RANKS];
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    SYMMPIN_TEST_CUDA(cudaSetDevice(s->device));
    for (int v = 0; v < V_COUNT; v++)
      if (ran & (1u << v))
        SYMMPIN_TEST_CUDA(
            cudaMemcpy(b->host_out[v], s->out[v], recv_bytes, cudaMemcpyDeviceToHost));
    uint32_t bad = coll == SYMMPIN_COLL_ALLGATHER
                       ? compare_gathered(b, s, dtype, count, ran)
                       : compare_reduced(b, s, coll, dtype, count, sseed, ran);
    for (int v = 0; v < V_COUNT; v++)
      if (ran & (1u << v)) tally(s, !(bad & (1u << v)));
    memset(&mine[l], 0, sizeof(mine[l]));
    mine[l].bad_mask = bad;
    for (int f = 0; f < 2; f++) {
      int v = f == SYMMPIN_INPUT_STAGED ? V_STAGED : V_DIRECT;
      s->pre_ok[f] = (ran & (1u << v)) != 0;
      if (!s->pre_ok[f]) continue;
      s->pre_hash[f] = hash_bytes(b->host_out[v], recv_bytes);
      /* Compared across ranks where every rank holds the same buffer: not the reduce-scatter's
       * outputs, each rank's own chunk. */
      if (coll == SYMMPIN_COLL_REDUCESCATTER) continue;
      mine[l].flags |= SB_HASH << f;
      mine[l].hash[f] = s->pre_hash[f];
    }
  }
  sync_blob all = bench_barrier(b, mine);
  for (int v = 0; v < V_COUNT; v++)
    if (all.bad_mask & (1u << v)) *bad_at(b, ci, di, si, v) = 1;
}

/* After the timed rounds (last writes: graph replays) symmpin's outputs must still hold the bits
 * of the check: back-to-back calls and replays computed the same thing. */
void bench_recheck_size(bench *b, int ci, int di, int si, size_t count) {
  int coll = b->o.colls[ci], dtype = b->o.dtypes[di];
  size_t es = symmpin_dtype_size(dtype), bytes = count * es;
  size_t recv_bytes = symmpin_coll_recv_count(coll, count, b->n) * es;
  bench_tick("recheck", bytes);
  bench_sync_all(b, false);
  sync_blob mine[SYMMPIN_KERNEL_MAX_RANKS];
  for (int l = 0; l < b->nlocal; l++) {
    rank_st *s = &b->loc[l];
    memset(&mine[l], 0, sizeof(mine[l]));
    SYMMPIN_TEST_CUDA(cudaSetDevice(s->device));
    for (int v = V_STAGED; v <= V_DIRECT; v++) {
      if (!bench_usable(b, v, coll, dtype, count) || !s->pre_ok[bench_form_of(v)]) continue;
      SYMMPIN_TEST_CUDA(cudaMemcpy(b->host_out[v], s->out[v], recv_bytes, cudaMemcpyDeviceToHost));
      bool same = hash_bytes(b->host_out[v], recv_bytes) == s->pre_hash[bench_form_of(v)];
      if (!same) {
        fprintf(stderr,
                BENCH ": rank %d: %s %s %s %zu bytes: output after the timed calls differs from "
                      "the checked one\n",
                s->rank, symmpin_coll_name(coll), bench_v_name[v], symmpin_dtype_name(dtype),
                bytes);
        mine[l].bad_mask |= 1u << v;
      }
      tally(s, same);
    }
  }
  sync_blob all = bench_barrier(b, mine);
  for (int v = 0; v < V_COUNT; v++)
    if (all.bad_mask & (1u << v)) *bad_at(b, ci, di, si, v) = 1;
}
