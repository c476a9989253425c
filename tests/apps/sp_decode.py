"""Sequence-parallel tensor parallelism under PyTorch: issue 28's workload for all-gather and
reduce-scatter.

Two parts, each eager and captured into a CUDA graph (`torch.cuda.graph`, PyTorch's own capture
stream), each printing digests (sha256 of the outputs' bytes) that must be the same with and
without symmpin at 2 ranks (a sum of two elements rounds once, whatever the order) and the same
from run to run at any rank count:

- colls: `dist.all_gather_into_tensor` and `dist.reduce_scatter_tensor` (sum, and avg for fp32)
  of random data (never zeros), bf16 and fp32, per-rank chunks of 1 KiB to 64 KiB, repeated
  with new data every iteration; the graph replays them with new inputs copied in.
  SPD-DIGEST rank=R part=colls mode=M what=ag|rs dtype=D bytes=B digest=X
- mlp: a Megatron-style sequence-parallel MLP block decoded for a few tokens: every rank holds
  tokens/world rows of the activations; all-gather them, column-parallel up-projection, GELU,
  row-parallel down-projection, reduce-scatter back to this rank's rows, residual; LAYERS layers
  per step, each step's output the next step's input.
  SPD-DIGEST rank=R part=mlp mode=M hidden=H tokens=T digest=X

Environment: SPD_HIDDEN (default 1024), SPD_TOKENS ("1,8": tokens per rank), SPD_LAYERS (2),
SPD_STEPS (decode steps, 4), SPD_ITERS (collective iterations, 30), SPD_MODES ("eager,graph").
Warm-up: enough eager calls of every shape first that symmpin has planned them before they are
captured (a call captured before its plan stays on NCCL: right, but not what this measures).
"""
import hashlib
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

WARM = 160  # eager rounds of every shape before the measured ones and any capture


def say(line):
    """One line in one write(2): ranks share the launcher's stdout."""
    os.write(1, (line + "\n").encode())


def env_list(name, default):
    return [s.strip() for s in os.environ.get(name, default).split(",") if s.strip()]


def digest(t):
    return hashlib.sha256(t.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()[:16]


def graph_of(fn):
    """Capture fn() the standard way after warming it up on a side stream."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


# ---- colls ----

CHUNKS = (1024, 4096, 65536)  # bytes per rank
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}


class CollCase:
    def __init__(self, dtype, chunk_bytes, world, dev, op):
        self.dtype, self.world, self.op = dtype, world, op
        self.n = chunk_bytes // torch.tensor([], dtype=dtype).element_size()
        self.ag_in = torch.empty(self.n, dtype=dtype, device=dev)
        self.ag_out = torch.empty(self.n * world, dtype=dtype, device=dev)
        self.rs_in = torch.empty(self.n * world, dtype=dtype, device=dev)
        self.rs_out = torch.empty(self.n, dtype=dtype, device=dev)

    def fill(self, gen):
        # random, never zeros: +-[0.5, 2)
        for t in (self.ag_in, self.rs_in):
            v = torch.rand(t.shape, generator=gen, device=t.device) * 1.5 + 0.5
            s = torch.randint(0, 2, t.shape, generator=gen, device=t.device) * 2 - 1
            t.copy_((v * s).to(t.dtype))

    def run(self):
        dist.all_gather_into_tensor(self.ag_out, self.ag_in)
        dist.reduce_scatter_tensor(self.rs_out, self.rs_in, op=self.op)


def part_colls(mode, rank, world, dev, iters):
    cases = []
    for dname, dt in DTYPES.items():
        for chunk in CHUNKS:
            cases.append((dname, chunk, CollCase(dt, chunk, world, dev, dist.ReduceOp.SUM)))
            if dt == torch.float32:
                cases.append((dname + "-avg", chunk, CollCase(dt, chunk, world, dev, dist.ReduceOp.AVG)))
    gen = torch.Generator(device=dev)
    gen.manual_seed(100 + rank)
    for _ in range(WARM):
        for _, _, c in cases:
            c.run()
    g = graph_of(lambda: [c.run() for _, _, c in cases]) if mode == "graph" else None
    h = {id(c): (hashlib.sha256(), hashlib.sha256()) for _, _, c in cases}
    for _ in range(iters):
        for _, _, c in cases:
            c.fill(gen)
        if g is not None:
            g.replay()
        else:
            for _, _, c in cases:
                c.run()
        torch.cuda.synchronize()
        for _, _, c in cases:
            ha, hr = h[id(c)]
            ha.update(c.ag_out.view(torch.uint8).cpu().numpy().tobytes())
            hr.update(c.rs_out.view(torch.uint8).cpu().numpy().tobytes())
    for dname, chunk, c in cases:
        ha, hr = h[id(c)]
        say(f"SPD-DIGEST rank={rank} part=colls mode={mode} what=ag dtype={dname} bytes={chunk} "
            f"digest={ha.hexdigest()[:16]}")
        say(f"SPD-DIGEST rank={rank} part=colls mode={mode} what=rs dtype={dname} bytes={chunk} "
            f"digest={hr.hexdigest()[:16]}")


# ---- mlp ----

class SPLayer:
    """One MLP layer's shard: column-parallel up (hidden -> 4 hidden / world), row-parallel down."""

    def __init__(self, hidden, world, gen, dev):
        def w(rows, cols, s):
            return (torch.randn(rows, cols, generator=gen, device=dev) * s).to(torch.bfloat16)
        self.up = w(hidden, 4 * hidden // world, hidden ** -0.5)
        self.down = w(4 * hidden // world, hidden, (4 * hidden) ** -0.5)


def sp_block(layers, x_local, world, gathered, partial, out):
    """x_local: this rank's rows [t / world, hidden]; returns the block's output rows."""
    x = x_local
    for layer in layers:
        dist.all_gather_into_tensor(gathered, x)
        h = F.gelu(gathered @ layer.up)
        torch.matmul(h, layer.down, out=partial)
        dist.reduce_scatter_tensor(out, partial)
        x = x + out
    return x


def part_mlp(mode, rank, world, dev, hidden, tokens, nlayers, steps):
    assert tokens % world == 0, "tokens must split over the ranks"
    gen = torch.Generator(device=dev)
    gen.manual_seed(2000 + rank)  # each rank its own shard of the weights
    layers = [SPLayer(hidden, world, gen, dev) for _ in range(nlayers)]
    xg = torch.Generator(device=dev)
    xg.manual_seed(11 + rank)  # each rank its own rows of the sequence
    x0 = torch.randn(tokens // world, hidden, generator=xg, device=dev).to(torch.bfloat16)
    gathered = torch.empty(tokens, hidden, dtype=torch.bfloat16, device=dev)
    partial = torch.empty(tokens, hidden, dtype=torch.bfloat16, device=dev)
    out = torch.empty(tokens // world, hidden, dtype=torch.bfloat16, device=dev)
    for _ in range(WARM // 4):
        sp_block(layers, x0, world, gathered, partial, out)
    state = torch.empty_like(x0)
    state.copy_(x0)
    if mode == "graph":
        result = {}

        def step():
            result["y"] = sp_block(layers, state, world, gathered, partial, out)
        g = graph_of(step)
        state.copy_(x0)  # the warm-up on the side stream ran the block: start over
        for _ in range(steps):
            g.replay()
            state.copy_(result["y"])
    else:
        for _ in range(steps):
            state.copy_(sp_block(layers, state, world, gathered, partial, out))
    torch.cuda.synchronize()
    say(f"SPD-DIGEST rank={rank} part=mlp mode={mode} hidden={hidden} tokens={tokens} "
        f"digest={digest(state)}")


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    modes = env_list("SPD_MODES", "eager,graph")
    iters = int(os.environ.get("SPD_ITERS", "30"))
    hidden = int(os.environ.get("SPD_HIDDEN", "1024"))
    nlayers = int(os.environ.get("SPD_LAYERS", "2"))
    steps = int(os.environ.get("SPD_STEPS", "4"))
    runs = 0
    for mode in modes:
        part_colls(mode, rank, world, dev, iters)
        runs += 1
        for per_rank in (int(t) for t in env_list("SPD_TOKENS", "1,8")):
            part_mlp(mode, rank, world, dev, hidden, per_rank * world, nlayers, steps)
            runs += 1
    say(f"sp_decode: rank {rank}: {runs} runs")
    say(f"RESULTS-DONE rank={rank}")  # what follows is teardown (the GPU suite bounds it apart)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
