#!/usr/bin/env python3
"""torchvision's ImageNet training recipe on an image folder, for the ferry
comparison in docs/BENCHMARKS.md: ImageFolder + DataLoader with
RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize (PIL decoding,
as torchvision does by default); prints images/s over whole epochs.
  /usr/bin/python3 bench/recipe_torch.py DIR [--workers 2] [--batch 64]
                   [--epochs 1] [--limit N]"""
import argparse
import time

import torch
import torchvision
import torchvision.transforms as T


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--limit", type=int, default=0, help="a seeded random subset of N images")
    a = p.parse_args()
    tf = T.Compose([T.RandomResizedCrop(a.size), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = torchvision.datasets.ImageFolder(a.dir, transform=tf)
    if a.limit and a.limit < len(ds):
        g = torch.Generator().manual_seed(0)
        ds = torch.utils.data.Subset(ds, torch.randperm(len(ds), generator=g)[:a.limit].tolist())
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True,
                                     num_workers=a.workers, persistent_workers=a.workers > 0)
    t0 = time.perf_counter()
    n = 0
    for _ in range(a.epochs):
        for x, _y in dl:
            n += x.shape[0]
    dt = time.perf_counter() - t0
    print("torchvision recipe: %d images, %d workers, batch %d: %.1f images/s"
          % (n, a.workers, a.batch, n / dt))


if __name__ == "__main__":
    main()
