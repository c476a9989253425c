#!/usr/bin/env bash
# scripts/tp_decode_compare.py on made-up outputs of tests/apps/tp_decode.py (TAP, CPU): identical
# digests pass and the table's arithmetic is right; a differing digest, a missing run, or lines
# of one configuration only fail. Also checks that tests/apps/tp_decode.py compiles (it runs on
# the GPU machine only, in the GPU suite's tp_decode step).
# Arguments: SOURCE_ROOT
set -u
root=$1
cmp="$root/scripts/tp_decode_compare.py"
n=0 bad=0
ok() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; bad=$((bad + 1)); fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok "tests/apps/tp_decode.py parses" 'python3 -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" "$root/tests/apps/tp_decode.py"'

# Without symmpin: 8 calls per step at 10 us, step 200 us (compute 120: 40% communication).
# With: 4 us per call (expect 8 x 6 = 48 us saved), step 160 us (40 saved: 83% realised).
cat >"$tmp/nccl.out" <<'OUT'
TPD-DIGEST rank=0 hidden=4096 tokens=1 mode=graph digest=aaaa
TPD-DIGEST rank=1 hidden=4096 tokens=1 mode=graph digest=aaaa
TPD-TIME hidden=4096 tokens=1 mode=graph calls=8 step_us=200.00 compute_us=120.00 allreduce_us=10.00
TPD-SKIP hidden=4096 tokens=1 mode=compile reason=RuntimeError: no
OUT
sed -e 's/step_us=200.00/step_us=160.00/' -e 's/allreduce_us=10.00/allreduce_us=4.00/' \
  "$tmp/nccl.out" >"$tmp/sym.out"
out=$(python3 "$cmp" "$tmp/nccl.out" "$tmp/sym.out" 2>&1); rc=$?
ok "identical digests: exit 0 and says so" '[ $rc -eq 0 ] && [[ "$out" == *"2 output digest(s) identical"* ]]'
row=$(grep -E '^ +4096 +1 graph' <<<"$out")
ok "the row: step 200 -> 160 (0.80), per call 10 -> 4 (0.40), 40% communication" \
  '[[ "$row" =~ 200\.00\ +160\.00\ +0\.80\ +10\.00\ +4\.00\ +0\.40\ +40 ]]'
ok "expected 48 us saved, got 40, 83% realised" '[[ "$row" =~ 48\.00\ +40\.00\ +83$ ]]'
ok "a skipped mode is listed" '[[ "$out" == *"skipped: TPD-SKIP hidden=4096 tokens=1 mode=compile"* ]]'

sed -e '2s/digest=aaaa/digest=bbbb/' "$tmp/sym.out" >"$tmp/sym-bad.out"
out=$(python3 "$cmp" "$tmp/nccl.out" "$tmp/sym-bad.out" 2>&1); rc=$?
ok "a digest that differs on one rank: exit 1, DIGESTS DIFFER" '[ $rc -eq 1 ] && [[ "$out" == *"DIGESTS DIFFER"* ]]'

grep -v TPD-TIME "$tmp/sym.out" >"$tmp/sym-short.out"
out=$(python3 "$cmp" "$tmp/nccl.out" "$tmp/sym-short.out" 2>&1); rc=$?
ok "a configuration timed in one run only: exit 1" '[ $rc -eq 1 ] && [[ "$out" == *"different configurations"* ]]'

: >"$tmp/empty.out"
out=$(python3 "$cmp" "$tmp/empty.out" "$tmp/empty.out" 2>&1); rc=$?
ok "no digests at all (a run that printed nothing): exit 1" '[ $rc -eq 1 ]'
out=$(python3 "$cmp" "$tmp/nccl.out" 2>&1); rc=$?
ok "one argument: usage, exit 2" '[ $rc -eq 2 ]'

echo "1..$n"
[ $bad -eq 0 ]
