/* Running a test program as a child with a chosen environment (LD_PRELOAD, LD_LIBRARY_PATH,
 * SYMMPIN_*), capturing its output: shared by the interposition tests. */
#ifndef SYMMPIN_TESTS_CHILD_H
#define SYMMPIN_TESTS_CHILD_H

#include <stdbool.h>
#include <stddef.h>

typedef struct spawn_result {
  int status;      /* exit code, or 128 + signal */
  char out[65536]; /* stdout and stderr together (truncated) */
} spawn_result;

/* argv[0] is the program path. env: NULL-terminated "K=V" list added to a minimal environment
 * (PATH, LD_LIBRARY_PATH = the fakes, LD_PRELOAD = libsymmpin when preload). */
bool spawn_run(char *const argv[], const char *const env[], bool preload, spawn_result *r);

/* Paths from the test's environment (set by meson). */
const char *spawn_path(const char *var);

/* A fresh empty directory under /tmp. */
void spawn_tmpdir(char *out, size_t cap);
/* The first file in dir whose name starts with prefix (into out); false if none. */
bool spawn_find(const char *dir, const char *prefix, char *out, size_t cap);

#endif
