#!/usr/bin/python3
"""Writes the NPY fixtures of tests/data/npy/ with NumPy's own writer
(np.save / np.lib.format.write_array), the reference tests/test_npy.c reads
ferry's parser against. Files are checked in; this reproduces them:
    /usr/bin/python3 tests/ref/gen_npy.py
Each good file X.npy has X.bin beside it (arr.tobytes(), C order) and a line
"X good DTYPE NDIM D0 D1 ..." in MANIFEST; each bad one "X bad STATUS TEXT"
(ferry's status and a part of its message)."""
import io, os
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "npy")
lines = []


def npy(arr, version=None):
    b = io.BytesIO()
    if version:
        np.lib.format.write_array(b, arr, version=version)
    else:
        np.save(b, arr)
    return b.getvalue()


def good(name, arr, dt, version=None):
    with open(os.path.join(OUT, name + ".npy"), "wb") as f:
        f.write(npy(arr, version))
    with open(os.path.join(OUT, name + ".bin"), "wb") as f:
        f.write(np.ascontiguousarray(arr).tobytes())
    lines.append(" ".join([name, "good", dt, str(arr.ndim)] + [str(d) for d in arr.shape]))


def bad(name, data, status, text):
    with open(os.path.join(OUT, name + ".npy"), "wb") as f:
        f.write(data)
    lines.append(" ".join([name, "bad", status, text]))


rng = np.random.default_rng(39)
os.makedirs(OUT, exist_ok=True)
good("f32_3x4", rng.standard_normal((3, 4)).astype("<f4"), "f32")
good("f16_5", rng.standard_normal(5).astype("<f2"), "f16")
good("u8_2x3x4", rng.integers(0, 256, (2, 3, 4)).astype("u1"), "u8")
good("bool_4", np.array([True, False, True, True]), "u8")
good("i32_2x2", np.array([[1, -2], [2**31 - 1, -2**31]], dtype="<i4"), "i32")
good("i64_scalar", np.array(-(2**40) + 3, dtype="<i8"), "i64")
good("i64_7", np.arange(7, dtype="<i8") * 1000003, "i64")
good("f32_0x4", np.zeros((0, 4), dtype="<f4"), "f32")
good("f32_4d", rng.standard_normal((2, 1, 3, 2)).astype("<f4"), "f32")
good("boxes_v2", rng.uniform(0, 50, (3, 4)).astype("<f4"), "f32", version=(2, 0))
good("labels_v3", np.array([3, 1, 4], dtype="<i8"), "i64", version=(3, 0))
# Sliced (not contiguous) arrays are written in C order by numpy.
good("f32_sliced", rng.standard_normal((4, 6)).astype("<f4")[::2, 1:4], "f32")

bad("big_endian", npy(np.arange(3, dtype=">f4")), "UNSUPPORTED", "big-endian")
bad("f64", npy(np.arange(3, dtype="<f8")), "UNSUPPORTED", "'<f8' has no ferry dtype")
bad("fortran", npy(np.asfortranarray(np.ones((2, 3), dtype="<f4"))), "UNSUPPORTED", "Fortran order")
bad("structured", npy(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")])), "FORMAT",
    "structured dtype")
bad("five_dims", npy(np.zeros((1, 1, 1, 1, 2), dtype="<f4")), "UNSUPPORTED", "more than 4 dimensions")
ok = npy(np.arange(6, dtype="<f4"))
bad("truncated", ok[:-3], "FORMAT", "says 24 bytes of data, the file holds 21")
bad("trailing", ok + b"\0\0\0\0", "FORMAT", "says 24 bytes of data, the file holds 28")
bad("magic", b"\x93NUMPZ" + ok[6:], "FORMAT", "not an NPY file")
bad("version4", ok[:6] + b"\x04\x00" + ok[8:], "UNSUPPORTED", "NPY version 4.0")
bad("huge_header", ok[:8] + b"\xff\xff" + ok[10:], "LIMIT", "NPY header of 65535 bytes")
bad("header_past_end", ok[:8] + bytes([len(ok) & 255, len(ok) >> 8]) + ok[10:], "FORMAT",
    "but the file ends after")
bad("unknown_key", ok.replace(b"'shape'", b"'shapf'"), "FORMAT",
    "a key other than 'descr', 'fortran_order' and 'shape'")
bad("negative_dim", ok.replace(b"(6,)", b"(-6)"), "FORMAT", "not a non-negative integer")


def reshape(data, new):
    # The header's shape replaced in place, the padding taking up the difference.
    at = data.index(b"(6,), }")
    end = data.index(b"\n", at)
    return data[:at] + (new + b", }").ljust(end - at) + data[end:]


bad("eval_bait", reshape(ok, b"__import__('os').system('true')"), "FORMAT", "'shape' is not a tuple")
bad("huge_dim", reshape(ok, b"(99999999999999,)"), "FORMAT", "below 2^40")
bad("overflow", reshape(ok, b"(1099511627775, 1099511627775, 1099511627775)"), "FORMAT",
    "NPY shape overflows")
bad("dup_key", ok.replace(b"'fortran_order': False", b"'descr': '<f4'        "), "FORMAT",
    "a key given twice")
bad("empty", b"", "FORMAT", "not an NPY file")

with open(os.path.join(OUT, "MANIFEST"), "w") as f:
    f.write("\n".join(lines) + "\n")
