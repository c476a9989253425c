/* libFuzzer target: a peer's record blob as the agreement reads it (agree/agree.c, the record
 * round: its head, the encoded call record of planner/record.h, its measurements of choice.h).
 *
 * Rank 0 is a real agreement (agree/agree.h) on a real board, making the calls of agree_world.h
 * with a FAKE GPU side. This target is rank 1 of the same board, posting with the board's own
 * calls: the input as its record blob of the first epoch, and after that whatever rank 0 posted
 * (its plan round, an "attached" yes, its later records), so that a blob that parses leads rank 0
 * through the plan, attach, GO, routing under the plan (with the route log check against rank 1's
 * log, empty) and a later epoch. Rank 1 posts from this very thread, so a wait of rank 0 for a post
 * rank 1 never makes ends at once (the board tells a wait that would deadlock), never by timeout.
 *
 * Checked: rank 0 never stops for an error of its own (an agreement that ends is "not one host"
 * or "no P2P", never SYMMPIN_AGREE_ERROR), a plan it adopts has a pinned slot for every call it
 * routes there, inside the plan's pool. The seeds (corpus/fuzz_record/) are real record blobs
 * (tests/fuzz/make_seeds.c) of the same calls. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "agree/agree.h"
#include "common/log.h"
#include "symmem/board.h"
#include "tests/fuzz/agree_world.h"

#define HELLO_ROUND 1u
#define RECORD_ROUND(e) (3u * (e) - 1u)

static uint64_t key_base[2], key_counter;
static const int rank0 = 0;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  symmpin_log_configure(SYMMPIN_LOG_NONE, -1);
  if (getrandom(key_base, sizeof key_base, 0) != (ssize_t)sizeof key_base) abort();
  return 0;
}

static void fail(const char *what, uint64_t n) {
  fprintf(stderr, "fuzz_record: %s (call %llu)\n", what, (unsigned long long)n);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > SYMMPIN_BOARD_BLOB_MAX) return 0; /* more than a rank can post */
  symmpin_comm_key key = {key_base[0], key_base[1] + ++key_counter};
  uint64_t tid = (uint64_t)gettid();

  symmpin_agree_params p = world_params(key, &rank0);
  symmpin_agree *a = NULL;
  if (symmpin_agree_open(&p, &a) != SYMMPIN_OK) abort();
  symmpin_board *peer = NULL;
  if (symmpin_board_open(key, 1, WORLD_RANKS, &peer) != SYMMPIN_OK) abort();
  static const int32_t hello[2] = {4242, 0};
  if (symmpin_board_post(peer, HELLO_ROUND, hello, sizeof hello, tid) != SYMMPIN_OK) abort();

  uint32_t posted = HELLO_ROUND; /* rank 1's last round */
  for (uint64_t n = 1; n <= WORLD_CALLS; n++) {
    symmpin_agree_call c = world_call(n);
    (void)symmpin_agree_step(a, n, &c);
    if (symmpin_agree_stopped(a) == SYMMPIN_AGREE_ERROR) fail("rank 0 stopped on an error", n);
    const symmpin_plan *plan = symmpin_agree_plan(a);
    if (plan) {
      const symmpin_plan_site *slot = NULL;
      if (symmpin_agree_route(a, &c, &slot) == SYMMPIN_PLAN_PINNED) {
        if (!slot || !slot->pinned || slot->count != c.count || slot->dtype != c.dtype ||
            slot->op != c.op)
          fail("a call routed to a slot of another shape", n);
        if (slot->offset + slot->slot_bytes > plan->pool_bytes)
          fail("a pinned slot outside the plan's pool", n);
      }
      symmpin_agree_route_log(a, n, &c, slot);
      symmpin_alarm al;
      (void)symmpin_agree_route_check(a, 8, &al);
    }
    /* Rank 1 answers what rank 0 posted at this call: its latest round (an epoch that failed
     * leaves rounds out). */
    uint32_t round = 0;
    size_t bytes = 0;
    const void *blob = NULL;
    for (uint32_t r = posted + 1; r <= posted + 12; r++) {
      size_t b = 0;
      const void *q = symmpin_board_blob(peer, r, 0, &b);
      if (q) round = r, blob = q, bytes = b;
    }
    if (!round) continue;
    static const int32_t attached[1] = {1};
    if (round == RECORD_ROUND(1)) {
      blob = data;
      bytes = size;
    } else if (round % 3 == 1) { /* the "attached" round of an epoch */
      blob = attached;
      bytes = sizeof attached;
    }
    if (symmpin_board_post(peer, round, blob, bytes, tid) != SYMMPIN_OK) abort();
    posted = round;
  }
  symmpin_board_close(peer);
  symmpin_agree_close(a);
  return 0;
}
