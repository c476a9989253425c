#!/usr/bin/env bash
# scripts/check_groups.py on made-up traces of a grouped program (TAP, CPU): two ranks, 40 groups
# of 3 calls (warm-up, then probe groups alternating with groups on symmpin, then back to NCCL
# for good) pass; a probe group with a call on symmpin, a call on symmpin after its shape went
# back, ranks routing a call apart, and the wrong --expect fail; --times reads DP-TIME, --stats
# shows each site's reasons.
# Arguments: SOURCE_ROOT
set -u
root=$1
chk="$root/scripts/check_groups.py"
n=0 bad=0
ok() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; bad=$((bad + 1)); fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# make_trace RANK FILE [EDIT]: 2 ranks' grouped calls, back on NCCL from group 36; EDIT breaks it
# (tests/tools/group_trace.py says how).
make_trace() { python3 "$root/tests/tools/group_trace.py" "$@"; }

make_trace 0 "$tmp/good.0"
make_trace 1 "$tmp/good.1"
out=$(python3 "$chk" --expect back "$tmp/good.0" "$tmp/good.1" 2>&1); rc=$?
ok "groups probed whole and back for good on both ranks alike: exit 0" '[ $rc -eq 0 ]'
ok "it counts 16 probe groups and says from which group they went back" \
  '[[ "$out" == *"40 groups, 16 with calls on symmpin, 16 probe groups, grouped calls back to NCCL from group 36"* ]]'
ok "it counts the grouped calls above the limit" '[[ "$out" == *"32 grouped calls above SYMMPIN_GROUP_MAX_BYTES"* ]]'
ok "it says the ranks routed alike" '[[ "$out" == *"2 ranks routed all 120 calls alike"* ]]'
out=$(python3 "$chk" --expect stay "$tmp/good.0" "$tmp/good.1" 2>&1); rc=$?
ok "--expect stay on groups that went back: exit 1" '[ $rc -eq 1 ] && [[ "$out" == *"went back to NCCL"* ]]'
python3 "$chk" "$tmp/good.0" "$tmp/good.1" >/dev/null 2>&1; rc=$?
ok "--expect any (the default): exit 0" '[ $rc -eq 0 ]'

make_trace 0 "$tmp/split.0" probe_split
out=$(python3 "$chk" "$tmp/split.0" 2>&1); rc=$?
ok "a probe group with a call on symmpin: exit 1, named" '[ $rc -eq 1 ] && [[ "$out" == *"not probed whole): [5]"* ]]'
make_trace 0 "$tmp/late.0" late
out=$(python3 "$chk" "$tmp/late.0" 2>&1); rc=$?
ok "a call on symmpin after its shape went back: exit 1, named" '[ $rc -eq 1 ] && [[ "$out" == *"went back: [38]"* ]]'
make_trace 1 "$tmp/apart.1" apart
out=$(python3 "$chk" "$tmp/good.0" "$tmp/apart.1" 2>&1); rc=$?
ok "ranks routing a call apart: exit 1, the call named" '[ $rc -eq 1 ] && [[ "$out" == *"routed all-reduce 28 apart"* ]]'
python3 - "$tmp/never.0" <<'EOF'
import sys
lines = ["#rank=0"]
for g in range(10):
    lines += [f"{3 * g + 1} 1 5 ncclGroupStart depth=1",
              f"{3 * g + 2} 2 5 ncclAllReduce comm=0 rank=0 count=8 dtype=f32 op=sum path=1 reason=0",
              f"{3 * g + 3} 3 5 ncclGroupEnd depth=0"]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
EOF
out=$(python3 "$chk" --expect back "$tmp/never.0" 2>&1); rc=$?
ok "--expect back on groups that stayed: exit 1" '[ $rc -eq 1 ] && [[ "$out" == *"did not go back"* ]]'
printf '#rank=0\n1 1 5 ncclAllReduce comm=0 rank=0 count=8 path=1 reason=0\n' >"$tmp/eager.0"
python3 "$chk" "$tmp/eager.0" >/dev/null 2>&1; rc=$?
ok "no grouped call at all: exit 1" '[ $rc -eq 1 ]'
python3 "$chk" "$tmp/missing" >/dev/null 2>&1; rc=$?
ok "an unreadable trace: exit 2" '[ $rc -eq 2 ]'

echo 'DP-TIME layers=12 step_us=952.60 compute_us=900.00 group_us=47.06' >"$tmp/nccl.out"
echo 'DP-TIME layers=12 step_us=946.20 compute_us=900.00 group_us=49.41' >"$tmp/sym.out"
out=$(python3 "$chk" --times "$tmp/nccl.out" "$tmp/sym.out" "$tmp/good.0" 2>&1); rc=$?
ok "--times: the group alone as a ratio" '[ $rc -eq 0 ] && [[ "$out" == *"NCCL 47.06 us, symmpin 49.41 us (1.05 x)"* ]]'
echo 'nothing' >"$tmp/empty.out"
python3 "$chk" --times "$tmp/nccl.out" "$tmp/empty.out" "$tmp/good.0" >/dev/null 2>&1; rc=$?
ok "--times without DP-TIME in one output: exit 1" '[ $rc -eq 1 ]'

cat >"$tmp/stats.json" <<'JSON'
{"version": 1, "comms": [
  {"ordinal": 0, "rank": 0, "nranks": 1, "device": 0, "sites": [
    {"site": "0x0000000000000001", "count": 384, "dtype": "bf16", "op": "avg", "calls": 130, "bytes": 99840, "redirected": 12, "nccl": 118, "reasons": {"warmup": 3, "probe": 16, "group_measured": 99}}]}
]}
JSON
out=$(python3 "$chk" --stats "$tmp/stats.json" "$tmp/good.0" 2>&1); rc=$?
ok "--stats: each site's calls and reasons" \
  '[ $rc -eq 0 ] && [[ "$out" == *"site 0x0000000000000001 count 384: 130 calls, 12 redirected; group_measured=99 probe=16 warmup=3"* ]]'
printf '{"comms": [{"rank": 0, "sites": [{"site": 1}]}]}' >"$tmp/bad.json"
python3 "$chk" --stats "$tmp/bad.json" "$tmp/good.0" >/dev/null 2>&1; rc=$?
ok "--stats on a file without the fields: exit 2" '[ $rc -eq 2 ]'

echo "1..$n"
[ "$bad" -eq 0 ]
