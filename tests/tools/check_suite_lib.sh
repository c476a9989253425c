#!/usr/bin/env bash
# scripts/suite_lib.sh on the CPU (TAP): where ranks go, bounded runs of made-up commands (finished,
# hung after their results, hung before them), the outcome of made-up logs, the teardown policy's
# table, the NCCL transport read from made-up INFO lines, and a step's words.
# Arguments: SOURCE_ROOT
set -u
SUITE_ROOT=$1
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
mkdir -p "$OUT/logs"
# shellcheck source=scripts/suite_lib.sh
. "$SUITE_ROOT/scripts/suite_lib.sh"
n=0 bad=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
no() { n=$((n + 1)); echo "not ok $n - $1"; bad=$((bad + 1)); }
is() { if [ "$2" = "$3" ]; then ok "$1"; else no "$1: got '$2', want '$3'"; fi; }

# ---- placement ----
NGPU=1
is "2 ranks on 1 GPU: 2 per GPU" "$(ranks_per_gpu 2)" 2
NGPU=2
is "3 ranks on 2 GPUs: 2 on the busiest" "$(ranks_per_gpu 3)" 2
is "2 ranks on 2 GPUs: 1 per GPU" "$(ranks_per_gpu 2)" 1
NGPU=0
is "no GPU counts as one" "$(ranks_per_gpu 2)" 2
NGPU=1
(
  place_ranks 2
  is "shared GPU: a host id per rank" "$RANK_ENV_NCCL_HOSTS/$RANK_ENV_SHM_HOSTS" 2/0
  is "shared GPU: sockets on loopback" "$NCCL_SOCKET_IFNAME/$NCCL_IB_DISABLE" lo/1
  is "shared GPU: ranks start through rank-env.sh" "$APP_RANK_WRAPPER" "bash $SUITE_ROOT/scripts/rank-env.sh"
  is "no private /dev/shm" "${RANK_ENV_SHM_ROOT:-unset}" unset
) || bad=$((bad + 1))
n=$((n + 4))
NGPU=4
(
  SUITE_SHM_BASE=$OUT place_ranks 4 2
  is "4 ranks on 4 GPUs in 2 hosts: NCCL sees the 2 hosts" "$RANK_ENV_NCCL_HOSTS/$RANK_ENV_SHM_HOSTS" 2/2
  if [ -d "$RANK_ENV_SHM_ROOT" ]; then ok "a fresh folder for the hosts' /dev/shm"; else no "no folder for the hosts"; fi
  EXTRA_RANK_WRAPPER="compute-sanitizer --tool memcheck" place_ranks 2
  is "one rank per GPU: NCCL's own host" "$RANK_ENV_NCCL_HOSTS" 0
  is "no sockets forced" "${NCCL_SOCKET_IFNAME:-unset}" unset
  is "an extra wrapper follows rank-env.sh" "$APP_RANK_WRAPPER" "bash $SUITE_ROOT/scripts/rank-env.sh compute-sanitizer --tool memcheck"
) || bad=$((bad + 1))
n=$((n + 5))
NGPU=1
is "the words of a placement" "$(placement_words 4 2)" "4 ranks, 4 per GPU, 2 hosts"
is "one rank is one rank" "$(placement_words 1)" "1 rank, 1 per GPU"

# ---- bounded runs: a made-up job of 2 ranks ----
job() { # job MODE: prints like a job of 2 ranks, then behaves
  cat >"$OUT/job.sh" <<'EOF'
case $1 in
ok) echo "RESULTS-DONE rank=0"; echo "RESULTS-DONE rank=1"; exit 0 ;;
hang-after) echo "RESULTS-DONE rank=0"; echo "RESULTS-DONE rank=1"; exec sleep 60 ;;
hang-before) echo "RESULTS-DONE rank=0"; exec sleep 60 ;;
fail) echo "RESULTS-DONE rank=0"; exit 1 ;;
torch-after) # torchrun's end on a TERM: a SignalException, its workers stopped, exit 1
  trap 'echo "torch.distributed.elastic.multiprocessing.api.SignalException: Process $$ got signal: 15" >&2; exit 1' TERM
  echo "RESULTS-DONE rank=0"; echo "RESULTS-DONE rank=1"; sleep 60 & wait ;;
esac
EOF
  echo "$OUT/job.sh"
}
t0=$SECONDS
TEARDOWN_S=1 bounded_run "$OUT/ok.log" 20 2 bash "$(job)" ok
rc=$?
is "a clean run: its status" "$rc/$(outcome_of "$OUT/ok.log" $rc)" 0/finished
TEARDOWN_S=1 bounded_run "$OUT/after.log" 20 2 bash "$(job)" hang-after
rc=$?
is "a run that hangs after its results is stopped TEARDOWN_S after them" "$(outcome_of "$OUT/after.log" $rc)" hung-after-results
if [ $((SECONDS - t0)) -le 8 ]; then ok "... within seconds, not at the limit"; else no "the grace was not applied ($((SECONDS - t0)) s)"; fi
t0=$SECONDS
TEARDOWN_S=30 bounded_run "$OUT/before.log" 2 2 bash "$(job)" hang-before
rc=$?
is "a run without all its results at the limit hung before them" "$(outcome_of "$OUT/before.log" $rc)" hung-before-results
if [ $((SECONDS - t0)) -le 8 ]; then ok "... stopped at the limit"; else no "the limit was not applied"; fi
TEARDOWN_S=1 bounded_run "$OUT/fail.log" 20 2 bash "$(job)" fail
rc=$?
is "a failing run failed" "$rc/$(outcome_of "$OUT/fail.log" $rc)" 1/failed
TEARDOWN_S=1 bounded_run "$OUT/torch-after.log" 20 2 bash "$(job)" torch-after
rc=$?
is "torchrun hanging after its results, stopped: exit 1 after its SignalException is that hang" \
  "$rc/$(outcome_of "$OUT/torch-after.log" $rc)" 1/hung-after-results
# A stop reaches the whole run (timeout's process group): a child of the job is gone too.
cat >"$OUT/tree.sh" <<EOF
sleep 60 & echo \$! >"$OUT/child.pid"; echo "RESULTS-DONE rank=0"; wait
EOF
TEARDOWN_S=1 bounded_run "$OUT/tree.log" 20 1 bash "$OUT/tree.sh"
gone() { # no such process, or a zombie (whoever reaps orphans here may not)
  ! kill -0 "$1" 2>/dev/null || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]
}
for _ in 1 2 3 4 5 6 7 8 9 10; do gone "$(cat "$OUT/child.pid")" && break; sleep 0.5; done
if gone "$(cat "$OUT/child.pid")"; then ok "a stop ends the run's children"; else no "a child outlived the stop"; kill "$(cat "$OUT/child.pid")"; fi

# ---- outcomes of made-up logs (what the C apps' launcher writes) ----
printf 'RESULT rank=0 passed=9 failed=0\nlaunch: rank 1 hung after its results: stopped 60 s after them\nsymmpin-app: 10 passed, 0 failed\n' >"$OUT/c-after.log"
is "a C app's teardown hang (exit 3)" "$(outcome_of "$OUT/c-after.log" 3)" hung-after-results
is "... with any other status it failed" "$(outcome_of "$OUT/c-after.log" 1)" failed
printf 'launch: rank 1 hung after its results: stopped 60 s after them\nlaunch: rank 0 exited abnormally (exit status 2)\n' >"$OUT/c-mixed.log"
is "a hang after results next to a failed rank is a failure" "$(outcome_of "$OUT/c-mixed.log" 3)" failed
printf 'launch: rank 0 hung before its results: stopped 600 s after the start\n' >"$OUT/c-before.log"
is "a C app's hang before results" "$(outcome_of "$OUT/c-before.log" 1)" hung-before-results
printf 'symmpin-app: 10 passed, 0 failed\n' >"$OUT/c-ok.log"
is "a C app that ended" "$(outcome_of "$OUT/c-ok.log" 0)" finished

# ---- outcomes of made-up torchrun logs (torchrun exits 1 on the suite's TERM) ----
stop_line='run: hung after its results: stopped 30 s after them (limit 30 s)'
sig='torch.distributed.elastic.multiprocessing.api.SignalException: Process 4242 got signal'
printf 'RESULTS-DONE rank=0\nRESULTS-DONE rank=1\n%s: 15\n%s\nrun: exit status 1 after 95 s\n' "$sig" "$stop_line" >"$OUT/t-after.log"
is "torchrun stopped after its results (exit 1, SignalException)" "$(outcome_of "$OUT/t-after.log" 1)" hung-after-results
printf '%s: Signals.SIGTERM\n%s\n' "$sig" "$stop_line" >"$OUT/t-after-old.log"
is "... as older Pythons print the signal" "$(outcome_of "$OUT/t-after-old.log" 1)" hung-after-results
is "... any other status is a failure" "$(outcome_of "$OUT/t-after.log" 2)" failed
printf '%s: 15\ntorch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n%s\n' "$sig" "$stop_line" >"$OUT/t-child.log"
is "a failed rank (ChildFailedError) next to the stop is a failure" "$(outcome_of "$OUT/t-child.log" 1)" failed
printf 'RESULTS-DONE rank=0\nRESULTS-DONE rank=1\n%s: 15\nlaunch: rank 1 hung after its results: stopped 60 s after them\n' "$sig" >"$OUT/t-other.log"
is "exit 1 without the suite's own stop is a failure" "$(outcome_of "$OUT/t-other.log" 1)" failed
printf 'RESULTS-DONE rank=0\nRESULTS-DONE rank=1\n%s\n' "$stop_line" >"$OUT/t-nosig.log"
is "exit 1 after the stop without torchrun's SignalException is a failure" "$(outcome_of "$OUT/t-nosig.log" 1)" failed

# ---- the teardown policy ----
verdict() { local note rc; note=$(teardown_verdict "$1" "$2"); rc=$?; echo "$rc:${note:+note}"; }
is "both finished: pass" "$(verdict finished finished)" "0:"
is "NCCL alone hung after results, symmpin ended: pass with a note" "$(verdict hung-after-results finished)" "0:note"
is "both hung after results: pass with a note" "$(verdict hung-after-results hung-after-results)" "0:note"
is "only symmpin hung after results: FAIL" "$(verdict finished hung-after-results)" "1:note"
is "symmpin hung before results: FAIL" "$(verdict hung-after-results hung-before-results)" "1:note"
is "NCCL alone hung before results: FAIL (broken configuration)" "$(verdict hung-before-results finished)" "1:note"
is "symmpin failed: FAIL" "$(verdict finished failed)" "1:note"
is "NCCL alone failed: FAIL" "$(verdict failed finished)" "1:note"

# ---- failures in a log ----
printf 'TP rank=0 eager_checks passed=72 failed=0 graph_checks passed=600 failed=0\ntp_loop: 672 passed, 0 failed\n' >"$OUT/good.log"
if ! reports_failure "$OUT/good.log"; then ok "0 failed is no failure"; else no "0 failed read as a failure"; fi
printf 'tp_loop: 662 passed, 10 failed\n' >"$OUT/bad1.log"
printf 'TP rank=1 eager_checks passed=70 failed=2\n' >"$OUT/bad2.log"
printf 'symmpin-trust: rank 0: call 5: WRONG RESULT with no error reported\n' >"$OUT/bad3.log"
for f in bad1 bad2 bad3; do
  if reports_failure "$OUT/$f.log"; then ok "$f: a failure is seen"; else no "$f: a failure was missed"; fi
done

# ---- the NCCL transport ----
printf 'h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\nh:1:2 [0] NCCL INFO Channel 01/0 : 1[0] -> 0[0] [receive] via NET/Socket/0\n' >"$OUT/sock.1"
printf 'h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n' >"$OUT/p2p.1"
printf 'h:1:2 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\n' >"$OUT/none.1"
is "socket channels" "$(nccl_transport "$OUT/sock.1")" socket
is "P2P and socket channels" "$(nccl_transport "$OUT/sock.1" "$OUT/p2p.1")" P2P+socket
is "INFO lines but no channel" "$(nccl_transport "$OUT/none.1")" none
is "no INFO lines" "$(nccl_transport "$OUT/missing.1")" '?'

# ---- a step's words ----
STEP=demo
step_config "2 ranks, 2 per GPU, NCCL socket"
step_config "2 ranks, 2 per GPU, NCCL socket"
step_config "3 ranks, 3 per GPU, NCCL socket"
step_note "NCCL alone hung in teardown"
is "distinct configurations, then notes" "$(step_words demo)" "[2 ranks, 2 per GPU, NCCL socket; 3 ranks, 3 per GPU, NCCL socket] NCCL alone hung in teardown"
is "a step without records has no words" "$(step_words other)" ""

echo "1..$n"
[ $bad -eq 0 ]
