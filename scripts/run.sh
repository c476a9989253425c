#!/usr/bin/env bash
# symmpin's main job in one command. With at least two GPUs: build, then run our NCCL program
# (tests/apps/symmpin-app, one process per GPU) without and with symmpin (`symmpin run`), print
# symmpin's summary and both timings. Without GPUs: replay the bundled traces of a real 2-GPU
# job through the planner and say, in a few lines, what symmpin would do with that job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh # the Debian packages of a fresh machine, once
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
build=${SYMMPIN_BUILD_DIR:-build}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

if [ ! -f "$build/build.ninja" ]; then
  echo "== configuring the build in $build/"
  meson setup "$build" >"$log" 2>&1 || { cat "$log"; exit 1; }
fi
echo "== building (the first build compiles the GPU kernels for several GPU generations: a few minutes)"
# ninja's own [done/total] lines, one in 10 shown, so a first build is visibly moving.
if ! ninja -C "$build" 2>&1 | tee "$log" |
    awk -F'[][/]' '/^\[[0-9]+\/[0-9]+\]/ { if ($2 == $3 || $2 % 10 == 0) printf "   %s of %s build steps\n", $2, $3; fflush() }'; then
  tail -n 30 "$log"; exit 1
fi
grep -q "FAILED" "$log" && { tail -n 30 "$log"; exit 1; }

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${ngpu:-0}" -ge 2 ]; then
  app=$build/tests/apps/symmpin-app
  echo "== $ngpu GPUs: symmpin-app, one process per GPU, every result checked exactly"
  echo "-- NCCL alone:"
  "$app" --mode procs | tail -n 1
  echo "-- under symmpin (summary merged over the ranks: calls redirected, why the rest went to NCCL):"
  "$build/tools/symmpin" run --stats -- "$app" --mode procs 2>&1 | tail -n 12
  echo "== per-call time, NCCL alone"
  "$app" --mode procs --bench
  echo "== per-call time, under symmpin"
  "$build/tools/symmpin" run -- "$app" --mode procs --bench
  exit 0
fi

traces=${1:-tests/traces/app-procs}
echo "== no GPUs here (${ngpu:-0}): replaying a recorded 2-GPU job ($traces) through symmpin's planner"
"$build/tools/symmpin" replay --json "$traces"/* >"$log"
python3 - "$log" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for c in doc["comms"]:
    sites = c["sites"]
    pinned = [s for s in sites if s["pinned"]]
    why = {}
    for s in sites:
        if not s["pinned"]:
            why[s["reason"]] = why.get(s["reason"], 0) + 1
    calls = c["calls"][0] if c["calls"] else 0
    redirected = sum(s["calls"] for s in pinned if s["epoch"] >= 0)
    print(f"communicator {c['comm']}: {c['nranks']} ranks, {calls} all-reduces per rank, "
          f"warm-up over after call {max(c['warmup_end'] or [0])}")
    print(f"  plan agreed by every rank: {'yes' if c['agreed'] else 'no'}")
    print(f"  call sites pinned to symmpin: {len(pinned)} of {len(sites)} "
          f"({redirected} of {calls} calls per rank are at pinned sites)")
    if why:
        print("  left to NCCL: " + ", ".join(f"{n} site(s) {r}" for r, n in sorted(why.items())))
    print(f"  symmetric memory per rank: {c['planned_bytes']:,} bytes of slots planned; "
          f"{c['dedicated_bytes']:,} if every site had its own slot; "
          f"lower bound {c['lower_bound_bytes']:,}; plus a capture arena of "
          f"{c.get('capture_bytes', 0):,} for CUDA graphs (SYMMPIN_CAPTURE_BYTES)")
print()
print("Legend: a call site is one place in the program that calls ncclAllReduce (with its")
print("communicator, size, datatype and op). Warm-up: the first calls, which symmpin only records.")
print("Pinned: the site gets a fixed slot of symmetric memory, the same on every rank, and its calls")
print("run symmpin's NVLink kernels; the rest go to NCCL unchanged. The lower bound is the most")
print("bytes that can be in flight at once; sites never in flight together share bytes.")
PY
echo
echo "Details, site by site: $build/tools/symmpin replay $traces/*"
