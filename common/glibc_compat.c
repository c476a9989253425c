/* stat, fstat, lstat and fstatat as glibc before 2.33 had them (common/glibc_compat.h): 2.33
 * made them functions (stat64@GLIBC_2.33 & co); before, <sys/stat.h> turned each call into one of
 * __xstat64, __fxstat64, __lxstat64 or __fxstatat64 with the version of struct stat, which every
 * glibc since still defines. libsymmpin.so and symmpin-replay link with -Wl,--wrap=stat64 & co
 * (meson.build: glibc_compat_link_args), so their calls come here; the test programs, which run
 * only where they are built, call glibc's own. */
#if defined(__x86_64__) && defined(__linux__)
#include <sys/stat.h>

/* _STAT_VER of x86_64's <bits/stat.h> before 2.33 (_STAT_VER_LINUX): struct stat as it is. */
#define SYMMPIN_STAT_VER 1

int symmpin_glibc_xstat64(int ver, const char *path, struct stat64 *st);
int symmpin_glibc_fxstat64(int ver, int fd, struct stat64 *st);
int symmpin_glibc_lxstat64(int ver, const char *path, struct stat64 *st);
int symmpin_glibc_fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);
__asm__(".symver symmpin_glibc_xstat64, __xstat64@GLIBC_2.2.5");
__asm__(".symver symmpin_glibc_fxstat64, __fxstat64@GLIBC_2.2.5");
__asm__(".symver symmpin_glibc_lxstat64, __lxstat64@GLIBC_2.2.5");
__asm__(".symver symmpin_glibc_fxstatat64, __fxstatat64@GLIBC_2.4");

int __wrap_stat64(const char *path, struct stat64 *st);
int __wrap_fstat64(int fd, struct stat64 *st);
int __wrap_lstat64(const char *path, struct stat64 *st);
int __wrap_fstatat64(int dirfd, const char *path, struct stat64 *st, int flags);

int __wrap_stat64(const char *path, struct stat64 *st) {
  return symmpin_glibc_xstat64(SYMMPIN_STAT_VER, path, st);
}
int __wrap_fstat64(int fd, struct stat64 *st) {
  return symmpin_glibc_fxstat64(SYMMPIN_STAT_VER, fd, st);
}
int __wrap_lstat64(const char *path, struct stat64 *st) {
  return symmpin_glibc_lxstat64(SYMMPIN_STAT_VER, path, st);
}
int __wrap_fstatat64(int dirfd, const char *path, struct stat64 *st, int flags) {
  return symmpin_glibc_fxstatat64(SYMMPIN_STAT_VER, dirfd, path, st, flags);
}
#else
typedef int symmpin_glibc_compat_unused; /* ISO C wants a declaration in every file */
#endif
