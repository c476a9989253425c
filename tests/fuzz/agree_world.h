/* What fuzz_record and make_seeds share: one rank's calls and the FAKE GPU side of its
 * agreement (agree/agree.h's symmpin_agree_ops), so that the record blobs make_seeds writes are
 * records of the very calls fuzz_record's rank makes (they close at the same call). */
#ifndef SYMMPIN_TESTS_FUZZ_AGREE_WORLD_H
#define SYMMPIN_TESTS_FUZZ_AGREE_WORLD_H

#include <string.h>
#include <unistd.h>

#include "agree/agree.h"

#define WORLD_RANKS 2
#define WORLD_CALLS 160 /* warm-up, the first agreement, and a later epoch */
#define WORLD_WARMUP 16

/* Call n (from 1): a loop of 4 shapes, the fourth in place and on a second stream; every 8th
 * call in a group. */
static inline symmpin_agree_call world_call(uint64_t n) {
  uint64_t i = (n - 1) % 4;
  return (symmpin_agree_call){.site = 0x1000 + i, .stream_ord = i == 3, .count = 256u << (2 * i),
                              .dtype = i == 2 ? SYMMPIN_FLOAT32 : SYMMPIN_BFLOAT16,
                              .op = SYMMPIN_SUM, .in_place = i == 3,
                              .group_token = n % 8 == 0 ? n : 0, .send_alloc = 1 + i,
                              .recv_alloc = 1 + i};
}

static inline symmpin_status world_facts(void *ctx, symmpin_pool_facts *out) {
  memset(out, 0, sizeof *out);
  out->pid = (int32_t)getpid();
  out->device = *(const int *)ctx;
  out->uuid[0] = (uint8_t)(out->device + 1);
  return SYMMPIN_OK;
}

/* Every pair of GPUs reaches each other (fuzz_record's rank 1 posts rank 0's own records back in
 * later epochs, GPU identity included: a check of distinct GPUs would stop them). */
static inline symmpin_status world_check_peers(void *ctx, const symmpin_pool_facts *facts,
                                               int nranks, char *why, size_t why_len) {
  (void)ctx, (void)why, (void)why_len;
  volatile int32_t seen = 0;
  for (int r = 0; r < nranks; r++) seen += facts[r].device; /* read: they came off the board */
  (void)seen;
  return SYMMPIN_OK;
}

static inline symmpin_status world_reserve(void *ctx, uint64_t bytes, void *export_rec) {
  (void)ctx;
  memset(export_rec, 0, SYMMPIN_POOL_EXPORT_BYTES);
  memcpy(export_rec, &bytes, sizeof bytes);
  return SYMMPIN_OK;
}

/* Every export must name the plan's pool size (as the real attach checks the chunks' sizes). */
static inline symmpin_status world_attach(void *ctx, const void *const exports[],
                                          const symmpin_plan *plan) {
  (void)ctx;
  for (int r = 0; r < plan->nranks; r++) {
    uint64_t b;
    memcpy(&b, exports[r], sizeof b);
    if (b != plan->pool_bytes) return SYMMPIN_ERR_DISAGREE;
  }
  return SYMMPIN_OK;
}

static inline void world_settle(void *ctx, bool agreed) { (void)ctx, (void)agreed; }

static inline size_t world_shape_times(void *ctx, symmpin_choice_entry *out, size_t cap) {
  (void)ctx;
  size_t n = cap < 2 ? cap : 2;
  for (size_t i = 0; i < n; i++) {
    symmpin_agree_call c = world_call(i + 1);
    out[i] = (symmpin_choice_entry){.count = c.count, .dtype = c.dtype, .op = c.op,
                                    .nccl_ns = 9000, .symmpin_ns = 4000 + 6000 * (uint32_t)i,
                                    .nccl_n = 16, .symmpin_n = 16};
  }
  return n;
}

/* Rank `*rank` of the world's communicator `key`. */
static inline symmpin_agree_params world_params(symmpin_comm_key key, const int *rank) {
  return (symmpin_agree_params){
      .key = key, .comm = 0, .rank = *rank, .nranks = WORLD_RANKS, .warmup = WORLD_WARMUP,
      .mode = SYMMPIN_PLAN_SHARED, .max_bytes = 2u << 20, .capture_bytes = 1u << 20,
      .timeout_ms = 1000,
      .ops = {.ctx = (void *)rank, .gpu_facts = world_facts, .check_peers = world_check_peers,
              .reserve = world_reserve, .attach = world_attach, .settle = world_settle,
              .shape_times = world_shape_times}};
}

#endif
