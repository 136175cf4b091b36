#!/usr/bin/env python3
"""How small a lossless delta of registry_bench's checkpoints could be: empirical entropies of the
residuals the registry's chunk codec compresses (docs/performance.md, the model registry).

  bench/registry_entropy.py DIR      (DIR/versions/*.safetensors: registry_bench --keep --work DIR)

For (a) run-8 against run-7 extrapolated from run-6 (the linear form at depth 8) and (c) the full
fine-tune against the base (the difference form), over the tensors of 4096 elements and more:
  - order-0 entropy of each byte plane of the zigzagged residual, per 4 MiB chunk (what a perfect
    coder of the planes zstd compresses would store);
  - the residual's bit length coded given the base element's exponent, the bits below its leading
    one stored raw (a per-element model that zstd cannot express);
  - the same with the next 6 bits below the leading one modelled too.
Each as a share of the F32 bytes. Needs numpy (Debian: python3-numpy).
"""
import json
import struct
import sys

import numpy as np

CHUNK = 1 << 20  # elements in a 4 MiB chunk


def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.uint32)
            for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32"}


def entropy_bits(symbols, alphabet):
    counts = np.bincount(symbols, minlength=alphabet).astype(np.float64)
    p = counts[counts > 0] / symbols.size
    return -(p * np.log2(p)).sum() * symbols.size


def conditional_bits(symbols, context, alphabet, contexts):
    return entropy_bits(context * alphabet + symbols, alphabet * contexts) - entropy_bits(context, contexts)


def zigzag(d):
    d = d.astype(np.int64).astype(np.uint32)
    return d << np.uint32(1) ^ (d.view(np.int32) >> 31).view(np.uint32)


def bit_length(r):
    return np.where(r == 0, 0, np.floor(np.log2(np.maximum(r.astype(np.float64), 1))) + 1).astype(np.int64)


def figures(residual, exponent):
    planes = modelled = modelled6 = 0.0
    for s in range(0, residual.size, CHUNK):
        r, e = residual[s:s + CHUNK], np.clip(exponent[s:s + CHUNK].astype(np.int64) - 100, 0, 31)
        for p in range(4):
            planes += entropy_bits(((r >> np.uint32(8 * p)) & np.uint32(255)).astype(np.int64), 256)
        length = bit_length(r)
        modelled += conditional_bits(length, e, 33, 32) + np.maximum(length - 1, 0).sum()
        shift = np.maximum(length - 7, 0)
        top = (r.astype(np.int64) >> shift) & 63
        modelled6 += conditional_bits(length * 64 + top, e, 33 * 64, 32) + shift.sum()
    total = residual.size * 32
    return [100 * x / total for x in (planes, modelled, modelled6)]


def residuals(target, base, before=None):
    rs, es = [], []
    for name, t in target.items():
        if t.size < 4096:
            continue
        b = base[name].astype(np.int64)
        predicted = b if before is None else 2 * b - before[name].astype(np.int64)
        rs.append(zigzag(t.astype(np.int64) - predicted))
        es.append((base[name] >> np.uint32(23)) & np.uint32(255))
    return np.concatenate(rs), np.concatenate(es)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    v = lambda name: load(f"{sys.argv[1]}/versions/{name}.safetensors")
    cases = [("(a) run-8, linear on run-7 and run-6", residuals(v("run-8"), v("run-7"), v("run-6"))),
             ("(c) full fine-tune, difference on the base", residuals(v("full"), v("base")))]
    print(f"{'residual':44s} {'planes, order 0':>16s} {'bit length | exp':>17s} {'+ 6 bits':>9s}")
    for label, (r, e) in cases:
        a, b, c = figures(r, e)
        print(f"{label:44s} {a:15.2f}% {b:16.2f}% {c:8.2f}%")


if __name__ == "__main__":
    main()
