#!/usr/bin/python3
"""Writes the PyTorch reference fixtures that tests/test_reference.c checks ferry against.

  /usr/bin/python3 tests/ref/make_ref.py [OUT_DIR]     (default: this script's folder)

Run by hand, with Debian's torch (python3-torch, 1.13), when a case is added or
changed; the .safetensors files it writes are committed, so the test needs no
Python. Everything is float32 on the CPU, one thread, from fixed seeds, so a rerun
on the same torch gives the same bytes.

Files and names. One file per group (layers, losses, optim, train). A tensor is
named "<case>.<what>": inputs (x, dy, labels, target), parameters under their
state_dict names (ferry_module_param uses the same ones), outputs (y, loss,
logits), the input gradient (dx) and parameter gradients ("grad.<param>").
Each case's configuration is in the header's __metadata__ under the case's name,
in the words the test compares against its own, so the script and the test cannot
drift apart silently.

Layouts. ferry's Linear weight is [out, in] and its Conv2d weight
[out, in, kh, kw], the same as PyTorch's, so nothing is transposed. ferry's
AvgPool2d counts padding in the divisor (count_include_pad=True, PyTorch's
default) and has no other rule, so only that one is covered. Losses are means
(PyTorch's reduction="mean"): cross-entropy over the N rows, MSE over all
elements; ferry's dlogits/dpred are these gradients times grad_scale.

The safetensors format is written here with struct and json (little-endian data
after an 8-byte header length, the header padded with spaces to 8 bytes), so the
script needs nothing beyond torch.
"""
import json
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {torch.float32: ("F32", "<f4"), torch.int64: ("I64", "<i8")}


def write_safetensors(path, tensors, meta):
    """tensors: list of (name, tensor) in file order; meta: str -> str."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors:
        code, np_dtype = DTYPES[t.dtype]
        data = t.detach().contiguous().numpy().astype(np_dtype).tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


class Group:
    """The tensors and configurations of one fixture file."""

    def __init__(self):
        self.tensors, self.meta = [], {}

    def add(self, case, what, t):
        self.tensors.append((f"{case}.{what}", t.detach().clone()))

    def config(self, case, text):
        self.meta[case] = text


def randn(*shape, scale=1.0, shift=0.0):
    return torch.randn(*shape) * scale + shift


# ---- layers ----
def layer_case(g, case, config, module, x, seed):
    """Forward and backward of one layer with upstream gradient dy: y = m(x),
    dx and parameter gradients of sum(y * dy)."""
    torch.manual_seed(seed)
    for p in module.parameters():  # not PyTorch's init: values of both signs and scales
        with torch.no_grad():
            p.copy_(randn(*p.shape, scale=0.5))
    x = x.clone().requires_grad_(True)
    y = module(x)
    dy = randn(*y.shape)
    y.backward(dy)
    g.config(case, config)
    g.add(case, "x", x)
    for name, p in module.named_parameters():
        g.add(case, name, p)
    g.add(case, "y", y)
    g.add(case, "dy", dy)
    g.add(case, "dx", x.grad)
    for name, p in module.named_parameters():
        g.add(case, "grad." + name, p.grad)


def batchnorm_case(g):
    """Three training steps (outputs, gradients, running statistics after each),
    then evaluation. Channels get different means and scales so the running
    statistics move and the momentum convention shows."""
    case = "batchnorm"
    torch.manual_seed(40)
    bn = nn.BatchNorm2d(3, eps=1e-5, momentum=0.1)
    with torch.no_grad():
        bn.weight.copy_(randn(3, scale=0.5, shift=1.0))
        bn.bias.copy_(randn(3, scale=0.5))
    g.config(case, "BatchNorm2d(3, eps=1e-05, momentum=0.1), 3 training steps then eval")
    for name in ("weight", "bias", "running_mean", "running_var"):
        g.add(case, name, getattr(bn, name))
    shift = torch.tensor([0.5, -2.0, 3.0]).view(1, 3, 1, 1)
    scale = torch.tensor([1.0, 0.5, 2.5]).view(1, 3, 1, 1)
    for step in range(3):
        x = (torch.randn(4, 3, 5, 4) * scale + shift).requires_grad_(True)
        bn.zero_grad()
        y = bn(x)
        dy = randn(*y.shape)
        y.backward(dy)
        s = f"step{step}."
        for what, t in (("x", x), ("dy", dy), ("y", y), ("dx", x.grad), ("grad.weight", bn.weight.grad),
                        ("grad.bias", bn.bias.grad), ("running_mean", bn.running_mean),
                        ("running_var", bn.running_var)):
            g.add(case, s + what, t)
    bn.eval()
    x = torch.randn(2, 3, 5, 4) * scale + shift
    g.add(case, "eval.x", x)
    g.add(case, "eval.y", bn(x))


def dropout_case(g):
    """Dropout in evaluation mode is the identity."""
    torch.manual_seed(50)
    d = nn.Dropout(p=0.3).eval()
    x = torch.randn(3, 11)
    g.config("dropout", "Dropout(p=0.3), eval")
    g.add("dropout", "x", x)
    g.add("dropout", "y", d(x))


def layers():
    g = Group()
    torch.manual_seed(1)
    layer_case(g, "linear", "Linear(5, 3, bias)", nn.Linear(5, 3), torch.randn(2, 4, 5), 11)
    layer_case(g, "conv_s2p1", "Conv2d(3, 4, k=3, s=2, p=1, bias)", nn.Conv2d(3, 4, 3, stride=2, padding=1),
               torch.randn(2, 3, 7, 6), 12)
    layer_case(g, "conv_s1p2_nobias", "Conv2d(2, 3, k=3, s=1, p=2, no bias)",
               nn.Conv2d(2, 3, 3, stride=1, padding=2, bias=False), torch.randn(2, 2, 4, 5), 13)
    layer_case(g, "conv_k2s1p0", "Conv2d(2, 5, k=2, s=1, p=0, bias)", nn.Conv2d(2, 5, 2), torch.randn(1, 2, 5, 3),
               14)
    # Mostly negative inputs: windows that reach into the padding often hold only
    # negative values, where padding with 0 instead of -inf changes the maximum.
    neg = torch.randn(2, 3, 7, 6) - 1.5
    layer_case(g, "maxpool_k3s2p1", "MaxPool2d(k=3, s=2, p=1)", nn.MaxPool2d(3, 2, 1), neg, 21)
    layer_case(g, "maxpool_k2s2p1", "MaxPool2d(k=2, s=2, p=1)", nn.MaxPool2d(2, 2, 1), neg, 22)
    layer_case(g, "avgpool_k3s2p1", "AvgPool2d(k=3, s=2, p=1, count_include_pad=True)",
               nn.AvgPool2d(3, 2, 1, count_include_pad=True), torch.randn(2, 3, 7, 6), 23)
    layer_case(g, "avgpool_k2s1p1", "AvgPool2d(k=2, s=1, p=1, count_include_pad=True)",
               nn.AvgPool2d(2, 1, 1, count_include_pad=True), torch.randn(1, 2, 4, 5), 24)
    layer_case(g, "relu", "ReLU()", nn.ReLU(), torch.randn(3, 7), 30)
    batchnorm_case(g)
    dropout_case(g)
    return g


# ---- losses ----
def losses():
    g = Group()
    torch.manual_seed(2)
    # N=5 rows, C=7 classes: a mean over the wrong count shows.
    logits = (torch.randn(5, 7) * 2).requires_grad_(True)
    labels = torch.tensor([3, 0, 6, 2, 3], dtype=torch.int64)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    g.config("cross_entropy", "cross_entropy(logits [5, 7], labels [5]), reduction=mean")
    for what, t in (("logits", logits), ("labels", labels), ("loss", loss.reshape(1)), ("dlogits", logits.grad)):
        g.add("cross_entropy", what, t)
    pred = torch.randn(4, 6).requires_grad_(True)
    target = torch.randn(4, 6)
    loss = F.mse_loss(pred, target)
    loss.backward()
    g.config("mse", "mse_loss(pred [4, 6], target [4, 6]), reduction=mean")
    for what, t in (("pred", pred), ("target", target), ("loss", loss.reshape(1)), ("dpred", pred.grad)):
        g.add("mse", what, t)
    return g


# ---- optimisers: five steps of a Linear(4, 3)'s parameters from fixed gradients ----
OPTIMS = [
    ("sgd", "SGD(lr=0.1)", lambda p: torch.optim.SGD(p, lr=0.1)),
    ("sgd_momentum", "SGD(lr=0.1, momentum=0.9)", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
    ("sgd_nesterov", "SGD(lr=0.1, momentum=0.9, nesterov=True)",
     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True)),
    ("sgd_dampening", "SGD(lr=0.1, momentum=0.9, dampening=0.5)",
     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.5)),
    ("sgd_weight_decay", "SGD(lr=0.1, momentum=0.9, weight_decay=0.05)",
     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.05)),
    ("adam", "Adam(lr=0.01, betas=(0.9, 0.999), eps=1e-08)",
     lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.9, 0.999), eps=1e-8)),
    ("adam_weight_decay", "Adam(lr=0.01, betas=(0.8, 0.99), eps=1e-06, weight_decay=0.1)",
     lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("adamw", "AdamW(lr=0.01, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.1)",
     lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)),
]


def optims():
    g = Group()
    for k, (case, config, make) in enumerate(OPTIMS):
        torch.manual_seed(60 + k)
        lin = nn.Linear(4, 3)
        opt = make(lin.parameters())
        g.config(case, config + ", 5 steps")
        for name, p in lin.named_parameters():
            g.add(case, name, p)
        for step in range(5):
            # Gradients of varied sizes and signs, as a real run would give.
            for name, p in lin.named_parameters():
                p.grad = randn(*p.shape, scale=0.3 * (step + 1))
                g.add(case, f"step{step}.grad.{name}", p.grad)
            opt.step()
            for name, p in lin.named_parameters():
                g.add(case, f"step{step}.{name}", p)
    return g


# ---- one training step of samples/train_gray's models (samples/common.h) ----
def model_mlp(inputs, classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(inputs, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, classes))


def model_cnn(channels, height, width, classes):
    return nn.Sequential(nn.Conv2d(channels, 32, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64 * (height // 4) * (width // 4), 128), nn.ReLU(), nn.Linear(128, classes))


def train_case(g, case, config, net, seed):
    """zero_grad, forward, cross-entropy, backward, SGD step (train_gray's
    optimiser: momentum 0.9, weight decay 5e-4, lr 0.05), then the logits of the
    same batch under the new parameters. The parameters after the step are not
    stored (the file would pass 1 MiB): the test derives them from these
    parameters and gradients with SGD's first-step rule, which the sgd_* cases
    check against torch.optim.SGD, and logits_after checks them end to end."""
    torch.manual_seed(seed)
    x = torch.rand(4, 1, 4, 4).requires_grad_(True)  # normalised gray 4x4 images, batch 4
    labels = torch.tensor([7, 2, 2, 9], dtype=torch.int64)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    g.config(case, config)
    g.add(case, "x", x)
    g.add(case, "labels", labels)
    for name, p in net.named_parameters():
        g.add(case, name, p)
    opt.zero_grad()
    logits = net(x)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    opt.step()
    g.add(case, "logits", logits)
    g.add(case, "loss", loss.reshape(1))
    g.add(case, "dx", x.grad)
    for name, p in net.named_parameters():
        g.add(case, "grad." + name, p.grad)
    with torch.no_grad():
        g.add(case, "logits_after", net(x))


def train():
    g = Group()
    torch.manual_seed(70)
    train_case(g, "mlp", "model_mlp(16, 10), x [4, 1, 4, 4], SGD(lr=0.05, momentum=0.9, weight_decay=0.0005)",
               model_mlp(16, 10), 71)
    torch.manual_seed(72)
    train_case(g, "cnn", "model_cnn(1, 4, 4, 10), x [4, 1, 4, 4], SGD(lr=0.05, momentum=0.9, weight_decay=0.0005)",
               model_cnn(1, 4, 4, 10), 73)
    return g


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    total = 0
    for name, make in (("layers", layers), ("losses", losses), ("optim", optims), ("train", train)):
        g = make()
        meta = dict(g.meta, torch=torch.__version__)
        path = os.path.join(out, name + ".safetensors")
        write_safetensors(path, g.tensors, meta)
        total += os.path.getsize(path)
        print(f"{path}: {len(g.tensors)} tensors, {os.path.getsize(path)} bytes")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
