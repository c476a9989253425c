"""Whether the dynamic loader can preload the library here.

A library the loader cannot preload (a missing dependency, a build for another machine) is only a
warning to the loader: the program then runs without symmpin, exit status unchanged. So the test
is a tiny program started with the preload: it must print nothing and exit 0. The user's
SYMMPIN_* settings are left out of the test's environment (SYMMPIN_DEBUG=INFO alone would print a
line), and so is their LD_PRELOAD (another library's failure is not ours).
"""

import os
import shutil
import subprocess

PROBE_TIMEOUT_S = 30


def probe_env(lib, env=None):
    env = dict(os.environ if env is None else env)
    for k in [k for k in env if k.startswith("SYMMPIN_")]:
        del env[k]
    env["LD_PRELOAD"] = str(lib)
    return env


def preload_check(lib, program=None, env=None):
    """(True, '') when `program` (default: `true`) runs under LD_PRELOAD=lib silently with exit 0,
    else (False, the first lines it printed or why it failed)."""
    if program is None:
        true = shutil.which("true") or "/bin/true"
        program = [true]
    try:
        r = subprocess.run(program, env=probe_env(lib, env), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"{program[0]} could not be run under the preload: {e}"
    out = r.stdout.decode("utf-8", "replace").strip()
    if r.returncode != 0:
        what = f"{program[0]} exited with {r.returncode} under the preload"
        return False, what + (f": {out}" if out else "")
    if out:
        return False, out
    return True, ""
