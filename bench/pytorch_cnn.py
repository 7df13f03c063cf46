#!/usr/bin/env python3
"""PyTorch baseline for bench/run.sh and bench/train_throughput.sh: the network
of a dlscale config file (its `input` and `layer` lines, translated layer by
layer), the same batch, optimizer (Adam, no weight decay), precision (float32)
and threads, on Fashion-MNIST held in memory. Prints samples/s: the median over
--repeats blocks of --iterations steps (0: one epoch), after --warmup steps;
with --cpu a second line gives the process CPU time per step in ms (all
threads), the figure that other work on a shared machine disturbs least.

--device cuda (bench/gpu_check.sh) holds the whole data set on the GPU, so no
batch is copied from the host; it turns TF32 off (float32 math, as dlscale's
GPU path: PyTorch's cuDNN default would use TF32), turns cudnn.benchmark on
(PyTorch's best setting for fixed shapes), and times with
torch.cuda.synchronize() around each block. --autocast bf16|fp16 trains under
torch.autocast (fp16 with a GradScaler): PyTorch's automatic-mixed figure."""
import argparse, gzip, os, statistics, time
import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


def load_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def read_config(path):
    """The input shape and layer lines of a dlscale config."""
    shape, layers = None, []
    for line in open(path):
        if line.startswith("#") or "=" not in line:
            continue
        key, value = (s.strip() for s in line.split("=", 1))
        if key == "input":
            shape = [int(d) for d in value.split("x")]
        elif key == "layer":
            kind, *attrs = value.split()
            layers.append((kind, dict(a.split("=", 1) for a in attrs)))
    return shape, layers


def build(shape, layers):
    """nn.Sequential of the dlscale layers (softmax excluded: CrossEntropyLoss fuses it)."""
    mods, shape = [], list(shape)
    for kind, a in layers:
        if kind == "conv2d":
            k, f = int(a["kernel"]), int(a["filters"])
            if int(a.get("stride", 1)) != 1 or a.get("padding", "0") not in ("same", str(k // 2)) or k % 2 == 0:
                raise SystemExit(f"pytorch_cnn.py: only stride-1, odd-kernel 'same' conv2d is translated, got {a}")
            mods.append(nn.Conv2d(shape[0], f, k, padding=k // 2, bias=a.get("bias", "true") == "true"))
            shape[0] = f
        elif kind in ("maxpool", "avgpool"):
            s = int(a["size"])
            if int(a.get("stride", s)) != s or int(a.get("padding", 0)) != 0:
                raise SystemExit(f"pytorch_cnn.py: only non-overlapping pooling is translated, got {a}")
            mods.append((nn.MaxPool2d if kind == "maxpool" else nn.AvgPool2d)(s))
            shape = [shape[0], shape[1] // s, shape[2] // s]
        elif kind == "dense":
            if len(shape) > 1:
                mods.append(nn.Flatten())
                shape = [int(np.prod(shape))]
            mods.append(nn.Linear(shape[0], int(a["units"]), bias=a.get("bias", "true") == "true"))
            shape = [int(a["units"])]
        elif kind == "relu":
            mods.append(nn.ReLU())
        elif kind == "batchnorm":
            mods.append(nn.BatchNorm2d(shape[0]) if len(shape) == 3 else nn.BatchNorm1d(shape[0]))
        elif kind == "dropout":
            mods.append(nn.Dropout(float(a.get("rate", 0.5))))
        elif kind == "flatten":
            mods.append(nn.Flatten())
            shape = [int(np.prod(shape))]
        elif kind == "softmax":
            pass
        else:
            raise SystemExit(f"pytorch_cnn.py: layer kind '{kind}' is not translated")
    return nn.Sequential(*mods)


def strict_float32():
    """No TF32 in convolutions or matrix products: float32 math as in dlscale."""
    if hasattr(torch.backends, "fp32_precision"):  # PyTorch 2.9 and later; mixing in the old flags is refused
        torch.backends.fp32_precision = "ieee"
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        torch.backends.cudnn.conv.fp32_precision = "ieee"
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="cnn",
                   help="a dlscale config file, or cnn/mlp for examples/fashion-mnist/<model>.ini")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--iterations", type=int, default=0, help="steps per timed block; 0: one epoch")
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--cpu", action="store_true", help="also print CPU ms per step")
    p.add_argument("--device", default="cpu", help="cpu or cuda (data held on the GPU)")
    p.add_argument("--autocast", choices=["none", "bf16", "fp16"], default="none",
                   help="cuda: train under torch.autocast in this type (default none: float32)")
    a = p.parse_args()
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    if a.autocast != "none" and not cuda:
        p.error("--autocast is for --device cuda")
    if cuda:
        strict_float32()
        torch.backends.cudnn.benchmark = True
    config = a.model if os.path.isfile(a.model) else os.path.join(HERE, "..", "examples", "fashion-mnist",
                                                                 a.model + ".ini")
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    x = torch.from_numpy(load_idx(f"{a.data}/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0).unsqueeze(1)
    y = torch.from_numpy(load_idx(f"{a.data}/train-labels-idx1-ubyte.gz").astype(np.int64))
    net = build(*read_config(config)).to(device)
    x, y = x.to(device), y.to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    iterations = a.iterations or len(x) // a.batch
    perm = torch.randperm(len(x)).to(device)
    amp_type = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.autocast)
    # fp16 needs loss scaling; bf16 has float32's range and needs none.
    scaler = torch.amp.GradScaler("cuda") if a.autocast == "fp16" else None
    net.train()
    step_no = 0

    def steps(n):
        nonlocal step_no
        for _ in range(n):
            idx = perm[(step_no * a.batch) % (len(x) - a.batch):][:a.batch]
            step_no += 1
            opt.zero_grad(set_to_none=True)
            if amp_type is None:
                loss = loss_fn(net(x[idx]), y[idx])
                loss.backward()
                opt.step()
            else:
                with torch.autocast(device_type=device.type, dtype=amp_type):
                    loss = loss_fn(net(x[idx]), y[idx])
                if scaler:
                    scaler.scale(loss).backward()
                    scaler.step(opt)
                    scaler.update()
                else:
                    loss.backward()
                    opt.step()

    def sync():
        # CUDA calls return before the GPU is done: wait for it before reading the clock.
        if cuda:
            torch.cuda.synchronize()

    steps(a.warmup)
    rates, cpu = [], []
    for _ in range(a.repeats):
        sync()
        start, cpu0 = time.perf_counter(), time.process_time()
        steps(iterations)
        sync()
        rates.append(iterations * a.batch / (time.perf_counter() - start))
        cpu.append((time.process_time() - cpu0) / iterations * 1e3)
    print(f"{statistics.median(rates):.1f}")
    if a.cpu:
        print(f"{statistics.median(cpu):.3f}")


if __name__ == "__main__":
    main()
