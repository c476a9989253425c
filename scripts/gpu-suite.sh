#!/usr/bin/env bash
# The GPU suite: run on a GPU machine from the repository root, over a build made elsewhere
# (scripts/test.sh builds it; the device tool carries build/). Every step prints one
# "STEP <name>: PASS|FAIL|SKIP" line; full logs go under $OUT (default /tmp/symmpin-gpu).
# Usage: scripts/gpu-suite.sh [step ...]   (default: all steps; `scripts/gpu-suite.sh --list`)
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=${SYMMPIN_BUILD_DIR:-build}
OUT=${OUT:-/tmp/symmpin-gpu}
mkdir -p "$OUT/logs"
LIB=$PWD/$B/libsymmpin.so.0
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
TORCHRUN=$(command -v torchrun || echo /opt/torch/.venv/bin/torchrun)
PY=$(command -v python3)
results=()

step() { # step NAME CMD...: run, log, record PASS/FAIL
  local name=$1; shift
  local log="$OUT/logs/$name.log"
  local t0=$SECONDS
  # Each step in its own process group, so a hung step is killed with all its children.
  set -m
  ( "$@" ) >"$log" 2>&1 &
  local pid=$! waited=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1; waited=$((waited + 1))
    if [ "$waited" -ge "${STEP_TIMEOUT:-300}" ]; then
      echo "step $name: killed after $waited s" >>"$log"; kill -TERM -- -"$pid"; sleep 2; kill -KILL -- -"$pid"
    fi
  done
  wait "$pid"
  local rc=$?
  set +m
  # 77 after "needs 2 GPUs": the step cannot run here: SKIP, neither passed nor failed (any other
  # exit 77, e.g. a test binary's own, stays a failure).
  local verdict=PASS; [ $rc -eq 0 ] || verdict="FAIL(rc=$rc)"
  if [ $rc -eq 77 ] && [ "$(tail -n 1 "$log")" = "needs 2 GPUs" ]; then verdict="SKIP(needs 2 GPUs)"; rc=0; fi
  results+=("STEP $name: $verdict ($((SECONDS - t0)) s) $(grep -E 'passed|failed' "$log" | tail -n1)")
  echo "${results[-1]}"
  [ $rc -eq 0 ] || tail -n 15 "$log" | sed 's/^/    | /'
  # Lines a step marks with "= " are its results: shown here too, so they survive without the logs.
  grep '^= ' "$log" | sed 's/^= /    /' | head -n 40
  return $rc
}
skip() { results+=("STEP $1: SKIP ($2)"); echo "${results[-1]}"; }

with_preload() { LD_PRELOAD=$LIB "$@"; }

# The same program with and without symmpin: identical checksums or digests, both passing.
compare_runs() { # compare_runs NAME PATTERN CMD...
  local name=$1 pattern=$2; shift 2
  "$@" >"$OUT/logs/$name.nccl.out" 2>&1 || { echo "without symmpin failed"; tail "$OUT/logs/$name.nccl.out"; return 1; }
  SYMMPIN_DEBUG=INFO SYMMPIN_STATS=1 SYMMPIN_STATS_FILE="$OUT/logs/$name.stats.%p.json" SYMMPIN_TRACE="$OUT/logs/$name.trace.%r.%p" \
    with_preload "$@" >"$OUT/logs/$name.symmpin.out" 2>&1 || { echo "with symmpin failed"; tail -n 40 "$OUT/logs/$name.symmpin.out"; return 1; }
  local a b
  a=$(grep -E "$pattern" "$OUT/logs/$name.nccl.out" | sort)
  b=$(grep -E "$pattern" "$OUT/logs/$name.symmpin.out" | sort)
  echo "without symmpin:"; echo "$a"; echo "with symmpin:"; echo "$b"
  grep -E "symmpin (WARN|INFO)|redirect|reason|pool" "$OUT/logs/$name.symmpin.out" | head -n 40
  [ -n "$a" ] && [ "$a" = "$b" ]
}

s_info() { nvidia-smi; nvidia-smi topo -m; echo "gpus=$NGPU"; ldd "$LIB"; }
s_oneshot() { for n in 2 3 4 8; do "$B/tests/gpu/test_oneshot" $n || return 1; done; }
s_sanitizer() {
  # One rank: the sanitizers serialize kernels, and ranks of one process spin-wait for each other.
  compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tests/gpu/test_oneshot" 1 --small &&
  compute-sanitizer --tool racecheck --error-exitcode 9 "$B/tests/gpu/test_oneshot" 1 --small &&
  compute-sanitizer --tool synccheck --error-exitcode 9 "$B/tests/gpu/test_oneshot" 1 --small &&
  compute-sanitizer --tool memcheck --leak-check full --report-api-errors no --error-exitcode 9 "$B/tests/symmem/test_pool" --threads 2
}
s_pool() {
  for m in "--procs 2" "--threads 2" "--single 2" "--procs 4"; do "$B/tests/symmem/test_pool" $m || return 1; done
}
s_app() {
  local n=$NGPU
  for mode in procs threads single; do
    compare_runs "app-$mode" '^RESULT|symmpin-app:' "$B/tests/apps/symmpin-app" --mode $mode --ranks $n || return 1
  done
}
s_app_diverge() {
  [ "$NGPU" -ge 2 ] || { echo "needs 2 GPUs"; return 77; }
  compare_runs app-diverge '^RESULT|symmpin-app:' "$B/tests/apps/symmpin-app" --mode procs --diverge
}
s_two_streams() { # break the warm-up's stream pattern: exact results (calls off their site's
  # home stream are spliced into its order, or go to NCCL when that cannot be done: counted)
  compare_runs app-two-streams '^RESULT|symmpin-app:' "$B/tests/apps/symmpin-app" --mode procs --two-streams --iters 8 || return 1
  local n
  n=$(cat "$OUT"/logs/app-two-streams.stats.*.json | grep -o '"stream": [0-9]*' | awk '{s += $2} END {print s + 0}')
  echo "calls sent to NCCL for their stream: $n"
}
s_straggler() { # a peer ${STRAGGLE_MS:-60000} ms late: the right result, as NCCL gives
  [ "$NGPU" -ge 2 ] || { echo "needs 2 GPUs"; return 77; }
  compare_runs app-straggler '^RESULT|symmpin-app:' "$B/tests/apps/symmpin-app" --mode procs --straggle "${STRAGGLE_MS:-60000}"
}
TRUST=$B/tests/apps/symmpin-trust
s_trust_side() { # rank 1 makes one all-reduce on a new stream after warm-up: right results, no error
  [ "$NGPU" -ge 2 ] || { echo "needs 2 GPUs"; return 77; }
  compare_runs trust-side '^SIDE|^RESULT|symmpin-trust:' "$TRUST" --scenario side || return 1
  grep -h "redirected\|spliced" "$OUT"/logs/trust-side.symmpin.out | head -n 4
}
s_trust_sites() { # rank 1 reaches calls from other sites after warm-up: right results, no error,
  # and every rank redirects the same number of calls (routing by shape, not by site)
  [ "$NGPU" -ge 2 ] || { echo "needs 2 GPUs"; return 77; }
  compare_runs trust-sites '^SITES|symmpin-trust:' "$TRUST" --scenario sites || return 1
  "$PY" - "$OUT"/logs/trust-sites.stats.*.json <<'EOF'
import json, sys
per_rank = {}
for path in sys.argv[1:]:
    for c in json.load(open(path)).get("comms", []):
        per_rank[c["rank"]] = sum(s.get("redirected", 0) for s in c["sites"])
print("= calls redirected per rank:", per_rank)
sys.exit(0 if len(per_rank) >= 2 and min(per_rank.values()) > 0 and len(set(per_rank.values())) == 1 else 1)
EOF
}
s_trust_graphs() { # two CUDA graphs captured on new streams, replayed alternately 2 x 2000 times
  # on two streams between eager calls: right results, no error, every captured call redirected.
  # One rank per GPU; on one GPU a single rank still runs the capture arena and the slot order
  # (one-rank communicators stay on NCCL unless the tests ask).
  [ "$NGPU" -ge 2 ] || export SYMMPIN_TEST_ONE_RANK=1
  compare_runs trust-graphs '^GRAPHS|symmpin-trust:' "$TRUST" --scenario graphs --cycles "${GRAPH_REPLAYS:-2000}" || return 1
  "$PY" - "$OUT"/logs/trust-graphs.stats.*.json <<'EOF'
import json, sys
graph_counts = {3000, 20000, 100000}  # the shapes only the graphs use (trust_app.c gshapes)
captured, arena = {}, {}
for path in sys.argv[1:]:
    for c in json.load(open(path)).get("comms", []):
        g = [s for s in c["sites"] if s["count"] in graph_counts]
        captured[c["rank"]] = (sum(s["redirected"] for s in g), sum(s["nccl"] for s in g))
        arena[c["rank"]] = {k: v for k, v in c.get("pool", {}).items() if k.startswith("capture")}
print("= captured calls per rank (redirected, nccl):", captured)
print("= capture arena per rank:", arena)
sys.exit(0 if captured and all(r == 7 and n == 0 for r, n in captured.values()) else 1)
EOF
}
s_trust_fault() { # injected faults: an error on every rank within a second, never a silent result
  [ "$NGPU" -ge 2 ] || { echo "needs 2 GPUs"; return 77; }
  "$TRUST" --scenario fault >"$OUT/logs/trust-fault.nccl.out" 2>&1 || { echo "clean run without symmpin failed"; return 1; }
  grep -E "^FAULT|symmpin-trust:" "$OUT/logs/trust-fault.nccl.out"
  SYMMPIN_STATS=1 with_preload "$TRUST" --scenario fault >"$OUT/logs/trust-fault.clean.out" 2>&1 || { echo "clean run with symmpin failed"; return 1; }
  grep -E "^FAULT|symmpin-trust:" "$OUT/logs/trust-fault.clean.out"
  local f rc=0
  for f in skip:1:300 diverge:1:300 skip:0:301 diverge:0:302; do
    echo "== SYMMPIN_TEST_FAULT=$f"
    SYMMPIN_TEST_FAULT=$f timeout -s KILL 60 bash -c 'LD_PRELOAD=$0 "$@"' "$LIB" "$TRUST" --scenario fault \
      >"$OUT/logs/trust-fault.$f.out" 2>&1 || rc=1
    grep -E "^FAULT|symmpin-trust:|WRONG|symmpin WARN" "$OUT/logs/trust-fault.$f.out" | cut -c1-300
  done
  # Anchored: an unanchored pattern also matches (and kills) any shell whose command line names it.
  pkill -9 -f "^$TRUST" 2>/dev/null || true
  return $rc
}
s_trust_abort() { # ncclCommAbort with an all-reduce in flight returns at once, with and without symmpin
  [ "$NGPU" -ge 2 ] || { echo "needs 2 GPUs"; return 77; }
  timeout -s KILL 60 "$TRUST" --scenario abort >"$OUT/logs/trust-abort.nccl.out" 2>&1 || { echo "without symmpin failed"; tail "$OUT/logs/trust-abort.nccl.out"; return 1; }
  echo "without symmpin:"; grep -E "^ABORT|symmpin-trust:" "$OUT/logs/trust-abort.nccl.out"
  timeout -s KILL 60 bash -c 'LD_PRELOAD=$0 "$@"' "$LIB" "$TRUST" --scenario abort >"$OUT/logs/trust-abort.symmpin.out" 2>&1 || { echo "with symmpin failed"; tail "$OUT/logs/trust-abort.symmpin.out"; return 1; }
  echo "with symmpin:"; grep -E "^ABORT|symmpin-trust:" "$OUT/logs/trust-abort.symmpin.out"
}
s_trust_churn() { # create/use/destroy communicators ${CHURN_CYCLES:-150} times: nothing grows
  # On one GPU: one rank (redirected because the tests ask): the pool, board and registry still
  # come and go every cycle, without peers' mappings.
  [ "$NGPU" -ge 2 ] || export SYMMPIN_TEST_ONE_RANK=1
  local cycles=${CHURN_CYCLES:-150}
  "$TRUST" --scenario churn --cycles "$cycles" >"$OUT/logs/trust-churn.nccl.out" 2>&1 || { echo "without symmpin failed"; tail "$OUT/logs/trust-churn.nccl.out"; return 1; }
  SYMMPIN_STATS_FILE="$OUT/logs/trust-churn.stats.%p.json" with_preload "$TRUST" --scenario churn --cycles "$cycles" \
    >"$OUT/logs/trust-churn.symmpin.out" 2>&1 || { echo "with symmpin failed"; tail -n 30 "$OUT/logs/trust-churn.symmpin.out"; return 1; }
  echo "without symmpin:"; grep -E "^CHURN|symmpin-trust:" "$OUT/logs/trust-churn.nccl.out"
  echo "with symmpin:"; grep -E "^CHURN|symmpin-trust:" "$OUT/logs/trust-churn.symmpin.out"
  local n
  n=$(cat "$OUT"/logs/trust-churn.stats.*.json | grep -o '"redirected": [0-9]*' | awk '{s += $2} END {print s + 0}')
  echo "calls redirected over all cycles and ranks: $n"
  [ "$n" -gt 0 ] || return 1
  # Device memory (cudaMemGetInfo, the whole GPU): NCCL alone moves it by a few hundred MiB
  # between the GPUs from run to run (measured: +288 MiB on one, -288 MiB on the other). symmpin's
  # allocations are the same on every rank (one pool per rank, the same size), so a leak of its
  # would raise EVERY rank's figure: the smallest growth with symmpin must stay under 8 MiB.
  local r a b least=
  for r in $(seq 0 $((NGPU - 1))); do
    a=$(grep "^CHURN rank=$r " "$OUT/logs/trust-churn.nccl.out" | grep -o 'device_bytes_grown=[-0-9]*' | cut -d= -f2)
    b=$(grep "^CHURN rank=$r " "$OUT/logs/trust-churn.symmpin.out" | grep -o 'device_bytes_grown=[-0-9]*' | cut -d= -f2)
    echo "rank $r: device memory grown without symmpin $a, with $b bytes"
    [ -n "$b" ] || return 1
    if [ -z "$least" ] || [ "$b" -lt "$least" ]; then least=$b; fi
  done
  echo "smallest growth over the ranks with symmpin: $least bytes (limit 8 MiB)"
  [ "$least" -le $((8 << 20)) ]
}
s_trust_busy() { # ending a communicator while another stream is busy for a second: symmpin's part
  # never waits for the device (its pool goes when its own kernels are done)
  [ "$NGPU" -ge 2 ] || export SYMMPIN_TEST_ONE_RANK=1
  "$TRUST" --scenario busy >"$OUT/logs/trust-busy.nccl.out" 2>&1 || { echo "without symmpin failed"; tail "$OUT/logs/trust-busy.nccl.out"; return 1; }
  SYMMPIN_STATS_FILE="$OUT/logs/trust-busy.stats.%p.json" with_preload "$TRUST" --scenario busy \
    >"$OUT/logs/trust-busy.symmpin.out" 2>&1 || { echo "with symmpin failed"; tail -n 30 "$OUT/logs/trust-busy.symmpin.out"; return 1; }
  echo "= without symmpin: $(grep -E "^BUSY" "$OUT/logs/trust-busy.nccl.out" | tr '\n' ' ')"
  echo "= with symmpin:    $(grep -E "^BUSY" "$OUT/logs/trust-busy.symmpin.out" | tr '\n' ' ')"
  local n
  n=$(cat "$OUT"/logs/trust-busy.stats.*.json | grep -o '"redirected": [0-9]*' | awk '{s += $2} END {print s + 0}')
  echo "calls redirected: $n"
  [ "$n" -gt 0 ] || return 1
  # symmpin may add at most 200 ms to what NCCL alone takes (a device sync would add a second).
  python3 - "$OUT/logs/trust-busy.nccl.out" "$OUT/logs/trust-busy.symmpin.out" <<'PY'
import re, sys
def worst(path, key):
    v = [float(x) for x in re.findall(key + r"=([0-9.]+)", open(path).read())]
    return max(v) if v else None
ok = True
for key in ("destroy_ms", "abort_ms"):
    a, b = worst(sys.argv[1], key), worst(sys.argv[2], key)
    print(f"= {key}: without symmpin {a}, with symmpin {b} (limit: +200)")
    ok = ok and a is not None and b is not None and b <= a + 200
sys.exit(0 if ok else 1)
PY
}
s_deadline() { # with a kernel deadline, a peer later than it is an error the program sees, never
  # a silent result: the app stops on the NCCL error, and the log names the site and the peer
  [ "$NGPU" -ge 2 ] || { echo "needs 2 GPUs"; return 77; }
  local log="$OUT/logs/app-deadline.out"
  # A rank that stopped on the error leaves its peer in NCCL (as NCCL alone would): bounded here.
  SYMMPIN_KERNEL_TIMEOUT_MS=2000 timeout -s KILL 60 bash -c 'LD_PRELOAD=$0 "$@"' "$LIB" \
    "$B/tests/apps/symmpin-app" --mode procs --straggle 5000 >"$log" 2>&1
  local rc=$?
  # Anchored: an unanchored pattern also matches (and kills) any shell whose command line names it.
  pkill -9 -f "^$B/tests/apps/symmpin-app" 2>/dev/null || true
  grep -E "gave up waiting|ncclRemoteError|remote|FATAL|failed" "$log" | head -n 12
  [ $rc -ne 0 ] && grep -q "gave up waiting for rank" "$log" && grep -q "FATAL" "$log"
}
s_ddp() {
  compare_runs ddp '^DDP|^step' "$TORCHRUN" --standalone --nproc_per_node="$NGPU" tests/apps/ddp_train.py
}
s_tp() {
  TP_TIME=0 compare_runs tp '^TP |tp_loop:' "$TORCHRUN" --standalone --nproc_per_node="$NGPU" tests/apps/tp_loop.py
}
s_dp_groups() { # issue 11's data-parallel step: grouped gradient all-reduces overlapping compute
  # On one GPU: one rank (its communicator redirected only because the tests ask).
  local ranks=()
  [ "$NGPU" -ge 2 ] || { export SYMMPIN_TEST_ONE_RANK=1; ranks=(--ranks 1); }
  compare_runs dp-groups '^DP-DIGEST|symmpin-dp:' "$B/tests/apps/symmpin-dp" "${ranks[@]}" || return 1
  echo "= time per step, compute alone, the group alone (us), without then with symmpin:"
  grep -h '^DP-TIME' "$OUT/logs/dp-groups.nccl.out" "$OUT/logs/dp-groups.symmpin.out" | sed 's/^/= /'
}
# Issue 11's tensor-parallel decode step (tests/apps/tp_decode.py), without and with symmpin:
# bitwise identical outputs, and the table of scripts/tp_decode_compare.py (time per step and per
# all-reduce, communication share, share of the expected saving realised).
tp_decode_pair() { # tp_decode_pair NAME: the two runs with the TPD_* settings in the environment
  local name=$1
  "$TORCHRUN" --standalone --nproc_per_node="$NGPU" tests/apps/tp_decode.py >"$OUT/logs/$name.nccl.out" 2>&1 ||
    { echo "without symmpin failed"; tail -n 20 "$OUT/logs/$name.nccl.out"; return 1; }
  SYMMPIN_STATS_FILE="$OUT/logs/$name.stats.%p.json" with_preload "$TORCHRUN" --standalone \
    --nproc_per_node="$NGPU" tests/apps/tp_decode.py >"$OUT/logs/$name.symmpin.out" 2>&1 ||
    { echo "with symmpin failed"; tail -n 20 "$OUT/logs/$name.symmpin.out"; return 1; }
  "$PY" scripts/tp_decode_compare.py "$OUT/logs/$name.nccl.out" "$OUT/logs/$name.symmpin.out" >"$OUT/logs/$name.table"
  local rc=$?
  sed 's/^/= /' "$OUT/logs/$name.table"
  return $rc
}
s_tp_decode() { TPD_MODES=eager,graph tp_decode_pair tp-decode; }
s_overlap() { # a GEMM slowed by concurrent all-reduces: with symmpin's kernels vs NCCL's (issue 11)
  # On one GPU: one rank (its communicator redirected only because the tests ask; nothing waits).
  [ "$NGPU" -ge 2 ] || export SYMMPIN_TEST_ONE_RANK=1
  # SYMMPIN_CHOOSE=static: the question is what symmpin's kernels cost the GEMM, so they must run
  # (the measured choice could give a size back to NCCL).
  SYMMPIN_CHOOSE=static compare_runs overlap '^OVL-DIGEST' "$TORCHRUN" --standalone \
    --nproc_per_node="$NGPU" tests/apps/overlap.py || return 1
  "$PY" scripts/overlap_compare.py "$OUT/logs/overlap.nccl.out" "$OUT/logs/overlap.symmpin.out"
}
s_tp_decode_compile() { # torch.compile(mode="reduce-overhead"): one configuration (compiling is slow)
  TPD_MODES=compile TPD_HIDDEN=4096 TPD_TOKENS=8 tp_decode_pair tp-decode-compile
}
s_dedicated() { # the one-slot-per-site planner: same results as NCCL (and so as the shared planner)
  SYMMPIN_PLANNER=dedicated compare_runs ddp-dedicated '^DDP|^step' \
    "$TORCHRUN" --standalone --nproc_per_node="$NGPU" tests/apps/ddp_train.py || return 1
  TP_TIME=0 SYMMPIN_PLANNER=dedicated compare_runs tp-dedicated '^TP |tp_loop:' \
    "$TORCHRUN" --standalone --nproc_per_node="$NGPU" tests/apps/tp_loop.py || return 1
  SYMMPIN_PLANNER=dedicated compare_runs app-dedicated '^RESULT|symmpin-app:' \
    "$B/tests/apps/symmpin-app" --mode procs
}
s_bench() {
  "$B/tests/gpu/symmpin-bench" --csv "$OUT/bench.csv" || return 1
}
s_speed() { # the program's own timings with and without the preload, alternating
  for i in 1 2; do
    echo "== run $i: NCCL"; "$B/tests/apps/symmpin-app" --mode procs --bench
    echo "== run $i: symmpin"; with_preload "$B/tests/apps/symmpin-app" --mode procs --bench
  done
  for i in 1 2; do
    echo "== tp run $i: NCCL"; "$TORCHRUN" --standalone --nproc_per_node="$NGPU" tests/apps/tp_loop.py 2>&1 | grep tp-bench
    echo "== tp run $i: symmpin"; with_preload "$TORCHRUN" --standalone --nproc_per_node="$NGPU" tests/apps/tp_loop.py 2>&1 | grep tp-bench
  done
}

all=(info oneshot pool sanitizer app app_diverge two_streams straggler deadline trust_side trust_sites trust_graphs trust_fault trust_abort trust_churn trust_busy ddp tp dedicated bench speed tp_decode tp_decode_compile dp_groups overlap)
[ "${1:-}" = "--list" ] && { echo "${all[*]}"; exit 0; }
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=("${all[@]}")
for s in "${steps[@]}"; do step "$s" "s_$s"; done
echo "==== summary ($NGPU GPUs)"
printf '%s\n' "${results[@]}"
pass=$(printf '%s\n' "${results[@]}" | grep -c ': PASS' || true)
fail=$(printf '%s\n' "${results[@]}" | grep -c ': FAIL' || true)
skipped=$(printf '%s\n' "${results[@]}" | grep -c ': SKIP' || true)
echo "gpu-suite: $pass passed, $fail failed, $skipped skipped"
[ "$fail" -eq 0 ]
