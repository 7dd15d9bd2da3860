#!/usr/bin/python3
"""PyTorch reference for samples/bench_mlp.c: the same Fashion-MNIST MLP
(784-256-128-10, batch 256, SGD lr 0.01 momentum 0.9), one epoch timed the same
way (batch gather, u8 -> f32 / 255, forward, cross-entropy, backward, step).

    OPENBLAS_NUM_THREADS=2 /usr/bin/python3 bench/mlp_torch.py [idx-folder] [epochs]
"""
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(folder, name):
    path = os.path.join(folder, name + ".gz")
    opener = gzip.open if os.path.exists(path) else open
    if opener is open:
        path = os.path.join(folder, name)
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/datasets/fashion-mnist"
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    torch.set_num_threads(2)
    torch.manual_seed(0)
    x_train = read_idx(folder, "train-images-idx3-ubyte")
    y_train = read_idx(folder, "train-labels-idx1-ubyte").astype(np.int64)
    x_test = read_idx(folder, "t10k-images-idx3-ubyte")
    y_test = read_idx(folder, "t10k-labels-idx1-ubyte").astype(np.int64)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    n, batch = len(x_train), 256
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, MLP 784-256-128-10, batch {batch}")
    rng = np.random.default_rng(0)
    best = 1e9
    for e in range(epochs):
        order = rng.permutation(n)
        total, correct = 0.0, 0
        t0 = time.perf_counter()
        for b in range(0, n, batch):
            idx = order[b:b + batch]
            x = torch.from_numpy(x_train[idx]).float().div_(255.0)
            y = torch.from_numpy(y_train[idx])
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
            correct += (logits.argmax(1) == y).sum().item()
        dt = time.perf_counter() - t0
        best = min(best, dt)
        print(f"epoch {e + 1}: {dt:.3f} s  train loss {total / n:.4f}  acc {correct / n:.4f}")
    with torch.no_grad():
        logits = model(torch.from_numpy(x_test).float().div_(255.0))
        acc = (logits.argmax(1) == torch.from_numpy(y_test)).float().mean().item()
    print(f"best epoch {best:.3f} s; test acc {acc:.4f}")


if __name__ == "__main__":
    main()
