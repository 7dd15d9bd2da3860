#!/usr/bin/python3
"""The training step of samples/bench_step.c in PyTorch, timed the same way.

train_gray's model (--model cnn: conv 1->32 3x3 pad 1, ReLU, max pool 2,
conv 32->64, ReLU, max pool 2, linear 3136->128, ReLU, linear 128->10; mlp:
784->256->128->10), SGD with momentum 0.9, lr 0.05, weight decay 5e-4,
cross-entropy, on one batch of random images already on the device: warm-up
steps untimed (torch.compile's compilation among them), then --steps steps
between two torch.cuda.synchronize() calls.

  bench/step_torch.py [--model cnn|mlp] [--batch N] [--steps N] [--warmup N]
                      [--compile] [--amp] [--device cuda]

Prints one JSON line: {"model", "batch", "amp", "compile", "steps",
"ms_per_step", "images_per_s", "torch"}; exits 3 when torch or its CUDA is
missing, with the reason on stderr.
"""
import argparse
import json
import sys
import time


def model(torch, kind):
    nn = torch.nn
    if kind == "cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["cnn", "mlp"], default="cnn")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--amp", action="store_true", help="autocast to bf16 (ferry's --amp)")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print("step_torch.py: no torch: %s" % e, file=sys.stderr)
        return 3
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("step_torch.py: torch %s sees no CUDA device" % torch.__version__, file=sys.stderr)
        return 3
    dev = torch.device(a.device)
    torch.manual_seed(0)
    net = model(torch, a.model).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(a.batch, 1, 28, 28, device=dev)
    y = (torch.arange(a.batch, device=dev) * 7 + 3) % 10
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.amp):
            loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    run = torch.compile(step) if a.compile else step
    for _ in range(a.warmup):
        run()
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = run()
    sync()
    secs = time.perf_counter() - t0
    print(json.dumps({"model": a.model, "batch": a.batch, "amp": a.amp, "compile": a.compile,
                      "steps": a.steps, "ms_per_step": round(1e3 * secs / a.steps, 4),
                      "images_per_s": round(a.steps * a.batch / secs, 1), "loss": float(loss),
                      "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
