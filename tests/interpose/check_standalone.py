#!/usr/bin/env python3
"""libsymmpin.so stands alone: what it needs to load, and what it does in a process with nothing
for it to do (TAP).

  needed LIB [GLIBC]
                its NEEDED entries name no CUDA runtime, no NCCL and no CUDA driver (NCCL and the
                driver are found at run time), only the system's C libraries: a process without
                any libcudart.so (a pip-only PyTorch, a CUDA 12 program) starts with it
                preloaded. And it holds no CUDA runtime either (symmpin talks to the driver
                alone, driver/cu.h): no symbol of one in its symbol tables, no fat binary
                registered with one (__cudaRegisterFatBinary), no C++ runtime it would need.
                With GLIBC (2.28, meson.build's glibc_compat: the wheel's manylinux_2_28 tag), no
                glibc symbol version newer than that, and libdl.so.2, libpthread.so.0 and
                librt.so.1 in NEEDED on purpose: before glibc 2.34 they, not libc.so.6, hold the
                pinned versions of dlopen, pthread_create, shm_open & co that the library calls
                (common/glibc_compat.h; empty placeholders from 2.34 on). That they hold every
                one is scripts/check-glibc.py's check (CI, the wheel).
  glibc FILE GLIBC
                the same version check alone, for symmpin-replay (in the wheel too).
  bin_true LIB  preloaded into /bin/true (no NCCL, no CUDA; on a machine without a GPU or a
                driver, like CI's): exit status 0 and not a byte of output, also with
                SYMMPIN_DEBUG=INFO; and with every file setting on (trace, statistics, debug
                file) no file either, since the process never creates a communicator.

The child runs with LD_LIBRARY_PATH removed, so that the FAKE libraries of tests/fakes (which
meson's test environment puts there) cannot stand in for a missing system library."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

results = []


def check(ok, what, why=""):
    results.append((bool(ok), what, why))


def glibc_versions(path, newest):
    """No glibc symbol version that `path` needs is newer than `newest` (2.28)."""
    out = subprocess.run(["readelf", "-VW", path], check=True, capture_output=True,
                         text=True).stdout
    key = lambda v: tuple(int(x) for x in v.split("."))
    versions = set(re.findall(r"Name: GLIBC_([0-9.]+)\b", out))
    newer = sorted((v for v in versions if key(v) > key(newest)), key=key)
    check(versions, "readelf shows the glibc versions it needs", out[-2000:])
    tag = "manylinux_" + newest.replace(".", "_")
    check(not newer, f"no glibc symbol version newer than {newest} ({tag})",
          "needs GLIBC_" + ", GLIBC_".join(newer) + ": pin an older version in "
          "common/glibc_compat.h (objdump -T shows which symbols)")


def needed(lib, glibc=None):
    out = subprocess.run(["readelf", "-dW", lib], check=True, capture_output=True, text=True).stdout
    names = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    check(names, "readelf shows the NEEDED entries", out)
    for what, pattern in (("CUDA runtime", r"libcudart"), ("NCCL", r"libnccl"),
                          ("CUDA driver", r"libcuda\.")):
        bad = [n for n in names if re.search(pattern, n)]
        check(not bad, f"NEEDED names no {what}", f"NEEDED: {names}")
    system = re.compile(r"^(libc\.so|libdl\.so|libpthread\.so|librt\.so|libm\.so|ld-linux)")
    other = [n for n in names if not system.match(n)]
    check(not other, "NEEDED names only the system's C libraries", f"also: {other} (NEEDED: {names})")
    if glibc:
        glibc_versions(lib, glibc)
        old = {"libdl.so.2", "libpthread.so.0", "librt.so.1"}
        check(old <= set(names), "NEEDED names libdl.so.2, libpthread.so.0 and librt.so.1 (glibc "
              "before 2.34 holds the pinned functions there)", f"NEEDED: {names}")
    # Every symbol, local ones too (the library is not stripped): a static CUDA runtime's functions
    # would show as local cuda* names; the four cuda* the library defines are its exported wrappers.
    syms = subprocess.run(["nm", "-a", lib], check=True, capture_output=True, text=True).stdout
    names = set(line.split()[-1] for line in syms.splitlines() if line.split())
    check(len(names) > 100, "nm lists the library's symbols", syms[:2000])
    wrappers = {"cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync"}
    # The runtime's API (cudaXxx), its registration hooks (__cudaRegisterFatBinary, ...) and its
    # internals (namespace cudart, _ZN6cudart...).
    runtime = sorted(n for n in names if re.match(r"(cuda[A-Z]|__cuda|_ZN6cudart)", n)
                     and n.split("@")[0] not in wrappers)
    check(not runtime, "no CUDA runtime inside (no cudaXxx but the wrappers, no __cuda*, no "
          "cudart internals)", f"{len(runtime)} such symbols: {runtime[:20]}")


def run_true(lib, extra, what):
    env = {k: v for k, v in os.environ.items()
           if k != "LD_LIBRARY_PATH" and not k.startswith("SYMMPIN_")}
    env["LD_PRELOAD"] = os.path.abspath(lib)
    env.update(extra)
    true = "/bin/true" if os.path.exists("/bin/true") else shutil.which("true")
    p = subprocess.run([true], env=env, capture_output=True, text=True, timeout=60)
    out = p.stdout + p.stderr
    check(p.returncode == 0, f"{what}: exit status 0", f"status {p.returncode}: {out}")
    check(out == "", f"{what}: no output", repr(out))


def bin_true(lib):
    run_true(lib, {}, "preloaded into /bin/true")
    run_true(lib, {"SYMMPIN_DEBUG": "INFO"}, "the same with SYMMPIN_DEBUG=INFO")
    with tempfile.TemporaryDirectory(prefix="symmpin-true-") as d:
        run_true(lib, {"SYMMPIN_DEBUG": "INFO", "SYMMPIN_TRACE": d + "/trace.%r.%p",
                       "SYMMPIN_STATS": "1", "SYMMPIN_STATS_FILE": d + "/stats.%p.json",
                       "SYMMPIN_DEBUG_FILE": d + "/log.%p"},
                 "the same with trace, statistics and debug file set")
        left = os.listdir(d)
        check(not left, "no communicator, no file", f"files: {left}")


def main():
    mode, lib, *rest = sys.argv[1:]
    {"needed": needed, "bin_true": bin_true, "glibc": glibc_versions}[mode](lib, *rest)
    print(f"1..{len(results)}")
    for i, (ok, what, why) in enumerate(results, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {what}")
        if not ok:
            print("# " + why.replace("\n", "\n# "))
    return 0 if all(ok for ok, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
