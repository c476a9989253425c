/* symmpin-replay's start on glibc 2.28 (common/glibc_compat.h; docs/packaging.md). The start file
 * that the compiler links into every program (Scrt1.o) calls __libc_start_main, which links to
 * the newest version: GLIBC_2.34 where glibc is 2.34 or newer, since 2.34 runs the program's
 * constructors itself when the start file passes none. This file defines __libc_start_main in
 * the program, hidden (the start file's call comes here; nothing outside sees it), and calls the
 * GLIBC_2.2.5 version that every glibc has, with the constructors passed the way the start files
 * before 2.34 passed them (their __libc_csu_init): _init, then .init_array. glibc 2.34 and newer
 * run what they are given then, in place of their own walk of the same two (both versions are one
 * function there); destructors run from the dynamic linker's exit on every version. */
#if defined(__x86_64__) && defined(__linux__)
#include <stddef.h>

typedef int (*symmpin_main_fn)(int, char **, char **);
typedef void (*symmpin_init_fn)(int, char **, char **);

extern void _init(void) __attribute__((weak, visibility("hidden"))); /* crti.o; zig has none */
extern symmpin_init_fn __init_array_start[] __attribute__((visibility("hidden")));
extern symmpin_init_fn __init_array_end[] __attribute__((visibility("hidden")));

int symmpin_glibc_start_main(symmpin_main_fn main, int argc, char **argv, symmpin_init_fn init,
                             void (*fini)(void), void (*rtld_fini)(void), void *stack_end);
__asm__(".symver symmpin_glibc_start_main, __libc_start_main@GLIBC_2.2.5");

static void run_constructors(int argc, char **argv, char **envp) {
  if (_init) _init();
  size_t n = (size_t)(__init_array_end - __init_array_start);
  for (size_t i = 0; i < n; i++) __init_array_start[i](argc, argv, envp);
}

__attribute__((visibility("hidden"))) int
__libc_start_main(symmpin_main_fn main, int argc, char **argv, symmpin_init_fn init,
                  void (*fini)(void), void (*rtld_fini)(void), void *stack_end);
__attribute__((visibility("hidden"))) int
__libc_start_main(symmpin_main_fn main, int argc, char **argv, symmpin_init_fn init,
                  void (*fini)(void), void (*rtld_fini)(void), void *stack_end) {
  (void)init; /* none from 2.34's start file; before 2.34 its __libc_csu_init, the same walk */
  return symmpin_glibc_start_main(main, argc, argv, run_constructors, fini, rtld_fini, stack_end);
}
#else
typedef int symmpin_glibc_start_unused; /* ISO C wants a declaration in every file */
#endif
