/* The version banner's lines and the NCCL version policy (preload/banner.h), on the CPU with
 * made-up facts. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/version.h"
#include "kernels/select.h"
#include "preload/banner.h"

Test(nccl_policy, versions) {
  struct {
    int code;
    symmpin_nccl_support want;
  } cases[] = {
      {22803, SYMMPIN_NCCL_TESTED},   {22809, SYMMPIN_NCCL_TESTED},
      {22903, SYMMPIN_NCCL_EXPECTED}, {23206, SYMMPIN_NCCL_EXPECTED},
      {21800, SYMMPIN_NCCL_EXPECTED}, {22703, SYMMPIN_NCCL_EXPECTED},
      {21703, SYMMPIN_NCCL_TOO_OLD},  {21203, SYMMPIN_NCCL_TOO_OLD},
      {2804, SYMMPIN_NCCL_TOO_OLD}, /* 2.8.4, the old encoding */
      {30000, SYMMPIN_NCCL_OTHER_MAJOR}, {1000, SYMMPIN_NCCL_OTHER_MAJOR},
      {-1, SYMMPIN_NCCL_UNKNOWN},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_assert_eq(symmpin_banner_nccl_support(cases[i].code), cases[i].want, "code %d",
                 cases[i].code);
}

Test(nccl_policy, version_strings) {
  char s[32];
  symmpin_banner_nccl_version_str(22809, s, sizeof s);
  cr_assert_str_eq(s, "2.28.9");
  symmpin_banner_nccl_version_str(2804, s, sizeof s);
  cr_assert_str_eq(s, "2.8.4");
  symmpin_banner_nccl_version_str(30102, s, sizeof s);
  cr_assert_str_eq(s, "3.1.2");
  symmpin_banner_nccl_version_str(-1, s, sizeof s);
  cr_assert_str_eq(s, "unknown");
}

Test(nccl_policy, verdict_lines) {
  char s[SYMMPIN_BANNER_LINE];
  cr_assert_eq(symmpin_banner_nccl_line(22803, 22809, s, sizeof s), 0);
  cr_assert_str_empty(s);
  cr_assert_eq(symmpin_banner_nccl_line(22903, 22809, s, sizeof s), SYMMPIN_LOG_INFO);
  cr_assert(strstr(s, "NCCL 2.29.3: symmpin is tested with NCCL 2.28 (built against 2.28.9)"), "%s",
            s);
  cr_assert(strstr(s, "expected to work"), "%s", s);
  cr_assert_eq(symmpin_banner_nccl_line(21203, 22809, s, sizeof s), SYMMPIN_LOG_WARN);
  cr_assert(strstr(s, "NCCL 2.12.3 is older than 2.18, the oldest symmpin supports"), "%s", s);
  cr_assert(strstr(s, "every call goes to NCCL"), "%s", s);
  cr_assert_eq(symmpin_banner_nccl_line(30000, 22809, s, sizeof s), SYMMPIN_LOG_WARN);
  cr_assert(strstr(s, "NCCL 3.0.0 is a major version symmpin was not built for"), "%s", s);
  cr_assert_eq(symmpin_banner_nccl_line(-1, 22809, s, sizeof s), SYMMPIN_LOG_WARN);
  cr_assert(strstr(s, "cannot read NCCL's version"), "%s", s);
}

/* symmpin_banner_nccl_supported() asks the installed probe once (Criterion runs each test in its
 * own process, so each starts undecided). */
static int probe_nccl;
static void probe_versions(symmpin_banner_facts *f) {
  f->nccl_version = probe_nccl;
  f->nccl_built = 22809;
}

static bool supported_with(int code) {
  probe_nccl = code;
  symmpin_banner_probe p = {.versions = probe_versions, .gpu = NULL};
  symmpin_banner_install(&p);
  return symmpin_banner_nccl_supported();
}

Test(nccl_policy, supported_tested) { cr_assert(supported_with(22803)); }
Test(nccl_policy, supported_newer_minor) { cr_assert(supported_with(23001)); }
Test(nccl_policy, refused_too_old, .init = cr_redirect_stderr) { cr_assert_not(supported_with(21703)); }
Test(nccl_policy, refused_other_major, .init = cr_redirect_stderr) { cr_assert_not(supported_with(30000)); }
Test(nccl_policy, refused_unknown, .init = cr_redirect_stderr) { cr_assert_not(supported_with(-1)); }
Test(nccl_policy, refused_without_probe, .init = cr_redirect_stderr) {
  cr_assert_not(symmpin_banner_nccl_supported());
}

Test(nccl_policy, decided_once, .init = cr_redirect_stderr) {
  cr_assert_not(supported_with(21203));
  probe_nccl = 22809; /* a later answer does not change the process's verdict */
  cr_assert_not(symmpin_banner_nccl_supported());
  fflush(stderr);
  char buf[4096] = "";
  FILE *f = cr_get_redirected_stderr();
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  const char *first = strstr(buf, "older than 2.18");
  cr_assert(first, "%s", buf);
  cr_assert_null(strstr(first + 1, "older than 2.18"), "logged once: %s", buf);
}

static int lines_of(const symmpin_banner_facts *f, char (*l)[SYMMPIN_BANNER_LINE]) {
  return symmpin_banner_lines(f, l, SYMMPIN_BANNER_MAX_LINES);
}

Test(banner, known_facts) {
  symmpin_banner_facts f;
  symmpin_banner_facts_init(&f);
  f.nccl_version = 22803;
  f.nccl_built = 22809;
  f.driver_version = 13010;
  f.device = 1;
  snprintf(f.gpu_name, sizeof f.gpu_name, "NVIDIA H200");
  f.cc = 90;
  f.ngpus = 2;
  f.p2p[0][1] = 1;
  f.p2p[1][0] = 0;
  static char l[SYMMPIN_BANNER_MAX_LINES][SYMMPIN_BANNER_LINE];
  int n = lines_of(&f, l);
  cr_assert_eq(n, 8);
  char want[SYMMPIN_BANNER_LINE];
  snprintf(want, sizeof want, "symmpin %s (%s) active; kernels carry %s", SYMMPIN_VERSION,
           SYMMPIN_GIT, symmpin_kernel_archs());
  cr_assert_str_eq(l[0], want);
  cr_assert_str_eq(l[1], "NCCL 2.28.3 (symmpin built against 2.28.9, tested with 2.28)");
  cr_assert_str_eq(l[2], "CUDA driver supports CUDA 13.1 (symmpin uses it at the CUDA 12.0 ABI, "
                         "no runtime of its own); the program's CUDA runtime: none loaded");
  cr_assert_str_eq(l[3], "GPU 1: NVIDIA H200, compute capability 9.0 (sm_90)");
  cr_assert(strstr(l[4], "P2P access among 2 visible GPUs (row: GPU that accesses"), "%s", l[4]);
  cr_assert_str_eq(l[5], "P2P      0  1");
  cr_assert_str_eq(l[6], "P2P  0:  -  Y");
  cr_assert_str_eq(l[7], "P2P  1:  N  -");
}

Test(banner, p2p_rows_and_unknowns) {
  symmpin_banner_facts f;
  symmpin_banner_facts_init(&f);
  f.ngpus = 3;
  f.p2p[0][1] = 1, f.p2p[0][2] = 0; /* row 1 and row 2 unknown */
  f.p2p[2][0] = 1;
  static char l[SYMMPIN_BANNER_MAX_LINES][SYMMPIN_BANNER_LINE];
  int n = lines_of(&f, l);
  cr_assert_eq(n, 9);
  cr_assert_str_eq(l[1], "NCCL unknown (symmpin built against unknown, tested with 2.28)");
  cr_assert_str_eq(l[2], "CUDA driver supports CUDA unknown (symmpin uses it at the CUDA 12.0 ABI, "
                         "no runtime of its own); the program's CUDA runtime: none loaded");
  cr_assert_str_eq(l[3], "GPU -1: (name unknown), compute capability unknown");
  cr_assert_str_eq(l[5], "P2P      0  1  2");
  cr_assert_str_eq(l[6], "P2P  0:  -  Y  N");
  cr_assert_str_eq(l[7], "P2P  1:  ?  -  ?");
  cr_assert_str_eq(l[8], "P2P  2:  Y  ?  -");
}

Test(banner, gpu_counts) {
  symmpin_banner_facts f;
  symmpin_banner_facts_init(&f);
  static char l[SYMMPIN_BANNER_MAX_LINES][SYMMPIN_BANNER_LINE];
  cr_assert_eq(lines_of(&f, l), 5);
  cr_assert_str_eq(l[4], "P2P access: unknown (the number of visible GPUs is unknown)");
  f.ngpus = 1;
  cr_assert_eq(lines_of(&f, l), 5);
  cr_assert_str_eq(l[4], "P2P access: 1 visible GPU");
  /* More GPUs than the matrix shows: the first 16, every row within the line length. */
  f.ngpus = 20;
  int n = lines_of(&f, l);
  cr_assert_eq(n, 6 + SYMMPIN_BANNER_MAX_GPUS);
  cr_assert(strstr(l[4], "among 20 visible GPUs, the first 16 shown"), "%s", l[4]);
  cr_assert(strstr(l[n - 1], "P2P 15:"), "%s", l[n - 1]);
  cr_assert_eq(strlen(l[n - 1]), strlen("P2P 15:") + 3 * 16);
}

Test(banner, program_runtimes_are_named) {
  /* The program's runtimes: a CUDA 12 PyTorch, and a second one loaded by something else (the
   * version of which could not be read). */
  symmpin_banner_facts f;
  symmpin_banner_facts_init(&f);
  f.driver_version = 13000;
  f.nprogram_cudarts = 2;
  f.program_cudart[0].major = 12, f.program_cudart[0].version = 12080;
  f.program_cudart[1].major = 13, f.program_cudart[1].version = -1;
  static char l[SYMMPIN_BANNER_MAX_LINES][SYMMPIN_BANNER_LINE];
  lines_of(&f, l);
  cr_assert_str_eq(l[2], "CUDA driver supports CUDA 13.0 (symmpin uses it at the CUDA 12.0 ABI, no "
                         "runtime of its own); the program's CUDA runtime: libcudart.so.12 12.8, "
                         "libcudart.so.13 unknown");
  f.driver_version = 0; /* no libcuda.so.1 */
  lines_of(&f, l);
  cr_assert_str_eq(l[2], "no CUDA driver; the program's CUDA runtime: libcudart.so.12 12.8, "
                         "libcudart.so.13 unknown");
}

/* ---- the CUDA driver policy: CUDA 12.0 or newer, and the driver opened (driver/cu.h) ---- */

Test(cuda_policy, verdicts) {
  struct {
    int driver, usable;
    symmpin_cuda_support want;
  } cases[] = {
      {13000, 1, SYMMPIN_CUDA_OK},
      {12000, 1, SYMMPIN_CUDA_OK}, /* r525: the oldest */
      {12040, 1, SYMMPIN_CUDA_OK}, /* the CUDA 12 drivers PyTorch's cu12 wheels run on */
      {14000, 1, SYMMPIN_CUDA_OK},
      {11080, 1, SYMMPIN_CUDA_DRIVER_TOO_OLD}, /* the version alone decides */
      {11080, 0, SYMMPIN_CUDA_DRIVER_TOO_OLD},
      {11040, -1, SYMMPIN_CUDA_DRIVER_TOO_OLD},
      {0, 0, SYMMPIN_CUDA_NO_DRIVER},
      {0, -1, SYMMPIN_CUDA_NO_DRIVER},
      {13000, 0, SYMMPIN_CUDA_DRIVER_FAILED}, /* no GPU, a missing entry point, ... */
      {-1, 1, SYMMPIN_CUDA_UNKNOWN},
      {13000, -1, SYMMPIN_CUDA_UNKNOWN},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_assert_eq(symmpin_banner_cuda_support(cases[i].driver, cases[i].usable), cases[i].want,
                 "case %zu: driver %d usable %d", i, cases[i].driver, cases[i].usable);
}

static symmpin_banner_facts cuda_facts(int driver, int usable, const char *why) {
  symmpin_banner_facts f;
  symmpin_banner_facts_init(&f);
  f.driver_version = driver;
  f.driver_usable = usable;
  snprintf(f.driver_why, sizeof f.driver_why, "%s", why);
  return f;
}

Test(cuda_policy, lines) {
  char s[SYMMPIN_BANNER_LINE];
  symmpin_banner_facts f = cuda_facts(12000, 1, "");
  cr_assert_eq(symmpin_banner_cuda_line(&f, s, sizeof s), 0);
  cr_assert_str_empty(s);
  const char *out =
      "symmpin stays out of this process: every call goes to NCCL, as without symmpin";
  f = cuda_facts(0, 0, "no CUDA driver (libcuda.so.1: cannot open shared object file)");
  cr_assert_eq(symmpin_banner_cuda_line(&f, s, sizeof s), SYMMPIN_LOG_INFO);
  cr_assert(strstr(s, "no CUDA driver in this process (libcuda.so.1 not found)"), "%s", s);
  cr_assert(strstr(s, out), "%s", s);
  f = cuda_facts(11080, 0, "the driver supports CUDA 11.8; ...");
  cr_assert_eq(symmpin_banner_cuda_line(&f, s, sizeof s), SYMMPIN_LOG_INFO);
  cr_assert(strstr(s, "the CUDA driver supports CUDA 11.8; symmpin needs CUDA 12.0 or newer (a "
                      "driver r525 or newer); symmpin stays out"),
            "%s", s);
  f = cuda_facts(13000, 0, "cuInit failed: CUDA_ERROR_NO_DEVICE (100)");
  cr_assert_eq(symmpin_banner_cuda_line(&f, s, sizeof s), SYMMPIN_LOG_INFO);
  cr_assert(strstr(s, "the CUDA driver (CUDA 13.0) cannot serve symmpin: cuInit failed: "
                      "CUDA_ERROR_NO_DEVICE (100); symmpin stays out"),
            "%s", s);
  f = cuda_facts(-1, 0, "");
  cr_assert_eq(symmpin_banner_cuda_line(&f, s, sizeof s), SYMMPIN_LOG_INFO);
  cr_assert(strstr(s, "cannot read the CUDA driver's version"), "%s", s);
}

/* symmpin_banner_cuda_supported() asks the installed probe once, with the NCCL verdict. */
static int probe_driver;
static void probe_cuda_versions(symmpin_banner_facts *f) {
  f->nccl_version = 22809;
  f->nccl_built = 22809;
  f->driver_version = probe_driver;
  f->driver_usable = probe_driver >= 12000;
}

static bool cuda_supported_with(int driver) {
  probe_driver = driver;
  symmpin_banner_probe p = {.versions = probe_cuda_versions, .gpu = NULL};
  symmpin_banner_install(&p);
  return symmpin_banner_cuda_supported();
}

Test(cuda_policy, supported) {
  cr_assert(cuda_supported_with(13000));
  cr_assert(symmpin_banner_nccl_supported(), "decided together: NCCL 2.28.9 is fine");
}

Test(cuda_policy, refused_old_driver_once, .init = cr_redirect_stderr) {
  symmpin_log_configure(SYMMPIN_LOG_INFO, -1);
  cr_assert_not(cuda_supported_with(11040));
  probe_driver = 13000; /* a later answer does not change the process's verdict */
  cr_assert_not(symmpin_banner_cuda_supported());
  symmpin_banner_once(0); /* the banner at a later communicator: no second verdict line */
  fflush(stderr);
  char buf[8192] = "";
  FILE *f = cr_get_redirected_stderr();
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  const char *verdict = "the CUDA driver supports CUDA";
  const char *first = strstr(buf, verdict);
  cr_assert(first, "%s", buf);
  cr_assert(strstr(buf, "symmpin INFO the CUDA driver supports CUDA 11.4"), "%s", buf);
  cr_assert_null(strstr(first + strlen(verdict), verdict), "logged once: %s", buf);
  cr_assert_null(strstr(buf, "symmpin WARN"), "an old driver is INFO, not a warning: %s", buf);
}
