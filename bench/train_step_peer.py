#!/usr/bin/python3
"""The peer for bench/train_bench: one forward+backward+SGD step of a torchvision video model in
Python PyTorch. usage: train_step_peer.py MODEL THREADS BATCH FRAMES SIZE STEPS [WIDTH L1 L2 L3 L4]
MODEL is r2plus1d_18, or r2plus1d_small with the width and block counts given (built from
torchvision's own classes). Prints the median step time in seconds."""
import statistics
import sys
import time

import torch
from torchvision.models.video import resnet as vr


def small(width, layers):
    class Stem(torch.nn.Sequential):
        def __init__(self):
            mid = max(1, (45 * width + 32) // 64)
            super().__init__(
                torch.nn.Conv3d(3, mid, (1, 7, 7), (1, 2, 2), (0, 3, 3), bias=False), torch.nn.BatchNorm3d(mid),
                torch.nn.ReLU(inplace=True),
                torch.nn.Conv3d(mid, width, (3, 1, 1), 1, (1, 0, 0), bias=False), torch.nn.BatchNorm3d(width),
                torch.nn.ReLU(inplace=True))
    model = vr.VideoResNet(vr.BasicBlock, [vr.Conv2Plus1D] * 4, layers, Stem, num_classes=8)
    # VideoResNet hard-codes 64 input planes and widths 64..512; rebuild the stages at `width`.
    model.inplanes = width
    model.layer1 = model._make_layer(vr.BasicBlock, vr.Conv2Plus1D, width, layers[0], stride=1)
    model.layer2 = model._make_layer(vr.BasicBlock, vr.Conv2Plus1D, 2 * width, layers[1], stride=2)
    model.layer3 = model._make_layer(vr.BasicBlock, vr.Conv2Plus1D, 4 * width, layers[2], stride=2)
    model.layer4 = model._make_layer(vr.BasicBlock, vr.Conv2Plus1D, 8 * width, layers[3], stride=2)
    model.fc = torch.nn.Linear(8 * width, 8)
    return model


def main():
    name, threads, batch, frames, size, steps = sys.argv[1], *map(int, sys.argv[2:7])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if name == "r2plus1d_18":
        model = vr.r2plus1d_18(num_classes=8)
    else:
        width, *layers = map(int, sys.argv[7:12])
        model = small(width, layers)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, frames, size, size)
    y = torch.randint(0, 8, (batch,))
    times = []
    for i in range(steps + 1):
        start = time.time()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if i > 0:
            times.append(time.time() - start)
    print(statistics.median(times))


if __name__ == "__main__":
    main()
