/* The board (board.h): one POSIX shared-memory object per communicator key, holding a header,
 * one small control record per rank and two blob areas per rank (used by round parity).
 *
 * Everything shared is reached through C11 atomics on lock-free 32/64-bit words, which work
 * across processes on the same mapping; nothing here takes a lock, so a rank that dies never
 * leaves the others stuck (they time out).
 *
 * Trust: /dev/shm is shared by every user of the host. A board is only used if this process's
 * euid owns it with mode 0600 (nobody else can have written it), every word read from it is
 * checked before it steers anything (sizes, counts, verdicts), and the fields that describe the
 * layout are compared once at open with what this rank computes itself and never read again.
 * Pages are reserved with posix_fallocate before they are first touched, so that a full /dev/shm
 * is an error returned here, never a SIGBUS later. */
#include "symmem/board.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "board words must be lock-free to work across processes");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "board words must be lock-free to work across processes");

/* "SYMMPB" + layout version: a board of another layout is refused at once, not misread. */
#define BOARD_MAGIC_BASE 0x42504d4d59530000ull
#define BOARD_LAYOUT_VERSION 4u
#define BOARD_MAGIC (BOARD_MAGIC_BASE | BOARD_LAYOUT_VERSION)
/* Verdicts live in a ring tagged by round: ranks never drift more than a round or two apart
 * (every round waits for all posts), so a ring this size never evicts a round still in use. */
#define BOARD_VERDICT_SLOTS 1024u
/* A board is sized for nranks (sparse, but mapped in full): past this, the communicator cannot
 * be a one-host one, and the mapping would only waste address space. */
#define BOARD_MAX_RANKS 4096
/* How long an opener waits for the creator to size and initialize the object (microseconds of
 * work for the creator; the bound only matters if the creator died in between). */
#define BOARD_OPEN_WAIT_MS 5000u
/* Where glibc's shm_open puts its objects; the stale-board sweep lists it. */
#define BOARD_SHM_DIR "/dev/shm"
#define BOARD_NAME_PREFIX "symmpin-"
/* A rank's blob area is reserved as posts grow, in steps this big: a board of a multi-host
 * communicator (thousands of ranks, a few of them here) costs what its local ranks post, not
 * 2 MiB per rank of the whole communicator. */
#define BOARD_RESERVE_STEP (64u << 10)
/* posix_fallocate of at most a few hundred KiB: EINTR means a signal came in, so try again, but
 * never forever under a stream of signals. */
#define BOARD_EINTR_TRIES 100
/* The stale-board sweep (once per process): at most this many directory entries are read, and at
 * most this many names of this user's that look like boards are examined, so that a crowded
 * /dev/shm costs little. Other users' names do not count towards the second bound (another local
 * user must not be able to keep this user's dead boards from being removed), only towards the
 * first, which is high: a directory entry costs a readdir step and, for a board-like name, one
 * fstatat. */
#define BOARD_SWEEP_ENTRIES 65536
#define BOARD_SWEEP_BOARDS 128

/* A process as /proc shows it: pid, start time (clock ticks after boot, field 22 of
 * /proc/<pid>/stat) and pid namespace (inode of /proc/self/ns/pid), so that neither a reused pid
 * nor a pid of another namespace (containers sharing /dev/shm) is taken for the one recorded.
 * Any field 0 = unknown: such a process is never judged dead. */
struct board_proc {
  uint64_t pidns;
  uint64_t start;
  uint32_t pid;
  uint32_t pad;
};

/* What the creator writes once, before the magic, and nobody changes later. The layout is
 * spelled out so that an opener compares it with its own instead of assuming it. */
struct board_ident {
  uint64_t key_hi, key_lo;
  uint64_t nranks;
  uint64_t blob_max;
  uint64_t total_bytes;
  uint64_t ranks_offset; /* where the rank records start */
  uint64_t rank_bytes;   /* one rank record */
  uint64_t blobs_offset; /* where the blob areas start */
  struct board_proc creator;
};

struct board_hdr {
  _Atomic uint64_t magic; /* written last by the creator: the header is valid once it is set */
  struct board_ident id;
  _Atomic uint32_t attached; /* distinct ranks that ever opened the board */
  _Atomic uint32_t live;     /* opens not yet closed */
  _Atomic uint32_t unlinked; /* 1 once the name was removed (exactly one rank does it) */
  uint32_t pad;
  /* (round << 32) | verdict, at round % BOARD_VERDICT_SLOTS */
  _Atomic uint64_t verdicts[BOARD_VERDICT_SLOTS];
  /* The communicator's alarm (symmpin_board_alarm_raise): 0, or the first alarm raised. */
  _Atomic uint64_t alarm;
};

/* One rank's control record; 64-byte aligned so ranks polling each other do not share lines
 * with the writer's other fields more than necessary. */
struct board_rank {
  _Atomic uint32_t attached;      /* 1 once this rank opened the board */
  _Atomic uint32_t last_round;    /* the highest round this rank posted (0 = none) */
  _Atomic uint64_t last_tid;      /* the thread that posted last_round */
  _Atomic uint32_t area_round[2]; /* the round whose blob area[parity] holds (0 = being written) */
  _Atomic uint64_t area_bytes[2]; /* checked against SYMMPIN_BOARD_BLOB_MAX by every reader */
  struct board_proc proc;         /* the process that attached this rank (for the sweep) */
};
_Static_assert(sizeof(struct board_rank) == 64, "one cache line per rank");

/* One route-log entry. `call` commits it: the writer clears it, fills the entry, then stores
 * the call index with release; a reader accepts the entry only if it reads that same index
 * before and after the other fields (a seqlock per entry). */
struct board_route {
  _Atomic uint64_t call;
  _Atomic uint64_t sig;
  _Atomic uint64_t site;
  uint64_t pad;
};

/* One rank's route log: a ring of its last SYMMPIN_BOARD_ROUTE_SLOTS calls. Only the first
 * SYMMPIN_BOARD_ROUTE_RANKS ranks have one (the kernels' rank limit: no larger communicator
 * is ever redirected, so none needs it). */
/* One block of the route log: a hash over SYMMPIN_BOARD_ROUTE_BLOCK_CALLS consecutive calls'
 * routes; `tag` (block index + 1) commits it as `call` does an entry. */
struct board_route_block {
  _Atomic uint64_t tag;
  _Atomic uint64_t hash;
};

struct board_routes {
  _Atomic uint64_t last; /* the highest call logged (0 = none) */
  uint64_t pad[7];
  struct board_route e[SYMMPIN_BOARD_ROUTE_SLOTS];
  struct board_route_block blk[SYMMPIN_BOARD_ROUTE_BLOCKS];
};

struct symmpin_board {
  struct board_hdr *hdr;
  struct board_rank *ranks;
  struct board_routes *routes; /* board_route_ranks(nranks) of them */
  unsigned char *blobs;
  size_t map_bytes;
  int fd;               /* kept to reserve this rank's blob areas as posts grow */
  size_t reserved[2];   /* bytes of this rank's area[parity] reserved so far */
  atomic_int warned;    /* a lying blob size was reported (once per board) */
  int rank, nranks;
  char name[48];
};

static size_t board_align(size_t v, size_t a) { return (v + a - 1) / a * a; }

static size_t board_ranks_offset(void) { return board_align(sizeof(struct board_hdr), 64); }

static int board_route_ranks(int nranks) {
  return nranks < SYMMPIN_BOARD_ROUTE_RANKS ? nranks : SYMMPIN_BOARD_ROUTE_RANKS;
}

static size_t board_routes_offset(int nranks) {
  return board_align(board_ranks_offset() + (size_t)nranks * sizeof(struct board_rank), 64);
}

static size_t board_blobs_offset(int nranks) {
  return board_align(board_routes_offset(nranks) +
                         (size_t)board_route_ranks(nranks) * sizeof(struct board_routes),
                     4096);
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

/* ---- identities ------------------------------------------------------------------------- */

static void board_name(symmpin_comm_key key, char *name, size_t len) {
  snprintf(name, len, "/" BOARD_NAME_PREFIX "%016" PRIx64 "%016" PRIx64, key.hi, key.lo);
}

/* A process's start time from /proc/<pid>/stat (pid 0: /proc/self/stat), and whether it has
 * exited (a zombie nobody reaped: state Z or X with no thread left but the dead leader; a leader
 * that exited while its other threads run is also Z, but with more threads). Returns 0, ENOENT or
 * ESRCH when there is no such process, or another errno when /proc cannot tell (then nothing is
 * concluded). The pid on the line must be the one asked for (getpid() for self), so that a /proc
 * of another pid namespace is never read as this one's. */
static int board_proc_start(pid_t pid, uint64_t *start, bool *exited) {
  char path[48];
  pid_t want = pid ? pid : getpid();
  if (pid)
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  else
    snprintf(path, sizeof path, "/proc/self/stat");
  int fd = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[1024]; /* fields 1..22 take a few hundred bytes at most */
  ssize_t n;
  do n = read(fd, buf, sizeof buf - 1);
  while (n < 0 && errno == EINTR);
  int err = n < 0 ? errno : 0; /* ESRCH: the process went away between open and read */
  close(fd);
  if (n < 0) return err;
  buf[n] = '\0';
  char *end;
  long long p = strtoll(buf, &end, 10);
  if (end == buf || p != (long long)want) return EINVAL;
  /* The command name (field 2) may hold spaces and parentheses: fields go on after the last ')'. */
  char *s = strrchr(buf, ')');
  if (!s || s[1] != ' ') return EINVAL;
  s += 2; /* field 3, the state */
  char state = *s;
  long long threads = -1;
  for (int f = 3; f < 22; f++) {
    s = strchr(s, ' ');
    if (!s) return EINVAL;
    s++;
    if (f + 1 == 20) threads = strtoll(s, NULL, 10);
  }
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return EINVAL;
  *start = (uint64_t)v;
  *exited = (state == 'Z' || state == 'X') && threads <= 1;
  return 0;
}

static uint64_t board_pidns_self(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* This process as recorded in a board; all zero (never judged dead) when /proc cannot say. */
static void board_proc_self(struct board_proc *p) {
  memset(p, 0, sizeof *p);
  uint64_t start = 0;
  bool exited;
  if (board_proc_start(0, &start, &exited) != 0) return;
  p->pid = (uint32_t)getpid();
  p->start = start;
  p->pidns = board_pidns_self();
}

typedef enum board_life { BOARD_PROC_GONE, BOARD_PROC_ALIVE, BOARD_PROC_UNKNOWN } board_life;

/* Whether a recorded process still runs. GONE only on proof: no process has that pid here, the
 * one that has it started at another time (the pid was reused), or it exited and waits to be
 * reaped (a container whose init never reaps keeps such zombies for good). Anything /proc cannot
 * tell counts as alive. */
static board_life board_proc_life(const struct board_proc *p, uint64_t my_pidns) {
  if (!p->pid || p->pid > INT32_MAX || !p->start || !p->pidns || p->pidns != my_pidns)
    return BOARD_PROC_UNKNOWN;
  uint64_t start = 0;
  bool exited = false;
  int err = board_proc_start((pid_t)p->pid, &start, &exited);
  if (err == ENOENT || err == ESRCH) return BOARD_PROC_GONE;
  if (err != 0) return BOARD_PROC_UNKNOWN;
  return start == p->start && !exited ? BOARD_PROC_ALIVE : BOARD_PROC_GONE;
}

static void board_ident_init(struct board_ident *id, symmpin_comm_key key, int nranks) {
  memset(id, 0, sizeof *id);
  id->key_hi = key.hi;
  id->key_lo = key.lo;
  id->nranks = (uint64_t)nranks;
  id->blob_max = SYMMPIN_BOARD_BLOB_MAX;
  id->total_bytes = board_total_bytes(nranks);
  id->ranks_offset = board_ranks_offset();
  id->rank_bytes = sizeof(struct board_rank);
  id->blobs_offset = board_blobs_offset(nranks);
}

/* NULL when `seen` describes the board `want` does (creators aside), else what differs. */
static const char *board_ident_mismatch(const struct board_ident *seen,
                                        const struct board_ident *want) {
  if (seen->key_hi != want->key_hi || seen->key_lo != want->key_lo) return "key";
  if (seen->nranks != want->nranks) return "rank count";
  if (seen->blob_max != want->blob_max) return "blob size";
  if (seen->total_bytes != want->total_bytes || seen->ranks_offset != want->ranks_offset ||
      seen->rank_bytes != want->rank_bytes || seen->blobs_offset != want->blobs_offset)
    return "layout";
  return NULL;
}

/* ---- files ------------------------------------------------------------------------------ */

/* A board is usable only if nobody but this euid can have written it. */
static bool board_stat_trusted(const struct stat *st, uid_t euid) {
  return S_ISREG(st->st_mode) && st->st_uid == euid && (st->st_mode & 07777) == 0600;
}

static const char *board_file_kind(mode_t m) {
  if (S_ISREG(m)) return "regular file";
  if (S_ISLNK(m)) return "symbolic link";
  if (S_ISDIR(m)) return "directory";
  if (S_ISFIFO(m)) return "fifo";
  return "special file";
}

/* The one WARN of a refused name, with what was found there. */
static void board_refuse(const char *name, const struct stat *st, const char *why) {
  SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: refused (%s): a %s of uid %u with mode %04o, not a "
               "regular file of uid %u with mode 0600; not used",
               name, why, board_file_kind(st->st_mode), (unsigned)st->st_uid,
               (unsigned)(st->st_mode & 07777), (unsigned)geteuid());
}

/* An existing name this rank opened: used only if it is this user's private regular file. */
static symmpin_status board_check_file(int fd, const char *name) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: fstat failed: %s", name, strerror(errno));
    return SYMMPIN_ERR_IO;
  }
  if (!board_stat_trusted(&st, geteuid())) {
    board_refuse(name, &st, "someone else may write it");
    return SYMMPIN_ERR_INVALID;
  }
  return SYMMPIN_OK;
}

static int board_pread_full(int fd, void *buf, size_t len, off_t off) {
  unsigned char *p = buf;
  while (len) {
    ssize_t n = pread(fd, p, len, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    off += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Reserves [off, off+len) of the board's file, so that no page there can fault for want of
 * memory when first touched: a full /dev/shm is this error, never a SIGBUS later. A filesystem
 * without fallocate (glibc emulates it; a libc that does not, on a /dev/shm that is not tmpfs)
 * means no board: touching pages that were never reserved is exactly the SIGBUS to avoid. */
static symmpin_status board_reserve(int fd, const char *name, size_t off, size_t len) {
  int rc, tries = 0;
  do rc = posix_fallocate(fd, (off_t)off, (off_t)len);
  while (rc == EINTR && ++tries < BOARD_EINTR_TRIES);
  if (rc == 0) return SYMMPIN_OK;
  if (rc == EOPNOTSUPP || rc == EINVAL || rc == ENOSYS) {
    SYMMPIN_INFO("board " BOARD_SHM_DIR "%s: cannot reserve shared memory (posix_fallocate: %s); "
                 "not used",
                 name, strerror(rc));
    return SYMMPIN_ERR_UNSUPPORTED;
  }
  SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: cannot reserve %zu bytes at offset %zu "
               "(posix_fallocate: %s; is " BOARD_SHM_DIR " full?)",
               name, len, off, strerror(rc));
  return SYMMPIN_ERR_IO;
}

/* ---- stale boards ----------------------------------------------------------------------- */

/* Whether a name in /dev/shm could be a board: the prefix and 32 hex digits (board_name). */
static bool board_name_like(const char *ent) {
  const size_t plen = strlen(BOARD_NAME_PREFIX);
  if (strncmp(ent, BOARD_NAME_PREFIX, plen) != 0 || strlen(ent) != plen + 32) return false;
  for (const char *c = ent + plen; *c; c++)
    if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'))) return false;
  return true;
}

/* A name whose creator never wrote the magic (open at fd, fstat `st`): stale when its creator is
 * gone. The creator holds an exclusive flock on the file from right after its exclusive create
 * until the magic is written (symmpin_board_open), and the lock goes with the creator's process;
 * so a file nobody holds the lock of, that still has no magic, was abandoned -- unless its
 * creator is in the few instructions between its create and its flock, which the age rule covers:
 * such a file is not touched until it is BOARD_OPEN_WAIT_MS old (an opener waiting for its magic
 * gives up then as well). A child that inherited the creator's descriptor across a fork holds the
 * lock too: such a name stays until that child is gone. */
static bool board_creation_abandoned(int fd, const struct stat *st) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t age_ms = ((int64_t)now.tv_sec - (int64_t)st->st_mtim.tv_sec) * 1000 +
                   ((int64_t)now.tv_nsec - (int64_t)st->st_mtim.tv_nsec) / 1000000;
  if (age_ms < (int64_t)BOARD_OPEN_WAIT_MS) return false;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) return false; /* its creator is still at work */
  uint64_t magic = 0;
  /* Still no magic now that nobody can be writing it (a short file: none at all). */
  bool abandoned =
      board_pread_full(fd, &magic, sizeof magic, offsetof(struct board_hdr, magic)) != 0 || !magic;
  flock(fd, LOCK_UN);
  return abandoned;
}

/* Whether the file open at fd (found as `ent` in /dev/shm, lstat `lst`) is a board of this user
 * whose every recorded process (its creator and each attached rank's) is gone. Anything that is
 * not plainly such a board, or that /proc cannot judge, is left alone. */
static bool board_file_stale(int fd, const char *ent, const struct stat *lst, uid_t euid,
                             uint64_t my_pidns, uint32_t *creator_pid) {
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_dev != lst->st_dev || st.st_ino != lst->st_ino ||
      !board_stat_trusted(&st, euid))
    return false;
  uint64_t magic = 0;
  if (board_pread_full(fd, &magic, sizeof magic, offsetof(struct board_hdr, magic)) != 0 ||
      magic == 0) {
    *creator_pid = 0;
    return board_creation_abandoned(fd, &st);
  }
  struct board_ident id;
  if (board_pread_full(fd, &id, sizeof id, offsetof(struct board_hdr, id)) != 0) return false;
  if (magic != BOARD_MAGIC || id.nranks < 1 || id.nranks > BOARD_MAX_RANKS) return false;
  symmpin_comm_key key = {id.key_hi, id.key_lo};
  struct board_ident want;
  board_ident_init(&want, key, (int)id.nranks);
  char name[48];
  board_name(key, name, sizeof name);
  if (board_ident_mismatch(&id, &want) || (uint64_t)st.st_size != id.total_bytes ||
      strcmp(name + 1, ent) != 0)
    return false;
  if (board_proc_life(&id.creator, my_pidns) != BOARD_PROC_GONE) return false;
  /* A rank in another process may run on after the creator exited (a multi-host communicator
   * whose local ranks close at different times): only a board nobody can use any more goes. */
  struct board_rank recs[64];
  struct board_proc judged = id.creator; /* ranks of one process share it: judge it once */
  for (uint64_t r0 = 0; r0 < id.nranks; r0 += 64) {
    size_t k = id.nranks - r0 < 64 ? (size_t)(id.nranks - r0) : 64;
    if (board_pread_full(fd, recs, k * sizeof recs[0],
                         (off_t)(id.ranks_offset + r0 * sizeof recs[0])) != 0)
      return false;
    for (size_t i = 0; i < k; i++) {
      if (!atomic_load_explicit(&recs[i].attached, memory_order_relaxed)) continue;
      const struct board_proc *p = &recs[i].proc;
      if (p->pid == judged.pid && p->start == judged.start && p->pidns == judged.pidns) continue;
      if (board_proc_life(p, my_pidns) != BOARD_PROC_GONE) return false;
      judged = *p;
    }
  }
  *creator_pid = id.creator.pid;
  return true;
}

static atomic_int board_swept;

/* Removes boards that jobs of this user left behind when they died before every rank attached
 * (once all attached, the name is gone already), and names whose creator died before it wrote
 * the magic. Once per process, when it first opens a board; bounded in entries read and in this
 * user's names examined. Never follows links, and only removes what board_file_stale proved
 * stale, after checking that the name still is the file it examined. A rank that attaches between
 * the check and the unlink joins a board whose creator is dead: its job is lost anyway, and its
 * agreement times out as it would have. */
static void board_sweep(void) {
  if (atomic_exchange(&board_swept, 1)) return;
  uint64_t my_pidns = board_pidns_self();
  if (!my_pidns) return; /* no /proc: nobody can be proved gone */
  int dfd = open(BOARD_SHM_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return;
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return;
  }
  uid_t euid = geteuid();
  int entries = 0, mine = 0;
  struct dirent *e;
  while (entries++ < BOARD_SWEEP_ENTRIES && mine < BOARD_SWEEP_BOARDS && (e = readdir(d))) {
    if (!board_name_like(e->d_name)) continue;
    struct stat lst;
    /* Another user's name is not this user's to judge, and counts for nothing. */
    if (fstatat(dfd, e->d_name, &lst, AT_SYMLINK_NOFOLLOW) != 0 || lst.st_uid != euid) continue;
    mine++;
    if (!board_stat_trusted(&lst, euid)) continue;
    int fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) continue;
    uint32_t creator = 0;
    bool stale = board_file_stale(fd, e->d_name, &lst, euid, my_pidns, &creator);
    close(fd);
    struct stat now;
    if (!stale || fstatat(dfd, e->d_name, &now, AT_SYMLINK_NOFOLLOW) != 0 ||
        now.st_dev != lst.st_dev || now.st_ino != lst.st_ino)
      continue;
    if (unlinkat(dfd, e->d_name, 0) == 0) {
      if (creator)
        SYMMPIN_INFO("board " BOARD_SHM_DIR "/%s: removed, left behind by pid %u, which is gone",
                     e->d_name, (unsigned)creator);
      else
        SYMMPIN_INFO("board " BOARD_SHM_DIR "/%s: removed, its creator died before it was "
                     "initialized",
                     e->d_name);
    }
  }
  closedir(d);
}

/* ---- open / close ----------------------------------------------------------------------- */

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

/* Creates the object (mode exactly 0600) or opens the existing one; *creator says which. An
 * existing name that cannot be opened as a plain file of this user (a symbolic link, another
 * user's file) is refused with what was found there. Retries when the name vanishes between a
 * failed exclusive create and the open (the board was just completed and unlinked). */
static symmpin_status board_shm_open(const char *name, int *fd_out, bool *creator) {
  uint64_t deadline = board_now_ms() + BOARD_OPEN_WAIT_MS;
  unsigned iter = 0;
  for (;;) {
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      /* The umask may have taken bits off 0600: openers insist on exactly 0600. */
      if (fchmod(fd, 0600) != 0) {
        SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: fchmod(0600) failed: %s", name, strerror(errno));
        close(fd);
        shm_unlink(name);
        return SYMMPIN_ERR_IO;
      }
      *fd_out = fd;
      *creator = true;
      return SYMMPIN_OK;
    }
    if (errno != EEXIST) {
      SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: cannot create it: %s", name, strerror(errno));
      return SYMMPIN_ERR_IO;
    }
    fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd >= 0) {
      *fd_out = fd;
      *creator = false;
      return SYMMPIN_OK;
    }
    int err = errno;
    if (err == ENOENT) {
      if (board_now_ms() > deadline) {
        SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: kept vanishing for %u ms", name,
                     BOARD_OPEN_WAIT_MS);
        return SYMMPIN_ERR_TIMEOUT;
      }
      board_backoff(&iter);
      continue;
    }
    char path[64];
    snprintf(path, sizeof path, BOARD_SHM_DIR "%s", name);
    struct stat st;
    if (err != EMFILE && err != ENFILE && err != ENOMEM && lstat(path, &st) == 0) {
      board_refuse(name, &st, strerror(err));
      return SYMMPIN_ERR_INVALID;
    }
    SYMMPIN_WARN("board %s: cannot open it: %s", path, strerror(err));
    return SYMMPIN_ERR_IO;
  }
}

/* An opener that is not the creator waits (bounded) until the file holds a header. The creator
 * reserves the header and the rank records before it gives the file any size, so once the size
 * covers the header, touching the header cannot fault. */
static symmpin_status board_wait_header(int fd, const char *name) {
  uint64_t deadline = board_now_ms() + BOARD_OPEN_WAIT_MS;
  unsigned iter = 0;
  for (;;) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
      SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: fstat failed: %s", name, strerror(errno));
      return SYMMPIN_ERR_IO;
    }
    if ((uint64_t)st.st_size >= board_ranks_offset()) return SYMMPIN_OK;
    if (board_now_ms() > deadline) {
      SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: creator did not size it within %u ms", name,
                   BOARD_OPEN_WAIT_MS);
      return SYMMPIN_ERR_TIMEOUT;
    }
    board_backoff(&iter);
  }
}

static symmpin_status board_wait_magic(struct board_hdr *h, const char *name) {
  uint64_t deadline = board_now_ms() + BOARD_OPEN_WAIT_MS;
  unsigned iter = 0;
  for (;;) {
    uint64_t m = atomic_load_explicit(&h->magic, memory_order_acquire);
    if (m == BOARD_MAGIC) return SYMMPIN_OK;
    if (m != 0 && (m & ~(uint64_t)0xffff) == BOARD_MAGIC_BASE) {
      SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: layout version %u, this build reads version %u "
                   "(ranks run different symmpin builds)",
                   name, (unsigned)(m & 0xffff), BOARD_LAYOUT_VERSION);
      return SYMMPIN_ERR_DISAGREE;
    }
    if (m != 0) {
      SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: not a symmpin board (magic %#" PRIx64 ")", name, m);
      return SYMMPIN_ERR_INVALID;
    }
    if (board_now_ms() > deadline) {
      SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: creator did not initialize it within %u ms", name,
                   BOARD_OPEN_WAIT_MS);
      return SYMMPIN_ERR_TIMEOUT;
    }
    board_backoff(&iter);
  }
}

/* Checks an initialized header against what this rank computes itself; the board's layout is
 * this rank's from here on (nothing of the header is read again). */
static symmpin_status board_check_header(symmpin_board *b, int fd, symmpin_comm_key key) {
  struct board_ident seen = b->hdr->id, want;
  board_ident_init(&want, key, b->nranks);
  const char *what = board_ident_mismatch(&seen, &want);
  if (what && seen.nranks != want.nranks) {
    SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: header says %" PRIu64 " ranks, rank %d expects %d "
                 "(ranks disagree on the communicator's size)",
                 b->name, seen.nranks, b->rank, b->nranks);
    return SYMMPIN_ERR_DISAGREE;
  }
  if (what) {
    SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: header does not match this rank's (%s differs)",
                 b->name, what);
    return strcmp(what, "key") == 0 ? SYMMPIN_ERR_INVALID : SYMMPIN_ERR_DISAGREE;
  }
  /* The creator gave the file its full size before it set the magic. */
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != b->map_bytes) {
    SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: file has %lld bytes, its header says %zu", b->name,
                 (long long)st.st_size, b->map_bytes);
    return SYMMPIN_ERR_INVALID;
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
  board_sweep();
  symmpin_board *b = calloc(1, sizeof(*b));
  if (!b) {
    SYMMPIN_WARN("board_open: out of memory (rank %d of %d)", rank, nranks);
    return SYMMPIN_ERR_NOMEM;
  }
  b->fd = -1;
  b->rank = rank;
  b->nranks = nranks;
  b->map_bytes = board_total_bytes(nranks);
  board_name(key, b->name, sizeof(b->name));
  struct board_proc me;
  board_proc_self(&me);

  int fd = -1;
  bool creator = false;
  void *map = MAP_FAILED;
  symmpin_status st = board_shm_open(b->name, &fd, &creator);
  if (st != SYMMPIN_OK) goto fail_free;

  if (creator) {
    /* Held until the magic is written: a sweep tells a creator at work from one that died here
     * (board_creation_abandoned). A sweep holds it only for a moment; never wait for ever. */
    uint64_t lock_deadline = board_now_ms() + BOARD_OPEN_WAIT_MS;
    unsigned lock_iter = 0;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0 && board_now_ms() < lock_deadline)
      board_backoff(&lock_iter);
    /* Header and rank records first, then the size: an opener maps only once the size covers
     * the header. Blob areas stay sparse; each rank reserves its own as it posts. */
    st = board_reserve(fd, b->name, 0, board_blobs_offset(nranks));
    if (st == SYMMPIN_OK && ftruncate(fd, (off_t)b->map_bytes) != 0) {
      SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: ftruncate(%zu) failed: %s", b->name, b->map_bytes,
                   strerror(errno));
      st = SYMMPIN_ERR_IO;
    }
  } else {
    st = board_check_file(fd, b->name);
    if (st == SYMMPIN_OK) st = board_wait_header(fd, b->name);
  }
  if (st != SYMMPIN_OK) goto fail_fd;

  /* An opener maps its own idea of the size; it touches nothing past the header before the
   * header says the file is that big. */
  map = mmap(NULL, b->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    SYMMPIN_WARN("board " BOARD_SHM_DIR "%s: mmap(%zu) failed: %s", b->name, b->map_bytes,
                 strerror(errno));
    st = SYMMPIN_ERR_IO;
    goto fail_fd;
  }
  b->hdr = map;
  b->ranks = (struct board_rank *)((unsigned char *)map + board_ranks_offset());
  b->routes = (struct board_routes *)((unsigned char *)map + board_routes_offset(nranks));
  b->blobs = (unsigned char *)map + board_blobs_offset(nranks);

  if (creator) {
    /* Reserved pages read as zero: only the identity needs writing before the magic. */
    struct board_ident id;
    board_ident_init(&id, key, nranks);
    id.creator = me;
    b->hdr->id = id;
    atomic_store_explicit(&b->hdr->magic, BOARD_MAGIC, memory_order_release);
    flock(fd, LOCK_UN);
  } else {
    st = board_wait_magic(b->hdr, b->name);
    if (st == SYMMPIN_OK) st = board_check_header(b, fd, key);
    if (st != SYMMPIN_OK) goto fail_map;
  }

  if (atomic_exchange(&b->ranks[rank].attached, 1u) != 0) {
    /* Two opens for one rank mean two communicators derived the same key: sharing a board
     * would mix their agreements. */
    SYMMPIN_WARN("board %s: rank %d attached twice", b->name, rank);
    st = SYMMPIN_ERR_INVALID;
    goto fail_map;
  }
  b->ranks[rank].proc = me;
  b->fd = fd;
  atomic_fetch_add(&b->hdr->live, 1u);
  if (atomic_fetch_add(&b->hdr->attached, 1u) + 1u == (uint32_t)nranks) board_unlink_once(b);
  *out = b;
  return SYMMPIN_OK;

fail_map:
  munmap(map, b->map_bytes);
fail_fd:
  if (creator) shm_unlink(b->name); /* nobody can use a board its creator did not finish */
  close(fd);
fail_free:
  free(b);
  return st;
}

void symmpin_board_close(symmpin_board *b) {
  if (!b) return;
  if (atomic_fetch_sub(&b->hdr->live, 1u) == 1u) board_unlink_once(b);
  munmap(b->hdr, b->map_bytes);
  close(b->fd);
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
  size_t area_off = ((size_t)b->rank * 2 + parity) * SYMMPIN_BOARD_BLOB_MAX;
  if (bytes > b->reserved[parity]) {
    /* Only this rank writes its areas, so it alone knows how much of them is reserved. */
    size_t want = board_align(bytes, BOARD_RESERVE_STEP);
    if (want > SYMMPIN_BOARD_BLOB_MAX) want = SYMMPIN_BOARD_BLOB_MAX;
    symmpin_status st =
        board_reserve(b->fd, b->name, board_blobs_offset(b->nranks) + area_off, want);
    if (st != SYMMPIN_OK) return st;
    b->reserved[parity] = want;
  }
  unsigned char *area = b->blobs + area_off;
  /* Mark the area as being rewritten first, so that a reader that (against the contract) still
   * looks at round-2 gets NULL instead of a torn blob under the wrong round. */
  atomic_store_explicit(&me->area_round[parity], 0u, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  if (bytes) memcpy(area, blob, bytes);
  atomic_store_explicit(&me->area_bytes[parity], (uint64_t)bytes, memory_order_relaxed);
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
  /* Read once, checked, and only the checked copy is handed out: a size past the area would let
   * the caller read other ranks' areas or past the mapping. */
  uint64_t n = atomic_load_explicit(&rk->area_bytes[parity], memory_order_relaxed);
  if (n > SYMMPIN_BOARD_BLOB_MAX) {
    if (!atomic_exchange(&b->warned, 1))
      SYMMPIN_WARN("board %s: rank %d's blob of round %u claims %" PRIu64 " bytes (at most %u): "
                   "not read",
                   b->name, r, round, n, SYMMPIN_BOARD_BLOB_MAX);
    return NULL;
  }
  if (bytes) *bytes = (size_t)n;
  return b->blobs + ((size_t)r * 2 + parity) * SYMMPIN_BOARD_BLOB_MAX;
}

/* ---- verdicts --------------------------------------------------------------------------- */

/* A verdict word is (round << 32) | GO or FAIL; a word of this round holding anything else was
 * not written by a rank (a corrupt board) and reads as FAIL, the answer that never runs a plan. */
static symmpin_verdict board_verdict_of(uint64_t w, uint32_t round, bool *evicted) {
  uint32_t wr = (uint32_t)(w >> 32), wv = (uint32_t)w;
  *evicted = wr > round;
  if (wr != round) return SYMMPIN_VERDICT_NONE;
  if (wv != SYMMPIN_VERDICT_GO && wv != SYMMPIN_VERDICT_FAIL) return SYMMPIN_VERDICT_FAIL;
  return (symmpin_verdict)wv;
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

/* ---- attachment, route logs, alarm ------------------------------------------------------ */

bool symmpin_board_rank_attached(symmpin_board *b, int r) {
  if (!b || r < 0 || r >= b->nranks) return false;
  return atomic_load_explicit(&b->ranks[r].attached, memory_order_acquire) != 0;
}

void symmpin_board_route_put(symmpin_board *b, uint64_t call, uint64_t sig, uint64_t site) {
  if (!b || call == 0 || b->rank >= board_route_ranks(b->nranks)) return;
  struct board_routes *mine = &b->routes[b->rank];
  struct board_route *e = &mine->e[call % SYMMPIN_BOARD_ROUTE_SLOTS];
  atomic_store_explicit(&e->call, 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&e->sig, sig, memory_order_relaxed);
  atomic_store_explicit(&e->site, site, memory_order_relaxed);
  atomic_store_explicit(&e->call, call, memory_order_release);
  atomic_store_explicit(&mine->last, call, memory_order_release);
}

void symmpin_board_route_block_put(symmpin_board *b, uint64_t block, uint64_t hash) {
  if (!b || b->rank >= board_route_ranks(b->nranks)) return;
  struct board_route_block *e = &b->routes[b->rank].blk[block % SYMMPIN_BOARD_ROUTE_BLOCKS];
  atomic_store_explicit(&e->tag, 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&e->hash, hash, memory_order_relaxed);
  atomic_store_explicit(&e->tag, block + 1, memory_order_release);
}

bool symmpin_board_route_block_get(symmpin_board *b, int r, uint64_t block, uint64_t *hash) {
  if (!b || r < 0 || r >= board_route_ranks(b->nranks)) return false;
  struct board_route_block *e = &b->routes[r].blk[block % SYMMPIN_BOARD_ROUTE_BLOCKS];
  if (atomic_load_explicit(&e->tag, memory_order_acquire) != block + 1) return false;
  uint64_t h = atomic_load_explicit(&e->hash, memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  if (atomic_load_explicit(&e->tag, memory_order_relaxed) != block + 1) return false;
  *hash = h;
  return true;
}

uint64_t symmpin_board_route_last(symmpin_board *b, int r) {
  if (!b || r < 0 || r >= board_route_ranks(b->nranks)) return 0;
  return atomic_load_explicit(&b->routes[r].last, memory_order_acquire);
}

bool symmpin_board_route_get(symmpin_board *b, int r, uint64_t call, uint64_t *sig,
                             uint64_t *site) {
  if (!b || call == 0 || r < 0 || r >= board_route_ranks(b->nranks)) return false;
  struct board_route *e = &b->routes[r].e[call % SYMMPIN_BOARD_ROUTE_SLOTS];
  if (atomic_load_explicit(&e->call, memory_order_acquire) != call) return false;
  uint64_t s = atomic_load_explicit(&e->sig, memory_order_relaxed);
  uint64_t t = atomic_load_explicit(&e->site, memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  if (atomic_load_explicit(&e->call, memory_order_relaxed) != call) return false; /* rewritten */
  *sig = s;
  if (site) *site = t;
  return true;
}

uint64_t symmpin_board_alarm_raise(symmpin_board *b, uint64_t alarm) {
  if (!b || alarm == 0) return b ? symmpin_board_alarm(b) : 0;
  uint64_t none = 0;
  if (atomic_compare_exchange_strong_explicit(&b->hdr->alarm, &none, alarm, memory_order_acq_rel,
                                              memory_order_acquire))
    return alarm;
  return none;
}

uint64_t symmpin_board_alarm(symmpin_board *b) {
  return b ? atomic_load_explicit(&b->hdr->alarm, memory_order_acquire) : 0;
}
