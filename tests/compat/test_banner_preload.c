/* The version banner and the NCCL verdict of libsymmpin.so itself, preloaded under compat_app on
 * the FAKE runtime and NCCL (tests/fakes), alone or with compat_shim.so preloaded after it to
 * answer the banner's questions (another NCCL version, two sm_90 GPUs, one-way P2P). */
#include <criterion/criterion.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "child.h"

static int count_of(const char *out, const char *what) {
  int n = 0;
  for (const char *p = out; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

/* Runs compat_app with libsymmpin (and the shim when nccl_version is not NULL). */
static void run(const char *nccl_version, const char *debug, const char *extra, spawn_result *r) {
  char *argv[] = {(char *)spawn_path("SYMMPIN_TEST_COMPAT_APP"), NULL};
  char preload[4096], version[64], level[64];
  snprintf(preload, sizeof preload, "LD_PRELOAD=%s %s", spawn_path("SYMMPIN_TEST_LIB"),
           spawn_path("SYMMPIN_TEST_COMPAT_SHIM"));
  snprintf(version, sizeof version, "SYMMPIN_TEST_NCCL_VERSION=%s",
           nccl_version ? nccl_version : "");
  snprintf(level, sizeof level, "SYMMPIN_DEBUG=%s", debug);
  const char *env[6];
  int n = 0;
  env[n++] = level;
  if (nccl_version) env[n++] = preload, env[n++] = version;
  if (extra) env[n++] = extra;
  env[n] = NULL;
  cr_assert(spawn_run(argv, env, nccl_version == NULL, r), "spawn");
  cr_assert_eq(r->status, 0, "exit status %d:\n%s", r->status, r->out);
  cr_assert(strstr(r->out, "ok\n"), "%s", r->out);
}

#define STR_(x) #x
#define STR(x) STR_(x)
#define HEADER_NCCL STR(NCCL_MAJOR) "." STR(NCCL_MINOR) "." STR(NCCL_PATCH)

Test(banner_preload, fakes_info_once, .timeout = 60) {
  spawn_result r;
  run(NULL, "INFO", NULL, &r);
  /* Two communicators, one banner. */
  cr_assert_eq(count_of(r.out, "symmpin INFO symmpin "), 1, "%s", r.out);
  cr_assert_eq(count_of(r.out, ") active; kernels carry sm_"), 1, "%s", r.out);
  cr_assert(strstr(r.out, "symmpin INFO NCCL " HEADER_NCCL " (symmpin built against " HEADER_NCCL
                          ", tested with 2.28)"),
            "%s", r.out);
  /* The fake runtime answers none of these (its stubs fail): "unknown", no crash, no WARN. */
  cr_assert(strstr(r.out, "CUDA runtime unknown (symmpin's libcudart)"), "%s", r.out);
  cr_assert(strstr(r.out, "GPU 0: (name unknown), compute capability unknown"), "%s", r.out);
  cr_assert(strstr(r.out, "P2P access among 8 visible GPUs"), "%s", r.out);
  cr_assert(strstr(r.out, "P2P  7:  ?  ?  ?  ?  ?  ?  ?  -"), "%s", r.out);
  cr_assert_null(strstr(r.out, "symmpin WARN"), "%s", r.out);
}

Test(banner_preload, quiet_at_the_default_level, .timeout = 60) {
  spawn_result r;
  run(NULL, "WARN", NULL, &r);
  cr_assert_null(strstr(r.out, "active; kernels carry"), "%s", r.out);
  cr_assert_null(strstr(r.out, "symmpin WARN"), "%s", r.out);
}

Test(banner_preload, disabled_prints_nothing, .timeout = 60) {
  spawn_result r;
  run(NULL, "INFO", "SYMMPIN_DISABLE=1", &r);
  cr_assert_null(strstr(r.out, "active; kernels carry"), "%s", r.out);
}

Test(banner_preload, facts_from_the_runtime, .timeout = 60) {
  spawn_result r;
  run("22803", "INFO", NULL, &r);
  cr_assert(strstr(r.out, "symmpin INFO NCCL 2.28.3 (symmpin built against " HEADER_NCCL), "%s",
            r.out);
  cr_assert(strstr(r.out, "symmpin INFO CUDA runtime 13.0 (symmpin's libcudart), driver supports "
                          "CUDA 13.1\n"),
            "%s", r.out);
  cr_assert(strstr(r.out, "symmpin INFO GPU 0: FAKE H200, compute capability 9.0 (sm_90)\n"), "%s",
            r.out);
  cr_assert(strstr(r.out, "symmpin INFO P2P access among 2 visible GPUs"), "%s", r.out);
  cr_assert(strstr(r.out, "symmpin INFO P2P      0  1\n"), "%s", r.out);
  cr_assert(strstr(r.out, "symmpin INFO P2P  0:  -  Y\n"), "%s", r.out);
  cr_assert(strstr(r.out, "symmpin INFO P2P  1:  N  -\n"), "%s", r.out);
  cr_assert_null(strstr(r.out, "symmpin WARN"), "%s", r.out);
  cr_assert_null(strstr(r.out, "expected to work"), "tested version: no verdict line\n%s", r.out);
}

Test(banner_preload, newer_minor_is_one_info_line, .timeout = 60) {
  spawn_result r;
  run("23102", "INFO", NULL, &r);
  cr_assert_eq(count_of(r.out, "symmpin INFO NCCL 2.31.2: symmpin is tested with NCCL 2.28"), 1,
               "%s", r.out);
  cr_assert_null(strstr(r.out, "symmpin WARN"), "%s", r.out);
}

Test(banner_preload, too_old_warns_once_at_the_default_level, .timeout = 60) {
  spawn_result r;
  run("21203", "WARN", NULL, &r);
  cr_assert_eq(count_of(r.out, "NCCL 2.12.3 is older than 2.18, the oldest symmpin supports; "
                               "symmpin stays out of this process: every call goes to NCCL"),
               1, "%s", r.out);
  cr_assert_eq(count_of(r.out, "symmpin WARN"), 1, "%s", r.out);
  cr_assert_null(strstr(r.out, "active; kernels carry"), "banner is INFO only:\n%s", r.out);
}

Test(banner_preload, other_major_warns, .timeout = 60) {
  spawn_result r;
  run("30000", "INFO", NULL, &r);
  cr_assert_eq(count_of(r.out, "NCCL 3.0.0 is a major version symmpin was not built for"), 1,
               "%s", r.out);
  cr_assert_eq(count_of(r.out, "symmpin WARN"), 1, "%s", r.out);
  cr_assert(strstr(r.out, "symmpin INFO NCCL 3.0.0 (symmpin built against"), "%s", r.out);
}

Test(banner_preload, unreadable_version_warns, .timeout = 60) {
  spawn_result r;
  run("fail", "WARN", NULL, &r);
  cr_assert_eq(count_of(r.out, "cannot read NCCL's version"), 1, "%s", r.out);
  cr_assert_eq(count_of(r.out, "symmpin WARN"), 1, "%s", r.out);
}
