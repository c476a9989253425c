#!/usr/bin/env python3
"""Writes the synthetic symmpin traces in this folder (see README.md). Synthetic: made by this
script from the format in docs/trace-format.md, not recorded on GPUs. Run it from anywhere:
    python3 tests/traces/synthetic/gen.py
and commit the result; tests/planner/test_replay.py checks symmpin-replay's answers on them."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
KEY = (0x1111222233334444, 0x5555666677778888)


class Trace:
    def __init__(self, path, pid, rank, program, version=1):
        self.path, self.lines, self.seq, self.t = path, [], 0, 0
        self.lines += [f"#symmpin-trace {version}", "#host=synthetic", f"#pid={pid}", f"#rank={rank}",
                       f"#program={program}", "#start_unix_ns=1764500000000000000",
                       "#fields=seq t_ns tid call key=value..."]
        self.pid, self.next_alloc = pid, 1

    def ev(self, tid, call, **kv):
        self.seq += 1
        self.t += 1000
        fields = " ".join(f"{k}={v}" for k, v in kv.items())
        self.lines.append(f"{self.seq} {self.t} {tid} {call} {fields}".rstrip())

    def malloc(self, tid, dev, size, ptr):
        a = self.next_alloc
        self.next_alloc += 1
        self.ev(tid, "cudaMalloc", rc=0, dev=dev, ptr=hex(ptr), size=size, alloc=a, stack="0xa110c")
        return a

    def init(self, tid, dev, rank, nranks, comm=0, key=KEY, call="ncclCommInitRank"):
        self.ev(tid, call, rc=0, dev=dev, stack="0x1417", comm=comm, key_hi=hex(key[0]),
                key_lo=hex(key[1]), rank=rank, nranks=nranks)

    def allreduce(self, tid, dev, rank, nranks, site, count, dtype="f32", op="sum", stream_ord=0,
                  alloc=0, comm=0):
        self.ev(tid, "ncclAllReduce", rc=0, dev=dev, stack="0x5747c", stream=hex(0x7000 + stream_ord),
                comm=comm, rank=rank, nranks=nranks, site=hex(site), count=count, dtype=dtype, op=op,
                send_alloc=alloc, send_off=0, recv_alloc=alloc, recv_off=0,
                send_ptr=hex(0x7f0000000000 + alloc * 0x10000000),
                recv_ptr=hex(0x7f0000000000 + alloc * 0x10000000), stream_ord=stream_ord,
                capturing=0, path=0, reason=2)

    def collective(self, tid, dev, rank, nranks, call, site, count, dtype, op=None, alloc=0):
        """ncclAllGather / ncclReduceScatter (trace version 2): the all-reduce's fields; count is
        NCCL's (the chunk), and the all-gather has no op."""
        kv = dict(rc=0, dev=dev, stack="0x5747c", stream=hex(0x7000), comm=0, rank=rank,
                  nranks=nranks, site=hex(site), count=count, dtype=dtype)
        if op is not None:
            kv["op"] = op
        ptr = hex(0x7f0000000000 + alloc * 0x10000000)
        kv.update(send_alloc=alloc, send_off=0, recv_alloc=alloc, recv_off=count * 4, send_ptr=ptr,
                  recv_ptr=ptr, stream_ord=0, capturing=0, path=0, reason=2)
        self.ev(tid, call, **kv)

    def write(self):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, "w") as f:
            f.write("\n".join(self.lines) + "\n")


# DDP-like: 4 buckets, one stream, 12 steps; 2 processes. `swap` puts another site at one call.
BUCKETS = [(0xa1, 1 << 20), (0xb2, 3 << 18), (0xc3, 1 << 18), (0xd4, 5 << 16)]  # site, count


def ddp(name, steps=12, swap=None, ranks=(0, 1), streams=None, prefix=None):
    """prefix=(rank, k): that rank first makes k extra all-reduces of shapes nobody else uses."""
    for r in ranks:
        t = Trace(os.path.join(HERE, name, f"rank{r}.trace"), 1000 + r, r, "python3 ddp_train.py")
        t.init(1, r, r, 2)
        allocs = [t.malloc(1, r, count * 4, 0x7f0000000000 + (i + 1) * 0x10000000)
                  for i, (_, count) in enumerate(BUCKETS)]
        if prefix and prefix[0] == r:
            for k in range(prefix[1]):
                t.allreduce(1, r, r, 2, 0xf00 + k, 7 + k, "f32", alloc=allocs[0])
        n = 0
        for _ in range(steps):
            for i, (site, count) in enumerate(BUCKETS):
                if swap and swap[0] == r and swap[1] == n:
                    site = swap[2]
                so = streams[i] if streams else 0
                t.allreduce(1, r, r, 2, site, count, "f32", stream_ord=so, alloc=allocs[i])
                n += 1
        t.write()


def sweep_one_process(name, nranks=4, iters=20):
    """nccl-tests-like: one thread drives every GPU, each size inside ncclGroupStart/End."""
    t = Trace(os.path.join(HERE, name, "all.trace"), 2000, 0, "all_reduce_perf")
    for r in range(nranks):
        t.init(1, r, r, nranks, call="ncclCommInitAll")
    buf = [t.malloc(1, r, 1 << 22, 0x7e0000000000 + r * 0x10000000) for r in range(nranks)]
    for k in range(8):
        count = 256 << k
        site = 0x5100 + k
        for _ in range(iters):
            t.ev(1, "ncclGroupStart", rc=0, dev=0, depth=1)
            for r in range(nranks):
                t.allreduce(1, r, r, nranks, site, count, "bf16", alloc=buf[r])
            t.ev(1, "ncclGroupEnd", rc=0, dev=0, depth=0)
    t.write()


def mixed(name, steps=60, move_at=8):
    """Tensor-parallel-like: small all-reduces (LL kernel sizes) and a large one (two-shot kernel at 2 ranks) on one
    stream; from step `move_at` on, site 0x5a is called on stream 1 instead (one site, two streams:
    two plan entries)."""
    loop = [(0x5a, 1024, "f32"), (0x6b, 1 << 18, "f32"), (0x7c, 4096, "bf16")]  # site, count, dtype
    for r in (0, 1):
        t = Trace(os.path.join(HERE, name, f"rank{r}.trace"), 3000 + r, r, "python3 tp_loop.py")
        t.init(1, r, r, 2)
        buf = t.malloc(1, r, 1 << 20, 0x7f0000000000 + 0x10000000)
        for step in range(steps):
            for site, count, dtype in loop:
                so = 1 if site == 0x5a and step >= move_at else 0
                t.allreduce(1, r, r, 2, site, count, dtype, stream_ord=so, alloc=buf)
        t.write()


def colls(name, steps=30):
    """Sequence-parallel-like layer: all-gather, all-reduce, reduce-scatter per step, one stream."""
    for r in (0, 1):
        t = Trace(os.path.join(HERE, name, f"rank{r}.trace"), 4000 + r, r, "python3 sp_loop.py",
                  version=2)
        t.init(1, r, r, 2)
        buf = t.malloc(1, r, 1 << 22, 0x7f0000000000 + 0x10000000)
        for step in range(steps):
            t.collective(1, r, r, 2, "ncclAllGather", 0x1a, 4096, "bf16", alloc=buf)
            t.allreduce(1, r, r, 2, 0x2b, 1000, "f32", alloc=buf)
            t.collective(1, r, r, 2, "ncclReduceScatter", 0x3c, 4096, "bf16", op="sum", alloc=buf)
            t.collective(1, r, r, 2, "ncclReduceScatter", 0x4d, 1 << 17, "f32", op="avg", alloc=buf)
        t.write()


ddp("ddp2")
ddp("differ2", swap=(1, 5, 0xee))  # rank 1, call 6 (step 2, bucket B): another site
ddp("twostreams2", streams=[0, 1, 0, 1])
ddp("newsite2", steps=40, swap=(1, 100, 0xef))  # rank 1, call 101 (after warm-up): a new site, a1's shape
ddp("incomplete", ranks=(0,))
ddp("skew2", steps=40, prefix=(1, 13))  # ranks that disagree: warm-up ends at different calls
sweep_one_process("sweep4")
mixed("mixed2")
colls("colls2")
