/* The rank launcher the C test apps share (symmpin-app, symmpin-trust, symmpin-dp, symmpin-life):
 * one process per rank, as torchrun or mpirun would start them, with every wait bounded.
 *
 * Rank r is started as
 *     [$APP_RANK_WRAPPER words] <this program> <args...> --child r
 * in its own process group, with RANK, LOCAL_RANK and WORLD_SIZE in its environment (torchrun's
 * names, so one wrapper serves both launchers) and its stdout in a file of its own, which the
 * parent prints once the rank ended. The wrapper is how the GPU suite extends the launch: its own
 * NCCL host id or its own /dev/shm per rank (scripts/rank-env.sh), compute-sanitizer in front of
 * each rank. It must exec what it is given, so that the rank keeps the pid the parent waits for.
 * Words are split at blanks (no quoting).
 *
 * Ending (what scripts/suite_lib.sh classifies): a rank prints SYMMPIN_TEST_LAUNCH_MARKER
 * (symmpin_test_launch_results_done) once every result of its is printed, before its teardown.
 * - a rank still running APP_TEARDOWN_S (default 60) seconds after its marker "hung after its
 *   results" (a teardown hang: NCCL alone shows them in some configurations);
 * - a rank still running APP_RANK_TIMEOUT_S (default 600) seconds after the start hung before its
 *   results (or after them, if it printed the marker);
 * - once a rank failed, the others get APP_TEARDOWN_S to end, then they are stopped (as torchrun
 *   ends a job whose worker failed): their peer will never come.
 * A rank that is stopped gets SIGTERM, then SIGKILL, on its whole process group, and one line
 * "launch: rank R ..." says why. A SIGTERM, SIGINT or SIGHUP to the parent is passed on to the
 * ranks' process groups first, so a launcher killed by a time limit leaves no rank behind.
 *
 * The children's environment also gets NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
 * NVSHMEM_DISABLE_NVLS=1 where unset: multicast is never wanted by these tests, and on the lent
 * GPU machines it must stay off.
 *
 * Plain C (no CUDA, no NCCL): tested on the CPU by tests/apps/test_launch.c. */
#ifndef SYMMPIN_TESTS_APPS_LAUNCH_H
#define SYMMPIN_TESTS_APPS_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SYMMPIN_TEST_LAUNCH_MAX_RANKS 8
#define SYMMPIN_TEST_LAUNCH_MARKER "RESULTS-DONE"

/* Hex of n bytes into hex (2n + 1 bytes with the NUL); false if hex_size is too small. */
bool symmpin_test_hex_encode(const void *bytes, size_t n, char *hex, size_t hex_size);
/* The n bytes of a hex string of exactly 2n hex digits (either case); false otherwise (bytes
 * untouched). */
bool symmpin_test_hex_decode(const char *hex, void *bytes, size_t n);

/* How a rank ended (or why it was stopped). */
typedef enum symmpin_test_rank_end {
  SYMMPIN_TEST_RANK_RUNNING = 0,
  SYMMPIN_TEST_RANK_EXITED,      /* on its own: `status` says how */
  SYMMPIN_TEST_RANK_HUNG_AFTER,  /* stopped: still running after its marker (a teardown hang) */
  SYMMPIN_TEST_RANK_HUNG_BEFORE, /* stopped: still running at the time limit, no marker */
  SYMMPIN_TEST_RANK_PEER_FAILED, /* stopped: still running after another rank failed */
  SYMMPIN_TEST_RANK_NOT_STARTED, /* posix_spawn failed */
} symmpin_test_rank_end;

typedef struct symmpin_test_launch_rank {
  pid_t pid;
  char out_path[256];
  symmpin_test_rank_end end;
  int status;       /* waitpid's, once EXITED */
  double marker_ms; /* when its marker was seen (0: not yet) */
  double ended_ms;  /* when it ended or was stopped */
  bool unkillable;  /* still there 10 s after SIGKILL (left behind, said so) */
  /* the tail of what the marker search read, so a marker split between reads is found */
  char window[64];
  size_t window_len;
  long read_offset;
} symmpin_test_launch_rank;

typedef struct symmpin_test_launch {
  const char *prog;  /* the program's name, in messages and file names */
  char exe[4096];    /* what the ranks run: this program (/proc/self/exe); tests may set it */
  double timeout_s;  /* APP_RANK_TIMEOUT_S */
  double teardown_s; /* APP_TEARDOWN_S */
  int nranks;
  double start_ms;
  int failed_rank; /* the first rank that failed, -1 none */
  double failed_ms;
  symmpin_test_launch_rank rank[SYMMPIN_TEST_LAUNCH_MAX_RANKS];
} symmpin_test_launch;

/* Fills s from the environment (bounds) and /proc/self/exe; false (with a message) on an invalid
 * APP_RANK_TIMEOUT_S / APP_TEARDOWN_S or an unreadable /proc/self/exe. */
bool symmpin_test_launch_init(symmpin_test_launch *s, const char *prog);

/* Starts ranks 0..nranks-1 as described on top; args: the arguments after the program name,
 * NULL-terminated ("--child r" is added). False if any rank could not be started (those that were
 * are then stopped and waited for). At most SYMMPIN_TEST_LAUNCH_MAX_RANKS ranks. */
bool symmpin_test_launch_start(symmpin_test_launch *s, int nranks, char *const args[]);

/* Waits until every rank ended or was stopped (bounded as described on top). */
void symmpin_test_launch_wait(symmpin_test_launch *s);

/* Prints rank r's output on stdout, handing each line (with its '\n') to line_fn if not NULL,
 * removes the file, then prints the "launch: rank r ..." line if the rank did not end cleanly.
 * Returns whether it exited with status 0 on its own. */
bool symmpin_test_launch_collect(symmpin_test_launch *s, int r,
                                 void (*line_fn)(const char *line, void *arg), void *arg);

/* The launcher's exit status: 1 if !results_ok or any rank failed, hung before its results or was
 * stopped after a peer failed; 3 if the only trouble is ranks that hung after their results; 0. */
int symmpin_test_launch_exit_code(const symmpin_test_launch *s, bool results_ok);

/* For the rank: prints "RESULTS-DONE rank=R" and flushes stdout (a file: fully buffered), so the
 * launcher sees that every result line before it is written. Call it before the teardown. */
void symmpin_test_launch_results_done(int rank);

#ifdef __cplusplus
}
#endif

#endif
