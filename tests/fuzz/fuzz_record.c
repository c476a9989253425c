/* libFuzzer target: a peer's record blob as the agreement reads it (agree/agree.c, the record
 * round: its head, the encoded call record of planner/record.h, its measurements of choice.h).
 *
 * Two real agreements (agree/agree.h), ranks 0 and 1 of one real board, both driven by this
 * thread call by call with agree_world.h's calls and a FAKE GPU side, as test_agree drives them.
 * Rank 1's post of the first record round is replaced by the input on its way to the board
 * (linked with -Wl,--wrap=symmpin_board_post); everything else is what the ranks post
 * themselves. Both ranks read both records, so a blob that parses leads both through the plan,
 * attach, GO, routing under the plan with the route log check, and later epochs.
 *
 * Checked: neither rank stops on an error of its own (SYMMPIN_AGREE_ERROR); at the end both have
 * the same plan (or none), the same stop state and the same "measuring"; after every call they
 * agree whether a plan is in force; a pinned call's slot has the call's shape and lies inside the
 * plan's pool; no route alarm (both route alike). The seeds (corpus/fuzz_record/) are real record
 * blobs of these calls (tests/fuzz/make_seeds.c). */
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

#define RECORD_ROUND_1 2u /* round 3e-1 of epoch 1 (agree.h) */

static uint64_t key_base[2], key_counter;
static int stepping = -1;          /* the rank whose step is running */
static const uint8_t *inject;      /* this input, until rank 1 has posted it */
static size_t inject_len;

symmpin_status __real_symmpin_board_post(symmpin_board *b, uint32_t round, const void *blob,
                                         size_t bytes, uint64_t tid);
symmpin_status __wrap_symmpin_board_post(symmpin_board *b, uint32_t round, const void *blob,
                                         size_t bytes, uint64_t tid) {
  if (stepping == 1 && round == RECORD_ROUND_1 && inject) {
    blob = inject;
    bytes = inject_len;
    inject = NULL;
  }
  return __real_symmpin_board_post(b, round, blob, bytes, tid);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  /* SYMMPIN_FUZZ_DEBUG=1: the library's log at INFO (what one input does, when reproducing). */
  const char *debug = getenv("SYMMPIN_FUZZ_DEBUG");
  symmpin_log_configure(debug && *debug == '1' ? SYMMPIN_LOG_INFO : SYMMPIN_LOG_NONE, -1);
  if (getrandom(key_base, sizeof key_base, 0) != (ssize_t)sizeof key_base) abort();
  return 0;
}

static void fail(const char *what, int rank, uint64_t n) {
  fprintf(stderr, "fuzz_record: rank %d, call %llu: %s\n", rank, (unsigned long long)n, what);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > SYMMPIN_BOARD_BLOB_MAX) return 0; /* more than a rank can post */
  static const int ranks[WORLD_RANKS] = {0, 1};
  symmpin_comm_key key = {key_base[0], key_base[1] + ++key_counter};
  symmpin_agree *a[WORLD_RANKS];
  for (int r = 0; r < WORLD_RANKS; r++) {
    symmpin_agree_params p = world_params(key, &ranks[r]);
    if (symmpin_agree_open(&p, &a[r]) != SYMMPIN_OK) abort();
  }
  inject = data;
  inject_len = size;
  for (uint64_t n = 1; n <= WORLD_CALLS; n++) {
    symmpin_agree_call c = world_call(n);
    for (int r = 0; r < WORLD_RANKS; r++) {
      stepping = r;
      (void)symmpin_agree_step(a[r], n, &c);
      stepping = -1;
      if (symmpin_agree_stopped(a[r]) == SYMMPIN_AGREE_ERROR) fail("stopped on an error", r, n);
      const symmpin_plan *plan = symmpin_agree_plan(a[r]);
      if (!plan) continue;
      const symmpin_plan_site *slot = NULL;
      if (symmpin_agree_route(a[r], &c, &slot) == SYMMPIN_PLAN_PINNED) {
        if (!slot || !slot->pinned || slot->count != c.count || slot->dtype != c.dtype ||
            slot->op != c.op)
          fail("a call routed to a slot of another shape", r, n);
        if (slot->offset + slot->slot_bytes > plan->pool_bytes)
          fail("a pinned slot outside the plan's pool", r, n);
      } else {
        slot = NULL;
      }
      symmpin_agree_route_log(a[r], n, &c, slot);
      symmpin_alarm al;
      if (symmpin_agree_route_check(a[r], 8, &al)) fail("the ranks routed a call differently", r, n);
    }
    /* A GO is adopted by every rank at the same call (docs/design.md). */
    if ((symmpin_agree_plan(a[0]) == NULL) != (symmpin_agree_plan(a[1]) == NULL))
      fail("one rank has a plan, the other none", 1, n);
  }
  const symmpin_plan *p0 = symmpin_agree_plan(a[0]), *p1 = symmpin_agree_plan(a[1]);
  if (p0 && p1 && (p0->digest != p1->digest || p0->pool_bytes != p1->pool_bytes))
    fail("the ranks ended with different plans", 1, WORLD_CALLS);
  if (symmpin_agree_stopped(a[0]) != symmpin_agree_stopped(a[1]))
    fail("the ranks ended in different stop states", 1, WORLD_CALLS);
  if (symmpin_agree_measuring(a[0]) != symmpin_agree_measuring(a[1]))
    fail("the ranks disagree on measuring", 1, WORLD_CALLS);
  for (int r = 0; r < WORLD_RANKS; r++) symmpin_agree_close(a[r]);
  inject = NULL;
  return 0;
}
