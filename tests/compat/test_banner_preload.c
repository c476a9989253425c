/* The version banner and the NCCL and CUDA driver verdicts of libsymmpin.so itself, preloaded
 * under compat_app on the FAKE runtime and NCCL (tests/fakes), alone or with compat_shim.so
 * preloaded after it to answer the banner's questions (another NCCL version, two sm_90 GPUs,
 * one-way P2P). symmpin's own CUDA questions reach the FAKE runtime (and the shim) through the
 * test seam that the fake runtime switches on (interpose/cuda_queries.h); symmpin's own runtime
 * version is the real one (the static runtime it was built with, 13.0), the program's is the
 * fake's (13.1). */
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
  /* symmpin's own runtime (static, 13.0), the program's (the FAKE libcudart.so.13 says 13.1) and
   * the driver (the FAKE's default, 13.0). */
  cr_assert(strstr(r.out, "symmpin INFO CUDA runtime 13.0 (symmpin's own, static); the program's: "
                          "libcudart.so.13 13.1; driver supports CUDA 13.0\n"),
            "%s", r.out);
  /* The fake runtime answers no GPU facts: "unknown", no crash, no WARN. */
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
  cr_assert(strstr(r.out, "symmpin INFO CUDA runtime 13.0 (symmpin's own, static); the program's: "
                          "libcudart.so.13 13.1; driver supports CUDA 13.1\n"),
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

/* FAKE driver: the fake runtime reports a driver for CUDA 12.4, too old for symmpin's own CUDA 13.0
 * runtime. One INFO line for the process, whatever the number of communicators (compat_app makes
 * two), no WARN, no line per communicator, and the program runs as without symmpin. */
Test(banner_preload, old_driver_is_one_info_line, .timeout = 60) {
  spawn_result r;
  run(NULL, "INFO", "SYMMPIN_TEST_DRIVER_VERSION=12040", &r);
  cr_assert_eq(count_of(r.out,
                        "symmpin INFO the CUDA driver supports CUDA 12.4, older than "
                        "symmpin's own CUDA runtime 13.0 (it needs a driver for CUDA 13 or "
                        "newer); symmpin stays out of this process: every call goes to NCCL"),
               1, "%s", r.out);
  cr_assert_eq(count_of(r.out, "the CUDA driver supports CUDA"), 1, "%s", r.out);
  cr_assert_null(strstr(r.out, "symmpin WARN"), "%s", r.out);
  cr_assert_null(strstr(r.out, "stays out of this communicator"), "%s", r.out);
  /* symmpin's runtime would only fail: no GPU question was asked of it. */
  cr_assert(strstr(r.out, "GPU -1: (name unknown)"), "%s", r.out);
}

Test(banner_preload, old_driver_is_silent_at_the_default_level, .timeout = 60) {
  spawn_result r;
  run(NULL, "WARN", "SYMMPIN_TEST_DRIVER_VERSION=12040", &r);
  cr_assert_null(strstr(r.out, "symmpin"), "%s", r.out);
}
