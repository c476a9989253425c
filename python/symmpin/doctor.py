"""`symmpin doctor`: whether symmpin can be active on this machine, and if not, why.

judge(facts) turns the facts of symmpin.facts into checks and one verdict; it is pure, so the tests
feed it made-up machines. Each check is {"name", "status", "summary", "details"}: status "ok",
"info" (worth knowing, changes nothing), "warn" (some communicators or results change) or "fail"
(symmpin stays out: every collective goes to NCCL). The verdict redirects only without a "fail".
One GPU that runs the kernels is a "warn", not a "fail": symmpin serves ranks sharing it, but has
nothing to speed up there (its gain needs communicators across 2 or more GPUs); the verdict
redirects and says so.
What each check says symmpin does is what the library does (docs/compatibility.md): the library
checks a GPU's code, its VMM and POSIX-fd export, P2P between every pair of a communicator's GPUs,
and NCCL's version itself, and stays on NCCL where one fails.
"""

import json

NCCL_OLDEST = (2, 18)
SHM_LOW_BYTES = 64 << 20  # a margin, not a measured need: a board is a few MiB at most
MIN_CC = 80  # kernels/select.h: SYMMPIN_KERNEL_MIN_CC
TRUE_WORDS = ("1", "yes", "on", "true")
REDIRECT_LINE = ("will redirect all-reduces, all-gathers and reduce-scatters of communicators "
                 "within this machine")
# What a machine with one usable GPU gets: symmpin is active, but speeds up nothing.
NOTHING_TO_GAIN = ("nothing to speed up between GPUs: ranks sharing it are served, but gain "
                   "nothing (they take turns on it)")


def check(name, status, summary, **details):
    return {"name": name, "status": status, "summary": summary, "details": details}


def code_for(cc, archs):
    """The GPU code of `archs` (meson's list) a GPU of compute capability cc (x10: 90) runs, or
    None. Native code for X.y runs on X.z with z >= y; PTX for XY is compiled by the driver for
    any GPU of XY or newer."""
    if cc < MIN_CC:
        return None
    native = [a for a in archs if a.startswith("sm_") and a[3:].isdigit()
              and int(a[3:]) // 10 == cc // 10 and int(a[3:]) % 10 <= cc % 10]
    if native:
        return max(native, key=lambda a: int(a[3:]))
    ptx = [a for a in archs if a.startswith("compute_") and a[8:].isdigit() and int(a[8:]) <= cc]
    if ptx:
        return max(ptx, key=lambda a: int(a[8:])) + " PTX (compiled by the driver at first use)"
    return None


def judge_library(lib):
    if not lib["path"]:
        return check("library", "fail", f"the library cannot be found: {lib['error']}")
    if not lib["preload_ok"]:
        first = (lib["preload_output"] or "").splitlines()[:1] or [""]
        return check("library", "fail", f"{lib['path']} cannot be preloaded here: {first[0]}",
                     path=lib["path"], output=lib["preload_output"])
    return check("library", "ok", f"{lib['path']} loads here (preloaded under `true`: no output, "
                 "exit 0)", path=lib["path"])


def _version_text(v):
    return ".".join(str(x) for x in v) if v else "version unknown"


def judge_target(t):
    """The CUDA runtime and NCCL of the Python environment or program asked about."""
    libs = t.get("libraries") or []
    cudarts = [e for e in libs if e.get("kind") == "cudart"]
    ncclss = [e for e in libs if e.get("kind") == "nccl"]
    torch = t.get("torch") or {}
    nccl_v = torch.get("nccl") or next((e["version"] for e in ncclss if e.get("version")), None)
    parts, status, why = [], "ok", None
    if cudarts:
        parts.append("CUDA runtime " + ", ".join(
            f"{_version_text(e.get('version'))} ({e['path']})" for e in cudarts))
        # symmpin carries no runtime: the program keeps its own, of any major version.
    else:
        parts.append("no CUDA runtime found")
    if ncclss or nccl_v:
        where = ", ".join(e["path"] for e in ncclss) or "PyTorch's"
        parts.append(f"NCCL {_version_text(nccl_v)} ({where})")
        if nccl_v and (nccl_v[0] != NCCL_OLDEST[0] or tuple(nccl_v[:2]) < NCCL_OLDEST):
            status = "fail"
            why = (f"NCCL {_version_text(nccl_v)}: symmpin takes NCCL 2.x from "
                   f"{NCCL_OLDEST[0]}.{NCCL_OLDEST[1]} (docs/compatibility.md)")
    else:
        parts.append("no NCCL found")
        if t.get("how") == "python":
            status, why = "fail", (f"{t['target']} has no NCCL (neither PyTorch's nor a pip "
                                   "wheel's): no communicator for symmpin to take")
        elif status == "ok":
            status = "warn"
    if torch.get("version"):
        parts.append(f"PyTorch {torch['version']} (CUDA {torch.get('cuda')})")
    if torch.get("error"):
        parts.append(f"PyTorch fails to import: {torch['error']}")
    if t.get("note"):
        parts.append(t["note"])
        if status == "ok" and t.get("how") == "unknown":
            status = "warn"
    summary = f"{t.get('target')}: " + "; ".join(parts)
    return check("runtime", status, summary, why=why, target=t)


def judge_driver(drv):
    """The driver as libsymmpin opens it (driver/cu.h): CUDA 12.0 (r525) or newer, with
    cuGetProcAddress_v2 giving every function symmpin uses at the CUDA 12.0 ABI."""
    if not drv["loaded"] or drv["version"] is None:
        return check("driver", "fail", f"no usable NVIDIA driver: {drv['error']}",
                     why="there is no usable NVIDIA driver (libcuda.so.1)", **drv)
    v = drv["version"]
    text = f"supports CUDA {v // 1000}.{(v % 1000) // 10}"
    if drv["kernel_module"]:
        text += f" ({drv['kernel_module']})"
    if v < 12000:
        return check("driver", "fail", f"{text}; symmpin needs CUDA 12.0 or newer (a driver r525 "
                     "or newer)", why="the driver is older than CUDA 12.0 (r525)", **drv)
    if not drv.get("get_proc_address"):
        return check("driver", "fail", f"{text}, but has no cuGetProcAddress_v2",
                     why="the driver has no cuGetProcAddress_v2", **drv)
    if drv["functions_missing"]:
        return check("driver", "fail", f"{text}, but does not give "
                     f"{', '.join(drv['functions_missing'])} at the CUDA 12.0 ABI",
                     why="the driver lacks functions symmpin needs", **drv)
    if drv["error"]:
        return check("driver", "fail", f"{text}, but {drv['error']}",
                     why=f"the driver fails: {drv['error']}", **drv)
    return check("driver", "ok", f"{text}: symmpin can act (it uses the driver at the CUDA 12.0 "
                 "ABI, no CUDA runtime of its own)", **drv)


def _gpu_head(g):
    return f"GPU {g['index']}: {g.get('name', '?')}"


def judge_gpus(gpus, archs, driver_ok):
    """Each GPU's architecture against the kernels' code; (check, GPUs that have code)."""
    if not driver_ok:  # the driver's own check fails; this one adds nothing to the verdict
        return check("gpus", "info", "not read (no usable driver)", gpus=gpus), []
    lines, with_code = [], []
    for g in gpus:
        if g.get("error"):
            lines.append(f"{_gpu_head(g)}: cannot be read ({g['error']})")
            continue
        cc = g["cc"][0] * 10 + g["cc"][1]
        code = code_for(cc, archs)
        if cc < MIN_CC:
            lines.append(f"{_gpu_head(g)}, sm_{cc}: older than sm_80, the kernels' oldest")
        elif code is None:
            lines.append(f"{_gpu_head(g)}, sm_{cc}: no code for it in the kernels")
        else:
            lines.append(f"{_gpu_head(g)}, sm_{cc}: runs {code}")
            with_code.append(g["index"])
    text = f"{len(gpus)} GPU(s)" + (": " + "; ".join(lines) if lines else "")
    if not with_code:
        why = (f"0 of {len(gpus)} GPU(s) can run symmpin's kernels here" if gpus else
               "no GPU is visible here")
        return check("gpus", "fail", text, why=why, gpus=gpus), with_code
    if len(with_code) == 1:
        # Ranks sharing one GPU are served (the GPU suite runs so) but only take turns on it:
        # symmpin's gain needs communicators across 2 or more GPUs. Not a failure: symmpin is
        # active there, it has nothing to speed up.
        if len(gpus) == 1:
            where, gain = "one GPU", "this machine has one GPU"
        else:
            where = gain = f"only GPU {with_code[0]} of {len(gpus)} runs the kernels"
        return check("gpus", "warn", f"{where}, {NOTHING_TO_GAIN}; " + "; ".join(lines),
                     gain=gain, gpus=gpus), with_code
    return check("gpus", "ok" if len(with_code) == len(gpus) else "warn", text,
                 gpus=gpus), with_code


def judge_memory_export(gpus, with_code):
    """VMM and POSIX-fd export (the pools: symmem/pool.c) on the GPUs that have code; (check,
    GPUs that can hold a pool)."""
    by_index = {g["index"]: g for g in gpus}
    usable, lacking = [], []
    for i in with_code:
        g = by_index[i]
        lacks = [w for w, ok in (("VMM", g.get("vmm")), ("POSIX-fd export", g.get("posix_fd")))
                 if not ok]
        if lacks:
            lacking.append(f"GPU {i} lacks {' and '.join(lacks)}")
        else:
            usable.append(i)
    if not with_code:
        return check("memory_export", "info", "not judged (no GPU with code)"), usable
    if not usable:
        return check("memory_export", "fail", "; ".join(lacking), why="no GPU with code can "
                     "export memory as POSIX file descriptors (VMM)"), usable
    if len(usable) == 1 and lacking:
        where = f"only GPU {usable[0]} of {len(with_code)} can hold a pool"
        return check("memory_export", "warn", f"{where}, {NOTHING_TO_GAIN}; " +
                     "; ".join(lacking) + " (a communicator on it stays on NCCL)",
                     gain=where), usable
    if lacking:
        return check("memory_export", "warn", "; ".join(lacking) + " (a communicator on it stays "
                     "on NCCL)"), usable
    on = f"all {len(usable)} GPUs" if len(usable) > 1 else f"GPU {usable[0]}"
    return check("memory_export", "ok", f"VMM and POSIX-fd export on {on}"), usable


def judge_peers(peer, usable):
    """P2P both ways between every pair of usable GPUs: a communicator with a pair without it
    stays on NCCL (the agreement checks every pair)."""
    if len(usable) < 2:
        return check("peer_access", "info", "not judged (fewer than 2 usable GPUs)", pairs=peer)
    access = {(a, b): ok for a, b, ok in peer}
    pairs = [(a, b) for a in usable for b in usable if a < b]
    with_p2p = [p for p in pairs if access.get(p) and access.get((p[1], p[0]))]
    without = [p for p in pairs if p not in with_p2p]
    names = ", ".join(f"{a}-{b}" for a, b in without)
    if not with_p2p:
        return check("peer_access", "fail", f"no pair of GPUs has peer access both ways ({names})",
                     why="no pair of GPUs has peer access (P2P)", pairs=peer)
    if without:
        return check("peer_access", "warn", f"{len(with_p2p)} of {len(pairs)} pairs have peer "
                     f"access; without: {names} (a communicator spanning one of these stays on "
                     "NCCL)", pairs=peer)
    return check("peer_access", "ok", f"every pair of the {len(usable)} GPUs has peer access",
                 pairs=peer)


def judge_shm(shm):
    if not shm["exists"] or not shm["writable"]:
        state = "missing" if not shm["exists"] else "not writable"
        return check("shm", "fail", f"{shm['path']} is {state}: the ranks' board cannot be made",
                     why=f"{shm['path']} is {state}", **shm)
    free = shm["free_bytes"]
    text = f"{shm['path']}: {free / (1 << 20):.0f} MiB free" if free is not None else \
        f"{shm['path']}: free space unknown"
    if free is not None and free < SHM_LOW_BYTES:
        return check("shm", "warn", text + " (little: a communicator whose board does not fit "
                     "stays on NCCL)", **shm)
    return check("shm", "ok", text, **shm)


def _is_true(v):
    return v.strip().lower() in TRUE_WORDS


def judge_settings(env, mig):
    """The variables and modes that keep symmpin out or change what it does."""
    w, out = env["watched"], []
    if _is_true(w.get("SYMMPIN_DISABLE", "0")):
        out.append(check("SYMMPIN_DISABLE", "fail", "SYMMPIN_DISABLE is set: pure pass-through",
                         why="SYMMPIN_DISABLE is set"))
    if mig["mig_lines"] or mig["visible_mig"]:
        out.append(check("mig", "fail", "MIG is on (" + ("; ".join(mig["mig_lines"][:2]) or
                         "CUDA_VISIBLE_DEVICES names MIG instances") + "): not supported "
                         "(docs/compatibility.md)", why="MIG is on", **mig))
    elif mig["smi"] is None:
        out.append(check("mig", "info", "not checked (no nvidia-smi here)", **mig))
    p2p = {k: w[k] for k in ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL") if k in w}
    if p2p:
        out.append(check("nccl_p2p", "info", " ".join(f"{k}={v}" for k, v in p2p.items()) +
                         ": symmpin does not read it; its kernels still use peer access, and "
                         "SYMMPIN_CHOOSE=measure times them against this NCCL", values=p2p))
    mc = {k: w[k] for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                            "NVSHMEM_DISABLE_NVLS") if k in w}
    if mc:
        out.append(check("multicast", "info", " ".join(f"{k}={v}" for k, v in mc.items()) +
                         ": symmpin never uses multicast; these change NCCL's and PyTorch's "
                         "choices only", values=mc))
    for k in ("CUDA_VISIBLE_DEVICES", "LD_PRELOAD"):
        if k in w:
            out.append(check(k, "info", f"{k}={w[k]}", value=w[k]))
    if env["symmpin_other"]:
        out.append(check("symmpin_settings", "info", " ".join(
            f"{k}={v}" for k, v in sorted(env["symmpin_other"].items())) +
            ": they change what symmpin does (docs/config.md)", values=env["symmpin_other"]))
    return out


def judge(facts):
    """(checks, verdict) for the facts of symmpin.facts.gather."""
    b = facts["symmpin"]
    lib = judge_library(facts["library"])
    drv = judge_driver(facts["driver"])
    gpus, with_code = judge_gpus(facts["gpus"], b["kernel_archs"], drv["status"] == "ok")
    export, usable = judge_memory_export(facts["gpus"], with_code)
    checks = [lib, drv, gpus, export, judge_peers(facts["peer"], usable),
              judge_target(facts["target"]), judge_shm(facts["shm"])]
    checks += judge_settings(facts["env"], facts["mig"])
    fails = [c for c in checks if c["status"] == "fail"]
    if fails:
        reasons = [c["details"].get("why") or c["summary"] for c in fails]
        reasons = [r for r in reasons if r]
        verdict = {"redirect": False, "line": "will stay on NCCL because " + "; ".join(reasons)}
    else:
        # Active, but with one usable GPU there is nothing to gain: the line says so (a "warn").
        gain = next((c["details"]["gain"] for c in checks if c["details"].get("gain")), None)
        line = REDIRECT_LINE + (f", but {gain}: nothing to speed up (ranks sharing it take turns "
                                "on it)" if gain else "")
        verdict = {"redirect": True, "line": line}
    return checks, verdict


def document(facts, checks, verdict):
    return {"symmpin": facts["symmpin"], "checks": checks, "verdict": verdict}


def text_lines(facts, checks, verdict):
    b = facts["symmpin"]
    out = [f"symmpin {b['version']} (git {b['git']}); kernels: {' '.join(b['kernel_archs'])}"]
    for c in checks:
        out.append(f"{c['status'].upper():<5} {c['name']}: {c['summary']}")
    out.append(f"verdict: symmpin {verdict['line']}")
    return out


def report(facts, as_json, out):
    """Print the report; the exit status: 0 only where the verdict redirects."""
    checks, verdict = judge(facts)
    if as_json:
        json.dump(document(facts, checks, verdict), out, indent=2)
        out.write("\n")
    else:
        out.write("\n".join(text_lines(facts, checks, verdict)) + "\n")
    return 0 if verdict["redirect"] else 1
