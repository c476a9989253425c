# shellcheck shell=bash
# The GPU suite's steps: PyTorch under torchrun, symmpin-dp, and the timings that need two GPUs.
# Sourced by scripts/gpu-suite.sh, whose settings, runs (run_side, compare_runs, judge_pair) and
# step runner they use; each s_NAME is the step NAME.

s_ddp() {
  torch_argv "$RANKS"
  compare_runs ddp '^DDP|^step' "$RANKS" 0 "${TORCH_ARGV[@]}" tests/apps/ddp_train.py || return 1
  stats_check redirected --count "$RANKS" "$OUT"/logs/ddp.stats.*.json
}
s_tp() {
  torch_argv "$RANKS"
  TP_TIME=0 compare_runs tp '^TP |tp_loop:' "$RANKS" 0 "${TORCH_ARGV[@]}" tests/apps/tp_loop.py || return 1
  stats_check redirected --count "$RANKS" "$OUT"/logs/tp.stats.*.json
}
s_dp_groups() { # issue 11's data-parallel step: grouped gradient all-reduces overlapping compute
  compare_runs dp-groups '^DP-DIGEST|symmpin-dp:' "$RANKS" 0 "$B/tests/apps/symmpin-dp" --ranks "$RANKS" || return 1
  stats_check redirected --count "$RANKS" "$OUT"/logs/dp-groups.stats.*.json || return 1
  ! shared_gpu || step_note "times: ranks share a GPU"
  echo "= time per step, compute alone, the group alone (us), without then with symmpin:"
  grep -h '^DP-TIME' "$OUT/logs/dp-groups.nccl.out" "$OUT/logs/dp-groups.symmpin.out" | sed 's/^/= /'
  # What the measured choice did with the groups (either verdict may be right here: NCCL over
  # sockets is slow), and that every rank routed every call alike.
  groups_verdict any dp-groups
}
groups_verdict() { # groups_verdict EXPECT NAME: scripts/check_groups.py over the run's traces
  local rc
  "$PY" "$SUITE_ROOT/scripts/check_groups.py" --expect "$1" \
    --times "$OUT/logs/$2.nccl.out" "$OUT/logs/$2.symmpin.out" "$OUT/logs/$2".trace.* >"$OUT/logs/$2.groups" 2>&1
  rc=$?
  grep -v ' site 0x' "$OUT/logs/$2.groups" | sed 's/^= //; s/^/= /'
  return $rc
}
s_groups_back() { # issue 22's groups mechanism on one GPU: one-rank communicators, where NCCL's
  # all-reduce is a copy at most and wins, so after their probe groups every grouped call goes
  # back to NCCL for good; the digests as NCCL's. SYMMPIN_TEST_ONE_RANK: symmpin otherwise leaves
  # one-rank communicators alone. One process, whatever the GPUs.
  SYMMPIN_TEST_ONE_RANK=1 compare_runs groups-back '^DP-DIGEST|symmpin-dp:' 1 0 "$B/tests/apps/symmpin-dp" --ranks 1 || return 1
  groups_verdict back groups-back
}
# Issue 11's tensor-parallel decode step (tests/apps/tp_decode.py), without and with symmpin:
# bitwise identical outputs, and the table of scripts/tp_decode_compare.py (time per step and per
# all-reduce, communication share, share of the expected saving realised).
tp_decode_pair() { # tp_decode_pair NAME: the two runs with the TPD_* settings in the environment
  local name=$1
  if shared_gpu; then # correctness only: the times are the GPU's time slices
    export TPD_HIDDEN=${TPD_HIDDEN:-4096} TPD_TOKENS=${TPD_TOKENS:-1,64} TPD_STEPS=${TPD_STEPS:-10}
    step_note "times: ranks share a GPU"
  fi
  torch_argv "$RANKS"
  SIDE_TRACE=0 compare_runs "$name" '^TPD-DIGEST' "$RANKS" 0 "${TORCH_ARGV[@]}" tests/apps/tp_decode.py || return 1
  "$PY" scripts/tp_decode_compare.py "$OUT/logs/$name.nccl.out" "$OUT/logs/$name.symmpin.out" >"$OUT/logs/$name.table"
  local rc=$?
  sed 's/^/= /' "$OUT/logs/$name.table"
  return $rc
}
s_tp_decode() { TPD_MODES=eager,graph tp_decode_pair tp-decode; }
# Issue 28's sequence-parallel workload (tests/apps/sp_decode.py): all_gather_into_tensor and
# reduce_scatter_tensor of bf16 and fp32, and an SP MLP block decoded for a few tokens, eager and
# in CUDA graphs. At RANKS ranks digests identical with and without symmpin (2 ranks: a sum of two
# rounds once whatever the order); at 3 and 4 (SPD_RANK_COUNTS), where NCCL's order of a float
# sum is not symmpin's, digests identical from one symmpin run to the next. At every count
# all-gathers and reduce-scatters redirected on every rank.
s_sp_decode() {
  local n coll rc=0
  torch_argv "$RANKS"
  SIDE_TRACE=0 compare_runs sp-decode '^SPD-DIGEST' "$RANKS" 0 "${TORCH_ARGV[@]}" tests/apps/sp_decode.py || rc=1
  for coll in allgather reducescatter; do
    stats_check redirected --coll "$coll" --count "$RANKS" "$OUT"/logs/sp-decode.stats.*.json || rc=1
  done
  for n in ${SPD_RANK_COUNTS:-3 4}; do
    echo "== $n ranks, twice with symmpin"
    torch_argv "$n"
    SPD_ITERS=${SPD_ITERS:-10} SIDE_TRACE=0 repeat_runs "sp-decode-$n" '^SPD-DIGEST' "$n" 0 "${TORCH_ARGV[@]}" tests/apps/sp_decode.py || rc=1
    for coll in allgather reducescatter; do
      stats_check redirected --coll "$coll" --count "$n" "$OUT/logs/sp-decode-$n-again".stats.*.json || rc=1
    done
  done
  return $rc
}
# torch.compile(mode="reduce-overhead"): one configuration (compiling is slow). With ranks sharing
# a GPU, NCCL alone hangs in teardown after its results (its CUDA graphs alive: the NCCL behaviour
# of ../shared/device-notes.md); torchrun's end when the run is stopped then (exit 1 after its
# SignalException) is that hang (suite_lib.sh: torchrun_stopped), which judge_pair notes. A hang
# of the run with symmpin, or a digest that differs, still fails the step.
s_tp_decode_compile() {
  TPD_MODES=compile TPD_HIDDEN=4096 TPD_TOKENS=8 tp_decode_pair tp-decode-compile
}
s_overlap() { # a GEMM slowed by concurrent all-reduces: with symmpin's kernels vs NCCL's (issue 11)
  # SYMMPIN_CHOOSE=static: the question is what symmpin's kernels cost the GEMM, so they must run
  # (the measured choice could give a size back to NCCL).
  if shared_gpu; then # the digests only: the times are the GPU's time slices
    export OVL_SIZES=${OVL_SIZES:-65536} OVL_ROUNDS=${OVL_ROUNDS:-2} OVL_WARM=${OVL_WARM:-200} OVL_GEMMS=${OVL_GEMMS:-10}
    step_note "times: ranks share a GPU"
  fi
  torch_argv "$RANKS"
  SYMMPIN_CHOOSE=static SIDE_TRACE=0 compare_runs overlap '^OVL-DIGEST' "$RANKS" 0 "${TORCH_ARGV[@]}" tests/apps/overlap.py || return 1
  "$PY" scripts/overlap_compare.py "$OUT/logs/overlap.nccl.out" "$OUT/logs/overlap.symmpin.out"
}
s_dedicated() { # the one-slot-per-site planner: same results as NCCL (and so as the shared planner)
  torch_argv "$RANKS"
  SYMMPIN_PLANNER=dedicated compare_runs ddp-dedicated '^DDP|^step' "$RANKS" 0 "${TORCH_ARGV[@]}" tests/apps/ddp_train.py || return 1
  TP_TIME=0 SYMMPIN_PLANNER=dedicated compare_runs tp-dedicated '^TP |tp_loop:' "$RANKS" 0 "${TORCH_ARGV[@]}" tests/apps/tp_loop.py || return 1
  SYMMPIN_PLANNER=dedicated compare_runs app-dedicated '^RESULT|symmpin-app:' "$RANKS" 0 "$APP" --mode procs --ranks "$RANKS"
}
s_bench() {
  needs_two_gpus "speed ratios (ranks sharing a GPU take turns on it)" || return 77
  step_config "$(placement_words "$NGPU"), symmpin-bench"
  "$B/tests/gpu/symmpin-bench" --csv "$OUT/bench.csv" || return 1
}
s_speed() { # the program's own timings with and without the preload, alternating
  needs_two_gpus "speed ratios (ranks sharing a GPU take turns on it)" || return 77
  step_config "$(placement_words "$NGPU")"
  local i
  for i in 1 2; do
    echo "== run $i: NCCL"; "$APP" --mode procs --bench
    echo "== run $i: symmpin"; LD_PRELOAD=$LIB "$APP" --mode procs --bench
  done
  torch_argv "$NGPU"
  for i in 1 2; do
    echo "== tp run $i: NCCL"; "${TORCH_ARGV[@]}" tests/apps/tp_loop.py 2>&1 | grep tp-bench
    echo "== tp run $i: symmpin"; LD_PRELOAD=$LIB "${TORCH_ARGV[@]}" tests/apps/tp_loop.py 2>&1 | grep tp-bench
  done
}
