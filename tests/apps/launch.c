/* The C test apps' rank launcher (launch.h): start, bound, stop and collect the ranks. */
#include "tests/apps/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define POLL_US 20000
#define TERM_GRACE_MS 2000.0 /* SIGTERM to SIGKILL */
#define KILL_GRACE_MS 10000.0
#define MAX_WRAPPER_WORDS 32
#define MAX_ARGS 64

/* ---- hex ---- */

bool symmpin_test_hex_encode(const void *bytes, size_t n, char *hex, size_t hex_size) {
  static const char digits[] = "0123456789abcdef";
  if (hex_size < 2 * n + 1) return false;
  const unsigned char *b = bytes;
  for (size_t i = 0; i < n; i++) {
    hex[2 * i] = digits[b[i] >> 4];
    hex[2 * i + 1] = digits[b[i] & 15];
  }
  hex[2 * n] = '\0';
  return true;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool symmpin_test_hex_decode(const char *hex, void *bytes, size_t n) {
  if (!hex || strlen(hex) != 2 * n) return false;
  for (size_t i = 0; i < 2 * n; i++)
    if (hex_digit(hex[i]) < 0) return false;
  unsigned char *b = bytes;
  for (size_t i = 0; i < n; i++)
    b[i] = (unsigned char)(hex_digit(hex[2 * i]) << 4 | hex_digit(hex[2 * i + 1]));
  return true;
}

/* ---- time and bounds ---- */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool seconds_of_env(const char *name, double def, double *out) {
  const char *v = getenv(name);
  *out = def;
  if (!v || !*v) return true;
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (errno || *end || !(d > 0) || d > 86400) {
    fprintf(stderr, "launch: %s='%s' is not a number of seconds in (0, 86400]\n", name, v);
    return false;
  }
  *out = d;
  return true;
}

bool symmpin_test_launch_init(symmpin_test_launch *s, const char *prog) {
  memset(s, 0, sizeof *s);
  s->prog = prog;
  s->failed_rank = -1;
  ssize_t n = readlink("/proc/self/exe", s->exe, sizeof s->exe - 1);
  if (n <= 0) {
    fprintf(stderr, "launch: cannot read /proc/self/exe: %s\n", strerror(errno));
    return false;
  }
  s->exe[n] = '\0';
  return seconds_of_env("APP_RANK_TIMEOUT_S", 600, &s->timeout_s) &&
         seconds_of_env("APP_TEARDOWN_S", 60, &s->teardown_s);
}

/* ---- the parent's signals reach the ranks ---- */

static symmpin_test_launch *volatile active; /* the launch whose ranks a signal must reach */

static void pass_signal_on(int sig) {
  symmpin_test_launch *s = active;
  for (int r = 0; s && r < s->nranks; r++)
    if (s->rank[r].end == SYMMPIN_TEST_RANK_RUNNING && s->rank[r].pid > 0)
      kill(-s->rank[r].pid, SIGTERM);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void catch_signals(symmpin_test_launch *s) {
  active = s;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = pass_signal_on;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

static void release_signals(void) {
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  active = NULL;
}

/* ---- ending a rank ---- */

/* Whether rank r has ended; if so, whatever else is left in its process group is killed (the
 * leader is not reaped yet, so its process group id cannot name anyone else), then it is reaped. */
static bool reap(symmpin_test_launch_rank *rk) {
  siginfo_t info;
  memset(&info, 0, sizeof info);
  if (waitid(P_PID, rk->pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    if (errno == EINTR) return false;
    rk->status = -1; /* not our child any more: nothing to wait for */
    return true;
  }
  if (info.si_pid != rk->pid) return false;
  kill(-rk->pid, SIGKILL);
  while (waitpid(rk->pid, &rk->status, 0) < 0 && errno == EINTR) {
  }
  return true;
}

static bool reap_within(symmpin_test_launch_rank *rk, double ms) {
  double t0 = now_ms();
  for (;;) {
    if (reap(rk)) return true;
    if (now_ms() - t0 > ms) return false;
    usleep(10000);
  }
}

static void stop_rank(symmpin_test_launch_rank *rk, symmpin_test_rank_end why) {
  rk->end = why;
  kill(-rk->pid, SIGTERM);
  if (!reap_within(rk, TERM_GRACE_MS)) {
    kill(-rk->pid, SIGKILL);
    rk->unkillable = !reap_within(rk, KILL_GRACE_MS);
  }
  rk->ended_ms = now_ms();
}

static bool failed_exit(const symmpin_test_launch_rank *rk) {
  return rk->status == -1 || !WIFEXITED(rk->status) || WEXITSTATUS(rk->status) != 0;
}

/* ---- starting ---- */

/* environ without RANK, LOCAL_RANK and WORLD_SIZE, then rank r's own; free with free(). */
static char **rank_environment(int r, int nranks, char (*own)[32]) {
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + 4, sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "RANK=", 5) && strncmp(environ[i], "LOCAL_RANK=", 11) &&
        strncmp(environ[i], "WORLD_SIZE=", 11))
      env[k++] = environ[i];
  snprintf(own[0], sizeof own[0], "RANK=%d", r);
  snprintf(own[1], sizeof own[1], "LOCAL_RANK=%d", r);
  snprintf(own[2], sizeof own[2], "WORLD_SIZE=%d", nranks);
  for (int j = 0; j < 3; j++) env[k++] = own[j];
  env[k] = NULL;
  return env;
}

/* Splits APP_RANK_WRAPPER into words (in a copy, *buf, to free); returns how many. */
static int wrapper_words(char **words, char **buf) {
  const char *w = getenv("APP_RANK_WRAPPER");
  *buf = NULL;
  if (!w || !*w) return 0;
  *buf = strdup(w);
  if (!*buf) return 0;
  int n = 0;
  char *save = NULL;
  for (char *t = strtok_r(*buf, " \t", &save); t && n < MAX_WRAPPER_WORDS;
       t = strtok_r(NULL, " \t", &save))
    words[n++] = t;
  return n;
}

static bool start_rank(symmpin_test_launch *s, int r, char *const args[], char **words,
                       int nwords) {
  symmpin_test_launch_rank *rk = &s->rank[r];
  const char *tmp = getenv("TMPDIR");
  snprintf(rk->out_path, sizeof rk->out_path, "%s/%s.%d.%d.out", tmp && *tmp ? tmp : "/tmp",
           s->prog, (int)getpid(), r);
  char rank_arg[16];
  snprintf(rank_arg, sizeof rank_arg, "%d", r);
  char *argv[MAX_WRAPPER_WORDS + MAX_ARGS + 4];
  int a = 0;
  for (int i = 0; i < nwords; i++) argv[a++] = words[i];
  argv[a++] = s->exe;
  for (int i = 0; args[i]; i++) {
    if (i == MAX_ARGS) {
      fprintf(stderr, "launch: more than %d arguments\n", MAX_ARGS);
      return false;
    }
    argv[a++] = args[i];
  }
  argv[a++] = "--child";
  argv[a++] = rank_arg;
  argv[a] = NULL;
  char own[3][32];
  char **env = rank_environment(r, s->nranks, own);
  if (!env) return false;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, rk->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0); /* its own group: stopping it reaches its children too */
  int rc = nwords ? posix_spawnp(&rk->pid, argv[0], &fa, &attr, argv, env)
                  : posix_spawn(&rk->pid, argv[0], &fa, &attr, argv, env);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  if (rc != 0) {
    fprintf(stderr, "launch: rank %d: cannot start %s: %s\n", r, argv[0], strerror(rc));
    rk->pid = 0;
    rk->end = SYMMPIN_TEST_RANK_NOT_STARTED;
    return false;
  }
  rk->end = SYMMPIN_TEST_RANK_RUNNING;
  memcpy(rk->window, "\n", 1); /* the first line starts after a virtual newline */
  rk->window_len = 1;
  return true;
}

bool symmpin_test_launch_start(symmpin_test_launch *s, int nranks, char *const args[]) {
  if (nranks < 1 || nranks > SYMMPIN_TEST_LAUNCH_MAX_RANKS) {
    fprintf(stderr, "launch: %d ranks (1..%d)\n", nranks, SYMMPIN_TEST_LAUNCH_MAX_RANKS);
    return false;
  }
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 0);
  setenv("NVSHMEM_DISABLE_NVLS", "1", 0);
  s->nranks = nranks;
  s->start_ms = now_ms();
  char *words[MAX_WRAPPER_WORDS], *buf;
  int nwords = wrapper_words(words, &buf);
  if (nwords) {
    printf("launch: %d ranks start as: %s %s ...\n", nranks, getenv("APP_RANK_WRAPPER"), s->exe);
    fflush(stdout);
  }
  catch_signals(s);
  bool ok = true;
  for (int r = 0; r < nranks && ok; r++) ok = start_rank(s, r, args, words, nwords);
  free(buf);
  if (!ok) {
    for (int r = 0; r < nranks; r++)
      if (s->rank[r].end == SYMMPIN_TEST_RANK_RUNNING)
        stop_rank(&s->rank[r], SYMMPIN_TEST_RANK_PEER_FAILED);
      else if (s->rank[r].pid == 0)
        s->rank[r].end = SYMMPIN_TEST_RANK_NOT_STARTED;
    release_signals();
  }
  return ok;
}

/* ---- waiting ---- */

/* Whether rank r's output now holds a line that starts with the marker (reads what is new). */
static bool marker_seen(symmpin_test_launch_rank *rk) {
  static const char needle[] = "\n" SYMMPIN_TEST_LAUNCH_MARKER;
  int fd = open(rk->out_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool seen = false;
  char chunk[4096];
  ssize_t n;
  if (lseek(fd, rk->read_offset, SEEK_SET) == rk->read_offset)
    while (!seen && (n = read(fd, chunk, sizeof chunk)) > 0) {
      rk->read_offset += n;
      for (ssize_t i = 0; i < n && !seen; i++) {
        if (rk->window_len == sizeof rk->window) { /* keep the last bytes: a marker may span */
          memmove(rk->window, rk->window + sizeof rk->window / 2, sizeof rk->window / 2);
          rk->window_len = sizeof rk->window / 2;
        }
        rk->window[rk->window_len++] = chunk[i];
        seen =
            rk->window_len >= sizeof needle - 1 &&
            !memcmp(rk->window + rk->window_len - (sizeof needle - 1), needle, sizeof needle - 1);
      }
    }
  close(fd);
  return seen;
}

void symmpin_test_launch_wait(symmpin_test_launch *s) {
  for (;;) {
    int running = 0;
    for (int r = 0; r < s->nranks; r++) {
      symmpin_test_launch_rank *rk = &s->rank[r];
      if (rk->end != SYMMPIN_TEST_RANK_RUNNING) continue;
      double now = now_ms();
      if (reap(rk)) {
        rk->end = SYMMPIN_TEST_RANK_EXITED;
        rk->ended_ms = now;
        if (failed_exit(rk) && s->failed_rank < 0) {
          s->failed_rank = r;
          s->failed_ms = now;
        }
        continue;
      }
      if (!rk->marker_ms && marker_seen(rk)) rk->marker_ms = now;
      double teardown = s->teardown_s * 1e3;
      if (rk->marker_ms && now - rk->marker_ms > teardown)
        stop_rank(rk, SYMMPIN_TEST_RANK_HUNG_AFTER);
      else if (now - s->start_ms > s->timeout_s * 1e3)
        stop_rank(rk, rk->marker_ms ? SYMMPIN_TEST_RANK_HUNG_AFTER : SYMMPIN_TEST_RANK_HUNG_BEFORE);
      else if (s->failed_rank >= 0 && now - s->failed_ms > teardown)
        stop_rank(rk, SYMMPIN_TEST_RANK_PEER_FAILED);
      else
        running++;
    }
    if (!running) break;
    usleep(POLL_US);
  }
  release_signals();
}

/* ---- collecting ---- */

bool symmpin_test_launch_collect(symmpin_test_launch *s, int r,
                                 void (*line_fn)(const char *line, void *arg), void *arg) {
  symmpin_test_launch_rank *rk = &s->rank[r];
  FILE *f = rk->end == SYMMPIN_TEST_RANK_NOT_STARTED ? NULL : fopen(rk->out_path, "r");
  char line[4096];
  while (f && fgets(line, sizeof line, f)) {
    fputs(line, stdout);
    if (line_fn) line_fn(line, arg);
  }
  if (f) {
    fclose(f);
    unlink(rk->out_path);
  }
  const char *left = rk->unkillable ? " (still there after SIGKILL: left behind)" : "";
  switch (rk->end) {
  case SYMMPIN_TEST_RANK_EXITED:
    if (rk->status == -1)
      printf("launch: rank %d exited abnormally (its status was lost)\n", r);
    else if (WIFSIGNALED(rk->status))
      printf("launch: rank %d exited abnormally (signal %d, %s)\n", r, WTERMSIG(rk->status),
             strsignal(WTERMSIG(rk->status)));
    else if (WEXITSTATUS(rk->status) != 0)
      printf("launch: rank %d exited abnormally (exit status %d)\n", r, WEXITSTATUS(rk->status));
    break;
  case SYMMPIN_TEST_RANK_HUNG_AFTER:
    printf("launch: rank %d hung after its results: stopped %.0f s after them%s\n", r,
           (rk->ended_ms - rk->marker_ms) / 1e3, left);
    break;
  case SYMMPIN_TEST_RANK_HUNG_BEFORE:
    printf("launch: rank %d hung before its results: stopped %.0f s after the start%s\n", r,
           (rk->ended_ms - s->start_ms) / 1e3, left);
    break;
  case SYMMPIN_TEST_RANK_PEER_FAILED:
    printf("launch: rank %d stopped: still running %.0f s after rank %d failed%s\n", r,
           (rk->ended_ms - s->failed_ms) / 1e3, s->failed_rank, left);
    break;
  case SYMMPIN_TEST_RANK_NOT_STARTED: printf("launch: rank %d could not be started\n", r); break;
  case SYMMPIN_TEST_RANK_RUNNING: printf("launch: rank %d was never waited for\n", r); break;
  }
  fflush(stdout);
  return rk->end == SYMMPIN_TEST_RANK_EXITED && !failed_exit(rk);
}

int symmpin_test_launch_exit_code(const symmpin_test_launch *s, bool results_ok) {
  bool hung_after = false, bad = !results_ok;
  for (int r = 0; r < s->nranks; r++) {
    const symmpin_test_launch_rank *rk = &s->rank[r];
    if (rk->end == SYMMPIN_TEST_RANK_HUNG_AFTER)
      hung_after = true;
    else if (rk->end != SYMMPIN_TEST_RANK_EXITED || failed_exit(rk))
      bad = true;
  }
  return bad ? 1 : hung_after ? 3 : 0;
}

void symmpin_test_launch_results_done(int rank) {
  printf(SYMMPIN_TEST_LAUNCH_MARKER " rank=%d\n", rank);
  fflush(stdout);
}
