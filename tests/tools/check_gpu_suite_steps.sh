#!/usr/bin/env bash
# Every step scripts/gpu-suite.sh lists has its function (TAP, CPU): a step named in `all` but
# never defined fails only on the GPU machine, where device time is scarce.
# Arguments: SOURCE_ROOT
set -u
root=$1
n=0 bad=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
steps=$(OUT="$tmp" bash "$root/scripts/gpu-suite.sh" --list 2>/dev/null)
n=$((n + 1))
if [ -n "$steps" ]; then echo "ok $n - --list names the steps"; else echo "not ok $n - --list names the steps"; bad=1; fi
for s in $steps; do
  n=$((n + 1))
  if grep -Eq "^s_$s\(\) *\{" "$root/scripts/gpu-suite.sh"; then
    echo "ok $n - step $s has its function"
  else
    echo "not ok $n - step $s has no function s_$s"
    bad=$((bad + 1))
  fi
done
echo "1..$n"
[ $bad -eq 0 ]
