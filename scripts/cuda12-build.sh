#!/usr/bin/env bash
# Build build-cu12/ (ignored by git): tests/apps/allreduce_app.c as a CUDA 12 program, compiled
# against the CUDA 12.8 runtime's headers and linked to its libcudart.so.12, both from the
# nvidia-cuda-runtime-cu12 wheel (pip download, no toolkit needed for them); NCCL's header and
# link library from the system's toolkit (the program finds the GPU machine's libnccl.so.2 at run
# time: NCCL carries its own static runtime, so any NCCL 2.x built for a driver >= 580 serves).
# The program finds its libcudart.so.12 next to itself (RUNPATH $ORIGIN/lib), so the folder can
# be carried to the GPU machine as it is. scripts/cuda12-check.sh runs it there.
# Usage (repository root, after the library's build, whose build folder holds common/version.h):
#   scripts/cuda12-build.sh [BUILD_DIR]      (default: build)
set -eu
cd "$(dirname "$0")/.."
B=${1:-build}
D=build-cu12
CUDA=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")}
[ -f "$B/common/version.h" ] || { echo "no $B/common/version.h: build the library first" >&2; exit 2; }
mkdir -p "$D/wheels" "$D/unpacked" "$D/include" "$D/lib" "$D/nccl"
ls "$D"/wheels/nvidia_cuda_runtime_cu12-12.8.*.whl >/dev/null 2>&1 ||
  python3 -m pip download --no-deps 'nvidia-cuda-runtime-cu12==12.8.*' -d "$D/wheels"
python3 -m zipfile -e "$(ls "$D"/wheels/nvidia_cuda_runtime_cu12-12.8.*.whl | head -n1)" "$D/unpacked"
cp -r "$D/unpacked/nvidia/cuda_runtime/include/." "$D/include/"
rm -f "$D/include/__init__.py"
cp "$D/unpacked/nvidia/cuda_runtime/lib/libcudart.so.12" "$D/lib/"
cp "$CUDA/include/nccl.h" "$D/nccl/"            # nccl.h includes <cuda_runtime.h>: the 12.8 one
ln -sf "$(readlink -f "$CUDA/lib64/libnccl.so")" "$D/nccl/libnccl.so"
# The CUDA 12 headers come first; nothing of the CUDA 13 toolkit's include folder is on the path.
cc -std=c11 -O2 -g -D_GNU_SOURCE -pthread -fno-optimize-sibling-calls -fno-ipa-icf -Wall -Wextra \
  -I "$D/include" -I "$D/nccl" -I . -I "$B" -I "$B/common" \
  tests/apps/allreduce_app.c tests/apps/launch.c -o "$D/symmpin-app-cu12" \
  -L "$D/lib" -l:libcudart.so.12 -L "$D/nccl" -lnccl -lm -ldl -Wl,-rpath,'$ORIGIN/lib'
# What it is: CUDA 12.8 headers, libcudart.so.12 NEEDED, and no CUDA 13 runtime.
grep -Eq '#define CUDART_VERSION +120[0-9]0' "$D/include/cuda_runtime_api.h"
readelf -d "$D/symmpin-app-cu12" | grep -q 'NEEDED.*\[libcudart.so.12\]'
! readelf -d "$D/symmpin-app-cu12" | grep -q 'libcudart.so.13'
rm -rf "$D/unpacked" "$D/nccl/libnccl.so" # the link (to this machine's NCCL) is for the link step only
echo "built $D/symmpin-app-cu12 (CUDA 12.8 runtime: $D/lib/libcudart.so.12; $(du -sh "$D" | cut -f1) in $D)"
