/* symmpin-bench's processes: the parent that spawns one copy of the program per rank and collects
 * them, how a rank ends on a fatal error, and the watchdog that ends a rank making no progress. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/gpu/bench.h"

extern char **environ;

#define CHILD_FD 100 /* where a child finds the pipe to report its counts on */

int bench_rank = -1;

void bench_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (bench_rank >= 0)
    fprintf(stderr, BENCH ": rank %d: FATAL: ", bench_rank);
  else
    fprintf(stderr, BENCH ": FATAL: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  fflush(stdout);
  exit(2);
}

double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------------------- watchdog */

/* The watchdog ends a rank whose main thread has not ticked for a while: a hang inside NCCL
 * (init, capture) or the driver is reported instead of waited on forever. */
static _Atomic(const char *) g_phase = "start";
static _Atomic size_t g_phase_bytes;
static _Atomic double g_tick;
static unsigned g_watchdog_s = 180;

void bench_tick(const char *phase, size_t bytes) {
  atomic_store(&g_phase, phase);
  atomic_store(&g_phase_bytes, bytes);
  atomic_store(&g_tick, bench_now());
}

const char *bench_phase(void) { return atomic_load(&g_phase); }

static void *watchdog_main(void *arg) {
  (void)arg;
  for (;;) {
    sleep(1);
    double idle = bench_now() - atomic_load(&g_tick);
    if (idle > g_watchdog_s) {
      fprintf(stderr, BENCH ": rank %d: no progress for %.0f s in %s (%zu bytes); giving up\n",
              bench_rank, idle, atomic_load(&g_phase), atomic_load(&g_phase_bytes));
      fflush(stdout);
      _exit(3);
    }
  }
  return NULL;
}

void bench_watchdog_start(unsigned seconds) {
  g_watchdog_s = seconds;
  bench_tick("start", 0);
  pthread_t t;
  if (pthread_create(&t, NULL, watchdog_main, NULL) != 0)
    bench_die("pthread_create (watchdog) failed");
  pthread_detach(t);
}

/* ---------------------------------------------------------------------------- the parent */

void bench_child_report(int rank, int passed, int failed) {
  dprintf(CHILD_FD, "%d %d %d\n", rank, passed, failed);
}

int bench_visible_ranks(const opts *o) {
  int ngpus = 0;
  cudaError_t e = cudaGetDeviceCount(&ngpus);
  if (e != cudaSuccess || ngpus < 1) {
    fprintf(stderr, BENCH ": no CUDA device (%s)\n", cudaGetErrorString(e));
    return 0;
  }
  int n = o->nranks ? o->nranks : (ngpus < SYMMPIN_KERNEL_MAX_RANKS ? ngpus : SYMMPIN_KERNEL_MAX_RANKS);
  if (n > ngpus) {
    fprintf(stderr, BENCH ": --ranks %d needs %d GPUs, %d visible (NCCL wants one GPU per rank)\n",
            n, n, ngpus);
    return 0;
  }
  return n;
}

/* The parent never creates a CUDA context (it counts devices and makes NCCL's unique id, whose
 * bootstrap root lives here until the children connect), spawns one copy of this program per
 * rank, collects their counts and prints the last line. A rank that dies takes the others down
 * after a grace period instead of leaving them waiting. */
int bench_run_parent(const opts *o, int argc, char **argv) {
  int n = bench_visible_ranks(o);
  if (!n) return bench_final_line(0, 1);
  ncclUniqueId id;
  SYMMPIN_TEST_NCCL(ncclGetUniqueId(&id));
  char hex[2 * sizeof(id) + 1];
  for (size_t i = 0; i < sizeof(id); i++)
    snprintf(hex + 2 * i, 3, "%02x", ((unsigned char *)&id)[i]);
  uint64_t seed = o->seed; /* main() drew one if none was given: every child gets the same */
  char nstr[16], seedstr[32];
  snprintf(nstr, sizeof(nstr), "%d", n);
  snprintf(seedstr, sizeof(seedstr), "0x%016" PRIx64, seed);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) bench_die("pipe2: %s", strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], CHILD_FD); /* dup2 clears close-on-exec */
  char **cargv = calloc((size_t)argc + 12, sizeof(char *));
  if (!cargv) bench_die("out of host memory");
  pid_t pids[SYMMPIN_KERNEL_MAX_RANKS];
  int status[SYMMPIN_KERNEL_MAX_RANKS];
  bool done[SYMMPIN_KERNEL_MAX_RANKS] = {0};
  int spawned = 0;
  for (int r = 0; r < n; r++) {
    char rstr[16];
    snprintf(rstr, sizeof(rstr), "%d", r);
    /* The user's options, then what only the parent knows (later options win). */
    int k = 0;
    cargv[k++] = argv[0];
    for (int i = 1; i < argc; i++) cargv[k++] = argv[i];
    cargv[k++] = "--ranks";
    cargv[k++] = nstr;
    cargv[k++] = "--seed";
    cargv[k++] = seedstr;
    cargv[k++] = "--child";
    cargv[k++] = rstr;
    cargv[k++] = "--nccl-id";
    cargv[k++] = hex;
    cargv[k] = NULL;
    int e = posix_spawn(&pids[r], "/proc/self/exe", &fa, NULL, cargv, environ);
    if (e != 0) {
      fprintf(stderr, BENCH ": posix_spawn of rank %d: %s\n", r, strerror(e));
      break;
    }
    spawned++;
  }
  posix_spawn_file_actions_destroy(&fa);
  free(cargv);
  close(fds[1]);

  int failed = spawned < n ? 1 : 0, passed = 0, left = spawned;
  double first_bad = 0;
  bool killed = false;
  while (left > 0) {
    int st = 0;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      for (int r = 0; r < spawned; r++) {
        if (pids[r] != p) continue;
        done[r] = true;
        status[r] = st;
        left--;
        bool clean = WIFEXITED(st) && WEXITSTATUS(st) <= 1;
        if (!clean && first_bad == 0) first_bad = bench_now();
      }
      continue;
    }
    if (p < 0 && errno != EINTR) break;
    if (spawned < n && first_bad == 0) first_bad = bench_now(); /* the missing rank never comes */
    if (first_bad > 0 && !killed && bench_now() - first_bad > 20) {
      for (int r = 0; r < spawned; r++) {
        if (done[r]) continue;
        fprintf(stderr,
                BENCH ": rank %d still running 20 s after another rank failed: killing it\n", r);
        kill(pids[r], SIGKILL);
      }
      killed = true;
    }
    usleep(50 * 1000);
  }
  bool seen[SYMMPIN_KERNEL_MAX_RANKS] = {0};
  FILE *in = fdopen(fds[0], "r");
  int rr, pp, ff;
  while (in && fscanf(in, "%d %d %d", &rr, &pp, &ff) == 3) {
    if (rr >= 0 && rr < n) seen[rr] = true;
    passed += pp;
    failed += ff;
  }
  if (in) fclose(in);
  for (int r = 0; r < spawned; r++) {
    int st = status[r];
    if (!done[r]) {
      fprintf(stderr, BENCH ": rank %d: lost track of it\n", r);
      failed++;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) > 1 || !seen[r]) {
      if (WIFSIGNALED(st))
        fprintf(stderr, BENCH ": rank %d ended by signal %d\n", r, WTERMSIG(st));
      else
        fprintf(stderr, BENCH ": rank %d ended with exit status %d%s\n", r,
                WIFEXITED(st) ? WEXITSTATUS(st) : -1, seen[r] ? "" : " and reported nothing");
      failed++;
    }
  }
  return bench_final_line(passed, failed);
}
