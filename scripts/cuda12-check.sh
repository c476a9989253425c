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
cd "$(dirname "$0")/.."
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

# With one GPU: one rank, and SYMMPIN_TEST_ONE_RANK so that symmpin redirects it anyway.
RANKS=2; ONE=()
if [ "$NGPU" -lt 2 ]; then RANKS=1; ONE=(SYMMPIN_TEST_ONE_RANK=1); fi

for mode in threads procs single; do
  args=(--mode "$mode" --ranks "$RANKS" --iters 4)
  [ "$mode" = single ] && [ "$RANKS" = 1 ] && continue
  echo "== $mode: without symmpin"
  "$APP" "${args[@]}" >"$OUT/$mode.nccl.out" 2>&1 || { tail "$OUT/$mode.nccl.out"; fail "$mode without symmpin"; }
  echo "== $mode: with symmpin"
  env "${ONE[@]}" SYMMPIN_DEBUG=INFO SYMMPIN_STATS=1 SYMMPIN_STATS_FILE="$OUT/$mode.stats.%p.json" \
    LD_PRELOAD="$LIB" "$APP" "${args[@]}" >"$OUT/$mode.symmpin.out" 2>&1 ||
    { tail -n 40 "$OUT/$mode.symmpin.out"; fail "$mode with symmpin"; }
  a=$(grep -E '^RESULT|symmpin-app:' "$OUT/$mode.nccl.out" | sort)
  b=$(grep -E '^RESULT|symmpin-app:' "$OUT/$mode.symmpin.out" | sort)
  echo "$b"
  [ -n "$a" ] && [ "$a" = "$b" ] || { echo "without:"; echo "$a"; fail "$mode: results differ"; }
  grep -q 'symmpin-app: [0-9]* passed, 0 failed' <<<"$b" || fail "$mode: failures"
  grep -E "symmpin INFO CUDA runtime" "$OUT/$mode.symmpin.out" | head -n1
  grep -q "the program's: libcudart.so.12 12\.[0-9]" "$OUT/$mode.symmpin.out" ||
    fail "$mode: the banner does not name the program's libcudart.so.12"
  grep -E "symmpin WARN" "$OUT/$mode.symmpin.out" | head -n 5
  red=$(cat "$OUT"/$mode.stats.*.json 2>/dev/null | grep -o '"redirected": [0-9]*' | awk '{s+=$2} END {print s+0}')
  echo "= $mode: $red calls redirected"
  [ "$red" -gt 0 ] || fail "$mode: nothing redirected"
done

echo "== /proc/PID/maps of the preloaded CUDA 12 program (threads mode, sampled while it runs)"
env "${ONE[@]}" LD_PRELOAD="$LIB" "$APP" --mode threads --ranks "$RANKS" --iters 30 >"$OUT/maps.out" 2>&1 &
pid=$!
: >"$OUT/maps.cudart"
while kill -0 "$pid" 2>/dev/null; do
  grep -E 'libcudart|libsymmpin|libnccl' "/proc/$pid/maps" 2>/dev/null | awk '{print $NF}' >>"$OUT/maps.cudart"
  sleep 0.2
done
wait "$pid" || { tail "$OUT/maps.out"; fail "the sampled run failed"; }
sort -u "$OUT/maps.cudart" | tee "$OUT/maps.seen"
grep -q 'libsymmpin' "$OUT/maps.seen" || fail "libsymmpin.so never seen mapped: the samples missed the run"
[ "$(grep -c 'libcudart' "$OUT/maps.seen")" = 1 ] || fail "not exactly one libcudart mapped"
grep -q 'libcudart\.so\.12' "$OUT/maps.seen" || fail "the libcudart mapped is not libcudart.so.12"
grep -q 'libcudart\.so\.13' "$OUT/maps.seen" && fail "a libcudart.so.13 was mapped"
echo "cuda12-check: PASS"
