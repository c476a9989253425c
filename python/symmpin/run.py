"""`symmpin run -- COMMAND`: COMMAND (any launcher: torchrun, mpirun, ...) with the library
preloaded, its exit status passed on, and at the end one summary merged from the statistics every
rank wrote (symmpin.summary). The statistics go to a temporary folder that is removed afterwards,
so a run leaves no file behind; a run in which no rank wrote statistics (no communicator) prints
nothing of symmpin's.

Where the library cannot be preloaded, COMMAND runs without it (all on NCCL, exactly as without
symmpin), said in one line; with require that is an error (exit 2).
"""

import glob
import os
import shutil
import signal
import subprocess
import tempfile

from . import loadcheck, locate, summary

# Signals a terminal sends to the whole foreground group: the program gets them itself, and
# symmpin outlives them to print the summary. Others sent to symmpin alone are passed on.
IGNORED_WHILE_RUNNING = (signal.SIGINT, signal.SIGQUIT)
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def spawn(command, env, err):
    """Run command; its exit status (128 + N for signal N, 127/126 where it cannot start)."""
    try:
        p = subprocess.Popen(command, env=env)
    except OSError as e:
        err.write(f"symmpin: cannot run '{command[0]}': {e.strerror}\n")
        return 127 if isinstance(e, FileNotFoundError) else 126
    saved = {}
    try:
        for s in IGNORED_WHILE_RUNNING:
            saved[s] = signal.signal(s, signal.SIG_IGN)
        for s in FORWARDED:
            saved[s] = signal.signal(s, lambda sig, _frame: p.send_signal(sig))
        rc = p.wait()
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
    return 128 - rc if rc < 0 else rc


def preload_env(env, lib, stats_dir, stats):
    env = dict(env)
    env["SYMMPIN_STATS_FILE"] = os.path.join(stats_dir, "stats.%h.%p.json")
    env.setdefault("SYMMPIN_MEASURE", "1")
    if stats:
        env["SYMMPIN_STATS"] = "1"
    env["LD_PRELOAD"] = str(lib) + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    return env


def run(command, stats, require, env, out, err):
    lib, why = locate.library(env)
    if lib is None:
        err.write(f"symmpin: {why}\n")
        return 2
    ok, msg = loadcheck.preload_check(lib, env=env)
    if not ok:
        if require:
            err.write(f"symmpin: {lib} cannot be preloaded here:\n")
            err.write("".join(f"  {line}\n" for line in msg.splitlines()))
            return 2
        first = (msg.splitlines() or [""])[0][:160]
        err.write(f"symmpin: {lib} cannot be preloaded here ({first}); running without symmpin: "
                  "every collective goes to NCCL\n")
        return spawn(command, env, err)
    stats_dir = tempfile.mkdtemp(prefix="symmpin-run.")
    try:
        rc = spawn(command, preload_env(env, lib, stats_dir, stats), err)
        docs, warnings = summary.read(sorted(glob.glob(os.path.join(stats_dir, "stats.*.json"))))
        for w in warnings:
            err.write(w + "\n")
        lines = summary.lines(summary.merge(docs))
        if lines:
            out.write("\n".join(lines) + "\n")
            out.flush()
    finally:
        shutil.rmtree(stats_dir, ignore_errors=True)
    return rc
