#!/usr/bin/env python3
"""Writes an ImageNet-like JPEG benchmark folder for docs/BENCHMARKS.md:
DIR/<class>/<n>.jpg, quality 90 (4:2:0, PIL's default), sizes cycling through
500x375, 375x500, 512x384 and 512x512 (longest side 512 or ~500 x 375). No
Debian package ships enough photographs, so the images are generated: blurred
random shapes over smooth gradients with sensor-like noise, which JPEG
compresses to about the bytes per pixel of a photograph (~0.1-0.2 B/px at q90).
Needs python3-pil and python3-numpy. Not checked in: run it to make the data.
SCALE multiplies every size (2: 1000x750 and so on, as in full-size photo
sets such as Open Images, where the crop path's 1/2 and 1/4 DCT scales apply).
  /usr/bin/python3 scripts/make-bench-jpeg.py DIR [N=2000] [CLASSES=10] [SCALE=1]"""
import os
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

SIZES = [(500, 375), (375, 500), (512, 384), (512, 512)]


def image(rng, w, h):
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.empty((h, w, 3), np.float32)
    for c in range(3):
        fx, fy, ph = rng.uniform(0.005, 0.03), rng.uniform(0.005, 0.03), rng.uniform(0, 6)
        base[..., c] = 128 + 90 * np.sin(x * fx + ph) * np.cos(y * fy - ph)
    im = Image.fromarray(base.clip(0, 255).astype(np.uint8))
    d = ImageDraw.Draw(im)
    for _ in range(rng.integers(15, 40)):
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        x1, y1 = x0 + int(rng.integers(10, w // 2)), y0 + int(rng.integers(10, h // 2))
        col = tuple(int(v) for v in rng.integers(0, 256, 3))
        if rng.random() < 0.5:
            d.ellipse([x0, y0, x1, y1], fill=col)
        else:
            d.rectangle([x0, y0, x1, y1], fill=col)
    im = im.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.6, 1.5))))
    a = np.asarray(im).astype(np.int16) + rng.normal(0, 4, (h, w, 3)).astype(np.int16)
    return Image.fromarray(a.clip(0, 255).astype(np.uint8))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    classes = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    scale = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    rng = np.random.default_rng(20261126)
    for i in range(n):
        cls = os.path.join(root, "c%02d" % (i % classes))
        os.makedirs(cls, exist_ok=True)
        w, h = (v * scale for v in SIZES[i % len(SIZES)])
        image(rng, w, h).save(os.path.join(cls, "%06d.jpg" % i), quality=90)
    print("wrote %d JPEGs (%d classes) to %s" % (n, classes, root))


if __name__ == "__main__":
    main()
