"""A PyTorch all-reduce workload for the pip-only check (scripts/pip-only-check.sh): under torchrun,
rank r on GPU LOCAL_RANK % GPUs, NCCL process group; eager all-reduces of four shapes on random
data (seeded per rank, so every run gets the same inputs) and the same in a replayed CUDA graph.
Prints per rank a digest of every result (sha256 of the bytes: runs with and without symmpin must
print the same lines) and which CUDA runtime and NCCL files the process has mapped
(/proc/self/maps), so the check can see that exactly one libcudart is loaded, the wheel's."""
import hashlib
import os

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
local = int(os.environ.get("LOCAL_RANK", rank))
dev = torch.device("cuda", local % torch.cuda.device_count())
torch.cuda.set_device(dev)
dist.init_process_group("nccl", device_id=dev)
gen = torch.Generator(device="cpu").manual_seed(1234 + rank)
shapes = [(256, torch.float32), (4096, torch.bfloat16), (16384, torch.float32), (65536, torch.bfloat16)]
digest = hashlib.sha256()
for it in range(int(os.environ.get("MAPS_ITERS", "60"))):
    for n, dt in shapes:
        x = torch.randn(n, generator=gen).to(dt).to(dev)
        dist.all_reduce(x)
        digest.update(x.cpu().view(torch.uint8).numpy().tobytes())
# A captured all-reduce, replayed.
g_in = torch.randn(4096, generator=gen).to(dev)
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):  # warm-up outside the capture, as torch.cuda.graph expects
        y = g_in.clone()
        dist.all_reduce(y)
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    y = g_in.clone()
    dist.all_reduce(y)
for _ in range(20):
    graph.replay()
    digest.update(y.cpu().view(torch.uint8).numpy().tobytes())
torch.cuda.synchronize()
print(f"MAPS-DIGEST rank={rank} {digest.hexdigest()}", flush=True)
seen = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libcudart" in l or "libnccl" in l})
print(f"MAPS-LIBS rank={rank} " + " ".join(seen), flush=True)
print("RESULTS-DONE", flush=True)
# The graph goes first: NCCL alone was seen to hang in destroy_process_group with a captured graph
# alive when ranks share a GPU over sockets (../shared/device-notes.md).
del graph
torch.cuda.synchronize()
dist.destroy_process_group()
