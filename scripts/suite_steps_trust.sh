# shellcheck shell=bash
# The GPU suite's steps: the trust scenarios (symmpin-trust, symmpin-life) and jobs across "hosts".
# Sourced by scripts/gpu-suite.sh, whose settings, runs (run_side, compare_runs, judge_pair) and
# step runner they use; each s_NAME is the step NAME.

s_trust_side() { # one rank makes one all-reduce on a new stream after warm-up: right results, no error
  local n rc=0
  for n in $TRUST_RANK_COUNTS; do
    compare_runs "trust-side-$n" '^SIDE|^RESULT|symmpin-trust:' "$n" 0 "$TRUST" --scenario side --ranks "$n" || rc=1
    grep -h "redirected\|spliced" "$OUT/logs/trust-side-$n.symmpin.out" | head -n 4
  done
  return $rc
}
s_trust_sites() { # one rank reaches calls from other sites after warm-up: right results, no error,
  # and every rank redirects the same number of calls (routing by shape, not by site)
  local n rc=0
  for n in $TRUST_RANK_COUNTS; do
    compare_runs "trust-sites-$n" '^SITES|^RESULT|symmpin-trust:' "$n" 0 "$TRUST" --scenario sites --ranks "$n" || rc=1
    stats_check redirected --count "$n" --same "$OUT/logs/trust-sites-$n".stats.*.json || rc=1
  done
  return $rc
}
s_trust_graphs() { # two CUDA graphs captured on new streams, replayed alternately 2 x 2000 times
  # on two streams between eager calls: right results, no error, every captured call redirected
  compare_runs trust-graphs '^GRAPHS|^RESULT|symmpin-trust:' "$RANKS" 0 \
    "$TRUST" --scenario graphs --ranks "$RANKS" --cycles "${GRAPH_REPLAYS:-2000}" || return 1
  stats_check captured "$OUT"/logs/trust-graphs.stats.*.json
}
# One faulted run: every rank sees an error within a second and the program ends (it must not
# hang where the clean run without symmpin did not).
fault_run() { # fault_run NAME NRANKS FAULT NCCL_OUTCOME
  local name=$1 n=$2 fault=$3 base=$4 log="$OUT/logs/$1.symmpin.out"
  echo "== SYMMPIN_TEST_FAULT=$fault ($n ranks)"
  SYMMPIN_TEST_FAULT=$fault SIDE_TRACE=0 run_side "$name" symmpin "$n" 0 "$TRUST" --scenario fault --ranks "$n"
  local rc=$? o note
  o=$(outcome_of "$log" $rc)
  grep -E "^FAULT|symmpin-trust:|WRONG|symmpin WARN|launch:" "$log" | cut -c1-300
  note=$(teardown_verdict "$base" "$o") || { echo "= $fault: $o: $note"; return 1; }
  step_note "$note"
  [ $rc -eq 0 ] || [ "$o" = hung-after-results ]
}
s_trust_fault() { # injected faults: an error on every rank within a second, never a silent result
  local n=$RANKS rc=0 base f
  run_side trust-fault-clean nccl "$n" 0 "$TRUST" --scenario fault --ranks "$n"
  local rc_a=$?
  base=$(outcome_of "$OUT/logs/trust-fault-clean.nccl.out" $rc_a)
  case $base in finished | hung-after-results) ;; *) echo "clean run without symmpin: $base"; return 1 ;; esac
  SIDE_TRACE=0 run_side trust-fault-clean symmpin "$n" 0 "$TRUST" --scenario fault --ranks "$n"
  judge_pair trust-fault-clean '^FAULT|^RESULT|symmpin-trust:' $rc_a $? || { echo "= the clean runs differ or fail"; rc=1; }
  for f in skip:1:300 diverge:1:300 skip:0:301 diverge:0:302; do
    fault_run "trust-fault-$f" "$n" "$f" "$base" || rc=1
  done
  for f in skip:2:300 diverge:1:301; do # an odd rank count
    fault_run "trust-fault3-$f" 3 "$f" "$base" || rc=1
  done
  return $rc
}
s_trust_abort() { # ncclCommAbort with an all-reduce in flight returns at once, with and without symmpin
  local n rc=0
  for n in $TRUST_RANK_COUNTS; do
    # No line comparison: how many calls were checked before the abort depends on timing.
    SIDE_TRACE=0 compare_runs "trust-abort-$n" '' "$n" 0 "$TRUST" --scenario abort --ranks "$n" || rc=1
    grep -h "^ABORT" "$OUT/logs/trust-abort-$n".*.out | sed 's/^/= /'
  done
  return $rc
}
s_trust_churn() { # create/use/destroy communicators CHURN_CYCLES times with symmpin (fewer without:
  # NCCL's own set-up over sockets is the cost): files, /dev/shm entries, device memory don't grow
  local cycles=${CHURN_CYCLES:-1000} nccl_cycles=${CHURN_NCCL_CYCLES:-20} calls=${CHURN_CALLS:-32}
  local secs=${CHURN_SECONDS:-540} n=$RANKS left
  local la="$OUT/logs/trust-churn.nccl.out" lb="$OUT/logs/trust-churn.symmpin.out"
  # Each side stops (all ranks agreeing) after its seconds, within what the step has left; the
  # cycles it ran are in its CHURN lines (a symmpin side short of CHURN_CYCLES fails, with its rate).
  left=$((STEP_LIMIT - (SECONDS - STEP_T0)))
  local nccl_secs=$((left / 4 < 120 ? left / 4 : 120))
  [ "$nccl_secs" -ge 10 ] || nccl_secs=10
  RUN_TIMEOUT=$((nccl_secs + 90)) SIDE_TRACE=0 run_side trust-churn nccl "$n" 0 "$TRUST" --scenario churn \
    --ranks "$n" --cycles "$nccl_cycles" --calls-per-cycle "$calls" --churn-seconds "$nccl_secs"
  local rc_a=$?
  # What the symmpin side may take: the step's rest, less its start and end (a few seconds) and
  # the checks after it.
  left=$((STEP_LIMIT - (SECONDS - STEP_T0) - 40))
  [ "$secs" -le "$left" ] || secs=$((left > 20 ? left : 20))
  echo "= NCCL alone: up to $nccl_cycles cycles or $nccl_secs s; with symmpin: up to $cycles cycles or $secs s"
  RUN_TIMEOUT=$((secs + 90)) SIDE_TRACE=0 run_side trust-churn symmpin "$n" 0 "$TRUST" --scenario churn \
    --ranks "$n" --cycles "$cycles" --calls-per-cycle "$calls" --churn-seconds "$secs"
  local rc_b=$? ok=0
  # The sides run different numbers of cycles: no line comparison.
  judge_pair trust-churn '' "$rc_a" "$rc_b" | grep -E '^(without|with) symmpin|^teardown' || true
  judge_pair trust-churn '' "$rc_a" "$rc_b" >/dev/null || ok=1
  echo "without symmpin:"; grep -E "^CHURN|symmpin-trust:|launch:" "$la"
  echo "with symmpin:"; grep -E "^CHURN|symmpin-trust:|launch:" "$lb"
  grep -h "cycles in" "$lb" | tail -n 2
  stats_check redirected --want some "$OUT"/logs/trust-churn.stats.*.json >/dev/null || { echo "= no call redirected"; ok=1; }
  # Device memory (cudaMemGetInfo, the whole GPU, after a barrier: ranks sharing a GPU see each
  # other's). NCCL alone moves it by a few hundred MiB from run to run; symmpin's allocations are
  # the same on every rank, so a leak of its raises EVERY rank's figure: the smallest growth with
  # symmpin must stay within 8 MiB of the largest without.
  "$PY" - "$la" "$lb" "$n" "$cycles" <<'PY' || ok=1
import re, sys
def rows(path):
    """rank -> (cycles done, device bytes grown)"""
    text = open(path, errors="replace").read()
    pat = r"^CHURN rank=(\d+) cycles=(\d+) wanted=\d+ .*?device_bytes_grown=(-?\d+)"
    return {int(m[1]): (int(m[2]), int(m[3])) for m in re.finditer(pat, text, re.M)}
a, b, n, want = rows(sys.argv[1]), rows(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ok = len(a) == n and len(b) == n
for r in sorted(set(a) | set(b)):
    na, nb = a.get(r, ("-", "-")), b.get(r, ("-", "-"))
    print(f"= rank {r}: without symmpin {na[0]} cycles, device memory grown {na[1]} B; "
          f"with symmpin {nb[0]} of {want} cycles, grown {nb[1]} B")
if ok:
    least, nccl_most = min(v[1] for v in b.values()), max(v[1] for v in a.values())
    limit = max(nccl_most, 0) + (8 << 20)
    print(f"= device memory: smallest growth with symmpin {least} B, limit {limit} B")
    ok = least <= limit and all(v[0] == want for v in b.values())
    if not all(v[0] == want for v in b.values()):
        print(f"= with symmpin fewer than {want} cycles ran (CHURN_SECONDS is the limit)")
sys.exit(0 if ok else 1)
PY
  return $ok
}
s_trust_busy() { # ending a communicator while another stream is busy for a second: symmpin's part
  # never waits for the device (its pool goes when its own kernels are done)
  SIDE_TRACE=0 compare_runs trust-busy '^RESULT rank=[0-9]+ passed|symmpin-trust:' "$RANKS" 0 "$TRUST" --scenario busy --ranks "$RANKS" || return 1
  echo "= without symmpin: $(grep -E "^BUSY" "$OUT/logs/trust-busy.nccl.out" | tr '\n' ' ')"
  echo "= with symmpin:    $(grep -E "^BUSY" "$OUT/logs/trust-busy.symmpin.out" | tr '\n' ' ')"
  stats_check redirected "$OUT"/logs/trust-busy.stats.*.json || return 1
  # symmpin may add at most 200 ms to what NCCL alone takes (a device sync would add a second).
  "$PY" - "$OUT/logs/trust-busy.nccl.out" "$OUT/logs/trust-busy.symmpin.out" <<'PY'
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
s_life() { # ncclCommRevoke, and ncclCommShrink(NCCL_SHRINK_ABORT), while rank 0's all-reduce
  # waits on the GPU for a peer that never makes it (symmpin-life): the call and rank 0's stream
  # end within the app's bound (1 s, 2 s where the ranks time-share one GPU), with and without
  # symmpin, whose kernel is the one waiting (SYMMPIN_CHOOSE=static on both sides; checked in the
  # trace). Always 2 ranks. NCCL 2.28.7+ for the revoke: LIFE_NCCL_DIR (PyTorch's copy) first in
  # LD_LIBRARY_PATH.
  local dir=$LIFE_NCCL_DIR sc side rc=0
  if [ ! -e "$dir/libnccl.so.2" ]; then
    echo "= no libnccl.so.2 in $dir (LIFE_NCCL_DIR): the step needs an NCCL with ncclCommRevoke"
    return 1
  fi
  for sc in revoke shrink; do
    echo "== $sc"
    SIDE_TRACE=1 RUN_TIMEOUT=${RUN_TIMEOUT:-120} SYMMPIN_CHOOSE=static \
      LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      compare_runs "life-$sc" '^symmpin-life: ' 2 0 "$LIFE" --scenario "$sc" || rc=1
    for side in nccl symmpin; do
      grep -h '^LIFE' "$OUT/logs/life-$sc.$side.out" | sed "s/^/= $side: /"
    done
    stats_check inflight "$OUT"/logs/life-"$sc".trace.* || rc=1
  done
  # The step's line: the four runs' totals (each launcher's last line), not one rank's.
  local log
  for log in "$OUT"/logs/life-*.out; do grep -E '^symmpin-life: [0-9]+ passed' "$log" | tail -n 1; done |
    awk '{p += $2; f += $4} END {printf "symmpin-life, %d runs: %d passed, %d failed\n", NR, p, f}'
  return $rc
}
s_two_hosts() { # every rank its own "machine" (a /dev/shm of its own, its own NCCL host id):
  # symmpin stays on NCCL at once, exact results, no time lost, one INFO line per rank, nothing left
  local n=$RANKS rounds=${TWO_HOSTS_ROUNDS:-2} i rc=0 shm0 shm1
  local shm=${SUITE_SHM_BASE:-/dev/shm} # the machine's /dev/shm (the hosts' folders live there too)
  shm0=$(find "$shm" -maxdepth 1 -name 'symmpin-*' | wc -l)
  for i in $(seq 1 "$rounds"); do # alternating, so both sides see the same machine state
    SIDE_TRACE=0 compare_runs "two-hosts-$i" '^RESULT|symmpin-app:' "$n" "$n" "$APP" --mode procs --ranks "$n" || rc=1
    stats_check redirected --want zero --count "$n" "$OUT/logs/two-hosts-$i".stats.*.json || rc=1
    local lines pids
    lines=$(grep -c "it is on another host" "$OUT/logs/two-hosts-$i.symmpin.out")
    pids=$(grep "it is on another host" "$OUT/logs/two-hosts-$i.symmpin.out" | awk -F: '{print $2}' | sort -u | wc -l)
    echo "= round $i: 'on another host' INFO lines: $lines, from $pids processes (want $n, one each)"
    [ "$lines" -eq "$n" ] && [ "$pids" -eq "$n" ] || rc=1
    if grep -h "^run: left in" "$OUT/logs/two-hosts-$i.symmpin.out" | grep -q symmpin; then
      echo "= round $i: symmpin left files in a host's /dev/shm:"; grep -h "^run: left in" "$OUT/logs/two-hosts-$i.symmpin.out"; rc=1
    fi
  done
  shm1=$(find "$shm" -maxdepth 1 -name 'symmpin-*' | wc -l)
  echo "= symmpin entries in the machine's /dev/shm: $shm0 before, $shm1 after"
  [ "$shm1" -le "$shm0" ] || rc=1
  # Time: the first all-reduce and all the checks, slowest rank, best round of each side; the
  # first all-reduce within FIRST_CALL_LIMIT_MS of NCCL's (symmpin's set-up happens at
  # communicator creation).
  "$PY" "$SUITE_ROOT/scripts/suite_first_call.py" --first-limit-ms "$FIRST_CALL_LIMIT_MS" --checks-limit \
    "$OUT"/logs/two-hosts-*.nccl.out -- "$OUT"/logs/two-hosts-*.symmpin.out || rc=1
  return $rc
}
s_mixed_hosts() { # 4 ranks on 2 "hosts" of 2: the world communicator stays on NCCL; the per-host
  # communicators split off it (ncclCommSplit) are redirected; results exact
  local n=4 rc=0
  SIDE_TRACE=0 compare_runs mixed-hosts '^RESULT|^SPLIT|symmpin-app:' "$n" 2 "$APP" --mode procs --ranks "$n" --split-hosts 2 || rc=1
  echo "= the world communicator (4 ranks):"
  stats_check redirected --nranks 4 --want zero --count 4 "$OUT"/logs/mixed-hosts.stats.*.json || rc=1
  echo "= the per-host communicators (2 ranks each):"
  stats_check redirected --nranks 2 --count 4 "$OUT"/logs/mixed-hosts.stats.*.json || rc=1
  # Why the world communicator stays on NCCL, in the log: on each host, a rank that finds a peer
  # missing from the host's board says "on another host" and fails the agreement for the host;
  # every rank then says its agreements stop (one line each), naming the cause: ranks on several
  # hosts, and a rank missing from its host's board, which must be one of the other host (hosts
  # are blocks of 2: rank r on host r / 2). Which rank of a host finds it first is a race, so: 4
  # "no more plan agreements" lines from 4 processes, each naming a rank of the other host, and 2
  # or more "on another host" lines from different processes (at least one per host).
  local log="$OUT/logs/mixed-hosts.symmpin.out" stops stop_pids named elsewhere elsewhere_pids
  local stop_re="comm 0 rank [0-9]+/4: no more plan agreements on this communicator: ranks on several hosts: rank [0-9]+ is missing from this host's board"
  local elsewhere_re="comm 0 rank [0-9]+: rank [0-9]+ has not opened this host's board.*it is on another host"
  stops=$(grep -cE "$stop_re" "$log")
  stop_pids=$(grep -E "$stop_re" "$log" | awk -F: '{print $2}' | sort -u | wc -l)
  named=$(grep -oE "$stop_re" "$log" | sed -E 's#^comm 0 rank ([0-9]+)/4: .* rank ([0-9]+) is missing.*#\1 \2#' |
    awk 'int($1 / 2) != int($2 / 2) {n++} END {print n + 0}')
  elsewhere=$(grep -cE "$elsewhere_re" "$log")
  elsewhere_pids=$(grep -E "$elsewhere_re" "$log" | awk -F: '{print $2}' | sort -u | wc -l)
  echo "= world communicator: 'no more plan agreements ... ranks on several hosts: rank R is missing" \
    "from this host's board' INFO lines: $stops, from $stop_pids processes, $named naming a rank of" \
    "the other host (want 4, one each); 'on another host': $elsewhere, from $elsewhere_pids processes (want 2 or more)"
  [ "$stops" -eq 4 ] && [ "$stop_pids" -eq 4 ] && [ "$named" -eq 4 ] && [ "$elsewhere" -ge 2 ] &&
    [ "$elsewhere_pids" -eq "$elsewhere" ] || rc=1
  if grep -h "^run: left in" "$OUT/logs/mixed-hosts.symmpin.out" | grep -q symmpin; then echo "= symmpin left files behind"; rc=1; fi
  return $rc
}
