"""Overlap: how much a stream of all-reduces slows a GEMM running at the same time (issue 11 item 3).

A data-parallel step overlaps gradient all-reduces (a communication stream) with compute (the
default stream). An all-reduce kernel holds SMs while it moves data and while it waits for its
peers; whatever it holds, the GEMM cannot use. Run the same script with and without the preload:
the slowdowns, side by side, say whether symmpin's kernels cost the compute more than NCCL's.

Per all-reduce size, on every rank:
  1. the GEMM alone: GEMMS back-to-back bf16 matmuls (M = N = K = OVL_GEMM) on the default
     stream, timed with CUDA events;
  2. the same GEMMs while a communication stream runs all-reduces of that size back to back, as
     many as last about as long as the GEMMs (calibrated from the all-reduce alone), enqueued
     right after the GEMMs (eagerly, as a data-parallel step issues them);
  3. the all-reduces alone (time per call).
Rank 0 prints
  OVL-TIME bytes=B gemm_alone_us=G gemm_with_us=W slowdown=W/G allreduce_us=A calls=C
and every rank
  OVL-DIGEST rank=R bytes=B digest=D     (sha256 of one more all-reduce's output and the GEMM's:
                                          the same with and without symmpin)
Inputs are random (seeded per rank), never zeros; each all-reduce's input is refreshed from a
pool so that a wrong sum would show in the digest.

Environment: OVL_SIZES (bytes, default "65536,1048576"), OVL_GEMM (4096), OVL_GEMMS (20),
OVL_ROUNDS (5: the median of rounds is printed), OVL_WARM (all-reduces before timing, 600:
symmpin plans, probes and measures within them).
"""
import hashlib
import os
import statistics

import torch
import torch.distributed as dist


def say(line):
    """One line in one write(2): ranks share the launcher's stdout."""
    os.write(1, (line + "\n").encode())


def env_ints(name, default):
    return [int(s) for s in os.environ.get(name, default).split(",") if s.strip()]


def elapsed_us(start, end):
    end.synchronize()
    return start.elapsed_time(end) * 1000.0


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    # Ranks may share a GPU (the GPU suite gives NCCL a host id per rank where they do).
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    n = env_ints("OVL_GEMM", "4096")[0]
    gemms = env_ints("OVL_GEMMS", "20")[0]
    rounds = env_ints("OVL_ROUNDS", "5")[0]
    warm = env_ints("OVL_WARM", "600")[0]
    gen = torch.Generator(device=dev).manual_seed(1234 + rank)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=gen)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=gen)
    c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    comm = torch.cuda.Stream(device=dev)
    ev = lambda: torch.cuda.Event(enable_timing=True)

    def gemm_run():
        s, e = ev(), ev()
        s.record()
        for _ in range(gemms):
            torch.matmul(a, b, out=c)
        e.record()
        return s, e

    for nbytes in env_ints("OVL_SIZES", "65536,1048576"):
        count = max(1, nbytes // 2)
        pool = torch.randn(8, count, device=dev, dtype=torch.bfloat16, generator=gen)
        x = torch.empty(count, device=dev, dtype=torch.bfloat16)

        def allreduce_run(calls):
            """`calls` all-reduces on the communication stream, each of a fresh input."""
            with torch.cuda.stream(comm):
                s, e = ev(), ev()
                s.record(comm)
                for i in range(calls):
                    x.copy_(pool[i % 8])
                    dist.all_reduce(x)
                e.record(comm)
            return s, e

        allreduce_run(warm)  # warm-up: symmpin plans this site, probes and measures it
        torch.cuda.synchronize()
        gemm_run()
        torch.cuda.synchronize()
        alone, withc, ar = [], [], []
        calls = 0
        for r in range(rounds):
            s, e = allreduce_run(200)
            per_call = elapsed_us(s, e) / 200
            ar.append(per_call)
            s, e = gemm_run()
            g = elapsed_us(s, e)
            alone.append(g)
            # Enough all-reduces to cover the GEMMs (the same number on every rank: rank 0's
            # calibration, broadcast, as NCCL needs every rank to make the same calls).
            want = torch.tensor([int(g / max(per_call, 0.5)) + 1], device=dev)
            dist.broadcast(want, 0)
            calls = int(want.item())
            torch.cuda.synchronize()
            # The GEMMs first (a few launches), then the all-reduces, which the host enqueues
            # while the GPU is busy with the GEMMs: they run side by side.
            s, e = gemm_run()
            allreduce_run(calls)
            withc.append(elapsed_us(s, e))
            torch.cuda.synchronize()
        g_alone, g_with = statistics.median(alone), statistics.median(withc)
        if rank == 0:
            say(f"OVL-TIME bytes={nbytes} gemm_alone_us={g_alone:.1f} gemm_with_us={g_with:.1f} "
                f"slowdown={g_with / g_alone:.3f} allreduce_us={statistics.median(ar):.2f} "
                f"calls={calls}")
        x.copy_(pool[0])  # the digest's all-reduce: the same input whatever the calibration
        dist.all_reduce(x)
        digest = hashlib.sha256(x.cpu().view(torch.int16).numpy().tobytes() +
                                c[:64].cpu().view(torch.int16).numpy().tobytes()).hexdigest()[:16]
        say(f"OVL-DIGEST rank={rank} bytes={nbytes} digest={digest}")
    say(f"RESULTS-DONE rank={rank}")  # what follows is teardown (the GPU suite bounds it apart)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
