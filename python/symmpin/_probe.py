"""Which CUDA runtime and NCCL a Python environment uses: run BY THAT PYTHON as a script
(`PYTHON _probe.py`) for `symmpin doctor`, so that it sees that environment's packages and
loader paths. It prints one line, "SYMMPIN-PROBE " and a JSON object; anything else on stdout
(a package's chatter) is ignored by the reader.

What it does: imports torch if present (which loads PyTorch's CUDA runtime and NCCL), initialises
CUDA where a GPU is there, and lists the libcudart*/libnccl* mapped into the process
(/proc/self/maps); where nothing is mapped it searches site-packages for the pip wheels' copies
(nvidia/*/lib/libcudart.so.*, nvidia/nccl/lib/libnccl.so.*). Each library found is asked its
version (cudaRuntimeGetVersion, ncclGetVersion: neither needs a GPU).
`_probe.py --libs PATH...` only asks the versions of the libraries named (for `doctor -- CMD`).

Kept to Python 3.6 so an old environment can run it; imports nothing of symmpin.
"""

import ctypes
import glob
import json
import os
import site
import sys

MARK = "SYMMPIN-PROBE "


def kind_of(path):
    base = os.path.basename(path)
    if base.startswith("libcudart.so"):
        return "cudart"
    if base.startswith("libnccl.so"):
        return "nccl"
    return None


def mapped():
    """The libcudart/libnccl files mapped into this process, in order of first appearance."""
    seen = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    path = parts[5].strip()
                    if kind_of(path) and path not in seen:
                        seen.append(path)
    except OSError:
        pass
    return seen


def site_dirs():
    dirs = []
    try:
        dirs += site.getsitepackages()
    except AttributeError:  # an old virtualenv's site module
        pass
    try:
        dirs.append(site.getusersitepackages())
    except AttributeError:
        pass
    return [d for d in dirs if os.path.isdir(d)]


def in_site_packages():
    found = []
    for d in site_dirs():
        found += sorted(glob.glob(os.path.join(d, "nvidia", "*", "lib", "libcudart.so.*")))
        found += sorted(glob.glob(os.path.join(d, "nvidia", "nccl", "lib", "libnccl.so.*")))
    return found


def version_of(path):
    """The library's own version: cudart 13000 -> [13, 0]; nccl 22809 -> [2, 28, 9]; None where it
    cannot be loaded or asked (the reason in the second value)."""
    kind = kind_of(path)
    try:
        lib = ctypes.CDLL(path)
        v = ctypes.c_int()
        if kind == "cudart":
            if lib.cudaRuntimeGetVersion(ctypes.byref(v)) != 0:
                return None, "cudaRuntimeGetVersion failed"
            return [v.value // 1000, (v.value % 1000) // 10], None
        if lib.ncclGetVersion(ctypes.byref(v)) != 0:
            return None, "ncclGetVersion failed"
        # NCCL_VERSION(X,Y,Z): X*10000 + Y*100 + Z since 2.9 (X*1000 + Y*100 + Z before)
        n = v.value
        if n >= 10000:
            return [n // 10000, (n % 10000) // 100, n % 100], None
        return [n // 1000, (n % 1000) // 100, n % 100], None
    except (OSError, AttributeError) as e:
        return None, str(e)


def describe(paths, how):
    out = []
    for p in paths:
        ver, err = version_of(p)
        entry = {"kind": kind_of(p), "path": os.path.realpath(p), "how": how, "version": ver}
        if err:
            entry["error"] = err
        out.append(entry)
    return out


def probe_torch(doc):
    try:
        import torch  # noqa: F401  (imported for what it loads)
    except ImportError:
        doc["torch"] = None
        return
    except Exception as e:  # a broken install is a fact to report, not a crash
        doc["torch"] = {"error": "%s: %s" % (type(e).__name__, e)}
        return
    t = {"version": getattr(torch, "__version__", None),
         "cuda": getattr(getattr(torch, "version", None), "cuda", None)}
    try:
        t["gpus"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if t["gpus"]:
            torch.cuda.init()
    except Exception as e:
        t["cuda_error"] = "%s: %s" % (type(e).__name__, e)
    try:
        t["nccl"] = list(torch.cuda.nccl.version())
    except Exception:
        t["nccl"] = None
    doc["torch"] = t


def main(argv):
    doc = {"python": sys.executable, "python_version": sys.version.split()[0]}
    if argv[:1] == ["--libs"]:
        doc["libraries"] = describe([p for p in argv[1:] if kind_of(p)], "ldd")
    else:
        probe_torch(doc)
        libs = describe(mapped(), "loaded")
        kinds = set(e["kind"] for e in libs)
        libs += [e for e in describe(in_site_packages(), "site-packages") if e["kind"] not in kinds]
        doc["libraries"] = libs
    sys.stdout.write(MARK + json.dumps(doc) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
