#!/usr/bin/env python3
"""PyTorch (CPU, float32) twins of examples/fashion-mnist/resnet.ini (ResNet-20)
and examples/text/transformer.ini (byte-level causal transformer), timed for
bench/compare_models.sh against `dlscale train` on the same data, batch,
steps and threads.

The network is translated from the config's own `input` and `layer` lines,
as dlscale's Network builds it (layers/network.cpp): each layer takes the
previous layer's output, or the layer named by input=NAME; `add from=NAME`
adds that layer's output to its input; unnamed layers are layer<i>, i from 1.
Translated kinds and what they become:

  conv2d        nn.Conv2d (bias= as given). padding=same is symmetric
                kernel//2 here (PyTorch's ResNet convention); dlscale's
                "same" puts the odd pixel of a stride-2 layer at the bottom
                and right (layers/conv2d.cpp). Same output shape and FLOPs.
  batchnorm     nn.BatchNorm2d / 1d (momentum 0.1, eps 1e-5, dlscale's defaults)
  relu, gelu    nn.ReLU, nn.GELU (exact erf form, as layers/activations.cpp)
  add           elementwise sum
  globalavgpool mean over H, W
  dense         nn.Linear over the flattened sample, or over the last axis
                with per_position=true
  embedding     nn.Embedding(vocab, dim) (the ids come as int64 here)
  posembedding  a learned T x C table added to every sample
  layernorm     nn.LayerNorm(C, eps 1e-5) over the last axis
  attention     one Linear C -> 3C (qkv, with bias), per-head softmax(Q K^T /
                sqrt(d)) V with the causal mask, one Linear C -> C (out, with
                bias): layers/attention.h
  softmax       left out: nn.CrossEntropyLoss fuses it (per position for
                token data: the mean over every token of the batch)

Parameters equal dlscale's learnables count (printed as `params`;
compare_models.sh checks it against dlscale's network table).

Training as the config says: sgdm (torch SGD, momentum; l2-regularization as
weight_decay on weights only, dlscale's regularize=true parameters: not on
biases, batch-norm or layer-norm terms, embeddings are weights) or adam
(torch Adam, betas (0.9, 0.999), eps 1e-8); gradient-threshold with
global-l2norm as clip_grad_norm_; the learning rate set every step from the
linear warm-up + cosine schedule; augment-crop-padding / augment-horizontal-
flip as a random crop of the zero-padded batch and a mirror with
probability 1/2 per sample, drawn on the batch in the training loop.

Data: a dlscale dataset folder (index.json + HDF5 shards, read with h5py and
held in memory; uint8 images scaled by 1/255 as dlscale does, token ids kept
as ids). Batches are taken in file order: batch i is samples i*B ... i*B+B-1,
what `dlscale train --shuffle never` feeds. --warmup steps on the first
batches, then --steps timed steps on the next ones (wrapping around the
data set if it is short).

Prints `key value` lines: params, samples_per_s, tokens_per_s (token data),
step_ms, cpu_ms_per_step (process CPU time per step, all threads).
"""
import argparse, json, math, os, time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = {"resnet": os.path.join(HERE, "..", "examples", "fashion-mnist", "resnet.ini"),
          "transformer": os.path.join(HERE, "..", "examples", "text", "transformer.ini")}


def read_config(path):
    """(input shape, [(kind, attrs)], {option: value}) of a dlscale config."""
    shape, layers, options = None, [], {}
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = (s.strip() for s in line.split("=", 1))
        if key == "input":
            shape = [int(d) for d in value.split("x")]
        elif key == "layer":
            kind, *attrs = value.split()
            layers.append((kind, dict(a.split("=", 1) for a in attrs)))
        else:
            options[key] = value
    return shape, layers, options


def flag(a, key, default):
    return a.get(key, default).lower() in ("true", "1", "yes")


class PosEmbedding(nn.Module):
    def __init__(self, t, c):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(t, c) * 0.02)

    def forward(self, x):
        return x + self.weight


class Attention(nn.Module):
    """layers/attention.h: [Q K V] = x Wqkv^T + b; per head softmax(Q K^T/sqrt(d)) V; y = O Wout^T + b."""

    def __init__(self, t, c, heads, causal):
        super().__init__()
        if c % heads:
            raise SystemExit(f"pytorch_models.py: width {c} is not divisible by {heads} heads")
        self.h, self.d = heads, c // heads
        self.qkv = nn.Linear(c, 3 * c)
        self.out = nn.Linear(c, c)
        for lin in (self.qkv, self.out):
            object.__setattr__(lin, "_owner", self)  # init_like_dlscale initializes them as attention
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1) if causal else None
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        n, t, c = x.shape
        q, k, v = self.qkv(x).view(n, t, 3, self.h, self.d).permute(2, 0, 3, 1, 4)  # each N x H x T x d
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.d))
        if self.mask is not None:
            s = s.masked_fill(self.mask, float("-inf"))
        o = torch.softmax(s, dim=-1) @ v  # N x H x T x d
        return self.out(o.transpose(1, 2).reshape(n, t, c))


class GlobalAvgPool(nn.Module):
    def forward(self, x):
        return x.mean(dim=(2, 3))


class Graph(nn.Module):
    """dlscale's Network: nodes in order, each with an input node (-1: the network input) and an optional add."""

    def __init__(self, shape, layers):
        super().__init__()
        self.mods = nn.ModuleList()
        self.wiring = []  # (input index, add-from index or None, module index or None)
        names, shapes = {}, []
        for i, (kind, a) in enumerate(layers):
            src = names[a["input"]] if "input" in a else i - 1
            s = list(shape) if src < 0 else list(shapes[src])
            mod, add = None, None
            if kind == "add":
                add = names[a["from"]]
                if shapes[add] != s:
                    raise SystemExit(f"pytorch_models.py: layer {i + 1} adds {shapes[add]} to {s}")
            elif kind == "conv2d":
                k, f, st = int(a["kernel"]), int(a["filters"]), int(a.get("stride", 1))
                pad = a.get("padding", "0")
                p = k // 2 if pad == "same" else int(pad)
                mod = nn.Conv2d(s[0], f, k, stride=st, padding=p, bias=flag(a, "bias", "true"))
                if pad == "same":
                    s = [f, -(-s[1] // st), -(-s[2] // st)]
                else:
                    s = [f, (s[1] + 2 * p - k) // st + 1, (s[2] + 2 * p - k) // st + 1]
            elif kind == "batchnorm":
                mod = (nn.BatchNorm2d if len(s) == 3 else nn.BatchNorm1d)(
                    s[0], eps=float(a.get("epsilon", 1e-5)), momentum=float(a.get("momentum", 0.1)))
            elif kind == "relu":
                mod = nn.ReLU()
            elif kind == "gelu":
                mod = nn.GELU()
            elif kind == "globalavgpool":
                mod, s = GlobalAvgPool(), [s[0]]
            elif kind == "dense":
                units = int(a["units"])
                if flag(a, "per_position", "false"):
                    mod, s = nn.Linear(s[-1], units, bias=flag(a, "bias", "true")), s[:-1] + [units]
                else:
                    mod = nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(s)), units, bias=flag(a, "bias", "true")))
                    s = [units]
            elif kind == "embedding":
                mod, s = nn.Embedding(int(a["vocab"]), int(a["dim"])), s + [int(a["dim"])]
            elif kind == "posembedding":
                mod = PosEmbedding(s[0], s[1])
            elif kind == "layernorm":
                mod = nn.LayerNorm(s[-1], eps=float(a.get("epsilon", 1e-5)))
            elif kind == "attention":
                mod = Attention(s[0], s[1], int(a["heads"]), flag(a, "causal", "false"))
            elif kind == "softmax":
                if i + 1 != len(layers):
                    raise SystemExit("pytorch_models.py: softmax must be the last layer")
            else:
                raise SystemExit(f"pytorch_models.py: layer kind '{kind}' is not translated")
            m = None
            if mod is not None:
                m = len(self.mods)
                self.mods.append(mod)
            self.wiring.append((src, add, m))
            names[a.get("name", f"layer{i + 1}")] = i
            shapes.append(s)
        self.output_shape = shapes[-1]

    def forward(self, x):
        outs = []
        for src, add, m in self.wiring:
            y = x if src < 0 else outs[src]
            if add is not None:
                y = y + outs[add]
            elif m is not None:
                y = self.mods[m](y)
            outs.append(y)
        return outs[-1]


def decayed(net):
    """dlscale's regularize=true parameters: conv/dense/attention weights and embeddings; no biases or norm terms."""
    decay, rest = [], []
    for mod in net.modules():
        for name, p in mod.named_parameters(recurse=False):
            weight = name == "weight" and not isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm))
            (decay if weight else rest).append(p)
    return decay, rest


def init_like_dlscale(net):
    """dlscale's initial distributions (not its draws): He-normal conv and dense weights (std sqrt(2/fan_in)),
    attention projections N(0, 1/C), embeddings and positional tables N(0, 0.02), zero biases, unit scales."""
    for mod in net.modules():
        if isinstance(mod, (nn.Conv2d, nn.Linear)) and not isinstance(getattr(mod, "_owner", None), Attention):
            fan_in = mod.weight[0].numel()
            nn.init.normal_(mod.weight, 0.0, math.sqrt(2.0 / fan_in))
            if mod.bias is not None:
                nn.init.zeros_(mod.bias)
        elif isinstance(mod, Attention):
            c = mod.out.in_features
            for lin in (mod.qkv, mod.out):
                nn.init.normal_(lin.weight, 0.0, math.sqrt(1.0 / c))
                nn.init.zeros_(lin.bias)
        elif isinstance(mod, nn.Embedding):
            nn.init.normal_(mod.weight, 0.0, 0.02)
        elif isinstance(mod, PosEmbedding):
            nn.init.normal_(mod.weight, 0.0, 0.02)


def load_dataset(folder):
    import h5py
    index = json.load(open(os.path.join(folder, "index.json")))
    xs, ys = [], []
    for shard in index["shards"]:
        with h5py.File(os.path.join(folder, shard["file"]), "r") as f:
            xs.append(f["samples"][...])
            ys.append(f["labels"][...])
    x, y = np.concatenate(xs), np.concatenate(ys).astype(np.int64)
    tokens = index.get("kind") == "tokens"
    if tokens:
        x = torch.from_numpy(x.astype(np.int64))
    elif x.dtype == np.uint8:
        x = torch.from_numpy(x.astype(np.float32) / np.float32(255))
    else:
        x = torch.from_numpy(x.astype(np.float32))
    return x, torch.from_numpy(y), tokens


def augment(x, pad, flip, gen):
    """Random crop of the zero-padded N x C x H x W batch, then a mirror with probability 1/2, per sample."""
    n, c, h, w = x.shape
    rows = torch.arange(h).expand(n, h)
    cols = torch.arange(w).expand(n, w)
    if pad:
        x = F.pad(x, (pad, pad, pad, pad))
        rows = rows + torch.randint(0, 2 * pad + 1, (n, 1), generator=gen)
        cols = cols + torch.randint(0, 2 * pad + 1, (n, 1), generator=gen)
    if flip:
        cols = torch.where(torch.rand(n, 1, generator=gen) < 0.5, cols.flip(1), cols)
    return x[torch.arange(n)[:, None, None, None], torch.arange(c)[None, :, None, None],
             rows[:, None, :, None], cols[:, None, None, :]]


def evaluate(net, folder, batch, device):
    """Mean cross-entropy per prediction (per token for token data) and accuracy on a dataset, in eval mode."""
    x, y, _ = load_dataset(folder)
    net.eval()
    loss_sum, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for start in range(0, len(x), batch):
            xb, yb = x[start:start + batch].to(device), y[start:start + batch].to(device)
            out = net(xb)
            out, yb = out.reshape(-1, out.shape[-1]), yb.reshape(-1)
            loss_sum += F.cross_entropy(out.double(), yb, reduction="sum").item()
            correct += (out.argmax(dim=1) == yb).sum().item()
            count += yb.numel()
    net.train()
    print(f"eval_loss {loss_sum / count:.4f}")
    print(f"eval_accuracy {correct / count:.4f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet", help="resnet, transformer, or a dlscale config file")
    p.add_argument("--data", help="dlscale dataset folder (default: the config's train-data)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=40, help="timed steps")
    p.add_argument("--warmup", type=int, default=8, help="untimed steps before them")
    p.add_argument("--batch", type=int, default=0, help="default: the config's mini-batch-size")
    p.add_argument("--epochs", type=int, default=0,
                   help="length of the cosine schedule in epochs of --data (default: the config's max-epochs)")
    p.add_argument("--params-only", action="store_true", help="print the parameter count and stop")
    p.add_argument("--init", choices=("dlscale", "pytorch"), default="dlscale",
                   help="initial distributions: dlscale's (default) or PyTorch's module defaults")
    p.add_argument("--device", default="cpu", help="cpu or cuda (batches are moved there step by step)")
    p.add_argument("--train-epochs", type=int, default=0,
                   help="quality mode: train this many whole epochs of --data in file order (no --warmup/--steps "
                        "timing), then evaluate on --eval")
    p.add_argument("--eval", help="quality mode: dataset folder to report the mean loss per prediction and the "
                                  "accuracy on after training")
    a = p.parse_args()
    config = MODELS.get(a.model, a.model)
    shape, layers, opt = read_config(config)
    torch.set_num_threads(a.threads)
    torch.manual_seed(int(opt.get("seed", 1)))
    device = torch.device(a.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 as dlscale computes it
        torch.backends.cudnn.allow_tf32 = False
    net = Graph(shape, layers)
    if a.init == "dlscale":
        init_like_dlscale(net)
    net = net.to(device)
    params = sum(q.numel() for q in net.parameters())
    print(f"params {params}")
    if a.params_only:
        return

    x, y, tokens = load_dataset(a.data or opt["train-data"])
    if list(x.shape[1:]) != shape:
        raise SystemExit(f"pytorch_models.py: {a.data} has samples {list(x.shape[1:])}, the network takes {shape}")
    batch = a.batch or int(opt.get("mini-batch-size", 128))
    steps_per_epoch = len(x) // batch
    if steps_per_epoch < 1:
        raise SystemExit(f"pytorch_models.py: {a.data} holds fewer than {batch} samples")

    lr0 = float(opt.get("initial-learn-rate", 0.01))
    decay, rest = decayed(net)
    l2 = float(opt.get("l2-regularization", 1e-4))
    groups = [{"params": decay, "weight_decay": l2}, {"params": rest, "weight_decay": 0.0}]
    solver = opt.get("solver", "sgdm")
    if solver == "sgdm":
        optim = torch.optim.SGD(groups, lr=lr0, momentum=float(opt.get("momentum", 0.9)))
    elif solver == "adam":
        optim = torch.optim.Adam(groups, lr=lr0, betas=(float(opt.get("gradient-decay-factor", 0.9)),
                                                       float(opt.get("squared-gradient-decay-factor", 0.999))),
                                 eps=float(opt.get("epsilon", 1e-8)))
    else:
        raise SystemExit(f"pytorch_models.py: solver {solver} is not translated")
    clip = float(opt.get("gradient-threshold", "inf"))
    if math.isfinite(clip) and opt.get("gradient-threshold-method", "l2norm") != "global-l2norm":
        raise SystemExit("pytorch_models.py: only gradient-threshold-method = global-l2norm is translated")
    warm = int(opt.get("warmup-iterations", 0))
    total = (a.epochs or int(opt.get("max-epochs", 30))) * steps_per_epoch
    lr_min = float(opt.get("min-learn-rate", 0))
    cosine = opt.get("learn-rate-schedule", "none") == "cosine"

    def learn_rate(it):  # 1-based iteration
        if it <= warm:
            return lr0 * it / warm
        if not cosine:
            return lr0
        done = min(1.0, (it - warm) / max(1, total - warm))
        return lr_min + 0.5 * (lr0 - lr_min) * (1 + math.cos(math.pi * done))

    crop = 0 if tokens else int(opt.get("augment-crop-padding", 0))
    flip = not tokens and opt.get("augment-horizontal-flip", "false") == "true"
    gen = torch.Generator().manual_seed(int(opt.get("seed", 1)))
    loss_fn = nn.CrossEntropyLoss()
    net.train()
    it, last_loss = 0, float("nan")

    def steps(n):
        nonlocal it, last_loss
        for _ in range(n):
            start = (it % steps_per_epoch) * batch
            it += 1
            xb, yb = x[start:start + batch], y[start:start + batch]
            if crop or flip:
                xb = augment(xb, crop, flip, gen)
            xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
            for g in optim.param_groups:
                g["lr"] = learn_rate(it)
            optim.zero_grad(set_to_none=True)
            out = net(xb)
            loss = loss_fn(out.reshape(-1, out.shape[-1]), yb.reshape(-1))
            loss.backward()
            if math.isfinite(clip):
                nn.utils.clip_grad_norm_(net.parameters(), clip)
            optim.step()
            last_loss = loss.item()  # dlscale reads its loss every step too
            if not math.isfinite(last_loss):
                raise SystemExit(f"pytorch_models.py: the loss became non-finite at step {it}")

    if a.train_epochs:
        if a.epochs and a.epochs != a.train_epochs:
            raise SystemExit("pytorch_models.py: --epochs and --train-epochs differ")
        t0 = time.perf_counter()
        steps(a.train_epochs * steps_per_epoch)
        if device.type == "cuda":
            torch.cuda.synchronize()
        print(f"train_s {time.perf_counter() - t0:.1f}")
        print(f"steps {it}")
        print(f"last_loss {last_loss:.4f}")
        if a.eval:
            evaluate(net, a.eval, batch, device)
        return
    steps(a.warmup)
    t0, c0 = time.perf_counter(), time.process_time()
    steps(a.steps)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"samples_per_s {a.steps * batch / wall:.2f}")
    if tokens:
        print(f"tokens_per_s {a.steps * batch * x.shape[1] / wall:.1f}")
    print(f"step_ms {wall / a.steps * 1e3:.2f}")
    print(f"cpu_ms_per_step {cpu / a.steps * 1e3:.2f}")
    print(f"last_loss {last_loss:.4f}")


if __name__ == "__main__":
    main()
