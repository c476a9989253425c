/* The configuration: ONE table of SYMMPIN_* environment variables (name, default, meaning), read
 * once per process. Each variable that is set is logged at INFO and an invalid value warns and
 * keeps the default, at the process's first communicator (symmpin_config_log_once): a process
 * that never creates one sees no line of symmpin. Booleans take 1/yes/on/true and 0/no/off/false
 * (any case); sizes take a K, M or G suffix (powers of 1024). docs/config.md is this table in
 * prose. */
#ifndef SYMMPIN_PRELOAD_CONFIG_H
#define SYMMPIN_PRELOAD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/plan.h"

#define SYMMPIN_CONFIG_PATH_MAX 512

/* SYMMPIN_STACK_DEPTH: return addresses hashed into a call-site id (interpose/callsite.h). The
 * setting is the configuration's; the hashing is interpose's, which includes this header. */
#define SYMMPIN_STACK_DEPTH_DEFAULT 1
#define SYMMPIN_STACK_DEPTH_MAX 32

typedef struct symmpin_config {
  bool disable;                              /* SYMMPIN_DISABLE */
  int debug;                                 /* SYMMPIN_DEBUG: symmpin_log_level */
  char debug_file[SYMMPIN_CONFIG_PATH_MAX];  /* SYMMPIN_DEBUG_FILE, "" = stderr */
  char trace[SYMMPIN_CONFIG_PATH_MAX];       /* SYMMPIN_TRACE pattern, "" = off */
  bool stats;                                /* SYMMPIN_STATS */
  char stats_file[SYMMPIN_CONFIG_PATH_MAX];  /* SYMMPIN_STATS_FILE, "" = none */
  uint64_t warmup;                           /* SYMMPIN_WARMUP: all-reduce calls per comm */
  uint64_t max_bytes;                        /* SYMMPIN_MAX_BYTES */
  uint64_t group_max_bytes;                  /* SYMMPIN_GROUP_MAX_BYTES: 0 = none */
  uint64_t capture_bytes;                    /* SYMMPIN_CAPTURE_BYTES: the capture arena */
  symmpin_plan_mode planner;                 /* SYMMPIN_PLANNER */
  uint64_t timeout_ms;                       /* SYMMPIN_TIMEOUT_MS: the agreement's waits */
  uint64_t kernel_timeout_ms;                /* SYMMPIN_KERNEL_TIMEOUT_MS: 0 = no deadline */
  int stack_depth;                           /* SYMMPIN_STACK_DEPTH */
  bool measure;                              /* SYMMPIN_MEASURE: time sampled calls */
  int choose;                                /* SYMMPIN_CHOOSE: symmpin_choice_mode */
  uint64_t watch_ms;                         /* SYMMPIN_WATCH_MS: the watch thread, 0 = none */
  char test_fault[SYMMPIN_CONFIG_PATH_MAX];  /* SYMMPIN_TEST_FAULT: tests only, "" = none */
  bool test_one_rank;                        /* SYMMPIN_TEST_ONE_RANK: tests only */
  bool allgather;                            /* SYMMPIN_ALLGATHER: 0 keeps them on NCCL */
  bool reducescatter;                        /* SYMMPIN_REDUCESCATTER: 0 keeps them on NCCL */
} symmpin_config;

typedef enum symmpin_config_type {
  SYMMPIN_CONFIG_BOOL,
  SYMMPIN_CONFIG_UINT,   /* decimal integer in [min, max] */
  SYMMPIN_CONFIG_SIZE,   /* bytes, with an optional K/M/G suffix, in [min, max] */
  SYMMPIN_CONFIG_CHOICE, /* one of `choices` (any case); stored as its index */
  SYMMPIN_CONFIG_STRING, /* a path or pattern */
} symmpin_config_type;

typedef struct symmpin_config_var {
  const char *name;
  symmpin_config_type type;
  const char *def;     /* the default, written as a user would write it ("" = unset) */
  const char *meaning; /* one line, for docs/config.md and the INFO log */
  size_t offset;       /* where the value goes in symmpin_config */
  uint64_t min, max;   /* UINT and SIZE */
  const char *const *choices; /* CHOICE: NULL-terminated */
} symmpin_config_var;

/* The table (n entries). */
const symmpin_config_var *symmpin_config_vars(size_t *n);

/* Value parsers; false (output untouched) when the text is not a valid value. */
bool symmpin_config_parse_bool(const char *s, bool *out);
bool symmpin_config_parse_uint(const char *s, uint64_t *out);
bool symmpin_config_parse_size(const char *s, uint64_t *out);

/* Fill *out from the defaults, then from every variable `get(name, arg)` returns non-NULL for,
 * logging each set one at INFO and warning (and keeping the default) for invalid ones, now. */
void symmpin_config_read(const char *(*get)(const char *name, void *arg), void *arg,
                         symmpin_config *out);

/* The configuration in force: the ONE source every module reads. Read from the environment on
 * first use (thread-safe), quietly, which also applies SYMMPIN_DEBUG and SYMMPIN_DEBUG_FILE to the
 * logger before anything is logged (the file is created by the first line written). */
const symmpin_config *symmpin_config_get(void);
/* The collectives (common/types.h) the settings keep on NCCL (SYMMPIN_ALLGATHER=0,
 * SYMMPIN_REDUCESCATTER=0), as a mask of 1 << coll: the plan's `supports` folds it in (ranks that
 * differ get different digests), and routing and the capture arena refuse them (reason off). */
unsigned symmpin_config_colls_off(const symmpin_config *cfg);

/* Log what the process's read found (the INFO and WARN lines of symmpin_config_read), the first
 * time it is called; the preload calls it at the first communicator. */
void symmpin_config_log_once(void);

/* Tests only: put `cfg` in force instead of the environment (before the threads that read it). */
void symmpin_config_set_for_tests(const symmpin_config *cfg);

#endif
