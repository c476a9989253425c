#!/usr/bin/env bash
# Build everything and run the CPU test suite (what CI runs). GPU programs are built too (nvcc
# compiles without a GPU) but only run on a GPU machine (scripts/gpu-suite.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh # the Debian packages of a fresh machine, once
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
build=${SYMMPIN_BUILD_DIR:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
ninja -C "$build" >/dev/null
set +e
meson test -C "$build" --print-errorlogs "$@" 2>&1 | tee "$build/test-summary.log"
rc=${PIPESTATUS[0]}
set -e
# Meson's summary in the closing form CI reads: "N passed, N failed".
count() { awk -v k="$1:" '$1 == k { n = $2 } END { print n + 0 }' "$build/test-summary.log"; }
ok=$(count Ok)
fail=$(count Fail)
timeout=$(count Timeout)
echo "tests: ${ok:-0} passed, $(( ${fail:-0} + ${timeout:-0} )) failed"
exit "$rc"
