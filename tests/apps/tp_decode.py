"""A Megatron-style tensor-parallel decode step: issue 11's end-to-end workload.

Per layer, on every rank's shard of the weights: column-parallel QKV projection, attention of the
new tokens over a KV cache of CONTEXT tokens (this rank's heads), row-parallel output projection
and an all-reduce, residual; column-parallel MLP up-projection, GELU, row-parallel down-projection
and an all-reduce, residual. bf16, hidden 4096 and 8192, 1, 8 and 64 new tokens: all-reduces of
tokens x hidden x 2 bytes (8 KiB to 1 MiB), two per layer.

Each configuration runs in three modes:
- eager;
- graph: captured the standard way, `with torch.cuda.graph(g)` (PyTorch captures on a stream of
  its own, never seen during the eager warm-up), then replayed;
- compile: `torch.compile(mode="reduce-overhead")` with functional collectives (skipped, with the
  reason, where this PyTorch cannot compile it).

It prints, per configuration and mode:
  TPD-DIGEST rank=R hidden=H tokens=T mode=M digest=D   (sha256 of the output's bytes: the same on
                                                           every rank, with or without symmpin)
  TPD-TIME hidden=H tokens=T mode=M calls=C step_us=S compute_us=X allreduce_us=A   (rank 0)
where step_us is the time per step, compute_us the same step with its all-reduces left out (so
1 - compute_us / step_us is the share of the step that is communication), and allreduce_us the
time per all-reduce of a graph holding only the step's all-reduces (same sizes; in eager mode,
issued eagerly). Run it with and without the preload and compare the two outputs with
scripts/tp_decode_compare.py (the GPU suite's `tp_decode` step does both).

Environment: TPD_HIDDEN (default "4096,8192"), TPD_TOKENS ("1,8,64"), TPD_LAYERS (4),
TPD_MODES ("eager,graph,compile"), TPD_STEPS (timed steps, 50).
"""
import hashlib
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

CONTEXT = 1024      # tokens already in the KV cache
HEAD_DIM = 128
WARM_STEPS = 80     # eager steps (8 all-reduces each with 4 layers) before capture and timing:
                    # symmpin plans a new shape at most 512 calls after it first appears


def say(line):
    """One line in one write(2): ranks share the launcher's stdout, and print() may split a line."""
    os.write(1, (line + "\n").encode())


def env_list(name, default):
    return [s.strip() for s in os.environ.get(name, default).split(",") if s.strip()]


class Layer:
    """One transformer layer's shard on this rank (weights drawn from a per-rank seed)."""

    def __init__(self, hidden, world, gen, dev):
        assert hidden % (world * HEAD_DIM) == 0, "heads must split evenly over the ranks"
        self.heads = hidden // HEAD_DIM // world
        local = self.heads * HEAD_DIM
        scale = hidden ** -0.5

        def w(rows, cols, s):
            return (torch.randn(rows, cols, generator=gen, device=dev) * s).to(torch.bfloat16)

        self.qkv = w(hidden, 3 * local, scale)             # column-parallel
        self.out = w(local, hidden, scale)                 # row-parallel
        self.up = w(hidden, 4 * hidden // world, scale)    # column-parallel
        self.down = w(4 * hidden // world, hidden, (4 * hidden) ** -0.5)  # row-parallel
        self.cache_k = w(self.heads * CONTEXT, HEAD_DIM, 1.0).view(1, self.heads, CONTEXT, HEAD_DIM)
        self.cache_v = w(self.heads * CONTEXT, HEAD_DIM, 1.0).view(1, self.heads, CONTEXT, HEAD_DIM)

    def forward(self, x, reduce):
        t = x.shape[0]
        q, k, v = (x @ self.qkv).split(self.heads * HEAD_DIM, dim=1)
        q, k, v = (y.view(t, self.heads, HEAD_DIM).transpose(0, 1).unsqueeze(0) for y in (q, k, v))
        k = torch.cat((self.cache_k, k), dim=2)
        v = torch.cat((self.cache_v, v), dim=2)
        a = F.scaled_dot_product_attention(q, k, v)        # new tokens over cache + themselves
        a = a.squeeze(0).transpose(0, 1).reshape(t, self.heads * HEAD_DIM)
        x = x + reduce(a @ self.out)
        h = F.gelu(x @ self.up)
        return x + reduce(h @ self.down)


def reduce_nccl(y):
    dist.all_reduce(y)
    return y


def reduce_functional(y):
    import torch.distributed._functional_collectives as funcol
    return funcol.all_reduce(y, "sum", dist.group.WORLD)


def reduce_none(y):
    return y


def make_step(layers, reduce):
    def step(x):
        for layer in layers:
            x = layer.forward(x, reduce)
        return x
    return step


def digest(t):
    return hashlib.sha256(t.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()[:16]


def time_us(fn, steps):
    """Mean microseconds per call of fn(), by CUDA events around `steps` calls."""
    torch.cuda.synchronize()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / steps


def graph_of(fn, x):
    """Capture fn(x) the standard way (PyTorch's own capture stream) after warming it up on a side
    stream, as PyTorch's documentation does; returns the graph and its static output."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn(x)
    return g, out


def run_mode(mode, layers, x, hidden, tokens, nlayers, steps, rank):
    calls = 2 * nlayers
    # Random, never zeros; repeated in-place sums grow it to inf, which costs an all-reduce the same.
    buf = torch.randn(tokens, hidden, device=x.device).to(torch.bfloat16)

    def allreduces_only():
        for _ in range(calls):
            dist.all_reduce(buf)

    if mode == "eager":
        step = make_step(layers, reduce_nccl)
        out = step(x)
        step_us = time_us(lambda: step(x), steps)
        compute_us = time_us(lambda: make_step(layers, reduce_none)(x), steps)
        ar_us = time_us(allreduces_only, steps) / calls
    elif mode == "graph":
        g, out = graph_of(make_step(layers, reduce_nccl), x)
        g.replay()
        step_us = time_us(g.replay, steps)
        gc, _ = graph_of(make_step(layers, reduce_none), x)
        compute_us = time_us(gc.replay, steps)
        ga = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            allreduces_only()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(ga):
            allreduces_only()
        ar_us = time_us(ga.replay, steps) / calls
    else:  # compile
        compiled = torch.compile(make_step(layers, reduce_functional), mode="reduce-overhead")
        for _ in range(3):
            out = compiled(x)
        out = compiled(x).clone()
        step_us = time_us(lambda: compiled(x), steps)
        compute = torch.compile(make_step(layers, reduce_none), mode="reduce-overhead")
        for _ in range(3):
            compute(x)
        compute_us = time_us(lambda: compute(x), steps)
        ar_us = float("nan")  # the graph mode's number holds for these calls too
    torch.cuda.synchronize()
    say(f"TPD-DIGEST rank={rank} hidden={hidden} tokens={tokens} mode={mode} digest={digest(out)}")
    if rank == 0:
        say(f"TPD-TIME hidden={hidden} tokens={tokens} mode={mode} calls={calls} "
            f"step_us={step_us:.2f} compute_us={compute_us:.2f} allreduce_us={ar_us:.2f}")


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    # Ranks may share a GPU (the GPU suite gives NCCL a host id per rank where they do).
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    nlayers = int(os.environ.get("TPD_LAYERS", "4"))
    steps = int(os.environ.get("TPD_STEPS", "50"))
    modes = env_list("TPD_MODES", "eager,graph,compile")
    done = skipped = 0
    for hidden in (int(h) for h in env_list("TPD_HIDDEN", "4096,8192")):
        gen = torch.Generator(device=dev)
        gen.manual_seed(1000 + rank)  # each rank holds its own shard
        layers = [Layer(hidden, world, gen, dev) for _ in range(nlayers)]
        for tokens in (int(t) for t in env_list("TPD_TOKENS", "1,8,64")):
            xg = torch.Generator(device=dev)
            xg.manual_seed(7)  # the input is replicated: the same on every rank
            x = torch.randn(tokens, hidden, generator=xg, device=dev).to(torch.bfloat16)
            warm = make_step(layers, reduce_nccl)
            for _ in range(WARM_STEPS):
                warm(x)
            for mode in modes:
                try:
                    run_mode(mode, layers, x, hidden, tokens, nlayers, steps, rank)
                    done += 1
                except Exception as e:  # compile support varies by PyTorch version: say why
                    if mode != "compile":
                        raise
                    skipped += 1
                    if rank == 0:
                        say(f"TPD-SKIP hidden={hidden} tokens={tokens} mode={mode} "
                            f"reason={type(e).__name__}: {str(e).splitlines()[0][:200]}")
        del layers
        torch.cuda.empty_cache()
    say(f"tp_decode: rank {rank}: {done} runs, {skipped} skipped")
    say(f"RESULTS-DONE rank={rank}")  # what follows is teardown (the GPU suite bounds it apart)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
