#!/usr/bin/env python3
"""Writes tests/ref/tokens/ for tests/test_tokens.c with NumPy, independently of
ferry's C code: token files in every format and what each way of cutting them
must give.

- s1_000.bin (llm.c header, magic 20240520 v1, uint16), s1_001.npy (<u2),
  s1_002.bin (llm.c uint16): documents that start with the delimiter 50256
  (s1_001.npy's first tokens are a document without one).
- s2_000.bin: llm.c magic 20240801 v7, uint32 tokens above 65535.
- raw_train.bin: a headerless uint16 file (nanoGPT's train.bin).
- *.txt: the expected samples. Each file: a line of counts, then per sample
  its tokens (windows); for documents also the row's document count, its
  offsets (cu_seqlens over the T inputs) and its T position ids.

Windows: sample i of a shard is tokens [i*T, i*T + T + 1) of that shard; they
never cross a shard's end. Documents: the order is a Fisher-Yates shuffle
driven by splitmix64(seed ^ 0x746f6b656e73); rows of T + 1 tokens are filled
from a buffer of up to B documents (refilled in order before every pick) with
the longest that fits what is left (earliest taken among equals), or else the
shortest (earliest among equals) cropped to fill the row; the last row is
padded with the pad token (the delimiter).

Run: /usr/bin/python3 tests/ref/make_tokens_ref.py  (about 60 KB of output)."""
import os

import numpy as np

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokens")
DELIM = 50256
M64 = (1 << 64) - 1


def llmc(path, toks, u32=False):
    header = np.zeros(256, dtype="<i4")
    header[0] = 20240801 if u32 else 20240520
    header[1] = 7 if u32 else 1
    header[2] = len(toks)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(toks, dtype="<u4" if u32 else "<u2").tobytes())


def documents(rng, n, lead=0):
    out = list(rng.integers(0, 50000, size=lead))
    for _ in range(n):
        length = int(rng.choice([1, 2, 3, 5, 8, 13, 21, 34, 40]))
        out.append(DELIM)
        out.extend(int(x) for x in rng.integers(0, 50000, size=length - 1))
    return out


def windows(shards, T):
    rows = []
    for toks in shards:
        for i in range((len(toks) - 1) // T if len(toks) > T else 0):
            rows.append(list(toks[i * T:i * T + T + 1]))
    return rows


def splitmix(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def order(seed, n):
    perm = list(range(n))
    s = seed ^ 0x746F6B656E73
    for i in range(n, 1, -1):
        s, r = splitmix(s)
        j = r % i
        perm[i - 1], perm[j] = perm[j], perm[i - 1]
    return perm


def split_docs(shards):
    docs = []
    for toks in shards:
        starts = [i for i, t in enumerate(toks) if t == DELIM]
        if not starts or starts[0] != 0:
            starts = [0] + starts
        ends = starts[1:] + [len(toks)]
        docs.extend(list(toks[a:b]) for a, b in zip(starts, ends))
    return docs


def pack(docs, T, B, seed):
    """Linear scans over an unsorted buffer of (place taken, document)."""
    cap = T + 1
    queue = [docs[i] for i in order(seed, len(docs))]
    taken = 0
    buf, rows = [], []
    cropped = padded = 0
    while True:
        while len(buf) < B and taken < len(queue):
            buf.append((taken, queue[taken]))
            taken += 1
        if not buf:
            break
        row, lens = [], []
        while len(row) < cap:
            while len(buf) < B and taken < len(queue):
                buf.append((taken, queue[taken]))
                taken += 1
            if not buf:
                padded += cap - len(row)
                row += [DELIM] * (cap - len(row))
                break
            left = cap - len(row)
            fit = [e for e in buf if len(e[1]) <= left]
            if fit:
                best = max(len(e[1]) for e in fit)
                pick = min((e for e in fit if len(e[1]) == best), key=lambda e: e[0])
            else:
                short = min(len(e[1]) for e in buf)
                pick = min((e for e in buf if len(e[1]) == short), key=lambda e: e[0])
            buf.remove(pick)
            part = pick[1][:left]
            cropped += len(pick[1]) - len(part)
            lens.append(len(part))
            row += part
        rows.append((row, lens))
    return rows, cropped, padded


def bounds(lens, T):
    offsets, positions, at = [], [], 0
    for n in lens:
        if at >= T:
            break
        offsets.append(at)
        positions += list(range(min(n, T - at)))
        at += n
    valid = min(at, T)
    offsets.append(valid)
    while len(positions) < T:
        positions.append(positions[-1] + 1)
    return offsets, positions


def write_windows(name, rows, dropped):
    with open(os.path.join(HERE, name), "w") as f:
        f.write("%d %d\n" % (len(rows), dropped))
        for r in rows:
            f.write(" ".join(map(str, r)) + "\n")


def write_docs(name, rows, T, ndocs, cropped, padded):
    with open(os.path.join(HERE, name), "w") as f:
        f.write("%d %d %d %d\n" % (len(rows), ndocs, cropped, padded))
        for row, lens in rows:
            offsets, positions = bounds(lens, T)
            f.write(" ".join(map(str, row)) + "\n")
            f.write("%d %s\n" % (len(offsets) - 1, " ".join(map(str, offsets))))
            f.write(" ".join(map(str, positions)) + "\n")


def main():
    os.makedirs(HERE, exist_ok=True)
    rng = np.random.default_rng(40)
    s1 = [documents(rng, 30), documents(rng, 25, lead=6), documents(rng, 20)]
    llmc(os.path.join(HERE, "s1_000.bin"), s1[0])
    np.save(os.path.join(HERE, "s1_001.npy"), np.asarray(s1[1], dtype="<u2"))
    llmc(os.path.join(HERE, "s1_002.bin"), s1[2])
    s2 = [int(x) for x in rng.integers(60000, 1 << 31, size=203)]
    llmc(os.path.join(HERE, "s2_000.bin"), s2, u32=True)
    raw = [int(x) for x in rng.integers(0, 65536, size=250)]
    np.asarray(raw, dtype="<u2").tofile(os.path.join(HERE, "raw_train.bin"))

    def dropped(shards, T):
        return sum(len(s) - (((len(s) - 1) // T) * T + 1 if len(s) > T else 0) for s in shards)

    write_windows("s1_windows_T7.txt", windows(s1, 7), dropped(s1, 7))
    write_windows("s2_windows_T5.txt", windows([s2], 5), dropped([s2], 5))
    write_windows("raw_windows_T9.txt", windows([raw], 9), dropped([raw], 9))
    docs = split_docs(s1)
    for T, B, seed in ((15, 4, 5), (31, 1000, 0), (8, 1, 3)):
        rows, cropped, padded = pack(docs, T, B, seed)
        write_docs("s1_docs_T%d_B%d_S%d.txt" % (T, B, seed), rows, T, len(docs), cropped, padded)


if __name__ == "__main__":
    main()
