#!/usr/bin/env bash
# Install what building and testing symmpin needs on a fresh Debian/Ubuntu machine, and nothing
# more: the Debian packages below when one is missing. The CUDA toolkit (nvcc, NCCL headers) is the
# machine's own and is only checked; the ptxas of CUDA 12.8 that assembles the kernels comes from a
# pinned pip wheel into a tools folder (below). Run by scripts/test.sh and scripts/run.sh; safe to
# run again (a machine that has everything is left alone, without apt-get or pip).
# Usage: scripts/setup.sh [extra Debian packages...]
set -euo pipefail
# install_debian PKG...: those of PKG not installed yet, through apt-get (as root or with sudo).
install_debian() {
  local p missing=() sudo=()
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || {
      echo "setup: missing Debian packages: ${missing[*]}; install them as root:" >&2
      echo "  apt-get install -y ${missing[*]}" >&2
      exit 1
    }
    sudo=(sudo)
  fi
  echo "== installing ${missing[*]} (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
}
install_debian meson ninja-build pkg-config libcriterion-dev uthash-dev python3 "$@"
# SYMMPIN_SETUP_CPU_ONLY=1: for a CPU-only build (scripts/test-sanitizers.sh, test-fuzz.sh), no nvcc.
[ "${SYMMPIN_SETUP_CPU_ONLY:-0}" = 1 ] || command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || {
  echo "setup: no nvcc on PATH or in /usr/local/cuda/bin: building needs the CUDA toolkit (13.x, with NCCL's headers)" >&2
  exit 1
}

[ "${SYMMPIN_SETUP_CPU_ONLY:-0}" = 1 ] && exit 0

# The ptxas of CUDA 12.8, which turns the kernels' PTX into cubins every CUDA 12 driver loads
# (kernels/images/embed.py says why that one): its pip wheel (`embed.py pin` names it and the
# folder) holds bin/ptxas, which alone is unpacked into the folder kernels/images/meson.build
# looks in, ${SYMMPIN_TOOLS_DIR:-~/.cache/symmpin}. Only this folder counts here: the Python that
# meson runs may not be this python3, so a wheel pip installed for it is no proof.
embed=$(cd "$(dirname "$0")/.." && pwd)/kernels/images/embed.py
read -r wheel subdir release < <(python3 "$embed" pin)
tools=${SYMMPIN_TOOLS_DIR:-$HOME/.cache/symmpin}/$subdir
ptxas=$tools/nvidia/cuda_nvcc/bin/ptxas
# ptxas_check: whether $ptxas is the ptxas of CUDA $release; if not, why not in $ptxas_why. Its
# whole output is read first, then matched: `ptxas --version | grep -q` under pipefail failed a
# right ptxas whenever grep quit at the release line before ptxas's last write (SIGPIPE, exit 141;
# issue 39). The why shows what it printed (first lines) or that it did not run, so that a reader
# can tell a wrong version from a binary that does not start on this machine.
ptxas_check() {
  local out rc=0 lines said="it printed"
  ptxas_why="there is no $ptxas"
  [ -e "$ptxas" ] || return 1
  out=$("$ptxas" --version 2>&1) || rc=$?
  [ "$rc" -eq 0 ] && [[ $out == *"release $release,"* ]] && return 0
  case $rc in
    0) ptxas_why="$ptxas is not the ptxas of CUDA $release (no \"release $release,\" in its --version)" ;;
    126 | 127) ptxas_why="$ptxas could not run here (exit status $rc)"; said="the error" ;;
    *) ptxas_why="$ptxas --version failed (exit status $rc$([ "$rc" -le 128 ] || echo ", signal $((rc - 128))"))" ;;
  esac
  if [ -z "$out" ]; then
    ptxas_why+="; it printed nothing"
  else
    mapfile -t lines <<<"$out"
    ptxas_why+="; $said:$(printf '\n  | %s' "${lines[@]:0:8}")"
    [ ${#lines[@]} -le 8 ] || ptxas_why+=$'\n'"  | (and $((${#lines[@]} - 8)) more lines)"
  fi
  return 1
}
if ! ptxas_check; then
  # A ptxas there but not the right one: say what it is before replacing it.
  [ ! -e "$ptxas" ] || echo "setup: $ptxas_why" >&2
  # Debian's python3 comes without pip (pip download is allowed under its EXTERNALLY-MANAGED).
  python3 -m pip --version >/dev/null 2>&1 || install_debian python3-pip
  echo "== fetching ptxas of CUDA $release ($wheel, pip download) into $tools" >&2
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/symmpin-ptxas.XXXXXX")
  # --only-binary: the wheel, never a source build; pip picks this machine's platform's.
  if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" "$wheel" >&2
  then
    rm -rf "$tmp"
    echo "setup: pip could not download $wheel; kernels/images/meson.build needs its bin/ptxas" >&2
    echo "  (or give meson setup -Dptxas12=PATH, a ptxas of CUDA $release)" >&2
    exit 1
  fi
  # Unpacked beside the final place, then moved in: an interrupted run leaves no half ptxas.
  mkdir -p "$(dirname "$ptxas")"
  python3 - "$tmp"/*.whl "$ptxas.part" <<'PY'
import os, shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("nvidia/cuda_nvcc/bin/ptxas") as src, \
        open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
os.chmod(sys.argv[2], 0o755)  # zipfile keeps no file modes
PY
  mv -f "$ptxas.part" "$ptxas"
  rm -rf "$tmp"
  ptxas_check || { echo "setup: the ptxas just fetched from $wheel is not usable: $ptxas_why" >&2; exit 1; }
fi
