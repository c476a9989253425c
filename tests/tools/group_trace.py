#!/usr/bin/env python3
"""A made-up symmpin trace of a grouped program, as the library writes one (scripts/check_groups.py
reads it; docs/trace-format.md): 40 groups of 3 all-reduces (384, 768 and 614400 bf16 avg).
Groups 1-3 are warm-up (reason 2); 4-35 alternate probe groups (the odd ones, reason 11, on NCCL)
with groups on symmpin, the largest call above the group limit (reason 12); from group 36 the
groups are back on NCCL for good (reason 13: NCCL ran them faster) or, with back=False, stay on
symmpin. An edit breaks it on purpose: probe_split (group 5's first call on symmpin), late (group
38's first call on symmpin), apart (group 10's first call to NCCL, reason stream).
Used by tests/tools/check_groups_check.sh and the GPU suite's fake app (suite_fake_app.py).

    group_trace.py RANK FILE [EDIT]     (2 ranks, back to NCCL)
"""
import sys


def group_trace(rank, nranks=2, back=True, edit=""):
    seq, out = 0, ["#symmpin-trace 1", f"#rank={rank}", "#fields=seq t_ns tid call key=value..."]

    def line(call, rest):
        nonlocal seq
        seq += 1
        out.append(f"{seq} {seq * 1000} 77 {call} rc=0 dev=0 {rest}")

    for g in range(1, 41):
        line("ncclGroupStart", "depth=1")
        for c, count in enumerate((384, 768, 614400)):
            if g <= 3:
                p, r = 0, 2
            elif g <= 35:
                p, r = (0, 11) if g % 2 == 1 else (1, 0)
            else:
                p, r = (0, 13) if back else (1, 0)
            if c == 2 and (4 <= g <= 35 or (g > 35 and not back)):
                p, r = 0, 12
            if edit == "probe_split" and g == 5 and c == 0:
                p, r = 1, 0
            if edit == "late" and g == 38 and c == 0:
                p, r = 1, 0
            if edit == "apart" and g == 10 and c == 0:
                p, r = 0, 8
            line("ncclAllReduce", f"stream=0x1 comm=0 rank={rank} nranks={nranks} site=0x{c + 1:x} "
                 f"count={count} dtype=bf16 op=avg path={p} reason={r}")
        line("ncclGroupEnd", "depth=0")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    with open(sys.argv[2], "w") as f:
        f.write(group_trace(sys.argv[1], edit=sys.argv[3] if len(sys.argv) == 4 else ""))
