#!/usr/bin/env bash
# scripts/setup.sh's check of the ptxas of CUDA 12.8 it keeps in SYMMPIN_TOOLS_DIR (TAP, CPU;
# issue 39), with made-up ptxas programs in a temporary SYMMPIN_TOOLS_DIR. A right one that prints
# its release line, pauses, then prints more is left alone (under pipefail, `ptxas --version |
# grep -q` failed it whenever grep had quit before the last line: a needless fetch, or on a fresh
# machine a failed setup); a wrong release and one that cannot run are refused with what they
# printed or that they could not run. Fetching from an index is impossible here (no index, a
# bogus index URL: a wrong fetch fails at once); where pip is there, a made-up wheel in a local
# folder stands for the index, to show a fetch end to end and a fetched ptxas refused.
# Stand-ins on PATH keep the machine out of it: nvcc (setup only asks that there is one), dpkg (every
# Debian package is there) and apt-get and sudo (fail: nothing is ever installed).
# Arguments: SOURCE_ROOT
set -u
root=$1
n=0 bad=0
ok() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; bad=$((bad + 1)); fi; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

read -r wheel subdir release < <(python3 "$root/kernels/images/embed.py" pin)
version=${wheel##*==} # 12.8.93
mkdir -p "$tmp/bin" "$tmp/links" "$tmp/none"
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/nvcc"
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/dpkg"
printf '#!/bin/sh\necho "$0 $* (a stand-in: the test installs nothing)" >&2\nexit 1\n' >"$tmp/bin/apt-get"
cp "$tmp/bin/apt-get" "$tmp/bin/sudo"
chmod +x "$tmp/bin"/*

# make_ptxas FILE KIND: a made-up ptxas. right: the five lines of ptxas 12.8's --version, a pause
# of 0.3 s before the last one (set -e: where SIGPIPE is ignored, the failed write ends it non-zero
# as the signal would); quick: the same lines at once; wrong: release 12.6's; binary: an ELF header
# alone (no program for this machine: the shell cannot execute it); nolib: exits 127 with the
# loader's message about a missing library.
make_ptxas() {
  local f=$1
  mkdir -p "$(dirname "$f")"
  case $2 in
    right | quick | wrong)
      local r=$release v=$version pause="sleep 0.3"
      [ "$2" = wrong ] && r=12.6 v=12.6.85
      [ "$2" = right ] || pause=:
      cat >"$f" <<EOF
#!/usr/bin/env bash
set -e
echo "ptxas: NVIDIA (R) Ptx optimizing assembler"
echo "Copyright (c) 2005-2025 NVIDIA Corporation"
echo "Built on Fri_Feb_21_20:21:21_PST_2025"
echo "Cuda compilation tools, release $r, V$v"
$pause
echo "Build cuda_$r.r$r/compiler.35583870_0"
EOF
      ;;
    binary) printf '\177ELF\002\001\001\000\000\000\000\000\000\000\000\000' >"$f" ;;
    nolib)
      printf '#!/bin/sh\necho "%s: error while loading shared libraries: libstdc++.so.6: cannot open shared object file: No such file or directory" >&2\nexit 127\n' \
        "$f" >"$f"
      ;;
  esac
  chmod +x "$f"
}

# run_setup TOOLS_DIR [LINKS_DIR]: scripts/setup.sh with that tools folder and no index (pip may
# only look in LINKS_DIR, default an empty folder); sets out (stdout and stderr) and rc.
run_setup() {
  out=$(env -u SYMMPIN_SETUP_CPU_ONLY PATH="$tmp/bin:$PATH" SYMMPIN_TOOLS_DIR="$1" \
    PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 PIP_INDEX_URL=http://127.0.0.1:9/simple \
    PIP_FIND_LINKS="${2:-$tmp/none}" PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    timeout 120 bash "$root/scripts/setup.sh" 2>&1)
  rc=$?
  if [ -z "$out" ]; then
    echo "# setup.sh: exit $rc, nothing printed"
  else
    echo "# setup.sh: exit $rc, printed:"
    while IFS= read -r line; do echo "#   $line"; done <<<"$out"
  fi
}
ptxas_in() { echo "$1/$subdir/nvidia/cuda_nvcc/bin/ptxas"; }

# ---- a right ptxas, already there
for kind in right quick; do
  t=$tmp/tools-$kind; p=$(ptxas_in "$t")
  make_ptxas "$p" "$kind"; cp "$p" "$tmp/$kind.orig"
  what="a right ptxas ($([ $kind = right ] && echo "a pause before its last line" || echo "all lines at once"))"
  run_setup "$t"
  ok "$what: setup exits 0" '[ $rc -eq 0 ]'
  ok "$what: left alone (no fetch, no message)" \
    '[[ $out != *"== fetching"* && $out != *"setup:"* ]] && cmp -s "$p" "$tmp/$kind.orig"'
done

# ---- a ptxas there that is not the right one: refused with what it printed, then fetched (which
# fails here: no index), and left as it was.
t=$tmp/tools-wrong; p=$(ptxas_in "$t")
make_ptxas "$p" wrong; cp "$p" "$tmp/wrong.orig"
run_setup "$t"
ok "a ptxas of release 12.6: refused, its lines shown, then a fetch (which fails without an index)" \
  '[ $rc -ne 0 ] && [[ $out == *"is not the ptxas of CUDA $release"*"  | Cuda compilation tools, release 12.6, V12.6.85"*"== fetching"* ]]'
ok "a ptxas of release 12.6: it stays as it was after the failed fetch" 'cmp -s "$p" "$tmp/wrong.orig"'

t=$tmp/tools-binary; p=$(ptxas_in "$t")
make_ptxas "$p" binary
run_setup "$t"
ok "a ptxas that is no program for this machine: 'could not run here (exit status 126)' and the shell's reason" \
  '[ $rc -ne 0 ] && [[ $out == *"could not run here (exit status 126)"*"  | "*"cannot execute binary file"*"== fetching"* ]]'

t=$tmp/tools-nolib; p=$(ptxas_in "$t")
make_ptxas "$p" nolib
run_setup "$t"
ok "a ptxas that does not start (a library missing): 'could not run here (exit status 127)' and the loader's line" \
  '[ $rc -ne 0 ] && [[ $out == *"could not run here (exit status 127)"*"  | "*"error while loading shared libraries"*"== fetching"* ]]'

t=$tmp/tools-none
run_setup "$t"
ok "no ptxas yet: a fetch, no message about a ptxas there" \
  '[ $rc -ne 0 ] && [[ $out == *"== fetching"* && $out != *"is not the ptxas"* && $out != *"could not run"* ]]'

# ---- fetched from a made-up wheel in a local folder (pip download --no-index --find-links)
# make_wheel DIR KIND: nvidia-cuda-nvcc-cu12 of the pinned version holding make_ptxas KIND.
make_wheel() {
  rm -rf "$1"; mkdir -p "$1"
  make_ptxas "$tmp/wheel-ptxas" "$2"
  python3 - "$1" "${wheel%%==*}" "$version" "$tmp/wheel-ptxas" <<'PY'
import sys, zipfile
folder, name, version, ptxas = sys.argv[1:]
dist = name.replace("-", "_")
info = f"{dist}-{version}.dist-info"
with zipfile.ZipFile(f"{folder}/{dist}-{version}-py3-none-any.whl", "w") as z:
    z.write(ptxas, "nvidia/cuda_nvcc/bin/ptxas")
    z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: check_setup_ptxas\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr(f"{info}/RECORD", "")
PY
}
if python3 -m pip --version >/dev/null 2>&1; then
  make_wheel "$tmp/links" right
  t=$tmp/tools-fetch; p=$(ptxas_in "$t")
  run_setup "$t" "$tmp/links"
  ok "no ptxas yet, the right one in the (local) index: fetched, setup exits 0" \
    '[ $rc -eq 0 ] && [[ $out == *"== fetching"* && $out != *"setup:"* ]] && cmp -s "$p" "$tmp/wheel-ptxas"'
  run_setup "$t" "$tmp/none"
  ok "setup again: the fetched ptxas left alone, exit 0" '[ $rc -eq 0 ] && [[ $out != *"== fetching"* ]]'
  make_wheel "$tmp/links" wrong
  t=$tmp/tools-fetch-wrong
  run_setup "$t" "$tmp/links"
  ok "a fetched ptxas of release 12.6: setup fails, naming the wheel and showing its lines" \
    '[ $rc -eq 1 ] && [[ $out == *"the ptxas just fetched from $wheel is not usable"*"  | Cuda compilation tools, release 12.6, V12.6.85"* ]]'
else
  for what in "a fetch from a (local) index" "setup again after a fetch" "a fetched ptxas of release 12.6"; do
    skip "$what" "no pip for python3"
  done
fi
echo "1..$n"
[ $bad -eq 0 ]
