#!/usr/bin/env python3
"""What the choice by measurement did with a program's grouped all-reduces, from symmpin's traces
(SYMMPIN_TRACE, docs/trace-format.md; one file per process) and, optionally, the program's
DP-TIME lines without and with symmpin (tests/apps/dp_groups.cu).

  check_groups.py [--expect back|stay|any] [--times NCCL_OUT SYMMPIN_OUT] [--stats JSON]...
                  TRACE...

Per rank and communicator, the groups (the all-reduces between a thread's outermost
ncclGroupStart and ncclGroupEnd) in order, and:
  - probe groups are whole: a group with a call sent to NCCL as a probe (reason 11) has no call
    that symmpin ran (docs/design.md, "Groups"); how many there were (16 where every rank
    measured the group's first shape);
  - the group from which grouped calls went back to NCCL (the first with a call of reason 13,
    group_measured), and that no later grouped call of a shape that went back ran on symmpin
    ("for good");
  - every rank routed the communicator's calls alike (the same path for the same call).
--expect back: the groups must have gone back (one GPU with one-rank communicators, where NCCL's
all-reduce is a copy); stay: they must not; any (default): either, said which.
--times: the group alone, NCCL against symmpin (group_us of DP-TIME), as a ratio.
--stats (repeatable): a statistics file (SYMMPIN_STATS_FILE); each site's calls, redirected ones
and reasons are shown (no check).
Prints "= " lines (the GPU suite shows them); exit 0 when every check holds, 1 when one fails,
2 on bad usage or unreadable files.
"""
import argparse
import json
import re
import sys

PROBE, GROUP, GROUP_MEASURED = 11, 12, 13


def parse_trace(path):
    """{(rank, comm): [group, ...]}, each group a list of (path, reason, shape), and the same
    key's paths of every all-reduce in order (for the comparison across ranks)."""
    groups, calls = {}, {}
    depth, current = {}, {}  # per thread: group depth, and the (key -> group) open in it
    rank_of_file = None
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("#rank="):
                rank_of_file = line.split("=", 1)[1].strip()
                continue
            if line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) < 4:
                continue
            tid, call = parts[2], parts[3]
            kv = dict(p.split("=", 1) for p in parts[4:] if "=" in p)
            if call in ("ncclGroupStart", "ncclGroupEnd"):
                d = int(kv.get("depth", "0"))
                if call == "ncclGroupStart" and d == 1:
                    current[tid] = {}
                if call == "ncclGroupEnd" and d == 0:
                    current.pop(tid, None)
                depth[tid] = d
                continue
            if call != "ncclAllReduce":
                continue
            key = (kv.get("rank", rank_of_file), kv.get("comm", "?"))
            route = (int(kv.get("path", "0")), int(kv.get("reason", "0")),
                     (kv.get("count"), kv.get("dtype"), kv.get("op")))
            calls.setdefault(key, []).append(route[0])
            if depth.get(tid, 0) > 0 and tid in current:
                g = current[tid].get(key)
                if g is None:
                    g = current[tid][key] = []
                    groups.setdefault(key, []).append(g)
                g.append(route)
    return groups, calls


def check_rank(key, groups, expect):
    ok = True
    probes = [i for i, g in enumerate(groups) if any(r == PROBE for _, r, _ in g)]
    split = [i for i in probes if any(p == 1 for p, _, _ in groups[i])]
    back = next((i for i, g in enumerate(groups) if any(r == GROUP_MEASURED for _, r, _ in g)),
                None)
    gone, later = set(), []
    # A group is judged by the groups before it (a plan may change in the middle of one).
    for i, g in enumerate(groups):
        if any(p == 1 and s in gone for p, _, s in g):
            later.append(i)
        gone |= {s for _, r, s in g if r == GROUP_MEASURED}
    redirected = sum(1 for g in groups if any(p == 1 for p, _, _ in g))
    large = sum(1 for g in groups for _, r, _ in g if r == GROUP)
    where = "never" if back is None else f"from group {back + 1}"
    print(f"= rank {key[0]} comm {key[1]}: {len(groups)} groups, {redirected} with calls on "
          f"symmpin, {len(probes)} probe groups, grouped calls back to NCCL {where}; "
          f"{large} grouped calls above SYMMPIN_GROUP_MAX_BYTES")
    if split:
        print(f"= rank {key[0]}: probe groups with calls on symmpin (not probed whole): "
              f"{[i + 1 for i in split[:8]]}")
        ok = False
    if later:
        print(f"= rank {key[0]}: groups with a call on symmpin of a shape that went back: "
              f"{[i + 1 for i in later[:8]]}")
        ok = False
    if expect == "back" and back is None:
        print(f"= rank {key[0]}: the groups did not go back to NCCL")
        ok = False
    if expect == "stay" and back is not None:
        print(f"= rank {key[0]}: the groups went back to NCCL")
        ok = False
    return ok, back


def group_us(path):
    with open(path, errors="replace") as f:
        m = re.findall(r"^DP-TIME .*group_us=([0-9.]+)", f.read(), re.M)
    return float(m[-1]) if m else None


def show_stats(path):
    with open(path) as f:
        for c in json.load(f).get("comms", []):
            for s in c.get("sites", []):
                reasons = " ".join(f"{k}={v}" for k, v in sorted(s.get("reasons", {}).items()))
                print(f"= rank {c['rank']} site {s['site']} count {s['count']}: {s['calls']} calls, "
                      f"{s['redirected']} redirected; {reasons}")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--expect", choices=("back", "stay", "any"), default="any")
    p.add_argument("--times", nargs=2, metavar=("NCCL_OUT", "SYMMPIN_OUT"))
    p.add_argument("--stats", action="append", default=[], metavar="JSON")
    p.add_argument("traces", nargs="+")
    a = p.parse_args(argv)
    groups, calls = {}, {}
    try:
        for path in a.traces:
            g, c = parse_trace(path)
            groups.update(g)
            calls.update(c)
        times = [group_us(x) for x in a.times] if a.times else None
        for path in a.stats:
            show_stats(path)
    except (OSError, ValueError, KeyError) as e:
        print(f"= cannot read: {e}")
        return 2
    if not groups:
        print("= no grouped all-reduce in the traces")
        return 1
    ok, backs = True, {}
    for key in sorted(groups):
        good, back = check_rank(key, groups[key], a.expect)
        ok = ok and good
        backs.setdefault(key[1], set()).add(back)
    by_comm = {}
    for (rank, comm), paths in calls.items():
        by_comm.setdefault(comm, {})[rank] = paths
    for comm, ranks in sorted(by_comm.items()):
        if len(ranks) < 2:
            continue
        first = next(iter(ranks.values()))
        n = min(len(v) for v in ranks.values())
        apart = next((i for i in range(n) if len({v[i] for v in ranks.values()}) > 1), None)
        if apart is not None:
            print(f"= comm {comm}: the ranks routed all-reduce {apart + 1} apart")
            ok = False
        elif len(backs.get(comm, {None})) > 1:
            print(f"= comm {comm}: the ranks' groups went back at different groups")
            ok = False
        else:
            print(f"= comm {comm}: {len(ranks)} ranks routed all {n} calls alike"
                  f"{'' if n == len(first) else ' (the common part)'}")
    if times:
        if None in times:
            print("= no DP-TIME group_us in one of the outputs")
            ok = False
        else:
            print(f"= the group alone: NCCL {times[0]:.2f} us, symmpin {times[1]:.2f} us "
                  f"({times[1] / times[0]:.2f} x)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
