#!/usr/bin/env python3
"""The GPU suite's checks on what symmpin wrote: its statistics (SYMMPIN_STATS_FILE, JSON, one
file per process) and its traces (SYMMPIN_TRACE, docs/trace-format.md).

  suite_stats.py redirected [--nranks N] [--count K] [--want positive|zero] [--same]
                            [--coll allreduce|allgather|reducescatter] FILE...
      per communicator of N ranks (default: every one) in each file: the calls redirected and
      sent to NCCL; --count: exactly K such communicators must be there; --want positive (the
      default): every one redirected some calls; zero: none did (and NCCL's reason names the
      communicator, "comm"); some: at least one did; --same: every one redirected as many calls;
      --coll: that collective's sites only (statistics without "coll" hold all-reduces).
  suite_stats.py captured FILE...
      symmpin-trust --scenario graphs: the captured calls (the shapes only the graphs use) are
      all redirected, 7 per rank, none to NCCL.
  suite_stats.py group-simulate LOG TRACE...
      symmpin-app --group-simulate: on each rank, the calls of the iteration after the simulated
      group (LOG's GROUPSIM line: its call number) are redirected at least as often as those of
      the iteration before it, and some are (a library that held the later calls back, or lost
      the group's end, fails here or in the app's own checks).
  suite_stats.py inflight TRACE...
      symmpin-life: in rank 0's trace, the last all-reduce on its communicator before its first
      ncclCommRevoke or ncclCommShrink of it (the one in flight, waiting for its peer) ran on
      symmpin's kernel (path=1), so what the call had to stop was symmpin's.
Prints "= " lines (the suite shows them); exit status 0 when the check holds, 1 when it fails,
2 on bad usage.
"""
import argparse
import json
import re
import sys


def comms_of(path):
    with open(path) as f:
        return json.load(f).get("comms", [])


def cmd_redirected(a):
    rows = []
    for path in a.files:
        for c in comms_of(path):
            if a.nranks and c["nranks"] != a.nranks:
                continue
            sites = [s for s in c["sites"]
                     if not a.coll or s.get("coll", "allreduce") == a.coll]
            red = sum(s.get("redirected", 0) for s in sites)
            nccl = sum(s.get("nccl", 0) for s in sites)
            if red + nccl == 0:  # a communicator that made no all-reduce (a parent of splits)
                continue
            comm_reason = sum(s.get("reasons", {}).get("comm", 0) for s in sites)
            rows.append((path, c["rank"], c["nranks"], red, nccl, comm_reason))
    for path, rank, n, red, nccl, why in rows:
        what = f"{a.coll} " if a.coll else ""
        print(f"= rank {rank}/{n} ({path.rsplit('/', 1)[-1]}): {what}redirected {red}, NCCL {nccl}"
              f" (communicator not eligible: {why})")
    ok = bool(rows)
    if a.count is not None and len(rows) != a.count:
        print(f"= {len(rows)} communicator(s) of {a.nranks or 'any number of'} ranks, expected {a.count}")
        ok = False
    if a.want == "positive":
        ok = ok and all(r[3] > 0 for r in rows)
    elif a.want == "some":
        ok = ok and any(r[3] > 0 for r in rows)
    else:
        ok = ok and all(r[3] == 0 and r[5] > 0 for r in rows)
    if a.same and len({r[3] for r in rows}) > 1:
        print("= the ranks redirected different numbers of calls")
        ok = False
    return 0 if ok else 1


GRAPH_COUNTS = {3000, 20000, 100000}  # the shapes only the graphs use (trust_app.c gshapes)


def cmd_captured(a):
    captured, arena = {}, {}
    for path in a.files:
        for c in comms_of(path):
            g = [s for s in c["sites"] if s["count"] in GRAPH_COUNTS]
            captured[c["rank"]] = (sum(s["redirected"] for s in g), sum(s["nccl"] for s in g))
            arena[c["rank"]] = {k: v for k, v in c.get("pool", {}).items() if k.startswith("capture")}
    print("= captured calls per rank (redirected, nccl):", captured)
    print("= capture arena per rank:", arena)
    return 0 if captured and all(r == 7 and n == 0 for r, n in captured.values()) else 1


def trace_allreduces(path):
    """(rank, [path of each ncclAllReduce on communicator 0, in order])."""
    rank, paths = None, []
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("#rank="):
                rank = int(line.split("=", 1)[1])
            elif not line.startswith("#"):
                parts = line.split()
                if len(parts) > 4 and parts[3] == "ncclAllReduce":
                    kv = dict(p.split("=", 1) for p in parts[4:] if "=" in p)
                    if kv.get("comm") == "0":
                        paths.append(int(kv.get("path", "0")))
    return rank, paths


def cmd_group_simulate(a):
    text = open(a.log, errors="replace").read()
    m = re.search(r"ops/iter=(\d+)", text)
    calls = {int(r): int(n) for r, n in re.findall(r"^GROUPSIM rank=(\d+) call=(\d+)", text, re.M)}
    if not m or not calls:
        print("= the log has no ops/iter or GROUPSIM line")
        return 1
    per_iter, ok, seen = int(m[1]), True, set()
    for path in a.traces:
        rank, paths = trace_allreduces(path)
        if rank not in calls:
            continue
        seen.add(rank)
        n = calls[rank]  # 1-based: the simulated group's call
        before = paths[max(0, n - 1 - per_iter):n - 1]
        after = paths[n:n + per_iter]
        b, f = sum(before), sum(after)
        print(f"= rank {rank}: the simulated group is call {n} of {len(paths)}; redirected in the "
              f"{len(before)} calls before it {b}, in the {len(after)} after it {f}")
        ok = ok and len(after) == per_iter and b > 0 and f >= b
    if seen != set(calls):
        print(f"= no trace for rank(s) {sorted(set(calls) - seen)}")
        ok = False
    return 0 if ok else 1


LIFE_CALLS = ("ncclCommRevoke", "ncclCommShrink")


def cmd_inflight(a):
    found = False
    for path in a.traces:
        rank, paths, stop = None, [], None
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("#rank="):
                    rank = int(line.split("=", 1)[1])
                    continue
                parts = line.split()
                if line.startswith("#") or len(parts) < 5 or stop:
                    continue
                kv = dict(p.split("=", 1) for p in parts[4:] if "=" in p)
                if parts[3] == "ncclAllReduce" and kv.get("comm") == "0":
                    paths.append(int(kv.get("path", "0")))
                elif parts[3] in LIFE_CALLS and "0" in (kv.get("comm"), kv.get("parent")):
                    stop = parts[3]
        if rank != 0:
            continue
        found = True
        if not stop or not paths:
            print(f"= rank 0 ({path.rsplit('/', 1)[-1]}): no {' or '.join(LIFE_CALLS)} after an "
                  "all-reduce on its communicator")
            return 1
        print(f"= rank 0: the all-reduce in flight at {stop} (call {len(paths)} on its "
              f"communicator) ran on {'symmpin' if paths[-1] == 1 else 'NCCL'}'s kernel; "
              f"{sum(paths)} of its {len(paths)} all-reduces were redirected")
        if paths[-1] != 1:
            return 1
    if not found:
        print("= no trace of rank 0")
    return 0 if found else 1


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("redirected")
    r.add_argument("--nranks", type=int, default=0)
    r.add_argument("--count", type=int)
    r.add_argument("--want", choices=("positive", "some", "zero"), default="positive")
    r.add_argument("--same", action="store_true")
    r.add_argument("--coll", choices=("allreduce", "allgather", "reducescatter"))
    r.add_argument("files", nargs="+")
    c = sub.add_parser("captured")
    c.add_argument("files", nargs="+")
    g = sub.add_parser("group-simulate")
    g.add_argument("log")
    g.add_argument("traces", nargs="+")
    i = sub.add_parser("inflight")
    i.add_argument("traces", nargs="+")
    a = p.parse_args(argv)
    try:
        return {"redirected": cmd_redirected, "captured": cmd_captured,
                "group-simulate": cmd_group_simulate, "inflight": cmd_inflight}[a.cmd](a)
    except (OSError, ValueError, KeyError) as e:
        print(f"= cannot read the statistics: {type(e).__name__}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
