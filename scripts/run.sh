#!/usr/bin/env bash
# symmpin's main job in one command. With at least two GPUs: build, then run our NCCL program
# (tests/apps/symmpin-app, one process per GPU) without and with symmpin (`symmpin run`), print
# symmpin's summary and both timings. Without GPUs: replay the bundled traces of a real 2-GPU
# job through the planner and print the plan every rank would agree on.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
build=${SYMMPIN_BUILD_DIR:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
ninja -C "$build" >/dev/null
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${ngpu:-0}" -ge 2 ]; then
  app=$build/tests/apps/symmpin-app
  echo "== $ngpu GPUs: symmpin-app, one process per GPU, checked against exact results"
  "$app" --mode procs | tail -n 1
  "$build/tools/symmpin" run -- "$app" --mode procs 2>&1 | tail -n 8
  echo "== per-call time, NCCL alone"
  "$app" --mode procs --bench
  echo "== per-call time, under symmpin"
  "$build/tools/symmpin" run -- "$app" --mode procs --bench
else
  traces=${1:-tests/traces/app-procs}
  echo "== no GPUs here (${ngpu:-0}): replaying the recorded traces in $traces"
  "$build/tools/symmpin" replay "$traces"/*
fi
