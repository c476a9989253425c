/* The version banner and the NCCL and CUDA driver verdicts of libsymmpin.so itself, preloaded
 * under compat_app on the FAKE runtime, driver and NCCL (tests/fakes), alone or with
 * compat_shim.so preloaded after it to answer the banner's questions (another NCCL version, two
 * sm_90 GPUs, one-way P2P). symmpin's CUDA questions go to the FAKE driver (libcuda.so.1, found
 * on LD_LIBRARY_PATH like the real one; it answers only the CUDA 12.0 ABI), the program's runtime
 * version is the fake runtime's (13.1). SYMMPIN_TEST_DRIVER_VERSION sets the fake driver's
 * version; SYMMPIN_TEST_OLD_DRIVER puts the fake of a pre-12.0 driver (no cuGetProcAddress_v2)
 * first on LD_LIBRARY_PATH. */
#include <criterion/criterion.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "child.h"

/* The FAKE driver's default version (tests/fakes/fake_cuda.c). */
#ifndef FAKE_DRIVER
#define FAKE_DRIVER "12.0"
#endif

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
  const char *env[8];
  int n = 0;
  env[n++] = level;
  if (nccl_version)
    env[n++] = preload, env[n++] = version, env[n++] = "SYMMPIN_TEST_DRIVER_VERSION=13010";
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
  /* The driver (the FAKE's default) and the program's runtime (the FAKE libcudart.so.13 says
   * 13.1); symmpin has no runtime of its own. */
  cr_assert(strstr(r.out, "symmpin INFO CUDA driver supports CUDA " FAKE_DRIVER " (symmpin uses it "
                          "at the CUDA 12.0 ABI, no runtime of its own); the program's CUDA "
                          "runtime: libcudart.so.13 13.1\n"),
            "%s", r.out);
  /* The fake driver's GPU facts; it answers no peer question: "?", no crash, no WARN. */
  cr_assert(strstr(r.out, "GPU 0: FAKE GPU 0, compute capability 9.0 (sm_90)"), "%s", r.out);
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
  cr_assert(strstr(r.out,
                   "symmpin INFO CUDA driver supports CUDA 13.1 (symmpin uses it at the CUDA "
                   "12.0 ABI, no runtime of its own); the program's CUDA runtime: "
                   "libcudart.so.13 13.1\n"),
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

/* FAKE drivers older than CUDA 12.0: one reporting 11.8 (it has cuGetProcAddress_v2, so only the
 * version tells), and one without cuGetProcAddress_v2 at all (a pre-12.0 libcuda.so.1). One INFO
 * line for the process, whatever the number of communicators (compat_app makes two), no WARN, no
 * line per communicator, and the program runs as without symmpin. */
Test(banner_preload, old_driver_is_one_info_line, .timeout = 60) {
  spawn_result r;
  run(NULL, "INFO", "SYMMPIN_TEST_DRIVER_VERSION=11080", &r);
  cr_assert_eq(count_of(r.out,
                        "symmpin INFO the CUDA driver supports CUDA 11.8; symmpin needs CUDA 12.0 "
                        "or newer (a driver r525 or newer); symmpin stays out of this process: "
                        "every call goes to NCCL"),
               1, "%s", r.out);
  cr_assert_eq(count_of(r.out, "the CUDA driver supports CUDA"), 1, "%s", r.out);
  cr_assert_null(strstr(r.out, "symmpin WARN"), "%s", r.out);
  cr_assert_null(strstr(r.out, "stays out of this communicator"), "%s", r.out);
  /* The driver would only fail: no GPU question was asked of it. */
  cr_assert(strstr(r.out, "GPU -1: (name unknown)"), "%s", r.out);
}

Test(banner_preload, driver_without_get_proc_address_v2, .timeout = 60) {
  spawn_result r;
  run(NULL, "INFO", "SYMMPIN_TEST_OLD_DRIVER=1", &r);
  cr_assert_eq(count_of(r.out,
                        "symmpin INFO the CUDA driver supports CUDA 11.8; symmpin needs CUDA 12.0 "
                        "or newer (a driver r525 or newer); symmpin stays out of this process"),
               1, "%s", r.out);
  cr_assert_null(strstr(r.out, "symmpin WARN"), "%s", r.out);
  cr_assert(strstr(r.out, "GPU -1: (name unknown)"), "%s", r.out);
}

/* The oldest driver symmpin takes: 12.0, whose entry points are all the fake answers anyway. */
Test(banner_preload, cuda_12_0_driver_is_served, .timeout = 60) {
  spawn_result r;
  run(NULL, "INFO", "SYMMPIN_TEST_DRIVER_VERSION=12000", &r);
  cr_assert(strstr(r.out, "symmpin INFO CUDA driver supports CUDA 12.0 (symmpin uses it"), "%s",
            r.out);
  cr_assert_null(strstr(r.out, "symmpin needs CUDA 12.0"), "%s", r.out);
  cr_assert(strstr(r.out, "GPU 0: FAKE GPU 0, compute capability 9.0 (sm_90)"), "%s", r.out);
  cr_assert_null(strstr(r.out, "symmpin WARN"), "%s", r.out);
}

/* A driver new enough that cannot serve symmpin (here cuInit fails, as on a machine without a GPU;
 * a missing entry point takes the same path): one INFO line with the driver's reason, no WARN, no
 * GPU question, and the program runs as without symmpin. */
Test(banner_preload, failing_cuinit_is_one_info_line, .timeout = 60) {
  spawn_result r;
  run(NULL, "INFO", "SYMMPIN_TEST_CUINIT_ERROR=100", &r);
  cr_assert_eq(count_of(r.out, "symmpin INFO the CUDA driver (CUDA 12.0) cannot serve symmpin: "
                               "cuInit failed: CUDA_ERROR_NO_DEVICE (100); symmpin stays out of "
                               "this process"),
               1, "%s", r.out);
  cr_assert_null(strstr(r.out, "symmpin WARN"), "%s", r.out);
  cr_assert_null(strstr(r.out, "stays out of this communicator"), "%s", r.out);
  cr_assert(strstr(r.out, "GPU -1: (name unknown)"), "%s", r.out);
}

Test(banner_preload, old_driver_is_silent_at_the_default_level, .timeout = 60) {
  spawn_result r;
  run(NULL, "WARN", "SYMMPIN_TEST_DRIVER_VERSION=11080", &r);
  cr_assert_null(strstr(r.out, "symmpin"), "%s", r.out);
}
