/* The board: a small POSIX shared-memory area per communicator where the ranks of that
 * communicator on this host post what they need to agree on (eligibility facts, warm-up records,
 * plan digests, the pools' chunk records) and read each other's posts.
 *
 * Why shared memory and not NCCL: symmpin must never add collectives to the program's communicator
 * (it would change the order of its collectives), and why posts and not blocking exchanges: one
 * thread may drive several ranks of the same communicator (ncclGroupStart/End), so a rank must be
 * able to post and move on, and read later.
 *
 * Plain C (no CUDA). Every rank of one communicator opens the same board by a 128-bit key derived
 * from what all ranks share (the ncclUniqueId, a split's parent and color). A board spans one host:
 * ranks on other hosts never show up, which is how multi-host communicators are detected.
 *
 * Rounds: an agreement is a sequence of numbered rounds. In round k every rank posts one blob
 * (up to SYMMPIN_BOARD_BLOB_MAX bytes); a rank reads all blobs of round k once all have posted.
 * A verdict per round is decided once, by compare-and-swap, so that a rank that gives up (timeout)
 * and a rank that saw everything can never conclude differently.
 *
 * Trust: /dev/shm is shared by all users of the host. A board is a regular file of this process's
 * euid with mode 0600 or it is not used, and nothing read from it is used unchecked (see open and
 * blob). Keys must not be guessable by other users (a name they create first is refused, which
 * keeps that communicator on NCCL). */
#ifndef SYMMPIN_SYMMEM_BOARD_H
#define SYMMPIN_SYMMEM_BOARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/commkey.h"
#include "common/types.h"

#define SYMMPIN_BOARD_BLOB_MAX (1u << 20) /* bytes one rank can post in one round */

typedef struct symmpin_board symmpin_board;

typedef enum symmpin_verdict {
  SYMMPIN_VERDICT_NONE = 0, /* not decided yet */
  SYMMPIN_VERDICT_GO = 1,   /* every rank posted and the posts were consistent */
  SYMMPIN_VERDICT_FAIL = 2, /* someone gave up or found an inconsistency */
} symmpin_verdict;

/* Open (creating if first) the board for `key`, as rank `rank` of `nranks`. Never waits for
 * other ranks; only, briefly and bounded, for the rank that creates the object to initialize it.
 * Each rank opens a given board at most once (a second open of the same rank is an error: two
 * communicators with one key). Returns SYMMPIN_ERR_UNSUPPORTED for more ranks than a host holds.
 * The shared-memory name is unlinked as soon as all nranks have attached, so nothing is left in
 * /dev/shm after a job, even one that crashes later; a board that never gets complete (ranks on
 * other hosts) is unlinked when its last local rank closes it.
 *
 * The creator makes the object with O_CREAT|O_EXCL, mode exactly 0600, and reserves its header
 * and rank records with posix_fallocate. Every failure is logged once (WARN, naming the path) and
 * means "keep this communicator on NCCL":
 *   SYMMPIN_ERR_INVALID   the name exists but is not this euid's regular file with mode 0600 (a
 *                         symbolic link, another user's file, group/other bits), or its header
 *                         is not a symmpin board of this key;
 *   SYMMPIN_ERR_DISAGREE  the header is a board of another rank count, blob size, layout or
 *                         layout version (ranks disagree on the communicator or run different
 *                         builds);
 *   SYMMPIN_ERR_IO        shm_open, mmap, or reserving memory failed (/dev/shm full);
 *   SYMMPIN_ERR_UNSUPPORTED  posix_fallocate is not supported there (INFO, not WARN).
 * The first open of a process also removes boards of this euid left in /dev/shm by jobs that
 * died (every process recorded in them, creator and attached ranks, is gone: pid, start time and
 * pid namespace compared through /proc); bounded, never following links. */
symmpin_status symmpin_board_open(symmpin_comm_key key, int rank, int nranks, symmpin_board **out);
void symmpin_board_close(symmpin_board *b);

/* Post this rank's blob for `round` (rounds count from 1 and must increase per rank; posting
 * round k makes the blob of round k-1 reusable). `tid` is the posting thread (any nonzero id that
 * is unique per thread on the host; 0 = unknown), so that a reader can tell that waiting for a
 * peer driven by its own thread would deadlock. The rank's blob areas are reserved as posts grow
 * (posix_fallocate, 64 KiB steps): SYMMPIN_ERR_IO with a WARN when /dev/shm is full, nothing
 * posted. */
symmpin_status symmpin_board_post(symmpin_board *b, uint32_t round, const void *blob, size_t bytes,
                                  uint64_t tid);

/* Whether every rank has posted `round`. Never blocks. */
bool symmpin_board_round_complete(symmpin_board *b, uint32_t round);

/* Wait until every rank has posted `round`, at most timeout_ms. Returns SYMMPIN_ERR_TIMEOUT (and
 * the first missing rank in *missing) if not; SYMMPIN_ERR_DISAGREE at once, without waiting, if a
 * missing rank's last post came from thread `my_tid` (it is driven by this thread: waiting would
 * deadlock). Neither outcome is logged: the caller (which may poll in short slices) decides when
 * it is worth a message. */
symmpin_status symmpin_board_wait(symmpin_board *b, uint32_t round, unsigned timeout_ms,
                                  uint64_t my_tid, int *missing);

/* Rank r's blob of `round` (valid until r posts round+1). NULL if r has not posted it, or if its
 * recorded size is more than SYMMPIN_BOARD_BLOB_MAX (a corrupt board; WARN once per board). The
 * contents are the peer's: the caller checks what it reads. */
const void *symmpin_board_blob(symmpin_board *b, uint32_t round, int r, size_t *bytes);

/* Decide `round` once for all ranks: returns the verdict that stands (the proposed one if this
 * call decided, the earlier one otherwise). `proposal` is GO or FAIL. Verdicts are kept for the
 * last 1024 rounds; an older round reads as FAIL, and so does a verdict word of this round that
 * holds neither GO nor FAIL. */
symmpin_verdict symmpin_board_decide(symmpin_board *b, uint32_t round, symmpin_verdict proposal);
symmpin_verdict symmpin_board_verdict(symmpin_board *b, uint32_t round);

/* Whether rank r has opened the board (ranks open it at their first all-reduce). */
bool symmpin_board_rank_attached(symmpin_board *b, int r);

/* Route logs: every rank writes, without waiting, how it routed each all-reduce (call index,
 * a signature of the route, the call site) into its own ring of the last
 * SYMMPIN_BOARD_ROUTE_SLOTS calls; peers read them whenever they like and compare, so that ranks
 * that routed one call differently are found without adding a wait to any call. Only ranks below
 * SYMMPIN_BOARD_ROUTE_RANKS have a log (larger communicators are never redirected: agree/agree.c
 * holds it against the kernels' SYMMPIN_KERNEL_MAX_RANKS at compile time). A reader gets
 * false for a call not (or no longer) in r's ring; what it reads is the peer's claim, only ever
 * compared and printed. */
#define SYMMPIN_BOARD_ROUTE_SLOTS 1024u
#define SYMMPIN_BOARD_ROUTE_RANKS 8
void symmpin_board_route_put(symmpin_board *b, uint64_t call, uint64_t sig, uint64_t site);
uint64_t symmpin_board_route_last(symmpin_board *b, int r); /* 0 = nothing logged */
bool symmpin_board_route_get(symmpin_board *b, int r, uint64_t call, uint64_t *sig,
                             uint64_t *site);
/* Route blocks: a hash over the routes of calls [k B + 1, (k + 1) B] (B =
 * SYMMPIN_BOARD_ROUTE_BLOCK_CALLS), put by a rank that logged every call of block k, in a ring of
 * SYMMPIN_BOARD_ROUTE_BLOCKS: when a call's entry has left a ring (ranks more than
 * SYMMPIN_BOARD_ROUTE_SLOTS calls apart), its block still tells whether the ranks routed alike,
 * up to BLOCKS x BLOCK_CALLS (65,536) calls back. Get: false if not (or no longer) there. */
#define SYMMPIN_BOARD_ROUTE_BLOCK_CALLS 64u
#define SYMMPIN_BOARD_ROUTE_BLOCKS 1024u
void symmpin_board_route_block_put(symmpin_board *b, uint64_t block, uint64_t hash);
bool symmpin_board_route_block_get(symmpin_board *b, int r, uint64_t block, uint64_t *hash);

/* The communicator's alarm word: the first nonzero value raised stands (compare-and-swap), and
 * every rank reads it with one load. Raise returns the alarm that stands. */
uint64_t symmpin_board_alarm_raise(symmpin_board *b, uint64_t alarm);
uint64_t symmpin_board_alarm(symmpin_board *b);

#endif
