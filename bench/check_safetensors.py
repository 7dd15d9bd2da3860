#!/usr/bin/env python3
"""PyTorch loads a ferry checkpoint (safetensors) and gives ferry's logits.

  bench/check_safetensors.py CKPT --lib build/libferry-train.so [--device cpu|cuda] [--batch N]
                             [--reader auto|safetensors|builtin] [--tol X] [--json]

CKPT is what `train_gray --save` writes (the MLP or the CNN of samples/train_gray,
told apart by the tensor names). ferry's side runs in a child process (this script
with --ferry-side) that calls libferry through ctypes: it builds the same model,
loads CKPT with ferry_checkpoint_load and runs ferry_module_forward in eval mode on
a fixed batch (seeded, 1x28x28 per image, in the range of normalised pixels).
PyTorch's side reads CKPT with safetensors.torch.load_file (--reader builtin: a
plain reader of the format, for a Python without the safetensors package), loads
the model's tensors into the same nn.Sequential by name (strict: every name and
shape must match; the optimiser's "optim.*" tensors are left out) and runs the
same batch in float32 on --device (TF32 off) and in float64 on the CPU, the
reference. It passes when ferry's logits are within --tol (relative: |ferry -
ref| / |ref| over the whole batch) of the reference and pick the same class for
every image whose top two logits are not a near tie. Prints the figures (one
JSON object with --json); exit status 0 when it passes, 1 when not, 2 on errors.
"""
import argparse
import ctypes
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
from array import array

HW = 28
MEAN, STD = 0.2860, 0.3530  # samples/train_gray's normalisation


def fixed_batch(n):
    """n images of 1x28x28 as a flat list: smooth blobs plus noise, normalised."""
    rng = random.Random(20261123)
    out = []
    for _ in range(n):
        cx, cy = rng.uniform(6, 22), rng.uniform(6, 22)
        r2 = rng.uniform(20, 90)
        level = rng.uniform(0.3, 1.0)
        for y in range(HW):
            for x in range(HW):
                d2 = (x - cx) ** 2 + (y - cy) ** 2
                v = level * math.exp(-d2 / r2) + rng.uniform(0, 0.15)
                out.append((min(v, 1.0) - MEAN) / STD)
    return out


# ---- the safetensors format, read directly (--reader builtin) ----

def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return header, 8 + n


def builtin_load(path):
    import torch
    dtypes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
              "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8}
    header, start = read_header(path)
    with open(path, "rb") as f:
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = bytearray(data[start + a:start + b])
        t = torch.frombuffer(buf, dtype=dtypes[info["dtype"]]) if buf else \
            torch.empty(0, dtype=dtypes[info["dtype"]])
        out[name] = t.reshape(info["shape"]).clone()
    return out


def model_spec(shapes):
    """('cnn'|'mlp', channels, classes) from the tensor shapes of the checkpoint."""
    if "0.weight" in shapes and len(shapes["0.weight"]) == 4:
        return "cnn", shapes["0.weight"][1], shapes["9.weight"][0]
    if "1.weight" in shapes and len(shapes["1.weight"]) == 2:
        inputs = shapes["1.weight"][1]
        return "mlp", inputs // (HW * HW), shapes["5.weight"][0]
    raise SystemExit("check_safetensors: neither train_gray's CNN (0.weight 4-D) nor its MLP "
                     "(1.weight 2-D) in " + ", ".join(sorted(shapes)))


# ---- ferry's side, through ctypes ----

class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("index", ctypes.c_int)]


def ferry_side(args):
    lib = ctypes.CDLL(os.path.abspath(args.lib))
    vp, i64, pvp = ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p)
    lib.ferry_last_error.restype = ctypes.c_char_p
    lib.ferry_status_str.restype = ctypes.c_char_p
    lib.ferry_status_str.argtypes = [ctypes.c_int]
    sig = {
        "ferry_sequential_create": [pvp],
        "ferry_sequential_add": [vp, vp],
        "ferry_conv2d_create": [i64, i64, i64, i64, i64, ctypes.c_bool, pvp],
        "ferry_maxpool2d_create": [i64, i64, i64, pvp],
        "ferry_relu_create": [pvp],
        "ferry_flatten_create": [pvp],
        "ferry_linear_create": [i64, i64, ctypes.c_bool, pvp],
        "ferry_checkpoint_load": [ctypes.c_char_p, ctypes.c_void_p],
        "ferry_device_parse": [ctypes.c_char_p, ctypes.POINTER(Device)],
        "ferry_module_to": [vp, Device],
        "ferry_tensor_from_host": [vp, ctypes.POINTER(i64), ctypes.c_size_t, ctypes.c_int, Device, pvp],
        "ferry_module_forward": [vp, vp, vp, pvp],
        "ferry_tensor_copy_to_host": [vp, vp, ctypes.c_size_t],
    }
    for name, argtypes in sig.items():
        getattr(lib, name).argtypes = argtypes
        getattr(lib, name).restype = ctypes.c_int
    lib.ferry_module_train.argtypes = [vp, ctypes.c_bool]
    lib.ferry_module_train.restype = None
    lib.ferry_tensor_nbytes.argtypes = [vp]
    lib.ferry_tensor_nbytes.restype = ctypes.c_size_t
    lib.ferry_tensor_release.argtypes = [vp]
    lib.ferry_tensor_release.restype = None
    lib.ferry_module_destroy.argtypes = [vp]
    lib.ferry_module_destroy.restype = None
    lib.ferry_device_format.argtypes = [Device, ctypes.c_char_p, ctypes.c_size_t]
    lib.ferry_device_format.restype = ctypes.c_char_p
    lib.ferry_cuda_is_simulated.restype = ctypes.c_bool

    def check(st, what):
        if st != 0:
            raise SystemExit("check_safetensors: ferry: %s: %s: %s" % (
                what, lib.ferry_status_str(st).decode(), lib.ferry_last_error().decode()))

    header, _ = read_header(args.ckpt)
    kind, ch, classes = model_spec({k: v["shape"] for k, v in header.items() if k != "__metadata__"})
    net = vp()
    check(lib.ferry_sequential_create(ctypes.byref(net)), "ferry_sequential_create")

    def add(create, *params):
        m = vp()
        check(getattr(lib, create)(*params, ctypes.byref(m)), create)
        check(lib.ferry_sequential_add(net, m), "ferry_sequential_add")

    if kind == "cnn":  # samples/common.h, model_cnn
        add("ferry_conv2d_create", ch, 32, 3, 1, 1, True)
        add("ferry_relu_create")
        add("ferry_maxpool2d_create", 2, 0, 0)
        add("ferry_conv2d_create", 32, 64, 3, 1, 1, True)
        add("ferry_relu_create")
        add("ferry_maxpool2d_create", 2, 0, 0)
        add("ferry_flatten_create")
        add("ferry_linear_create", 64 * (HW // 4) * (HW // 4), 128, True)
        add("ferry_relu_create")
        add("ferry_linear_create", 128, classes, True)
    else:  # model_mlp
        add("ferry_flatten_create")
        add("ferry_linear_create", ch * HW * HW, 256, True)
        add("ferry_relu_create")
        add("ferry_linear_create", 256, 128, True)
        add("ferry_relu_create")
        add("ferry_linear_create", 128, classes, True)
    # ferry_checkpoint: module, optim, amp, loader, metrics; only the module here.
    ckpt = (vp * 4)(net.value, None, None, None)
    check(lib.ferry_checkpoint_load(args.ckpt.encode(), ctypes.byref(ckpt)), "ferry_checkpoint_load")
    dev = Device()
    check(lib.ferry_device_parse(args.device.encode(), ctypes.byref(dev)), "ferry_device_parse")
    check(lib.ferry_module_to(net, dev), "ferry_module_to")
    lib.ferry_module_train(net, False)

    x = array("f", fixed_batch(args.batch))
    shape = (i64 * 4)(args.batch, ch, HW, HW)
    xt, yt = vp(), vp()
    check(lib.ferry_tensor_from_host(x.buffer_info()[0], shape, 4, 0, dev, ctypes.byref(xt)),
          "ferry_tensor_from_host")
    check(lib.ferry_module_forward(net, xt, None, ctypes.byref(yt)), "ferry_module_forward")
    nbytes = lib.ferry_tensor_nbytes(yt)
    if nbytes != args.batch * classes * 4:
        raise SystemExit("check_safetensors: ferry's logits are %d bytes, not %d x %d f32"
                         % (nbytes, args.batch, classes))
    y = array("f", bytes(nbytes))
    check(lib.ferry_tensor_copy_to_host(yt, y.buffer_info()[0], nbytes), "ferry_tensor_copy_to_host")
    with open(args.out, "wb") as f:
        y.tofile(f)
    name = ctypes.create_string_buffer(32)
    devname = lib.ferry_device_format(dev, name, 32).decode()
    if dev.type == 1 and lib.ferry_cuda_is_simulated():
        devname += " (simulated)"
    lib.ferry_tensor_release(xt)
    lib.ferry_tensor_release(yt)
    lib.ferry_module_destroy(net)
    print(json.dumps({"model": kind, "channels": ch, "classes": classes, "device": devname}))


# ---- PyTorch's side ----

def torch_model(kind, ch, classes):
    import torch.nn as nn
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(ch * HW * HW, 256), nn.ReLU(),
                             nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, classes))
    return nn.Sequential(nn.Conv2d(ch, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64 * (HW // 4) * (HW // 4), 128), nn.ReLU(), nn.Linear(128, classes))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ckpt")
    p.add_argument("--lib", required=True, help="libferry-train.so (it brings libferry.so, found beside it)")
    p.add_argument("--device", default="cpu", help="ferry's device and PyTorch's (cpu or cuda)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--reader", choices=["auto", "safetensors", "builtin"], default="auto")
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--json", action="store_true")
    p.add_argument("--ferry-side", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.ferry_side:
        ferry_side(args)
        return 0

    # ferry first, in its own process: no PyTorch (and its CUDA libraries) loaded beside it.
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.f32")
        cmd = [sys.executable, os.path.abspath(__file__), "--ferry-side", args.ckpt, "--lib", args.lib,
               "--device", args.device, "--batch", str(args.batch), "--out", out]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stdout + r.stderr)
            return fail(args, "ferry's side failed: " + (r.stderr.strip().splitlines() or ["?"])[-1])
        info = json.loads(r.stdout.strip().splitlines()[-1])
        with open(out, "rb") as f:
            fl = array("f")
            fl.frombytes(f.read())

    import torch
    reader = args.reader
    if reader == "auto":
        try:
            import safetensors.torch  # noqa: F401
            reader = "safetensors"
        except ImportError:
            reader = "builtin"
    if reader == "safetensors":
        import safetensors
        from safetensors.torch import load_file
        sd = load_file(args.ckpt)
        reader_name = "safetensors " + safetensors.__version__
    else:
        sd = builtin_load(args.ckpt)
        reader_name = "read by this script, not the safetensors package"
    model_sd = {k: v for k, v in sd.items() if not k.startswith("optim.")}
    kind, ch, classes = info["model"], info["channels"], info["classes"]
    model = torch_model(kind, ch, classes)
    try:
        model.load_state_dict(model_sd, strict=True)
    except RuntimeError as e:
        return fail(args, "PyTorch could not load the checkpoint: " + str(e).replace("\n", " "))
    model.eval()

    x = torch.tensor(fixed_batch(args.batch), dtype=torch.float32).reshape(args.batch, ch, HW, HW)
    ferry = torch.tensor(fl.tolist(), dtype=torch.float64).reshape(args.batch, classes)
    with torch.no_grad():
        ref = torch_model(kind, ch, classes).double()
        ref.load_state_dict({k: v.double() for k, v in model_sd.items()}, strict=True)
        ref = ref.eval()(x.double())
        tdev = "cuda" if args.device.startswith("cuda") and torch.cuda.is_available() else "cpu"
        if tdev == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        t32 = model.to(tdev)(x.to(tdev)).double().cpu()

    def rel(a):
        return float((a - ref).norm() / ref.norm())

    top2 = ref.topk(2, dim=1).values
    clear = (top2[:, 0] - top2[:, 1]) > 1e-4 * ref.abs().max()
    agree = (ferry.argmax(1) == ref.argmax(1)) | ~clear
    res = {
        "model": kind, "reader": reader_name, "torch": torch.__version__, "torch_device": tdev,
        "ferry_device": info["device"], "batch": args.batch, "classes": classes,
        "tensors": len(model_sd), "max_abs_diff": float((ferry - ref).abs().max()),
        "rel_diff": rel(ferry), "torch_f32_rel_diff": rel(t32),
        "argmax_agree": "%d/%d" % (int(agree.sum()), args.batch), "tol": args.tol,
    }
    ok = res["rel_diff"] <= args.tol and bool(agree.all())
    res["ok"] = ok
    res["verdict"] = ("PyTorch %s loaded the %d tensors of the %s by name (%s); ferry's logits on %s are "
                      "within %.2g of the float64 reference (PyTorch float32 on %s: %.2g), classes agree %s"
                      % (torch.__version__, len(model_sd), kind, reader_name, info["device"], res["rel_diff"],
                         tdev, res["torch_f32_rel_diff"], res["argmax_agree"]))
    if not ok:
        res["verdict"] = "FAILED: " + res["verdict"] + " (tolerance %g)" % args.tol
    report(args, res)
    return 0 if ok else 1


def fail(args, why):
    report(args, {"ok": False, "verdict": why})
    return 1


def report(args, res):
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print("%s: %s" % (k, v))


if __name__ == "__main__":
    sys.exit(main())
