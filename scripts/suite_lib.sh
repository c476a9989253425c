# shellcheck shell=bash
# The GPU suite's pieces that need no GPU, sourced by scripts/gpu-suite.sh and tested on the CPU
# by tests/tools/check_suite_lib.sh: where ranks go (ranks sharing a GPU, "hosts"), bounded runs,
# the outcome of a run (finished, hung after or before its results) and the teardown policy that
# compares a run with symmpin against NCCL alone in the same configuration, the NCCL transport a
# run used, and what a step's summary line says about them.
# Expects: SUITE_ROOT (the repository), NGPU, OUT; bash 4.

# ---- where ranks go ----

# ranks_per_gpu N: how many ranks the busiest GPU holds (ranks go to GPU r % NGPU).
ranks_per_gpu() { local g=$((NGPU > 0 ? NGPU : 1)); echo $((($1 + g - 1) / g)); }

# place_ranks N [SHM_HOSTS]: the environment of a job of N ranks in this shell (a subshell: it
# exports). Ranks sharing a GPU get an NCCL host id each (NCCL then believes they are on other
# hosts and talks over its socket transport on loopback, instead of refusing a duplicate GPU);
# SHM_HOSTS > 0 puts ranks in that many "hosts" as symmpin sees them, each with a /dev/shm of its
# own under a fresh folder ($RANK_ENV_SHM_ROOT, on the real /dev/shm: a tmpfs), as K machines
# would be; NCCL then sees those hosts too (or one per rank where ranks share a GPU). Ranks start
# through scripts/rank-env.sh (APP_RANK_WRAPPER for the C apps, torch_cmd for torchrun), followed by
# $EXTRA_RANK_WRAPPER (e.g. compute-sanitizer) if set.
place_ranks() {
  local n=$1 shm_hosts=${2:-0} nccl_hosts=0
  if [ "$(ranks_per_gpu "$n")" -gt 1 ]; then nccl_hosts=$n; elif [ "$shm_hosts" -gt 0 ]; then nccl_hosts=$shm_hosts; fi
  export RANK_ENV_NCCL_HOSTS=$nccl_hosts RANK_ENV_SHM_HOSTS=$shm_hosts
  export RANK_ENV_JOB="suite-$$-${RANDOM}"
  export APP_RANK_WRAPPER="bash $SUITE_ROOT/scripts/rank-env.sh${EXTRA_RANK_WRAPPER:+ $EXTRA_RANK_WRAPPER}"
  if [ "$nccl_hosts" -gt 0 ]; then
    export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
  else
    unset NCCL_SOCKET_IFNAME NCCL_IB_DISABLE
  fi
  if [ "$shm_hosts" -gt 0 ]; then
    RANK_ENV_SHM_ROOT=$(mktemp -d "${SUITE_SHM_BASE:-/dev/shm}/suite-hosts.XXXXXX") || return 1
    export RANK_ENV_SHM_ROOT
  else
    unset RANK_ENV_SHM_ROOT
  fi
}

# placement_words N [SHM_HOSTS]: "2 ranks, 2 per GPU" (+ ", 2 hosts"), for summary lines.
placement_words() {
  local words
  words="$1 rank$([ "$1" = 1 ] || echo s), $(ranks_per_gpu "$1") per GPU"
  [ "${2:-0}" -gt 0 ] && words="$words, $2 hosts"
  echo "$words"
}

# ---- bounded runs ----

# bounded_run LOG LIMIT_S NRANKS CMD...: runs CMD with stdout and stderr in LOG, for at most
# LIMIT_S seconds; once NRANKS lines "RESULTS-DONE" are in LOG (every rank printed its results:
# what follows is teardown), at most TEARDOWN_S (default 60) seconds more. A run stopped by either
# bound gets one line in LOG saying which ("hung after its results" / "hung before its results");
# the last line says the exit status. Returns CMD's status (124, 137 or 143 when stopped).
# `timeout` runs CMD in a process group of its own, so a stop reaches every process of the run;
# a TERM to this shell (the suite's step limit) is passed on to it.
bounded_run() {
  local log=$1 limit=$2 nranks=$3
  shift 3
  local grace=${TEARDOWN_S:-60} t0=$SECONDS done_at='' why='' rc
  timeout -k 5 -s TERM "$limit" "$@" >"$log" 2>&1 &
  local tpid=$!
  # shellcheck disable=SC2064 # the pid is meant to be expanded now
  trap "kill -TERM $tpid 2>/dev/null; exit 143" TERM INT
  while kill -0 "$tpid" 2>/dev/null; do
    sleep 0.2
    if [ -z "$done_at" ] && [ "$(grep -c '^RESULTS-DONE' "$log")" -ge "$nranks" ]; then done_at=$SECONDS; fi
    if [ -n "$done_at" ] && [ $((SECONDS - done_at)) -ge "$grace" ]; then
      why=after
      kill -TERM "$tpid" 2>/dev/null
      break
    fi
  done
  wait "$tpid"
  rc=$?
  trap - TERM INT
  if [ -z "$why" ] && [ "$rc" -eq 124 ]; then
    if [ "$(grep -c '^RESULTS-DONE' "$log")" -ge "$nranks" ]; then why=after; else why=before; fi
  fi
  case $why in
  after) echo "run: hung after its results: stopped $((SECONDS - ${done_at:-$t0})) s after them (limit ${grace} s)" >>"$log" ;;
  before) echo "run: hung before its results: stopped after $limit s" >>"$log" ;;
  esac
  echo "run: exit status $rc after $((SECONDS - t0)) s" >>"$log"
  return "$rc"
}

# ---- outcomes and the teardown policy ----

# outcome_of LOG RC: finished | hung-after-results | hung-before-results | failed.
# Hung after its results: stopped after every rank printed them (by bounded_run, or by a C app's
# own launcher, which then exits 3), with no rank failing otherwise. RC is then how the launcher
# ends on that stop: 3 (a C app's launcher), 124, 137 or 143 (timeout, KILL, TERM), or torchrun's
# own end when bounded_run stopped it (torchrun_stopped).
outcome_of() {
  local log=$1 rc=$2
  if grep -q 'hung before its results' "$log"; then
    echo hung-before-results
  elif [ "$rc" -eq 0 ]; then
    echo finished
  elif grep -q 'hung after its results' "$log" &&
       ! grep -qE 'exited abnormally|stopped: still running|could not be started|ChildFailedError' "$log" &&
       { case $rc in 3 | 124 | 137 | 143) true ;; *) false ;; esac || torchrun_stopped "$log" "$rc"; }; then
    echo hung-after-results
  else
    echo failed
  fi
}

# torchrun_stopped LOG RC: whether RC 1 is torchrun's answer to bounded_run's stop after every
# rank's results. torchrun turns a TERM into a SignalException: it stops its workers, prints the
# traceback ("...SignalException: Process P got signal: 15") and exits 1, not by the signal. So
# NCCL's own teardown hang under torchrun (tp_decode_compile: ranks sharing a GPU, a captured graph
# alive) reads as that hang, not as a failed run. A rank that failed shows as ChildFailedError
# (outcome_of), and a run that bounded_run did not stop is not this.
torchrun_stopped() {
  [ "$2" -eq 1 ] && grep -q '^run: hung after its results' "$1" &&
    grep -qE 'SignalException: Process [0-9]+ got signal: (15|SIGTERM|Signals\.SIGTERM)' "$1"
}

# teardown_verdict NCCL_OUTCOME SYMMPIN_OUTCOME: prints a note where there is one; 0 = pass.
# A hang that only the symmpin run shows is a failure; NCCL's own teardown hang (seen with ranks on
# one GPU over sockets, and under torchrun with a captured graph alive: ../shared/device-notes.md)
# is not symmpin's, and a clean symmpin run where NCCL alone hung is fine. The step's result lines
# are compared all the same (judge_pair): a difference of symmpin's run fails it.
teardown_verdict() {
  case "$1/$2" in
  finished/finished) return 0 ;;
  hung-after-results/finished) echo "NCCL alone hung in teardown after its results, with symmpin the run ended" ;;
  hung-after-results/hung-after-results) echo "both hung in teardown after their results (NCCL's own hang)" ;;
  finished/hung-after-results) echo "with symmpin the run hung in teardown where NCCL alone ended"; return 1 ;;
  */hung-before-results) echo "with symmpin the run hung before its results"; return 1 ;;
  hung-before-results/*) echo "NCCL alone hung before its results (the configuration itself is broken)"; return 1 ;;
  failed/*) echo "NCCL alone failed"; return 1 ;;
  */failed) echo "with symmpin the run failed"; return 1 ;;
  *) echo "unknown outcomes '$1' and '$2'"; return 1 ;;
  esac
  return 0
}

# reports_failure LOG: whether a log says a check failed ("failed=N" or "P passed, N failed" with
# N > 0, a wrong result, a FATAL check), whatever the exit status.
reports_failure() { grep -qE 'failed=[1-9]|passed, [1-9][0-9]* failed|WRONG|FATAL' "$1"; }

# ---- the NCCL transport ----

# nccl_transport FILE...: the transports NCCL's INFO lines (NCCL_DEBUG=INFO, subsystems INIT,NET)
# say its channels use: "socket", "P2P", "SHM", "IB", joined with "+"; "none" if no channel was
# connected (one rank), "?" if the files say nothing.
nccl_transport() {
  local t
  t=$(cat "$@" 2>/dev/null | grep -oE 'via (NET/Socket|NET/IB|NET/[A-Za-z0-9_]+|P2P|SHM|COLLNET)' |
      sed 's#via ##; s#NET/Socket#socket#; s#NET/IB#IB#; s#NET/##' | sort -u | paste -sd+ -)
  if [ -n "$t" ]; then echo "$t"
  elif cat "$@" 2>/dev/null | grep -q 'NCCL INFO'; then echo none
  else echo '?'
  fi
}

# ---- what a step's line says ----

# step_config WORDS: records one run's configuration ("2 ranks, 2 per GPU, NCCL socket") for the
# step's line; step_note TEXT: a note for it. Both go to files beside the step's log.
step_config() { echo "$*" >>"$OUT/logs/${STEP:-none}.cfg"; }
step_note() { [ -n "$*" ] && echo "$*" >>"$OUT/logs/${STEP:-none}.notes"; return 0; }

# step_words NAME: "[cfg; cfg] note; note" from what the step recorded (each distinct once).
step_words() {
  local cfg notes words=''
  cfg=$(awk '!seen[$0]++' "$OUT/logs/$1.cfg" 2>/dev/null | paste -sd';' - | sed 's/;/; /g')
  notes=$(awk '!seen[$0]++' "$OUT/logs/$1.notes" 2>/dev/null | paste -sd';' - | sed 's/;/; /g')
  [ -n "$cfg" ] && words="[$cfg]"
  [ -n "$notes" ] && words="${words:+$words }$notes"
  echo "$words"
}
