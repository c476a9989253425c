#!/bin/sh
# expect_compile.sh WANT COMPILER ARGS...: run the compiler. WANT empty: it must succeed. Otherwise
# it must fail with WANT in its messages (so a failure for any other reason does not count).
want=$1
shift
out=$("$@" 2>&1)
rc=$?
if [ -z "$want" ]; then
  [ $rc -eq 0 ] && exit 0
  printf 'expected to compile, failed (%d):\n%s\n' "$rc" "$out"
  exit 1
fi
if [ $rc -ne 0 ] && printf '%s\n' "$out" | grep -q -- "$want"; then exit 0; fi
printf 'expected a compile error naming %s; exit status %d:\n%s\n' "$want" "$rc" "$out"
exit 1
