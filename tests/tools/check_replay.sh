#!/usr/bin/env bash
# symmpin-replay failing well, on the CPU (TAP): bad options and values named in one line (exit 2),
# --help (exit 0), traces that are not one job's (a file given twice, a copy, one rank in two files,
# two jobs: one line each, exit 3; --allow-mixed replays anyway), and traces without any
# all-reduce (a warning). Uses the recorded traces of tests/traces, copied or cut in a temporary
# folder. Arguments: SYMMPIN_REPLAY TRACES_DIR
set -u
replay=$1 traces=$2
n=0 bad=0
ok() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; bad=$((bad + 1)); echo "# rc=$rc"; sed 's/^/# /' "$tmp/err"; fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { "$replay" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?; }
first() { head -n 1 "$tmp/err"; }
lines() { wc -l <"$tmp/err"; }

ddp0=$traces/ddp/ddp.trace.0.1048 ddp1=$traces/ddp/ddp.trace.1.1049 tp1=$traces/tp/tp.trace.1.702
syn=$traces/synthetic

# ---- options
run --foo "$ddp0" "$ddp1"
ok "an unknown option: exit 2, named on the first line, nothing on stdout" \
  '[ $rc -eq 2 ] && [ "$(first)" = "symmpin-replay: unknown option '"'"'--foo'"'"'" ] && [ ! -s "$tmp/out" ]'
run --warmup=lots "$ddp0"
ok "a bad value: exit 2, the option and the value named" \
  '[ $rc -eq 2 ] && [[ "$(first)" == "symmpin-replay: bad --warmup '"'"'lots'"'"'"* ]]'
run "$ddp0" --max-bytes
ok "a missing value: exit 2, the option named" \
  '[ $rc -eq 2 ] && [ "$(first)" = "symmpin-replay: option '"'"'--max-bytes'"'"' needs a value" ]'
run -x "$ddp0"
ok "an unknown short option: exit 2, named" '[ $rc -eq 2 ] && [ "$(first)" = "symmpin-replay: unknown option '"'"'-x'"'"'" ]'
run --help
ok "--help: usage on stdout, exit 0, --allow-mixed and the exit statuses documented" \
  '[ $rc -eq 0 ] && [ ! -s "$tmp/err" ] && head -n 1 "$tmp/out" | grep -q "^usage: symmpin-replay " && grep -q -- "--allow-mixed" "$tmp/out" && grep -q "3 the" "$tmp/out"'

# ---- one job's traces: no complaint
run "$ddp0" "$ddp1"
ok "one job's traces: exit 0, nothing on stderr" '[ $rc -eq 0 ] && [ ! -s "$tmp/err" ] && grep -q "agreement: GO" "$tmp/out"'

# ---- a file given twice
run "$ddp0" "$ddp1" "$ddp0"
ok "the same file twice: exit 3, one line naming it" \
  '[ $rc -eq 3 ] && [ "$(lines)" -eq 1 ] && [[ "$(first)" == "symmpin-replay: trace '"'"'$ddp0'"'"' given twice"* ]] && [ ! -s "$tmp/out" ]'
ln -s "$(cd "$(dirname "$ddp1")" && pwd)/$(basename "$ddp1")" "$tmp/link"
run "$ddp0" "$ddp1" "$tmp/link"
ok "the same file under another name (same device and inode): exit 3, both names" \
  '[ $rc -eq 3 ] && [ "$(lines)" -eq 1 ] && grep -q "given twice (also as '"'"'$tmp/link'"'"')" "$tmp/err"'
cp "$ddp1" "$tmp/copy"
run "$ddp0" "$ddp1" "$tmp/copy"
ok "a copy (identical content): exit 3, one line" \
  '[ $rc -eq 3 ] && [ "$(lines)" -eq 1 ] && grep -q "are identical (a copy)" "$tmp/err"'
run --allow-mixed "$ddp0" "$ddp1" "$tmp/copy"
ok "--allow-mixed: a warning, the copy left out, the job replayed" \
  '[ $rc -eq 0 ] && grep -q "^symmpin-replay: warning: .*the copy is left out" "$tmp/err" && grep -q "^symmpin-replay: 2 trace file(s)" "$tmp/out" && grep -q "agreement: GO" "$tmp/out"'

# ---- traces of different jobs
run "$ddp0" "$ddp1" "$tp1"
ok "traces of two jobs (no communicator in common): exit 3, one line naming both" \
  '[ $rc -eq 3 ] && [ "$(lines)" -eq 1 ] && grep -q "come from different jobs" "$tmp/err" && grep -q "$tp1" "$tmp/err"'
run --allow-mixed "$ddp0" "$ddp1" "$tp1"
ok "--allow-mixed: a warning, both jobs replayed" \
  '[ $rc -eq 0 ] && grep -q "^symmpin-replay: warning: .*different jobs" "$tmp/err" && [ "$(grep -c "^communicator " "$tmp/out")" -eq 2 ]'
run --json "$ddp0" "$tp1"
ok "--json: the refusal on stderr, nothing on stdout" '[ $rc -eq 3 ] && [ ! -s "$tmp/out" ]'
# synthetic traces share one key: rank 1 of it in two files is two runs (or one process twice)
run "$syn/ddp2/rank0.trace" "$syn/ddp2/rank1.trace" "$syn/differ2/rank1.trace"
ok "one rank of a communicator in two files: exit 3, the rank named" \
  '[ $rc -eq 3 ] && [ "$(lines)" -eq 1 ] && grep -q "both hold rank 1 of communicator 11112222333344445555666677778888" "$tmp/err"'

# ---- traces that hold nothing to plan
grep '^#' "$ddp0" >"$tmp/header-only"
run "$tmp/header-only" "$ddp0" "$ddp1"
ok "a header-only trace: a warning, the others replayed" \
  '[ $rc -eq 0 ] && [ "$(first)" = "symmpin-replay: warning: trace '"'"'$tmp/header-only'"'"' holds no calls (did the program end before its first all-reduce?)" ] && grep -q "agreement: GO" "$tmp/out"'
awk '/ ncclAllReduce / { exit } { print }' "$ddp1" >"$tmp/no-allreduce"
run "$ddp0" "$tmp/no-allreduce"
ok "a trace that ends before its first all-reduce: a warning saying what it holds" \
  '[ $rc -eq 0 ] && grep -q "^symmpin-replay: warning: trace '"'"'$tmp/no-allreduce'"'"' holds no collective (all-reduce, all-gather, reduce-scatter; [0-9]* other call(s): did the program end before its first?)" "$tmp/err"'

# ---- unreadable traces are still the replay's to report
run "$ddp0" "$tmp/no-such.trace"
ok "a trace that cannot be read: exit 1, named" '[ $rc -eq 1 ] && grep -q "no-such.trace" "$tmp/err"'

echo "1..$n"
[ $bad -eq 0 ]
