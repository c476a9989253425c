/* The process's exit while a thread waits in an agreement (docs/design.md "End"): the waiting
 * thread holds its communicator's lock for up to SYMMPIN_TIMEOUT_MS per wait, and exit() may come
 * from that very thread (a SIGTERM handler that calls exit, as trainers install) or from another.
 * Either way the exit must end at once: it sets every abort word first, never waits on a lock its
 * own thread may hold, and gives other holders a short deadline.
 *
 * The real preload (events.c), engine (engine.c) and agreement on a real board, with the engine's
 * FAKES below them (tests/preload/engine_fakes.h: CUDA driver, pool, kernel launch; nothing runs
 * on a GPU). Rank 0 of a 2-rank communicator is driven by a thread of a child process; rank 1 only
 * opens the board and never posts, so rank 0's first agreement waits (timeout 60 s). The child's
 * destructor runs what the library's destructor runs (interpose/query.c: symmpin_preload_exit) and
 * reports how many pools are still there. The parent gives the child 1 s to exit once it says it
 * is about to, and kills it past that (so a hang fails the test, it does not hang the suite).
 * Plain C with TAP output: Criterion's own exit handlers have no business in these children. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agree/choice.h"
#include "common/commkey.h"
#include "preload/comm.h"
#include "preload/config.h"
#include "preload/events.h"
#include "preload/preload.h"
#include "symmem/board.h"
#include "engine_fakes.h"

#define HANDLE ((void *)0xc0)
#define EXIT_WITHIN_MS 1000
#define CALLS 400

typedef enum how {
  FROM_SIGNAL_IN_WAITER, /* the waiting thread's SIGTERM handler calls exit() */
  FROM_OTHER_THREAD,     /* the main thread calls exit() while the other one waits */
} how;

static int report_fd = -1;

/* What libsymmpin's destructor does at exit (interpose/query.c, which also sets the re-entrancy
 * guard: no wrappers here), then the pools that are still there. */
__attribute__((destructor)) static void child_at_exit(void) {
  if (report_fd < 0) return;
  symmpin_preload_exit();
  int live = fake_pools_live();
  ssize_t w = write(report_fd, &live, sizeof live);
  (void)w;
}

static void on_term(int sig) {
  (void)sig;
  exit(0); /* what many trainers' handlers do */
}

static _Atomic int progress;

static void *waiter_main(void *arg) {
  (void)arg;
  static float buf[256];
  for (int i = 0; i < CALLS; i++) {
    symmpin_coll_call c = {.send = buf,
                           .recv = buf,
                           .count = 256,
                           .dtype = 7 /* float32 */,
                           .op = 0,
                           .comm = HANDLE,
                           .stream = (void *)0x100,
                           .stack = 0xA};
    int rc = 0;
    if (!symmpin_event_collective(&c, &rc)) symmpin_event_collective_result(&c, 0);
    atomic_fetch_add(&progress, 1);
  }
  return NULL;
}

static uint64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* The child: returns only by exit(). */
static void child_main(how h, int ready_fd) {
  static symmpin_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.warmup = 8;
  cfg.max_bytes = 1 << 20;
  cfg.capture_bytes = 1 << 20;
  cfg.planner = SYMMPIN_PLAN_SHARED;
  cfg.choose = SYMMPIN_CHOOSE_STATIC;
  cfg.timeout_ms = 60000; /* a wait the exit must not sit out */
  cfg.stack_depth = 1;
  cfg.watch_ms = 20; /* the watch thread runs too, and must be stopped by the exit */
  symmpin_preload_test_init(&cfg);

  uint64_t r[2];
  if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) _exit(10);
  symmpin_comm_key key = symmpin_comm_key_of_bytes(r, sizeof r);
  symmpin_board *peer = NULL; /* rank 1: on this host, never posts */
  if (symmpin_board_open(key, 1, 2, &peer) != SYMMPIN_OK) _exit(11);
  symmpin_event_comm_init(SYMMPIN_COMM_INIT_RANK, HANDLE, key.hi, key.lo, 0, 2, 0, true, 0);
  symmpin_comm *c = symmpin_comm_find(HANDLE);
  if (!c) _exit(12);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigaction(SIGTERM, &sa, NULL);
  pthread_t waiter;
  if (pthread_create(&waiter, NULL, waiter_main, NULL) != 0) _exit(13);

  /* In the agreement's wait: its calls stopped advancing, and it holds the communicator's lock. */
  int last = -1;
  uint64_t still_since = now_ms(), give_up = now_ms() + 20000;
  for (;;) {
    if (now_ms() > give_up) _exit(14);
    int p = atomic_load(&progress);
    if (p >= CALLS) _exit(15); /* never waited */
    if (p != last) {
      last = p;
      still_since = now_ms();
    } else if (now_ms() - still_since > 300) {
      if (pthread_mutex_trylock(&c->lock) != 0) break;
      pthread_mutex_unlock(&c->lock);
    }
    usleep(10 * 1000);
  }
  char x = 1;
  if (write(ready_fd, &x, 1) != 1) _exit(16);
  if (h == FROM_SIGNAL_IN_WAITER)
    pthread_kill(waiter, SIGTERM);
  else
    exit(0);
  pause();
  _exit(17);
}

static int tests_run, tests_failed;

static void scenario(how h, const char *name, int want_pools_left) {
  int ready[2], report[2];
  if (pipe(ready) != 0 || pipe(report) != 0) {
    printf("not ok %d - %s: pipe: %s\n", ++tests_run, name, strerror(errno));
    tests_failed++;
    return;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    close(report[0]);
    report_fd = report[1];
    child_main(h, ready[1]);
  }
  close(ready[1]);
  close(report[1]);
  const char *fail = NULL;
  char why[160] = "";
  struct pollfd pf = {.fd = ready[0], .events = POLLIN};
  char x;
  if (poll(&pf, 1, 30000) != 1 || read(ready[0], &x, 1) != 1) {
    fail = "the child never got into the agreement's wait";
  } else {
    uint64_t t0 = now_ms();
    int status = 0;
    pid_t w = 0;
    while ((w = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() - t0 < EXIT_WITHIN_MS)
      usleep(5 * 1000);
    uint64_t took = now_ms() - t0;
    if (w == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      snprintf(why, sizeof why,
               "exit() did not end within %d ms (a lock held by the waiting "
               "thread, or a whole agreement timeout)",
               EXIT_WITHIN_MS);
      fail = why;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      snprintf(why, sizeof why, "the child ended with status %#x", status);
      fail = why;
    } else {
      int live = -1;
      if (read(report[0], &live, sizeof live) != (ssize_t)sizeof live) {
        fail = "the exit did not run the preload's exit";
      } else if (live != want_pools_left) {
        snprintf(why, sizeof why, "%d pool(s) left at exit, expected %d", live, want_pools_left);
        fail = why;
      } else {
        printf("# %s: exited %llu ms after exit() was called\n", name, (unsigned long long)took);
      }
    }
  }
  if (fail) waitpid(pid, NULL, WNOHANG);
  close(ready[0]);
  close(report[0]);
  tests_run++;
  if (fail) {
    tests_failed++;
    printf("not ok %d - %s: %s\n", tests_run, name, fail);
  } else {
    printf("ok %d - %s\n", tests_run, name);
  }
  fflush(stdout);
}

int main(void) {
  printf("1..2\n");
  /* The waiting thread cannot let go of its communicator: that one is left (its pool with it). */
  scenario(FROM_SIGNAL_IN_WAITER,
           "exit() from a SIGTERM handler on the thread that waits in an "
           "agreement ends at once",
           1);
  /* Another thread's exit: the waiter gives up within a wait slice and everything is released. */
  scenario(FROM_OTHER_THREAD,
           "exit() on another thread while one waits in an agreement ends at "
           "once and releases the communicator",
           0);
  return tests_failed ? 1 : 0;
}
