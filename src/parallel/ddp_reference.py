#!/usr/bin/python3
"""PyTorch's own DistributedDataParallel (gloo), as the reference for Reel's reducer.

usage: ddp_reference.py OUT_DIR [STEPS]
Writes OUT_DIR/init.safetensors (ParityNet below, seed 0), OUT_DIR/batches.safetensors
("input.S", "label.S": the global batch of step S, 4 clips; rank R trains on clips 2R and 2R+1),
then trains 2 processes with DDP (small buckets so there are several, buffers broadcast, SGD lr
0.05 momentum 0.9) and writes rank 0's final state to OUT_DIR/ddp.safetensors.

ParityNet is a small 3D CNN with one batch norm, defined the same way in ddp_parity_test.cc.
Deep batch-norm networks are a poor parity target: on torchvision's R(2+1)D-18 with a batch of 2,
PyTorch's own float32 gradients of the stem differ by about 1% from float64's (and from its own
with MKL-DNN off), so two correct implementations only agree bit for bit with identical kernels.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from export_torchvision import save  # noqa: E402  (safetensors writer)

WORLD = 2
PER_RANK = 2


class ParityNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv3d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm3d(8)
        self.conv2 = torch.nn.Conv3d(8, 16, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(16, 4)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.conv2(x)).mean((2, 3, 4))
        return self.fc(x)


def worker(rank, out, steps, init, batches):
    torch.set_num_threads(1)
    # Rendezvous through a file, not a port picked here and bound later by rank 0: another test
    # running beside this one could take that port in between, and rank 1 then waited for a
    # rank 0 that never came (gloo's default timeout is 30 minutes). Gloo binds its own ports.
    dist.init_process_group("gloo", init_method=f"file://{out}/rendezvous", rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=120))
    model = ParityNet()
    model.load_state_dict(init)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.004)
    sgd = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    for s in range(steps):
        x = batches[f"input.{s}"][rank * PER_RANK:(rank + 1) * PER_RANK]
        y = batches[f"label.{s}"][rank * PER_RANK:(rank + 1) * PER_RANK]
        sgd.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        sgd.step()
    if rank == 0:
        save(model.state_dict(), f"{out}/ddp.safetensors")
    dist.barrier()
    dist.destroy_process_group()


def main():
    out = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    torch.manual_seed(0)
    model = ParityNet()
    init = {k: v.clone() for k, v in model.state_dict().items()}
    batches = {}
    for s in range(steps):
        batches[f"input.{s}"] = torch.randn(WORLD * PER_RANK, 3, 4, 16, 16)
        batches[f"label.{s}"] = torch.randint(0, 4, (WORLD * PER_RANK,))
    save(init, f"{out}/init.safetensors")
    save(batches, f"{out}/batches.safetensors")
    mp.spawn(worker, args=(out, steps, init, batches), nprocs=WORLD, join=True)


if __name__ == "__main__":
    main()
