#!/usr/bin/python3
"""Writes tests/ref/embedding.safetensors, the PyTorch fixtures tests/test_embedding.c
checks ferry's Embedding layer against.

  /usr/bin/python3 tests/ref/make_embedding_ref.py [OUT_DIR]   (default: this script's folder)

Run by hand with Debian's torch (python3-torch, 1.13) when a case changes; the
file is committed, so the test needs no Python. Float32 on the CPU, one thread,
fixed seeds. Same conventions as make_ref.py: a tensor is "<case>.<what>" (x:
the indices, weight, y, dy, grad.weight), each case's configuration is in the
header's __metadata__ under its name, and the safetensors format is written
with struct and json.

Cases:
  embed_i64  Embedding(11, 5), i64 indices [3, 7] that repeat (every table row
             but two is used, some many times): the gradient of a repeated
             index is the sum of its rows.
  embed_i32  Embedding(300, 3), i32 indices [64]: a table larger than 256 rows,
             so the GPU's radix sort takes two passes.
  mlp        the makemore MLP of samples/train_chars.c, small: Embedding(27, 4),
             a context of 3, Flatten, Linear(12, 16), ReLU, Linear(16, 27),
             cross-entropy over 10 rows; the loss and every parameter's gradient.
"""
import json
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {torch.float32: ("F32", "<f4"), torch.int64: ("I64", "<i8"), torch.int32: ("I32", "<i4")}


def write_safetensors(path, tensors, meta):
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


tensors, meta = [], {}


def add(case, what, t):
    tensors.append((f"{case}.{what}", t.detach().clone()))


def embed_case(case, num, dim, idx, seed):
    torch.manual_seed(seed)
    m = nn.Embedding(num, dim)
    with torch.no_grad():
        m.weight.copy_(torch.randn(num, dim) * 0.5)
    y = m(idx.long())
    dy = torch.randn(*y.shape)
    y.backward(dy)
    meta[case] = f"Embedding({num}, {dim}), indices {list(idx.shape)} {str(idx.dtype).replace('torch.', '')}"
    add(case, "x", idx)
    add(case, "weight", m.weight)
    add(case, "y", y)
    add(case, "dy", dy)
    add(case, "grad.weight", m.weight.grad)


def mlp_case():
    case = "mlp"
    torch.manual_seed(7)
    net = nn.Sequential(nn.Embedding(27, 4), nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 27))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(*p.shape) * 0.5)
    x = torch.randint(0, 27, (10, 3))
    labels = torch.randint(0, 27, (10,))
    loss = F.cross_entropy(net(x), labels)
    loss.backward()
    meta[case] = "Embedding(27, 4), Flatten, Linear(12, 16), ReLU, Linear(16, 27); x [10, 3]; cross-entropy"
    add(case, "x", x)
    add(case, "labels", labels)
    for name, p in net.named_parameters():
        add(case, name, p)
    add(case, "loss", loss.reshape(1))
    for name, p in net.named_parameters():
        add(case, "grad." + name, p.grad)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(1)
    idx = torch.randint(0, 9, (3, 7))  # rows 9 and 10 unused
    idx[0, :4] = 3                      # one index many times
    embed_case("embed_i64", 11, 5, idx, 11)
    idx32 = torch.randint(0, 300, (64,)).to(torch.int32)
    idx32[::5] = 257
    embed_case("embed_i32", 300, 3, idx32, 12)
    mlp_case()
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(out, "embedding.safetensors")
    write_safetensors(path, tensors, meta)
    print(path)


if __name__ == "__main__":
    main()
