#!/usr/bin/env python3
"""Compare two runs of tests/apps/tp_decode.py, one without symmpin and one with it.

    scripts/tp_decode_compare.py NCCL_OUTPUT SYMMPIN_OUTPUT

Checks that every TPD-DIGEST line is the same in both (bitwise identical outputs, every rank,
every configuration and mode) and prints, per configuration and mode:
- the time per step without and with symmpin, and their ratio;
- the time per all-reduce (a graph of the step's all-reduces alone) both ways, and their ratio;
- the share of the step that is communication (1 - compute / step, without symmpin);
- the saving the faster calls should bring (calls per step x the per-call difference) and the
  share of it the step realised (issue 11 asks for at least 80%).
Exit status: 0 when the digests match and both runs printed the same set of lines; 1 otherwise.
"""
import math
import re
import sys

FIELD = re.compile(r"(\w+)=(\S+)")


def parse(path):
    digests, times, skips = set(), {}, {}
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("TPD-DIGEST "):
                digests.add(line.strip())
            elif line.startswith("TPD-TIME "):
                kv = dict(FIELD.findall(line))
                times[(int(kv["hidden"]), int(kv["tokens"]), kv["mode"])] = kv
            elif line.startswith("TPD-SKIP "):
                kv = dict(FIELD.findall(line))
                skips[(int(kv["hidden"]), int(kv["tokens"]), kv["mode"])] = line.strip()
    return digests, times, skips


def num(kv, k):
    try:
        return float(kv[k])
    except (KeyError, ValueError):
        return math.nan


def fmt(x, spec=".2f"):
    return "-" if math.isnan(x) else format(x, spec)


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    d0, t0, s0 = parse(argv[1])
    d1, t1, s1 = parse(argv[2])
    ok = True
    if not d0 or d0 != d1:
        ok = False
        print(f"tp_decode: DIGESTS DIFFER or missing: {len(d0 - d1)} line(s) only without symmpin, "
              f"{len(d1 - d0)} only with")
        for line in sorted(d0 ^ d1)[:12]:
            print("   ", line)
    else:
        print(f"tp_decode: {len(d0)} output digest(s) identical with and without symmpin")
    if set(t0) != set(t1):
        ok = False
        print("tp_decode: the runs timed different configurations")
    print(f"{'hidden':>6} {'tok':>4} {'mode':<8} {'step nccl':>10} {'symmpin':>9} {'ratio':>6} "
          f"{'ar nccl':>8} {'symmpin':>8} {'ratio':>6} {'comm%':>6} {'expect':>8} {'got':>8} "
          f"{'real%':>6}")
    for key in sorted(set(t0) & set(t1)):
        a, b = t0[key], t1[key]
        step0, step1 = num(a, "step_us"), num(b, "step_us")
        ar0, ar1 = num(a, "allreduce_us"), num(b, "allreduce_us")
        if key[2] == "compile" and math.isnan(ar0):  # the graph mode's per-call numbers apply
            g = (key[0], key[1], "graph")
            if g in t0 and g in t1:
                ar0, ar1 = num(t0[g], "allreduce_us"), num(t1[g], "allreduce_us")
        calls = num(a, "calls")
        comm = 1.0 - num(a, "compute_us") / step0 if step0 > 0 else math.nan
        expect = calls * (ar0 - ar1)
        got = step0 - step1
        real = 100.0 * got / expect if expect > 0 else math.nan
        print(f"{key[0]:>6} {key[1]:>4} {key[2]:<8} {fmt(step0):>10} {fmt(step1):>9} "
              f"{fmt(step1 / step0 if step0 else math.nan):>6} {fmt(ar0):>8} {fmt(ar1):>8} "
              f"{fmt(ar1 / ar0 if ar0 else math.nan):>6} {fmt(100 * comm, '.0f'):>6} "
              f"{fmt(expect):>8} {fmt(got):>8} {fmt(real, '.0f'):>6}")
    for key in sorted(set(s0) | set(s1)):
        print("skipped:", (s1.get(key) or s0.get(key)))
    print("columns: us per step and per all-reduce, without symmpin (nccl) and with; comm% = share "
          "of the step that is communication without symmpin; expect = calls per step x per-call "
          "saving, got = the step's saving (us), real% = got / expect")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
