/* The version banner, the NCCL version policy and the CUDA driver policy (banner.h). The facts come
 * from interpose/'s probe; this file only decides and words them, so the CPU tests check every
 * line. */
#include "preload/banner.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/version.h"

/* The GPU code libsymmpin carries, as meson's gpu_archs and gpu_ptx named it (the top-level
 * meson.build defines it for all C code; kernels/select.c reports the same list). */
#ifndef SYMMPIN_KERNEL_ARCHS
#define SYMMPIN_KERNEL_ARCHS "unknown"
#endif

static symmpin_banner_probe probe;
static _Atomic int probe_installed;
static _Atomic int banner_done;
/* The process's verdicts once decided: the symmpin_nccl_support in the low byte, the
 * symmpin_cuda_support in the next (one word, so that a reader sees both or neither). */
static _Atomic int verdicts = -1;
#define VERDICT_NCCL(v) ((v)&0xff)
#define VERDICT_CUDA(v) (((v) >> 8) & 0xff)

void symmpin_banner_install(const symmpin_banner_probe *p) {
  probe = *p;
  atomic_store_explicit(&probe_installed, 1, memory_order_release);
}

void symmpin_banner_facts_init(symmpin_banner_facts *f) {
  memset(f, 0, sizeof *f);
  f->nccl_version = f->nccl_built = f->driver_version = -1;
  f->driver_usable = -1;
  f->device = -1;
  f->ngpus = -1;
  memset(f->p2p, -1, sizeof f->p2p);
}

static const symmpin_banner_probe *probe_get(void) {
  return atomic_load_explicit(&probe_installed, memory_order_acquire) ? &probe : NULL;
}

/* ---- NCCL versions ---- */

static void nccl_decode(int v, int *major, int *minor, int *patch) {
  /* NCCL_VERSION(X,Y,Z): X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z from 2.9 on. */
  if (v >= 10000) {
    *major = v / 10000, *minor = v / 100 % 100, *patch = v % 100;
  } else {
    *major = v / 1000, *minor = v / 100 % 10, *patch = v % 100;
  }
}

void symmpin_banner_nccl_version_str(int version, char *buf, size_t cap) {
  if (version < 0) {
    snprintf(buf, cap, "unknown");
    return;
  }
  int ma, mi, pa;
  nccl_decode(version, &ma, &mi, &pa);
  snprintf(buf, cap, "%d.%d.%d", ma, mi, pa);
}

symmpin_nccl_support symmpin_banner_nccl_support(int version) {
  if (version < 0) return SYMMPIN_NCCL_UNKNOWN;
  int ma, mi, pa;
  nccl_decode(version, &ma, &mi, &pa);
  if (ma != SYMMPIN_NCCL_TESTED_MAJOR) return SYMMPIN_NCCL_OTHER_MAJOR;
  if (ma < SYMMPIN_NCCL_MIN_MAJOR || (ma == SYMMPIN_NCCL_MIN_MAJOR && mi < SYMMPIN_NCCL_MIN_MINOR))
    return SYMMPIN_NCCL_TOO_OLD;
  return mi == SYMMPIN_NCCL_TESTED_MINOR ? SYMMPIN_NCCL_TESTED : SYMMPIN_NCCL_EXPECTED;
}

int symmpin_banner_nccl_line(int version, int built, char *buf, size_t cap) {
  char v[32], b[32];
  symmpin_banner_nccl_version_str(version, v, sizeof v);
  symmpin_banner_nccl_version_str(built, b, sizeof b);
  const char *out = "symmpin stays out of this process: every call goes to NCCL "
                    "(docs/compatibility.md)";
  switch (symmpin_banner_nccl_support(version)) {
  case SYMMPIN_NCCL_TESTED: buf[0] = '\0'; return 0;
  case SYMMPIN_NCCL_EXPECTED:
    snprintf(buf, cap,
             "NCCL %s: symmpin is tested with NCCL %d.%d (built against %s); other 2.x versions "
             "from %d.%d on are expected to work (docs/compatibility.md)",
             v, SYMMPIN_NCCL_TESTED_MAJOR, SYMMPIN_NCCL_TESTED_MINOR, b, SYMMPIN_NCCL_MIN_MAJOR,
             SYMMPIN_NCCL_MIN_MINOR);
    return SYMMPIN_LOG_INFO;
  case SYMMPIN_NCCL_TOO_OLD:
    snprintf(buf, cap, "NCCL %s is older than %d.%d, the oldest symmpin supports; %s", v,
             SYMMPIN_NCCL_MIN_MAJOR, SYMMPIN_NCCL_MIN_MINOR, out);
    return SYMMPIN_LOG_WARN;
  case SYMMPIN_NCCL_OTHER_MAJOR:
    snprintf(buf, cap,
             "NCCL %s is a major version symmpin was not built for (built against %s, tested "
             "with %d.%d); %s",
             v, b, SYMMPIN_NCCL_TESTED_MAJOR, SYMMPIN_NCCL_TESTED_MINOR, out);
    return SYMMPIN_LOG_WARN;
  case SYMMPIN_NCCL_UNKNOWN:
  default:
    snprintf(buf, cap, "cannot read NCCL's version (ncclGetVersion not found or failed); %s",
             out);
    return SYMMPIN_LOG_WARN;
  }
}

/* ---- the CUDA driver ---- */

/* CUDA's version codes: 13000 = 13.0, 12080 = 12.8. */
static void cuda_version_str(int v, char *buf, size_t cap) {
  if (v < 0)
    snprintf(buf, cap, "unknown");
  else
    snprintf(buf, cap, "%d.%d", v / 1000, v % 1000 / 10);
}

symmpin_cuda_support symmpin_banner_cuda_support(int driver, int usable) {
  if (driver == 0) return SYMMPIN_CUDA_NO_DRIVER;
  if (driver < 0) return SYMMPIN_CUDA_UNKNOWN;
  if (driver < SYMMPIN_CUDA_MIN_DRIVER) return SYMMPIN_CUDA_DRIVER_TOO_OLD;
  if (usable < 0) return SYMMPIN_CUDA_UNKNOWN;
  return usable ? SYMMPIN_CUDA_OK : SYMMPIN_CUDA_DRIVER_FAILED;
}

int symmpin_banner_cuda_line(const symmpin_banner_facts *f, char *buf, size_t cap) {
  char drv[32];
  cuda_version_str(f->driver_version, drv, sizeof drv);
  const char *out = "symmpin stays out of this process: every call goes to NCCL, as without "
                    "symmpin (docs/compatibility.md)";
  switch (symmpin_banner_cuda_support(f->driver_version, f->driver_usable)) {
  case SYMMPIN_CUDA_OK: buf[0] = '\0'; return 0;
  case SYMMPIN_CUDA_NO_DRIVER:
    snprintf(buf, cap, "no CUDA driver in this process (libcuda.so.1 not found); %s", out);
    break;
  case SYMMPIN_CUDA_DRIVER_TOO_OLD:
    snprintf(buf, cap,
             "the CUDA driver supports CUDA %s; symmpin needs CUDA 12.0 or newer (a driver r525 "
             "or newer); %s",
             drv, out);
    break;
  case SYMMPIN_CUDA_DRIVER_FAILED:
    snprintf(buf, cap, "the CUDA driver (CUDA %s) cannot serve symmpin: %s; %s", drv,
             f->driver_why[0] ? f->driver_why : "reason unknown", out);
    break;
  case SYMMPIN_CUDA_UNKNOWN:
  default:
    snprintf(buf, cap, "cannot read the CUDA driver's version (%s); %s",
             f->driver_why[0] ? f->driver_why : "no answer", out);
    break;
  }
  return SYMMPIN_LOG_INFO;
}

/* ---- the process's verdicts ---- */

/* Decide once for the process; the thread that decides logs the verdict lines. */
static int decide(const symmpin_banner_facts *f) {
  int nccl = (int)symmpin_banner_nccl_support(f->nccl_version);
  int cuda = (int)symmpin_banner_cuda_support(f->driver_version, f->driver_usable);
  int none = -1;
  if (!atomic_compare_exchange_strong(&verdicts, &none, nccl | cuda << 8)) return none;
  char line[SYMMPIN_BANNER_LINE];
  int level = symmpin_banner_nccl_line(f->nccl_version, f->nccl_built, line, sizeof line);
  if (level && SYMMPIN_LOG_ON(level)) symmpin_log_write(level, __FILE__, __LINE__, "%s", line);
  level = symmpin_banner_cuda_line(f, line, sizeof line);
  if (level && SYMMPIN_LOG_ON(level)) symmpin_log_write(level, __FILE__, __LINE__, "%s", line);
  return nccl | cuda << 8;
}

static void versions(symmpin_banner_facts *f) {
  const symmpin_banner_probe *p = probe_get();
  if (p && p->versions) p->versions(f);
}

static int verdicts_get(void) {
  int v = atomic_load_explicit(&verdicts, memory_order_acquire);
  if (v < 0) {
    symmpin_banner_facts f;
    symmpin_banner_facts_init(&f);
    versions(&f);
    v = decide(&f);
  }
  return v;
}

bool symmpin_banner_nccl_supported(void) {
  int v = VERDICT_NCCL(verdicts_get());
  return v == SYMMPIN_NCCL_TESTED || v == SYMMPIN_NCCL_EXPECTED;
}

bool symmpin_banner_cuda_supported(void) { return VERDICT_CUDA(verdicts_get()) == SYMMPIN_CUDA_OK; }

/* ---- the banner ---- */

int symmpin_banner_lines(const symmpin_banner_facts *f, char (*lines)[SYMMPIN_BANNER_LINE],
                         int max) {
  int n = 0;
#define LINE(...)                                                                                  \
  do {                                                                                             \
    if (n < max) snprintf(lines[n++], SYMMPIN_BANNER_LINE, __VA_ARGS__);                           \
  } while (0)
  char a[32], b[32];
  LINE("symmpin %s (%s) active; kernels carry %s", SYMMPIN_VERSION, SYMMPIN_GIT,
       SYMMPIN_KERNEL_ARCHS);
  symmpin_banner_nccl_version_str(f->nccl_version, a, sizeof a);
  symmpin_banner_nccl_version_str(f->nccl_built, b, sizeof b);
  LINE("NCCL %s (symmpin built against %s, tested with %d.%d)", a, b, SYMMPIN_NCCL_TESTED_MAJOR,
       SYMMPIN_NCCL_TESTED_MINOR);
  cuda_version_str(f->driver_version, b, sizeof b);
  char prog[SYMMPIN_BANNER_LINE / 2] = "none loaded";
  for (int i = 0, k = 0; i < f->nprogram_cudarts && i < SYMMPIN_BANNER_MAX_CUDARTS; i++) {
    char v[32];
    cuda_version_str(f->program_cudart[i].version, v, sizeof v);
    int m = snprintf(prog + k, sizeof prog - (size_t)k, "%slibcudart.so.%d %s", i ? ", " : "",
                     f->program_cudart[i].major, v);
    if (m > 0 && (size_t)(k + m) < sizeof prog) k += m;
  }
  if (f->driver_version == 0)
    LINE("no CUDA driver; the program's CUDA runtime: %s", prog);
  else
    LINE("CUDA driver supports CUDA %s (symmpin uses it at the CUDA 12.0 ABI, no runtime of its "
         "own); the program's CUDA runtime: %s",
         b, prog);
  if (f->cc > 0)
    LINE("GPU %d: %s, compute capability %d.%d (sm_%d)", f->device,
         f->gpu_name[0] ? f->gpu_name : "(name unknown)", f->cc / 10, f->cc % 10, f->cc);
  else
    LINE("GPU %d: %s, compute capability unknown", f->device,
         f->gpu_name[0] ? f->gpu_name : "(name unknown)");
  if (f->ngpus < 0) {
    LINE("P2P access: unknown (the number of visible GPUs is unknown)");
  } else if (f->ngpus < 2) {
    LINE("P2P access: %d visible GPU%s", f->ngpus, f->ngpus == 1 ? "" : "s");
  } else {
    int g = f->ngpus < SYMMPIN_BANNER_MAX_GPUS ? f->ngpus : SYMMPIN_BANNER_MAX_GPUS;
    char shown[48] = "";
    if (g < f->ngpus) snprintf(shown, sizeof shown, ", the first %d shown", g);
    LINE("P2P access among %d visible GPUs%s (row: GPU that accesses, column: GPU accessed; "
         "Y yes, N no, ? unknown):",
         f->ngpus, shown);
    char row[SYMMPIN_BANNER_LINE];
    int k = snprintf(row, sizeof row, "P2P    ");
    for (int j = 0; j < g; j++) k += snprintf(row + k, sizeof row - (size_t)k, "%3d", j);
    LINE("%s", row);
    for (int i = 0; i < g; i++) {
      k = snprintf(row, sizeof row, "P2P %2d:", i);
      for (int j = 0; j < g; j++) {
        signed char p = f->p2p[i][j];
        char c = i == j ? '-' : p > 0 ? 'Y' : p == 0 ? 'N' : '?';
        k += snprintf(row + k, sizeof row - (size_t)k, "  %c", c);
      }
      LINE("%s", row);
    }
  }
#undef LINE
  return n;
}

void symmpin_banner_once(int device) {
  if (atomic_exchange(&banner_done, 1)) return;
  symmpin_banner_facts f;
  symmpin_banner_facts_init(&f);
  versions(&f);
  if (SYMMPIN_LOG_ON(SYMMPIN_LOG_INFO)) {
    const symmpin_banner_probe *p = probe_get();
    /* Only where the driver serves symmpin: its GPU questions would only fail. */
    bool cuda_ok =
        symmpin_banner_cuda_support(f.driver_version, f.driver_usable) == SYMMPIN_CUDA_OK;
    if (cuda_ok && p && p->gpu) p->gpu(device, &f);
    static char lines[SYMMPIN_BANNER_MAX_LINES][SYMMPIN_BANNER_LINE]; /* once per process */
    int n = symmpin_banner_lines(&f, lines, SYMMPIN_BANNER_MAX_LINES);
    for (int i = 0; i < n; i++) SYMMPIN_INFO("%s", lines[i]);
  }
  (void)decide(&f);
}
