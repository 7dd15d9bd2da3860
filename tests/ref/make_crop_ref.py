#!/usr/bin/env python3
"""Writes tests/ref/crop/ for tests/test_crop.c, with PIL and torchvision
(Debian python3-pil, python3-torchvision); the test itself needs neither.

- src.jpg: a 160x120 photo-like JPEG (quality 90, 4:2:0), made here.
- resize.bin + resize.txt: PIL's pixels for crop boxes of src.jpg resized with
  BILINEAR (what torchvision's RandomResizedCrop does on a PIL image: crop, then
  resize), and for Resize(S) + CenterCrop(H, W) (torchvision's transforms), RGB
  interleaved, one after the other; resize.txt names each box and its offset.
- rrc.txt: histograms of torchvision's RandomResizedCrop.get_params boxes,
  10,000 draws per image size (torch.manual_seed(0)): the area fraction and
  log of the aspect ratio, 50 bins each, plus how many fell back to the centre.

Run: /usr/bin/python3 tests/ref/make_crop_ref.py  (about 35 KB of output)."""
import math
import os
import random

import torch
import torchvision.transforms as T
from PIL import Image, ImageFilter

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crop")
SIZES = [(500, 375), (375, 500), (512, 512), (1000, 100), (64, 300)]
BINS = 50
N = 10000


def photo(w, h, seed):
    """Smooth shapes, gradients and fine texture, blurred a little: closer to a
    photograph's spectrum than flat patterns."""
    rnd = random.Random(seed)
    im = Image.new("RGB", (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = (int(128 + 100 * math.sin(x / 13.0 + y / 29.0)),
                        int(128 + 90 * math.cos(y / 11.0 - x / 41.0)),
                        (x * 3 + y * 2 + rnd.randrange(40)) % 256)
    from PIL import ImageDraw
    d = ImageDraw.Draw(im)
    for _ in range(25):
        x0, y0 = rnd.randrange(w), rnd.randrange(h)
        x1, y1 = x0 + rnd.randrange(8, w // 2), y0 + rnd.randrange(8, h // 2)
        col = tuple(rnd.randrange(256) for _ in range(3))
        (d.ellipse if rnd.random() < 0.5 else d.rectangle)([x0, y0, x1, y1], fill=col)
    return im.filter(ImageFilter.GaussianBlur(0.7))


def main():
    os.makedirs(HERE, exist_ok=True)
    src_path = os.path.join(HERE, "src.jpg")
    photo(160, 120, 1).save(src_path, quality=90, subsampling=2)
    src = Image.open(src_path).convert("RGB")
    # (kind, a, b, c, d, W, H): crop boxes (left, top, width, height) or
    # centre (S, 0, 0, 0).
    cases = [
        ("box", 0, 0, 160, 120, 48, 40),     # whole image, shrink 3.3x / 3x
        ("box", 17, 9, 101, 77, 48, 40),     # odd offsets, shrink ~2x
        ("box", 60, 30, 37, 29, 48, 40),     # enlarge
        ("box", 5, 70, 150, 50, 32, 32),     # wide box, one axis enlarged
        ("box", 99, 3, 61, 117, 24, 56),     # tall box at the right edge
        ("center", 56, 0, 0, 0, 48, 48),     # Resize(56) + CenterCrop(48)
        ("center", 40, 0, 0, 0, 32, 40),     # Resize(40) + CenterCrop(40, 32)
    ]
    out = bytearray()
    lines = []
    for kind, a, b, c, d, W, H in cases:
        if kind == "box":
            im = src.crop((a, b, a + c, b + d)).resize((W, H), Image.BILINEAR)
        else:
            im = T.CenterCrop((H, W))(T.Resize(a)(src))
        assert im.size == (W, H)
        lines.append(f"{kind} {a} {b} {c} {d} {W} {H} {len(out)}")
        out += im.tobytes()
    open(os.path.join(HERE, "resize.bin"), "wb").write(bytes(out))
    open(os.path.join(HERE, "resize.txt"), "w").write("\n".join(lines) + "\n")

    lo, hi = math.log(3 / 4), math.log(4 / 3)
    rrc = T.RandomResizedCrop(224)
    rows = [f"# torchvision {__import__('torchvision').__version__}, torch.manual_seed(0), "
            f"{N} draws per size, scale (0.08, 1), ratio (3/4, 4/3)",
            "# size W H fallbacks; area: 50 bins on [0, 1]; logratio: 50 bins on [log 3/4, log 4/3]"]
    torch.manual_seed(0)
    for w, h in SIZES:
        img = Image.new("RGB", (w, h))
        area = [0] * BINS
        ratio = [0] * BINS
        fallbacks = 0
        for _ in range(N):
            i, j, ch, cw = rrc.get_params(img, rrc.scale, rrc.ratio)
            # The fallback is the only way to a box of the whole width or height
            # at a clamped ratio; count it by recomputing torchvision's loop is
            # not possible from outside, so count boxes centred exactly with
            # one side full (a tried box can be too, rarely).
            if (cw == w or ch == h) and i == (h - ch) // 2 and j == (w - cw) // 2:
                fallbacks += 1
            f = cw * ch / (w * h)
            area[min(BINS - 1, int(f * BINS))] += 1
            r = (math.log(cw / ch) - lo) / (hi - lo)
            ratio[min(BINS - 1, max(0, int(r * BINS)))] += 1
        rows.append(f"size {w} {h} {fallbacks}")
        rows.append("area " + " ".join(map(str, area)))
        rows.append("logratio " + " ".join(map(str, ratio)))
    open(os.path.join(HERE, "rrc.txt"), "w").write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
