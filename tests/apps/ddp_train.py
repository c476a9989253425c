"""A small PyTorch DDP training run: symmpin must not change a single bit of its losses.

Run under torchrun, with and without LD_PRELOAD=libsymmpin.so; it prints one line per step with
the loss as a hex float, and a final digest line. Several small gradient buckets (bucket_cap_mb)
give several all-reduce call sites per step.
"""
import hashlib
import os

import torch
import torch.distributed as dist
import torch.nn as nn


def say(line):
    """One line in one write(2): ranks share the launcher's stdout, and print() may split a line."""
    os.write(1, (line + "\n").encode())


def main():
    steps = int(os.environ.get("DDP_STEPS", "60"))
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    # Ranks may share a GPU (the GPU suite gives NCCL a host id per rank where they do).
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    torch.manual_seed(1234)
    model = nn.Sequential(
        nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
        nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 16)).to(dev)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index], bucket_cap_mb=0.25)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    gen = torch.Generator(device="cpu").manual_seed(100 + rank)
    digest = hashlib.sha256()
    for step in range(steps):
        x = torch.randn(64, 256, generator=gen).to(dev)
        y = torch.randn(64, 16, generator=gen).to(dev)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        v = loss.item()
        digest.update(float(v).hex().encode())
        if rank == 0:
            say(f"step {step} loss {float(v).hex()}")
    # The parameters after training, bit for bit (they depend on every all-reduce result).
    for p in model.parameters():
        digest.update(p.detach().cpu().numpy().tobytes())
    say(f"DDP rank={rank} world={world} digest={digest.hexdigest()}")
    say(f"RESULTS-DONE rank={rank}")  # what follows is teardown (the GPU suite bounds it apart)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
