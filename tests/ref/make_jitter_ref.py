#!/usr/bin/env python3
"""Writes tests/ref/jitter/ for tests/test_jitter.c with PIL and torchvision
(Debian python3-pil, python3-torchvision); the test itself needs neither.

The source is a 32x24 image made by a formula the test repeats (RGB, and its
luma for the gray cases). Each case applies torchvision's functional
adjust_brightness / adjust_contrast / adjust_saturation / adjust_hue (what
ColorJitter calls) in a given order with given factors; cases.txt holds one
case per line (channels, then order as four digits where 9 means "off",
then the four factors), cases.bin the output pixels (HWC), one after another.

Run: /usr/bin/python3 tests/ref/make_jitter_ref.py  (about 20 KB of output)."""
import os

import torchvision.transforms.functional as F
from PIL import Image

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jitter")
W, H = 32, 24


def source():
    im = Image.new("RGB", (W, H))
    px = im.load()
    for y in range(H):
        for x in range(W):
            px[x, y] = ((x * 37 + y * 11) % 256, (x * 5 + y * 23 + 40) % 256,
                        (x * y * 3 + 90) % 256)
    return im


CASES = [
    (3, (0, 9, 9, 9), (1.37, 1, 1, 0)),
    (3, (0, 9, 9, 9), (0.41, 1, 1, 0)),
    (3, (1, 9, 9, 9), (1, 1.8, 1, 0)),
    (3, (1, 9, 9, 9), (1, 0.35, 1, 0)),
    (3, (2, 9, 9, 9), (1, 1, 1.6, 0)),
    (3, (2, 9, 9, 9), (1, 1, 0.2, 0)),
    (3, (3, 9, 9, 9), (1, 1, 1, 0.13)),
    (3, (3, 9, 9, 9), (1, 1, 1, -0.27)),
    (3, (3, 9, 9, 9), (1, 1, 1, 0.5)),
    (3, (2, 0, 3, 1), (1.21, 0.77, 1.43, -0.08)),
    (3, (3, 1, 0, 2), (0.83, 1.35, 0.62, 0.31)),
    (1, (1, 0, 9, 9), (1.25, 0.6, 1, 0)),
]


def main():
    os.makedirs(HERE, exist_ok=True)
    src = source()
    lines, out = [], bytearray()
    for ch, order, f in CASES:
        im = src if ch == 3 else src.convert("L")
        for fn in order:
            if fn == 0:
                im = F.adjust_brightness(im, f[0])
            elif fn == 1:
                im = F.adjust_contrast(im, f[1])
            elif fn == 2:
                im = F.adjust_saturation(im, f[2])
            elif fn == 3:
                im = F.adjust_hue(im, f[3])
        out += im.tobytes()
        lines.append("%d %s %r %r %r %r" % (ch, "".join(str(o) for o in order), *f))
    with open(os.path.join(HERE, "cases.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(HERE, "cases.bin"), "wb") as fh:
        fh.write(out)


if __name__ == "__main__":
    main()
