#!/usr/bin/env python3
"""The first all-reduce of a step's runs, with and without symmpin (issue 29: no stall at the
first call). Reads the apps' "TIME rank=R first_call_ms=F checks_ms=C" lines; per run the slowest
rank counts (every rank waits for it), per side the best run. Prints one line per measure and
exits 1 when a limit is given and broken.

usage: suite_first_call.py [--first-limit-ms D] [--checks-limit] NCCL_LOG... -- SYMMPIN_LOG...
  --first-limit-ms D: symmpin's first all-reduce at most D ms above NCCL's
  --checks-limit:     symmpin's whole run of checks at most 1.2 x + 1000 ms NCCL's
"""
import re
import sys

ROW = re.compile(r"^TIME rank=\d+ first_call_ms=([\d.]+) checks_ms=([\d.]+)", re.M)


def best(paths):
    first, whole = [], []
    for p in paths:
        try:
            rows = ROW.findall(open(p, errors="replace").read())
        except OSError:
            continue
        if rows:
            first.append(max(float(a) for a, _ in rows))
            whole.append(max(float(b) for _, b in rows))
    return (min(first), min(whole)) if first else (None, None)


def main(argv):
    first_limit, checks_limit = None, False
    while argv and argv[0].startswith("--") and argv[0] != "--":
        if argv[0] == "--first-limit-ms":
            first_limit = float(argv[1])
            argv = argv[2:]
        elif argv[0] == "--checks-limit":
            checks_limit = True
            argv = argv[1:]
        else:
            print(f"suite_first_call: unknown option {argv[0]}", file=sys.stderr)
            return 2
    if "--" not in argv:
        print("suite_first_call: NCCL_LOG... -- SYMMPIN_LOG...", file=sys.stderr)
        return 2
    cut = argv.index("--")
    (fa, wa), (fb, wb) = best(argv[:cut]), best(argv[cut + 1:])
    if None in (fa, fb):
        print("= first all-reduce: no TIME lines on one side")
        return 1 if (first_limit is not None or checks_limit) else 0
    ok = True
    words = ""
    if first_limit is not None:
        ok = fb <= fa + first_limit
        words = f" (limit NCCL + {first_limit:g} ms: {'ok' if ok else 'BROKEN'})"
    print(f"= first all-reduce: NCCL alone {fa:.1f} ms, with symmpin {fb:.1f} ms, "
          f"{fb - fa:+.1f} ms{words}")
    line = f"= all checks: NCCL alone {wa:.1f} ms, with symmpin {wb:.1f} ms"
    if checks_limit:
        fine = wb <= 1.2 * wa + 1000
        ok = ok and fine
        line += f" (limit 1.2 x + 1000 ms: {'ok' if fine else 'BROKEN'})"
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
