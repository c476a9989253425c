/* A program WITHOUT libnccl.so.2 among its NEEDED libraries, for the two real-symbol fallback
 * cases of test_interpose.c (CPU only, with the FAKE libraries of tests/fakes):
 *   local PATH  dlopen the fake 'user' library PATH with RTLD_LOCAL (as Python loads
 *               libtorch_cuda): its ncclAllReduce reaches symmpin's wrapper, which must find the
 *               fake NCCL through RTLD_NOLOAD because RTLD_NEXT cannot see it;
 *   nonccl      call ncclAllReduce (symmpin's, found with RTLD_DEFAULT) with no NCCL loaded at
 *               all: it must fail with ncclSystemError, not crash;
 *   lifecalls   the same for the calls of NCCL 2.27-2.29 that symmpin wraps (what a program sees
 *               when the loaded NCCL lacks them): "<name> rc=<n>" each, "no <name>" if symmpin
 *               does not export it.
 * Prints "rc=<n> value=<v>" and exits 0 when it got as far as the call. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "local")) {
    void *h = dlopen(argv[2], RTLD_LOCAL | RTLD_NOW);
    if (!h) {
      printf("dlopen failed: %s\n", dlerror());
      return 3;
    }
    int (*run)(int, float, float *) = (int (*)(int, float, float *))dlsym(h, "fakeuser_run");
    if (!run) return 4;
    float v = 0;
    int rc = run(16, 1.5f, &v);
    printf("rc=%d value=%g\n", rc, (double)v);
    return 0;
  }
  if (argc >= 2 && !strcmp(argv[1], "nonccl")) {
    typedef int (*ar_fn)(const void *, void *, size_t, int, int, void *, void *);
    ar_fn ar = (ar_fn)dlsym(RTLD_DEFAULT, "ncclAllReduce");
    if (!ar) {
      printf("no ncclAllReduce (not preloaded)\n");
      return 3;
    }
    float buf[4] = {1, 2, 3, 4};
    int rc = ar(buf, buf, 4, 7 /* float32 */, 0 /* sum */, (void *)0x1000, NULL);
    printf("rc=%d value=%g\n", rc, (double)buf[0]);
    return 0;
  }
  if (argc >= 2 && !strcmp(argv[1], "lifecalls")) {
    void *comm = (void *)0x1000, *child = NULL;
    int excluded[1] = {0};
    void *f;
    if ((f = dlsym(RTLD_DEFAULT, "ncclCommShrink")))
      printf("ncclCommShrink rc=%d\n", ((int (*)(void *, int *, int, void **, void *, int))f)(
                                           comm, excluded, 1, &child, NULL, 0));
    else
      printf("no ncclCommShrink\n");
    if ((f = dlsym(RTLD_DEFAULT, "ncclCommRevoke")))
      printf("ncclCommRevoke rc=%d\n", ((int (*)(void *, int))f)(comm, 0));
    else
      printf("no ncclCommRevoke\n");
    if ((f = dlsym(RTLD_DEFAULT, "ncclCommGrow")))
      printf("ncclCommGrow rc=%d\n", ((int (*)(void *, int, const void *, int, void **, void *))f)(
                                         comm, 3, NULL, -1, &child, NULL));
    else
      printf("no ncclCommGrow\n");
    if ((f = dlsym(RTLD_DEFAULT, "ncclCommSuspend")))
      printf("ncclCommSuspend rc=%d\n", ((int (*)(void *, int))f)(comm, 1));
    else
      printf("no ncclCommSuspend\n");
    if ((f = dlsym(RTLD_DEFAULT, "ncclCommResume")))
      printf("ncclCommResume rc=%d\n", ((int (*)(void *))f)(comm));
    else
      printf("no ncclCommResume\n");
    return 0;
  }
  fprintf(stderr, "usage: %s local LIB | nonccl | lifecalls\n", argv[0]);
  return 2;
}
