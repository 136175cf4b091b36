#!/usr/bin/python3
"""The peer for bench/loader_bench: the PyTorch DataLoader people write for video, decoding the
raw videos with PyAV (torchvision.io.read_video), sampling a clip, resizing, cropping and
normalising with torchvision, `workers` worker processes.

usage: torch_loader_peer.py WORKERS BATCH FRAMES STRIDE SIZE VIDEO...
Prints "<clips> <seconds>".
"""
import random
import sys
import time

import torch
import torchvision
from torch.utils.data import DataLoader, Dataset
from torchvision.io import read_video
import torchvision.transforms.functional as F

MEAN = torch.tensor([0.43216, 0.394666, 0.37645]).view(3, 1, 1, 1)
STD = torch.tensor([0.22803, 0.22145, 0.216989]).view(3, 1, 1, 1)


class Videos(Dataset):
    def __init__(self, paths, frames, stride, size):
        self.paths, self.frames, self.stride, self.size = paths, frames, stride, size

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        video, _, _ = read_video(self.paths[i], pts_unit="sec", output_format="TCHW")
        span = (self.frames - 1) * self.stride + 1
        start = random.randint(0, max(0, video.shape[0] - span))
        idx = [min(start + k * self.stride, video.shape[0] - 1) for k in range(self.frames)]
        clip = video[idx]                                     # T C H W uint8
        clip = F.resize(clip, [self.size], antialias=False)   # short side
        clip = F.center_crop(clip, [self.size, self.size])
        clip = clip.permute(1, 0, 2, 3).float() / 255.0       # C T H W
        return (clip - MEAN) / STD, i % 8


def main():
    workers, batch, frames, stride, size = (int(x) for x in sys.argv[1:6])
    paths = sys.argv[6:]
    torch.set_num_threads(1)
    loader = DataLoader(Videos(paths, frames, stride, size), batch_size=batch, shuffle=True,
                        num_workers=workers, drop_last=False)
    start = time.time()
    clips = 0
    for x, _ in loader:
        clips += x.shape[0]
    print(clips, time.time() - start)


if __name__ == "__main__":
    main()
