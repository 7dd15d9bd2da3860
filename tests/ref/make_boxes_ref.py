#!/usr/bin/env python3
"""Writes tests/ref/boxes/cases.txt for tests/test_boxes.c with NumPy (Debian
python3-numpy); the test itself needs neither.

An independent reference for boxes that follow the image, written from the
definitions of the transforms rather than from ferry's geometry code: each
step moves the boxes as torchvision's transforms.v2 moves
tv_tensors.BoundingBoxes (XYXY, pixel-edge coordinates) on its canvas and
clamps them to the new canvas, and SanitizeBoundingBoxes-style filtering comes
last (here: a box is dropped when its clamped area is zero or below a fraction
of the area it would have unclamped). The steps, in ferry's order:

  EXIF orientation  PIL's exif_transpose table (2 FLIP_LEFT_RIGHT, 3 ROTATE_180,
                    4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270, 7 TRANSVERSE,
                    8 ROTATE_90), each a rotation/reflection matrix about the
                    canvas centre onto the new canvas
  rrc               F.resized_crop(top, left, height, width, size)
  center            F.resize(S) (shorter side to S, longer int(S * long / short))
                    then F.center_crop (top = int(round((h - H) / 2)))
  bilinear          F.resize((H, W))
  place             ferry's FERRY_RESIZE_CENTER_CROP: the image at offset
                    int((W - w) / 2) (truncated), cropped or bordered
  pad               F.pad(p) then F.crop(p + sy, p + sx, H, W): the padded
                    random crop
  flip              F.horizontal_flip

Seeds 0..N-1 of NumPy's default_rng each draw one case: sizes, orientation,
transform parameters and boxes (some past the image, some degenerate, some
not finite). Format, per case:
  case KIND o src_w src_h W H a b c d pad sy sx flip frac K
  K lines: x0 y0 x1 y1 (the input boxes)
  kept N
  N lines: i x0 y0 x1 y1 (input index, output box as float32)
KIND's a b c d: rrc left top width height; center S 0 0 0; else 0 0 0 0.

Run: /usr/bin/python3 tests/ref/make_boxes_ref.py  (about 200 KB of output)."""
import math
import os

import numpy as np

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boxes")
N = 600

# EXIF orientation -> PIL transpose ops, as PIL.ImageOps.exif_transpose.
EXIF_OPS = {2: ["FLIP_LEFT_RIGHT"], 3: ["ROTATE_180"], 4: ["FLIP_TOP_BOTTOM"],
            5: ["TRANSPOSE"], 6: ["ROTATE_270"], 7: ["TRANSVERSE"], 8: ["ROTATE_90"]}
# Each op as a matrix on (dx, dy) from the canvas centre, y pointing down;
# ROTATE_90 turns the picture counter-clockwise as seen on screen.
OPS = {
    "FLIP_LEFT_RIGHT": (np.array([[-1, 0], [0, 1]]), False),
    "FLIP_TOP_BOTTOM": (np.array([[1, 0], [0, -1]]), False),
    "ROTATE_180": (np.array([[-1, 0], [0, -1]]), False),
    "ROTATE_90": (np.array([[0, 1], [-1, 0]]), True),
    "ROTATE_270": (np.array([[0, -1], [1, 0]]), True),
    "TRANSPOSE": (np.array([[0, 1], [1, 0]]), True),
    "TRANSVERSE": (np.array([[0, -1], [-1, 0]]), True),
}


class Boxes:
    """XYXY boxes on a canvas: u unclamped (for the area fraction), c clamped."""

    def __init__(self, b, w, h):
        self.u = b.astype(np.float64).copy()
        self.c = b.astype(np.float64).copy()
        self.w, self.h = float(w), float(h)
        self.clamp()

    def clamp(self):
        self.c[:, 0::2] = np.clip(self.c[:, 0::2], 0, self.w)
        self.c[:, 1::2] = np.clip(self.c[:, 1::2], 0, self.h)

    def affine(self, sx, tx, sy, ty):
        for b in (self.u, self.c):
            b[:, 0::2] = b[:, 0::2] * sx + tx
            b[:, 1::2] = b[:, 1::2] * sy + ty
            # a negative scale swaps the edges
            b[:, [0, 2]] = np.sort(b[:, [0, 2]], axis=1)
            b[:, [1, 3]] = np.sort(b[:, [1, 3]], axis=1)

    def transpose_op(self, name):
        m, swap = OPS[name]
        nw, nh = (self.h, self.w) if swap else (self.w, self.h)
        for b in (self.u, self.c):
            pts = []
            for (xi, yi) in ((0, 1), (2, 3)):
                d = np.stack([b[:, xi] - self.w / 2, b[:, yi] - self.h / 2])
                q = m @ d
                pts.append((q[0] + nw / 2, q[1] + nh / 2))
            b[:, 0] = np.minimum(pts[0][0], pts[1][0])
            b[:, 2] = np.maximum(pts[0][0], pts[1][0])
            b[:, 1] = np.minimum(pts[0][1], pts[1][1])
            b[:, 3] = np.maximum(pts[0][1], pts[1][1])
        self.w, self.h = nw, nh

    def crop(self, top, left, h, w):
        self.affine(1, -left, 1, -top)
        self.w, self.h = float(w), float(h)
        self.clamp()

    def resize(self, w, h):
        self.affine(w / self.w, 0, h / self.h, 0)
        self.w, self.h = float(w), float(h)

    def pad(self, p):
        self.affine(1, p, 1, p)
        self.w += 2 * p
        self.h += 2 * p

    def hflip(self):
        self.affine(-1, self.w, 1, 0)


def draw_case(seed):
    r = np.random.default_rng(seed)
    sw, sh = int(r.integers(4, 97)), int(r.integers(4, 97))
    o = int(r.choice([1, 1, 1, 2, 3, 4, 5, 6, 7, 8]))
    w, h = (sh, sw) if o >= 5 else (sw, sh)
    kind = str(r.choice(["rrc", "rrc", "center", "bilinear", "place", "same"]))
    W, H = int(r.integers(4, 80)), int(r.integers(4, 80))
    a = b = c = d = 0
    if kind == "rrc":
        c, d = int(r.integers(1, w + 1)), int(r.integers(1, h + 1))
        a, b = int(r.integers(0, w - c + 1)), int(r.integers(0, h - d + 1))
    elif kind == "center":
        a = int(r.integers(max(W, H), max(W, H) + 40))
    elif kind == "same":
        W, H = w, h
    pad = int(r.choice([0, 0, 2, 4, 9]))
    sy = int(r.integers(-pad, pad + 1)) if pad else 0
    sx = int(r.integers(-pad, pad + 1)) if pad else 0
    flip = int(r.integers(0, 2))
    frac = float(r.choice([0, 0, 0.25, 0.5, 0.9, 1.0]))
    K = int(r.integers(0, 12))
    boxes = np.empty((K, 4))
    for i in range(K):
        x0 = r.uniform(-0.3 * sw, 1.1 * sw)
        y0 = r.uniform(-0.3 * sh, 1.1 * sh)
        boxes[i] = [x0, y0, x0 + r.uniform(0.2, 0.6 * sw), y0 + r.uniform(0.2, 0.6 * sh)]
        t = r.integers(0, 30)
        if t == 0:
            boxes[i, 2] = boxes[i, 0]  # zero width
        elif t == 1:
            boxes[i, [1, 3]] = boxes[i, [3, 1]]  # upside down
        elif t == 2:
            boxes[i, int(r.integers(0, 4))] = math.nan
    boxes = boxes.astype(np.float32)
    return (kind, o, sw, sh, W, H, a, b, c, d, pad, sy, sx, flip, frac, boxes)


def run(case):
    kind, o, sw, sh, W, H, a, b, c, d, pad, sy, sx, flip, frac, boxes = case
    bx = Boxes(boxes, sw, sh)
    for op in EXIF_OPS.get(o, []):
        bx.transpose_op(op)
    w, h = bx.w, bx.h
    if kind == "rrc":
        bx.crop(b, a, d, c)
        bx.resize(W, H)
    elif kind == "center":
        S = a
        if w <= h:
            nw, nh = S, int(S * h / w)
        else:
            nw, nh = int(S * w / h), S
        bx.resize(nw, nh)
        bx.crop(int(round((nh - H) / 2.0)), int(round((nw - W) / 2.0)), H, W)
    elif kind == "bilinear":
        bx.resize(W, H)
    elif kind == "place":
        bx.crop(-int((H - h) / 2), -int((W - w) / 2), H, W)
    if pad:
        bx.pad(pad)
        bx.crop(pad + sy, pad + sx, H, W)
    if flip:
        bx.hflip()
    kept = []
    for i, box in enumerate(boxes.astype(np.float64)):
        if not (np.all(np.isfinite(box)) and box[0] < box[2] and box[1] < box[3]):
            continue
        u, cl = bx.u[i], bx.c[i]
        area = (u[2] - u[0]) * (u[3] - u[1])
        left = (cl[2] - cl[0]) * (cl[3] - cl[1])
        f = cl.astype(np.float32)
        if area > 0 and left > 0 and left >= frac * area and f[0] < f[2] and f[1] < f[3]:
            kept.append((i, f))
    return kept


def main():
    os.makedirs(HERE, exist_ok=True)
    with open(os.path.join(HERE, "cases.txt"), "w") as out:
        for seed in range(N):
            case = draw_case(seed)
            kind, o, sw, sh, W, H, a, b, c, d, pad, sy, sx, flip, frac, boxes = case
            out.write(f"case {kind} {o} {sw} {sh} {W} {H} {a} {b} {c} {d} {pad} {sy} {sx} "
                      f"{flip} {frac!r} {len(boxes)}\n")
            for box in boxes:
                out.write(" ".join(f"{float(v):.9g}" for v in box) + "\n")
            kept = run(case)
            out.write(f"kept {len(kept)}\n")
            for i, f in kept:
                out.write(f"{i} " + " ".join(f"{float(v):.9g}" for v in f) + "\n")


if __name__ == "__main__":
    main()
