/* libFuzzer target: a board file as another process of this user left it in /dev/shm
 * (symmem/board.h "Trust": nothing read from a board steers anything unchecked).
 *
 * board.c is compiled into this file (as in tests/symmem/test_board_trust.c), so that the stale
 * check of the sweep can be run on the one file the input makes, with the board's own structs.
 *
 * Input: one control byte, then the file's first bytes (the rest of the file reads as zeros):
 *   bits 0-1  rank count when the image's header does not give one in 1..8 (1 + value);
 *   bits 2-4  the rank this process opens as (modulo the rank count);
 *   bits 5-6  the file's size: 0 what the header's rank count needs, 1 the image's length, 2 one
 *             page less, 3 one page more;
 *   bit 7     keep the image's key (the board is then another communicator's: refused), else the
 *             key in the header is replaced by a fresh one, the name the file is made under.
 * A process record (the creator's, each rank's) whose pid namespace reads 1 is given this
 * process's namespace: the seeds (tests/fuzz/make_seeds.c) mark the processes that made them so,
 * and they are gone, as after a crash.
 *
 * Per input: make the file (0600, this user), run the sweep's stale check on it (and remove it,
 * as the sweep would, when stale), then, unless it is a board whose creator is still at work (no
 * magic yet, or shorter than the header: an opener just waits for those, up to 5 s), open it as
 * the chosen rank and read everything a rank reads: attachment, every rank's blobs of the rounds
 * around its last one (each byte touched, and the blob must lie inside that rank's own area),
 * round completion, a wait that must not block, verdicts, route logs and blocks, the alarm; then
 * post, decide and raise as a rank does, and close. */
#include <sys/random.h>

#include "symmem/board.c"

#define FUZZ_MAX_RANKS 8

static uint64_t my_pidns;
static uint64_t key_base[2], key_counter;
static volatile uint64_t sink;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  /* SYMMPIN_FUZZ_DEBUG=1: the library's log at INFO (what one input does, when reproducing). */
  const char *debug = getenv("SYMMPIN_FUZZ_DEBUG");
  symmpin_log_configure(debug && *debug == '1' ? SYMMPIN_LOG_INFO : SYMMPIN_LOG_NONE, -1);
  my_pidns = board_pidns_self();
  if (getrandom(key_base, sizeof key_base, 0) != (ssize_t)sizeof key_base) abort();
  return 0;
}

static void fail(const char *what) {
  fprintf(stderr, "fuzz_board: %s\n", what);
  abort();
}

/* The pid namespace leads a process record; the image may end inside the record (trailing zeros
 * are not in the seeds). */
static void patch_proc(unsigned char *img, size_t len, size_t off) {
  _Static_assert(offsetof(struct board_proc, pidns) == 0, "pidns leads a process record");
  uint64_t ns;
  if (off + sizeof ns > len) return;
  memcpy(&ns, img + off, sizeof ns);
  if (ns == 1) memcpy(img + off, &my_pidns, sizeof ns);
}

static void read_board(symmpin_board *b, int nranks) {
  uint64_t my_tid = (uint64_t)gettid();
  for (int r = 0; r < nranks; r++) {
    sink += symmpin_board_rank_attached(b, r);
    uint32_t last = atomic_load(&b->ranks[r].last_round);
    uint32_t rounds[] = {1, 2, 3, last - 1, last, last + 1,
                         atomic_load(&b->ranks[r].area_round[0]),
                         atomic_load(&b->ranks[r].area_round[1])};
    for (size_t k = 0; k < sizeof rounds / sizeof rounds[0]; k++) {
      size_t bytes = 0;
      const unsigned char *blob = symmpin_board_blob(b, rounds[k], r, &bytes);
      if (!blob) continue;
      const unsigned char *area =
          b->blobs + ((size_t)r * 2 + (rounds[k] & 1u)) * SYMMPIN_BOARD_BLOB_MAX;
      if (blob < area || bytes > SYMMPIN_BOARD_BLOB_MAX || blob + bytes > area + SYMMPIN_BOARD_BLOB_MAX)
        fail("a blob reaches out of its rank's area");
      for (size_t i = 0; i < bytes; i += 512) sink += blob[i];
      if (bytes) sink += blob[bytes - 1];
      sink += symmpin_board_round_complete(b, rounds[k]);
      int missing = -1;
      /* The timeout is 0: an answer at once, whatever the board says. */
      sink += (uint64_t)symmpin_board_wait(b, rounds[k], 0, my_tid, &missing);
      sink += symmpin_board_verdict(b, rounds[k]);
    }
    uint64_t call = symmpin_board_route_last(b, r), sig, site, hash;
    for (uint64_t c = call > 2 ? call - 2 : 1; c <= call + 1; c++)
      if (symmpin_board_route_get(b, r, c, &sig, &site)) sink += sig ^ site;
    uint64_t block = call / SYMMPIN_BOARD_ROUTE_BLOCK_CALLS;
    for (uint64_t k = block > 0 ? block - 1 : 0; k <= block; k++)
      if (symmpin_board_route_block_get(b, r, k, &hash)) sink += hash;
  }
  sink += symmpin_board_alarm(b);
}

static void write_board(symmpin_board *b, int rank) {
  uint32_t last = atomic_load(&b->ranks[rank].last_round);
  if (last < UINT32_MAX - 1) {
    static const char post[] = "a rank's post";
    if (symmpin_board_post(b, last + 1, post, sizeof post, (uint64_t)gettid()) == SYMMPIN_OK) {
      size_t bytes = 0;
      const void *p = symmpin_board_blob(b, last + 1, rank, &bytes);
      if (!p || bytes != sizeof post || memcmp(p, post, bytes) != 0)
        fail("this rank's own post does not read back");
    }
    symmpin_verdict v = symmpin_board_decide(b, last + 1, SYMMPIN_VERDICT_FAIL);
    if (v != SYMMPIN_VERDICT_GO && v != SYMMPIN_VERDICT_FAIL) fail("decide gave no verdict");
    if (symmpin_board_verdict(b, last + 1) != v) fail("the verdict that stands is not the one decided");
  }
  /* The next call after the one the board says was logged last (a rank counts its own calls from
   * 1; a board left at UINT64_MAX wraps to 0, which no rank logs). */
  uint64_t call = symmpin_board_route_last(b, rank) + 1;
  if (call == 0) call = 1;
  symmpin_board_route_put(b, call, 0x5150, 0x7e57);
  uint64_t sig, site;
  if (rank < SYMMPIN_BOARD_ROUTE_RANKS &&
      (!symmpin_board_route_get(b, rank, call, &sig, &site) || sig != 0x5150 || site != 0x7e57))
    fail("this rank's own route entry does not read back");
  uint64_t a = symmpin_board_alarm_raise(b, 0xa1a2);
  if (a == 0 || symmpin_board_alarm(b) != a) fail("the alarm that stands is not the one read");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  unsigned ctl = data[0];
  size_t len = size - 1;
  unsigned char *img = malloc(len ? len : 1);
  if (!img) abort();
  memcpy(img, data + 1, len);

  /* The rank count: the header's when it gives a usable one. */
  int nranks = 1 + (int)(ctl & 3u);
  const size_t id_off = offsetof(struct board_hdr, id);
  struct board_ident id;
  memset(&id, 0, sizeof id);
  memcpy(&id, img + (len > id_off ? id_off : len),
         len > id_off ? (len - id_off < sizeof id ? len - id_off : sizeof id) : 0);
  if (id.nranks >= 1 && id.nranks <= FUZZ_MAX_RANKS) nranks = (int)id.nranks;
  int rank = (int)((ctl >> 2) & 7u) % nranks;

  symmpin_comm_key key = {key_base[0], key_base[1] + ++key_counter};
  if (!(ctl & 0x80u)) {
    id.key_hi = key.hi;
    id.key_lo = key.lo;
    size_t n = len > id_off ? (len - id_off < 16 ? len - id_off : 16) : 0;
    memcpy(img + id_off, &id.key_hi, n); /* key_hi, key_lo lead the identity */
  }
  patch_proc(img, len, id_off + offsetof(struct board_ident, creator));
  for (int r = 0; r < nranks; r++)
    patch_proc(img, len,
               board_ranks_offset() + (size_t)r * sizeof(struct board_rank) +
                   offsetof(struct board_rank, proc));

  size_t total = board_total_bytes(nranks), fsize;
  switch ((ctl >> 5) & 3u) {
  case 0: fsize = total; break;
  case 1: fsize = len; break;
  case 2: fsize = total - 4096; break;
  default: fsize = total + 4096; break;
  }
  if (fsize < len) fsize = len;

  char name[48], ent[48];
  board_name(key, name, sizeof name);
  snprintf(ent, sizeof ent, "%s", name + 1);
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) abort();
  if (fchmod(fd, 0600) != 0 || ftruncate(fd, (off_t)fsize) != 0 ||
      (len && pwrite(fd, img, len, 0) != (ssize_t)len))
    abort();

  /* The sweep's judgment of this one entry (board_sweep looks at every entry of /dev/shm). */
  struct stat lst;
  char path[64];
  snprintf(path, sizeof path, BOARD_SHM_DIR "%s", name);
  bool removed = false;
  if (lstat(path, &lst) == 0) {
    int rfd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    uint32_t creator = 0;
    if (rfd >= 0) {
      removed = board_file_stale(rfd, ent, &lst, geteuid(), my_pidns, &creator);
      close(rfd);
    }
  }

  uint64_t magic = 0;
  memcpy(&magic, img + (len >= 8 ? 0 : len), len >= 8 ? 8 : 0);
  if (!removed && magic != 0 && fsize >= board_ranks_offset()) {
    symmpin_board *b = NULL;
    if (symmpin_board_open(key, rank, nranks, &b) == SYMMPIN_OK) {
      read_board(b, nranks);
      write_board(b, rank);
      symmpin_board_close(b);
    }
  }
  close(fd);
  shm_unlink(name); /* whatever the board's counters said */
  free(img);
  return 0;
}
