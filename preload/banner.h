/* The version banner, the NCCL version policy and the CUDA driver policy.
 *
 * Once per process, when symmpin becomes active (the first communicator init), the banner logs at
 * INFO which symmpin this is and what it runs on: NCCL's version, the CUDA driver symmpin uses
 * (at the CUDA 12.0 ABI, driver/cu.h) and the program's CUDA runtimes, the GPU and the P2P access
 * matrix among the visible GPUs. The same moment decides whether the NCCL in the process is one
 * symmpin may work with (symmpin_banner_nccl_supported; when not, one WARN line says why) and
 * whether the driver can serve symmpin (symmpin_banner_cuda_supported: CUDA 12.0 or newer, every
 * entry point there; when not, one INFO line says why, and the program runs exactly as without
 * symmpin: every call goes to NCCL).
 *
 * Plain C without CUDA or NCCL headers: the facts come from a probe that interpose/ installs when
 * the library loads (interpose/banner_probe.c: the real ncclGetVersion, the driver, the program's
 * runtimes). Until then every fact reads "unknown" (CPU tests that install nothing). */
#ifndef SYMMPIN_PRELOAD_BANNER_H
#define SYMMPIN_PRELOAD_BANNER_H

#include <stdbool.h>
#include <stddef.h>

/* The NCCL symmpin is built and tested with (its datatype and op numbers, communicator API and
 * error codes: interpose/nccl_wrap.c checks them against nccl.h at compile time), and the oldest
 * it supports: non-blocking communicators and ncclCommFinalize (2.14), ncclCommSplit, whose
 * children symmpin keys from the parent (2.18). Versions are NCCL's codes: 22803 = 2.28.3. */
#define SYMMPIN_NCCL_TESTED_MAJOR 2
#define SYMMPIN_NCCL_TESTED_MINOR 28
#define SYMMPIN_NCCL_MIN_MAJOR 2
#define SYMMPIN_NCCL_MIN_MINOR 18

/* The oldest driver symmpin works with: CUDA 12.0 (r525), the ABI it asks every entry point for
 * (driver/cu.h's SYMMPIN_CU_ABI; interpose/banner_probe.c checks they agree). */
#define SYMMPIN_CUDA_MIN_DRIVER 12000

/* The program's CUDA runtimes the banner names (libcudart.so.<major> already loaded). */
#define SYMMPIN_BANNER_MAX_CUDARTS 4

/* The P2P matrix covers at most this many GPUs (the first ones). */
#define SYMMPIN_BANNER_MAX_GPUS 16
/* A banner line is at most this long (with its NUL); the banner has at most this many lines. */
#define SYMMPIN_BANNER_LINE 256
#define SYMMPIN_BANNER_MAX_LINES (6 + SYMMPIN_BANNER_MAX_GPUS)

typedef struct symmpin_banner_facts {
  int nccl_version;     /* ncclGetVersion of the NCCL in the process; -1 unknown */
  int nccl_built;       /* NCCL_VERSION_CODE of the nccl.h symmpin was built with; -1 unknown */
  int driver_version;   /* cuDriverGetVersion: the newest CUDA the driver supports, 0 no driver
                           (no libcuda.so.1); -1 unknown */
  int driver_usable;    /* 1: symmpin opened the driver (every entry point, cuInit); 0 not (why
                           says why); -1 unknown */
  char driver_why[200]; /* driver/cu.h's reason when not usable ("" otherwise) */
  int nprogram_cudarts; /* the program's runtimes already loaded (never loaded by symmpin) */
  struct {
    int major;   /* libcudart.so.<major> */
    int version; /* its cudaRuntimeGetVersion; -1 unknown */
  } program_cudart[SYMMPIN_BANNER_MAX_CUDARTS];
  int device;           /* the GPU described (the first communicator's); -1 unknown */
  char gpu_name[96];    /* its name; "" unknown */
  int cc;               /* its compute capability x10 (90 = 9.0 = sm_90); 0 unknown */
  int ngpus;            /* GPUs visible to the process; -1 unknown */
  /* p2p[i][j]: GPU i can access GPU j's memory (cudaDeviceCanAccessPeer): 1 yes, 0 no,
   * -1 unknown; for i, j < min(ngpus, SYMMPIN_BANNER_MAX_GPUS), i != j. */
  signed char p2p[SYMMPIN_BANNER_MAX_GPUS][SYMMPIN_BANNER_MAX_GPUS];
} symmpin_banner_facts;

/* Every field "unknown". */
void symmpin_banner_facts_init(symmpin_banner_facts *f);

/* What interpose/ supplies. `versions` fills the NCCL, driver and runtime facts (cheap: always
 * asked, at the first communicator); `gpu` fills the rest for GPU `device` (-1: the calling
 * thread's current one), asked only when the banner is logged (INFO) and the driver is usable.
 * Either may be NULL. */
typedef struct symmpin_banner_probe {
  void (*versions)(symmpin_banner_facts *f);
  void (*gpu)(int device, symmpin_banner_facts *f);
} symmpin_banner_probe;

/* Install the probe (copied), once, when the library loads. */
void symmpin_banner_install(const symmpin_banner_probe *p);

/* Log the banner (INFO) and the verdict lines (NCCL, CUDA driver: see below) for GPU `device`, the
 * first time it is called in the process; later calls return at once. Called from the
 * communicator init event. */
void symmpin_banner_once(int device);

/* The verdict on an NCCL version (a pure function of the code). */
typedef enum symmpin_nccl_support {
  SYMMPIN_NCCL_TESTED = 0,   /* the major.minor symmpin is tested with */
  SYMMPIN_NCCL_EXPECTED = 1, /* same major, not older than the minimum, untested: expected to work
                                (one INFO line) */
  SYMMPIN_NCCL_TOO_OLD = 2,  /* older than the minimum: symmpin stays on NCCL (one WARN line) */
  SYMMPIN_NCCL_OTHER_MAJOR = 3, /* a major version symmpin was not built for (its numbering of
                                   datatypes and ops may differ): stays on NCCL (one WARN line) */
  SYMMPIN_NCCL_UNKNOWN = 4,  /* the version could not be read: stays on NCCL (one WARN line) */
} symmpin_nccl_support;

symmpin_nccl_support symmpin_banner_nccl_support(int version);
/* "2.28.9" from NCCL's code (both encodings: 2.8.4 = 2804, 2.28.9 = 22809); "unknown" for < 0. */
void symmpin_banner_nccl_version_str(int version, char *buf, size_t cap);

/* Whether symmpin may take any call in this process: false when the NCCL in the process is too
 * old, of another major version, or of unknown version. Decided once (the first call asks the
 * probe and logs the verdict line if the banner has not yet); cheap afterwards. The engine asks
 * it before it sets up a communicator, and keeps that communicator on NCCL when false. */
bool symmpin_banner_nccl_supported(void);

/* The verdict on the CUDA driver (a pure function of the facts): `driver` is the CUDA version it
 * supports (12040 = 12.4; 0: no driver; -1 unknown), `usable` whether symmpin could open it
 * (driver/cu.h: 1, 0, -1 unknown). symmpin needs CUDA 12.0 (r525) or newer: its kernels are CUDA
 * 12 cubins and every entry point is asked for at the 12.0 ABI, so any newer driver serves it
 * (a CUDA 12 driver by NVIDIA's minor version compatibility). */
typedef enum symmpin_cuda_support {
  SYMMPIN_CUDA_OK = 0,
  SYMMPIN_CUDA_NO_DRIVER = 1,      /* no CUDA driver in the process (no libcuda.so.1) */
  SYMMPIN_CUDA_DRIVER_TOO_OLD = 2, /* the driver supports a CUDA older than 12.0 */
  SYMMPIN_CUDA_DRIVER_FAILED = 3,  /* new enough, but it cannot serve symmpin (an entry point
                                      missing, cuInit failed: no GPU, ...) */
  SYMMPIN_CUDA_UNKNOWN = 4,        /* the version could not be read */
} symmpin_cuda_support;

symmpin_cuda_support symmpin_banner_cuda_support(int driver, int usable);
/* The INFO line for the facts' CUDA verdict ("" and 0 when the driver serves symmpin); returns
 * the level it is logged at (SYMMPIN_LOG_INFO) or 0. */
int symmpin_banner_cuda_line(const symmpin_banner_facts *f, char *buf, size_t cap);

/* Whether the driver can serve symmpin in this process. Decided once, with the
 * NCCL verdict (the first call asks the probe and logs the verdict lines if the banner has not
 * yet); cheap afterwards. The engine asks it before anything else when it sets up a communicator:
 * when false, it makes no CUDA call and keeps the communicator on NCCL without a line of its own
 * (the process's one INFO line said why). */
bool symmpin_banner_cuda_supported(void);

/* The banner's lines for `f` (no level or prefix, no newline); returns how many (at most `max`).
 * Line 0: "symmpin <version> (<git>) active"; then NCCL, CUDA, GPU, and the P2P matrix. */
int symmpin_banner_lines(const symmpin_banner_facts *f, char (*lines)[SYMMPIN_BANNER_LINE],
                         int max);
/* The verdict line for NCCL version `version` ("" for SYMMPIN_NCCL_TESTED); returns the level it
 * is logged at (common/log.h: SYMMPIN_LOG_WARN, SYMMPIN_LOG_INFO), 0 for none. */
int symmpin_banner_nccl_line(int version, int built, char *buf, size_t cap);

#endif
