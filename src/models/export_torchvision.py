#!/usr/bin/python3
"""Exports a torchvision video ResNet with random weights (and random batch-norm statistics) as
safetensors, plus an input and the logits torchvision computes for it, for the parity test.

usage: export_torchvision.py ARCH NUM_CLASSES OUT_DIR   (ARCH: r3d_18, mc3_18, r2plus1d_18)
Writes OUT_DIR/weights.safetensors and OUT_DIR/io.safetensors ("input", "logits").
"""
import json
import struct
import sys

import torch
import torchvision

DTYPES = {torch.float32: "F32", torch.int64: "I64"}


def save(tensors, path):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        data = t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    arch, classes, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    torch.manual_seed(0)
    model = getattr(torchvision.models.video, arch)(num_classes=classes)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm3d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    model.eval()
    x = torch.randn(2, 3, 8, 48, 48)
    with torch.no_grad():
        y = model(x)
    save(model.state_dict(), f"{out}/weights.safetensors")
    save({"input": x, "logits": y}, f"{out}/io.safetensors")


if __name__ == "__main__":
    main()
