#!/usr/bin/env bash
# Copy what the GPU machine needs from a build folder into a slim one to carry there (the device
# tool carries 64 MiB at most; a build folder holds objects and the kernels' images several times
# over): the library, the programs the GPU suite, scripts/pip-only-check.sh and
# scripts/cuda12-check.sh run, and common/version.h. Usage: scripts/device-build.sh [BUILD] [OUT]
# (default: build, build-dev); prints OUT's size.
set -eu
cd "$(dirname "$0")/.."
B=${1:-build}
D=${2:-build-dev}
rm -rf "$D"
mkdir -p "$D/tests/apps" "$D/tests/gpu" "$D/tests/symmem" "$D/common"
cp -a "$B"/libsymmpin.so* "$D/"
cp -a "$B/common/version.h" "$D/common/"
for f in tests/apps/symmpin-app tests/apps/symmpin-dp tests/apps/symmpin-life \
  tests/apps/symmpin-trust tests/gpu/test_oneshot tests/symmem/test_pool; do
  cp -a "$B/$f" "$D/$f"
done
# symmpin-bench (two GPUs) only where it fits: it carries the kernels' images too.
[ "${DEVICE_BUILD_BENCH:-0}" = 1 ] && cp -a "$B/tests/gpu/symmpin-bench" "$D/tests/gpu/"
du -sh "$D"
