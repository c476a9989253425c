"""What `symmpin doctor` looks at, gathered into one plain dict (doctor.judge reads it).

Each gatherer takes what it touches as an argument (the driver loader, the library path, the
environment, the paths), so the tests run them over FAKE drivers and made-up files.
"""

import os
import shutil
import subprocess

from . import _build, cudadriver, loadcheck, locate, target

# Variables reported as they are (doctor.judge_settings says what each does to symmpin).
WATCHED_ENV = ("SYMMPIN_DISABLE", "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_NVLS_ENABLE",
               "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "CUDA_VISIBLE_DEVICES",
               "LD_PRELOAD", "SYMMPIN_LIB")


def build_facts():
    return {"version": _build.VERSION, "git": _build.GIT, "layout": _build.LAYOUT,
            "kernel_archs": list(_build.KERNEL_ARCHS)}


def library_facts(env=None):
    lib, why = locate.library(env)
    if lib is None:
        return {"path": None, "error": why, "preload_ok": False, "preload_output": ""}
    ok, out = loadcheck.preload_check(lib, env=env)
    return {"path": str(lib), "error": None, "preload_ok": ok, "preload_output": out}


def _kernel_module_version(path="/proc/driver/nvidia/version"):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline().strip() or None
    except OSError:
        return None


def driver_facts(load=cudadriver.Driver.load):
    """{"driver": ..., "gpus": [...], "peer": [[a, b, bool], ...]} from the driver `load()` gives."""
    drv = {"loaded": False, "error": None, "version": None,
           "kernel_module": _kernel_module_version(), "get_proc_address": False,
           "functions_missing": []}
    out = {"driver": drv, "gpus": [], "peer": []}
    try:
        d = load()
        drv["loaded"] = True
        drv["version"] = d.version()
        drv["get_proc_address"] = d.has_get_proc_address()
        if drv["version"] < cudadriver.CU_ABI or not drv["get_proc_address"]:
            return out  # older than CUDA 12.0: symmpin asks it nothing more
        drv["functions_missing"] = [f for f in cudadriver.CU_FUNCTIONS if not d.has_function(f)]
        d.init()
        n = d.device_count()
    except cudadriver.DriverError as e:
        drv["error"] = str(e)
        return out
    for i in range(n):
        g = {"index": i}
        try:
            g["name"] = d.name(i)
            g["cc"] = [d.attribute(cudadriver.ATTR_CC_MAJOR, i),
                       d.attribute(cudadriver.ATTR_CC_MINOR, i)]
            g["vmm"] = d.attribute(cudadriver.ATTR_VMM, i) != 0
            g["posix_fd"] = d.attribute(cudadriver.ATTR_POSIX_FD, i) != 0
            g["multicast"] = d.attribute(cudadriver.ATTR_MULTICAST, i) != 0
        except cudadriver.DriverError as e:
            g["error"] = str(e)
        out["gpus"].append(g)
    for a in range(n):
        for b in range(n):
            if a != b:
                try:
                    out["peer"].append([a, b, d.can_access_peer(a, b)])
                except cudadriver.DriverError:
                    out["peer"].append([a, b, None])
    return out


def shm_facts(path="/dev/shm"):
    f = {"path": path, "exists": os.path.isdir(path), "writable": False, "free_bytes": None}
    if f["exists"]:
        f["writable"] = os.access(path, os.W_OK | os.X_OK)
        try:
            st = os.statvfs(path)
            f["free_bytes"] = st.f_bavail * st.f_frsize
        except OSError:
            pass
    return f


def mig_facts(env=None, smi=None):
    """MIG as nvidia-smi -L lists it (its "MIG ..." lines), and MIG- names in CUDA_VISIBLE_DEVICES."""
    env = os.environ if env is None else env
    f = {"smi": None, "mig_lines": [],
         "visible_mig": "MIG-" in env.get("CUDA_VISIBLE_DEVICES", "")}
    smi = smi or shutil.which("nvidia-smi")
    if not smi:
        return f
    try:
        r = subprocess.run([smi, "-L"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return f
    f["smi"] = smi
    f["mig_lines"] = [ln.strip() for ln in r.stdout.decode("utf-8", "replace").splitlines()
                      if "MIG" in ln]
    return f


def env_facts(env=None):
    env = os.environ if env is None else env
    watched = {k: env[k] for k in WATCHED_ENV if k in env}
    other = {k: v for k, v in env.items() if k.startswith("SYMMPIN_") and k not in watched}
    return {"watched": watched, "symmpin_other": other}


def gather(python="python3", command=None, env=None):
    """Every fact about this machine, for the Python `python` or the program `command`."""
    facts = {"symmpin": build_facts(), "library": library_facts(env),
             "target": target.command_target(command) if command else
             target.python_target(python),
             "shm": shm_facts(), "mig": mig_facts(env), "env": env_facts(env)}
    facts.update(driver_facts())
    return facts
