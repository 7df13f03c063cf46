#!/usr/bin/env python3
"""Synthetic stand-in for Fashion-MNIST, for machines without the real files
(bench/gpu_data.sh uses it when no idx files are found): the same four gzipped
idx files, names and shapes (60000 + 10000 images of 28x28 uint8, labels 0-9),
so `dlscale shard` and bench/pytorch_cnn.py read them as they read the real ones.
Each class is a fixed random image plus per-sample noise: the CNN can learn it,
so a broken training loop still shows as low accuracy, but the accuracy says
nothing about Fashion-MNIST.
    bench/synthetic_idx.py OUT_DIR [--seed 1]"""
import argparse, gzip, os, struct
import numpy as np


def write_idx(path, array):
    # idx header: two zero bytes, type 0x08 (unsigned byte), the number of axes, then each size big-endian.
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(struct.pack(">I", n) for n in array.shape)
    with gzip.open(path, "wb", compresslevel=1) as f:  # level 1: fast, the files only travel on disk
        f.write(header + array.astype(np.uint8).tobytes())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    templates = rng.integers(0, 256, size=(10, 28, 28), dtype=np.uint16)  # uint16: room for 3*255 + 2*255
    os.makedirs(a.out, exist_ok=True)
    for name, n in (("train", 60000), ("t10k", 10000)):
        labels = rng.integers(0, 10, size=n)
        noise = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint16)
        images = (templates[labels] * 3 + noise * 2) // 5  # 60 % signal, 40 % noise, stays within 0..255
        write_idx(os.path.join(a.out, f"{name}-images-idx3-ubyte.gz"), images)
        write_idx(os.path.join(a.out, f"{name}-labels-idx1-ubyte.gz"), labels)


if __name__ == "__main__":
    main()
