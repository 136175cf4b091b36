#!/usr/bin/python3
"""The peer for bench/ddp_bench: PyTorch's DistributedDataParallel (gloo, one thread per rank)
training a torchvision video model on WORLD local processes with the same batch per rank.
usage: ddp_peer.py MODEL WORLD BATCH FRAMES SIZE STEPS [WIDTH L1 L2 L3 L4]
Prints rank 0's median step time in seconds (forward, backward with DDP's all-reduce, SGD)."""
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torchvision.models.video import resnet as vr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step_peer import small  # noqa: E402


def worker(rank, world, port, args, result):
    name, batch, frames, size, steps = args[0], *map(int, args[2:6])
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = vr.r2plus1d_18(num_classes=8) if name == "r2plus1d_18" else small(int(args[6]), list(map(int, args[7:11])))
    model.train()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    torch.manual_seed(1 + rank)
    x = torch.randn(batch, 3, frames, size, size)
    y = torch.randint(0, 8, (batch,))
    times = []
    for i in range(steps + 1):
        start = time.time()
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        if i > 0:
            times.append(time.time() - start)
    if rank == 0:
        result.put(statistics.median(times))
    dist.barrier()
    dist.destroy_process_group()


def main():
    world = int(sys.argv[2])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    result = ctx.SimpleQueue()
    mp.start_processes(worker, args=(world, port, sys.argv[1:], result), nprocs=world, join=True,
                       start_method="spawn")
    print(result.get())


if __name__ == "__main__":
    main()
