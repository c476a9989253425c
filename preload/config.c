/* The SYMMPIN_* table and its parsing (config.h). */
#include "preload/config.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/invariant.h"
#include "common/log.h"
#include "planner/warmup.h"
#include "agree/agree.h"
#include "agree/choice.h"

static const char *const debug_levels[] = {"NONE", "WARN", "INFO", "TRACE", NULL};

/* Defaults come from the modules that own them, written as a user would write them. */
#define STR_(x) #x
#define STR(x) STR_(x)

#define OFF(field) offsetof(symmpin_config, field)

/* Order matters for one thing: SYMMPIN_DEBUG and SYMMPIN_DEBUG_FILE come first, so the logger is
 * configured before the others are reported. */
static const symmpin_config_var vars[] = {
    {"SYMMPIN_DEBUG", SYMMPIN_CONFIG_CHOICE, "WARN",
     "log level: NONE, WARN, INFO or TRACE (NCCL-like lines: host:pid:tid [device] symmpin LEVEL)",
     OFF(debug), 0, 0, debug_levels},
    {"SYMMPIN_DEBUG_FILE", SYMMPIN_CONFIG_STRING, "",
     "write the log to this file instead of stderr (%h host, %p pid)", OFF(debug_file), 0, 0, NULL},
    {"SYMMPIN_DISABLE", SYMMPIN_CONFIG_BOOL, "0",
     "pure pass-through: every wrapper calls the real function and nothing else", OFF(disable), 0,
     0, NULL},
    {"SYMMPIN_TRACE", SYMMPIN_CONFIG_STRING, "",
     "write a trace of every wrapped call to this file pattern (%r rank of the process's first "
     "communicator or u, %p pid, %h host); off when unset",
     OFF(trace), 0, 0, NULL},
    {"SYMMPIN_STATS", SYMMPIN_CONFIG_BOOL, "0",
     "print per-communicator, per-site statistics at exit, where the log goes (stderr or "
     "SYMMPIN_DEBUG_FILE)",
     OFF(stats), 0, 0, NULL},
    {"SYMMPIN_STATS_FILE", SYMMPIN_CONFIG_STRING, "",
     "write the statistics as JSON to this file pattern at exit (%r, %p, %h as for SYMMPIN_TRACE)",
     OFF(stats_file), 0, 0, NULL},
    {"SYMMPIN_WARMUP", SYMMPIN_CONFIG_UINT, STR(SYMMPIN_WARMUP_DEFAULT),
     "longest warm-up: collective calls per communicator recorded before the first plan (it ends "
     "earlier once the sequence of calls repeats; docs/planner.md)",
     OFF(warmup), 1, SYMMPIN_WARMUP_MAX, NULL},
    {"SYMMPIN_MAX_BYTES", SYMMPIN_CONFIG_SIZE, STR(SYMMPIN_PLAN_MAX_BYTES_DEFAULT_MIB) "M",
     "largest collective symmpin takes (bytes of its larger buffer); larger ones go to NCCL",
     OFF(max_bytes), 0, (uint64_t)1 << 40, NULL},
    {"SYMMPIN_GROUP_MAX_BYTES", SYMMPIN_CONFIG_SIZE,
     STR(SYMMPIN_PLAN_GROUP_MAX_BYTES_DEFAULT_KIB) "K",
     "largest collective symmpin takes inside ncclGroupStart/End (bytes of its larger buffer); "
     "larger grouped ones go "
     "to NCCL (the smallest value of any rank holds for all); 0: no limit but SYMMPIN_MAX_BYTES",
     OFF(group_max_bytes), 0, (uint64_t)1 << 40, NULL},
    {"SYMMPIN_CAPTURE_BYTES", SYMMPIN_CONFIG_SIZE, STR(SYMMPIN_PLAN_CAPTURE_BYTES_DEFAULT_MIB) "M",
     "symmetric memory per communicator for collectives captured into CUDA graphs (the capture "
     "arena, reserved at the first plan; a graph's calls on one stream share a slot per slot "
     "class); 0: captured calls go to NCCL",
     OFF(capture_bytes), 0, (uint64_t)1 << 36, NULL},
    {"SYMMPIN_PLANNER", SYMMPIN_CONFIG_CHOICE, "shared",
     "slot planner: shared (sites that never overlap share slots) or dedicated (one slot per "
     "site)",
     OFF(planner), 0, 0, symmpin_plan_mode_names},
    {"SYMMPIN_TIMEOUT_MS", SYMMPIN_CONFIG_UINT, STR(SYMMPIN_AGREE_TIMEOUT_MS_DEFAULT),
     "longest wait for a peer's post during a plan agreement, in milliseconds (then that epoch "
     "stays on NCCL)",
     OFF(timeout_ms), 1, 3600000, NULL},
    {"SYMMPIN_KERNEL_TIMEOUT_MS", SYMMPIN_CONFIG_UINT, "0",
     "longest wait of a symmpin kernel for a peer, in milliseconds; 0 (default): no deadline, a "
     "late peer is only late, as with NCCL. When it expires the communicator enters an error "
     "state that ncclCommGetAsyncError and every later collective call report",
     OFF(kernel_timeout_ms), 0, 3600000, NULL},
    {"SYMMPIN_STACK_DEPTH", SYMMPIN_CONFIG_UINT, STR(SYMMPIN_STACK_DEPTH_DEFAULT),
     "return addresses hashed into a call-site id (1 = the direct caller, cheapest; see "
     "docs/callsite.md)",
     OFF(stack_depth), 1, SYMMPIN_STACK_DEPTH_MAX, NULL},
    {"SYMMPIN_WATCH_MS", SYMMPIN_CONFIG_UINT, "100",
     "how often a thread checks every communicator for a divergent call or a kernel that gave up "
     "(the check ncclCommGetAsyncError makes), so that ranks blocked behind one are stopped even "
     "when the program polls nothing; 0: no thread (then only the program's calls check)",
     OFF(watch_ms), 0, 60000, NULL},
    {"SYMMPIN_ALLGATHER", SYMMPIN_CONFIG_BOOL, "1",
     "0 keeps every ncclAllGather on NCCL (statistics reason `off`); 1: symmpin serves them like "
     "all-reduces",
     OFF(allgather), 0, 0, NULL},
    {"SYMMPIN_REDUCESCATTER", SYMMPIN_CONFIG_BOOL, "1",
     "0 keeps every ncclReduceScatter on NCCL (statistics reason `off`); 1: symmpin serves them "
     "like all-reduces",
     OFF(reducescatter), 0, 0, NULL},
    {"SYMMPIN_MEASURE", SYMMPIN_CONFIG_BOOL, "0",
     "time sampled eager collective calls with CUDA events (each site's first 8 calls on each "
     "path, "
     "then one in 16), on NCCL before a site is pinned and on symmpin after, for the "
     "statistics' time per call and the time saved (symmpin run sets it)",
     OFF(measure), 0, 0, NULL},
    {"SYMMPIN_CHOOSE", SYMMPIN_CONFIG_CHOICE, "measure",
     "how a call shape is given to symmpin's kernel or NCCL: measure (time both on sampled eager "
     "calls, 16 per shape and path, and send back to NCCL, for good, every shape whose symmpin "
     "time on the slowest rank is above NCCL's) or static (the size thresholds alone)",
     OFF(choose), 0, 0, symmpin_choice_mode_names},
    {"SYMMPIN_TEST_FAULT", SYMMPIN_CONFIG_STRING, "",
     "tests only: inject one fault, skip:RANK:CALL (that rank fails to launch the kernel of "
     "its CALL-th collective call on each communicator) or diverge:RANK:CALL (that rank sends that "
     "call to NCCL while its peers redirect it)",
     OFF(test_fault), 0, 0, NULL},
    {"SYMMPIN_TEST_ONE_RANK", SYMMPIN_CONFIG_BOOL, "0",
     "tests only: redirect the collectives of one-rank communicators too (otherwise NCCL keeps "
     "them: its one-rank collective is a copy at most), so that one GPU can run the redirect path",
     OFF(test_one_rank), 0, 0, NULL},
};

const symmpin_config_var *symmpin_config_vars(size_t *n) {
  *n = sizeof vars / sizeof vars[0];
  return vars;
}

static bool word_in(const char *s, const char *const *words) {
  for (; *words; words++)
    if (strcasecmp(s, *words) == 0) return true;
  return false;
}

bool symmpin_config_parse_bool(const char *s, bool *out) {
  static const char *const yes[] = {"1", "yes", "on", "true", NULL};
  static const char *const no[] = {"0", "no", "off", "false", NULL};
  if (word_in(s, yes)) {
    *out = true;
    return true;
  }
  if (word_in(s, no)) {
    *out = false;
    return true;
  }
  return false;
}

/* Decimal digits only: strtoull would accept signs and spaces. */
static bool parse_digits(const char *s, const char **end, uint64_t *out) {
  uint64_t v = 0;
  const char *p = s;
  if (!isdigit((unsigned char)*p)) return false;
  for (; isdigit((unsigned char)*p); p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return false; /* overflow */
    v = v * 10 + d;
  }
  *end = p;
  *out = v;
  return true;
}

bool symmpin_config_parse_uint(const char *s, uint64_t *out) {
  const char *end;
  uint64_t v;
  if (!parse_digits(s, &end, &v) || *end) return false;
  *out = v;
  return true;
}

bool symmpin_config_parse_size(const char *s, uint64_t *out) {
  const char *end;
  uint64_t v;
  if (!parse_digits(s, &end, &v)) return false;
  unsigned shift = 0;
  switch (*end) {
  case '\0': break;
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  default: return false;
  }
  if (*end) return false;
  if (shift && v > (UINT64_MAX >> shift)) return false;
  *out = v << shift;
  return true;
}

static bool choice_index(const char *s, const char *const *choices, int *out) {
  for (int i = 0; choices[i]; i++)
    if (strcasecmp(s, choices[i]) == 0) {
      *out = i;
      return true;
    }
  return false;
}

/* Store text into the field of v; false if invalid. */
static bool set_value(const symmpin_config_var *v, const char *text, symmpin_config *cfg) {
  char *field = (char *)cfg + v->offset;
  switch (v->type) {
  case SYMMPIN_CONFIG_BOOL: {
    bool b;
    if (!symmpin_config_parse_bool(text, &b)) return false;
    *(bool *)field = b;
    return true;
  }
  case SYMMPIN_CONFIG_UINT:
  case SYMMPIN_CONFIG_SIZE: {
    uint64_t u;
    bool ok = v->type == SYMMPIN_CONFIG_UINT ? symmpin_config_parse_uint(text, &u)
                                             : symmpin_config_parse_size(text, &u);
    if (!ok || u < v->min || u > v->max) return false;
    /* stack_depth is the one int-typed number; the others are uint64_t */
    if (v->offset == OFF(stack_depth))
      *(int *)field = (int)u;
    else
      *(uint64_t *)field = u;
    return true;
  }
  case SYMMPIN_CONFIG_CHOICE: { /* stored in an int-sized enum field */
    int i;
    if (!choice_index(text, v->choices, &i)) return false;
    _Static_assert(sizeof(symmpin_plan_mode) == sizeof(int), "CHOICE fields are int-sized");
    *(int *)field = i;
    return true;
  }
  case SYMMPIN_CONFIG_STRING:
    if (strlen(text) >= SYMMPIN_CONFIG_PATH_MAX) return false;
    strcpy(field, text);
    return true;
  }
  return false;
}

static const char *type_word(const symmpin_config_var *v) {
  switch (v->type) {
  case SYMMPIN_CONFIG_BOOL: return "boolean (1/yes/on/true, 0/no/off/false)";
  case SYMMPIN_CONFIG_UINT: return "integer in range";
  case SYMMPIN_CONFIG_SIZE: return "size in range (bytes, K/M/G suffix)";
  case SYMMPIN_CONFIG_CHOICE: return "choice";
  case SYMMPIN_CONFIG_STRING: return "path (too long)";
  }
  return "value";
}

/* What a read found, for its log lines: the process's read keeps them for the first
 * communicator (a process that never creates one logs nothing: docs/config.md). The texts are
 * copies (a later setenv may free the environment's); a longer one is cut for the log. */
#define NVARS (sizeof vars / sizeof vars[0])
enum { NOTE_UNSET, NOTE_SET, NOTE_INVALID };
typedef struct config_notes {
  unsigned char state[NVARS];
  char text[NVARS][SYMMPIN_CONFIG_PATH_MAX];
} config_notes;

static void config_parse(const char *(*get)(const char *name, void *arg), void *arg,
                         symmpin_config *out, config_notes *notes) {
  symmpin_config cfg;
  memset(&cfg, 0, sizeof cfg);
  for (size_t i = 0; i < NVARS; i++) {
    bool ok = set_value(&vars[i], vars[i].def, &cfg);
    SYMMPIN_ASSERT(ok); /* every default is valid (tests/preload/test_config.c checks it too) */
  }
  for (size_t i = 0; i < NVARS; i++) {
    const char *text = get(vars[i].name, arg);
    notes->state[i] = !text                             ? NOTE_UNSET
                      : set_value(&vars[i], text, &cfg) ? NOTE_SET
                                                        : NOTE_INVALID;
    if (text) snprintf(notes->text[i], sizeof notes->text[i], "%s", text);
  }
  *out = cfg;
}

static void config_notes_log(const config_notes *notes) {
  for (size_t i = 0; i < NVARS; i++) {
    if (notes->state[i] == NOTE_SET)
      SYMMPIN_INFO("%s=%s (%s)", vars[i].name, notes->text[i], vars[i].meaning);
    else if (notes->state[i] == NOTE_INVALID)
      SYMMPIN_WARN("%s=\"%s\" is not a valid %s; keeping the default \"%s\"", vars[i].name,
                   notes->text[i], type_word(&vars[i]), vars[i].def);
  }
}

void symmpin_config_read(const char *(*get)(const char *name, void *arg), void *arg,
                         symmpin_config *out) {
  config_notes notes;
  config_parse(get, arg, out, &notes);
  config_notes_log(&notes);
}

static const char *env_get(const char *name, void *arg) {
  (void)arg;
  return getenv(name);
}

static symmpin_config process_config;
static config_notes process_notes;
static pthread_once_t process_once = PTHREAD_ONCE_INIT;
static _Atomic int process_logged;

static void process_read(void) {
  /* The logger first, so that what is logged later goes at the level and to the file asked for;
   * the file is opened by the first line written (none: no file). */
  int level = SYMMPIN_LOG_WARN;
  const char *d = getenv("SYMMPIN_DEBUG");
  if (d) (void)choice_index(d, debug_levels, &level);
  const char *f = getenv("SYMMPIN_DEBUG_FILE");
  if (f && *f) symmpin_log_set_file(f);
  symmpin_log_configure((symmpin_log_level)level, -1);
  config_parse(env_get, NULL, &process_config, &process_notes);
}

const symmpin_config *symmpin_config_get(void) {
  pthread_once(&process_once, process_read);
  return &process_config;
}

unsigned symmpin_config_colls_off(const symmpin_config *cfg) {
  return (cfg->allgather ? 0u : 1u << SYMMPIN_COLL_ALLGATHER) |
         (cfg->reducescatter ? 0u : 1u << SYMMPIN_COLL_REDUCESCATTER);
}

void symmpin_config_log_once(void) {
  pthread_once(&process_once, process_read);
  if (!atomic_exchange(&process_logged, 1)) config_notes_log(&process_notes);
}

void symmpin_config_set_for_tests(const symmpin_config *cfg) {
  pthread_once(&process_once, process_read); /* so that a later first use cannot overwrite it */
  process_config = *cfg;
}
