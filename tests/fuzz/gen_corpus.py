#!/usr/bin/env python3
"""Writes the small seed corpora of tests/fuzz/corpus/ (run from anywhere; the
files are checked in, this only documents and reproduces them)."""
import os, struct, zlib, gzip

HERE = os.path.dirname(os.path.abspath(__file__))


def out(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def chunk(kind, body):
    c = kind + body
    return struct.pack(">I", len(body)) + c + struct.pack(">I", zlib.crc32(c) & 0xffffffff)


def png(w, h, ct, bd, rows, interlace=0, extra=b""):
    sig = b"\x89PNG\r\n\x1a\n"
    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bd, ct, 0, 0, interlace))
    raw = b"".join(b"\x00" + r for r in rows)
    return sig + ihdr + extra + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def tar_seeds():
    # Tar shards: ustar, pax and GNU long names, class names, an incomplete
    # key, a folder member; written by Python's tarfile (mtime 0).
    import io, tarfile
    px = png(4, 4, 0, 8, [bytes(range(y * 4, y * 4 + 4)) for y in range(4)])

    def shard(members, fmt=tarfile.USTAR_FORMAT):
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode="w", format=fmt) as t:
            for name, data in members:
                ti = tarfile.TarInfo(name)
                if data is None:
                    ti.type = tarfile.DIRTYPE
                    t.addfile(ti)
                    continue
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
        return b.getvalue()

    out("tar", "two.tar", shard([("0.png", px), ("0.cls", b"0"), ("1.cls", b"1\n"), ("1.png", px)]))
    out("tar", "classes.tar", shard([("__classes__.txt", b"a\nb\n"), ("k.png", px), ("k.cls", b"1")]))
    out("tar", "pax.tar", shard([("d/" + "x" * 120 + ".png", px), ("d/" + "x" * 120 + ".cls", b"0")],
                                tarfile.PAX_FORMAT))
    out("tar", "gnu.tar", shard([("g" * 110 + ".png", px), ("g" * 110 + ".cls", b"0")],
                                tarfile.GNU_FORMAT))
    out("tar", "incomplete.tar", shard([("dir", None), ("a.png", px), ("b.cls", b"x")]))


def main():
    # PNG: the colour types and depths, palette + tRNS, interlace, damage.
    g8 = png(5, 3, 0, 8, [bytes((x * 40 + y) & 255 for x in range(5)) for y in range(3)])
    out("png", "gray8.png", g8)
    out("png", "gray1.png", png(9, 2, 0, 1, [b"\xa5\x80", b"\x5a\x00"]))
    out("png", "rgb8.png", png(3, 3, 2, 8, [bytes(range(y, y + 9)) for y in range(3)]))
    out("png", "rgba16.png", png(2, 2, 6, 16, [bytes(range(16)), bytes(range(16, 32))]))
    plte = chunk(b"PLTE", bytes([255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9]))
    trns = chunk(b"tRNS", bytes([0, 128]))
    out("png", "pal_trns.png", png(4, 2, 3, 2, [b"\x1b", b"\xe4"], extra=plte + trns))
    out("png", "gray_alpha_interlaced.png",
        png(7, 7, 4, 8, [bytes((x * y) & 255 for x in range(14)) for y in range(7)], interlace=1))
    # Interlaced raw rows are per pass; the encoder above writes them as one image,
    # so this file is "corrupt" in an interesting way: the decoder must fail cleanly.
    out("png", "truncated.png", g8[: len(g8) - 20])
    bad = bytearray(g8)
    bad[-20] ^= 0x55
    out("png", "bad_crc.png", bytes(bad))
    out("png", "text_chunk.png",
        png(2, 1, 0, 8, [b"\x01\x02"], extra=chunk(b"tEXt", b"k\x00v") + chunk(b"zTXt", b"k\x00\x00" + zlib.compress(b"x" * 100))))

    # IDX: 2-byte little-endian labels length, labels file, images file.
    def idx(dims, data):
        return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data

    def pair(labels, images):
        return struct.pack("<H", len(labels)) + labels + images

    lab3 = idx([3], bytes([1, 0, 7]))
    out("idx", "three_2x3.idx", pair(lab3, idx([3, 2, 3], bytes(range(18)))))
    out("idx", "rgb_1x2x2x3.idx", pair(idx([1], b"\x04"), idx([1, 2, 2, 3], bytes(range(12)))))
    out("idx", "gz.idx", pair(gzip.compress(lab3, mtime=0), gzip.compress(idx([3, 1, 1], b"\x01\x02\x03"), mtime=0)))
    out("idx", "truncated.idx", pair(lab3, idx([3, 4, 4], bytes(10))))
    out("idx", "trailing.idx", pair(lab3, idx([3, 1, 1], bytes(5))))
    out("idx", "huge_dims.idx", pair(lab3, idx([3, 0xffffffff, 0xffffffff], b"")))
    out("idx", "f32.idx", pair(lab3, bytes([0, 0, 0x0D, 1]) + struct.pack(">I", 1) + b"\0\0\0\0"))

    # List files; a.png and b.png exist beside the list when the target runs.
    out("list", "simple.txt", b"a.png,0\nb.png,3\n")
    out("list", "tabs_comments.txt", b"# header\n\n  a.png\t1  \r\nb.png , 2\n# end")
    out("list", "commas_in_path.txt", b"x,y.png,4\na.png,0\n")
    out("list", "bad_label.txt", b"a.png,-1\n")
    out("list", "no_sep.txt", b"a.png\n")
    out("list", "abs_and_missing.txt", b"/nonexistent/z.png,0\nmissing.png,2147483647\n")
    out("list", "nul.txt", b"a.png,0\n\x00b.png,1\n")

    # Device strings.
    for i, s in enumerate([b"cpu", b"cuda", b"cuda:0", b"cuda:1", b"cuda:2147483647",
                           b"cuda:2147483648", b"cuda:-1", b"cuda:", b"CPU", b"cuda:0x1",
                           b"cuda:00", b"cuda:1 ", b""]):
        out("device", "s%02d" % i, s)


def jpeg_seeds():
    # JPEGs written by PIL (python3-pil; imported here only): tiny images of
    # each kind, one with an EXIF orientation, a truncated and a corrupt one.
    import io
    import struct as st
    from PIL import Image

    def jpeg(im, **kw):
        b = io.BytesIO()
        im.save(b, "JPEG", **kw)
        return b.getvalue()

    rgb = Image.new("RGB", (13, 9))
    rgb.putdata([((x * 19) % 256, (y * 28) % 256, (x * y * 7) % 256)
                 for y in range(9) for x in range(13)])
    exif = b"Exif\x00\x00II*\x00" + st.pack("<IHHHIHHI", 8, 1, 0x0112, 3, 1, 6, 0, 0)
    seeds = {
        "rgb420.jpg": jpeg(rgb, quality=50, subsampling=2),
        "rgb444.jpg": jpeg(rgb, quality=50, subsampling=0),
        "gray.jpg": jpeg(rgb.convert("L"), quality=50),
        "progressive.jpg": jpeg(rgb, quality=50, progressive=True),
        "cmyk.jpg": jpeg(rgb.convert("CMYK"), quality=50),
        "exif6.jpg": jpeg(rgb, quality=50, exif=exif),
    }
    # Larger ones, so that random crop boxes span several iMCU rows and
    # columns and decode at reduced DCT scales (1/2, 1/4, M/8).
    big = Image.new("RGB", (72, 52))
    big.putdata([((x * 11 + y * 3) % 256, (y * 13) % 256, (x * y * 5) % 256)
                 for y in range(52) for x in range(72)])
    seeds["big420.jpg"] = jpeg(big, quality=40, subsampling=2)
    seeds["big422.jpg"] = jpeg(big, quality=40, subsampling=1)
    seeds["truncated.jpg"] = seeds["rgb420.jpg"][:-40]
    bad = bytearray(seeds["progressive.jpg"])
    for i in range(len(bad) - 60, len(bad) - 10, 7):
        bad[i] ^= 0x5a
    seeds["corrupt.jpg"] = bytes(bad)
    for name, data in seeds.items():
        out("jpeg", name, data)


def index_file(shard_size, records, names, classes=(), gzip=0, crc=True):
    # A shard's index as shards_cache.c writes it (little-endian, as on the
    # machines ferry runs on): a 112-byte head, 56-byte records (img_off,
    # img_size, hdr_off, cls_off, label, name, shard, problem), the key names
    # and class names NUL-terminated, then the CRC-32 of all that.
    blob = b"".join(n.encode() + b"\0" for n in names)
    cls = b"".join(c.encode() + b"\0" for c in classes)
    head = struct.pack("<8sIIQqqQQQQB7x32s", b"FERRYIX1", 2, 56, shard_size, 0, 0,
                       len(records), len(blob), len(cls), len(classes), gzip,
                       b"__classes__.txt" if classes else b"")
    body = head + b"".join(struct.pack("<QQQQqQIB3x", *r) for r in records) + blob + cls
    return body + struct.pack("<I", zlib.crc32(body) & 0xffffffff if crc else 0)


def index_seeds():
    # Shard indexes (fuzz_index): the fuzz target puts the right CRC in
    # itself. Records: (img_off, img_size, hdr_off, cls_off, label, name
    # offset, shard, problem); problem 0 ok, 1 no image, 2 no label, 3 bad label.
    two = [(512, 100, 0, 1024, 1, 0, 0, 0), (2560, 90, 2048, 3584, 0, 6, 0, 0)]
    out("index", "two.ix", index_file(10240, two, ["0.png", "1.png"]))
    out("index", "classes.ix", index_file(10240, two, ["0.png", "1.png"], ["cat", "dog"]))
    out("index", "problems.ix", index_file(8192, [(0, 0, 0, 0, 3, 0, 0, 1), (1536, 7, 1024, 0, -1, 2, 0, 2),
                                                  (3584, 7, 3072, 4096, -1, 8, 0, 3)],
                                           ["a", "b.png", "c.png"]))
    out("index", "gzip.ix", index_file(300, two, ["0.png", "1.png"], gzip=1))
    out("index", "empty.ix", index_file(1024, [], []))
    # The crasher of issue 36: an offset that wraps past 2^64 onto a small one
    # (2^64 - 64 MiB + 1000, 64 MiB long, in a 64 MiB shard).
    wrap = [((1 << 64) - (64 << 20) + 1000, 64 << 20, 0, 0, 1, 0, 0, 0)]
    d = os.path.join(HERE, "..", "data", "crashers", "index")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "wrapped_offset.ix"), "wb") as f:
        f.write(index_file(64 << 20, wrap, ["0.png"]))


def npy_seeds():
    # NPY: a dozen of the files NumPy wrote for tests/test_npy.c (made by
    # tests/ref/gen_npy.py, which needs NumPy): good ones of each version and
    # dtype, and bad ones of each kind.
    src = os.path.join(HERE, "..", "data", "npy")
    for name in ["f32_3x4", "f16_5", "bool_4", "i64_scalar", "f32_0x4", "boxes_v2", "labels_v3",
                 "fortran", "structured", "truncated", "huge_header", "dup_key"]:
        with open(os.path.join(src, name + ".npy"), "rb") as f:
            out("npy", name + ".npy", f.read())


if __name__ == "__main__":
    main()
    npy_seeds()
    tar_seeds()
    jpeg_seeds()
    index_seeds()
