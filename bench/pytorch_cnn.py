#!/usr/bin/env python3
"""PyTorch baseline for bench/train_throughput.sh: the same network as an
examples/fashion-mnist config, the same batch, optimizer, precision and
threads, timed over one epoch of Fashion-MNIST. Prints samples/s."""
import argparse, gzip, time
import numpy as np
import torch
from torch import nn


def load_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2),
                         nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="cnn", choices=["cnn", "mlp"])
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--iterations", type=int, default=0, help="0: one epoch")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    x = torch.from_numpy(load_idx(f"{a.data}/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0).unsqueeze(1)
    y = torch.from_numpy(load_idx(f"{a.data}/train-labels-idx1-ubyte.gz").astype(np.int64))
    net = cnn() if a.model == "cnn" else mlp()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    iterations = a.iterations or len(x) // a.batch
    perm = torch.randperm(len(x))
    net.train()
    start = time.perf_counter()
    for i in range(iterations):
        idx = perm[(i * a.batch) % (len(x) - a.batch):][:a.batch]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x[idx]), y[idx])
        loss.backward()
        opt.step()
    elapsed = time.perf_counter() - start
    print(f"{iterations * a.batch / elapsed:.1f}")


if __name__ == "__main__":
    main()
