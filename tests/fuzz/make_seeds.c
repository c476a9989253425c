/* Writes the seeds of fuzz_record and fuzz_board (tests/fuzz/corpus/) with the library's own code,
 * so that they are what real ranks post and leave behind:
 *   make_seeds <corpus dir>   (writes the folders fuzz_record and fuzz_board there)
 *
 * Record blobs: two real agreements (agree/agree.h) over one board, both driven by this thread
 * with agree_world.h's calls (fuzz_record's rank 0 makes the same ones); every blob they post is
 * caught on its way to the board (linked with -Wl,--wrap=symmpin_board_post), and the record
 * rounds' blobs are written: rank 1's of the first epoch (what fuzz_record's rank 0 expects), rank
 * 0's, and a later epoch's (closed at another call), and rank 1's without measurements.
 *
 * Board images: boards made with the board's own calls (board.c is compiled in, for its structs),
 * as fuzz_board reads them (its control byte, then the file's first bytes, trailing zeros cut):
 *   join2    2 ranks, rank 0 (this process) posted its hello and record, logged 70 routes and
 *            decided a round; fuzz_board opens it as rank 1;
 *   dead3    3 ranks, ranks 0 and 1 attached and posted, rank 2 never came, and every process in
 *            it is gone (pid namespace 1: fuzz_board's own, see there): the sweep removes it;
 *   busy4    4 ranks, three attached with posts, verdicts, route logs and an alarm raised;
 *            fuzz_board opens it as rank 3. */
#include "symmem/board.c"

#include <sys/random.h>

#include "tests/fuzz/agree_world.h"

/* ---- the blobs the agreements post ---- */

#define CAUGHT_MAX 64
static struct caught {
  int rank;
  uint32_t round;
  size_t bytes;
  unsigned char *blob;
} caught[CAUGHT_MAX];
static int ncaught;

symmpin_status __real_symmpin_board_post(symmpin_board *b, uint32_t round, const void *blob,
                                         size_t bytes, uint64_t tid);
symmpin_status __wrap_symmpin_board_post(symmpin_board *b, uint32_t round, const void *blob,
                                         size_t bytes, uint64_t tid) {
  if (b && ncaught < CAUGHT_MAX) {
    struct caught *c = &caught[ncaught++];
    *c = (struct caught){b->rank, round, bytes, malloc(bytes ? bytes : 1)};
    if (!c->blob) abort();
    if (bytes) memcpy(c->blob, blob, bytes);
  }
  return __real_symmpin_board_post(b, round, blob, bytes, tid);
}

static const struct caught *find(int rank, uint32_t round) {
  for (int i = 0; i < ncaught; i++)
    if (caught[i].rank == rank && caught[i].round == round) return &caught[i];
  return NULL;
}

static void forget_caught(void) {
  for (int i = 0; i < ncaught; i++) free(caught[i].blob);
  ncaught = 0;
}

static symmpin_comm_key fresh_key(void) {
  uint64_t r[2];
  if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) abort();
  return symmpin_comm_key_of_bytes(r, sizeof r);
}

static void write_file(const char *dir, const char *name, const void *p1, size_t n1, const void *p2,
                       size_t n2) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p1, 1, n1, f) != n1 || (n2 && fwrite(p2, 1, n2, f) != n2) || fclose(f) != 0) {
    fprintf(stderr, "make_seeds: cannot write %s\n", path);
    exit(1);
  }
  printf("%s: %zu bytes\n", path, n1 + n2);
}

/* Runs the world's two ranks; rank 1 measures unless told otherwise. */
static void run_world(bool rank1_measures) {
  static const int ranks[WORLD_RANKS] = {0, 1};
  symmpin_comm_key key = fresh_key();
  symmpin_agree *a[WORLD_RANKS];
  for (int r = 0; r < WORLD_RANKS; r++) {
    symmpin_agree_params p = world_params(key, &ranks[r]);
    if (r == 1 && !rank1_measures) p.ops.shape_times = NULL;
    if (symmpin_agree_open(&p, &a[r]) != SYMMPIN_OK) abort();
  }
  int gos = 0;
  for (uint64_t n = 1; n <= WORLD_CALLS; n++)
    for (int r = 0; r < WORLD_RANKS; r++) {
      symmpin_agree_call c = world_call(n);
      gos += symmpin_agree_step(a[r], n, &c);
    }
  if (gos < 2) {
    fprintf(stderr, "make_seeds: the world agreed %d times, expected an agreement per rank\n", gos);
    exit(1);
  }
  for (int r = 0; r < WORLD_RANKS; r++) symmpin_agree_close(a[r]);
}

static void record_seeds(const char *dir) {
  char sub[1024];
  snprintf(sub, sizeof sub, "%s/fuzz_record", dir);
  run_world(true);
  const struct caught *r1 = find(1, 2), *r0 = find(0, 2), *later = find(1, 5);
  if (!r1 || !r0 || !later) {
    fprintf(stderr, "make_seeds: the world posted no record round (epochs 1 and 2)\n");
    exit(1);
  }
  write_file(sub, "rank1-epoch1", r1->blob, r1->bytes, NULL, 0);
  write_file(sub, "rank0-epoch1", r0->blob, r0->bytes, NULL, 0);
  write_file(sub, "rank1-epoch2", later->blob, later->bytes, NULL, 0);
  forget_caught();
  run_world(false);
  if (!(r1 = find(1, 2))) exit(1);
  write_file(sub, "rank1-epoch1-static", r1->blob, r1->bytes, NULL, 0);
  forget_caught();
  run_world(true); /* again, for board_seeds: rank 0's record */
}

/* ---- board images ---- */

/* Marks the processes recorded in the image: pid namespace 0 (unknown: never judged) or 1 (what
 * fuzz_board replaces with its own). */
static void mark_procs(unsigned char *img, size_t len, int nranks, uint64_t pidns) {
  size_t offs[1 + 64];
  int n = 0;
  offs[n++] = offsetof(struct board_hdr, id) + offsetof(struct board_ident, creator);
  for (int r = 0; r < nranks; r++)
    offs[n++] = board_ranks_offset() + (size_t)r * sizeof(struct board_rank) +
                offsetof(struct board_rank, proc);
  for (int i = 0; i < n; i++) {
    if (offs[i] + sizeof(struct board_proc) > len) continue;
    struct board_proc p;
    memcpy(&p, img + offs[i], sizeof p);
    if (p.pid) p.pidns = pidns;
    memcpy(img + offs[i], &p, sizeof p);
  }
}

/* The first `len` bytes of b's mapping, trailing zeros cut, after the control byte. */
static void write_board(const char *dir, const char *name, symmpin_board *b, size_t len,
                        unsigned ctl, uint64_t pidns) {
  unsigned char *img = malloc(len);
  if (!img) abort();
  memcpy(img, b->hdr, len);
  mark_procs(img, len, b->nranks, pidns);
  while (len && img[len - 1] == 0) len--;
  unsigned char c = (unsigned char)ctl;
  char sub[1024];
  snprintf(sub, sizeof sub, "%s/fuzz_board", dir);
  write_file(sub, name, &c, 1, img, len);
  free(img);
}

static void board_seeds(const char *dir) {
  const struct caught *rec = find(0, 2);
  if (!rec) exit(1);
  uint64_t tid = (uint64_t)gettid();

  /* join2: rank 0 alone, with its hello and record posted; fuzz_board joins as rank 1. */
  symmpin_board *b0;
  if (symmpin_board_open(fresh_key(), 0, 2, &b0) != SYMMPIN_OK) abort();
  static const int32_t hello[2] = {1234, 0};
  if (symmpin_board_post(b0, 1, hello, sizeof hello, tid) != SYMMPIN_OK ||
      symmpin_board_post(b0, 2, rec->blob, rec->bytes, tid) != SYMMPIN_OK)
    abort();
  for (uint64_t call = 1; call <= 70; call++)
    symmpin_board_route_put(b0, call, 0x5160000 + call, 0x1000 + call % 4);
  symmpin_board_route_block_put(b0, 0, 0xb10c0);
  symmpin_board_decide(b0, 1, SYMMPIN_VERDICT_GO);
  write_board(dir, "join2", b0, board_blobs_offset(2) + rec->bytes, 1u << 2, 0);
  symmpin_board_close(b0);

  /* dead3: ranks 0 and 1 of 3 posted their hellos; nobody is left (pid namespace 1). */
  symmpin_comm_key k3 = fresh_key();
  symmpin_board *d[2];
  for (int r = 0; r < 2; r++) {
    if (symmpin_board_open(k3, r, 3, &d[r]) != SYMMPIN_OK) abort();
    if (symmpin_board_post(d[r], 1, hello, sizeof hello, tid) != SYMMPIN_OK) abort();
  }
  write_board(dir, "dead3", d[0], board_blobs_offset(3), 2u << 2, 1);
  for (int r = 0; r < 2; r++) symmpin_board_close(d[r]);

  /* busy4: ranks 0-2 of 4 three rounds in, verdicts, routes and an alarm; rank 3 joins. */
  symmpin_comm_key k4 = fresh_key();
  symmpin_board *q[3];
  for (int r = 0; r < 3; r++) {
    if (symmpin_board_open(k4, r, 4, &q[r]) != SYMMPIN_OK) abort();
    for (uint32_t round = 1; round <= 3; round++)
      if (symmpin_board_post(q[r], round, hello, sizeof hello, tid) != SYMMPIN_OK) abort();
    for (uint64_t call = 1; call <= 5; call++)
      symmpin_board_route_put(q[r], call, 0x5160000 + call, 0x1000 + call % 4);
  }
  symmpin_board_decide(q[0], 1, SYMMPIN_VERDICT_GO);
  symmpin_board_decide(q[1], 2, SYMMPIN_VERDICT_FAIL);
  symmpin_board_alarm_raise(q[2], ((uint64_t)1 << 56) | ((uint64_t)2 << 48) | 5u);
  write_board(dir, "busy4", q[0], board_blobs_offset(4), 3u << 2, 0);
  for (int r = 0; r < 3; r++) symmpin_board_close(q[r]);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: make_seeds <corpus dir> (writes <dir>/fuzz_record, <dir>/fuzz_board)\n");
    return 2;
  }
  symmpin_log_configure(SYMMPIN_LOG_WARN, -1);
  record_seeds(argv[1]);
  board_seeds(argv[1]);
  forget_caught();
  return 0;
}
