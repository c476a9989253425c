#!/usr/bin/env bash
# A CUDA 12 program under symmpin (issue 24), on a GPU machine with a driver >= 580: the CUDA 12
# build of our NCCL program (build-cu12/symmpin-app-cu12, made by scripts/cuda12-build.sh on a
# machine with pip and the toolkit, carried here with the library's build) run without and with
# the preload: both pass, their RESULT lines (checksums of every output) are identical, symmpin
# redirected calls, and the process maps libcudart.so.12 only: symmpin adds no libcudart.so.13
# (its own runtime is inside libsymmpin.so).
# Usage (repository root): scripts/cuda12-check.sh [BUILD_DIR]   (default: build)
# Last line: "cuda12-check: PASS" or "cuda12-check: FAIL (<what>)"; logs under $OUT.
set -u
cd "$(dirname "$0")/.." || exit 2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=${1:-build}
LIB=$PWD/$B/libsymmpin.so.0
APP=$PWD/build-cu12/symmpin-app-cu12
OUT=${OUT:-/tmp/symmpin-cu12}
mkdir -p "$OUT"
fail() { echo "cuda12-check: FAIL ($*)"; exit 1; }
[ -x "$APP" ] || fail "no $APP: run scripts/cuda12-build.sh where pip and the toolkit are"
[ -f "$LIB" ] || fail "no $LIB"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "$NGPU" -ge 1 ] || fail "no GPU"
echo "== the library needs no CUDA runtime; the program needs libcudart.so.12"
readelf -d "$LIB" | grep NEEDED
readelf -d "$LIB" | grep -q 'NEEDED.*libcudart' && fail "libsymmpin.so NEEDS a libcudart"
readelf -d "$APP" | grep -q 'NEEDED.*\[libcudart.so.12\]' || fail "the app does not need libcudart.so.12"
nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1

# Two ranks, placed as the GPU suite places them (scripts/suite_lib.sh: place_ranks). With one
# GPU they share it: processes only (NCCL refuses two ranks of one process on one GPU), each with
# its own NCCL host id, so NCCL talks over sockets on loopback. (One rank is no test here: NCCL
# 2.24.3+ refuses a one-rank fp8 average, with or without symmpin.)
SUITE_ROOT=$PWD
# shellcheck source=scripts/suite_lib.sh
. scripts/suite_lib.sh
RANKS=2 MODES=(threads procs single)
[ "$NGPU" -ge 2 ] || MODES=(procs)
place_ranks "$RANKS"
echo "== $RANKS ranks on $NGPU GPU(s): modes ${MODES[*]}"

for mode in "${MODES[@]}"; do
  args=(--mode "$mode" --ranks "$RANKS" --iters 4)
  echo "== $mode: without symmpin"
  "$APP" "${args[@]}" >"$OUT/$mode.nccl.out" 2>&1 || { tail "$OUT/$mode.nccl.out"; fail "$mode without symmpin"; }
  echo "== $mode: with symmpin"
  env SYMMPIN_DEBUG=INFO SYMMPIN_STATS=1 SYMMPIN_STATS_FILE="$OUT/$mode.stats.%p.json" \
    LD_PRELOAD="$LIB" "$APP" "${args[@]}" >"$OUT/$mode.symmpin.out" 2>&1 ||
    { tail -n 40 "$OUT/$mode.symmpin.out"; fail "$mode with symmpin"; }
  a=$(grep -E '^RESULT|symmpin-app:' "$OUT/$mode.nccl.out" | sort)
  b=$(grep -E '^RESULT|symmpin-app:' "$OUT/$mode.symmpin.out" | sort)
  echo "$b"
  [ -n "$a" ] && [ "$a" = "$b" ] || { echo "without:"; echo "$a"; fail "$mode: results differ"; }
  grep -q 'symmpin-app: [0-9]* passed, 0 failed' <<<"$b" || fail "$mode: failures"
  grep -E "symmpin INFO CUDA driver" "$OUT/$mode.symmpin.out" | head -n1
  grep -q "the program's CUDA runtime: libcudart.so.12 12\.[0-9]" "$OUT/$mode.symmpin.out" ||
    fail "$mode: the banner does not name the program's libcudart.so.12"
  grep -E "symmpin WARN" "$OUT/$mode.symmpin.out" | head -n 5
  red=$(cat "$OUT"/$mode.stats.*.json 2>/dev/null | grep -o '"redirected": [0-9]*' | awk '{s+=$2} END {print s+0}')
  echo "= $mode: $red calls redirected"
  [ "$red" -gt 0 ] || fail "$mode: nothing redirected"
done

# Every process of the run (the launcher and, in procs mode, its ranks) maps libcudart.so.12 and
# no other runtime: symmpin brings none of its own.
map_mode=${MODES[0]}
echo "== /proc/PID/maps of the preloaded CUDA 12 program ($map_mode mode, sampled while it runs)"
env LD_PRELOAD="$LIB" "$APP" --mode "$map_mode" --ranks "$RANKS" --iters 30 >"$OUT/maps.out" 2>&1 &
pid=$!
: >"$OUT/maps.cudart"
while kill -0 "$pid" 2>/dev/null; do
  for p in "$pid" $(pgrep -P "$pid" 2>/dev/null); do
    grep -E 'libcudart|libsymmpin|libnccl' "/proc/$p/maps" 2>/dev/null | awk -v p="$p" '{print p, $NF}' >>"$OUT/maps.cudart"
  done
  sleep 0.2
done
wait "$pid" || { tail "$OUT/maps.out"; fail "the sampled run failed"; }
sort -u "$OUT/maps.cudart" | tee "$OUT/maps.seen"
grep -q 'libsymmpin' "$OUT/maps.seen" || fail "libsymmpin.so never seen mapped: the samples missed the run"
for p in $(awk '/libsymmpin/ {print $1}' "$OUT/maps.seen" | sort -u); do
  runtimes=$(awk -v p="$p" '$1 == p && /libcudart/ {print $2}' "$OUT/maps.seen" | sort -u)
  echo "= process $p: $(echo $runtimes)"
  [ "$(echo "$runtimes" | grep -c libcudart)" = 1 ] || fail "process $p: not exactly one libcudart mapped"
  grep -q 'libcudart\.so\.12' <<<"$runtimes" || fail "process $p: the libcudart mapped is not libcudart.so.12"
done
echo "cuda12-check: PASS"
