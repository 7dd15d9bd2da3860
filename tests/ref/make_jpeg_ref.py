#!/usr/bin/env python3
"""Writes the JPEG fixtures of tests/ref/jpeg/ with PIL (Debian python3-pil, which
decodes with the system's libjpeg-turbo, as ferry does): small JPEGs of every kind
PIL writes, and expected.txt, the FNV-1a 64 digest of the pixels PIL decodes from
each (Image.open, then convert("RGB") or convert("L"); for the EXIF file also
ImageOps.exif_transpose for each orientation 1 to 8). tests/test_jpeg.c decodes
the same files with ferry and compares digests, so the test needs no PIL.
Run it from anywhere (/usr/bin/python3 tests/ref/make_jpeg_ref.py); the output is
checked in and is about 10 KB."""
import os
import struct

from PIL import Image, ImageOps

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jpeg")
W, H = 37, 23  # odd sizes: partial MCUs on both edges


def fnv(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def pattern():
    """Gradients, a sharp edge and some texture: enough to exercise upsampling."""
    im = Image.new("RGB", (W, H))
    px = im.load()
    for y in range(H):
        for x in range(W):
            r = (x * 255) // (W - 1)
            g = (y * 255) // (H - 1)
            b = 255 if (x // 5 + y // 4) % 2 else 30
            if 10 <= x < 20 and 5 <= y < 12:
                r, g, b = 250, 20, 120
            px[x, y] = (r, g, (b + 37 * x * y) % 256)
    return im


def exif_bytes(orientation):
    # Little-endian TIFF, IFD0 with one entry: Orientation (0x0112), SHORT, 1.
    tiff = b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 1)
    tiff += struct.pack("<HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack("<I", 0)
    return b"Exif\x00\x00" + tiff


def main():
    os.makedirs(HERE, exist_ok=True)
    src = pattern()
    files = {
        "rgb444.jpg": (src, dict(quality=90, subsampling=0)),
        "rgb422.jpg": (src, dict(quality=90, subsampling=1)),
        "rgb420.jpg": (src, dict(quality=75, subsampling=2)),
        "progressive.jpg": (src, dict(quality=85, subsampling=2, progressive=True)),
        "optimized.jpg": (src, dict(quality=60, subsampling=1, optimize=True)),
        "gray.jpg": (src.convert("L"), dict(quality=90)),
        "cmyk.jpg": (src.convert("CMYK"), dict(quality=90)),
        "exif.jpg": (src, dict(quality=80, subsampling=2)),
    }
    lines = ["# name mode orientation width height fnv1a64 (tests/ref/make_jpeg_ref.py)"]
    for name, (im, kw) in files.items():
        path = os.path.join(HERE, name)
        if name == "exif.jpg":
            kw["exif"] = exif_bytes(6)
        im.save(path, "JPEG", **kw)
        for mode in ("RGB", "L"):
            dec = Image.open(path).convert(mode)
            lines.append("%s %s 0 %d %d %016x" % (name, mode, dec.width, dec.height,
                                                  fnv(dec.tobytes())))
    # The EXIF file with each orientation: the tag's value patched in the bytes.
    data = open(os.path.join(HERE, "exif.jpg"), "rb").read()
    tag = struct.pack("<HHI", 0x0112, 3, 1)
    at = data.index(tag) + len(tag)
    for o in range(1, 9):
        tmp = os.path.join(HERE, ".exif_tmp.jpg")
        with open(tmp, "wb") as f:
            f.write(data[:at] + struct.pack("<H", o) + data[at + 2:])
        for mode in ("RGB", "L"):
            dec = ImageOps.exif_transpose(Image.open(tmp)).convert(mode)
            lines.append("exif.jpg %s %d %d %d %016x" % (mode, o, dec.width, dec.height,
                                                       fnv(dec.tobytes())))
        os.remove(tmp)
    with open(os.path.join(HERE, "expected.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
