#!/usr/bin/env python3
"""symmpin-replay on traces: runs the binary and checks its --json (and text) answers.

- The synthetic traces of tests/traces/synthetic (see its README) against what they were built to
  show. Expected pool sizes are derived from the slot sizes and sharing classes the tool reports
  (they come from the kernels' own functions), so the checks hold whichever slot function the
  build links.
- The real traces recorded on 2 x H200 next to that folder (tests/traces/<set>/) against the
  planner's invariants, and against call counts read from the trace text by this script. The
  dedicated / planned / lower-bound bytes of each set are printed as TAP comments.

Plan entries are (site, stream) pairs: one site called on two streams is two entries, each with
that stream's calls. "class" is the sharing class the planner saw (stream x kernel variant):
entries of different classes may never share bytes.
usage: test_replay.py SYMMPIN_REPLAY SYNTHETIC_TRACE_DIR"""
import json
import os
import subprocess
import sys
from collections import Counter

REPLAY, TRACES = sys.argv[1], sys.argv[2]
REAL = os.path.dirname(os.path.abspath(TRACES))  # tests/traces: the real sets sit next to synthetic/
REAL_SETS = ["app-procs", "app-single", "app-threads", "ddp", "tp"]
failures = []
ran = 0


def run(*args, expect_rc=0):
    p = subprocess.run([REPLAY, *args], capture_output=True, text=True, timeout=60)
    if p.returncode != expect_rc:
        raise AssertionError(f"{args}: exit {p.returncode}, expected {expect_rc}\n{p.stderr}")
    return p.stdout


def case_files(case, root=None):
    d = os.path.join(root or TRACES, case)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if not f.endswith(".md"))


def replay_json(case, *flags, root=None):
    doc = json.loads(run("--json", *flags, *case_files(case, root)))
    assert len(doc["comms"]) == 1, doc["comms"]
    return doc, doc["comms"][0]


def short(site):
    return site[-2:] if site.startswith("0000000000000") else site


def entries(comm):
    """(site, stream) -> entry; each pair listed once."""
    out = {}
    for s in comm["sites"]:
        k = (short(s["site"]), s["stream"])
        assert k not in out, f"{k} listed twice"
        out[k] = s
    return out


def sites(comm):
    """site -> entry, for traces where every site is called on one stream."""
    out = {}
    for (site, _), s in entries(comm).items():
        assert site not in out, f"site {site} on several streams"
        out[site] = s
    return out


def class_pool(entries_):
    """The pool whole-slot sharing needs without groups: per class, its largest pinned slot."""
    per = {}
    for s in entries_:
        if s["pinned"]:
            per[s["class"]] = max(per.get(s["class"], 0), s["slot_bytes"])
    return sum(per.values())


def check_layout(c, dedicated=False):
    """The planner's invariants on one communicator's plan: every pinned slot inside the pool;
    ranges either disjoint or starting at the same offset (whole slots); entries of different
    classes, or called together in one group, never share a byte; dedicated: nothing shared."""
    pinned = [s for s in c["sites"] if s["pinned"]]
    together = [set(g) for g in c["in_flight_together"]]
    for s in pinned:
        assert s["slot_bytes"] > 0 and s["offset"] % 256 == 0, s
        assert 0 <= s["offset"] and s["offset"] + s["slot_bytes"] <= c["pool_bytes"], (s, c["pool_bytes"])
    idx = {id(s): i for i, s in enumerate(c["sites"])}
    for a in range(len(pinned)):
        for b in range(a + 1, len(pinned)):
            x, y = pinned[a], pinned[b]
            hit = x["offset"] < y["offset"] + y["slot_bytes"] and y["offset"] < x["offset"] + x["slot_bytes"]
            if not hit:
                continue
            name = f"{short(x['site'])}@{x['stream']} and {short(y['site'])}@{y['stream']}"
            assert not dedicated, f"dedicated plan shares bytes: {name}"
            assert x["offset"] == y["offset"], f"partial overlap: {name}"
            assert x["class"] == y["class"], f"different classes share bytes: {name}"
            assert not any({idx[id(x)], idx[id(y)]} <= g for g in together), \
                f"in one group and sharing bytes: {name}"


def check(name):
    def wrap(fn):
        global ran
        ran += 1
        try:
            fn()
            print(f"ok {ran} - {name}")
        except Exception as e:  # report every failing case, not just the first
            failures.append(name)
            print(f"not ok {ran} - {name}: {e!r}")
        return fn
    return wrap


DDP_COUNTS = {"a1": 1 << 20, "b2": 3 << 18, "c3": 1 << 18, "d4": 5 << 16}


@check("ddp2 --max-bytes 4M: agreed, all pinned, one stream: one shared slot per kernel variant")
def _():
    doc, c = replay_json("ddp2", "--max-bytes", "4M")
    assert doc["mode"] == "shared" and doc["max_bytes"] == 4 << 20
    assert c["complete"] and c["same_sequence"] and c["agreed"], c
    assert c["nranks"] == 2 and c["calls"] == [48, 48], c["calls"]
    assert c["warmup_end"] == [16, 16], c["warmup_end"]
    s = sites(c)
    assert sorted(s) == ["a1", "b2", "c3", "d4"], sorted(s)
    for k, v in s.items():
        assert v["pinned"] and v["reason"] == "pinned", v
        assert v["calls"] == 12 and v["bytes"] == 12 * DDP_COUNTS[k] * 4, v
        assert v["stream"] == 0 and v["epoch"] == 0, v
        assert v["in_place"] == 12 and v["out_of_place"] == 0, v
    for x in s.values():  # one stream, no groups: one class shares one slot
        for y in s.values():
            assert (x["offset"] == y["offset"]) == (x["class"] == y["class"]), (x, y)
    check_layout(c)
    slots = [v["slot_bytes"] for v in s.values()]
    assert min(slots) > 0
    assert c["pool_bytes"] - c["capture_bytes"] == c["planned_bytes"] == class_pool(s.values()), (c["planned_bytes"], slots)
    assert c["lower_bound_bytes"] == c["planned_bytes"]
    assert c["dedicated_bytes"] == sum(slots)


@check("ddp2 --planner dedicated: offsets in order of first appearance")
def _():
    doc, c = replay_json("ddp2", "--planner", "dedicated", "--max-bytes", "4M")
    assert doc["mode"] == "dedicated"
    off = 0
    for v in c["sites"]:  # listed in order of first call
        assert v["pinned"] and v["offset"] == off, (v, off)
        off += v["slot_bytes"]
    assert c["planned_bytes"] == c["dedicated_bytes"] == off
    check_layout(c, dedicated=True)


@check("ddp2 at the default SYMMPIN_MAX_BYTES (2 MiB): the two large buckets stay on NCCL")
def _():
    doc, c = replay_json("ddp2")
    assert doc["max_bytes"] == 2 << 20, doc["max_bytes"]
    s = sites(c)
    assert [k for k in sorted(s) if not s[k]["pinned"]] == ["a1", "b2"], s
    assert s["a1"]["reason"] == "too large" and s["b2"]["reason"] == "too large"
    assert s["c3"]["pinned"] and s["d4"]["pinned"]
    assert c["planned_bytes"] == class_pool([s["c3"], s["d4"]]) > 0
    check_layout(c)


@check("ddp2 --max-bytes 2M and 3M: only messages above the limit stay on NCCL")
def _():
    _, c2 = replay_json("ddp2", "--max-bytes", "2M")
    _, c3 = replay_json("ddp2", "--max-bytes", "3M")  # b2 is exactly 3 MiB: not above the limit
    s2, s3 = sites(c2), sites(c3)
    assert [k for k in sorted(s2) if not s2[k]["pinned"]] == ["a1", "b2"], s2
    assert [k for k in sorted(s3) if not s3[k]["pinned"]] == ["a1"], s3


@check("ddp2 --warmup 8: warm-up ends after two loops of four")
def _():
    doc, c = replay_json("ddp2", "--warmup", "8", "--max-bytes", "4M")
    assert doc["warmup"] == 8 and c["warmup_end"] == [8, 8], c["warmup_end"]


@check("differ2: only the differing sites fall back")
def _():
    _, c = replay_json("differ2", "--max-bytes", "4M")
    assert c["agreed"] and not c["same_sequence"], c
    s = sites(c)
    assert s["b2"]["reason"] == "differs between ranks" and not s["b2"]["pinned"]
    assert s["ee"]["reason"] == "not on all ranks" and s["ee"]["rank"] == 1
    assert s["ee"]["calls"] == 1 and s["b2"]["calls"] == 12 and s["b2"]["rank"] == 0
    for k in ("a1", "c3", "d4"):
        assert s[k]["pinned"], s[k]
    assert c["planned_bytes"] == class_pool(s[k] for k in ("a1", "c3", "d4"))
    check_layout(c)


@check("differ2: no pinned site has b2's shape, so nothing routes its calls to a slot")
def _():
    _, c = replay_json("differ2", "--max-bytes", "4M")
    s = sites(c)
    assert "routed_to" not in s["b2"] and "routed_to" not in s["ee"], (s["b2"], s["ee"])


@check("newsite2: a site new on one rank after warm-up routes by shape to the pinned site's slot")
def _():
    _, c = replay_json("newsite2", "--max-bytes", "4M")
    assert c["agreed"], c
    s = sites(c)
    assert s["a1"]["pinned"] and s["ef"]["rank"] == 1 and not s["ef"]["pinned"], (s["a1"], s["ef"])
    assert s["ef"]["routed_to"] == f"{0xa1:016x}", s["ef"]
    assert s["a1"]["routed_to"] == f"{0xa1:016x}", s["a1"]


@check("twostreams2: a slot per stream (and kernel variant)")
def _():
    _, c = replay_json("twostreams2", "--max-bytes", "4M")
    s = sites(c)
    assert [s[k]["stream"] for k in ("a1", "b2", "c3", "d4")] == [0, 1, 0, 1]
    assert s["a1"]["class"] != s["b2"]["class"] and s["c3"]["class"] != s["d4"]["class"]
    for x, y in (("a1", "c3"), ("b2", "d4")):  # one stream: same offset iff same kernel variant
        assert (s[x]["offset"] == s[y]["offset"]) == (s[x]["class"] == s[y]["class"]), (s[x], s[y])
    assert s["a1"]["offset"] != s["b2"]["offset"]
    check_layout(c)
    assert c["planned_bytes"] == class_pool(s.values()) == c["lower_bound_bytes"], c["planned_bytes"]


@check("incomplete: a missing rank means no agreement")
def _():
    _, c = replay_json("incomplete")
    assert not c["complete"] and not c["agreed"], c
    assert c["ranks_present"] == [0] and c["pool_bytes"] == 0
    assert all(not v["pinned"] for v in c["sites"]), c["sites"]
    assert all(v["reason"] == "ranks missing from the traces" for v in c["sites"]), c["sites"]


@check("sweep4: one file, four ranks in groups, late sites planned in later epochs")
def _():
    _, c = replay_json("sweep4")
    assert c["nranks"] == 4 and c["ranks_present"] == [0, 1, 2, 3], c
    assert c["calls"] == [160] * 4 and c["agreed"] and c["same_sequence"], c
    assert c["epochs"] >= 2, c["epochs"]
    assert len(c["sites"]) == 8 and all(v["pinned"] for v in c["sites"]), c["sites"]
    assert max(v["epoch"] for v in c["sites"]) >= 1, c["sites"]
    slots = [v["slot_bytes"] for v in c["sites"]]
    assert slots == sorted(slots), slots  # counts double size by size
    # one call per rank per group: nothing is in flight together, one slot per class
    assert c["in_flight_together"] == [], c["in_flight_together"]
    check_layout(c)
    # Each later epoch's bigger site cannot join the old slot (it would cross the old pool's end,
    # where the next chunk of symmetric memory starts), so the pool is more than one slot per class
    # here, but still less than one slot per site.
    assert class_pool(c["sites"]) < c["planned_bytes"] <= c["dedicated_bytes"], c


@check("mixed2: one site on two streams is one entry on its first stream; kernel variants never share a slot")
def _():
    doc, c = replay_json("mixed2")
    assert c["agreed"] and c["same_sequence"] and c["calls"] == [180, 180], c
    e = entries(c)
    # The stream is rank-local, so it never decides a route: 5a keeps one entry (one slot) on the
    # stream of its first call, and the engine splices its stream-1 calls into stream 0's order.
    assert sorted(e) == [("5a", 0), ("6b", 0), ("7c", 0)], sorted(e)
    want = {("5a", 0): (60, 1024 * 4), ("6b", 0): (60, (1 << 18) * 4), ("7c", 0): (60, 4096 * 2)}
    for k, (calls, nbytes) in want.items():  # every call of the site, on any stream
        assert e[k]["calls"] == calls and e[k]["bytes"] == calls * nbytes, e[k]
        assert e[k]["pinned"] and e[k]["epoch"] == 0, e[k]
    for x in e.values():
        for y in e.values():
            assert (x["offset"] == y["offset"]) == (x["class"] == y["class"]), (x, y)
    assert e[("5a", 0)]["kernel"] == e[("7c", 0)]["kernel"] == "LL", e
    assert e[("6b", 0)]["kernel"] == "two-shot", e[("6b", 0)]  # 1 MiB at 2 ranks
    assert e[("6b", 0)]["offset"] != e[("5a", 0)]["offset"]
    check_layout(c)
    assert c["planned_bytes"] == class_pool(c["sites"]) == c["lower_bound_bytes"]


@check("colls2: all-gathers, all-reduces and reduce-scatters in one plan; each its collective's slot; planned = lower bound")
def _():
    doc, c = replay_json("colls2")
    assert c["agreed"] and c["same_sequence"] and c["calls"] == [120, 120], c
    e = entries(c)
    assert sorted(e) == [("1a", 0), ("2b", 0), ("3c", 0), ("4d", 0)], sorted(e)
    colls = {k: v["coll"] for k, v in e.items()}
    assert colls == {("1a", 0): "allgather", ("2b", 0): "allreduce", ("3c", 0): "reducescatter",
                     ("4d", 0): "reducescatter"}, colls
    for x in e.values():
        assert x["pinned"] and x["epoch"] == 0 and x["calls"] == 30, x
    # NCCL's count: the chunk (bytes per call are count x element size)
    assert e[("1a", 0)]["bytes"] == 30 * 4096 * 2 and e[("4d", 0)]["bytes"] == 30 * (1 << 17) * 4, e
    assert e[("1a", 0)]["kernel"] == e[("2b", 0)]["kernel"] == e[("3c", 0)]["kernel"] == "LL", e
    assert e[("4d", 0)]["kernel"] == "copy", e[("4d", 0)]  # 512 KiB chunks: above the LL limit
    # the same count and datatype, another collective: another slot size (the reduce-scatter
    # stages every rank's lines of its chunk, as the all-gather receives them: equal here)
    assert e[("1a", 0)]["slot_bytes"] == e[("3c", 0)]["slot_bytes"] > 0, e
    check_layout(c)
    assert c["planned_bytes"] == class_pool(c["sites"]) == c["lower_bound_bytes"], c
    out = run(*case_files("colls2"))
    assert "bytes, allgather count 4096 bf16 -," in out, out
    assert "bytes, reducescatter count 131072 f32 avg," in out, out


def plan_lines(text):
    """The plan section's entry lines (after 'plan after', before 'pool')."""
    lines, on = [], False
    for line in text.splitlines():
        if line.startswith("  plan after"):
            on = True
        elif line.startswith("  pool "):
            on = False
        elif on and not line.startswith("    rank "):
            lines.append(line.strip())
    return lines


@check("text report names sites and streams, never plan keys; usage errors")
def _():
    files = case_files("ddp2")
    out = run("--max-bytes", "4M", *files)
    assert "agreement: GO" in out and "4 of 4 site/stream pair(s) pinned" in out, out
    assert "(a loop of 4 call(s) seen twice)" in out, out
    lines = plan_lines(out)
    assert len(lines) == 4, lines
    known = {f"{v:016x}" for v in (0xa1, 0xb2, 0xc3, 0xd4)}
    for line in lines:
        assert line.split()[0] in known and " on stream 0: pinned at offset " in line, line
    out = run(*files)  # the default limit
    assert "2 of 4 site/stream pair(s) pinned" in out, out
    assert "00000000000000a1 on stream 0: NCCL, too large" in out, out
    out = run(*case_files("mixed2"))
    lines = plan_lines(out)
    assert len(lines) == 3 and "000000000000005a on stream 0: pinned" in out, lines
    assert sum(line.startswith("000000000000005a on stream ") for line in lines) == 1, lines
    run("--planner", "bogus", *files, expect_rc=2)
    run(expect_rc=2)
    run(os.path.join(TRACES, "no-such.trace"), expect_rc=1)


def run_all(*args):
    p = subprocess.run([REPLAY, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


@check("--help, --version and bad options: what a command-line tool answers")
def _():
    rc, out, err = run_all("--help")
    assert rc == 0 and out.startswith("usage: symmpin-replay ") and not err, (rc, out, err)
    assert run_all("-h")[:2] == (0, out)
    rc, out, err = run_all("--version")
    assert rc == 0 and not err, (rc, err)
    assert out.startswith("symmpin-replay ") and "(git " in out and out.count("\n") == 1, out
    files = case_files("ddp2")
    for args, first in [
        (["--foo", *files], "symmpin-replay: unknown option '--foo'"),
        (["--json=1", *files], "symmpin-replay: option '--json' takes no value"),
        ([*files, "--planner"], "symmpin-replay: option '--planner' needs a value"),
        (["--planner", "bogus", *files], "symmpin-replay: bad --planner 'bogus'"),
        ([], "symmpin-replay: no TRACE given"),
    ]:
        rc, out, err = run_all(*args)
        lines = err.splitlines()
        assert rc == 2 and not out and len(lines) == 2, (args, rc, out, err)
        assert lines[0].startswith(first), (args, lines)
        assert lines[1] == "Try 'symmpin-replay --help' for more information.", (args, lines)
    # options may follow the traces (GNU order), and "--" ends them
    assert run("--json", *files) == run(*files[:1], "--json", *files[1:])
    rc, out, err = run_all("--", "--json")
    assert rc == 1 and "symmpin-replay: warning: " in err, (rc, err)


def with_wheres(case, lines):
    """Copies of a synthetic case with "#where=" lines put after each file's header (as the
    writer does for events written before the file opened), in a temporary folder."""
    import tempfile
    d = tempfile.mkdtemp(prefix="symmpin-where-")
    for path in case_files(case):
        with open(path) as f:
            text = f.read().splitlines(keepends=True)
        head = next(i for i, line in enumerate(text) if not line.startswith("#"))
        with open(os.path.join(d, os.path.basename(path)), "w") as f:
            f.writelines(text[:head] + [line + "\n" for line in lines] + text[head:])
    return d


def site_lines(text):
    """The text report's call-site lines (after 'call sites', before 'allocations')."""
    lines, on = [], False
    for line in text.splitlines():
        if line.startswith("  call sites"):
            on = True
        elif line.startswith("  allocations"):
            on = False
        elif on:
            lines.append(line.strip())
    return lines


@check("locations: '#where=' lines name each site in the text and JSON reports; none, nothing")
def _():
    import shutil
    # Every ddp2 all-reduce has stack 0x5747c; 0xa110c (the allocations') is not a site's.
    d = with_wheres("ddp2", ["#where=0x5747c /opt/my%20app/libtrain.so+0x1a2b3b _ZN5train4stepEv",
                             "#where=0xa110c /opt/other.so+0x10 alloc_fn"])
    try:
        files = sorted(os.path.join(d, f) for f in os.listdir(d))
        lines = site_lines(run(*files))
        assert len(lines) == 4, lines
        for line in lines:
            parts = line.split("  ")
            assert len(parts[0]) == 16, line
            assert parts[1] == "libtrain.so+0x1a2b3b (_ZN5train4stepEv)", line
            assert " call(s), " in parts[2], line
        doc = json.loads(run("--json", *files))
        for s in doc["comms"][0]["sites"]:
            assert s["where"] == {"module": "/opt/my app/libtrain.so", "offset": "0x1a2b3b",
                                  "symbol": "_ZN5train4stepEv"}, s
        # the plan itself does not move: same JSON as without locations, but for "where"
        plain = json.loads(run("--json", *case_files("ddp2")))
        for s in doc["comms"][0]["sites"]:
            del s["where"]
        assert doc["comms"] == plain["comms"], "locations changed the plan"
        # a module without an exported symbol: module and offset only
        shutil.rmtree(d)
        d = with_wheres("ddp2", ["#where=0x5747c /usr/bin/prog+0x401136"])
        files = sorted(os.path.join(d, f) for f in os.listdir(d))
        for line in site_lines(run(*files)):
            assert line.split("  ")[1] == "prog+0x401136", line
        assert all(s["where"]["symbol"] is None
                   for s in json.loads(run("--json", *files))["comms"][0]["sites"])
    finally:
        shutil.rmtree(d, ignore_errors=True)
    # traces without locations (all the older ones): nothing extra, and no "where" key
    for line in site_lines(run(*case_files("ddp2"))):
        parts = line.split("  ")
        assert len(parts) == 2 and parts[1].split()[1] == "call(s),", line
    assert all("where" not in s for s in json.loads(run("--json", *case_files("ddp2")))["comms"][0]["sites"])


# ---- the real traces ----

def raw_calls(files):
    """rank -> Counter of (site, stream) over the traces' ncclAllReduce lines, read here without
    the tool (attributed as the replay does: events carry their rank in these traces)."""
    per = {}
    for path in files:
        with open(path) as f:
            for line in f:
                if line.startswith("#"):
                    continue
                parts = line.split()
                if len(parts) < 4 or parts[3] != "ncclAllReduce":
                    continue
                kv = dict(p.split("=", 1) for p in parts[4:] if "=" in p)
                if int(kv.get("comm", "-1")) < 0:
                    continue
                rank = int(kv["rank"])
                per.setdefault(rank, Counter())[(f"{int(kv['site'], 16):016x}",
                                                 int(kv["stream_ord"]))] += 1
    return per


def real_set(name):
    @check(f"real trace {name}: agreed, plan within bounds, slots consistent, stable")
    def _():
        files = case_files(name, REAL)
        assert files, f"no traces in {name}"
        text = run("--json", *files)
        doc = json.loads(text)
        assert len(doc["comms"]) == 1, [c["key"] for c in doc["comms"]]
        c = doc["comms"][0]
        assert c["nranks"] == 2 and c["ranks_present"] == [0, 1], c["ranks_present"]
        assert c["complete"] and c["same_sequence"] and c["agreed"], \
            {k: c[k] for k in ("complete", "same_sequence", "agreed")}
        assert doc["unattributed_calls"] == 0, doc["unattributed_calls"]
        # entries against the traces' own text: one per site (on one of its streams: the first
        # call's), with the site's calls on every stream
        raw = raw_calls(files)
        assert sorted(raw) == [0, 1] and raw[0] == raw[1], "ranks made different calls"
        e = {s["site"]: s for s in c["sites"]}
        assert len(e) == len(c["sites"]), "a site listed twice"
        per_site = Counter()
        for (site, _), n in raw[0].items():
            per_site[site] += n
        assert set(e) == set(per_site), set(e) ^ set(per_site)
        for site, n in per_site.items():
            assert e[site]["calls"] == n and e[site]["rank"] == 0, (site, n, e[site])
            assert (site, e[site]["stream"]) in raw[0], (site, e[site]["stream"])
        assert sum(raw[0].values()) == c["calls"][0] == c["calls"][1], c["calls"]
        pinned = [s for s in c["sites"] if s["pinned"]]
        assert pinned, "nothing pinned"
        planned, dedicated, bound = c["planned_bytes"], c["dedicated_bytes"], c["lower_bound_bytes"]
        assert planned == c["pool_bytes"] - c["capture_bytes"]
        assert dedicated == sum(s["slot_bytes"] for s in pinned), dedicated
        assert planned <= 1.05 * bound + 256, (planned, bound)
        assert bound <= planned <= dedicated, (bound, planned, dedicated)
        check_layout(c)
        # offsets stable: the same JSON again, and the same plan with the files in reverse order
        assert run("--json", *files) == text, "a second run printed different JSON"
        if len(files) > 1:
            rev = json.loads(run("--json", *reversed(files)))
            assert rev["comms"] == doc["comms"], "file order changed the plan"
        # dedicated mode: every pinned entry its own bytes, the pool is their sum
        dd = json.loads(run("--json", "--planner", "dedicated", *files))["comms"][0]
        assert dd["agreed"] and dd["planned_bytes"] == dd["dedicated_bytes"], \
            (dd["planned_bytes"], dd["dedicated_bytes"])
        check_layout(dd, dedicated=True)
        if not any(s["reason"].startswith("overlaps") for s in c["sites"]):
            assert {(s["site"], s["stream"]) for s in dd["sites"] if s["pinned"]} == \
                {(s["site"], s["stream"]) for s in pinned}, "modes pinned different entries"
            assert dd["dedicated_bytes"] == dedicated
        print(f"# {name}: dedicated {dedicated}, planned {planned}, lower bound {bound} bytes "
              f"({len(pinned)} of {len(c['sites'])} site/stream pairs pinned, "
              f"{c['epochs']} epoch(s), {c['calls'][0]} all-reduces per rank)")


for _name in REAL_SETS:
    real_set(_name)

print(f"1..{ran}")
sys.exit(1 if failures else 0)
