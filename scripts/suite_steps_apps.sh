# shellcheck shell=bash
# The GPU suite's steps: kernels, pools, sanitizers and our NCCL program (symmpin-app).
# Sourced by scripts/gpu-suite.sh, whose settings, runs (run_side, compare_runs, judge_pair) and
# step runner they use; each s_NAME is the step NAME.

s_info() {
  nvidia-smi; nvidia-smi topo -m; ldd "$LIB"
  echo "gpus=$NGPU ranks=$RANKS ($(placement_words "$RANKS"))"
  if shared_gpu; then echo "= ranks share GPUs: an NCCL host id per rank, NCCL over sockets on lo"; fi
  "$APP" --version
}
s_oneshot() { # simulated ranks in one process (kernels only)
  step_config "one process, 2/3/4/8 simulated ranks"
  for n in 2 3 4 8; do "$B/tests/gpu/test_oneshot" $n || return 1; done
}
s_pool() {
  step_config "pool ranks as processes, threads, one thread"
  # shellcheck disable=SC2086 # each mode is two words
  for m in "--procs 2" "--threads 2" "--single 2" "--procs 4"; do "$B/tests/symmem/test_pool" $m || return 1; done
}
s_peer_access() { # pools and kernels through peer mappings between two GPUs, one rank per GPU
  needs_two_gpus "peer access between two GPUs" || return 77
  local n=$((NGPU < 8 ? NGPU : 8))
  compare_runs peer-app '^RESULT|symmpin-app:' "$n" 0 "$APP" --mode procs --ranks "$n" || return 1
  stats_check redirected --count "$n" "$OUT"/logs/peer-app.stats.*.json
}
s_sanitizer() {
  # One process: the sanitizers serialize kernels, and ranks of one process spin-wait for each
  # other (sanitizer_ranks runs ranks as processes).
  step_config "one process, 1 simulated rank"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tests/gpu/test_oneshot" 1 --small &&
  compute-sanitizer --tool racecheck --error-exitcode 9 "$B/tests/gpu/test_oneshot" 1 --small &&
  compute-sanitizer --tool synccheck --error-exitcode 9 "$B/tests/gpu/test_oneshot" 1 --small &&
  compute-sanitizer --tool memcheck --leak-check full --report-api-errors no --error-exitcode 9 "$B/tests/symmem/test_pool" --threads 2
}
s_sanitizer_ranks() { # memcheck on every rank of a symmpin run (ranks as processes, redirected)
  local n=$RANKS log="$OUT/logs/sanitizer-ranks.symmpin.out"
  # NCCL's kernels and API calls are NCCL's business (its probing returns API errors by design);
  # symmpin's kernels are checked. SANITIZER_RANK_OPTS replaces these options.
  local opts=${SANITIZER_RANK_OPTS:-"--tool memcheck --error-exitcode 9 --print-limit 20 --report-api-errors no --kernel-name-exclude kns=nccl"}
  EXTRA_RANK_WRAPPER="compute-sanitizer $opts" \
    run_side sanitizer-ranks symmpin "$n" 0 "$APP" --mode procs --ranks "$n" --iters 2 --quiet
  local rc=$? o clean
  o=$(outcome_of "$log" $rc)
  clean=$(grep -c 'ERROR SUMMARY: 0 errors' "$log")
  echo "= outcome: $o; ranks with 0 sanitizer errors: $clean of $n"
  grep -E 'ERROR SUMMARY|Invalid|Error|symmpin-app:' "$log" | head -n 20
  stats_check redirected --count "$n" "$OUT"/logs/sanitizer-ranks.stats.*.json || return 1
  [ "$o" = finished ] && [ "$clean" -eq "$n" ]
}
s_app() { # our NCCL program, every datatype and op, at each rank count
  local n rc=0
  for n in $APP_RANK_COUNTS; do
    echo "== $n ranks"
    compare_runs "app-$n" '^RESULT|symmpin-app:' "$n" 0 "$APP" --mode procs --ranks "$n" || rc=1
    stats_check redirected --count "$n" "$OUT/logs/app-$n".stats.*.json || rc=1
  done
  return $rc
}
s_colls() { # our NCCL program with all-gathers and reduce-scatters too (every datatype and op, in
  # place and not), at each rank count: exact results, checksums equal to NCCL alone's, and calls
  # of each collective redirected
  local n rc=0 coll
  for n in $APP_RANK_COUNTS; do
    echo "== $n ranks"
    compare_runs "colls-$n" '^RESULT|symmpin-app:' "$n" 0 "$APP" --mode procs --ranks "$n" --colls || rc=1
    for coll in allreduce allgather reducescatter; do
      stats_check redirected --coll "$coll" --count "$n" "$OUT/logs/colls-$n".stats.*.json || rc=1
    done
  done
  return $rc
}
s_app_threads() { # ranks as threads of one process, and one thread driving every rank
  needs_two_gpus "one process has one NCCL host id, and NCCL takes one rank per GPU of a host" || return 77
  local n=$((NGPU < 8 ? NGPU : 8)) mode
  for mode in threads single; do
    compare_runs "app-$mode" '^RESULT|symmpin-app:' "$n" 0 "$APP" --mode $mode --ranks "$n" || return 1
  done
}
s_app_diverge() { # ranks reach some calls from different sites: right results
  compare_runs app-diverge '^RESULT|symmpin-app:' "$RANKS" 0 "$APP" --mode procs --ranks "$RANKS" --diverge
}
s_reset() { # cudaDeviceReset, then launches in the new context of the same process (issue 36,
  # item 3: kernel functions of the destroyed context, whose address the new one may have, must
  # never be launched): the kernels alone, exact before and after; then our NCCL program with a
  # new communicator after the reset, as NCCL alone, both communicators of every rank redirected
  "$B/tests/gpu/test_oneshot" 2 --reset >"$OUT/logs/reset-oneshot.out" 2>&1
  local rc=$?
  grep -E '^reset|^FAIL|^test_oneshot:' "$OUT/logs/reset-oneshot.out" | sed 's/^/= /'
  [ $rc -eq 0 ] || return 1
  compare_runs app-reset '^RESULT|^RESET|symmpin-app:' "$RANKS" 0 \
    "$APP" --mode procs --ranks "$RANKS" --reset --iters 2 || return 1
  stats_check redirected --count $((2 * RANKS)) "$OUT"/logs/app-reset.stats.*.json
}
s_two_streams() { # break the warm-up's stream pattern: exact results (calls off their site's
  # home stream are spliced into its order, or go to NCCL when that cannot be done: counted)
  compare_runs app-two-streams '^RESULT|symmpin-app:' "$RANKS" 0 "$APP" --mode procs --ranks "$RANKS" --two-streams --iters 8 || return 1
  local n
  n=$(cat "$OUT"/logs/app-two-streams.stats.*.json | grep -o '"stream": [0-9]*' | awk '{s += $2} END {print s + 0}')
  echo "= calls sent to NCCL for their stream: $n"
}
s_group_simulate() { # a group ended by ncclGroupSimulateEnd half-way: it runs nothing, and every
  # later call is exact and still redirected (a library that held them back fails here)
  # SYMMPIN_CHOOSE=static: the measured choice could give a shape back to NCCL between the two
  # iterations compared.
  SYMMPIN_CHOOSE=static compare_runs group-simulate '^RESULT|symmpin-app:' "$RANKS" 0 \
    "$APP" --mode procs --ranks "$RANKS" --group-simulate || return 1
  grep -h '^GROUPSIM' "$OUT/logs/group-simulate.symmpin.out" | sed 's/^/= /'
  stats_check group-simulate "$OUT/logs/group-simulate.symmpin.out" "$OUT"/logs/group-simulate.trace.*
}
s_straggler() { # a peer ${STRAGGLE_MS:-60000} ms late: the right result, as NCCL gives
  # SYMMPIN_CHOOSE=static: the late call is one of symmpin's kernels (not an NCCL probe).
  local ms=${STRAGGLE_MS:-60000}
  SYMMPIN_CHOOSE=static RUN_TIMEOUT=$((ms / 1000 + 120)) compare_runs app-straggler '^RESULT|symmpin-app:' "$RANKS" 0 \
    "$APP" --mode procs --ranks "$RANKS" --straggle "$ms" || return 1
  # The first all-reduce (before the late peer's call): within FIRST_CALL_LIMIT_MS of NCCL's.
  "$PY" "$SUITE_ROOT/scripts/suite_first_call.py" --first-limit-ms "$FIRST_CALL_LIMIT_MS" \
    "$OUT/logs/app-straggler.nccl.out" -- "$OUT/logs/app-straggler.symmpin.out"
}
s_deadline() { # with a kernel deadline, a peer later than it is an error the program sees, never
  # a silent result: the app stops on the NCCL error, and the log names the site and the peer
  local log="$OUT/logs/app-deadline.symmpin.out"
  # A rank that stopped on the error leaves its peer in its call (as with NCCL alone): the
  # launcher stops it TEARDOWN_S after (10 s here).
  step_note "the app stops on the error, as it must"
  # SYMMPIN_CHOOSE=static: the straggled call must be one of symmpin's kernels (under the measured
  # choice it can be a probe, which NCCL runs: no kernel of symmpin's waits then).
  SYMMPIN_CHOOSE=static SYMMPIN_KERNEL_TIMEOUT_MS=2000 TEARDOWN_S=10 SIDE_TRACE=0 run_side app-deadline symmpin "$RANKS" 0 \
    "$APP" --mode procs --ranks "$RANKS" --straggle 5000
  local rc=$?
  grep -E "gave up waiting|ncclRemoteError|remote|FATAL|failed|launch:" "$log" | head -n 12
  [ $rc -ne 0 ] && grep -q "gave up waiting for rank" "$log" && grep -q "FATAL" "$log" &&
    ! grep -q "hung before its results" "$log"
}
