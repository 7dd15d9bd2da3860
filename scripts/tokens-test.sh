#!/bin/sh
# `ferry pack --tokens`, `ferry check` on token files and `ferry bench tokens`
# end to end: text packed with the byte-level tokenizer gives the tokens
# Python computes (256, then the bytes, per document; --split % for fortune
# files), shards are cut at --shard-tokens without splitting a document,
# --from-tokens re-shards a stream unchanged, check passes good shards and
# names a corrupt one (exit 1), --vocab finds a token out of range, bench
# prints both rows, and bad arguments exit 2. Prints one line per check and a
# "N passed, N failed, N skipped" summary.
#   FERRY_BUILD=build/cpu sh scripts/tokens-test.sh   (default: build)
build=${FERRY_BUILD:-build}
passed=0 failed=0 skipped=0
ok() { echo "ok    tokens $1"; passed=$((passed + 1)); }
bad() { echo "FAIL  tokens $1"; failed=$((failed + 1)); }
skip() { echo "skip  tokens $1"; skipped=$((skipped + 1)); }
finish() { echo "$passed passed, $failed failed, $skipped skipped"; [ "$failed" -eq 0 ]; exit $?; }
check() { if [ "$2" = 0 ]; then ok "$1"; else bad "$1"; fi; }

ferry=$build/ferry
py=/usr/bin/python3
if [ ! -x "$ferry" ]; then skip "($ferry not built)"; finish; fi
if ! "$py" -c "import numpy" 2>/dev/null; then skip "($py with NumPy is missing)"; finish; fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-tokens-test-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/text"
printf 'first fortune\n%%\nsecond\none, two lines\n%%\n\xc3\xa9t\xc3\xa9\n' > "$tmp/text/a"
printf 'a whole file, no split lines\n' > "$tmp/text/b"
"$ferry" pack --tokens "$tmp/text" "$tmp/out" --split % > /dev/null
check "pack --tokens runs" $?
"$py" - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
want = []
for name in ("a", "b"):
    raw = open(d + "/text/" + name, "rb").read()
    lines = raw.split(b"\n")
    docs, cur = [], []
    for i, line in enumerate(lines):
        last = i == len(lines) - 1
        if line == b"%":
            docs.append(b"".join(cur)); cur = []
        else:
            cur.append(line + (b"" if last else b"\n"))
    docs.append(b"".join(cur))
    for doc in docs:
        if doc:
            want += [256] + list(doc)
h = np.fromfile(d + "/out/tokens_000000.bin", dtype="<i4", count=256)
t = np.fromfile(d + "/out/tokens_000000.bin", dtype="<u2", offset=1024)
assert h[0] == 20240520 and h[1] == 1 and h[2] == len(t), h[:3]
assert t.tolist() == want, (t.tolist(), want)
EOF
check "byte tokens and llm.c header match Python" $?

"$ferry" pack --tokens "$tmp/text" "$tmp/small" --split % --shard-tokens 20 > /dev/null
"$py" - "$tmp" <<'EOF'
import sys, glob, numpy as np
d = sys.argv[1]
whole = np.fromfile(d + "/out/tokens_000000.bin", dtype="<u2", offset=1024).tolist()
parts = []
for p in sorted(glob.glob(d + "/small/tokens_*.bin")):
    t = np.fromfile(p, dtype="<u2", offset=1024).tolist()
    assert len(t) <= 20, (p, len(t))
    assert t[0] == 256 or t.count(256) == 0, p  # a shard starts a document, or continues a long one
    parts += t
assert parts == whole
assert len(glob.glob(d + "/small/tokens_*.bin")) > 2
EOF
check "--shard-tokens cuts between documents" $?

"$ferry" pack --tokens --from-tokens "$tmp/small" "$tmp/re" --shard-tokens 7 > /dev/null
"$py" - "$tmp" <<'EOF'
import sys, glob, numpy as np
d = sys.argv[1]
whole = np.fromfile(d + "/out/tokens_000000.bin", dtype="<u2", offset=1024).tolist()
got = []
for p in sorted(glob.glob(d + "/re/tokens_*.bin")):
    t = np.fromfile(p, dtype="<u2", offset=1024).tolist()
    assert len(t) <= 7
    got += t
assert got == whole
EOF
check "--from-tokens re-shards the stream unchanged" $?

"$ferry" check "$tmp/re" > /dev/null
check "check passes good shards" $?
"$ferry" check "$tmp/out" --vocab 257 > /dev/null
check "check --vocab 257 passes byte tokens" $?
out=$("$ferry" check "$tmp/out" --vocab 256)
[ $? = 1 ] && echo "$out" | grep -q "token 0 is 256"
check "check --vocab 256 names the end-of-text token" $?
head -c 1500 "$tmp/out/tokens_000000.bin" > "$tmp/re/tokens_000099.bin"
truncate -s 1030 "$tmp/re/tokens_000099.bin"
out=$("$ferry" check "$tmp/re")
[ $? = 1 ] && echo "$out" | grep -q "tokens_000099.bin: the header says"
check "check names a truncated shard" $?

out=$("$ferry" bench tokens --make 300000 "$tmp/bench" --batches 20 --seq-len 64 --batch 4)
[ $? = 0 ] && echo "$out" | grep -q "ferry loader" && echo "$out" | grep -q "sync fread"
check "bench tokens prints both rows" $?

out=$("$ferry" bench "$tmp/bench" --batches 10 --seq-len 64 --batch 4)
[ $? = 0 ] && echo "$out" | grep -q "sync fread"
check "bench on a folder of token files is bench tokens" $?

"$ferry" pack --tokens "$tmp/text" > /dev/null 2>&1
check "pack --tokens without OUT exits 2" $(( $? == 2 ? 0 : 1 ))
"$ferry" bench tokens --batch 0 "$tmp/bench" > /dev/null 2>&1
check "bench tokens --batch 0 exits 2" $(( $? == 2 ? 0 : 1 ))
finish
