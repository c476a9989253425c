#!/usr/bin/env bash
# Install what building and testing symmpin needs on a fresh Debian/Ubuntu machine, and nothing
# more: the Debian packages below when one is missing. The CUDA toolkit (nvcc, NCCL headers) is the
# machine's own and is only checked. Sourced by scripts/test.sh and scripts/run.sh; safe to run
# again (a machine that has everything is left alone, without apt-get).
# Usage: scripts/setup.sh [extra Debian packages...]
set -euo pipefail
pkgs=(meson ninja-build pkg-config libcriterion-dev uthash-dev python3 "$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then sudo=(); elif command -v sudo >/dev/null; then sudo=(sudo); else
    echo "setup: missing Debian packages: ${missing[*]}; install them as root:" >&2
    echo "  apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "== installing ${missing[*]} (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# SYMMPIN_SETUP_CPU_ONLY=1: for a CPU-only build (scripts/test-sanitizers.sh, test-fuzz.sh), no nvcc.
[ "${SYMMPIN_SETUP_CPU_ONLY:-0}" = 1 ] || command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || {
  echo "setup: no nvcc on PATH or in /usr/local/cuda/bin: building needs the CUDA toolkit (13.x, with NCCL's headers)" >&2
  exit 1
}
