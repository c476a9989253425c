/* preload/config: value parsers, the table's defaults, bad values (warn + keep the default), and
 * docs/config.md listing every variable. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/plan.h"
#include "planner/warmup.h"
#include "preload/config.h"

Test(config, booleans) {
  const char *yes[] = {"1", "yes", "YES", "on", "On", "true", "TRUE"};
  const char *no[] = {"0", "no", "No", "off", "OFF", "false", "False"};
  const char *bad[] = {"", "2", "y", "enable", " 1", "1 ", "truee", "-1"};
  for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
    bool b = false;
    cr_assert(symmpin_config_parse_bool(yes[i], &b), "%s", yes[i]);
    cr_assert(b, "%s", yes[i]);
  }
  for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
    bool b = true;
    cr_assert(symmpin_config_parse_bool(no[i], &b), "%s", no[i]);
    cr_assert(!b, "%s", no[i]);
  }
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    bool b = true;
    cr_assert(!symmpin_config_parse_bool(bad[i], &b), "%s", bad[i]);
    cr_assert(b, "output touched on failure: %s", bad[i]);
  }
}

typedef struct size_case {
  const char *text;
  bool ok;
  uint64_t value;
} size_case;

/* A table loop rather than Criterion's parameterized tests: their parameters cross into the
 * test's process by address, which breaks for string literals in a position-independent binary. */
Test(config, sizes) {
  static const size_case cases[] = {
      {"0", true, 0},
      {"4096", true, 4096},
      {"1K", true, 1024},
      {"64k", true, 65536},
      {"1M", true, 1048576},
      {"3m", true, 3145728},
      {"2G", true, 2147483648ull},
      {"17179869183G", true, 17179869183ull << 30},
      {"17179869184G", false, 0}, /* 2^34 G = 2^64: overflow */
      {"18446744073709551615", true, UINT64_MAX},
      {"18446744073709551616", false, 0},
      {"", false, 0},
      {"K", false, 0},
      {"-1", false, 0},
      {"+5", false, 0},
      {" 5", false, 0},
      {"5 ", false, 0},
      {"1.5M", false, 0},
      {"1T", false, 0},
      {"1KB", false, 0},
      {"0x10", false, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const size_case *c = &cases[i];
    uint64_t v = 12345;
    bool ok = symmpin_config_parse_size(c->text, &v);
    cr_assert_eq(ok, c->ok, "\"%s\"", c->text);
    cr_assert_eq(v, c->ok ? c->value : 12345u, "\"%s\"", c->text);
  }
}

Test(config, uints) {
  uint64_t v = 7;
  cr_assert(symmpin_config_parse_uint("0", &v) && v == 0);
  cr_assert(symmpin_config_parse_uint("10000", &v) && v == 10000);
  cr_assert(!symmpin_config_parse_uint("1K", &v) && v == 10000);
  cr_assert(!symmpin_config_parse_uint("", &v));
  cr_assert(!symmpin_config_parse_uint("12a", &v));
}

/* A fake environment: NULL-terminated name/value pairs. */
static const char *lookup(const char *name, void *arg) {
  const char *const *kv = arg;
  for (; kv[0]; kv += 2)
    if (strcmp(kv[0], name) == 0) return kv[1];
  return NULL;
}

Test(config, defaults) {
  const char *env[] = {NULL};
  symmpin_config c;
  memset(&c, 0xff, sizeof c);
  symmpin_config_read(lookup, (void *)env, &c);
  cr_assert(!c.disable);
  cr_assert_eq(c.debug, 1); /* WARN */
  cr_assert_str_empty(c.debug_file);
  cr_assert_str_empty(c.trace);
  cr_assert(!c.stats);
  cr_assert_str_empty(c.stats_file);
  /* The owners' constants (one definition, also what symmpin-replay uses), as numbers. */
  cr_assert_eq(c.warmup, SYMMPIN_WARMUP_DEFAULT);
  cr_assert_eq(c.max_bytes, SYMMPIN_PLAN_MAX_BYTES_DEFAULT);
  cr_assert_eq(c.warmup, 64);
  cr_assert_eq(c.max_bytes, 2u << 20);
  cr_assert_eq(c.planner, SYMMPIN_PLAN_SHARED);
  cr_assert_eq(c.timeout_ms, 10000);
  cr_assert_eq(c.stack_depth, 1);
}

Test(config, values_set) {
  const char *env[] = {"SYMMPIN_DISABLE", "on", "SYMMPIN_DEBUG", "trace",
                       "SYMMPIN_TRACE", "/tmp/t.%r.%p", "SYMMPIN_STATS", "yes",
                       "SYMMPIN_STATS_FILE", "/tmp/s.json", "SYMMPIN_WARMUP", "64",
                       "SYMMPIN_MAX_BYTES", "256K", "SYMMPIN_PLANNER", "Dedicated",
                       "SYMMPIN_TIMEOUT_MS", "2500", "SYMMPIN_STACK_DEPTH", "4",
                       "SYMMPIN_DEBUG_FILE", "/tmp/log.%h.%p", NULL};
  symmpin_config c;
  symmpin_config_read(lookup, (void *)env, &c);
  cr_assert(c.disable);
  cr_assert_eq(c.debug, 3);
  cr_assert_str_eq(c.trace, "/tmp/t.%r.%p");
  cr_assert(c.stats);
  cr_assert_str_eq(c.stats_file, "/tmp/s.json");
  cr_assert_eq(c.warmup, 64);
  cr_assert_eq(c.max_bytes, 256u * 1024);
  cr_assert_eq(c.planner, SYMMPIN_PLAN_DEDICATED);
  cr_assert_eq(c.timeout_ms, 2500);
  cr_assert_eq(c.stack_depth, 4);
  cr_assert_str_eq(c.debug_file, "/tmp/log.%h.%p");
}

Test(config, bad_values_keep_defaults, .init = cr_redirect_stderr) {
  const char *env[] = {"SYMMPIN_DISABLE", "maybe", "SYMMPIN_DEBUG", "LOUD",
                       "SYMMPIN_WARMUP", "0", "SYMMPIN_MAX_BYTES", "1.5M",
                       "SYMMPIN_PLANNER", "greedy", "SYMMPIN_TIMEOUT_MS", "-5",
                       "SYMMPIN_STACK_DEPTH", "33", "SYMMPIN_STATS", "", NULL};
  symmpin_config c;
  symmpin_config_read(lookup, (void *)env, &c);
  cr_assert(!c.disable);
  cr_assert_eq(c.debug, 1);
  /* The owners' constants (one definition, also what symmpin-replay uses), as numbers. */
  cr_assert_eq(c.warmup, SYMMPIN_WARMUP_DEFAULT);
  cr_assert_eq(c.max_bytes, SYMMPIN_PLAN_MAX_BYTES_DEFAULT);
  cr_assert_eq(c.warmup, 64);
  cr_assert_eq(c.max_bytes, 2u << 20);
  cr_assert_eq(c.planner, SYMMPIN_PLAN_SHARED);
  cr_assert_eq(c.timeout_ms, 10000);
  cr_assert_eq(c.stack_depth, 1);
  cr_assert(!c.stats);
  fflush(stderr);
  /* One warning per bad variable, naming it and the default kept. */
  cr_assert_stderr_neq_str("");
}

Test(config, bad_value_warning_text, .init = cr_redirect_stderr) {
  const char *env[] = {"SYMMPIN_WARMUP", "lots", NULL};
  symmpin_config c;
  symmpin_config_read(lookup, (void *)env, &c);
  fflush(stderr);
  char buf[1024] = {0};
  FILE *f = cr_get_redirected_stderr();
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  cr_assert(strstr(buf, "symmpin WARN"), "%s", buf);
  cr_assert(strstr(buf, "SYMMPIN_WARMUP=\"lots\" is not a valid integer in range; keeping the "
                        "default \"64\""),
            "%s", buf);
  cr_assert_eq(strchr(buf, '\n'), buf + n - 1, "one line: %s", buf);
}

Test(config, table_consistent) {
  size_t n;
  const symmpin_config_var *v = symmpin_config_vars(&n);
  cr_assert_geq(n, 11);
  for (size_t i = 0; i < n; i++) {
    cr_assert(strncmp(v[i].name, "SYMMPIN_", 8) == 0, "%s", v[i].name);
    cr_assert(v[i].meaning && v[i].meaning[0], "%s", v[i].name);
    for (size_t j = i + 1; j < n; j++) cr_assert_str_neq(v[i].name, v[j].name);
    /* A default given as a value for itself is accepted, i.e. valid. */
    const char *env[] = {v[i].name, v[i].def, NULL};
    symmpin_config a, b;
    symmpin_config_read(lookup, (void *)env, &a);
    const char *none[] = {NULL};
    symmpin_config_read(lookup, (void *)none, &b);
    cr_assert_eq(memcmp(&a, &b, sizeof a), 0, "%s default \"%s\"", v[i].name, v[i].def);
  }
}

Test(config, docs_list_every_variable) {
  const char *path = getenv("SYMMPIN_TEST_CONFIG_DOC");
  cr_assert(path, "SYMMPIN_TEST_CONFIG_DOC not set");
  FILE *f = fopen(path, "r");
  cr_assert(f, "%s", path);
  static char doc[65536];
  size_t len = fread(doc, 1, sizeof doc - 1, f);
  doc[len] = '\0';
  fclose(f);
  size_t n;
  const symmpin_config_var *v = symmpin_config_vars(&n);
  for (size_t i = 0; i < n; i++) {
    char row[256];
    /* A table row: | `NAME` | `default` | ... */
    snprintf(row, sizeof row, "| `%s` | %s%s%s |", v[i].name, v[i].def[0] ? "`" : "",
             v[i].def[0] ? v[i].def : "(unset)", v[i].def[0] ? "`" : "");
    cr_assert(strstr(doc, row), "docs/config.md lacks the row %s", row);
  }
}
