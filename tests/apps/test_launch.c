/* The C test apps' rank launcher (tests/apps/launch.h) on the CPU, with stand-in ranks
 * (launch_fake_rank.c): the unique-id hex, the arguments and environment each rank gets, the
 * rank wrapper of the GPU suite (scripts/rank-env.sh: NCCL host ids, a /dev/shm per host), and
 * every bound: a rank that hangs after or before its results, or after a peer failed, is stopped
 * with its process group and named; a signal to the launcher reaches the ranks.
 * Environment (from meson): LAUNCH_FAKE_RANK (the stand-in), LAUNCH_RANK_ENV (scripts/rank-env.sh).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/apps/launch.h"

/* ---- hex ---- */

Test(hex, round_trip_of_every_byte) {
  unsigned char in[256], out[256];
  for (int i = 0; i < 256; i++) in[i] = (unsigned char)(255 - i);
  char hex[513];
  cr_assert(symmpin_test_hex_encode(in, sizeof in, hex, sizeof hex));
  cr_assert_eq(strlen(hex), 512);
  char ends[7] = {hex[0], hex[1], hex[2], hex[3], hex[510], hex[511], 0};
  cr_assert_str_eq(ends, "fffe00");
  memset(out, 0, sizeof out);
  cr_assert(symmpin_test_hex_decode(hex, out, sizeof out));
  cr_assert_arr_eq(in, out, sizeof in);
}

Test(hex, upper_case_reads_the_same) {
  unsigned char b[3];
  cr_assert(symmpin_test_hex_decode("A0fF07", b, 3));
  cr_assert(b[0] == 0xa0 && b[1] == 0xff && b[2] == 0x07);
}

Test(hex, bad_input_is_refused_and_leaves_the_bytes) {
  unsigned char b[2] = {1, 2};
  cr_assert_not(symmpin_test_hex_decode("abc", b, 2));    /* short */
  cr_assert_not(symmpin_test_hex_decode("abcdef", b, 2)); /* long */
  cr_assert_not(symmpin_test_hex_decode("abcg", b, 2));   /* not hex */
  cr_assert_not(symmpin_test_hex_decode("ab d", b, 2));
  cr_assert_not(symmpin_test_hex_decode(NULL, b, 2));
  cr_assert(b[0] == 1 && b[1] == 2);
  char small[4];
  cr_assert_not(symmpin_test_hex_encode(b, 2, small, sizeof small)); /* needs 5 */
}

/* ---- launching the stand-in ---- */

typedef struct captured {
  char text[16384];
  size_t len;
} captured;

static void capture(const char *line, void *arg) {
  captured *c = arg;
  size_t n = strlen(line);
  if (c->len + n < sizeof c->text) {
    memcpy(c->text + c->len, line, n + 1);
    c->len += n;
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Whether a process is gone: no such pid, or a zombie (whoever reaps orphans here may be slow). */
static bool process_gone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64], stat_line[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return true;
  size_t n = fread(stat_line, 1, sizeof stat_line - 1, f);
  fclose(f);
  stat_line[n] = '\0';
  const char *paren = strrchr(stat_line, ')');
  return paren && paren[1] == ' ' && paren[2] == 'Z';
}

static void launcher(symmpin_test_launch *s) {
  const char *fake = getenv("LAUNCH_FAKE_RANK");
  cr_assert(fake, "LAUNCH_FAKE_RANK is not set (meson sets it)");
  cr_assert(symmpin_test_launch_init(s, "test_launch"));
  snprintf(s->exe, sizeof s->exe, "%s", fake);
}

/* Runs nranks stand-ins with these behaviours; out[r] gets rank r's output. */
static int run(symmpin_test_launch *s, int nranks, const char *behaviours, captured *out) {
  char *args[] = {(char *)behaviours, "--uid", "00ff", NULL};
  cr_assert(symmpin_test_launch_start(s, nranks, args));
  symmpin_test_launch_wait(s);
  for (int r = 0; r < nranks; r++) {
    memset(&out[r], 0, sizeof out[r]);
    symmpin_test_launch_collect(s, r, capture, &out[r]);
  }
  return symmpin_test_launch_exit_code(s, true);
}

/* The value of key= in a line of the stand-in ("-" when unset). */
static const char *field(const captured *c, const char *key, char *buf, size_t n) {
  const char *p = strstr(c->text, key);
  cr_assert(p, "no %s in: %s", key, c->text);
  p += strlen(key);
  size_t k = strcspn(p, " \n");
  snprintf(buf, n, "%.*s", (int)k, p);
  return buf;
}

Test(launch, every_rank_gets_its_number_arguments_and_environment) {
  unsetenv("APP_RANK_WRAPPER");
  unsetenv("NCCL_NVLS_ENABLE");
  setenv("RANK", "7", 1); /* the launcher's own rank variables never reach a rank */
  symmpin_test_launch s;
  launcher(&s);
  captured out[3];
  cr_assert_eq(run(&s, 3, "ok", out), 0);
  for (int r = 0; r < 3; r++) {
    char want[64], b[64];
    cr_assert_eq(s.rank[r].end, SYMMPIN_TEST_RANK_EXITED);
    snprintf(want, sizeof want, "%d", r);
    cr_assert_str_eq(field(&out[r], "RANK=", b, sizeof b), want);
    cr_assert_str_eq(field(&out[r], "LOCAL_RANK=", b, sizeof b), want);
    cr_assert_str_eq(field(&out[r], "WORLD_SIZE=", b, sizeof b), "3");
    cr_assert_str_eq(field(&out[r], "NVLS=", b, sizeof b), "0");
    snprintf(want, sizeof want, "ARGS=--uid 00ff --child %d\n", r);
    cr_assert(strstr(out[r].text, want), "rank %d: %s", r, out[r].text);
    cr_assert(strstr(out[r].text, SYMMPIN_TEST_LAUNCH_MARKER " rank="));
    cr_assert(access(s.rank[r].out_path, F_OK) != 0, "the output file is removed");
  }
}

Test(launch, the_rank_wrapper_gives_each_rank_its_nccl_host) {
  setenv("APP_RANK_WRAPPER", getenv("LAUNCH_RANK_ENV"), 1);
  setenv("RANK_ENV_NCCL_HOSTS", "4", 1);
  setenv("RANK_ENV_JOB", "job", 1);
  symmpin_test_launch s;
  launcher(&s);
  captured out[4];
  cr_assert_eq(run(&s, 4, "ok", out), 0);
  for (int r = 0; r < 4; r++) {
    char want[32], b[64];
    snprintf(want, sizeof want, "job-host%d", r);
    cr_assert_str_eq(field(&out[r], "NCCL_HOSTID=", b, sizeof b), want);
  }
  /* Two NCCL hosts of two ranks each: blocks of consecutive ranks. */
  setenv("RANK_ENV_NCCL_HOSTS", "2", 1);
  launcher(&s);
  cr_assert_eq(run(&s, 4, "ok", out), 0);
  const char *want[] = {"job-host0", "job-host0", "job-host1", "job-host1"};
  for (int r = 0; r < 4; r++) {
    char b[64];
    cr_assert_str_eq(field(&out[r], "NCCL_HOSTID=", b, sizeof b), want[r]);
  }
}

Test(launch, without_host_counts_the_wrapper_changes_nothing) {
  setenv("APP_RANK_WRAPPER", getenv("LAUNCH_RANK_ENV"), 1);
  unsetenv("RANK_ENV_NCCL_HOSTS");
  unsetenv("RANK_ENV_SHM_HOSTS");
  unsetenv("NCCL_HOSTID");
  symmpin_test_launch s;
  launcher(&s);
  captured out[2];
  cr_assert_eq(run(&s, 2, "ok", out), 0);
  char b[64];
  cr_assert_str_eq(field(&out[1], "NCCL_HOSTID=", b, sizeof b), "-");
  cr_assert(strstr(out[1].text, "ARGS=--uid 00ff --child 1\n"));
}

static bool can_unshare(void) {
  return geteuid() == 0 && system("unshare -m true 2>/dev/null") == 0;
}

static int count_entries(const char *dir, const char *prefix) {
  int n = 0;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) n += !strncmp(e->d_name, prefix, strlen(prefix));
  if (d) closedir(d);
  return n;
}

Test(launch, ranks_of_one_host_share_a_private_dev_shm) {
  if (!can_unshare()) cr_skip_test("needs root and unshare -m");
  char root[] = "/tmp/test_launch_shm.XXXXXX";
  cr_assert(mkdtemp(root));
  setenv("APP_RANK_WRAPPER", getenv("LAUNCH_RANK_ENV"), 1);
  setenv("RANK_ENV_SHM_HOSTS", "2", 1);
  setenv("RANK_ENV_SHM_ROOT", root, 1);
  unsetenv("RANK_ENV_NCCL_HOSTS");
  int real_before = count_entries("/dev/shm", "fake-rank-");
  struct stat real;
  cr_assert(stat("/dev/shm", &real) == 0);
  symmpin_test_launch s;
  launcher(&s);
  captured out[4];
  cr_assert_eq(run(&s, 4, "shmfile", out), 0);
  char shm[4][64];
  for (int r = 0; r < 4; r++) field(&out[r], "SHM=", shm[r], sizeof shm[r]);
  char real_id[64];
  snprintf(real_id, sizeof real_id, "%lu:%lu", (unsigned long)real.st_dev,
           (unsigned long)real.st_ino);
  cr_assert_str_eq(shm[0], shm[1]);
  cr_assert_str_eq(shm[2], shm[3]);
  cr_assert_str_neq(shm[0], shm[2]);
  cr_assert_str_neq(shm[0], real_id);
  cr_assert_str_neq(shm[2], real_id);
  char host[2][600];
  for (int h = 0; h < 2; h++) {
    snprintf(host[h], sizeof host[h], "%s/host%d", root, h);
    cr_assert_eq(count_entries(host[h], "fake-rank-"), 2, "host%d holds its ranks' files", h);
  }
  cr_assert_eq(count_entries("/dev/shm", "fake-rank-"), real_before,
               "nothing in the real /dev/shm");
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  cr_assert(system(cmd) == 0);
}

/* ---- bounds ---- */

Test(bounds, a_rank_that_hangs_after_its_results_is_stopped_and_named, .timeout = 30) {
  unsetenv("APP_RANK_WRAPPER");
  symmpin_test_launch s;
  launcher(&s);
  s.teardown_s = 0.5;
  s.timeout_s = 20;
  captured out[2];
  double t0 = now_s();
  cr_assert_eq(run(&s, 2, "ok,hang-after", out), 3);
  cr_assert_lt(now_s() - t0, 5.0);
  cr_assert_eq(s.rank[0].end, SYMMPIN_TEST_RANK_EXITED);
  cr_assert_eq(s.rank[1].end, SYMMPIN_TEST_RANK_HUNG_AFTER);
  cr_assert_eq(symmpin_test_launch_exit_code(&s, false), 1, "wrong results outweigh a hang");
}

Test(bounds, a_rank_without_results_at_the_limit_hung_before_them, .timeout = 30) {
  unsetenv("APP_RANK_WRAPPER");
  symmpin_test_launch s;
  launcher(&s);
  s.teardown_s = 10;
  s.timeout_s = 1;
  captured out[2];
  double t0 = now_s();
  cr_assert_eq(run(&s, 2, "ok,hang-before", out), 1);
  cr_assert_lt(now_s() - t0, 5.0);
  cr_assert_eq(s.rank[1].end, SYMMPIN_TEST_RANK_HUNG_BEFORE);
}

Test(bounds, ranks_still_running_after_a_peer_failed_are_stopped, .timeout = 30) {
  unsetenv("APP_RANK_WRAPPER");
  symmpin_test_launch s;
  launcher(&s);
  s.teardown_s = 0.5;
  s.timeout_s = 20;
  captured out[3];
  double t0 = now_s();
  cr_assert_eq(run(&s, 3, "ok,fail,hang-before", out), 1);
  cr_assert_lt(now_s() - t0, 5.0);
  cr_assert_eq(s.failed_rank, 1);
  cr_assert_eq(s.rank[2].end, SYMMPIN_TEST_RANK_PEER_FAILED);
  cr_assert_eq(s.rank[0].end, SYMMPIN_TEST_RANK_EXITED);
}

Test(bounds, stopping_a_rank_ends_its_whole_process_group, .timeout = 30) {
  unsetenv("APP_RANK_WRAPPER");
  symmpin_test_launch s;
  launcher(&s);
  s.teardown_s = 0.3;
  captured out[1];
  cr_assert_eq(run(&s, 1, "grandchild", out), 3);
  char b[32];
  pid_t g = (pid_t)atoi(field(&out[0], "GRANDCHILD pid=", b, sizeof b));
  cr_assert_gt(g, 0);
  bool gone = false;
  for (int i = 0; i < 100 && !gone; i++, usleep(10000)) gone = process_gone(g);
  cr_assert(gone, "the rank's child %d outlived it", (int)g);
}

Test(bounds, a_rank_that_ignores_sigterm_gets_sigkill, .timeout = 30) {
  unsetenv("APP_RANK_WRAPPER");
  symmpin_test_launch s;
  launcher(&s);
  s.teardown_s = 0.3;
  captured out[1];
  cr_assert_eq(run(&s, 1, "stubborn", out), 3);
  cr_assert(WIFSIGNALED(s.rank[0].status) && WTERMSIG(s.rank[0].status) == SIGKILL);
}

Test(bounds, a_signal_to_the_launcher_reaches_the_ranks, .timeout = 30) {
  unsetenv("APP_RANK_WRAPPER");
  int pipefd[2];
  cr_assert(pipe(pipefd) == 0);
  pid_t child = fork();
  if (child == 0) { /* the launcher: reports its ranks' pids, then waits for ever (600 s) */
    symmpin_test_launch s;
    launcher(&s);
    char *args[] = {"hang-before", NULL};
    if (!symmpin_test_launch_start(&s, 2, args)) _exit(9);
    pid_t pids[2] = {s.rank[0].pid, s.rank[1].pid};
    if (write(pipefd[1], pids, sizeof pids) != sizeof pids) _exit(9);
    symmpin_test_launch_wait(&s);
    _exit(0);
  }
  pid_t pids[2];
  cr_assert_eq(read(pipefd[0], pids, sizeof pids), (ssize_t)sizeof pids);
  usleep(200000);
  cr_assert(kill(child, SIGTERM) == 0);
  int st;
  cr_assert_eq(waitpid(child, &st, 0), child);
  cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "status 0x%x", st);
  for (int r = 0; r < 2; r++) {
    bool gone = false;
    for (int i = 0; i < 200 && !gone; i++, usleep(10000)) gone = process_gone(pids[r]);
    cr_assert(gone, "rank %d (pid %d) outlived its launcher", r, (int)pids[r]);
  }
}

Test(bounds, limits_come_from_the_environment) {
  symmpin_test_launch s;
  setenv("APP_RANK_TIMEOUT_S", "12.5", 1);
  setenv("APP_TEARDOWN_S", "3", 1);
  cr_assert(symmpin_test_launch_init(&s, "t"));
  cr_assert(s.timeout_s == 12.5 && s.teardown_s == 3);
  const char *bad[] = {"abc", "0", "-1", "5s", "1e9"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("APP_RANK_TIMEOUT_S", bad[i], 1);
    cr_assert_not(symmpin_test_launch_init(&s, "t"), "'%s' accepted", bad[i]);
  }
  unsetenv("APP_RANK_TIMEOUT_S");
  unsetenv("APP_TEARDOWN_S");
  cr_assert(symmpin_test_launch_init(&s, "t"));
  cr_assert(s.timeout_s == 600 && s.teardown_s == 60);
}
