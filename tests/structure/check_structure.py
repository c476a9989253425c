#!/usr/bin/env python3
"""The module rules of docs/design.md, checked on the source tree (TAP).

Layers, lowest first; a module may use its own files and those of LOWER layers only, and the three
middle modules never use each other:

    common  <  driver  <  planner | symmem | kernels  <  agree  <  preload  <  interpose  <  tools

The CUDA-free modules (planner, agree) use no driver/ either.
checked on two graphs: the #include "module/..." lines of every library source, and the meson
dependencies each module's meson.build links. Also:
  - no CUDA or NCCL header in common/, planner/, agree/ or the CUDA-free part of preload/
    (everything but engine.c, keep.c and timing.c: configuration, registry, statistics, trace
    file, event handlers, host table, the capture arena);
  - no library source writes to stderr except the logger (common/log.c);
  - preload/nvtx.c is the only library source that includes an NVTX header (nvToolsExt*.h,
    nvtx3/...). It is in the CUDA-free part of preload/ and stays there: NVTX v3 is header-only
    C with no CUDA type (meson.build puts only the toolkit's include/nvtx3 folder on its path), it
    links no library, and it loads a profiler's injection library only where NVTX_INJECTION64_PATH
    names one. One file is what keeps that true: every NVTX call and the check that makes them
    free without a tool (preload/nvtx.h) stay in one place, and no other module grows a
    dependence on a profiler's API or a second NVTX instance;
  - driver/ is the only module that names a CUDA driver function (cuXxx(...)); the others call
    the driver through its table (symmpin_cu.Xxx(...)), and no library source calls the CUDA
    runtime (libsymmpin carries none: the four cuda* wrappers of interpose/ only forward the
    program's calls to the program's runtime).
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
LAYER = {"common": 0, "driver": 1, "planner": 2, "symmem": 2, "kernels": 2, "agree": 3,
         "preload": 4, "interpose": 5, "tools": 6}
CUDA_FREE_MODULES = ("common", "planner", "agree")
SOURCES = (".c", ".h", ".cu")
SDK_HEADER = re.compile(r'#\s*include\s*[<"](cuda[^>"]*|nccl[^>"]*|cuda_runtime[^>"]*)[>"]')
NVTX_HEADER = re.compile(r'#\s*include\s*[<"](nvtx3/[^>"]*|nvToolsExt[^>"]*)[>"]')
NVTX_USER = os.path.join("preload", "nvtx.c")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([a-z_]+)/[^"]+"', re.M)
# meson variables that stand for a module's library, by prefix
MESON_DEP = re.compile(
    r"\b(common|driver|planner|symmem|kernels|agree|preload|interpose)_[a-z_]*(?:dep|lib)\b")
DRIVER_CALL = re.compile(r"(?<![.\w>])cu[A-Z]\w*\s*\(")
RUNTIME_CALL = re.compile(r"(?<![.\w>])cuda[A-Z]\w*\s*\(")
CUDA_FREE_PRELOAD_EXCEPT = {"engine.c", "keep.c", "timing.c"}
LOGGER = os.path.join("common", "log.c")

results = []


def check(ok, what):
    results.append((ok, what))


def allowed(src, dst):
    if dst == "driver" and src in CUDA_FREE_MODULES:
        return False
    return src == dst or LAYER[dst] < LAYER[src]


def strip_comments(text):
    """Comments and string literals out (a message may say "stderr"); #include lines kept."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return "\n".join(line if line.lstrip().startswith("#") else
                     re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', line) for line in text.split("\n"))


for mod in LAYER:
    folder = os.path.join(ROOT, mod)
    files = sorted(f for f in os.listdir(folder) if f.endswith(SOURCES))
    check(bool(files), f"{mod}/ has sources")
    bad_inc, sdk, stderr_use, cu_calls, rt_calls, nvtx = [], [], [], [], [], []
    for f in files:
        text = open(os.path.join(folder, f), encoding="utf-8").read()
        code = strip_comments(text)
        for dst in INCLUDE.findall(code):
            if dst in LAYER and not allowed(mod, dst):
                bad_inc.append(f"{f} -> {dst}/")
        cuda_free = mod in ("common", "planner", "agree") or (
            mod == "preload" and f not in CUDA_FREE_PRELOAD_EXCEPT)
        if cuda_free and SDK_HEADER.search(code):
            sdk.append(f)
        if NVTX_HEADER.search(code) and os.path.join(mod, f) != NVTX_USER:
            nvtx.append(f)
        if mod != "driver" and f.endswith((".c", ".h")) and DRIVER_CALL.search(code):
            cu_calls.append(f"{f}: {DRIVER_CALL.search(code).group(0)}")
        # The wrappers' own definitions and the PFN typedefs of real.h are the program's runtime.
        if mod not in ("interpose", "tools") and f.endswith((".c", ".h")) and RUNTIME_CALL.search(code):
            rt_calls.append(f"{f}: {RUNTIME_CALL.search(code).group(0)}")
        if mod != "tools" and os.path.join(mod, f) != LOGGER and re.search(
                r"\bstderr\b|\bSTDERR_FILENO\b|\bperror\s*\(|\bwrite\s*\(\s*2\s*,", code):
            stderr_use.append(f)
    check(not bad_inc, f"{mod}/ includes only itself and lower layers" +
          (": " + ", ".join(bad_inc) if bad_inc else ""))
    if mod in ("common", "planner", "agree", "preload"):
        check(not sdk, f"{mod}/ (CUDA-free part) includes no CUDA or NCCL header" +
              (": " + ", ".join(sdk) if sdk else ""))
    check(not nvtx, f"{mod}/ includes no NVTX header (only {NVTX_USER} does)" +
          (": " + ", ".join(nvtx) if nvtx else ""))
    check(not cu_calls, f"{mod}/ names no CUDA driver function outside driver/" +
          (": " + ", ".join(cu_calls) if cu_calls else ""))
    check(not rt_calls, f"{mod}/ calls no CUDA runtime function" +
          (": " + ", ".join(rt_calls) if rt_calls else ""))
    if mod != "tools":
        check(not stderr_use, f"{mod}/ writes to stderr only through the logger" +
              (": " + ", ".join(stderr_use) if stderr_use else ""))
    build = os.path.join(folder, "meson.build")
    deps = set(MESON_DEP.findall(open(build, encoding="utf-8").read()))
    bad_deps = sorted(d for d in deps if not allowed(mod, d))
    check(not bad_deps, f"{mod}/meson.build links only itself and lower layers" +
          (": " + ", ".join(bad_deps) if bad_deps else ""))

# The one list of wrapped functions (interpose/wrapped.h) against the wrappers the sources define:
# a wrapper missing from the list would not be exported (tests/interpose/check_exports.py holds
# the built library against the list too).
wrapped_h = open(os.path.join(ROOT, "interpose", "wrapped.h"), encoding="utf-8").read()
listed = set(re.findall(r"X\((?:CUDART|NCCL), (\w+)\)", wrapped_h))
defined = set()
for f in sorted(os.listdir(os.path.join(ROOT, "interpose"))):
    if f.endswith(".c"):
        code = strip_comments(open(os.path.join(ROOT, "interpose", f), encoding="utf-8").read())
        code = re.sub(r"^\s*#\s*define(?:[^\n]*\\\n)*[^\n]*", "", code, flags=re.M)  # macro bodies out
        defined |= set(re.findall(r"SYMMPIN_EXPORT\s+\w+\s+(\w+)\s*\(", code))
        defined |= set(re.findall(r"^SYMMPIN_COMM_END_WRAPPER\((\w+),", code, re.M))
check(bool(listed) and listed == defined,
      "interpose/: the wrappers defined are exactly those listed in wrapped.h" +
      (f": listed only {sorted(listed - defined)}, defined only {sorted(defined - listed)}"
       if listed != defined else ""))

print(f"1..{len(results)}")
for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
