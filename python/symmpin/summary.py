"""The summary `symmpin run` prints: one block per communicator, merged from the statistics JSON
every rank wrote (SYMMPIN_STATS_FILE; the format is preload/stats.c's, docs/config.md).

Pure functions over parsed documents, so the tests feed them made-up statistics.
"""

import json

SHOW_SITES = 6
# A site counts toward the time saved once a rank timed it this often on each path: fewer (a short
# warm-up leaves one or two NCCL calls, the first of them slowed by the program's own start) would
# make the figure a guess.
MIN_SAMPLES = 3


def read(paths):
    """(documents, warnings): every statistics file that parses; a line for each that does not."""
    docs, warnings = [], []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                docs.append(json.load(f))
        except (OSError, ValueError) as e:
            warnings.append(f"symmpin: skipping unreadable statistics {path}: {e}")
    return docs, warnings


def _add_reasons(into, reasons):
    for r, n in (reasons or {}).items():
        into[r] = into.get(r, 0) + n


def _new_comm():
    return {"ranks": set(), "calls": 0, "redirected": 0, "reasons": {}, "pool": 0, "dedicated": 0,
            "arena": 0, "arena_used": 0, "sites": {}, "saved_us": None, "timed_sites": set(),
            "colls": {}}


def _saved_us(site):
    """This rank's time saved at a site: its redirected calls x (NCCL's least sampled time -
    symmpin's), where SYMMPIN_MEASURE timed it both ways often enough; else None. The least, not a
    mean: an eager call's events also span waiting for a late peer, which costs the same on both
    paths (and NCCL's first call connects the peers: hundreds of milliseconds)."""
    t = site.get("time_us") or {}
    nccl = t.get("nccl_least", t.get("nccl"))
    sym = t.get("symmpin_least", t.get("symmpin"))
    n = t.get("samples") or [0, 0]
    if nccl is None or sym is None or min(n) < MIN_SAMPLES:
        return None
    return site.get("redirected", 0) * (nccl - sym)


def merge(docs):
    """{(ordinal, nranks): merged communicator} over every rank's document."""
    comms = {}
    for doc in docs:
        for c in doc.get("comms", []) if isinstance(doc, dict) else []:
            m = comms.setdefault((c.get("ordinal"), c.get("nranks")), _new_comm())
            m["ranks"].add(c.get("rank"))
            pool = c.get("pool") or {}
            m["pool"] = max(m["pool"], pool.get("pool_bytes", 0))
            m["dedicated"] = max(m["dedicated"], pool.get("dedicated_bytes", 0))
            m["arena"] = max(m["arena"], pool.get("capture_bytes", 0))
            m["arena_used"] = max(m["arena_used"], pool.get("capture_used_bytes", 0))
            for s in c.get("sites", []):
                m["calls"] += s.get("calls", 0)
                m["redirected"] += s.get("redirected", 0)
                # statistics of before the other collectives have no "coll": all-reduces
                per = m["colls"].setdefault(s.get("coll", "allreduce"), [0, 0])
                per[0] += s.get("calls", 0)
                per[1] += s.get("redirected", 0)
                _add_reasons(m["reasons"], s.get("reasons"))
                ps = m["sites"].setdefault(s.get("site"), {"calls": 0, "redirected": 0,
                                                           "reasons": {}, "where": None})
                ps["calls"] += s.get("calls", 0)
                ps["redirected"] += s.get("redirected", 0)
                _add_reasons(ps["reasons"], s.get("reasons"))
                ps["where"] = ps["where"] or s.get("where")
                saved = _saved_us(s)
                if saved is not None:
                    m["saved_us"] = (m["saved_us"] or 0.0) + saved
                    m["timed_sites"].add(s.get("site"))
    return comms


def _by_count(reasons):
    return ", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1]))


def _where(w):
    """module+offset (for addr2line) and the symbol, where the statistics name them."""
    w = w or {}
    mod = (w.get("module") or "").rsplit("/", 1)[-1]
    at = f"{mod}+{w.get('offset')}" if mod else "(location unknown)"
    if w.get("symbol"):
        at += f" ({w['symbol']})"
    return at


def _comm_lines(ordinal, nranks, m):
    ranks = ",".join(str(r) for r in sorted(x for x in m["ranks"] if x is not None))
    share = 100.0 * m["redirected"] / m["calls"] if m["calls"] else 0.0
    colls = m.get("colls") or {}
    if set(colls) <= {"allreduce"}:
        what = "all-reduces"
    else:  # one count per collective, in the library's order
        order = ["allreduce", "allgather", "reducescatter"]
        parts = [f"{k} {colls[k][1]}/{colls[k][0]}" for k in sorted(
            colls, key=lambda k: order.index(k) if k in order else len(order))]
        what = f"collective calls ({', '.join(parts)})"
    out = [f"symmpin: communicator {ordinal} ({nranks} ranks; seen: {ranks}): "
           f"{m['redirected']} of {m['calls']} {what} on symmpin ({share:.0f}%), "
           f"{len(m['sites'])} call site(s)"]
    if m["reasons"]:
        out.append(f"symmpin:   to NCCL: {_by_count(m['reasons'])}")
    if m["saved_us"] is None and m["redirected"]:
        out.append(f"symmpin:   time saved: not measured (no site timed at least {MIN_SAMPLES} "
                   "times on NCCL and on symmpin by any one rank; a longer warm-up, "
                   "SYMMPIN_WARMUP, times more NCCL calls)")
    if m["saved_us"] is not None:
        saved = m["saved_us"] / max(len(m["ranks"]), 1) / 1000.0
        out.append(f"symmpin:   time saved: about {saved:.3f} ms per rank "
                   f"({'a loss' if saved < 0 else 'measured'} on {len(m['timed_sites'])} of "
                   f"{len(m['sites'])} site(s): each site's fastest sampled eager call on NCCL vs "
                   "on symmpin, timed with CUDA events; calls inside CUDA graphs are not measured)")
    if m["pool"]:
        out.append(f"symmpin:   symmetric pool {m['pool']} bytes per rank (one slot per site would "
                   f"need {m['dedicated']}; of the pool, a capture arena of {m['arena']} for CUDA "
                   f"graphs, {m['arena_used']} used)")
    top = sorted(m["sites"].items(), key=lambda kv: -kv[1]["calls"])
    for site, ps in top[:SHOW_SITES]:
        rest = _by_count(ps["reasons"])
        out.append(f"symmpin:   site {site} at {_where(ps['where'])}: {ps['calls']} calls, "
                   f"{ps['redirected']} on symmpin" + (f"; to NCCL: {rest}" if rest else ""))
    if len(top) > SHOW_SITES:
        out.append(f"symmpin:   ... and {len(top) - SHOW_SITES} more site(s) (SYMMPIN_STATS=1 "
                   "lists all)")
    return out


def lines(comms):
    """The summary's lines, communicators in ordinal order; none when there is no communicator
    (a program that made none prints nothing of symmpin's)."""
    out = []
    for (ordinal, nranks), m in sorted(comms.items(),
                                       key=lambda kv: (kv[0][0] or 0, kv[0][1] or 0)):
        out += _comm_lines(ordinal, nranks, m)
    return out
