/* symmpin_pool_grow (grow.h): pool.h's reserve -> post -> attach -> agree sequence as one
 * blocking call over the board, for tools and tests. */
#include "symmem/grow.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

/* Round k: one rank's reserve outcome and export record. */
typedef struct grow_post {
  uint32_t ok; /* reserve succeeded */
  uint32_t pad;
  uint64_t bytes; /* the size this rank asked for */
  uint8_t rec[SYMMPIN_POOL_EXPORT_BYTES];
} grow_post;
_Static_assert(sizeof(grow_post) == 16 + SYMMPIN_POOL_EXPORT_BYTES, "grow_post is plain bytes");

/* Round k+1: whether the rank mapped every peer's chunk. */
typedef struct attach_post {
  uint32_t ok;
} attach_post;

/* The first reason wins: later ones are usually its consequences. */
static void say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t len, const char *fmt, ...) {
  if (!why || !len || why[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, len, fmt, ap);
  va_end(ap);
}

static void keep_first(symmpin_status *st, symmpin_status s) {
  if (*st == SYMMPIN_OK) *st = s;
}

static symmpin_status wait_round(symmpin_board *b, uint32_t round, const symmpin_pool_grow_args *a,
                                 char *why, size_t len) {
  int missing = -1;
  symmpin_status st = symmpin_board_wait(b, round, a->timeout_ms, a->tid, &missing);
  if (st == SYMMPIN_ERR_TIMEOUT)
    say(why, len, "rank %d did not post round %u within %u ms", missing, round, a->timeout_ms);
  else if (st == SYMMPIN_ERR_DISAGREE)
    say(why, len, "rank %d is driven by this thread but was not passed in", missing);
  else if (st != SYMMPIN_OK)
    say(why, len, "waiting for round %u: %s", round, symmpin_status_name(st));
  return st;
}

symmpin_status symmpin_pool_grow(symmpin_pool *const pools[], symmpin_board *const boards[],
                                 int nlocal, const symmpin_pool_grow_args *args, char *why,
                                 size_t why_len) {
  if (why && why_len) why[0] = '\0';
  if (!pools || !boards || !args || nlocal < 1 || args->nranks < nlocal || args->round == 0 ||
      args->round + 1 == 0) {
    SYMMPIN_WARN("pool_grow: bad argument (%d local ranks of %d, round %u)", nlocal,
                 args ? args->nranks : 0, args ? args->round : 0);
    say(why, why_len, "bad argument");
    return SYMMPIN_ERR_INVALID;
  }
  const void **recs = calloc((size_t)args->nranks, sizeof(*recs));
  if (!recs) {
    SYMMPIN_WARN("pool_grow: out of memory");
    say(why, why_len, "out of memory");
    return SYMMPIN_ERR_NOMEM;
  }
  const uint32_t r1 = args->round, r2 = args->round + 1;
  symmpin_status st = SYMMPIN_OK; /* the first failure of this thread's ranks */

  /* Round k: reserve and post the export record (a failed reserve posts "not ok", so that every
   * rank learns of it in this round instead of by timeout). */
  for (int l = 0; l < nlocal; l++) {
    grow_post p;
    memset(&p, 0, sizeof(p));
    p.bytes = args->bytes;
    symmpin_status s = symmpin_pool_reserve(pools[l], args->bytes, p.rec);
    p.ok = s == SYMMPIN_OK;
    keep_first(&st, s);
    keep_first(&st, symmpin_board_post(boards[l], r1, &p, sizeof(p), args->tid));
  }
  symmpin_status ws = wait_round(boards[0], r1, args, why, why_len);
  if (ws != SYMMPIN_OK) {
    /* Something is broken (a rank is gone or hangs): release whoever is still coming without
     * waiting for them, and make sure nobody concludes GO. */
    keep_first(&st, ws);
    symmpin_board_decide(boards[0], r2, SYMMPIN_VERDICT_FAIL);
    attach_post a = {0};
    for (int l = 0; l < nlocal; l++) symmpin_board_post(boards[l], r2, &a, sizeof(a), args->tid);
    free(recs);
    return st;
  }
  bool go = true;
  for (int r = 0; r < args->nranks; r++) {
    size_t n = 0;
    const char *blob = symmpin_board_blob(boards[0], r1, r, &n);
    grow_post p;
    if (!blob || n != sizeof(p)) {
      say(why, why_len, "rank %d's export record is missing or malformed", r);
      go = false;
      continue;
    }
    memcpy(&p, blob, sizeof(p));
    if (!p.ok) {
      say(why, why_len, "rank %d could not reserve %zu bytes", r, args->bytes);
      go = false;
    } else if (p.bytes != args->bytes) {
      say(why, why_len, "rank %d asked for %llu bytes, this thread for %zu", r,
          (unsigned long long)p.bytes, args->bytes);
      keep_first(&st, SYMMPIN_ERR_DISAGREE);
      go = false;
    }
    recs[r] = blob + offsetof(grow_post, rec); /* valid until r posts round k+2 */
  }
  /* Someone gave up while this thread waited: do not map a chunk nobody will use. */
  if (go && symmpin_board_verdict(boards[0], r2) == SYMMPIN_VERDICT_FAIL) {
    say(why, why_len, "another rank gave up");
    go = false;
  }

  /* Round k+1: attach (only if every rank reserved), post the outcome, agree. Waiting for this
   * round also keeps every rank's round-k blob alive until all have read it. */
  for (int l = 0; l < nlocal; l++) {
    attach_post a = {0};
    if (go) {
      symmpin_status s = symmpin_pool_attach(pools[l], recs);
      a.ok = s == SYMMPIN_OK;
      keep_first(&st, s);
    }
    keep_first(&st, symmpin_board_post(boards[l], r2, &a, sizeof(a), args->tid));
  }
  free(recs);
  ws = wait_round(boards[0], r2, args, why, why_len);
  bool all = go && ws == SYMMPIN_OK;
  keep_first(&st, ws);
  for (int r = 0; all && r < args->nranks; r++) {
    size_t n = 0;
    const attach_post *a = symmpin_board_blob(boards[0], r2, r, &n);
    if (!a || n != sizeof(*a) || !a->ok) {
      say(why, why_len, "attach failed on rank %d", r);
      all = false;
    }
  }
  /* The first proposal stands for every rank: a rank that gave up and a rank that saw everything
   * can never conclude differently. */
  bool agreed = symmpin_board_decide(boards[0], r2, all ? SYMMPIN_VERDICT_GO : SYMMPIN_VERDICT_FAIL) ==
                SYMMPIN_VERDICT_GO;
  for (int l = 0; l < nlocal; l++) symmpin_pool_settle(pools[l], agreed);
  if (agreed) {
    if (why && why_len) why[0] = '\0';
    return SYMMPIN_OK;
  }
  say(why, why_len, "another rank gave up");
  return st != SYMMPIN_OK ? st : SYMMPIN_ERR_DISAGREE;
}
