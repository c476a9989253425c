#!/usr/bin/env bash
# symmpin on a pip-only machine (issue 24): PyTorch's CUDA runtime and NCCL come from its wheels
# (site-packages/nvidia/cu13/lib/libcudart.so.13, nvidia/nccl/lib/libnccl.so.2) and the system has
# no loadable libcudart. Run on the GPU machine from the repository root, as root (or where
# unprivileged user namespaces are allowed): in a private mount namespace every system copy of
# libcudart (what the loader cache and the toolkit folders hold) is covered by an empty file, then
#   1. the hiding works: the system's libcudart.so.13 cannot be loaded;
#   2. LD_PRELOAD=libsymmpin.so /bin/true: exit status 0, no output (also at SYMMPIN_DEBUG=INFO);
#   3. PyTorch with the preload: torch.ones(4).sum() on the GPU prints 4.0 and nothing else at
#      SYMMPIN_DEBUG=INFO (no communicator: symmpin is quiet, writes no trace and starts no
#      thread: as many threads as without the preload), and its /proc/self/maps holds exactly one
#      libcudart, the wheel's;
#   4. the same with one NCCL all-reduce (a one-rank process group; SYMMPIN_TEST_ONE_RANK so
#      that symmpin redirects it): the right sum, symmpin's banner names the wheel's runtime as
#      the program's, and still exactly one libcudart file is mapped;
#   5. with WHEEL set (a wheel of this tree, e.g. .whl/symmpin-*.whl): installed with pip into a
#      fresh folder, `symmpin doctor` (printed; its verdict and exit status are information here:
#      one GPU cannot be redirected between GPUs) and `symmpin run -- torchrun --nproc_per_node=2`
#      on tests/apps/maps_allreduce.py, the two ranks sharing GPUs where there are fewer (an NCCL
#      host id each: scripts/rank-env.sh): every rank's digests identical to the run without
#      symmpin, all-reduces redirected, and each rank has exactly one libcudart mapped, the wheel's.
# Usage: scripts/pip-only-check.sh [BUILD_DIR] [PYTHON]   (default: build, /opt/torch/.venv/bin/python)
# Last line: "pip-only-check: PASS" or "pip-only-check: FAIL (<what>)".
set -u
cd "$(dirname "$0")/.."
B=${1:-build}
PY=${2:-/opt/torch/.venv/bin/python}
LIB=$PWD/$B/libsymmpin.so.0
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

if [ "${PIP_ONLY_INSIDE:-}" != 1 ]; then
  [ -f "$LIB" ] || { echo "pip-only-check: FAIL (no $LIB)"; exit 1; }
  [ -x "$PY" ] || { echo "pip-only-check: FAIL (no $PY)"; exit 1; }
  if [ "$(id -u)" = 0 ]; then ns=(unshare -m); else ns=(unshare -r -m); fi
  PIP_ONLY_INSIDE=1 exec "${ns[@]}" bash "$0" "$B" "$PY"
fi

fail() { echo "pip-only-check: FAIL ($*)"; exit 1; }
mount --make-rprivate / 2>/dev/null || true
SITE=$(readlink -f "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')") || fail "no site-packages"
# Every libcudart the loader could find outside the wheels: the cache, the toolkits, the usual
# folders. Links lead to files; covering the files covers every name.
empty=$(mktemp)
hidden=0
for f in $( { ldconfig -p | awk '/libcudart/ {print $NF}'
              ls /usr/local/cuda*/lib64/libcudart.so* /usr/local/cuda*/targets/*/lib/libcudart.so* \
                 /usr/local/lib/libcudart.so* /usr/lib/x86_64-linux-gnu/libcudart.so* 2>/dev/null
            } | xargs -r readlink -f | sort -u); do
  case "$f" in "$SITE"/*) continue ;; esac
  [ -f "$f" ] || continue
  mount --bind "$empty" "$f" || fail "cannot cover $f"
  echo "covered $f"
  hidden=$((hidden + 1))
done
echo "= $hidden system copies of libcudart covered"

echo "== 1. the system's libcudart.so.13 cannot be loaded"
if "$PY" -c 'import ctypes; ctypes.CDLL("libcudart.so.13")' 2>/dev/null; then
  fail "libcudart.so.13 still loads from the system (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"
fi

echo "== 2. /bin/true"
out=$(LD_PRELOAD=$LIB /bin/true 2>&1) || fail "/bin/true with the preload: exit status $?: $out"
[ -z "$out" ] || fail "/bin/true printed: $out"
out=$(SYMMPIN_DEBUG=INFO LD_PRELOAD=$LIB /bin/true 2>&1) || fail "/bin/true at INFO: exit status $?"
[ -z "$out" ] || fail "/bin/true at INFO printed: $out"

maps='
import os
seen = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libcudart" in l})
print("MAPS", " ".join(seen))
print("THREADS", len(os.listdir("/proc/self/task")))
'
echo "== 3. PyTorch, no communicator"
torch_ones='
import torch
x = torch.ones(4, device="cuda")
print(x.sum().item())
'
plain=$("$PY" -c "$torch_ones$maps" 2>&1) || fail "torch without the preload: $plain"
out=$(SYMMPIN_DEBUG=INFO SYMMPIN_TRACE=/tmp/pip-only.trace.%p LD_PRELOAD=$LIB "$PY" -c "$torch_ones$maps" 2>&1) ||
  fail "torch with the preload: $out"
echo "$out"
[ "$(head -n1 <<<"$out")" = "4.0" ] || fail "not 4.0 first"
grep -q symmpin <<<"$out" && fail "symmpin logged without a communicator"
ls /tmp/pip-only.trace.* >/dev/null 2>&1 && fail "a trace file without a communicator"
# symmpin's own runtime answers its device queries from the first cudaMalloc on: it must start
# no thread (the program's driver threads are the same with and without the preload).
t0=$(grep '^THREADS' <<<"$plain" | cut -d' ' -f2); t1=$(grep '^THREADS' <<<"$out" | cut -d' ' -f2)
echo "= threads at the end without symmpin: $t0, with: $t1"
[ "$t1" -le "$t0" ] || fail "the preload added $((t1 - t0)) thread(s) without a communicator"
m=$(grep '^MAPS' <<<"$out")
[ "$(wc -w <<<"${m#MAPS}")" = 1 ] || fail "not exactly one libcudart mapped: $m"
grep -q "$SITE/nvidia/" <<<"$m" || fail "the libcudart mapped is not the wheel's: $m"

echo "== 4. PyTorch, one NCCL all-reduce"
out=$(SYMMPIN_DEBUG=INFO SYMMPIN_TEST_ONE_RANK=1 LD_PRELOAD=$LIB "$PY" -c '
import torch, torch.distributed as dist
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29517", rank=0, world_size=1,
                        device_id=torch.device("cuda", 0))
x = torch.full((1024,), 2.0, device="cuda")
for _ in range(200):
    y = x.clone(); dist.all_reduce(y)
torch.cuda.synchronize()
print("SUM", y.sum().item())
dist.destroy_process_group()
'"$maps" 2>&1) || fail "torch all-reduce with the preload: $(tail -n 20 <<<"$out")"
grep -E "SUM|MAPS|symmpin (WARN|INFO) (CUDA|NCCL|symmpin|no CUDA|the CUDA)" <<<"$out"
grep -q '^SUM 2048.0' <<<"$out" || fail "wrong sum"
grep -q "symmpin INFO CUDA driver supports CUDA [0-9.]* (symmpin uses it at the CUDA 12.0 ABI, no runtime of its own); the program's CUDA runtime: libcudart.so.13 " <<<"$out" ||
  fail "the banner does not name the program's libcudart.so.13"
m=$(grep '^MAPS' <<<"$out")
[ "$(wc -w <<<"${m#MAPS}")" = 1 ] || fail "not exactly one libcudart mapped: $m"
grep -q "$SITE/nvidia/" <<<"$m" || fail "the libcudart mapped is not the wheel's: $m"

if [ -n "${WHEEL:-}" ]; then
  echo "== 5. the wheel: symmpin doctor, symmpin run -- torchrun (2 ranks)"
  site=$(mktemp -d)
  "$PY" -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$WHEEL" ||
    fail "pip cannot install $WHEEL"
  symmpin() { PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} "$PY" -m symmpin "$@"; }
  symmpin version || fail "symmpin version"
  symmpin doctor --python "$PY"
  echo "= doctor's exit status: $?"
  torchrun=$(dirname "$PY")/torchrun
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  if [ "${ngpu:-0}" -lt 2 ]; then # ranks share the GPU: NCCL over sockets (scripts/rank-env.sh)
    export RANK_ENV_NCCL_HOSTS=2 RANK_ENV_JOB=pip-only-$$ NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
  fi
  job=("$torchrun" --standalone --nproc_per_node=2 --no-python bash scripts/rank-env.sh "$PY" tests/apps/maps_allreduce.py)
  plain=$(timeout -s KILL 240 "${job[@]}" 2>&1) || fail "torchrun without symmpin: $(tail -n 20 <<<"$plain")"
  out=$(timeout -s KILL 240 env PYTHONPATH="$site" "$PY" -m symmpin run -- "${job[@]}" 2>&1) ||
    fail "symmpin run -- torchrun: $(tail -n 30 <<<"$out")"
  a=$(grep '^MAPS-DIGEST' <<<"$plain" | sort); b=$(grep '^MAPS-DIGEST' <<<"$out" | sort)
  echo "without symmpin:"; echo "$a"; echo "with symmpin:"; echo "$b"
  [ "$(wc -l <<<"$a")" = 2 ] && [ "$a" = "$b" ] || fail "digests missing or different"
  grep -E '^MAPS-LIBS|^symmpin: ' <<<"$out"
  for r in 0 1; do
    m=$(grep "^MAPS-LIBS rank=$r " <<<"$out" | tr ' ' '\n' | grep libcudart)
    [ "$(wc -l <<<"$m")" = 1 ] && [ -n "$m" ] || fail "rank $r: not exactly one libcudart mapped: $m"
    case "$(readlink -f "$m")" in "$SITE"/nvidia/*) ;; *) fail "rank $r maps $m, not the wheel's" ;; esac
  done
  grep -qE '^symmpin: communicator .*: [1-9][0-9]* of [0-9]+ all-reduces on symmpin' <<<"$out" ||
    fail "symmpin run's summary shows no all-reduce on symmpin"
  rm -rf "$site"
fi
echo "pip-only-check: PASS"
