"""Which CUDA runtime and NCCL a program would use, for `symmpin doctor`: a Python environment
(`--python PATH`: _probe.py run by that Python) or a program (`-- CMD`: `ldd` of an ELF binary; a
script whose #! line names a Python is probed as that Python; another script cannot be told).

Every function returns a plain dict (the facts doctor.judge_target reads):
  {"target": what was asked, "how": "python" | "ldd" | "unknown",
   "libraries": [{"kind": "cudart"|"nccl", "path", "version": [..] or None, "how"}],
   "torch": {...} or None (python only), "note": a sentence where the answer is partial}
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).resolve().parent / "_probe.py"
MARK = "SYMMPIN-PROBE "
# Importing PyTorch and initialising CUDA can take tens of seconds on a cold file cache.
PROBE_TIMEOUT_S = 240


def parse_probe_output(text):
    """The probe's JSON object from its stdout (the last marked line), or None."""
    doc = None
    for line in text.splitlines():
        if line.startswith(MARK):
            try:
                doc = json.loads(line[len(MARK):])
            except ValueError:
                doc = None
    return doc if isinstance(doc, dict) else None


def _run_probe(python, args=()):
    try:
        r = subprocess.run([str(python), str(PROBE), *args], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{python} could not run the probe: {e}"
    doc = parse_probe_output(r.stdout.decode("utf-8", "replace"))
    if doc is None:
        tail = r.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        return None, f"{python} ran the probe without an answer (exit {r.returncode}) {tail[0]}"
    return doc, None


def python_target(python):
    """What the Python `python` (a path or a name on PATH) loads."""
    exe = shutil.which(python) if os.sep not in python else python
    if not exe or not os.path.exists(exe):
        return {"target": python, "how": "unknown", "libraries": [], "torch": None,
                "note": f"no Python '{python}' here (--python names one)"}
    doc, err = _run_probe(exe)
    if doc is None:
        return {"target": exe, "how": "unknown", "libraries": [], "torch": None, "note": err}
    return {"target": exe, "how": "python", "libraries": doc.get("libraries", []),
            "torch": doc.get("torch"), "python_version": doc.get("python_version")}


def interpreter_of(path):
    """The program named on a script's #! line (resolving `env NAME`), or None for a binary."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return ""
    if os.path.basename(words[0]) == "env":
        rest = [w for w in words[1:] if not w.startswith("-")]
        return (shutil.which(rest[0]) or rest[0]) if rest else ""
    return words[0]


def parse_ldd(text):
    """The libcudart/libnccl lines of ldd's output: [(soname, path or None when 'not found')]."""
    found = []
    for line in text.splitlines():
        parts = line.strip().split()
        if not parts or not (parts[0].startswith("libcudart.so") or
                             parts[0].startswith("libnccl.so")):
            continue
        path = parts[2] if len(parts) > 2 and parts[1] == "=>" and parts[2].startswith("/") else None
        found.append((parts[0], path))
    return found


def command_target(cmd):
    """What the program `cmd[0]` loads."""
    exe = shutil.which(cmd[0])
    if not exe:
        return {"target": cmd[0], "how": "unknown", "libraries": [], "torch": None,
                "note": f"'{cmd[0]}' is not a program here"}
    interp = interpreter_of(exe)
    if interp is not None:
        if "python" in os.path.basename(interp or ""):
            t = python_target(interp)
            t["note"] = (f"{exe} is a Python script: probed its Python, {interp}"
                         + (f"; {t['note']}" if t.get("note") else ""))
            return t
        return {"target": exe, "how": "unknown", "libraries": [], "torch": None,
                "note": f"{exe} is a script of {interp or 'an unnamed interpreter'}: which CUDA "
                        "runtime and NCCL it loads is decided when it runs (ldd cannot tell)"}
    try:
        r = subprocess.run(["ldd", exe], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"target": exe, "how": "unknown", "libraries": [], "torch": None,
                "note": f"ldd could not be run: {e}"}
    lines = parse_ldd(r.stdout.decode("utf-8", "replace"))
    paths = [p for _, p in lines if p]
    libs = []
    if paths:
        doc, err = _run_probe(sys.executable, ["--libs", *paths])
        libs = doc.get("libraries", []) if doc else [
            {"kind": "cudart" if "cudart" in p else "nccl", "path": p, "version": None,
             "how": "ldd", "error": err} for p in paths]
    t = {"target": exe, "how": "ldd", "libraries": libs, "torch": None}
    missing = [s for s, p in lines if not p]
    notes = []
    if missing:
        notes.append("ldd: not found: " + ", ".join(missing))
    if not any(s.startswith("libnccl") for s, _ in lines):
        notes.append("ldd lists no libnccl: the program may load NCCL with dlopen when it runs "
                     "(ldd cannot tell), or link it statically (then symmpin sees no call)")
    if notes:
        t["note"] = "; ".join(notes)
    return t
