/* glibc 2.28 for libsymmpin.so and symmpin-replay: the wheel is tagged manylinux_2_28, PyTorch's
 * tag (docs/packaging.md, "The wheel's tag"). meson.build force-includes this header into every
 * C file of a build that makes the library (x86_64 Linux, not cpu_only).
 *
 * glibc 2.34 moved the functions of libdl.so.2, libpthread.so.0 and librt.so.1 into libc.so.6
 * under a new version, GLIBC_2.34 (pthread_sigmask: 2.32 moved it into libc), and kept the old
 * versions there as compatibility symbols. A call links to the newest version unless pinned: each
 * pin below binds it to the version glibc 2.28 has. On 2.34 and newer, libc.so.6 defines it; on
 * older ones the old library does, and the dynamic linker takes a versioned symbol from any
 * object loaded, so the library and symmpin-replay name the three in NEEDED (meson.build:
 * glibc_compat_link_args; empty placeholders from 2.34 on). A pin in a file that does not call
 * the function does nothing.
 *
 * Functions glibc 2.28 lacks altogether are not called: stat, fstat, lstat and fstatat (2.33 made
 * them functions; before, <sys/stat.h> turned them into calls of __xstat64 & co) go to
 * glibc_compat.c through -Wl,--wrap, and preload/comm.c takes pthread_mutex_timedlock, not
 * pthread_mutex_clocklock (2.30). symmpin-replay's start goes through tools/glibc_start.c.
 * A new call of a function of a newer glibc fails CI: scripts/check-glibc.py, auditwheel. */
#ifndef SYMMPIN_COMMON_GLIBC_COMPAT_H
#define SYMMPIN_COMMON_GLIBC_COMPAT_H

#if defined(__x86_64__) && defined(__linux__)
/* libdl.so.2 before 2.34 */
__asm__(".symver dladdr, dladdr@GLIBC_2.2.5");
__asm__(".symver dladdr1, dladdr1@GLIBC_2.3.3");
__asm__(".symver dlclose, dlclose@GLIBC_2.2.5");
__asm__(".symver dlerror, dlerror@GLIBC_2.2.5");
__asm__(".symver dlopen, dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym, dlsym@GLIBC_2.2.5");
/* libpthread.so.0 before 2.34 (pthread_sigmask: before 2.32) */
__asm__(".symver pthread_create, pthread_create@GLIBC_2.2.5");
__asm__(".symver pthread_detach, pthread_detach@GLIBC_2.2.5");
__asm__(".symver pthread_join, pthread_join@GLIBC_2.2.5");
__asm__(".symver pthread_mutex_timedlock, pthread_mutex_timedlock@GLIBC_2.2.5");
__asm__(".symver pthread_mutex_trylock, pthread_mutex_trylock@GLIBC_2.2.5");
__asm__(".symver pthread_once, pthread_once@GLIBC_2.2.5");
__asm__(".symver pthread_rwlock_destroy, pthread_rwlock_destroy@GLIBC_2.2.5");
__asm__(".symver pthread_rwlock_init, pthread_rwlock_init@GLIBC_2.2.5");
__asm__(".symver pthread_rwlock_rdlock, pthread_rwlock_rdlock@GLIBC_2.2.5");
__asm__(".symver pthread_rwlock_unlock, pthread_rwlock_unlock@GLIBC_2.2.5");
__asm__(".symver pthread_rwlock_wrlock, pthread_rwlock_wrlock@GLIBC_2.2.5");
__asm__(".symver pthread_sigmask, pthread_sigmask@GLIBC_2.2.5");
__asm__(".symver pthread_timedjoin_np, pthread_timedjoin_np@GLIBC_2.3.3");
/* librt.so.1 before 2.34 */
__asm__(".symver shm_open, shm_open@GLIBC_2.2.5");
__asm__(".symver shm_unlink, shm_unlink@GLIBC_2.2.5");
#endif

#endif
