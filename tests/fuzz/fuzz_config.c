/* libFuzzer target: SYMMPIN_* settings through the configuration (preload/config.h) and the file
 * patterns they name (common/path.h).
 *
 * The input is an environment: "NAME=value" lines (a value ends at the line's end or at a NUL, as
 * in a real environment; the last line of a name wins, as getenv's first match would for a
 * program that set it last). symmpin_config_read runs over it with the logger at INFO into
 * /dev/null (every set value is logged, every bad one warned about). Then, checked:
 *   - every number lies in its variable's [min, max], every choice indexes its list, every string
 *     is NUL-terminated inside its field, every boolean is 0 or 1;
 *   - a value the configuration accepted parses alike through the public parsers, a plain number
 *     as a size too, with the same value;
 *   - each file pattern (SYMMPIN_TRACE, SYMMPIN_STATS_FILE, SYMMPIN_DEBUG_FILE) expands into
 *     buffers of several sizes without writing past them, NUL-terminated when it succeeds, and
 *     never succeeds into a buffer smaller than a larger buffer's result. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"
#include "common/path.h"
#include "preload/config.h"

#define LINES_MAX 64

typedef struct env {
  const char *name[LINES_MAX];
  const char *value[LINES_MAX];
  int n;
} env;

static const char *env_get(const char *name, void *arg) {
  const env *e = arg;
  for (int i = e->n - 1; i >= 0; i--)
    if (strcmp(e->name[i], name) == 0) return e->value[i];
  return NULL;
}

static void fail(const char *what, const char *name, const char *value) {
  fprintf(stderr, "fuzz_config: %s: %s=\"%s\"\n", what, name, value ? value : "(unset)");
  abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (fd < 0) abort();
  symmpin_log_configure(SYMMPIN_LOG_INFO, fd);
  return 0;
}

static void check_pattern(const char *name, const char *pattern) {
  static const size_t caps[] = {1, 2, 7, 64, SYMMPIN_CONFIG_PATH_MAX, 4 * SYMMPIN_CONFIG_PATH_MAX};
  static const int ranks[] = {-1, 0, 2147483647};
  size_t longest_ok = 0;
  bool any_ok = false;
  for (size_t r = 0; r < sizeof ranks / sizeof ranks[0]; r++) {
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
      /* A guard byte after the buffer: the expansion must never reach it. */
      char *buf = malloc(caps[c] + 1), why[160];
      if (!buf) abort();
      buf[caps[c]] = 0x5a;
      symmpin_status st = symmpin_path_expand(pattern, ranks[r], 2147483647, "host-name", buf,
                                              caps[c], why, sizeof why);
      if (buf[caps[c]] != 0x5a) fail("path expansion wrote past its buffer", name, pattern);
      if (st == SYMMPIN_OK) {
        size_t len = strnlen(buf, caps[c]);
        if (len >= caps[c]) fail("an expanded path is not NUL-terminated", name, pattern);
        if (r == 0) {
          if (any_ok && len != longest_ok) fail("two expansions of one pattern differ", name, pattern);
          any_ok = true;
          longest_ok = len;
        }
      } else if (r == 0 && any_ok) {
        fail("a pattern that fit a smaller buffer does not fit a larger one", name, pattern);
      }
      free(buf);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) abort();
  memcpy(text, data, size);
  text[size] = '\0';
  env e = {.n = 0};
  for (char *line = text; line && *line && e.n < LINES_MAX;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    char *eq = strchr(line, '=');
    if (eq && eq != line) {
      *eq = '\0';
      e.name[e.n] = line;
      e.value[e.n] = eq + 1;
      e.n++;
    }
    line = nl ? nl + 1 : NULL;
  }

  symmpin_config cfg;
  memset(&cfg, 0xa5, sizeof cfg);
  symmpin_config_read(env_get, &e, &cfg);

  size_t nvars;
  const symmpin_config_var *vars = symmpin_config_vars(&nvars);
  for (size_t i = 0; i < nvars; i++) {
    const symmpin_config_var *v = &vars[i];
    const char *field = (const char *)&cfg + v->offset;
    const char *set = env_get(v->name, &e);
    switch (v->type) {
    case SYMMPIN_CONFIG_BOOL: {
      unsigned char b;
      memcpy(&b, field, 1);
      if (b > 1) fail("a boolean is neither 0 nor 1", v->name, set);
      bool p;
      if (set && symmpin_config_parse_bool(set, &p) && p != (b == 1))
        fail("a valid boolean was not taken", v->name, set);
      break;
    }
    case SYMMPIN_CONFIG_UINT:
    case SYMMPIN_CONFIG_SIZE: {
      uint64_t u;
      if (v->offset == offsetof(symmpin_config, stack_depth)) {
        int d;
        memcpy(&d, field, sizeof d);
        u = (uint64_t)(int64_t)d;
      } else {
        memcpy(&u, field, sizeof u);
      }
      if (u < v->min || u > v->max) fail("a number outside its range", v->name, set);
      uint64_t p = 0, q = 0;
      bool ok = set && (v->type == SYMMPIN_CONFIG_UINT ? symmpin_config_parse_uint(set, &p)
                                                       : symmpin_config_parse_size(set, &p));
      if (ok && p >= v->min && p <= v->max && p != u)
        fail("a valid number was not taken", v->name, set);
      if (set && symmpin_config_parse_uint(set, &p) &&
          (!symmpin_config_parse_size(set, &q) || p != q))
        fail("a plain number is not the same size", v->name, set);
      break;
    }
    case SYMMPIN_CONFIG_CHOICE: {
      int k;
      memcpy(&k, field, sizeof k);
      int n = 0;
      while (v->choices[n]) n++;
      if (k < 0 || k >= n) fail("a choice outside its list", v->name, set);
      if (set && strcasecmp(set, v->choices[k]) != 0) {
        for (int j = 0; j < n; j++)
          if (strcasecmp(set, v->choices[j]) == 0) fail("a valid choice was not taken", v->name, set);
      }
      break;
    }
    case SYMMPIN_CONFIG_STRING:
      if (strnlen(field, SYMMPIN_CONFIG_PATH_MAX) >= SYMMPIN_CONFIG_PATH_MAX)
        fail("a string fills its field without a NUL", v->name, set);
      if (set && strlen(set) < SYMMPIN_CONFIG_PATH_MAX && strcmp(set, field) != 0)
        fail("a string that fits was not taken", v->name, set);
      break;
    }
  }
  check_pattern("SYMMPIN_TRACE", cfg.trace);
  check_pattern("SYMMPIN_STATS_FILE", cfg.stats_file);
  check_pattern("SYMMPIN_DEBUG_FILE", cfg.debug_file);
  free(text);
  return 0;
}
