#!/usr/bin/env python3
"""symmpin-replay on the synthetic traces of tests/traces/synthetic (see its README): runs the
binary and checks its --json answers against what the traces were built to show. Expected pool
sizes are derived from the slot sizes the tool reports (they come from the kernels' own function),
so the checks hold whichever slot function the build links.
usage: test_replay.py SYMMPIN_REPLAY TRACE_DIR"""
import json
import os
import subprocess
import sys

REPLAY, TRACES = sys.argv[1], sys.argv[2]
failures = []


def run(*args, expect_rc=0):
    p = subprocess.run([REPLAY, *args], capture_output=True, text=True, timeout=60)
    if p.returncode != expect_rc:
        raise AssertionError(f"{args}: exit {p.returncode}, expected {expect_rc}\n{p.stderr}")
    return p.stdout


def replay_json(case, *flags):
    d = os.path.join(TRACES, case)
    files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".trace"))
    doc = json.loads(run("--json", *flags, *files))
    assert len(doc["comms"]) == 1, doc["comms"]
    return doc, doc["comms"][0]


def sites(comm):
    return {s["site"][-2:] if s["site"].startswith("0000000000000") else s["site"]: s
            for s in comm["sites"]}


def check(name):
    def wrap(fn):
        try:
            fn()
            print(f"ok - {name}")
        except Exception as e:  # report every failing case, not just the first
            failures.append(name)
            print(f"not ok - {name}: {e!r}")
        return fn
    return wrap


@check("ddp2: agreed, all pinned, one stream shares one slot")
def _():
    doc, c = replay_json("ddp2")
    assert doc["mode"] == "shared"
    assert c["complete"] and c["same_sequence"] and c["agreed"], c
    assert c["nranks"] == 2 and c["calls"] == [48, 48], c["calls"]
    assert c["warmup_end"] == [16, 16], c["warmup_end"]
    s = sites(c)
    assert sorted(s) == ["a1", "b2", "c3", "d4"], sorted(s)
    counts = {"a1": 1 << 20, "b2": 3 << 18, "c3": 1 << 18, "d4": 5 << 16}
    for k, v in s.items():
        assert v["pinned"] and v["reason"] == "pinned", v
        assert v["calls"] == 12 and v["bytes"] == 12 * counts[k] * 4, v
        assert v["offset"] == 0 and v["stream"] == 0, v
        assert v["in_place"] == 12 and v["out_of_place"] == 0, v
    slots = [v["slot_bytes"] for v in s.values()]
    assert min(slots) > 0
    assert c["pool_bytes"] == c["planned_bytes"] == max(slots), (c["pool_bytes"], slots)
    assert c["lower_bound_bytes"] == max(slots)
    assert c["dedicated_bytes"] == sum(slots)


@check("ddp2 --planner dedicated: offsets in order of first appearance")
def _():
    doc, c = replay_json("ddp2", "--planner", "dedicated")
    assert doc["mode"] == "dedicated"
    off = 0
    for v in c["sites"]:  # listed in order of first call
        assert v["pinned"] and v["offset"] == off, (v, off)
        off += v["slot_bytes"]
    assert c["pool_bytes"] == c["dedicated_bytes"] == off


@check("ddp2 --max-bytes 2M: the two large buckets stay on NCCL")
def _():
    _, c = replay_json("ddp2", "--max-bytes", "2M")
    s = sites(c)
    assert [k for k in sorted(s) if not s[k]["pinned"]] == ["a1", "b2"], s
    assert s["a1"]["reason"] == "too large" and s["b2"]["reason"] == "too large"
    assert c["pool_bytes"] == max(s["c3"]["slot_bytes"], s["d4"]["slot_bytes"])


@check("ddp2 --warmup 8: warm-up ends after two loops of four")
def _():
    doc, c = replay_json("ddp2", "--warmup", "8")
    assert doc["warmup"] == 8 and c["warmup_end"] == [8, 8], c["warmup_end"]


@check("differ2: only the differing sites fall back")
def _():
    _, c = replay_json("differ2")
    assert c["agreed"] and not c["same_sequence"], c
    s = sites(c)
    assert s["b2"]["reason"] == "differs between ranks" and not s["b2"]["pinned"]
    assert s["ee"]["reason"] == "not on all ranks" and s["ee"]["rank"] == 1
    for k in ("a1", "c3", "d4"):
        assert s[k]["pinned"], s[k]
    assert c["pool_bytes"] == max(s[k]["slot_bytes"] for k in ("a1", "c3", "d4"))


@check("twostreams2: a slot per stream")
def _():
    _, c = replay_json("twostreams2")
    s = sites(c)
    assert [s[k]["stream"] for k in ("a1", "b2", "c3", "d4")] == [0, 1, 0, 1]
    assert s["a1"]["offset"] == s["c3"]["offset"] and s["b2"]["offset"] == s["d4"]["offset"]
    assert s["a1"]["offset"] != s["b2"]["offset"]
    want = (max(s["a1"]["slot_bytes"], s["c3"]["slot_bytes"]) +
            max(s["b2"]["slot_bytes"], s["d4"]["slot_bytes"]))
    assert c["pool_bytes"] == want == c["lower_bound_bytes"], (c["pool_bytes"], want)


@check("incomplete: a missing rank means no agreement")
def _():
    _, c = replay_json("incomplete")
    assert not c["complete"] and not c["agreed"], c
    assert c["ranks_present"] == [0] and c["pool_bytes"] == 0
    assert all(not v["pinned"] for v in c["sites"]), c["sites"]


@check("sweep4: one file, four ranks in groups, late sites planned in later epochs")
def _():
    _, c = replay_json("sweep4")
    assert c["nranks"] == 4 and c["ranks_present"] == [0, 1, 2, 3], c
    assert c["calls"] == [160] * 4 and c["agreed"] and c["same_sequence"], c
    assert c["epochs"] >= 2, c["epochs"]
    assert len(c["sites"]) == 8 and all(v["pinned"] for v in c["sites"]), c["sites"]
    slots = [v["slot_bytes"] for v in c["sites"]]
    assert slots == sorted(slots), slots  # counts double size by size
    assert all(v["offset"] == 0 for v in c["sites"])
    assert c["pool_bytes"] == max(slots)


@check("text report and usage errors")
def _():
    files = [os.path.join(TRACES, "ddp2", f) for f in ("rank0.trace", "rank1.trace")]
    out = run(*files)
    assert "agreement: GO" in out and "4 of 4 site(s) pinned" in out, out
    run("--planner", "bogus", *files, expect_rc=2)
    run(expect_rc=2)
    run(os.path.join(TRACES, "no-such.trace"), expect_rc=1)



sys.exit(1 if failures else 0)
