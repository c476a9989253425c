/* Real-symbol resolution with the RTLD_NOLOAD fallback (real.h). */
#include "interpose/real.h"

#include <dlfcn.h>
#include <stddef.h>

#include "common/log.h"

static const char *const cudart_names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
static const char *const nccl_names[] = {"libnccl.so.2", "libnccl.so"};

static const void *our_base(void) {
  static _Atomic(const void *) base;
  const void *b = atomic_load_explicit(&base, memory_order_acquire);
  if (!b) {
    Dl_info info;
    if (dladdr((const void *)&our_base, &info) && info.dli_fbase) b = info.dli_fbase;
    atomic_store_explicit(&base, b, memory_order_release);
  }
  return b;
}

bool symmpin_real_is_ours(const void *addr) {
  Dl_info info;
  if (!dladdr(addr, &info)) return false;
  return info.dli_fbase == our_base();
}

static void *accept(void *p) { return (p && !symmpin_real_is_ours(p)) ? p : NULL; }

void *symmpin_real_lookup(symmpin_real_lib lib, const char *name) {
  void *p = accept(dlsym(RTLD_NEXT, name));
  if (p) {
    SYMMPIN_TRACE("real %s at %p via RTLD_NEXT", name, p);
    return p;
  }
  const char *const *names = lib == SYMMPIN_REAL_NCCL ? nccl_names : cudart_names;
  size_t n = lib == SYMMPIN_REAL_NCCL ? sizeof nccl_names / sizeof *nccl_names
                                      : sizeof cudart_names / sizeof *cudart_names;
  for (size_t i = 0; i < n && !p; i++) {
    /* RTLD_NOLOAD: only a library the program already loaded, in whatever scope it sits. */
    void *h = dlopen(names[i], RTLD_NOLOAD | RTLD_LAZY);
    if (!h) continue;
    p = accept(dlsym(h, name));
    dlclose(h); /* drops the reference NOLOAD took; the library stays loaded */
    if (p) SYMMPIN_TRACE("real %s at %p via %s (RTLD_NOLOAD)", name, p, names[i]);
  }
  return p;
}

void *symmpin_real_resolve(symmpin_real_sym *s) {
  void *p = symmpin_real_lookup(s->lib, s->name);
  if (p) {
    atomic_store_explicit(&s->fn, p, memory_order_release);
    return p;
  }
  if (atomic_exchange(&s->warned, 1) == 0)
    SYMMPIN_WARN("cannot find the real %s (%s not loaded in this process?); failing the call with "
                 "%s",
                 s->name, s->lib == SYMMPIN_REAL_NCCL ? "libnccl.so.2" : "libcudart.so",
                 s->lib == SYMMPIN_REAL_NCCL ? "ncclSystemError" : "cudaErrorUnknown");
  return NULL;
}
