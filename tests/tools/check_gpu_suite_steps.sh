#!/usr/bin/env bash
# scripts/gpu-suite.sh's list of steps (TAP, CPU): every step has its function, every group names
# known steps and every step is in exactly one group (a step missing from the groups never runs in
# the device calls that run groups), and the suite's scripts parse (and pass shellcheck where it is
# installed): a mistake there fails only on the GPU machine, where device time is scarce.
# Arguments: SOURCE_ROOT
set -u
root=$1
n=0 bad=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { n=$((n + 1)); echo "ok $n - $1"; }
no() { n=$((n + 1)); echo "not ok $n - $1"; bad=$((bad + 1)); }
steps=$(SUITE_OUT="$tmp" bash "$root/scripts/gpu-suite.sh" --list 2>/dev/null)
if [ -n "$steps" ]; then ok "--list names the steps"; else no "--list names the steps"; fi
for s in $steps; do
  if cat "$root"/scripts/gpu-suite.sh "$root"/scripts/suite_steps_*.sh | grep -Eq "^s_$s\(\) *\{"; then ok "step $s has its function"; else no "step $s has no function s_$s"; fi
done
groups=$(SUITE_OUT="$tmp" bash "$root/scripts/gpu-suite.sh" --groups 2>/dev/null)
if [ -n "$groups" ]; then ok "--groups names the groups"; else no "--groups names the groups"; fi
grouped=$(echo "$groups" | sed 's/^[a-z]*: //' | tr ' ' '\n' | grep -v '^$' | sort)
for s in $grouped; do
  echo "$steps" | tr ' ' '\n' | grep -qx "$s" || no "group step $s is not a step"
done
dups=$(echo "$grouped" | uniq -d | tr '\n' ' ')
if [ -z "$dups" ]; then ok "no step is in two groups"; else no "steps in two groups: $dups"; fi
missing=$(comm -23 <(echo "$steps" | tr ' ' '\n' | sort) <(echo "$grouped" | sort -u) | tr '\n' ' ')
if [ -z "$missing" ]; then ok "every step is in a group"; else no "steps in no group: $missing"; fi
if SUITE_OUT="$tmp" bash "$root/scripts/gpu-suite.sh" --group z >/dev/null 2>&1; then no "an unknown group is refused"; else ok "an unknown group is refused"; fi
if SUITE_OUT="$tmp" SUITE_NGPU=1 bash "$root/scripts/gpu-suite.sh" no_such_step >/dev/null 2>&1; then no "an unknown step is refused"; else ok "an unknown step is refused"; fi
scripts="$root/scripts/gpu-suite.sh $root/scripts/suite_lib.sh $root/scripts/rank-env.sh $(echo "$root"/scripts/suite_steps_*.sh)"
for f in $scripts; do
  if bash -n "$f"; then ok "$(basename "$f") parses"; else no "$(basename "$f") does not parse"; fi
done
if command -v shellcheck >/dev/null; then
  # shellcheck disable=SC2086 # the list of files
  if (cd "$root" && shellcheck -x $scripts); then ok "shellcheck"; else no "shellcheck"; fi
else
  n=$((n + 1)); echo "ok $n - shellcheck # SKIP not installed"
fi
if python3 -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" "$root/scripts/suite_stats.py"; then ok "suite_stats.py compiles"; else no "suite_stats.py does not compile"; fi
echo "1..$n"
[ $bad -eq 0 ]
