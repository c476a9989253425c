"""The `symmpin` command: run, replay, bench, doctor, version.

One program for every install: pip's console script, `python -m symmpin`, and the small launcher
meson puts in bin/ (and build/tools/) call main(). replay and bench hand every argument to their
tools unchanged (symmpin-replay, symmpin-bench), so their options live in one place.
Exit statuses: 2 for a usage error; otherwise the command's own (run: the program's).
"""

import argparse
import os
import sys

from . import _build, doctor, facts, loadcheck, locate, run as run_mod

PROG = "symmpin"
USAGE = f"""\
usage: symmpin run [--stats] [--require] [--] COMMAND [ARGS...]
       symmpin doctor [--json] [--python PYTHON | -- COMMAND [ARGS...]]
       symmpin replay [OPTIONS] TRACE...      (symmpin-replay: the plan every rank would make)
       symmpin bench [OPTIONS]                (symmpin-bench: NCCL against symmpin, on GPUs)
       symmpin version
       symmpin --help

run: preloads libsymmpin.so under COMMAND (any launcher: torchrun, mpirun, ...), passes its exit
status on, and prints one summary merged from every rank of every communicator: calls of each
collective redirected to symmpin vs left to NCCL (with the reasons), the time saved where it was
measured (SYMMPIN_MEASURE, on unless set), symmetric-pool bytes and the busiest sites; nothing
when no communicator was made. --stats also prints the full per-site tables of every rank. SYMMPIN_*
variables (docs/config.md) apply as usual, but run sets SYMMPIN_STATS_FILE itself (to a temporary
folder it reads and removes). Where the library cannot be preloaded (a process without the CUDA
runtime it needs, say: docs/compatibility.md), run says so in one line and runs COMMAND without
symmpin, all on NCCL; --require makes that an error (exit 2).
doctor: whether symmpin can be active here, and why not; exit 0 only where it can.
version: exit 0 only where the library is found and can be preloaded.
"""


class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem and exit status 2."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def _strip_dashes(rest):
    return rest[1:] if rest[:1] == ["--"] else rest


def cmd_run(args):
    p = Parser(prog="symmpin run", add_help=True)
    p.add_argument("--stats", action="store_true", help="also every rank's per-site tables")
    p.add_argument("--require", action="store_true",
                   help="exit 2 where the library cannot be preloaded (default: run without it)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the program and its arguments")
    a = p.parse_args(args)
    command = _strip_dashes(a.command)
    if not command:
        raise UsageError("symmpin run: no COMMAND given")
    return run_mod.run(command, a.stats, a.require, dict(os.environ), sys.stdout, sys.stderr)


def cmd_doctor(args):
    p = Parser(prog="symmpin doctor")
    p.add_argument("--json", action="store_true", help="one JSON document with every check")
    p.add_argument("--python", help="the Python whose CUDA runtime and NCCL to check "
                   "(default: python3 on PATH)")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="-- COMMAND: check what this program loads instead of a Python")
    a = p.parse_args(args)
    command = _strip_dashes(a.command)
    if a.command and not command:
        raise UsageError("symmpin doctor: no COMMAND after --")
    if command and a.python:
        raise UsageError("symmpin doctor: give --python or -- COMMAND, not both")
    found = facts.gather(python=a.python or "python3", command=command or None)
    return doctor.report(found, a.json, sys.stdout)


def cmd_version(args):
    Parser(prog="symmpin version").parse_args(args)
    print(f"symmpin {_build.VERSION} (git {_build.GIT})")
    print(f"kernels: {' '.join(_build.KERNEL_ARCHS)}")
    lib, why = locate.library()
    if lib is None:
        print(f"library: not found: {why}")
        return 1
    ok, msg = loadcheck.preload_check(lib)
    if not ok:
        print(f"library: {lib} (cannot be preloaded here: {(msg.splitlines() or [''])[0]})")
        return 1
    print(f"library: {lib}")
    return 0


def _exec_tool(name, args, missing):
    tool = locate.tool(name)
    if tool is None:
        sys.stderr.write(f"symmpin: {missing}\n")
        return 2
    sys.stdout.flush()
    os.execv(str(tool), [str(tool), *args])


def cmd_replay(args):
    return _exec_tool("symmpin-replay", args, "cannot find symmpin-replay (this install lacks it)")


def cmd_bench(args):
    if _build.LAYOUT == "wheel":
        why = ("symmpin-bench is not part of the pip package: it links NCCL, which the wheel does "
               "not bundle; build symmpin from source for it (README, 'From source')")
    else:
        why = "cannot find symmpin-bench (this install lacks it)"
    return _exec_tool("symmpin-bench", args, why)


COMMANDS = {"run": cmd_run, "doctor": cmd_doctor, "replay": cmd_replay, "bench": cmd_bench,
            "version": cmd_version}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        sys.stderr.write(USAGE)
        return 2
    name, rest = argv[0], argv[1:]
    if name in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0
    if name == "--version":
        name = "version"
    try:
        if name not in COMMANDS:
            raise UsageError(f"symmpin: unknown command '{name}'")
        return COMMANDS[name](rest)
    except UsageError as e:
        sys.stderr.write(f"{e}\nTry 'symmpin --help' for more information.\n")
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
