/* Finding the real CUDA runtime and NCCL functions behind our wrappers.
 *
 * Order: dlsym(RTLD_NEXT) (the usual case: the library sits in the global scope after us), then
 * the already-loaded library by soname with dlopen(RTLD_NOLOAD) — needed when a program loads NCCL
 * without RTLD_GLOBAL (PyTorch under torchrun), where RTLD_NEXT finds nothing. An address inside
 * libsymmpin itself is never accepted. Resolution is lazy (NCCL may be loaded after us) and cached;
 * a miss is retried at the next call and warned about once per symbol. */
#ifndef SYMMPIN_INTERPOSE_REAL_H
#define SYMMPIN_INTERPOSE_REAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "interpose/wrapped.h"

typedef enum symmpin_real_lib {
  SYMMPIN_REAL_CUDART = 0, /* libcudart.so.13, .so.12, .so */
  SYMMPIN_REAL_NCCL = 1,   /* libnccl.so.2, .so */
} symmpin_real_lib;

typedef struct symmpin_real_sym {
  _Atomic(void *) fn;
  const char *name;
  symmpin_real_lib lib;
  atomic_int warned;
} symmpin_real_sym;

#define SYMMPIN_REAL_SYM_INIT(lib, name) {NULL, #name, (lib), 0}

/* The real function behind every wrapper (interpose/wrapped.h): symmpin_real_<name>, resolved
 * lazily, defined in real_table.c. */
#define SYMMPIN_REAL_DECLARE(lib, name) extern symmpin_real_sym symmpin_real_##name;
SYMMPIN_WRAPPED(SYMMPIN_REAL_DECLARE)
#undef SYMMPIN_REAL_DECLARE

/* Resolve now (no cache): NULL if not found or only found in libsymmpin. */
void *symmpin_real_lookup(symmpin_real_lib lib, const char *name);
/* Slow path of symmpin_real_get: resolve, cache, warn once on failure. */
void *symmpin_real_resolve(symmpin_real_sym *s);

static inline void *symmpin_real_get(symmpin_real_sym *s) {
  void *p = atomic_load_explicit(&s->fn, memory_order_acquire);
  return p ? p : symmpin_real_resolve(s);
}

/* Whether addr lies in the module that holds this code (libsymmpin when preloaded). */
bool symmpin_real_is_ours(const void *addr);

#endif
