/* The board (board.h): one POSIX shared-memory object per communicator key, holding a header,
 * one small control record per rank and two blob areas per rank (used by round parity).
 *
 * Everything shared is reached through C11 atomics on lock-free 32/64-bit words, which work
 * across processes on the same mapping; nothing here takes a lock, so a rank that dies never
 * leaves the others stuck (they time out). */
#include "symmem/board.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "board words must be lock-free to work across processes");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "board words must be lock-free to work across processes");

#define BOARD_MAGIC 0x42504d4d59530001ull /* "SYMMPB" + layout version 1 */
/* Verdicts live in a ring tagged by round: ranks never drift more than a round or two apart
 * (every round waits for all posts), so a ring this size never evicts a round still in use. */
#define BOARD_VERDICT_SLOTS 1024u
/* A board is sized for nranks (sparse, but mapped in full): past this, the communicator cannot
 * be a one-host one, and the mapping would only waste address space. */
#define BOARD_MAX_RANKS 4096
/* How long an opener waits for the creator to size and initialize the object (microseconds of
 * work for the creator; the bound only matters if the creator died in between). */
#define BOARD_OPEN_WAIT_MS 5000u

struct board_hdr {
  _Atomic uint64_t magic; /* written last by the creator: the header is valid once it is set */
  uint64_t key_hi, key_lo;
  uint64_t nranks;
  uint64_t blob_max;
  uint64_t total_bytes;
  _Atomic uint32_t attached; /* distinct ranks that ever opened the board */
  _Atomic uint32_t live;     /* opens not yet closed */
  _Atomic uint32_t unlinked; /* 1 once the name was removed (exactly one rank does it) */
  uint32_t pad;
  /* (round << 32) | verdict, at round % BOARD_VERDICT_SLOTS */
  _Atomic uint64_t verdicts[BOARD_VERDICT_SLOTS];
};

/* One rank's control record; 64-byte aligned so ranks polling each other do not share lines
 * with the writer's other fields more than necessary. */
struct board_rank {
  _Atomic uint32_t attached;      /* 1 once this rank opened the board */
  _Atomic uint32_t last_round;    /* the highest round this rank posted (0 = none) */
  _Atomic uint64_t last_tid;      /* the thread that posted last_round */
  _Atomic uint32_t area_round[2]; /* the round whose blob area[parity] holds (0 = being written) */
  uint64_t area_bytes[2];
  uint8_t pad[24];
};
_Static_assert(sizeof(struct board_rank) == 64, "one cache line per rank");

struct symmpin_board {
  struct board_hdr *hdr;
  struct board_rank *ranks;
  unsigned char *blobs;
  size_t map_bytes;
  int rank, nranks;
  char name[48];
};

static size_t board_align(size_t v, size_t a) { return (v + a - 1) / a * a; }

static size_t board_ranks_offset(void) { return board_align(sizeof(struct board_hdr), 64); }

static size_t board_blobs_offset(int nranks) {
  return board_align(board_ranks_offset() + (size_t)nranks * sizeof(struct board_rank), 4096);
}

static size_t board_total_bytes(int nranks) {
  return board_blobs_offset(nranks) + (size_t)nranks * 2 * SYMMPIN_BOARD_BLOB_MAX;
}

static uint64_t board_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Back off gently: a few yields first (a peer thread is often about to post), then sleeps that
 * grow to 1 ms, so a long wait costs no CPU but a short one adds little latency. */
static void board_backoff(unsigned *iter) {
  unsigned i = (*iter)++;
  if (i < 64) {
    sched_yield();
    return;
  }
  unsigned us = i < 74 ? 1u << (i - 64) : 1000u;
  if (us > 1000u) us = 1000u;
  struct timespec ts = {0, (long)us * 1000L};
  nanosleep(&ts, NULL);
}

/* ---- open / close ----------------------------------------------------------------------- */

static void board_name(symmpin_comm_key key, char *name, size_t len) {
  snprintf(name, len, "/symmpin-%016" PRIx64 "%016" PRIx64, key.hi, key.lo);
}

/* Only the first rank to see the board complete (or the last to leave one that never got
 * complete, e.g. a multi-host communicator) removes the name. */
static void board_unlink_once(symmpin_board *b) {
  uint32_t expected = 0;
  if (atomic_compare_exchange_strong(&b->hdr->unlinked, &expected, 1u)) {
    if (shm_unlink(b->name) != 0 && errno != ENOENT)
      SYMMPIN_WARN("board %s: shm_unlink failed: %s (the name stays in /dev/shm)", b->name,
                   strerror(errno));
  }
}

/* Opens or creates the object; *creator says which. Retries when the name vanishes between a
 * failed exclusive create and the open (the board was just completed and unlinked). */
static symmpin_status board_shm_open(const char *name, int *fd_out, bool *creator) {
  uint64_t deadline = board_now_ms() + BOARD_OPEN_WAIT_MS;
  unsigned iter = 0;
  for (;;) {
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      *fd_out = fd;
      *creator = true;
      return SYMMPIN_OK;
    }
    if (errno != EEXIST) break;
    fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd >= 0) {
      *fd_out = fd;
      *creator = false;
      return SYMMPIN_OK;
    }
    if (errno != ENOENT) break;
    if (board_now_ms() > deadline) {
      errno = ETIMEDOUT;
      break;
    }
    board_backoff(&iter);
  }
  SYMMPIN_WARN("board %s: shm_open failed: %s", name, strerror(errno));
  return SYMMPIN_ERR_IO;
}

/* An opener that is not the creator waits (bounded) until the creator has sized the object;
 * mapping it earlier would fault on first touch. */
static symmpin_status board_wait_size(int fd, const char *name, size_t total) {
  uint64_t deadline = board_now_ms() + BOARD_OPEN_WAIT_MS;
  unsigned iter = 0;
  for (;;) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
      SYMMPIN_WARN("board %s: fstat failed: %s", name, strerror(errno));
      return SYMMPIN_ERR_IO;
    }
    if ((size_t)st.st_size == total) return SYMMPIN_OK;
    if (st.st_size != 0) {
      SYMMPIN_WARN("board %s: size %lld, expected %zu (rank counts differ)", name,
                   (long long)st.st_size, total);
      return SYMMPIN_ERR_DISAGREE;
    }
    if (board_now_ms() > deadline) {
      SYMMPIN_WARN("board %s: creator did not size it within %u ms", name, BOARD_OPEN_WAIT_MS);
      return SYMMPIN_ERR_TIMEOUT;
    }
    board_backoff(&iter);
  }
}

static symmpin_status board_wait_magic(struct board_hdr *h, const char *name) {
  uint64_t deadline = board_now_ms() + BOARD_OPEN_WAIT_MS;
  unsigned iter = 0;
  while (atomic_load_explicit(&h->magic, memory_order_acquire) != BOARD_MAGIC) {
    if (board_now_ms() > deadline) {
      SYMMPIN_WARN("board %s: creator did not initialize it within %u ms", name,
                   BOARD_OPEN_WAIT_MS);
      return SYMMPIN_ERR_TIMEOUT;
    }
    board_backoff(&iter);
  }
  return SYMMPIN_OK;
}

symmpin_status symmpin_board_open(symmpin_comm_key key, int rank, int nranks, symmpin_board **out) {
  if (!out || nranks < 1 || rank < 0 || rank >= nranks) {
    SYMMPIN_WARN("board_open: bad rank %d of %d%s", rank, nranks,
                 out ? "" : " (no output pointer)");
    return SYMMPIN_ERR_INVALID;
  }
  if (nranks > BOARD_MAX_RANKS) {
    SYMMPIN_INFO("board_open: rank %d: %d ranks are more than one host holds (max %d)", rank,
                 nranks, BOARD_MAX_RANKS);
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  symmpin_board *b = calloc(1, sizeof(*b));
  if (!b) {
    SYMMPIN_WARN("board_open: out of memory (rank %d of %d)", rank, nranks);
    return SYMMPIN_ERR_NOMEM;
  }
  b->rank = rank;
  b->nranks = nranks;
  b->map_bytes = board_total_bytes(nranks);
  board_name(key, b->name, sizeof(b->name));

  int fd = -1;
  bool creator = false;
  symmpin_status st = board_shm_open(b->name, &fd, &creator);
  if (st != SYMMPIN_OK) goto fail_free;

  if (creator) {
    if (ftruncate(fd, (off_t)b->map_bytes) != 0) {
      SYMMPIN_WARN("board %s: ftruncate(%zu) failed: %s", b->name, b->map_bytes, strerror(errno));
      st = SYMMPIN_ERR_IO;
      shm_unlink(b->name); /* nobody can use a board of the wrong size */
      goto fail_fd;
    }
  } else {
    st = board_wait_size(fd, b->name, b->map_bytes);
    if (st != SYMMPIN_OK) goto fail_fd;
  }

  void *map = mmap(NULL, b->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    SYMMPIN_WARN("board %s: mmap(%zu) failed: %s", b->name, b->map_bytes, strerror(errno));
    st = SYMMPIN_ERR_IO;
    if (creator) shm_unlink(b->name);
    goto fail_fd;
  }
  close(fd);
  fd = -1;
  b->hdr = map;
  b->ranks = (struct board_rank *)((unsigned char *)map + board_ranks_offset());
  b->blobs = (unsigned char *)map + board_blobs_offset(nranks);

  if (creator) {
    /* ftruncate gave zeroed memory: only the identity needs writing before the magic. */
    b->hdr->key_hi = key.hi;
    b->hdr->key_lo = key.lo;
    b->hdr->nranks = (uint64_t)nranks;
    b->hdr->blob_max = SYMMPIN_BOARD_BLOB_MAX;
    b->hdr->total_bytes = b->map_bytes;
    atomic_store_explicit(&b->hdr->magic, BOARD_MAGIC, memory_order_release);
  } else {
    st = board_wait_magic(b->hdr, b->name);
    if (st != SYMMPIN_OK) goto fail_map;
    if (b->hdr->key_hi != key.hi || b->hdr->key_lo != key.lo ||
        b->hdr->nranks != (uint64_t)nranks || b->hdr->blob_max != SYMMPIN_BOARD_BLOB_MAX) {
      SYMMPIN_WARN("board %s: header does not match (key, %d ranks)", b->name, nranks);
      st = SYMMPIN_ERR_DISAGREE;
      goto fail_map;
    }
  }

  if (atomic_exchange(&b->ranks[rank].attached, 1u) != 0) {
    /* Two opens for one rank mean two communicators derived the same key: sharing a board
     * would mix their agreements. */
    SYMMPIN_WARN("board %s: rank %d attached twice", b->name, rank);
    st = SYMMPIN_ERR_INVALID;
    goto fail_map;
  }
  atomic_fetch_add(&b->hdr->live, 1u);
  if (atomic_fetch_add(&b->hdr->attached, 1u) + 1u == (uint32_t)nranks) board_unlink_once(b);
  *out = b;
  return SYMMPIN_OK;

fail_map:
  munmap(map, b->map_bytes);
fail_fd:
  if (fd >= 0) close(fd);
fail_free:
  free(b);
  return st;
}

void symmpin_board_close(symmpin_board *b) {
  if (!b) return;
  if (atomic_fetch_sub(&b->hdr->live, 1u) == 1u) board_unlink_once(b);
  munmap(b->hdr, b->map_bytes);
  free(b);
}

/* ---- rounds ----------------------------------------------------------------------------- */

symmpin_status symmpin_board_post(symmpin_board *b, uint32_t round, const void *blob, size_t bytes,
                                  uint64_t tid) {
  if (!b || round == 0 || bytes > SYMMPIN_BOARD_BLOB_MAX || (bytes && !blob)) {
    SYMMPIN_WARN("board_post: bad argument (%s, round %u, %zu bytes%s)", b ? b->name : "NULL board",
                 round, bytes, bytes && !blob ? ", NULL blob" : "");
    return SYMMPIN_ERR_INVALID;
  }
  struct board_rank *me = &b->ranks[b->rank];
  uint32_t last = atomic_load_explicit(&me->last_round, memory_order_relaxed);
  if (round <= last) {
    SYMMPIN_WARN("board %s: rank %d posts round %u after round %u", b->name, b->rank, round, last);
    return SYMMPIN_ERR_INVALID;
  }
  unsigned parity = round & 1u;
  unsigned char *area = b->blobs + ((size_t)b->rank * 2 + parity) * SYMMPIN_BOARD_BLOB_MAX;
  /* Mark the area as being rewritten first, so that a reader that (against the contract) still
   * looks at round-2 gets NULL instead of a torn blob under the wrong round. */
  atomic_store_explicit(&me->area_round[parity], 0u, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  if (bytes) memcpy(area, blob, bytes);
  me->area_bytes[parity] = bytes;
  atomic_store_explicit(&me->area_round[parity], round, memory_order_release);
  atomic_store_explicit(&me->last_tid, tid, memory_order_relaxed);
  atomic_store_explicit(&me->last_round, round, memory_order_release);
  return SYMMPIN_OK;
}

bool symmpin_board_round_complete(symmpin_board *b, uint32_t round) {
  if (!b) return false;
  for (int r = 0; r < b->nranks; r++)
    if (atomic_load_explicit(&b->ranks[r].last_round, memory_order_acquire) < round) return false;
  return true;
}

/* TIMEOUT and DISAGREE are answers, not failures of the board: callers poll in short slices and
 * decide themselves when giving up is worth a message, so neither is logged here. */
symmpin_status symmpin_board_wait(symmpin_board *b, uint32_t round, unsigned timeout_ms,
                                  uint64_t my_tid, int *missing) {
  if (!b || round == 0) {
    SYMMPIN_WARN("board_wait: bad argument (%s, round %u)", b ? b->name : "NULL board", round);
    return SYMMPIN_ERR_INVALID;
  }
  uint64_t deadline = board_now_ms() + timeout_ms;
  unsigned iter = 0;
  for (;;) {
    int first_missing = -1;
    for (int r = 0; r < b->nranks; r++) {
      struct board_rank *rk = &b->ranks[r];
      if (atomic_load_explicit(&rk->last_round, memory_order_acquire) >= round) continue;
      if (first_missing < 0) first_missing = r;
      /* A missing rank last driven by this very thread cannot post while we wait here. */
      if (my_tid != 0 && atomic_load_explicit(&rk->last_tid, memory_order_relaxed) == my_tid) {
        if (missing) *missing = r;
        return SYMMPIN_ERR_DISAGREE;
      }
    }
    if (first_missing < 0) return SYMMPIN_OK;
    if (board_now_ms() >= deadline) {
      if (missing) *missing = first_missing;
      return SYMMPIN_ERR_TIMEOUT;
    }
    board_backoff(&iter);
  }
}

const void *symmpin_board_blob(symmpin_board *b, uint32_t round, int r, size_t *bytes) {
  if (!b || round == 0 || r < 0 || r >= b->nranks) return NULL;
  struct board_rank *rk = &b->ranks[r];
  unsigned parity = round & 1u;
  if (atomic_load_explicit(&rk->area_round[parity], memory_order_acquire) != round) return NULL;
  if (bytes) *bytes = rk->area_bytes[parity];
  return b->blobs + ((size_t)r * 2 + parity) * SYMMPIN_BOARD_BLOB_MAX;
}

/* ---- verdicts --------------------------------------------------------------------------- */

static symmpin_verdict board_verdict_of(uint64_t w, uint32_t round, bool *evicted) {
  uint32_t wr = (uint32_t)(w >> 32);
  *evicted = wr > round;
  if (wr != round) return SYMMPIN_VERDICT_NONE;
  return (symmpin_verdict)(w & 0xffu);
}

symmpin_verdict symmpin_board_decide(symmpin_board *b, uint32_t round, symmpin_verdict proposal) {
  if (!b || round == 0 || (proposal != SYMMPIN_VERDICT_GO && proposal != SYMMPIN_VERDICT_FAIL)) {
    SYMMPIN_WARN("board_decide: bad argument (%s, round %u, proposal %d)",
                 b ? b->name : "NULL board", round, (int)proposal);
    return SYMMPIN_VERDICT_FAIL;
  }
  _Atomic uint64_t *slot = &b->hdr->verdicts[round % BOARD_VERDICT_SLOTS];
  uint64_t w = atomic_load_explicit(slot, memory_order_acquire);
  for (;;) {
    bool evicted;
    symmpin_verdict v = board_verdict_of(w, round, &evicted);
    if (v != SYMMPIN_VERDICT_NONE) return v;
    if (evicted) {
      SYMMPIN_WARN("board %s: round %u decided after its verdict slot was reused", b->name, round);
      return SYMMPIN_VERDICT_FAIL;
    }
    uint64_t mine = ((uint64_t)round << 32) | (uint64_t)proposal;
    if (atomic_compare_exchange_weak_explicit(slot, &w, mine, memory_order_acq_rel,
                                              memory_order_acquire))
      return proposal;
  }
}

symmpin_verdict symmpin_board_verdict(symmpin_board *b, uint32_t round) {
  if (!b || round == 0) return SYMMPIN_VERDICT_NONE;
  bool evicted;
  uint64_t w =
      atomic_load_explicit(&b->hdr->verdicts[round % BOARD_VERDICT_SLOTS], memory_order_acquire);
  symmpin_verdict v = board_verdict_of(w, round, &evicted);
  /* A slot reused by a later round: ranks cannot be that far apart in a working agreement, so
   * the safe answer is FAIL. */
  return evicted ? SYMMPIN_VERDICT_FAIL : v;
}
