/* CPU tests of what a board trusts (symmem/board.h "Trust"): names in /dev/shm that someone else
 * made (modes, owners, symbolic links), headers and words that lie, a /dev/shm without room, and
 * the sweep of boards left by dead jobs. On real /dev/shm, no CUDA.
 *
 * board.c is compiled into this file, so that the tests forge boards with the very structs the
 * board reads (a copy of the layout could drift), and so that posix_fallocate can be made to fail
 * through a macro, without a test hook in the library. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* posix_fallocate, failing on demand: the next `fallocate_fails` calls (-1: all) return
 * `fallocate_errno` instead of reserving. */
static int fallocate_errno, fallocate_fails;
static int fallocate_calls;

/* A creator that dies or stops at its first reservation, between its exclusive create and the
 * magic (what a kill at that moment leaves): fallocate_die exits the process there,
 * fallocate_block_fd (a pipe's read end) waits there for a byte. */
static int fallocate_die;
static int fallocate_block_fd = -1;

static int test_posix_fallocate(int fd, off_t off, off_t len) {
  if (fallocate_die) _exit(0);
  if (fallocate_block_fd >= 0) {
    char x;
    while (read(fallocate_block_fd, &x, 1) < 0 && errno == EINTR) {
    }
    fallocate_block_fd = -1;
  }
  fallocate_calls++;
  if (fallocate_fails != 0) {
    if (fallocate_fails > 0) fallocate_fails--;
    return fallocate_errno;
  }
  return posix_fallocate(fd, off, len);
}

static void fallocate_fail(int err, int times) {
  fallocate_errno = err;
  fallocate_fails = times;
}

#define posix_fallocate test_posix_fallocate
#include "symmem/board.c"
#undef posix_fallocate

/* ---- helpers ------------------------------------------------------------------------------ */

/* A fresh key per call: tests run in parallel processes and must never share a board. */
static symmpin_comm_key fresh_key(void) {
  uint64_t r[2];
  cr_assert_eq(getrandom(r, sizeof(r), 0), (ssize_t)sizeof(r));
  return symmpin_comm_key_of_bytes(r, sizeof(r));
}

static void shm_path(symmpin_comm_key k, char *buf, size_t len) {
  char name[48];
  board_name(k, name, sizeof name);
  snprintf(buf, len, BOARD_SHM_DIR "%s", name);
}

static uint64_t now_ms(void) { return board_now_ms(); }

/* The header and rank records of the file at `path`, mapped as any process of this user could. */
static struct board_hdr *map_path(const char *path, int nranks) {
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
  void *p = mmap(NULL, board_blobs_offset(nranks), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  cr_assert_neq(p, MAP_FAILED);
  return p;
}

static struct board_rank *rank_rec(struct board_hdr *h, int r) {
  return (struct board_rank *)((unsigned char *)h + board_ranks_offset()) + r;
}

/* A file at `path` with the header of a fresh board of `key` for `nranks`, made by this process,
 * with `mode`: what another user (or a careless one) could leave under a board's name. */
static void forge_board(const char *path, symmpin_comm_key key, int nranks, mode_t mode) {
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
  cr_assert_eq(fchmod(fd, mode), 0);
  cr_assert_eq(ftruncate(fd, (off_t)board_total_bytes(nranks)), 0);
  close(fd);
  struct board_hdr *h = map_path(path, nranks);
  board_ident_init(&h->id, key, nranks);
  board_proc_self(&h->id.creator);
  atomic_store(&h->magic, BOARD_MAGIC);
  munmap(h, board_blobs_offset(nranks));
}

static bool exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

/* ---- names someone else made ---------------------------------------------------------------- */

Test(board_trust, name_with_another_mode_or_owner_is_refused, .timeout = 30) {
  symmpin_comm_key key = fresh_key();
  char path[80];
  shm_path(key, path, sizeof path);
  forge_board(path, key, 2, 0666);
  symmpin_board *b = NULL;
  static const mode_t modes[] = {0666, 0644, 0660, 0606, 0604, 0640, 0700, 0400, 0200, 04600};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    cr_assert_eq(chmod(path, modes[i]), 0);
    cr_expect_eq(symmpin_board_open(key, 0, 2, &b), SYMMPIN_ERR_INVALID, "mode %04o accepted",
                 (unsigned)modes[i]);
    cr_expect_null(b);
  }
  if (geteuid() == 0) {
    /* Only root can give a file away: another user's 0600 file is refused as well. */
    cr_assert_eq(chmod(path, 0600), 0);
    cr_assert_eq(chown(path, 65534, 65534), 0);
    cr_expect_eq(symmpin_board_open(key, 0, 2, &b), SYMMPIN_ERR_INVALID, "uid 65534's board");
    cr_assert_eq(chown(path, 0, 0), 0);
  }
  /* Refused means untouched: nothing attached, the name still there. */
  struct board_hdr *h = map_path(path, 2);
  cr_expect_eq(atomic_load(&h->attached), 0u);
  cr_expect_eq(atomic_load(&h->live), 0u);
  cr_expect_eq(atomic_load(&rank_rec(h, 0)->attached), 0u);
  munmap(h, board_blobs_offset(2));
  cr_expect(exists(path));
  /* The same file with this user's 0600 is a board: the refusals were about mode and owner. */
  cr_assert_eq(chmod(path, 0600), 0);
  cr_assert_eq(symmpin_board_open(key, 0, 2, &b), SYMMPIN_OK);
  symmpin_board_close(b);
  cr_expect(!exists(path), "the last local rank removes the name");
  unlink(path);
}

Test(board_trust, name_that_is_a_symbolic_link_is_refused, .timeout = 30) {
  symmpin_comm_key key = fresh_key();
  char path[80], target[96];
  shm_path(key, path, sizeof path);
  /* The target is a good board of this very key, so following the link would be accepted. */
  snprintf(target, sizeof target, "%s-target", path);
  forge_board(target, key, 2, 0600);
  cr_assert_eq(symlink(target, path), 0, "%s", strerror(errno));
  symmpin_board *b = NULL;
  cr_expect_eq(symmpin_board_open(key, 1, 2, &b), SYMMPIN_ERR_INVALID);
  cr_expect_null(b);
  struct board_hdr *h = map_path(target, 2);
  cr_expect_eq(atomic_load(&rank_rec(h, 1)->attached), 0u, "opened through the link");
  munmap(h, board_blobs_offset(2));
  /* A dangling link too (a creator would otherwise make the file where it points). */
  cr_assert_eq(unlink(target), 0);
  uint64_t t0 = now_ms();
  cr_expect_eq(symmpin_board_open(key, 0, 2, &b), SYMMPIN_ERR_INVALID);
  cr_expect_lt(now_ms() - t0, 1000u, "refused at once");
  cr_expect(!exists(target), "created through the link");
  cr_expect(exists(path));
  unlink(path);
  unlink(target);
}

Test(board_trust, creator_makes_the_name_0600_whatever_the_umask, .timeout = 30) {
  symmpin_comm_key key = fresh_key();
  char path[80];
  shm_path(key, path, sizeof path);
  mode_t old = umask(0277); /* would leave 0400 */
  symmpin_board *b0 = NULL, *b1 = NULL;
  cr_assert_eq(symmpin_board_open(key, 0, 3, &b0), SYMMPIN_OK);
  umask(old);
  struct stat st;
  cr_assert_eq(lstat(path, &st), 0);
  cr_expect_eq(st.st_mode & 07777, 0600u, "mode %04o", (unsigned)(st.st_mode & 07777));
  cr_expect_eq(st.st_uid, geteuid());
  cr_expect_eq(symmpin_board_open(key, 1, 3, &b1), SYMMPIN_OK);
  symmpin_board_close(b1);
  symmpin_board_close(b0);
}

/* ---- headers and words that lie -------------------------------------------------------------- */

Test(board_trust, header_that_does_not_match_is_refused, .timeout = 30) {
  symmpin_comm_key key = fresh_key();
  symmpin_board *b0 = NULL, *b1 = NULL;
  cr_assert_eq(symmpin_board_open(key, 0, 4, &b0), SYMMPIN_OK);
  struct board_hdr *h = b0->hdr; /* the shared header: what any writer of the file could change */
  const struct board_ident good = h->id;

  /* The file has the size of a 4-rank board; only the header says otherwise. */
  h->id.nranks = 3;
  cr_expect_eq(symmpin_board_open(key, 1, 4, &b1), SYMMPIN_ERR_DISAGREE, "nranks 3, expected 4");
  cr_expect_eq(symmpin_board_open(key, 1, 3, &b1), SYMMPIN_ERR_DISAGREE, "3 ranks, 4-rank layout");
  h->id.nranks = 0;
  cr_expect_eq(symmpin_board_open(key, 1, 4, &b1), SYMMPIN_ERR_DISAGREE);
  h->id.nranks = UINT64_MAX;
  cr_expect_eq(symmpin_board_open(key, 1, 4, &b1), SYMMPIN_ERR_DISAGREE);
  h->id = good;
  h->id.blob_max = 2 * SYMMPIN_BOARD_BLOB_MAX;
  cr_expect_eq(symmpin_board_open(key, 1, 4, &b1), SYMMPIN_ERR_DISAGREE, "blob size");
  h->id = good;
  h->id.blobs_offset += 4096;
  cr_expect_eq(symmpin_board_open(key, 1, 4, &b1), SYMMPIN_ERR_DISAGREE, "blob offset");
  h->id = good;
  h->id.ranks_offset += 64;
  cr_expect_eq(symmpin_board_open(key, 1, 4, &b1), SYMMPIN_ERR_DISAGREE, "rank offset");
  h->id = good;
  h->id.total_bytes -= 4096;
  cr_expect_eq(symmpin_board_open(key, 1, 4, &b1), SYMMPIN_ERR_DISAGREE, "total size");
  h->id = good;
  h->id.key_lo ^= 1;
  cr_expect_eq(symmpin_board_open(key, 1, 4, &b1), SYMMPIN_ERR_INVALID, "another key's header");
  h->id = good;
  /* Another layout version, or no board at all: refused at once, not after a wait. */
  atomic_store(&h->magic, BOARD_MAGIC_BASE | (BOARD_LAYOUT_VERSION - 1));
  uint64_t t0 = now_ms();
  cr_expect_eq(symmpin_board_open(key, 1, 4, &b1), SYMMPIN_ERR_DISAGREE, "old layout version");
  atomic_store(&h->magic, 0x1234567890abcdefull);
  cr_expect_eq(symmpin_board_open(key, 1, 4, &b1), SYMMPIN_ERR_INVALID, "not a board");
  cr_expect_lt(now_ms() - t0, 1000u, "refused at once");
  atomic_store(&h->magic, BOARD_MAGIC);
  cr_expect_null(b1);

  /* Put right, the same board opens: the refusals were about the lies, and left rank 1 free. */
  cr_assert_eq(symmpin_board_open(key, 1, 4, &b1), SYMMPIN_OK);
  symmpin_board_close(b1);
  symmpin_board_close(b0);
}

Test(board_trust, file_shorter_than_its_header_says_is_refused, .timeout = 30) {
  symmpin_comm_key key = fresh_key();
  char path[80];
  shm_path(key, path, sizeof path);
  symmpin_board *b0 = NULL, *b1 = NULL;
  cr_assert_eq(symmpin_board_open(key, 0, 2, &b0), SYMMPIN_OK);
  /* Mapping the whole board and touching a blob area past the end would be a SIGBUS. */
  cr_assert_eq(truncate(path, (off_t)board_blobs_offset(2)), 0);
  cr_expect_eq(symmpin_board_open(key, 1, 2, &b1), SYMMPIN_ERR_INVALID);
  cr_expect_null(b1);
  symmpin_board_close(b0); /* touches the header only */
  cr_expect(!exists(path));
}

Test(board_trust, blob_size_that_lies_is_not_read, .timeout = 30) {
  symmpin_comm_key key = fresh_key();
  symmpin_board *b0 = NULL, *b1 = NULL;
  cr_assert_eq(symmpin_board_open(key, 0, 2, &b0), SYMMPIN_OK);
  cr_assert_eq(symmpin_board_open(key, 1, 2, &b1), SYMMPIN_OK);
  uint64_t v = 0x1122334455667788ull;
  cr_assert_eq(symmpin_board_post(b1, 1, &v, sizeof v, 1), SYMMPIN_OK);
  size_t n = 12345;
  cr_assert_not_null(symmpin_board_blob(b0, 1, 1, &n));
  cr_expect_eq(n, sizeof v);
  _Atomic uint64_t *bytes = &b1->ranks[1].area_bytes[1]; /* round 1 is in area 1 */
  static const uint64_t lies[] = {(uint64_t)SYMMPIN_BOARD_BLOB_MAX + 1,
                                  2ull * SYMMPIN_BOARD_BLOB_MAX, 1ull << 63, UINT64_MAX};
  for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
    atomic_store(bytes, lies[i]);
    n = 12345;
    cr_expect_null(symmpin_board_blob(b0, 1, 1, &n), "a blob of %llu bytes was handed out",
                   (unsigned long long)lies[i]);
    cr_expect_eq(n, 12345u, "size written on failure");
  }
  /* The largest honest size still reads (the area is that big). */
  atomic_store(bytes, (uint64_t)SYMMPIN_BOARD_BLOB_MAX);
  cr_expect_not_null(symmpin_board_blob(b0, 1, 1, &n));
  cr_expect_eq(n, (size_t)SYMMPIN_BOARD_BLOB_MAX);
  symmpin_board_close(b0);
  symmpin_board_close(b1);
}

Test(board_trust, verdict_word_that_lies_reads_fail, .timeout = 30) {
  symmpin_comm_key key = fresh_key();
  symmpin_board *b = NULL;
  cr_assert_eq(symmpin_board_open(key, 0, 2, &b), SYMMPIN_OK);
  _Atomic uint64_t *slot = &b->hdr->verdicts[5];
  /* 0x101: GO in the low byte, garbage above it. */
  static const uint32_t lies[] = {0, 3, 0x101, 0xffffffffu};
  for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
    atomic_store(slot, (5ull << 32) | lies[i]);
    cr_expect_eq(symmpin_board_verdict(b, 5), SYMMPIN_VERDICT_FAIL, "word %#x", lies[i]);
    cr_expect_eq(symmpin_board_decide(b, 5, SYMMPIN_VERDICT_GO), SYMMPIN_VERDICT_FAIL, "word %#x",
                 lies[i]);
  }
  atomic_store(slot, (5ull << 32) | SYMMPIN_VERDICT_GO);
  cr_expect_eq(symmpin_board_verdict(b, 5), SYMMPIN_VERDICT_GO);
  symmpin_board_close(b);
}

/* ---- no room in /dev/shm ----------------------------------------------------------------- */

Test(board_trust, reservation_failure_is_an_error, .timeout = 30) {
  symmpin_comm_key key = fresh_key();
  char path[80];
  shm_path(key, path, sizeof path);
  symmpin_board *b = NULL;
  fallocate_calls = 0;
  fallocate_fail(ENOSPC, -1);
  cr_expect_eq(symmpin_board_open(key, 0, 1, &b), SYMMPIN_ERR_IO);
  cr_expect_gt(fallocate_calls, 0, "no reservation tried");
  cr_expect_null(b);
  cr_expect(!exists(path), "a board its creator could not reserve is left behind");
  fallocate_fail(EOPNOTSUPP, -1);
  cr_expect_eq(symmpin_board_open(key, 0, 1, &b), SYMMPIN_ERR_UNSUPPORTED);
  cr_expect(!exists(path));
  /* A signal during the reservation: tried again. */
  fallocate_fail(EINTR, 3);
  cr_assert_eq(symmpin_board_open(key, 0, 2, &b), SYMMPIN_OK);
  cr_expect(exists(path));

  /* Posting reserves the rank's area as it grows; no room means an error and nothing posted. */
  static unsigned char blob[100 << 10];
  memset(blob, 0x5a, sizeof blob);
  fallocate_fail(ENOSPC, -1);
  cr_expect_eq(symmpin_board_post(b, 1, blob, sizeof blob, 1), SYMMPIN_ERR_IO);
  cr_expect_null(symmpin_board_blob(b, 1, 0, NULL));
  cr_expect_eq(symmpin_board_post(b, 1, blob, 16, 1), SYMMPIN_ERR_IO, "the first page too");
  cr_expect_eq(symmpin_board_post(b, 1, NULL, 0, 1), SYMMPIN_OK, "an empty blob needs no room");
  fallocate_fail(0, 0);
  cr_expect_eq(symmpin_board_post(b, 3, blob, sizeof blob, 1), SYMMPIN_OK);
  size_t n = 0;
  const unsigned char *p = symmpin_board_blob(b, 3, 0, &n);
  cr_assert_not_null(p);
  cr_expect_eq(n, sizeof blob);
  cr_expect_eq(memcmp(p, blob, n), 0);
  /* What is reserved stays reserved: a smaller post in the same area asks for nothing. */
  fallocate_fail(ENOSPC, -1);
  fallocate_calls = 0;
  cr_expect_eq(symmpin_board_post(b, 5, blob, 4096, 1), SYMMPIN_OK);
  cr_expect_eq(fallocate_calls, 0);
  fallocate_fail(0, 0);
  symmpin_board_close(b);
  cr_expect(!exists(path));
}

static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* This process gets its own /dev/shm of `bytes` (a mount namespace; a user namespace too when not
 * privileged). -1 where the host allows neither. */
static int enter_small_shm(size_t bytes) {
  if (unshare(CLONE_NEWNS) != 0) {
    uid_t uid = geteuid();
    gid_t gid = getegid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return -1;
    char map[64];
    write_file("/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "%u %u 1", (unsigned)uid, (unsigned)uid);
    if (write_file("/proc/self/uid_map", map) != 0) return -1;
    snprintf(map, sizeof map, "%u %u 1", (unsigned)gid, (unsigned)gid);
    if (write_file("/proc/self/gid_map", map) != 0) return -1;
  }
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return -1;
  char opt[64];
  snprintf(opt, sizeof opt, "size=%zu,mode=1777", bytes);
  return mount("tmpfs", BOARD_SHM_DIR, "tmpfs", 0, opt);
}

/* A real full /dev/shm (a 256 KiB tmpfs of its own): errors, never a SIGBUS. Skipped where no
 * namespace can be made. */
Test(board_trust, full_shm_is_an_error_not_a_sigbus, .timeout = 30) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    if (enter_small_shm(256 << 10) != 0) _exit(77);
    symmpin_comm_key k1 = fresh_key(), k2 = fresh_key();
    symmpin_board *b = NULL;
    if (symmpin_board_open(k1, 0, 1, &b) != SYMMPIN_OK) _exit(1);
    static unsigned char blob[SYMMPIN_BOARD_BLOB_MAX];
    if (symmpin_board_post(b, 1, blob, 4096, 1) != SYMMPIN_OK) _exit(2);
    /* 1 MiB does not fit: touched unreserved, these pages would be a SIGBUS. */
    if (symmpin_board_post(b, 2, blob, sizeof blob, 1) != SYMMPIN_ERR_IO) _exit(3);
    symmpin_board_close(b);
    /* 4096 ranks: header and rank records (~264 KiB) do not fit either. */
    if (symmpin_board_open(k2, 0, 4096, &b) != SYMMPIN_ERR_IO) _exit(4);
    char path[80];
    shm_path(k2, path, sizeof path);
    if (exists(path)) _exit(5);
    _exit(0);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(!WIFSIGNALED(status), "killed by signal %d (SIGBUS is %d)", WTERMSIG(status), SIGBUS);
  if (WEXITSTATUS(status) == 77) cr_skip_test("no mount namespace here: cannot shrink /dev/shm");
  cr_expect_eq(WEXITSTATUS(status), 0, "step %d failed", WEXITSTATUS(status));
}

/* ---- boards of dead jobs ------------------------------------------------------------------- */

typedef struct child {
  pid_t pid;
  int go[2]; /* a byte from the parent lets the child close its board and exit (not EOF: children
                forked later hold copies of go[1]) */
} child;

typedef enum child_end {
  CHILD_EXITS,  /* exits at once without closing its board (a killed job), and is reaped */
  CHILD_ZOMBIE, /* the same, but nobody reaps it (yet) */
  CHILD_STAYS,  /* keeps its board open until child_release() */
} child_end;

/* A child process that opens rank `rank` of `nranks` of `key` and ends as `end` says. */
static child child_open(symmpin_comm_key key, int rank, int nranks, child_end end) {
  child c;
  int ready[2];
  cr_assert_eq(pipe(ready), 0);
  cr_assert_eq(pipe(c.go), 0);
  c.pid = fork();
  cr_assert_geq(c.pid, 0);
  if (c.pid == 0) {
    close(ready[0]);
    close(c.go[1]);
    symmpin_board *b = NULL;
    char ok = symmpin_board_open(key, rank, nranks, &b) == SYMMPIN_OK ? 1 : 0;
    if (write(ready[1], &ok, 1) != 1 || !ok) _exit(1);
    if (end != CHILD_STAYS) _exit(0);
    char x;
    while (read(c.go[0], &x, 1) < 0 && errno == EINTR) {
    } /* a byte, or EOF once the test process is gone */
    symmpin_board_close(b);
    _exit(0);
  }
  close(ready[1]);
  close(c.go[0]);
  char ok = 0;
  cr_assert_eq(read(ready[0], &ok, 1), 1);
  cr_assert_eq(ok, 1, "child could not open rank %d", rank);
  close(ready[0]);
  if (end == CHILD_EXITS) {
    int status;
    cr_assert_eq(waitpid(c.pid, &status, 0), c.pid); /* reaped: no process has its pid now */
  } else if (end == CHILD_ZOMBIE) {
    siginfo_t si;
    cr_assert_eq(waitid(P_PID, (id_t)c.pid, &si, WEXITED | WNOWAIT), 0); /* exited, not reaped */
  }
  return c;
}

static void child_release(child *c) {
  cr_assert_eq(write(c->go[1], "x", 1), 1);
  close(c->go[1]);
  int status;
  cr_assert_eq(waitpid(c->pid, &status, 0), c->pid);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void sweep_again(void) {
  atomic_store(&board_swept, 0); /* once per process: let this one sweep once more */
  board_sweep();
}

Test(board_trust, boards_of_dead_jobs_are_removed_and_others_kept, .timeout = 60) {
  symmpin_comm_key kdead = fresh_key(), kzombie = fresh_key(), klive = fresh_key(),
                   kpeer = fresh_key(), kns = fresh_key(), kmode = fresh_key(),
                   kreuse = fresh_key(), kopen = fresh_key();
  /* The children below are forked from here: as if they had swept already, so that only this
   * process sweeps, when the test says. */
  atomic_store(&board_swept, 1);
  char pdead[80], pzombie[80], plive[80], ppeer[80], pns[80], pmode[80], preuse[80];
  shm_path(kdead, pdead, sizeof pdead);
  shm_path(kzombie, pzombie, sizeof pzombie);
  shm_path(klive, plive, sizeof plive);
  shm_path(kpeer, ppeer, sizeof ppeer);
  shm_path(kns, pns, sizeof pns);
  shm_path(kmode, pmode, sizeof pmode);
  shm_path(kreuse, preuse, sizeof preuse);

  child_open(kdead, 0, 2, CHILD_EXITS); /* a job killed before its peers attached */
  child zombie = child_open(kzombie, 0, 2, CHILD_ZOMBIE); /* the same, not reaped yet */
  child live = child_open(klive, 0, 2, CHILD_STAYS); /* a job still waiting for its peers */
  /* The creator is gone, but a rank of another process still uses the board. (The creator
   * stays until the peer attached: a board with a dead creator and nobody else attached may be
   * swept at any moment by a test process running beside this one.) */
  child creator = child_open(kpeer, 0, 3, CHILD_STAYS);
  child peer = child_open(kpeer, 1, 3, CHILD_STAYS);
  child_release(&creator);
  /* Made by a process of another pid namespace: /proc here cannot judge it. (Forged from a board
   * of this live process, namespace first, so that it never looks dead in this namespace.) */
  forge_board(pns, kns, 2, 0600);
  struct board_hdr *h = map_path(pns, 2);
  h->id.creator.pidns ^= 1;
  h->id.creator.start += 1;
  munmap(h, board_blobs_offset(2));
  /* Dead (a reused pid), but not a private board of this user. */
  forge_board(pmode, kmode, 2, 0644);
  h = map_path(pmode, 2);
  h->id.creator.start += 1;
  munmap(h, board_blobs_offset(2));

  /* (pdead and pzombie may be gone already: test processes running beside this one sweep when
   * they start.) */
  cr_expect(exists(plive) && exists(ppeer) && exists(pns) && exists(pmode));
  /* This process's first open sweeps. */
  atomic_store(&board_swept, 0);
  symmpin_board *b = NULL;
  cr_expect_eq(symmpin_board_open(kopen, 0, 1, &b), SYMMPIN_OK);
  symmpin_board_close(b);
  cr_expect(!exists(pdead), "a board of a dead job stayed");
  cr_expect(!exists(pzombie), "a board of an exited, unreaped process stayed");
  int status;
  cr_expect_eq(waitpid(zombie.pid, &status, 0), zombie.pid);
  cr_expect(exists(plive), "a board whose creator lives was removed");
  cr_expect(exists(ppeer), "a board with a live rank was removed");
  cr_expect(exists(pns), "a board of another pid namespace was removed");
  cr_expect(exists(pmode), "a board with mode 0644 was removed");

  /* A pid that lives but started at another time is a reused pid: the board's process is gone. */
  symmpin_board *br = NULL;
  if (symmpin_board_open(kreuse, 0, 2, &br) == SYMMPIN_OK) {
    br->hdr->id.creator.start += 1;
    sweep_again();
    cr_expect(exists(preuse), "its rank record still names this process");
    br->ranks[0].proc.start += 1;
    sweep_again();
    cr_expect(!exists(preuse), "a board of a reused pid stayed");
    symmpin_board_close(br);
  } else {
    cr_expect_fail("cannot open a board");
  }

  /* Once the last rank's process is gone too, the board goes. */
  child_release(&peer); /* 1 of 3 ranks left, so the name stays for the sweep */
  sweep_again();
  cr_expect(!exists(ppeer), "a board whose every process is gone stayed");
  child_release(&live); /* closes its board: the last local rank removes the name */
  cr_expect(!exists(plive));
  const char *paths[] = {pdead, pzombie, plive, ppeer, pns, pmode, preuse};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) unlink(paths[i]);
}

/* Another local user's names that look like boards (uid 65534: a child of this root test drops to
 * it) must not keep this user's dead boards from being removed: the sweep examines at most
 * BOARD_SWEEP_BOARDS names, but only this user's count. Before, the names below (more than the
 * bound before the dead board and after it, whatever order readdir gives) used up the bound. */
static void make_names_as_nobody(char (*paths)[80], int n) {
  for (int i = 0; i < n; i++) {
    symmpin_comm_key k = fresh_key();
    shm_path(k, paths[i], sizeof paths[i]);
  }
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
    for (int i = 0; i < n; i++) {
      int fd = open(paths[i], O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
      if (fd < 0) _exit(4);
      close(fd);
    }
    _exit(0);
  }
  int status;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "uid 65534's child: status %#x", status);
}

Test(board_trust, other_users_names_do_not_keep_dead_boards, .timeout = 60) {
  if (geteuid() != 0) cr_skip_test("needs root (to be another user in a child)");
  atomic_store(&board_swept, 1); /* the children below do not sweep */
  enum { PER_BATCH = BOARD_SWEEP_BOARDS + 8 };
  static char theirs[2 * PER_BATCH][80];
  symmpin_comm_key kdead = fresh_key();
  char pdead[80];
  shm_path(kdead, pdead, sizeof pdead);
  make_names_as_nobody(theirs, PER_BATCH);
  child_open(kdead, 0, 2, CHILD_EXITS); /* this user's job, killed before its peers came */
  make_names_as_nobody(theirs + PER_BATCH, PER_BATCH);
  sweep_again();
  cr_expect(!exists(pdead), "this user's dead board stayed behind another user's names");
  int kept = 0;
  for (int i = 0; i < 2 * PER_BATCH; i++) kept += exists(theirs[i]);
  cr_expect_eq(kept, 2 * PER_BATCH, "another user's names are not this user's to remove");
  for (int i = 0; i < 2 * PER_BATCH; i++) unlink(theirs[i]);
  unlink(pdead);
}

/* A creator killed between its exclusive create and the magic leaves a name no opener can use;
 * the sweep removes it once nobody holds the creator's lock (the creator is gone) and it is older
 * than an opener's wait. A creator still at work keeps it (it holds the lock), and so does a name
 * younger than that (a creator between its create and its lock). */
Test(board_trust, a_creator_killed_before_the_magic_leaves_nothing_behind, .timeout = 60) {
  atomic_store(&board_swept, 1);
  /* Killed at its first reservation: a file of size 0. */
  symmpin_comm_key kdied = fresh_key();
  char pdied[80];
  shm_path(kdied, pdied, sizeof pdied);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    fallocate_die = 1;
    symmpin_board *b = NULL;
    symmpin_board_open(kdied, 0, 2, &b);
    _exit(5); /* not reached */
  }
  int status;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  cr_assert(exists(pdied), "the killed creator left no name (the test's premise)");
  sweep_again();
  cr_expect(exists(pdied), "a name younger than an opener's wait was removed");
  struct timespec old[2] = {{.tv_nsec = UTIME_OMIT}, {0}};
  clock_gettime(CLOCK_REALTIME, &old[1]);
  old[1].tv_sec -= 2 * (BOARD_OPEN_WAIT_MS / 1000) + 1;
  cr_assert_eq(utimensat(AT_FDCWD, pdied, old, AT_SYMLINK_NOFOLLOW), 0);

  /* Killed after it sized the file (forged: full size, no magic, nobody holds its lock). */
  symmpin_comm_key ksized = fresh_key();
  char psized[80];
  shm_path(ksized, psized, sizeof psized);
  int fd = open(psized, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  cr_assert_geq(fd, 0);
  cr_assert_eq(fchmod(fd, 0600), 0);
  cr_assert_eq(ftruncate(fd, (off_t)board_total_bytes(2)), 0);
  close(fd);
  cr_assert_eq(utimensat(AT_FDCWD, psized, old, AT_SYMLINK_NOFOLLOW), 0);

  /* A creator at work (stopped at its first reservation, holding its lock), as old. */
  symmpin_comm_key kbusy = fresh_key();
  char pbusy[80];
  shm_path(kbusy, pbusy, sizeof pbusy);
  int go[2];
  cr_assert_eq(pipe(go), 0);
  pid_t busy = fork();
  cr_assert_geq(busy, 0);
  if (busy == 0) {
    close(go[1]);
    fallocate_block_fd = go[0];
    symmpin_board *b = NULL;
    if (symmpin_board_open(kbusy, 0, 1, &b) != SYMMPIN_OK) _exit(6);
    symmpin_board_close(b);
    _exit(0);
  }
  close(go[0]);
  for (int i = 0; i < 500 && !exists(pbusy); i++) usleep(2000);
  cr_assert(exists(pbusy));
  usleep(20000); /* past its create: at its reservation, with its lock */
  cr_assert_eq(utimensat(AT_FDCWD, pbusy, old, AT_SYMLINK_NOFOLLOW), 0);

  sweep_again();
  cr_expect(!exists(pdied), "the name of a creator killed before its first reservation stayed");
  cr_expect(!exists(psized), "the name of a creator killed before its magic stayed");
  cr_expect(exists(pbusy), "the name of a creator at work was removed");
  cr_assert_eq(write(go[1], "x", 1), 1);
  close(go[1]);
  cr_assert_eq(waitpid(busy, &status, 0), busy);
  cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the creator at work: %#x", status);
  cr_expect(!exists(pbusy), "its one rank closed the board: the name goes");
  unlink(pdied);
  unlink(psized);
  unlink(pbusy);
}
