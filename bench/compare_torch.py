#!/usr/bin/python3
"""ferry's loader against PyTorch's DataLoader on the same image folder.

Both sides read the same PNG folder with the same batch size, workers, shuffling
and pin_memory, move each batch to the device (.to(device, non_blocking=True) on
the PyTorch side), and deliver float32 images in [0, 1]. Prints images/s for
each and the ratio. Runs with Debian's python3-torch / python3-torchvision /
python3-pil (installed here when missing and running as root) or, on a GPU
machine, with whatever python3 has torch.

  bench/compare_torch.py DIR [--workers N] [--batch N] [--epochs N] [--pin on|off]
                             [--device cpu|cuda] [--ferry build/ferry] [--json]
                             [--model mlp|cnn [--limit N]]

With --model, both sides also train the model of samples/train_gray on every batch
(SGD, momentum 0.9, lr 0.05, weight decay 5e-4): PyTorch's loop beside
build/samples/train_gray --epochs 1 on DIR's parent (train/ and test/ inside; ferry
trains on its 90 % train split and reports that epoch's images/s). --limit N
trains each side on N images only (train_gray --limit N: the first N of its
split; PyTorch: N of DIR drawn with seed 0), for a bounded run.
"""
import argparse
import json
import os
import subprocess
import sys
import time

DEBIAN_PACKAGES = ["python3-torch", "python3-torchvision", "python3-pil"]


def ensure_torch():
    """Imports torch, or re-runs under Debian's python3, or installs the packages."""
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        import PIL  # noqa: F401
        return
    except ImportError:
        pass
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3") \
            and not os.environ.get("FERRY_COMPARE_REEXEC"):
        os.environ["FERRY_COMPARE_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    cmd = ["apt-get", "install", "-y", "--no-install-recommends"] + DEBIAN_PACKAGES
    if os.geteuid() != 0:
        sys.exit("compare_torch: PyTorch is missing; run as root: " + " ".join(cmd))
    print("compare_torch: installing " + " ".join(DEBIAN_PACKAGES), file=sys.stderr)
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)


def torch_epochs(args, channels):
    import torch
    import torchvision
    from PIL import Image
    from torch.utils.data import DataLoader

    mode = "L" if channels == 1 else "RGB"

    def load(path):
        with open(path, "rb") as f:
            return Image.open(f).convert(mode)

    ds = torchvision.datasets.ImageFolder(
        args.dir, loader=load, transform=torchvision.transforms.ToTensor())
    device = torch.device(args.device)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    dl = DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                    pin_memory=(args.pin == "on" and device.type == "cuda"),
                    persistent_workers=args.workers > 0,
                    generator=torch.Generator().manual_seed(0))
    images = 0
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        for x, y in dl:
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            images += y.shape[0]
    if device.type == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    return {"images": images, "seconds": secs, "images_per_s": images / secs,
            "torch": torch.__version__}


def torch_model(kind, channels):
    import torch.nn as nn
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(channels * 28 * 28, 256), nn.ReLU(),
                             nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(channels, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def torch_train_epoch(args, channels):
    import torch
    import torchvision
    from PIL import Image
    from torch.utils.data import DataLoader

    mode = "L" if channels == 1 else "RGB"

    def load(path):
        with open(path, "rb") as f:
            return Image.open(f).convert(mode)

    tf = torchvision.transforms.Compose([torchvision.transforms.ToTensor(),
                                         torchvision.transforms.Normalize([0.2860], [0.3530])])
    ds = torchvision.datasets.ImageFolder(args.dir, loader=load, transform=tf)
    if args.limit and args.limit < len(ds):
        pick = torch.randperm(len(ds), generator=torch.Generator().manual_seed(0))[:args.limit]
        ds = torch.utils.data.Subset(ds, pick.tolist())
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = torch_model(args.model, channels).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    dl = DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                    pin_memory=(args.pin == "on" and device.type == "cuda"),
                    persistent_workers=args.workers > 0)
    images = 0
    t0 = time.perf_counter()
    for x, y in dl:
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        images += y.shape[0]
    if device.type == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    return {"images": images, "seconds": secs, "images_per_s": images / secs,
            "torch": torch.__version__}


def ferry_train_epoch(args):
    exe = os.path.join(os.path.dirname(args.ferry), "samples", "train_gray")
    data = os.path.dirname(os.path.normpath(args.dir))
    cmd = [exe, "--data", data, "--model", args.model, "--epochs", "1", "--batch",
           str(args.batch), "--workers", str(args.workers), "--device", args.device,
           "--out", os.path.join(os.path.dirname(args.ferry), "run", "compare")]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        cols = line.split()
        if len(cols) == 7 and cols[0] == "1":  # the epoch line: images/s is last
            return {"images_per_s": float(cols[6]), "log": out}
    sys.exit("compare_torch: no epoch line in train_gray's output:\n" + out)


def ferry_epochs(args):
    cmd = [args.ferry, "bench", args.dir, "--workers", str(args.workers), "--batch",
           str(args.batch), "--pin", args.pin, "--epochs", str(args.epochs),
           "--device", args.device, "--no-digest", "--format", "json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def first_image_channels(root):
    from PIL import Image
    for cls in sorted(os.listdir(root)):
        d = os.path.join(root, cls)
        if os.path.isdir(d):
            for name in sorted(os.listdir(d)):
                if name.endswith(".png"):
                    with Image.open(os.path.join(d, name)) as im:
                        return 1 if im.mode in ("L", "LA", "I", "I;16", "1") else 3
    sys.exit("compare_torch: no PNG files under " + root)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--pin", choices=["on", "off"], default="on")
    p.add_argument("--device", default="cpu")
    p.add_argument("--ferry", default=os.path.join(os.path.dirname(__file__), "..", "build", "ferry"))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--torch-only", action="store_true", help="run only PyTorch's side")
    p.add_argument("--model", choices=["mlp", "cnn"], help="also train this model on each batch")
    p.add_argument("--limit", type=int, default=0,
                   help="with --model: train each side on this many images (default: all)")
    args = p.parse_args()
    ensure_torch()

    channels = first_image_channels(args.dir)
    if args.model:
        f = ferry_train_epoch(args)
        t = torch_train_epoch(args, channels)
        ratio = f["images_per_s"] / t["images_per_s"]
        if args.json:
            print(json.dumps({"model": args.model, "limit": args.limit, "ferry_images_per_s": f["images_per_s"],
                              "torch": t, "ratio": ratio}))
            return
        print(f"one training epoch of the {args.model}, batch {args.batch}, {args.workers} workers, "
              f"device {args.device}" + (f", {args.limit} images" if args.limit else ""))
        print(f"{'ferry (train_gray)':<22} {f['images_per_s']:>10.0f} images/s")
        print(f"{'torch ' + t['torch']:<22} {t['images_per_s']:>10.0f} images/s")
        print(f"ratio (ferry / torch): {ratio:.2f}x")
        return
    if args.torch_only:
        t = torch_epochs(args, channels)
        print(json.dumps({"torch": t["torch"], "images": t["images"], "seconds": t["seconds"],
                          "images_per_s": t["images_per_s"]}))
        return
    f = ferry_epochs(args)
    t = torch_epochs(args, channels)
    ratio = f["images_per_s"] / t["images_per_s"]
    if args.json:
        print(json.dumps({"ferry": f, "torch": t, "ratio": ratio}))
        return
    print(f"{'loader':<22} {'workers':>7} {'batch':>6} {'images':>8} {'seconds':>8} {'images/s':>10}")
    print(f"{'ferry':<22} {args.workers:>7} {args.batch:>6} {f['images']:>8} "
          f"{f['seconds']:>8.2f} {f['images_per_s']:>10.0f}")
    print(f"{'torch ' + t['torch']:<22} {args.workers:>7} {args.batch:>6} {t['images']:>8} "
          f"{t['seconds']:>8.2f} {t['images_per_s']:>10.0f}")
    print(f"ratio (ferry / torch): {ratio:.2f}x")


if __name__ == "__main__":
    main()
