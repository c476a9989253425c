"""A tensor-parallel-style loop: many small all-reduces per step, eager and in a CUDA graph.

Each step all-reduces activations of several sizes (bf16 and fp32, 1 KiB .. 1 MiB). Inputs are
exact (quarter integers), so every result is checked exactly against the known sum. Then it
times each size eagerly and replayed from a CUDA graph, printing microseconds per call (rank 0).
PyTorch's dist.all_reduce is in place at the NCCL level (send == recv); tests/apps/allreduce_app.c
covers out-of-place calls.
"""
import os
import time

import torch
import torch.distributed as dist

SIZES = [1024, 4096, 16384, 65536, 262144, 1048576]  # bytes
WARM_CALLS = 600  # eager calls before a capture or a timing (symmpin plans at most every 512)


def say(line):
    """One line in one write(2): ranks share the launcher's stdout, and print() may split a line."""
    os.write(1, (line + "\n").encode())


def fill(t, rank, step, salt):
    n = t.numel()
    idx = torch.arange(n, device=t.device, dtype=torch.int64)
    k = (idx * 2654435761 + rank * 97 + step * 13 + salt * 7) % 17 - 8
    t.copy_(k.to(t.dtype) / 4)


def expected(t, world, step, salt):
    out = torch.zeros_like(t, dtype=torch.float64)
    tmp = torch.empty_like(t)
    for r in range(world):
        fill(tmp, r, step, salt)
        out += tmp.double()
    return out


def check_steps(dev, rank, world, steps):
    bufs = [torch.empty(b // es, dtype=dt, device=dev)
            for b in SIZES for dt, es in ((torch.bfloat16, 2), (torch.float32, 4))]
    bad = 0
    for step in range(steps):
        for i, t in enumerate(bufs):
            fill(t, rank, step, i)
            dist.all_reduce(t)
            if not torch.equal(t.double(), expected(t, world, step, i)):
                bad += 1
    return len(bufs) * steps - bad, bad


def check_graph(dev, rank, world, replays, stream):
    bufs = [torch.empty(b // 2, dtype=torch.bfloat16, device=dev) for b in SIZES]
    stream.wait_stream(torch.cuda.current_stream())
    # Warm the captured sequence eagerly on the stream the graph is captured on: a library that
    # plans by what it has seen (symmpin) then knows these calls when capture comes.
    with torch.cuda.stream(stream):
        for _ in range(WARM_CALLS // len(bufs) + 1):
            for t in bufs:
                dist.all_reduce(t)
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        for t in bufs:
            dist.all_reduce(t)
    bad = 0
    for rep in range(replays):
        for i, t in enumerate(bufs):
            fill(t, rank, 1000 + rep, i)
        g.replay()
        torch.cuda.synchronize()
        for i, t in enumerate(bufs):
            if not torch.equal(t.double(), expected(t, world, 1000 + rep, i)):
                bad += 1
    return len(bufs) * replays - bad, bad


def time_sizes(dev, stream, calls=200):
    rows = []
    for b in SIZES:
        t = torch.ones(b // 2, dtype=torch.bfloat16, device=dev)
        for _ in range(WARM_CALLS):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        eager = (time.perf_counter() - t0) * 1e6 / calls
        g = torch.cuda.CUDAGraph()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(WARM_CALLS):
                dist.all_reduce(t)
        torch.cuda.current_stream().wait_stream(stream)
        with torch.cuda.graph(g, stream=stream):
            for _ in range(calls):
                dist.all_reduce(t)
        g.replay()
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(5):
            g.replay()
        torch.cuda.synchronize()
        graph = (time.perf_counter() - t0) * 1e6 / (5 * calls)
        rows.append((b, eager, graph))
    return rows


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    # Ranks may share a GPU (the GPU suite gives NCCL a host id per rank where they do).
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    p1, f1 = check_steps(dev, rank, world, int(os.environ.get("TP_STEPS", "12")))
    side = torch.cuda.Stream()  # warm-up and capture stream of every graph
    p2, f2 = check_graph(dev, rank, world, 100, side)
    say(f"TP rank={rank} eager_checks passed={p1} failed={f1} graph_checks passed={p2} "
          f"failed={f2}")
    if os.environ.get("TP_TIME", "1") == "1":
        for b, e, g in time_sizes(dev, side):
            if rank == 0:
                say(f"tp-bench bytes={b} eager_us={e:.2f} graph_us={g:.2f}")
    say(f"tp_loop: {p1 + p2} passed, {f1 + f2} failed")
    say(f"RESULTS-DONE rank={rank}")  # what follows is teardown (the GPU suite bounds it apart)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
