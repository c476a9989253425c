#!/usr/bin/env bash
# The GPU suite: run on a GPU machine from the repository root, over a build made elsewhere
# (scripts/test.sh builds it; the device tool carries build/). Every step prints one line
#   STEP <name>: PASS|FAIL|SKIP|NOT RUN (<s> s) [<ranks>, <per GPU>, NCCL <transport>] <notes>
# then its "= " result lines; full logs go under $SUITE_OUT/logs (default /tmp/symmpin-gpu/logs),
# packed into the file SUITE_ARCHIVE (a .tgz) at the end if set.
# Usage: scripts/gpu-suite.sh [--group a|b|c] [step ...]   (--list: the steps; --groups: the groups)
#
# Multi-rank steps run RANKS ranks (default 2; the app and trust steps also 3 and 4): where there
# are fewer GPUs than ranks, ranks share GPUs (rank r on GPU r % GPUs): each gets its own NCCL host
# id, so NCCL talks over its socket transport on loopback, and all share /dev/shm, so symmpin sees
# one host (scripts/suite_lib.sh: place_ranks). The two-host steps give ranks a /dev/shm per "host".
# Teardown policy: every run is bounded; a run with symmpin is judged against NCCL alone in the
# same configuration (a hang only the symmpin run shows is a FAIL; NCCL's own teardown hang, seen
# on one GPU over sockets, is noted). SKIP only for what needs two GPUs.
#
# Settings (environment): RANKS (2), APP_RANK_COUNTS ("2 3 4"), TRUST_RANK_COUNTS ("2 3"),
# STRAGGLE_MS (60000), GRAPH_REPLAYS (2000), CHURN_CYCLES (1000, with symmpin), CHURN_NCCL_CYCLES
# (20, NCCL alone: the device-memory baseline), CHURN_CALLS (32 per cycle), CHURN_SECONDS (540: the
# symmpin side stops there, or earlier if the step's time runs out; over sockets a cycle takes
# ~0.51 s with or without symmpin, so 1000 cycles need group d alone, SUITE_DEADLINE_S=590),
# TWO_HOSTS_ROUNDS (2), RUN_TIMEOUT (240 s per run),
# TEARDOWN_S (30 s after a run's results), FIRST_CALL_LIMIT_MS (20: symmpin's first all-reduce
# at most this much above NCCL alone's, in straggler and two_hosts), SPD_RANK_COUNTS ("3 4": the
# sp_decode step's rank counts run twice with symmpin), SANITIZER_RANK_OPTS (sanitizer_ranks' tool options),
# STEP_TIMEOUT (per step, default per step below), SUITE_DEADLINE_S (560: steps that would start
# later are NOT RUN, so one 10-minute device call always ends with the summary; 0: none),
# LIFE_NCCL_DIR (the life step's NCCL 2.28.7+: PyTorch's, put first in LD_LIBRARY_PATH).
set -u
cd "$(dirname "$0")/.." || exit 2
SUITE_ROOT=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=${SYMMPIN_BUILD_DIR:-build}
case $B in /*) ;; *) B=$PWD/$B ;; esac
# Not $OUT: on the device machine that is the folder whose files come back, at most 8 of them
# (SUITE_ARCHIVE packs the logs into one file there).
OUT=${SUITE_OUT:-/tmp/symmpin-gpu}
mkdir -p "$OUT/logs"
LIB=$B/libsymmpin.so.0
NGPU=${SUITE_NGPU:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)}
TORCHRUN=$(command -v torchrun || echo /opt/torch/.venv/bin/torchrun)
# The python beside torchrun (PyTorch's virtual environment), else the one on PATH.
PY=${SUITE_PYTHON:-$(dirname "$TORCHRUN")/python3}
[ -x "$PY" ] || PY=$(command -v python3)
APP=$B/tests/apps/symmpin-app
TRUST=$B/tests/apps/symmpin-trust
LIFE=$B/tests/apps/symmpin-life
# An NCCL with ncclCommRevoke (2.28.7+) for the life step: PyTorch's copy (the system's is 2.28.3).
LIFE_NCCL_DIR=${LIFE_NCCL_DIR:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib}
RANKS=${RANKS:-2}
APP_RANK_COUNTS=${APP_RANK_COUNTS:-"$RANKS 3 4"}
TRUST_RANK_COUNTS=${TRUST_RANK_COUNTS:-"$RANKS 3"}
TEARDOWN_S=${TEARDOWN_S:-30}
# How much later than NCCL alone's symmpin's first all-reduce may complete (straggler, two_hosts).
# 20 ms: with ranks sharing one GPU over sockets NCCL's own first call varies by 20 ms from run to
# run (51 to 70 ms on 2026-12-03), and a run with symmpin came +10.4 ms above its NCCL run, then
# -4.2 ms in the next; the stall this guards against (the kernels loaded at the first call) was
# +87 ms.
FIRST_CALL_LIMIT_MS=${FIRST_CALL_LIMIT_MS:-20}
SUITE_DEADLINE_S=${SUITE_DEADLINE_S:-560}
export TEARDOWN_S
# shellcheck source=scripts/suite_lib.sh
. "$SUITE_ROOT/scripts/suite_lib.sh"
results=()
suite_t0=$SECONDS

# ---- steps and their bounds ----

step_limit() { # the default bound of a step, in seconds
  case $1 in
  straggler) echo $((2 * ${STRAGGLE_MS:-60000} / 1000 + 200)) ;;
  trust_churn) echo $((${CHURN_SECONDS:-540} + 240)) ;;
  sanitizer | trust_graphs | dedicated | tp_decode_compile | sp_decode) echo 480 ;;
  *) echo 300 ;;
  esac
}

step_need() { # the least time a step can finish in: with less left before the deadline, NOT RUN
  case $1 in
  straggler) echo $((2 * ${STRAGGLE_MS:-60000} / 1000 + 60)) ;;
  trust_churn | tp_decode_compile | sp_decode) echo 150 ;;
  sanitizer | sanitizer_ranks | trust_graphs) echo 90 ;;
  *) echo 45 ;;
  esac
}

step() { # step NAME CMD...: run, log, record the step's line
  local name=$1; shift
  local log="$OUT/logs/$name.log" t0=$SECONDS limit
  limit=${STEP_TIMEOUT:-$(step_limit "$name")}
  if [ "$SUITE_DEADLINE_S" -gt 0 ]; then
    local left=$((SUITE_DEADLINE_S - (SECONDS - suite_t0) - 10))
    if [ "$left" -lt "$(step_need "$name")" ]; then
      results+=("STEP $name: NOT RUN (the suite's deadline: ${left} s left, it needs $(step_need "$name"))"); echo "${results[-1]}"
      return 1
    fi
    [ "$limit" -le "$left" ] || limit=$left
  fi
  rm -f "$OUT/logs/$name.cfg" "$OUT/logs/$name.notes"
  export STEP=$name STEP_LIMIT=$limit STEP_T0=$SECONDS
  # Each step in its own process group, so a hung step is stopped with all its children (runs
  # under `timeout` have groups of their own: bounded_run passes the TERM on).
  set -m
  ( "$@" ) >"$log" 2>&1 &
  local pid=$!
  set +m
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ $((SECONDS - t0)) -ge "$limit" ]; then
      echo "step $name: stopped after $((SECONDS - t0)) s (limit $limit s)" >>"$log"
      kill -TERM -- -"$pid" 2>/dev/null; sleep 8; kill -KILL -- -"$pid" 2>/dev/null
      break
    fi
  done
  wait "$pid"
  local rc=$?
  # 77 after "needs 2 GPUs": the step cannot run here: SKIP, neither passed nor failed (any other
  # exit 77, e.g. a test binary's own, stays a failure).
  local verdict=PASS; [ $rc -eq 0 ] || verdict="FAIL(rc=$rc)"
  if [ $rc -eq 77 ] && tail -n 1 "$log" | grep -q '^needs 2 GPUs'; then verdict="SKIP($(tail -n 1 "$log"))"; rc=0; fi
  local words last
  words=$(step_words "$name")
  last=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n1)
  results+=("STEP $name: $verdict ($((SECONDS - t0)) s)${words:+ $words}${last:+ | $last}")
  echo "${results[-1]}"
  [ $rc -eq 0 ] || tail -n 15 "$log" | sed 's/^/    | /'
  # Lines a step marks with "= " are its results: shown here too, so they survive without the logs.
  grep '^= ' "$log" | sed 's/^= /    /' | head -n 40
  return $rc
}

needs_two_gpus() { # needs_two_gpus WHY: end a step that one GPU cannot run (SKIP)
  [ "$NGPU" -ge 2 ] && return 0
  echo "needs 2 GPUs: $1"
  return 1
}

# The time a run may take: RUN_TIMEOUT, within what is left of the step.
run_limit() {
  local left=$((STEP_LIMIT - (SECONDS - STEP_T0) - 10)) want=${RUN_TIMEOUT:-240}
  [ "$want" -le "$left" ] || want=$left
  [ "$want" -ge 20 ] || want=20
  echo "$want"
}

# ---- runs ----

# run_side NAME SIDE NRANKS SHM_HOSTS CMD...: one run of CMD, NCCL alone (SIDE nccl) or under
# symmpin (SIDE symmpin: INFO log, statistics, a trace unless SIDE_TRACE=0), its N ranks placed by
# place_ranks, bounded (bounded_run; a C app's own launcher gets the same bounds). Log:
# $OUT/logs/NAME.SIDE.out; NCCL's INFO lines (the transport) beside it. Returns the run's status.
run_side() {
  local name=$1 side=$2 n=$3 hosts=$4
  shift 4
  local log="$OUT/logs/$name.$side.out" limit
  limit=$(run_limit)
  rm -f "$OUT/logs/$name.$side.nccl."*
  # A run's checks read every statistics file and trace of its name: none from an earlier run.
  [ "$side" = nccl ] || rm -f "$OUT/logs/$name.stats."*.json "$OUT/logs/$name.trace."*
  (
    place_ranks "$n" "$hosts" || exit 2
    export APP_TEARDOWN_S=$TEARDOWN_S APP_RANK_TIMEOUT_S=$((limit > 30 ? limit - 15 : limit))
    if [ -z "${NCCL_DEBUG:-}" ]; then
      export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_DEBUG_FILE="$OUT/logs/$name.$side.nccl.%h.%p"
    fi
    if [ "$side" = symmpin ]; then
      export SYMMPIN_DEBUG=${SYMMPIN_DEBUG:-INFO} SYMMPIN_STATS=1 SYMMPIN_STATS_FILE="$OUT/logs/$name.stats.%p.json"
      [ "${SIDE_TRACE:-1}" = 1 ] && export SYMMPIN_TRACE="$OUT/logs/$name.trace.%r.%p"
      set -- env LD_PRELOAD="$LIB" "$@" # the command only, not this shell's own tools
    fi
    bounded_run "$log" "$limit" "$n" "$@"
    local rc=$?
    step_config "$(placement_words "$n" "$hosts"), NCCL $(nccl_transport "$OUT/logs/$name.$side.nccl."*)"
    if [ -n "${RANK_ENV_SHM_ROOT:-}" ]; then # what the run left in its hosts' /dev/shm
      local h
      for h in "$RANK_ENV_SHM_ROOT"/host*; do
        echo "run: left in $(basename "$h")'s /dev/shm: $(find "$h" -mindepth 1 -printf '%f ' | head -c 500)" >>"$log"
      done
      rm -rf "$RANK_ENV_SHM_ROOT"
    fi
    exit "$rc"
  )
}

# judge_pair NAME PATTERN RC_NCCL RC_SYMMPIN: the teardown policy over both runs, then their result
# lines (PATTERN) must be there and identical, and neither log may report a failed check. An empty
# PATTERN (runs whose counts differ by timing or by design): each log must end its checks with
# "N passed, 0 failed" instead.
judge_pair() {
  local name=$1 pattern=$2 rc_a=$3 rc_b=$4
  local la="$OUT/logs/$name.nccl.out" lb="$OUT/logs/$name.symmpin.out" oa ob note ok=0 a b
  oa=$(outcome_of "$la" "$rc_a")
  ob=$(outcome_of "$lb" "$rc_b")
  echo "without symmpin: $oa (exit $rc_a); with symmpin: $ob (exit $rc_b)"
  note=$(teardown_verdict "$oa" "$ob") || ok=1
  if [ -n "$note" ]; then echo "teardown: $note"; step_note "$note"; fi
  if [ -n "$pattern" ]; then
    a=$(grep -E "$pattern" "$la" | sort)
    b=$(grep -E "$pattern" "$lb" | sort)
    echo "without symmpin:"; echo "$a"; echo "with symmpin:"; echo "$b"
    if [ -z "$a" ] || [ "$a" != "$b" ]; then echo "result lines missing or different"; ok=1; fi
  else
    grep -qE '\b[0-9]+ passed, 0 failed' "$la" || { echo "without symmpin: no passing summary"; ok=1; }
    grep -qE '\b[0-9]+ passed, 0 failed' "$lb" || { echo "with symmpin: no passing summary"; ok=1; }
  fi
  grep -E "symmpin (WARN|INFO)|redirect|reason|pool" "$lb" | head -n 40
  if reports_failure "$la"; then echo "without symmpin: a check failed"; ok=1; fi
  if reports_failure "$lb"; then echo "with symmpin: a check failed"; ok=1; fi
  if [ $ok -ne 0 ]; then
    echo "--- end of the log without symmpin:"; tail -n 25 "$la"
    echo "--- end of the log with symmpin:"; tail -n 40 "$lb"
    grep -h "NCCL WARN" "$OUT/logs/$name".*.nccl.* 2>/dev/null | head -n 10
  fi
  return $ok
}

# compare_runs NAME PATTERN NRANKS SHM_HOSTS CMD...: the same program NCCL alone, then with symmpin.
compare_runs() {
  local name=$1 pattern=$2 n=$3 hosts=$4
  shift 4
  run_side "$name" nccl "$n" "$hosts" "$@"
  local rc_a=$?
  run_side "$name" symmpin "$n" "$hosts" "$@"
  local rc_b=$?
  judge_pair "$name" "$pattern" "$rc_a" "$rc_b"
}

# repeat_runs NAME PATTERN NRANKS SHM_HOSTS CMD...: the same program twice with symmpin (logs
# NAME.symmpin.out and NAME-again.symmpin.out): where no NCCL-alone run can be the reference (float
# sums of 3 or more ranks round in NCCL's order, not symmpin's), its result lines (PATTERN) must be
# there from every rank and identical from run to run. Both runs must end (no teardown hang is
# excused: there is no NCCL-alone run here to show it is NCCL's own), and neither may report a
# failed check.
repeat_runs() {
  local name=$1 pattern=$2 n=$3 hosts=$4
  shift 4
  local la="$OUT/logs/$name.symmpin.out" lb="$OUT/logs/$name-again.symmpin.out" a b ranks ok=0 rc_a rc_b oa ob
  run_side "$name" symmpin "$n" "$hosts" "$@"
  rc_a=$?
  run_side "$name-again" symmpin "$n" "$hosts" "$@"
  rc_b=$?
  oa=$(outcome_of "$la" "$rc_a")
  ob=$(outcome_of "$lb" "$rc_b")
  echo "first run: $oa (exit $rc_a); second run: $ob (exit $rc_b)"
  [ "$oa/$ob" = finished/finished ] || { echo "a run did not end by itself"; ok=1; }
  a=$(grep -E "$pattern" "$la" | sort)
  b=$(grep -E "$pattern" "$lb" | sort)
  echo "first run:"; echo "$a"; echo "second run:"; echo "$b"
  ranks=$(echo "$a" | grep -oE 'rank=[0-9]+' | sort -u | wc -l)
  if [ -z "$a" ] || [ "$ranks" -ne "$n" ]; then echo "result lines missing: from $ranks of $n ranks"; ok=1; fi
  if [ "$a" != "$b" ]; then echo "result lines differ from run to run"; ok=1; fi
  if reports_failure "$la" || reports_failure "$lb"; then echo "a check failed"; ok=1; fi
  [ $ok -eq 0 ] || { echo "--- end of the second run's log:"; tail -n 30 "$lb"; }
  return $ok
}

# torch_argv N: TORCH_ARGV = torchrun for N ranks, each started through scripts/rank-env.sh.
torch_argv() {
  TORCH_ARGV=("$TORCHRUN" --standalone --nproc_per_node="$1" --no-python bash "$SUITE_ROOT/scripts/rank-env.sh" "$PY")
}

stats_check() { "$PY" "$SUITE_ROOT/scripts/suite_stats.py" "$@"; }

# Ranks share GPUs in this configuration: times are the GPU's time slices, not a speed.
shared_gpu() { [ "$(ranks_per_gpu "$RANKS")" -gt 1 ]; }

# ---- the steps ----
# One file per family; each s_NAME is the step NAME.
# shellcheck source=scripts/suite_steps_apps.sh
. "$SUITE_ROOT/scripts/suite_steps_apps.sh"
# shellcheck source=scripts/suite_steps_trust.sh
. "$SUITE_ROOT/scripts/suite_steps_trust.sh"
# shellcheck source=scripts/suite_steps_torch.sh
. "$SUITE_ROOT/scripts/suite_steps_torch.sh"

all=(info oneshot pool peer_access sanitizer sanitizer_ranks app colls app_threads app_diverge reset two_streams
     group_simulate straggler deadline trust_side trust_sites trust_graphs trust_fault trust_abort
     trust_churn trust_busy life two_hosts mixed_hosts ddp tp dedicated bench speed tp_decode
     tp_decode_compile sp_decode dp_groups groups_back overlap)
# Groups that each fit one 10-minute device call on one H200 (2 ranks sharing it; estimates from
# the runs of 2026-12-02: a 230 s, b 470 s with a 60 s straggler, d 560 s; 2026-12-03: b 356 s
# with a 5 s straggler, c about 430 s with sp_decode's 277 s).
declare -A groups=(
  [a]="info oneshot pool peer_access sanitizer sanitizer_ranks app colls app_threads app_diverge reset two_streams group_simulate deadline trust_side trust_sites trust_fault trust_abort trust_busy life bench speed"
  [b]="two_hosts mixed_hosts trust_graphs straggler ddp tp dedicated dp_groups"
  [c]="tp_decode overlap tp_decode_compile sp_decode groups_back"
  [d]="trust_churn"
)
case "${1:-}" in
--list) echo "${all[*]}"; exit 0 ;;
--groups) for g in a b c d; do echo "$g: ${groups[$g]}"; done; exit 0 ;;
--group)
  if [ -z "${2:-}" ] || [ -z "${groups[${2}]:-}" ]; then echo "gpu-suite: --group a|b|c|d" >&2; exit 2; fi
  read -r -a steps <<<"${groups[$2]}"
  shift 2
  steps+=("$@") ;;
*) steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=("${all[@]}") ;;
esac
for s in "${steps[@]}"; do
  declare -F "s_$s" >/dev/null || { echo "gpu-suite: no step '$s' (--list)" >&2; exit 2; }
done
rm -rf "$OUT/logs" && mkdir -p "$OUT/logs" # this run's logs only
echo "gpu-suite: $NGPU GPU(s), $RANKS ranks ($(placement_words "$RANKS")), logs in $OUT/logs"
for s in "${steps[@]}"; do step "$s" "s_$s"; done
echo "==== summary ($NGPU GPUs, $RANKS ranks: $(placement_words "$RANKS"); $((SECONDS - suite_t0)) s)"
printf '%s\n' "${results[@]}"
pass=$(printf '%s\n' "${results[@]}" | grep -c ': PASS' || true)
fail=$(printf '%s\n' "${results[@]}" | grep -c ': FAIL' || true)
skipped=$(printf '%s\n' "${results[@]}" | grep -c ': SKIP' || true)
notrun=$(printf '%s\n' "${results[@]}" | grep -c ': NOT RUN' || true)
echo "gpu-suite: $pass passed, $fail failed, $skipped skipped, $notrun not run"
if [ -n "${SUITE_ARCHIVE:-}" ]; then
  printf '%s\n' "${results[@]}" >"$OUT/logs/summary.txt"
  packed=(logs); [ -f "$OUT/bench.csv" ] && packed+=(bench.csv)
  tar czf "$SUITE_ARCHIVE" -C "$OUT" "${packed[@]}" &&
    echo "gpu-suite: logs in $SUITE_ARCHIVE ($(du -h "$SUITE_ARCHIVE" | cut -f1))"
fi
[ "$fail" -eq 0 ] && [ "$notrun" -eq 0 ]
