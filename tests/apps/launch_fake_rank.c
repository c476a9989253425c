/* A stand-in rank for tests/apps/test_launch.c: what spawn.h starts, without CUDA or NCCL. It
 * prints what the launcher gave it (its arguments and environment, the /dev/shm it sees), then
 * behaves as told, so the launcher's bounds and classification can be checked on the CPU.
 *
 *   launch_fake_rank BEHAVIOURS [ARG...] --child R
 * BEHAVIOURS: comma-separated, one per rank (the last repeats): ok (marker, exit 0), fail (exit 1,
 * no marker), hang-after (marker, then sleep), hang-before (sleep, no marker), grandchild (a child
 * process that sleeps, its pid printed, then hang-after), stubborn (ignores SIGTERM, then
 * hang-after), shmfile (creates /dev/shm/fake-rank-R, marker, exit 0). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/apps/launch.h"

static const char *env_or(const char *name) {
  const char *v = getenv(name);
  return v ? v : "-";
}

int main(int argc, char **argv) {
  if (argc < 4 || strcmp(argv[argc - 2], "--child")) {
    fprintf(stderr, "usage: launch_fake_rank BEHAVIOURS [ARG...] --child R\n");
    return 2;
  }
  int rank = atoi(argv[argc - 1]);
  char behaviours[256], *what = NULL, *save = NULL;
  snprintf(behaviours, sizeof behaviours, "%s", argv[1]);
  int i = 0;
  for (char *t = strtok_r(behaviours, ",", &save); t; t = strtok_r(NULL, ",", &save), i++)
    if (i <= rank) what = t;
  struct stat shm;
  if (stat("/dev/shm", &shm) != 0) memset(&shm, 0, sizeof shm);
  printf(
      "FAKE rank=%d RANK=%s LOCAL_RANK=%s WORLD_SIZE=%s NCCL_HOSTID=%s NVLS=%s SHM=%lu:%lu ARGS=",
      rank, env_or("RANK"), env_or("LOCAL_RANK"), env_or("WORLD_SIZE"), env_or("NCCL_HOSTID"),
      env_or("NCCL_NVLS_ENABLE"), (unsigned long)shm.st_dev, (unsigned long)shm.st_ino);
  for (int a = 2; a < argc; a++) printf("%s%s", a > 2 ? " " : "", argv[a]);
  printf("\n");
  fflush(stdout);
  if (!strcmp(what, "fail")) return 1;
  if (!strcmp(what, "hang-before")) {
    sleep(60);
    return 0;
  }
  if (!strcmp(what, "grandchild")) {
    pid_t p = fork();
    if (p == 0) {
      sleep(60);
      _exit(0);
    }
    printf("GRANDCHILD pid=%d\n", (int)p);
  }
  if (!strcmp(what, "stubborn")) signal(SIGTERM, SIG_IGN);
  if (!strcmp(what, "shmfile")) {
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/fake-rank-%d", rank);
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    fclose(f);
  }
  symmpin_test_launch_results_done(rank);
  if (!strcmp(what, "ok") || !strcmp(what, "shmfile")) return 0;
  sleep(60); /* hang-after, grandchild, stubborn */
  return 0;
}
