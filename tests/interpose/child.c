/* Child processes for the interposition tests (spawn.h). */
#include "child.h"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *spawn_path(const char *var) {
  const char *v = getenv(var);
  if (!v) {
    fprintf(stderr, "test environment lacks %s\n", var);
    abort();
  }
  return v;
}

bool spawn_run(char *const argv[], const char *const env[], bool preload, spawn_result *r) {
  char path_var[4096], ld_path[4096], ld_preload[4096];
  snprintf(path_var, sizeof path_var, "PATH=%s", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
  snprintf(ld_path, sizeof ld_path, "LD_LIBRARY_PATH=%s", spawn_path("SYMMPIN_TEST_FAKES"));
  /* SYMMPIN_TEST_OLD_DRIVER=1 in env: the FAKE pre-CUDA-12.0 libcuda.so.1 comes first. */
  for (int i = 0; env && env[i]; i++)
    if (strcmp(env[i], "SYMMPIN_TEST_OLD_DRIVER=1") == 0)
      snprintf(ld_path, sizeof ld_path, "LD_LIBRARY_PATH=%s:%s",
               spawn_path("SYMMPIN_TEST_FAKES_OLD_DRIVER"), spawn_path("SYMMPIN_TEST_FAKES"));
  snprintf(ld_preload, sizeof ld_preload, "LD_PRELOAD=%s", spawn_path("SYMMPIN_TEST_LIB"));
  const char *envp[64];
  int n = 0;
  envp[n++] = path_var;
  envp[n++] = ld_path;
  if (preload) envp[n++] = ld_preload;
  for (int i = 0; env && env[i] && n < 63; i++) envp[n++] = env[i];
  envp[n] = NULL;

  char out_path[] = "/tmp/symmpin-out-XXXXXX";
  int fd = mkstemp(out_path);
  if (fd < 0) return false;
  unlink(out_path);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  posix_spawn_file_actions_adddup2(&fa, fd, 2);
  pid_t pid;
  int e = posix_spawn(&pid, argv[0], &fa, NULL, argv, (char *const *)envp);
  posix_spawn_file_actions_destroy(&fa);
  if (e != 0) {
    close(fd);
    return false;
  }
  int st;
  if (waitpid(pid, &st, 0) < 0) {
    close(fd);
    return false;
  }
  r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  ssize_t got = pread(fd, r->out, sizeof r->out - 1, 0);
  r->out[got > 0 ? got : 0] = '\0';
  close(fd);
  return true;
}

void spawn_tmpdir(char *out, size_t cap) {
  snprintf(out, cap, "/tmp/symmpin-test-XXXXXX");
  if (!mkdtemp(out)) out[0] = '\0';
}

bool spawn_find(const char *dir, const char *prefix, char *out, size_t cap) {
  DIR *d = opendir(dir);
  if (!d) return false;
  struct dirent *de;
  bool found = false;
  while ((de = readdir(d)))
    if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
      snprintf(out, cap, "%s/%s", dir, de->d_name);
      found = true;
      break;
    }
  closedir(d);
  return found;
}
