/* FAKE for CPU tests: an NVTX tool. NVTX v3 loads the library NVTX_INJECTION64_PATH names at a
 * process's first NVTX call and calls its InitializeInjectionNvtx2 with NVTX's export table; this
 * one installs its own functions for the domain API (nvtxDomainCreateA, nvtxDomainRangePushEx,
 * nvtxDomainRangePop, nvtxDomainMarkEx) through the table's callbacks (NVTX_ETID_CALLBACKS,
 * module NVTX_CB_MODULE_CORE2), as Nsight Systems does, and appends one line per call to the file
 * SYMMPIN_TEST_NVTX_LOG names:
 *
 *   domain <name>        nvtxDomainCreateA
 *   push <name>          nvtxDomainRangePushEx (ASCII messages; "push ?" for another kind)
 *   pop                  nvtxDomainRangePop
 *   mark <name>          nvtxDomainMarkEx
 *
 * Every call of a domain other than the ones it created is logged as "foreign ..." (there is none
 * in symmpin). Without SYMMPIN_TEST_NVTX_LOG it refuses to start (InitializeInjectionNvtx2 returns
 * 0), so NVTX turns every call into a no-op. Thread-safe (one write per line, under a lock). */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NVTX_NO_IMPL /* a tool: NVTX's types and ids, not its implementation */
#include <nvToolsExt.h>

static int log_fd = -1;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

#define MAX_DOMAINS 8
static struct nvtxDomainRegistration_st { char name[64]; } domains[MAX_DOMAINS];
static int ndomains;

static void record(const char *what, const char *name) {
  char line[1024];
  int n = snprintf(line, sizeof line, "%s%s%s\n", what, name ? " " : "", name ? name : "");
  if (n <= 0) return;
  if ((size_t)n >= sizeof line) n = sizeof line - 1;
  pthread_mutex_lock(&log_lock);
  ssize_t w = write(log_fd, line, (size_t)n);
  pthread_mutex_unlock(&log_lock);
  (void)w;
}

static int known(nvtxDomainHandle_t d) {
  for (int i = 0; i < ndomains; i++)
    if (d == &domains[i]) return 1;
  return 0;
}

static const char *message_of(const nvtxEventAttributes_t *a) {
  return a && a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii ? a->message.ascii
                                                                            : "?";
}

static nvtxDomainHandle_t NVTX_API domain_create(const char *name) {
  pthread_mutex_lock(&log_lock);
  nvtxDomainHandle_t d = ndomains < MAX_DOMAINS ? &domains[ndomains++] : NULL;
  if (d) snprintf(d->name, sizeof d->name, "%s", name ? name : "");
  pthread_mutex_unlock(&log_lock);
  record("domain", name);
  return d;
}

static int NVTX_API range_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  record(known(d) ? "push" : "foreign push", message_of(a));
  return 0;
}

static int NVTX_API range_pop(nvtxDomainHandle_t d) {
  record(known(d) ? "pop" : "foreign pop", NULL);
  return 0;
}

static void NVTX_API mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  record(known(d) ? "mark" : "foreign mark", message_of(a));
}

__attribute__((visibility("default"))) int
InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  const char *path = getenv("SYMMPIN_TEST_NVTX_LOG");
  if (!path || !path[0]) return 0;
  const NvtxExportTableCallbacks *callbacks =
      (const NvtxExportTableCallbacks *)get_export_table(NVTX_ETID_CALLBACKS);
  NvtxFunctionTable table = NULL;
  unsigned int size = 0;
  if (!callbacks || !callbacks->GetModuleFunctionTable ||
      !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || !table ||
      size <= NVTX_CBID_CORE2_DomainCreateA)
    return 0;
  log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return 0;
  *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)domain_create;
  *table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)range_push;
  *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)range_pop;
  *table[NVTX_CBID_CORE2_DomainMarkEx] = (NvtxFunctionPointer)mark;
  return 1;
}
