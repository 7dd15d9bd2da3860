#!/bin/sh
# `ferry pack` end to end, on a small image folder made here (an IDX pair
# written by Python, exported by `ferry export idx`): the shards hold the source
# files' bytes and labels in sample order, `tar tf` lists them, Python's tarfile
# reads them, `ferry bench` prints the same digest for the shards as for the
# folder, `ferry check` passes them and names a corrupt sample, --shard-size
# splits, an IDX pair packs, PACK.txt maps keys to source files, a truncated
# JPEG stops the pack (--no-check packs it), bad arguments exit 2, and the same shards
# gzip-compressed (by gzip, GNU tar and Python) give the same digest. Prints one line per check
# and a "N passed, N failed, N skipped" summary.
#   FERRY_BUILD=build/h5 sh scripts/pack-test.sh   (default: build)
build=${FERRY_BUILD:-build}
passed=0 failed=0 skipped=0
ok() { echo "ok    pack $1"; passed=$((passed + 1)); }
bad() { echo "FAIL  pack $1"; failed=$((failed + 1)); }
skip() { echo "skip  pack $1"; skipped=$((skipped + 1)); }
finish() { echo "$passed passed, $failed failed, $skipped skipped"; [ "$failed" -eq 0 ]; exit $?; }
check() { if [ "$2" = 0 ]; then ok "$1"; else bad "$1"; fi; }

ferry=$build/ferry
py=/usr/bin/python3
if [ ! -x "$ferry" ]; then skip "($ferry not built)"; finish; fi
if [ ! -x "$py" ]; then skip "($py is missing: it writes the source IDX pair)"; finish; fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-pack-test-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# 300 images of 9x7, 4 classes, pixels from a seeded generator.
"$py" - "$tmp" <<'EOF'
import random, struct, sys
d = sys.argv[1]; n, h, w = 300, 7, 9
r = random.Random(5)
with open(d + "/img.idx", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, n, h, w))
    f.write(bytes(r.randrange(256) for _ in range(n * h * w)))
with open(d + "/lab.idx", "wb") as f:
    f.write(struct.pack(">II", 0x801, n))
    f.write(bytes(r.randrange(4) for _ in range(n)))
EOF
"$ferry" export idx "$tmp/img.idx" "$tmp/lab.idx" "$tmp/folder" > /dev/null 2>&1
check "source folder exported" $?

"$ferry" pack "$tmp/folder" "$tmp/shards" --shard-size 40K --no-shuffle > "$tmp/out" 2>&1
check "pack exits 0 ($(cat "$tmp/out"))" $?
nshards=0 others=0
for f in "$tmp/shards"/* "$tmp/shards"/.[!.]*; do
    [ -e "$f" ] || continue
    case ${f##*/} in shard-[0-9][0-9][0-9][0-9][0-9][0-9].tar) nshards=$((nshards + 1)) ;; PACK.txt) ;; *) others=$((others + 1)) ;; esac
done
[ "$nshards" -gt 1 ] && [ "$others" -eq 0 ]
check "--shard-size 40K gives $nshards shards and nothing else (but PACK.txt)" $?
big=0
for s in "$tmp/shards"/*.tar; do [ "$(wc -c < "$s")" -le 40960 ] || big=1; done
check "every shard within 40K" $big

if command -v tar > /dev/null 2>&1; then
    for s in "$tmp/shards"/*.tar; do tar tf "$s"; done > "$tmp/list" 2> "$tmp/err"
    [ ! -s "$tmp/err" ] && [ "$(grep -c '\.png$' "$tmp/list")" -eq 300 ] &&
        [ "$(grep -c '\.cls$' "$tmp/list")" -eq 300 ] &&
        [ "$(grep -c '^__classes__\.txt$' "$tmp/list")" -eq "$nshards" ]
    check "tar tf lists 300 .png, 300 .cls and a __classes__.txt per shard, quietly" $?
else
    skip "tar tf (tar is not installed)"
fi

# Python reads every shard; member i.png must be the folder's i-th file (class
# folders in name order, files in name order), i.cls its class index.
"$py" - "$tmp" <<'EOF'
import os, sys, tarfile
d = sys.argv[1]
classes = sorted(os.listdir(d + "/folder"))
files = [(c, d + "/folder/" + c + "/" + f) for c in classes for f in sorted(os.listdir(d + "/folder/" + c))]
got = {}
for s in sorted(x for x in os.listdir(d + "/shards") if x.endswith(".tar")):
    with tarfile.open(d + "/shards/" + s) as t:
        names = t.extractfile("__classes__.txt").read().decode().split("\n")[:-1]
        assert names == classes, (names, classes)
        for m in t.getmembers():
            assert m.isreg(), m.name
            got[m.name] = t.extractfile(m).read()
assert len(got) == 2 * len(files) + 1, len(got)  # one name for every __classes__.txt
for i, (c, p) in enumerate(files):
    assert got["%06d.png" % i] == open(p, "rb").read(), i
    assert got["%06d.cls" % i] == str(classes.index(c)).encode(), i
EOF
check "Python's tarfile reads the shards: bytes and labels match the folder" $?

digest() { "$ferry" bench "$1" --workers "$2" --epochs 1 --batch 32 2> /dev/null | awk '$1 ~ /^[0-9]+$/ { print $NF }'; }
a=$(digest "$tmp/folder" 2) b=$(digest "$tmp/shards" 2) c=$(digest "$tmp/shards" 0)
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$b" = "$c" ]
check "ferry bench digest: folder $a, shards $b (2 workers), $c (0 workers)" $?
# Gzip-compressed shards give the same digest: gzip(1) of each shard, GNU tar
# czf of each shard's files (in the order the folder lists them), and Python's
# tarfile "w:gz" with the members reversed; streaming too (each shard is read
# in stored order, so gzip(1)'s copy streams exactly as the .tar does).
if command -v gzip > /dev/null 2>&1; then
    mkdir "$tmp/gz" && for s in "$tmp/shards"/*.tar; do gzip -c "$s" > "$tmp/gz/${s##*/}.gz"; done
    g=$(digest "$tmp/gz" 2) g0=$(digest "$tmp/gz" 0)
    [ -n "$g" ] && [ "$g" = "$a" ] && [ "$g0" = "$a" ]
    check "ferry bench digest: gzip(1) shards $g (2 workers), $g0 (0 workers), folder $a" $?
    sdig() { "$ferry" bench "$1" --workers 2 --epochs 1 --batch 32 --stream 50 2> /dev/null | awk '$1 ~ /^[0-9]+$/ { print $NF }'; }
    s1=$(sdig "$tmp/shards") s2=$(sdig "$tmp/gz")
    [ -n "$s1" ] && [ "$s1" = "$s2" ]
    check "ferry bench --stream 50 digest: .tar $s1, .tar.gz $s2" $?
else
    skip "gzip(1) shards (gzip is not installed)"
fi
if command -v tar > /dev/null 2>&1; then
    mkdir "$tmp/gnu" && for s in "$tmp/shards"/*.tar; do
        x="$tmp/x/${s##*/}"; mkdir -p "$x" && tar xf "$s" -C "$x" &&
            tar czf "$tmp/gnu/${s##*/}.gz" -C "$x" . || echo fail
    done > "$tmp/err" 2>&1
    g=$(digest "$tmp/gnu" 2)
    [ ! -s "$tmp/err" ] && [ -n "$g" ] && [ "$g" = "$a" ]
    check "ferry bench digest: GNU tar czf shards $g, folder $a" $?
else
    skip "GNU tar czf shards (tar is not installed)"
fi
"$py" - "$tmp" <<'EOF2'
import os, sys, tarfile
d = sys.argv[1]
os.mkdir(d + "/pygz")
for s in sorted(x for x in os.listdir(d + "/shards") if x.endswith(".tar")):
    with tarfile.open(d + "/shards/" + s) as t, \
         tarfile.open(d + "/pygz/" + s[:-4] + ".tgz", "w:gz") as o:
        for m in reversed(t.getmembers()):
            o.addfile(m, t.extractfile(m))
EOF2
g=$(digest "$tmp/pygz" 2)
[ -n "$g" ] && [ "$g" = "$a" ]
check "ferry bench digest: Python tarfile w:gz shards (members reversed) $g, folder $a" $?
"$ferry" check -j 2 "$tmp/pygz" > "$tmp/out" 2>&1 && grep -q "300 shard samples, 300 ok, 0 bad" "$tmp/out"
check "ferry check on the .tgz shards: 300 ok" $?

# A list of shard paths (relative to the list's folder, '#' comments allowed).
{ echo "# the shards, in order"; for s in "$tmp/shards"/*.tar; do echo "shards/${s##*/}"; done; } > "$tmp/list.txt"
l=$(digest "$tmp/list.txt" 2)
[ -n "$l" ] && [ "$l" = "$a" ]
check "ferry bench on a list of shard paths: digest $l, folder $a" $?
"$ferry" check "$tmp/list.txt" > "$tmp/out" 2>&1 && grep -q "300 shard samples, 300 ok, 0 bad" "$tmp/out"
check "ferry check on a list of shard paths: 300 ok" $?

b1=$(digest "$tmp/shards/shard-000000.tar" 1)
[ -n "$b1" ] && [ "$b1" != "$a" ]
check "ferry bench on one .tar runs (a subset: digest $b1)" $?

"$ferry" check -j 2 "$tmp/shards" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "300 shard samples, 300 ok, 0 bad" "$tmp/out"
check "ferry check on the shards: 300 ok" $?
cp "$tmp/shards/shard-000000.tar" "$tmp/one.tar"
# Spoil the first image's data (it starts after __classes__.txt and its own header).
printf 'XXXXXXXXXXXXXXXX' | dd of="$tmp/one.tar" bs=1 seek=$((1024 + 512 + 40)) conv=notrunc 2> /dev/null
"$ferry" check "$tmp/one.tar" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "one.tar:000000.png: " "$tmp/out"
check "ferry check names the spoilt sample ($(head -n 1 "$tmp/out"))" $?

# A folder of shards with two corrupt ones: each is named, the others checked.
mkdir "$tmp/bad2" && cp "$tmp/shards"/*.tar "$tmp/bad2/"
ls "$tmp/bad2"/*.tar | sed -n '1p;3p' | while read -r s; do head -c 700 "$s" > "$s.x" && mv "$s.x" "$s"; done
"$ferry" check "$tmp/bad2" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "shard-000000.tar" "$tmp/out" && grep -q "shard-000002.tar" "$tmp/out" &&
    grep -q "shard samples, .* ok, 2 bad" "$tmp/out"
check "ferry check names both corrupt shards of a folder and checks the rest ($(tail -n 1 "$tmp/out"))" $?

"$ferry" pack "$tmp/folder" "$tmp/shards" --no-shuffle > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "already holds shards" "$tmp/out"
check "pack refuses a folder that already holds shards" $?
mkdir -p "$tmp/oldgz" && gzip -c "$tmp/shards/shard-000000.tar" > "$tmp/oldgz/old.tar.gz"
"$ferry" pack "$tmp/folder" "$tmp/oldgz" --no-shuffle > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "already holds shards (old.tar.gz)" "$tmp/out"
check "pack refuses a folder that holds an old .tar.gz shard" $?

"$ferry" pack "$tmp/img.idx" "$tmp/idx" --labels "$tmp/lab.idx" > /dev/null 2>&1 &&
    "$ferry" check "$tmp/idx" | grep -q "300 shard samples, 300 ok"
check "an IDX pair packs and checks" $?
# Shards each whole that do not go together (their class names differ): the
# library refuses the folder, so check must not say "ok".
cp -r "$tmp/folder" "$tmp/folder2" && mv "$tmp/folder2/0" "$tmp/folder2/zero" &&
    "$ferry" pack "$tmp/folder2" "$tmp/shards2" --no-shuffle > /dev/null 2>&1 &&
    mkdir -p "$tmp/mix" && cp "$tmp/shards/shard-000000.tar" "$tmp/mix/a.tar" &&
    cp "$tmp/shards2/shard-000000.tar" "$tmp/mix/b.tar"
"$ferry" check "$tmp/mix" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "1 bad" "$tmp/out"
check "check fails a folder of shards that do not go together (exit $rc: $(head -n 1 "$tmp/out"))" $?

# An export reads back with the labels it came from, however many classes:
# 12 classes, so that bytewise folder order ("10" before "2") would permute
# them; the labels ferry gives are the class order of `ferry pack`'s
# __classes__.txt. Fashion-MNIST's named folders keep label order too.
"$py" - "$tmp" <<'EOF'
import random, struct, sys
d = sys.argv[1]; n = 60
r = random.Random(7)
with open(d + "/img12.idx", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, n, 3, 2))
    f.write(bytes(r.randrange(256) for _ in range(n * 6)))
with open(d + "/lab12.idx", "wb") as f:
    f.write(struct.pack(">II", 0x801, n))
    f.write(bytes(i % 12 for i in range(n)))
EOF
"$ferry" export idx "$tmp/img12.idx" "$tmp/lab12.idx" "$tmp/f12" > /dev/null 2>&1 &&
    "$ferry" pack "$tmp/f12" "$tmp/s12" > /dev/null 2>&1 &&
    "$py" - "$tmp" <<'EOF'
import os, sys, tarfile
d = sys.argv[1]
labels = open(d + "/lab12.idx", "rb").read()[8:]
with tarfile.open(d + "/s12/shard-000000.tar") as t:
    classes = t.extractfile("__classes__.txt").read().decode().split("\n")[:-1]
seen = 0
for c in os.listdir(d + "/f12"):
    for f in os.listdir(d + "/f12/" + c):
        seen += 1
        assert classes.index(c) == labels[int(f[:-4])], (c, f, classes)
assert seen == len(labels), seen
EOF
check "ferry export idx of 12 classes reads back with the IDX labels" $?
if [ -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ] ||
   [ -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte ]; then
    "$ferry" export fashion-mnist "$tmp/fm" > /dev/null 2>&1 &&
        [ "$(ls "$tmp/fm/test" | tr '\n' ' ')" = "0_T-shirt_top 1_Trouser 2_Pullover 3_Dress 4_Coat 5_Sandal 6_Shirt 7_Sneaker 8_Bag 9_Ankle_boot " ]
    check "ferry export fashion-mnist: class folders in label order" $?
    rm -rf "$tmp/fm"
else
    skip "ferry export fashion-mnist (dataset not installed)"
fi

# Packed shuffled by default: a streaming loader reads shards in stored order
# and its shuffle buffer only mixes neighbours, so the stored order must mix
# the classes. Fashion-MNIST's test set, exported as a folder (class after
# class) and packed: every run of 128 stored samples (a batch a stream of
# buffer 1 would give; a larger buffer only mixes more) holds no class above
# 30 % (uniform: 10 %); the same folder packed --no-shuffle makes
# `ferry bench --stream` warn that the shards are sorted by class.
fm=/usr/share/datasets/fashion-mnist
if [ -f "$fm/t10k-images-idx3-ubyte.gz" ]; then
    "$ferry" export idx "$fm/t10k-images-idx3-ubyte.gz" "$fm/t10k-labels-idx1-ubyte.gz" \
        "$tmp/fmt" > /dev/null 2>&1 &&
        "$ferry" pack "$tmp/fmt" "$tmp/fms" --seed 3 > "$tmp/out" 2>&1 &&
        grep -q "order: shuffled, --seed 3" "$tmp/fms/PACK.txt" &&
        "$py" - "$tmp/fms" <<'EOF'
import os, sys, tarfile
d = sys.argv[1]; labels = []
for s in sorted(x for x in os.listdir(d) if x.endswith(".tar")):
    with tarfile.open(d + "/" + s) as t:
        labels += [int(t.extractfile(m).read()) for m in t.getmembers() if m.name.endswith(".cls")]
assert len(labels) == 10000, len(labels)
worst = max(max(labels[i:i + 128].count(c) for c in range(10)) for i in range(0, 10000 - 128, 128))
print("worst class share of a 128-sample run: %d/128" % worst)
assert worst <= 38, worst
EOF
    check "ferry pack shuffles: 128-sample runs of packed Fashion-MNIST are mixed ($(tail -n 1 "$tmp/out"))" $?
    "$ferry" pack "$tmp/fmt" "$tmp/fmu" --no-shuffle > /dev/null 2>&1 &&
        "$ferry" bench "$tmp/fmu" --stream 4096 --epochs 1 --batch 128 --workers 1 > "$tmp/out" 2>&1 &&
        grep -q "stored sorted by class" "$tmp/out" &&
        "$ferry" bench "$tmp/fms" --stream 4096 --epochs 1 --batch 128 --workers 1 > "$tmp/out" 2>&1 &&
        ! grep -q "sorted by class" "$tmp/out"
    check "ferry bench --stream warns on class-sorted shards (--no-shuffle), not on shuffled ones" $?
    "$ferry" pack "$tmp/fmt" "$tmp/fms2" --seed 3 > /dev/null 2>&1 &&
        cmp -s "$tmp/fms/shard-000000.tar" "$tmp/fms2/shard-000000.tar"
    check "ferry pack --seed 3 twice: the same shards" $?
    rm -rf "$tmp/fmt" "$tmp/fms" "$tmp/fms2" "$tmp/fmu"
else
    skip "packed Fashion-MNIST class mix (dataset not installed)"
fi

"$ferry" pack --help > "$tmp/out" 2> "$tmp/err" && grep -q "usage: ferry pack" "$tmp/out" &&
    [ ! -s "$tmp/err" ]
check "--help: usage on stdout, exit 0" $?
# --index: one SHARD.ferry-index beside each shard, which a later read uses.
"$ferry" pack "$tmp/folder" "$tmp/ix" --shard-size 40K --index > /dev/null 2>&1
nix=0 nsh=0
for f in "$tmp/ix"/*.tar; do nsh=$((nsh + 1)); [ -s "$f.ferry-index" ] && nix=$((nix + 1)); done
[ "$nsh" -gt 1 ] && [ "$nix" -eq "$nsh" ]
check "--index writes an index beside each of the $nsh shards" $?
# Indexing that fails (no descriptors left to open the shards) leaves the
# whole shards and PACK.txt as they are, and says so with exit 1.
(ulimit -n 16 && "$ferry" pack "$tmp/folder" "$tmp/ix2" --shard-size 40K --index) > "$tmp/out" 2>&1
rc=$?
nsh2=0
for f in "$tmp/ix2"/*.tar; do [ -f "$f" ] && nsh2=$((nsh2 + 1)); done
[ $rc -eq 1 ] && [ "$nsh2" -eq "$nsh" ] && [ -f "$tmp/ix2/PACK.txt" ] &&
    "$ferry" check "$tmp/ix2" > /dev/null 2>&1
check "a failed --index keeps the $nsh2 whole shards (exit $rc)" $?
# PACK.txt maps each key to its shard and source file: every key line of a
# shuffled pack over several shards names the file whose bytes the member holds.
"$ferry" pack "$tmp/folder" "$tmp/mapped" --seed 5 --shard-size 40K > "$tmp/out" 2>&1 &&
    grep -q "every image decode-checked" "$tmp/out" &&
    grep -q "^checked: every image decoded before it was packed" "$tmp/mapped/PACK.txt" &&
    "$py" - "$tmp/mapped" <<'EOF'
import os, sys, tarfile
d = sys.argv[1]; seen = set(); shards = set()
lines = open(d + "/PACK.txt").read().split("\n")
keys = lines[lines.index("keys: KEY SHARD SOURCE, one a line") + 1:-1]
for line in keys:
    key, shard, src = line.split(" ", 2)
    with tarfile.open(d + "/" + shard) as t:
        assert t.extractfile(key + ".png").read() == open(src, "rb").read(), line
    seen.add(src); shards.add(shard)
assert len(keys) == 300 and len(seen) == 300 and len(shards) > 1, (len(keys), len(seen), shards)
EOF
check "PACK.txt maps each of 300 keys to its shard and source file (shuffled, several shards)" $?
"$ferry" pack "$tmp/img.idx" "$tmp/idxmap" --labels "$tmp/lab.idx" --no-shuffle > /dev/null 2>&1 &&
    grep -q "^000007 shard-000000.tar $tmp/img.idx#7\$" "$tmp/idxmap/PACK.txt"
check "PACK.txt of an IDX pair names the image's index" $?
# A truncated JPEG is found when packed, by its source file: the pack stops,
# leaves no shard and says how to go on; --no-check packs it and says so.
jpg=$(dirname "$0")/../tests/ref/jpeg/rgb420.jpg
mkdir -p "$tmp/jsrc/a" "$tmp/jsrc/b" && cp "$jpg" "$tmp/jsrc/a/1.jpg" && cp "$jpg" "$tmp/jsrc/b/2.jpg" &&
    head -c $(($(wc -c < "$jpg") * 2 / 3)) "$jpg" > "$tmp/jsrc/b/cut.jpg"
"$ferry" pack "$tmp/jsrc" "$tmp/jout" > "$tmp/out" 2> "$tmp/err"
rc=$?
left=$(ls "$tmp/jout" 2> /dev/null | wc -l)
[ $rc -eq 1 ] && grep -q "jsrc/b/cut.jpg: premature end of JPEG data" "$tmp/err" &&
    grep -q "nothing was packed" "$tmp/err" && grep -q -- "--no-check" "$tmp/err" && [ "$left" -eq 0 ]
check "pack stops at a truncated JPEG, naming its source file, no shard left ($(head -n 1 "$tmp/err"))" $?
"$ferry" pack "$tmp/jsrc" "$tmp/jout2" --no-check > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q "NOT decode-checked" "$tmp/out" && grep -q "^checked: no (--no-check)" "$tmp/jout2/PACK.txt" &&
    key=$(grep " $tmp/jsrc/b/cut.jpg\$" "$tmp/jout2/PACK.txt" | cut -d' ' -f1) && [ -n "$key" ] &&
    "$ferry" check "$tmp/jout2" | grep -q "shard-000000.tar:$key.jpg"
check "pack --no-check packs it and says so; PACK.txt leads from the bad key to cut.jpg" $?
badarg() {
    want=$1; shift
    "$ferry" pack "$@" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && [ "$(head -n 1 "$tmp/err")" = "$want" ]
    check "exit 2: $want" $?
}
badarg "ferry pack: --shard-size 12Q: expected a size from 10K to 1024G, e.g. 64M or 1G" a b --shard-size 12Q
badarg "ferry pack: --shard-size 1K: expected a size from 10K to 1024G, e.g. 64M or 1G" a b --shard-size 1K
badarg "ferry pack: --shard-size needs a value" a b --shard-size
badarg "ferry pack: unknown option '--bogus'" a b --bogus
badarg "ferry pack: needs SRC and OUT (see ferry pack --help)" a
finish
