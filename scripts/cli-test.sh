#!/bin/sh
# The command lines of `ferry` and the samples: -h/--help prints the usage on
# stdout and exits 0 (ferry, every subcommand, every sample); an unknown option
# prints the usage on stderr and exits 2; a bad number (negative, zero where not
# allowed, not a number, trailing garbage, out of range) is one line on stderr
# naming the program, the option, the value and the accepted range, exit 2.
# Then `ferry check` on entries that cannot be read: "path: reason", exit 1,
# for a folder and for a FILE given by name. Prints one line per check and a
# "N passed, N failed, N skipped" summary.
#   FERRY_BUILD=build sh scripts/cli-test.sh
build=${FERRY_BUILD:-build}
passed=0 failed=0 skipped=0
ok() { echo "ok    cli $1"; passed=$((passed + 1)); }
bad() { echo "FAIL  cli $1"; failed=$((failed + 1)); }
skip() { echo "skip  cli $1"; skipped=$((skipped + 1)); }
finish() { echo "$passed passed, $failed failed, $skipped skipped"; [ "$failed" -eq 0 ]; exit $?; }

ferry=$build/ferry
if [ ! -x "$ferry" ]; then
    skip "($ferry not built: make BUILD=$build all)"
    finish
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-cli-test-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
show() { sed 's/^/  | /' "$1" | head -n 8; }

# run CMD...: CMD with stdout in $tmp/out, stderr in $tmp/err, status in $rc;
# bounded, so that a bad value taken as good (and a run started) fails the
# check instead of holding up the suite.
run() {
    timeout 60 "$@" > "$tmp/out" 2> "$tmp/err"
    rc=$?
}
lines() { awk 'END { print NR }' "$1"; }

# help NAME CMD...: CMD --help and CMD -h: status 0, "usage:" first on stdout, stderr empty.
help() {
    name=$1; shift
    for flag in --help -h; do
        run "$@" "$flag"
        if [ $rc -eq 0 ] && head -n 1 "$tmp/out" | grep -q '^usage: ' && [ ! -s "$tmp/err" ]; then
            ok "$name $flag: usage on stdout, exit 0"
        else
            bad "$name $flag: exit $rc (want 0, the usage on stdout, nothing on stderr)"
            show "$tmp/out"; show "$tmp/err"
        fi
    done
}

# unknown NAME CMD...: CMD --no-such-option: status 2, the usage on stderr, stdout empty.
unknown() {
    name=$1; shift
    run "$@" --no-such-option
    if [ $rc -eq 2 ] && grep -q 'usage: ' "$tmp/err" && [ ! -s "$tmp/out" ]; then
        ok "$name --no-such-option: usage on stderr, exit 2"
    else
        bad "$name --no-such-option: exit $rc (want 2 and the usage on stderr)"
        show "$tmp/out"; show "$tmp/err"
    fi
}

# badval MESSAGE CMD...: status 2, nothing on stdout, exactly MESSAGE on stderr.
badval() {
    want=$1; shift
    run "$@"
    if [ $rc -eq 2 ] && [ ! -s "$tmp/out" ] && [ "$(lines "$tmp/err")" -eq 1 ] &&
       [ "$(cat "$tmp/err")" = "$want" ]; then
        ok "exit 2: $want"
    else
        bad "$* (exit $rc): want exit 2 and the one line \"$want\""
        show "$tmp/out"; show "$tmp/err"
    fi
}

# ---- --help and unknown options: ferry, each subcommand, each sample ----
help ferry "$ferry"
run "$ferry" --no-such-option
if [ $rc -eq 2 ] && grep -q 'usage: ' "$tmp/err"; then ok "ferry --no-such-option: exit 2"
else bad "ferry --no-such-option: exit $rc (want 2 and the usage on stderr)"; fi
for sub in info bench "bench h2d" "bench decode" check export diff; do
    # shellcheck disable=SC2086 # "bench h2d" splits into two words on purpose
    help "ferry $sub" "$ferry" $sub
    # shellcheck disable=SC2086
    unknown "ferry $sub" "$ferry" $sub
done
nsamples=0
for p in embed train_gray train_color bench_mlp train_chars bench_step detect; do
    if [ ! -x "$build/samples/$p" ]; then
        bad "$build/samples/$p not built"
        continue
    fi
    nsamples=$((nsamples + 1))
    help "$p" "$build/samples/$p"
    unknown "$p" "$build/samples/$p"
done
# Every sample that is built is one of the above (a new sample gets its checks here).
for f in "$build"/samples/*; do
    if [ ! -x "$f" ] || [ ! -f "$f" ]; then continue; fi
    case ${f##*/} in
        embed|train_gray|train_color|bench_mlp|train_chars|bench_step|detect) ;;
        *) bad "samples/${f##*/} has no --help checks in scripts/cli-test.sh" ;;
    esac
done

# ---- strict numbers: one line naming the option, the value and the range ----
f="ferry bench"
badval "$f: --batch -5: expected an integer from 1 to 65536" "$ferry" bench --batch -5
badval "$f: --batch 0: expected an integer from 1 to 65536" "$ferry" bench --batch 0
badval "$f: --batch abc: expected an integer from 1 to 65536" "$ferry" bench --batch abc
badval "$f: --batch 12x: expected an integer from 1 to 65536" "$ferry" bench "$tmp" --batch 12x
badval "$f: --batch 65537: expected an integer from 1 to 65536" "$ferry" bench --batch 65537
badval "$f: --batch 99999999999999999999999: expected an integer from 1 to 65536" \
    "$ferry" bench --batch 99999999999999999999999
badval "$f: --batch needs a value" "$ferry" bench --batch
badval "$f: --workers 1,-2: expected a comma-separated list of up to 16 integers from 0 to 256" \
    "$ferry" bench --workers 1,-2
badval "$f: --workers 300: expected a comma-separated list of up to 16 integers from 0 to 256" \
    "$ferry" bench --workers 300
badval "$f: --epochs 0: expected an integer from 1 to 1000000" "$ferry" bench --epochs 0
badval "$f: --compute-ms nan: expected a number from 0 to 1000000" "$ferry" bench --compute-ms nan
badval "$f: --compute-ms -1: expected a number from 0 to 1000000" "$ferry" bench --compute-ms -1
badval "$f: --seed 1.5: expected an integer from 0 to 18446744073709551615" "$ferry" bench --seed 1.5
badval "$f: --prefetch 0: expected an integer from 1 to 1024" "$ferry" bench --prefetch 0
badval "$f: --size 16385: expected an integer from 1 to 16384" "$ferry" bench --size 16385
badval "$f: --stream 0: expected an integer from 1 to 1000000000" "$ferry" bench --stream 0
badval "$f: --pin maybe: expected one of on, off, both, auto" "$ferry" bench --pin maybe
mkdir -p "$tmp/sh" && : > "$tmp/sh/a.tar.gz"
badval "$f: --baseline times libpng on image files; $tmp/sh is tar shards (run it on the image folder they were packed from)" \
    "$ferry" bench "$tmp/sh" --baseline
f="ferry bench h2d"
badval "$f: --reps 0: expected an integer from 1 to 1000" "$ferry" bench h2d --reps 0
badval "$f: --reps x: expected an integer from 1 to 1000" "$ferry" bench h2d --reps x
badval "$f: --max-mib 4097: expected an integer from 1 to 4096" "$ferry" bench h2d --max-mib 4097
f="ferry bench decode"
badval "$f: --limit 0: expected an integer from 1 to 1000000000" "$ferry" bench decode "$tmp" --limit 0
badval "$f: --generate DIR -1: expected an integer from 1 to 10000000" \
    "$ferry" bench decode --generate "$tmp/gen" -1
f="ferry check"
badval "$f: --workers 0: expected an integer from 1 to 256" "$ferry" check --workers 0 "$tmp"
badval "$f: -j 257: expected an integer from 1 to 256" "$ferry" check -j 257 "$tmp"
badval "$f: --workers '': expected an integer from 1 to 256" "$ferry" check --workers '' "$tmp"
f="ferry diff"
badval "$f: --tol -1: expected a finite number >= 0" "$ferry" diff a b --tol -1
badval "$f: --tol inf: expected a finite number >= 0" "$ferry" diff a b --tol inf
s=$build/samples
if [ -x "$s/train_gray" ]; then
    badval "train_gray: --epochs 0: expected an integer from 1 to 1000" "$s/train_gray" --epochs 0
    badval "train_gray: --batch -1: expected an integer from 1 to 65536" "$s/train_gray" --batch -1
    badval "train_gray: --workers 257: expected an integer from 0 to 256" "$s/train_gray" --workers 257
    badval "train_gray: --lr 0: expected a number greater than 0 and at most 100" "$s/train_gray" --lr 0
    badval "train_gray: --lr nan: expected a number greater than 0 and at most 100" "$s/train_gray" --lr nan
    badval "train_gray: --limit 1e3: expected an integer from 1 to 1000000000" "$s/train_gray" --limit 1e3
    badval "train_gray: --seed -3: expected an integer from 0 to 18446744073709551615" "$s/train_gray" --seed -3
    badval "train_gray: --model rnn: expected one of mlp, cnn" "$s/train_gray" --model rnn
fi
if [ -x "$s/train_chars" ]; then
    badval "train_chars: --context 0: expected an integer from 1 to 64" "$s/train_chars" --context 0
    badval "train_chars: --lr 0: expected a number greater than 0 and at most 1" "$s/train_chars" --lr 0
    badval "train_chars: --seconds -1: expected a finite number >= 0" "$s/train_chars" --seconds -1
    badval "train_chars: --batch needs a value" "$s/train_chars" --batch
fi
if [ -x "$s/train_color" ]; then
    badval "train_color: --train 0: expected an integer from 1 to 1000000" \
        "$s/train_color" --make-data "$tmp/never" --train 0
    badval "train_color: --epochs 1001: expected an integer from 1 to 1000" "$s/train_color" --epochs 1001
    badval "train_color: --lr -0.1: expected a number greater than 0 and at most 100" "$s/train_color" --lr -0.1
    badval "train_color: --batch 8 : expected an integer from 1 to 65536" "$s/train_color" --batch '8 '
    badval "train_color: --channels 2: expected one of 1, 3" "$s/train_color" --channels 2
fi
if [ -x "$s/bench_mlp" ]; then
    badval "bench_mlp: EPOCHS 0: expected an integer from 1 to 1000000" "$s/bench_mlp" "$tmp" 0
    badval "bench_mlp: EPOCHS -2: expected an integer from 1 to 1000000" "$s/bench_mlp" "$tmp" -2
    badval "bench_mlp: EPOCHS 3x: expected an integer from 1 to 1000000" "$s/bench_mlp" "$tmp" 3x
fi

# ---- ferry check: entries that cannot be read are bad files, never skipped ----
imgs=$tmp/imgs
run "$ferry" bench decode --generate "$imgs/a" 2
if [ $rc -ne 0 ]; then
    bad "ferry bench decode --generate $imgs/a 2 (exit $rc)"; show "$tmp/err"; finish
fi
# ferry bench measures the augmentation it is asked for: --flip and --crop-pad
# change the batches (the digest), the same for 1 and 2 workers.
digest() {
    run "$ferry" bench "$imgs" --epochs 1 --batch 1 --pin off --format json "$@"
    sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p' "$tmp/out" | head -n 1
}
d0=$(digest --workers 1) df1=$(digest --workers 1 --flip) df2=$(digest --workers 2 --flip)
dc1=$(digest --workers 1 --crop-pad 8) dc2=$(digest --workers 2 --crop-pad 8)
if [ -n "$d0" ] && [ "$df1" != "$d0" ] && [ "$dc1" != "$d0" ] && [ "$df1" = "$df2" ] &&
   [ "$dc1" = "$dc2" ]; then
    ok "ferry bench --flip, --crop-pad augment (digests $d0, $df1, $dc1; same for 2 workers)"
else
    bad "ferry bench --flip/--crop-pad: digests plain $d0, flip $df1/$df2, crop-pad $dc1/$dc2"
fi
run "$ferry" bench "$imgs" --epochs 1 --batch 1 --pin off --workers 1 --flip
if [ $rc -eq 0 ] && grep -Eq '^ +per image: read [0-9.]+ ms, decode [0-9.]*[1-9][0-9.]* ms, transform [0-9.]+ ms \(worker CPU time, thread CPU clock\)' "$tmp/out"; then
    ok "ferry bench's table: read, decode, transform CPU time per image ($(grep 'per image' "$tmp/out" | sed 's/^ *//'))"
else
    bad "ferry bench's table: no per-image read/decode/transform line (exit $rc)"; show "$tmp/out"; show "$tmp/err"
fi
# check_out NAME WANT_RC LINE...: ferry check's status and lines of its stdout.
check_out() {
    name=$1 want=$2; shift 2
    miss=
    for line in "$@"; do
        grep -qxF "$line" "$tmp/out" || miss="$miss [$line]"
    done
    if [ $rc -eq "$want" ] && [ -z "$miss" ]; then
        ok "ferry check $name: exit $want, $(tail -n 1 "$tmp/out")"
    else
        bad "ferry check $name: exit $rc (want $want)${miss:+; missing lines:$miss}"
        show "$tmp/out"; show "$tmp/err"
    fi
}
run "$ferry" check "$imgs"
check_out "on two good images" 0 "2 files, 2 ok, 0 bad"
ln -s nowhere.png "$imgs/a/gone.png"
mkdir "$imgs/a/x.png"
run "$ferry" check "$imgs"
check_out "with a dangling link and a folder named x.png" 1 \
    "$imgs/a/gone.png: dangling symbolic link (its target does not exist)" \
    "$imgs/a/x.png: is a directory, not a file" "4 files, 2 ok, 2 bad"
run "$ferry" check "$imgs/a/gone.png"
check_out "FILE, a dangling link" 1 \
    "$imgs/a/gone.png: dangling symbolic link (its target does not exist)" "1 files, 0 ok, 1 bad"
run "$ferry" check "$tmp/no-such-file.png"
check_out "FILE that does not exist" 1 "$tmp/no-such-file.png: No such file or directory"
if mkfifo "$tmp/pipe.png" 2>/dev/null; then
    # Opening a FIFO waits for a writer unless told not to: a hang ends in timeout (124).
    run "$ferry" check "$tmp/pipe.png"
    check_out "FILE, a FIFO (without blocking)" 1 \
        "$tmp/pipe.png: is a FIFO (named pipe), not a regular file"
else
    skip "ferry check on a FIFO (mkfifo failed)"
fi
# No read permission: root reads anything, so as root run the check as nobody
# when that can be done here.
cp "$imgs/a/000000.png" "$tmp/locked.png" && chmod 000 "$tmp/locked.png"
as=
if [ "$(id -u)" -eq 0 ]; then
    chmod 755 "$tmp"
    if command -v setpriv >/dev/null 2>&1 &&
       setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$ferry" 2>/dev/null; then
        as="setpriv --reuid=65534 --regid=65534 --clear-groups"
    fi
fi
if [ "$(id -u)" -eq 0 ] && [ -z "$as" ]; then
    skip "ferry check on a file without read permission (running as root, which reads it anyway; no setpriv to run as nobody)"
else
    # shellcheck disable=SC2086 # $as splits into a command on purpose
    run $as "$ferry" check "$tmp/locked.png"
    check_out "FILE without read permission${as:+ (as nobody)}" 1 "$tmp/locked.png: Permission denied"
fi
# ---- ferry check counts exactly what the image folder will load ----
# Class sub-folders are walked (a/2019/y.png is a sample); a hidden entry and
# a file beside the class folders are not samples, so not counted either.
rec=$tmp/rec
mkdir -p "$rec/a/2019" && cp "$imgs/a/"0*.png "$rec/a/" 2> /dev/null
first=$(ls "$imgs/a" | grep '^[0-9].*\.png$' | head -n 1)
cp "$imgs/a/$first" "$rec/a/2019/y.png" && : > "$rec/a/.hidden.png" && : > "$rec/top.png"
n=$(ls "$imgs/a" | grep -c '^0.*\.png$')
run "$ferry" check "$rec"
check_out "on an image folder with a class sub-folder" 0 "$((n + 1)) files, $((n + 1)) ok, 0 bad"
# ---- ferry check: nothing to check is not "all ok" ----
mkdir -p "$tmp/c11/empty" "$tmp/c11/txt" "$tmp/c11/jpg" "$tmp/c11/ec/a" "$tmp/c11/ec/b"
echo notes > "$tmp/c11/txt/a.txt"
: > "$tmp/c11/jpg/a.jpg"
cp "$imgs/a/$first" "$tmp/c11/ec/a/x.png"
run "$ferry" check "$tmp/c11/empty"
check_out "on an empty folder" 1 "1 files, 0 ok, 1 bad"
run "$ferry" check "$tmp/c11/txt"
check_out "on a folder of other files" 1 \
    "$tmp/c11/txt: no images (.png, .jpg, .jpeg) or tar shards in it (ferry check reads those; other files are not samples)"
run "$ferry" check "$tmp/c11/jpg"
check_out "on a folder with an empty .jpg" 1 "$tmp/c11/jpg/a.jpg: not a JPEG file (empty)" "1 files, 0 ok, 1 bad"
run "$ferry" check "$tmp/c11/ec"
check_out "on an image folder with an empty class folder (fatal at create)" 1 \
    "$tmp/c11/ec/b: class folder has no image files (.png, .jpg, .jpeg)" "2 files, 1 ok, 1 bad"

# ---- train_gray --data takes the data's classes, refuses colour ----
# A 4-class RGB folder is refused, naming the folder and the sizes (it was
# trained on quietly, as gray 28 x 28 with 10 classes); a 4-class gray 28 x 28
# folder trains a 4-way model.
tg=$build/samples/train_gray
if [ -x "$tg" ]; then
    for s in train test; do for c in a b c d; do
        "$ferry" bench decode --generate "$tmp/rgb/$s/$c" 1 > /dev/null 2>&1
    done; done
    run "$tg" --data "$tmp/rgb" --epochs 1 --out "$tmp/run"
    if [ $rc -ne 0 ] && grep -q "rgb/train: train_gray trains on 1 x 28 x 28 grayscale images, and these are 3 x 256 x 256" "$tmp/err"; then
        ok "train_gray --data on a 4-class RGB folder: refused, exit $rc"
    else
        bad "train_gray --data on a 4-class RGB folder: exit $rc (want a refusal naming the sizes)"
        show "$tmp/out"; show "$tmp/err"
    fi
    if command -v python3 > /dev/null 2>&1; then
        python3 - "$tmp" <<'EOF'
import struct, sys
d = sys.argv[1]; n = 64
with open(d + "/g.idx", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes((i * 7) % 256 for i in range(n * 784)))
with open(d + "/l.idx", "wb") as f:
    f.write(struct.pack(">II", 0x801, n) + bytes(i % 4 for i in range(n)))
EOF
        "$ferry" export idx "$tmp/g.idx" "$tmp/l.idx" "$tmp/gray/train" > /dev/null 2>&1
        "$ferry" export idx "$tmp/g.idx" "$tmp/l.idx" "$tmp/gray/test" > /dev/null 2>&1
        run "$tg" --data "$tmp/gray" --epochs 1 --batch 16 --workers 0 --out "$tmp/run"
        if [ $rc -eq 0 ] && grep -q "test images, 4 classes" "$tmp/out"; then
            ok "train_gray --data on a 4-class gray 28x28 folder: 4 classes"
        else
            bad "train_gray --data on a 4-class gray 28x28 folder: exit $rc (want 0 and 4 classes)"
            show "$tmp/out"; show "$tmp/err"
        fi
    else
        skip "train_gray on a 4-class gray folder (no python3 to write the IDX pair)"
    fi
else
    skip "train_gray --data checks ($tg not built)"
fi
# ---- --save and --out are checked before the first batch ----
# A missing folder, a folder given as the file, a file given as --out: a
# message naming the option, a non-zero exit, and no epoch run (before, the
# run trained to the end and lost the model, and a bad --out exited 0).
if [ -x "$tg" ] && [ -d "$tmp/gray/train" ]; then
    : > "$tmp/afile"
    for a in "--save $tmp/no-such-folder/x.safetensors" "--save $tmp" "--out $tmp/afile"; do
        # shellcheck disable=SC2086 # $a is an option and its value
        run "$tg" --data "$tmp/gray" --epochs 1 --batch 16 --workers 0 $a
        opt=${a%% *}
        if [ $rc -ne 0 ] && grep -q "^train_gray: $opt " "$tmp/err" && ! grep -q '^ *1 ' "$tmp/out"; then
            ok "train_gray $a: refused before training, exit $rc"
        else
            bad "train_gray $a: exit $rc (want non-zero, a message naming $opt, no epoch)"
            show "$tmp/out"; show "$tmp/err"
        fi
    done
    run "$build/samples/train_color" --data "$tmp/gray" --channels 1 --epochs 1 --save "$tmp/no-such-folder/c.st"
    if [ $rc -ne 0 ] && grep -q "^train_color: --save " "$tmp/err"; then
        ok "train_color --save in a missing folder: refused, exit $rc"
    else
        bad "train_color --save in a missing folder: exit $rc"; show "$tmp/err"
    fi
else
    skip "--save/--out checks (train_gray or its data missing)"
fi
# ---- resumed runs: real epoch numbers, a missing --resume file, SIGTERM ----
# 58 training images, batch 16: 4 steps an epoch; --stop-after 6 stops in
# epoch 2. The resumed run's table and curves.csv go on with epochs 2 and 3,
# epoch 1's row kept; resuming the finished run keeps all three rows.
if [ -x "$tg" ] && [ -d "$tmp/gray/train" ]; then
    g() { run "$tg" --data "$tmp/gray" --epochs 3 --batch 16 --workers 0 --out "$tmp/cur" "$@"; }
    rows() { awk -F, 'NR > 1 { printf "%s ", $1 }' "$tmp/cur/curves.csv" 2> /dev/null; }
    rm -rf "$tmp/cur" "$tmp/ck.st"
    g --save "$tmp/ck.st" --stop-after 6
    g --save "$tmp/ck.st" --resume "$tmp/ck.st"
    if [ $rc -eq 0 ] && [ "$(rows)" = "1 2 3 " ] && grep -q '^    2 ' "$tmp/out" && grep -q '^    3 ' "$tmp/out"; then
        ok "train_gray --resume mid-run: table and curves.csv numbered by the real epoch ($(rows))"
    else
        bad "train_gray --resume mid-run: exit $rc, curves.csv epochs '$(rows)' (want '1 2 3 ')"
        show "$tmp/out"; show "$tmp/err"
    fi
    g --save "$tmp/ck.st" --resume "$tmp/ck.st"
    if [ $rc -eq 0 ] && [ "$(rows)" = "1 2 3 " ]; then
        ok "train_gray --resume of a finished run keeps curves.csv's rows"
    else
        bad "train_gray --resume of a finished run: exit $rc, rows '$(rows)'"; show "$tmp/out"
    fi
    g --save "$tmp/new.st" --resume "$tmp/new.st"
    if [ $rc -eq 0 ] && grep -q "does not exist yet: starting a new run" "$tmp/out" && [ -f "$tmp/new.st" ]; then
        ok "train_gray --resume FILE that does not exist yet: a new run, with a note"
    else
        bad "train_gray --resume FILE that does not exist yet: exit $rc"; show "$tmp/out"; show "$tmp/err"
    fi
    run "$tg" --data "$tmp/gray" --epochs 1 --stop-after 2
    if [ $rc -eq 2 ] && grep -q -- "--stop-after needs --save" "$tmp/err"; then
        ok "train_gray --stop-after without --save: refused, exit 2"
    else
        bad "train_gray --stop-after without --save: exit $rc (want 2)"; show "$tmp/err"
    fi
    rm -f "$tmp/term.st"
    "$tg" --data "$tmp/gray" --epochs 1000 --batch 16 --workers 0 --out "$tmp/cur2" \
        --save "$tmp/term.st" > "$tmp/out" 2> "$tmp/err" &
    tpid=$!
    for _ in $(seq 500); do grep -q '^    2 ' "$tmp/out" && break; sleep 0.01; done
    kill -TERM "$tpid"; wait "$tpid"; rc=$?
    if [ $rc -eq 143 ] && [ -f "$tmp/term.st" ] && grep -q "terminated (SIGTERM), saved" "$tmp/out"; then
        ok "train_gray --save: SIGTERM saves, then exits 143"
    else
        bad "train_gray --save: SIGTERM: exit $rc (want 143 and the checkpoint)"; show "$tmp/out"
    fi
else
    skip "resume checks (train_gray or its data missing)"
fi
if [ -x "$tg" ] && [ -f "$tmp/ck.st" ]; then
    # The epoch the run was stopped in (epoch 2, after 2 of its 4 steps) has
    # the row of an uninterrupted run: its running sums were in the checkpoint.
    run "$tg" --data "$tmp/gray" --epochs 3 --batch 16 --workers 0 --out "$tmp/cur-ref"
    want=$(awk -F, '$1 == 2 { print $2, $3, $4, $5 }' "$tmp/cur-ref/curves.csv" 2> /dev/null)
    got=$(awk -F, '$1 == 2 { print $2, $3, $4, $5 }' "$tmp/cur/curves.csv" 2> /dev/null)
    if [ $rc -eq 0 ] && [ -n "$want" ] && [ "$want" = "$got" ]; then
        ok "train_gray --resume mid-epoch: that epoch's row is the uninterrupted run's ($got)"
    else
        bad "train_gray --resume mid-epoch: epoch 2's row '$got', uninterrupted '$want'"
    fi
    # The finished run resumed into another --out: said so; the last epoch's
    # row is made again from the checkpoint, the rows it does not have are
    # "-", never zeros that read as results.
    run "$tg" --data "$tmp/gray" --epochs 3 --batch 16 --workers 0 --out "$tmp/cur-new" \
        --resume "$tmp/ck.st"
    last=$(awk -F, '$1 == 3 { print $2, $3, $4, $5 }' "$tmp/cur-ref/curves.csv" 2> /dev/null)
    if [ $rc -eq 0 ] && grep -q "has finished all 3 epochs: nothing left to train" "$tmp/out" &&
       ! grep -Eq '^ +[0-9]+ +0\.0000 ' "$tmp/out" && [ "$(grep -Ec '^ +[12] +- +- ' "$tmp/out")" -eq 2 ] &&
       grep -q '^2,,,,,,$' "$tmp/cur-new/curves.csv" &&
       [ "$(awk -F, '$1 == 3 { print $2, $3, $4, $5 }' "$tmp/cur-new/curves.csv")" = "$last" ]; then
        ok "train_gray --resume of a finished run into a new --out: nothing left to train, rows '-', the last made again"
    else
        bad "train_gray --resume of a finished run into a new --out: exit $rc"; show "$tmp/out"
    fi
    run "$tg" --data "$tmp/gray" --epochs 1 --batch 16 --workers 0 --limit 10 --out "$tmp/lim"
    if [ $rc -eq 0 ] && grep -q "^data: 10 train (--limit 10: the first of [0-9]*; validation and test stay whole), [0-9]* validation" "$tmp/out"; then
        ok "train_gray --limit 10: the data line says validation and test stay whole"
    else
        bad "train_gray --limit 10: exit $rc, $(grep '^data:' "$tmp/out")"
    fi
fi
# ---- no data: how to get it, not a bare "No such file or directory" ----
if [ -x "$tg" ]; then
    run "$tg" --data "$tmp/nodata" --epochs 1
    if [ $rc -ne 0 ] && grep -q -- "--idx /usr/share/datasets/fashion-mnist" "$tmp/err" &&
       grep -q "ferry export fashion-mnist" "$tmp/err" && grep -q "make run" "$tmp/err"; then
        ok "train_gray without data: --idx, ferry export or make run"
    else
        bad "train_gray without data: exit $rc, no way to get it"; show "$tmp/err"
    fi
fi
if [ -x "$build/samples/train_color" ]; then
    run "$build/samples/train_color" --data "$tmp/nodata" --epochs 1
    if [ $rc -ne 0 ] && grep -q -- "train_color --make-data $tmp/nodata" "$tmp/err"; then
        ok "train_color without data: --make-data"
    else
        bad "train_color without data: exit $rc, no way to get it"; show "$tmp/err"
    fi
fi
# ---- messages: said once, in the command line's words, each with a reason ----
env FERRY_SIM_GPUS=1 FERRY_SIM_GPU_MEM=-5 "$ferry" info > "$tmp/out" 2> "$tmp/err"
grep -q "FERRY_SIM_GPU_MEM=-5: expected a size" "$tmp/err" && grep -q "0.50 GiB memory" "$tmp/out"
r1=$?
env FERRY_SIM_GPUS=1 FERRY_SIM_SEED=xyz "$ferry" info > /dev/null 2> "$tmp/err"
grep -q "FERRY_SIM_SEED=xyz: expected an unsigned integer" "$tmp/err"
if [ $r1 -eq 0 ] && [ $? -eq 0 ]; then
    ok "FERRY_SIM_GPU_MEM=-5 and FERRY_SIM_SEED=xyz: refused with a warning, defaults kept"
else
    bad "FERRY_SIM_GPU_MEM=-5 / FERRY_SIM_SEED=xyz taken without a word"; show "$tmp/err"
fi
run env FERRY_SIM_GPUS=0 "$ferry" info
if [ "$("$ferry" info | grep -c '^  cuda:')" -gt 0 ] || grep -q "no CUDA device: \(this\|no CUDA driver\)" "$tmp/out"; then
    ok "ferry info says why there is no GPU (or lists one)"
else
    bad "ferry info: no reason for no GPU"; show "$tmp/out"
fi
printf 'not safetensors' > "$tmp/junk.st"
run "$ferry" diff "$tmp/junk.st" "$tmp/junk.st"
if [ $rc -eq 3 ]; then ok "ferry diff on an unreadable file: exit 3 (1 means different)"
else bad "ferry diff on an unreadable file: exit $rc (want 3)"; show "$tmp/err"; fi
run "$ferry" bench decode --generate "$tmp/dec" 2
printf 'garbage' > "$tmp/dec/000001.png"
run "$ferry" bench decode "$tmp/dec"
if [ $rc -ne 0 ] && ! grep -q '()' "$tmp/err" && grep -q "000001.png: " "$tmp/err"; then
    ok "ferry bench decode names the file and the reason"
else
    bad "ferry bench decode: an empty reason"; show "$tmp/err"
fi
# bench decode --crop on the JPEG fixtures: every row of the table, the floor
# line with positive figures, and the same in the JSON (how the ceiling
# compares with the measured ratio depends on the machine: not checked).
mkdir -p "$tmp/jdec"
refj=$(dirname "$0")/../tests/ref
for f in rgb420 rgb422 rgb444 optimized progressive gray; do cp "$refj/jpeg/$f.jpg" "$tmp/jdec/"; done
cp "$refj/crop/src.jpg" "$tmp/jdec/"
num='[0-9][0-9]*\.[0-9]'
run "$ferry" bench decode "$tmp/jdec" --crop 16 --limit 50
missing=
for row in "full decode, then crop" "crop-and-scale decode" "crop-and-scale, decode only" \
           "entropy decoding through the box"; do
    grep -q "^  $row  *$num*  *$num*\$" "$tmp/out" || missing="$missing [$row]"
done
grep -q "^  floor of any crop path (entropy through the box + resize): $num* images/s; ceiling of crop-and-scale / full decode first: $num*\$" "$tmp/out" ||
    missing="$missing [floor line]"
grep -q "^  the same in thread CPU time: $num* images/s; ceiling $num*\$" "$tmp/out" ||
    missing="$missing [floor line, CPU]"
if grep -q "ceiling[^0-9]*0\.000" "$tmp/out"; then missing="$missing [a zero ceiling]"; fi
if [ $rc -eq 0 ] && [ -z "$missing" ]; then
    ok "ferry bench decode --crop: the decode-only and entropy rows, the floor and ceiling"
else
    bad "ferry bench decode --crop (exit $rc): missing$missing"; show "$tmp/out"; show "$tmp/err"
fi
run "$ferry" bench decode "$tmp/jdec" --crop 16 --limit 50 --format json
missing=
for k in crop_decode_only_ips entropy_through_box_ips crop_floor_ips crop_floor_ips_cpu \
         crop_ratio_ceiling crop_ratio_ceiling_cpu; do
    grep -q "\"$k\": [1-9][0-9]*\.[0-9]\|\"$k\": 0\.[0-9]*[1-9]" "$tmp/out" || missing="$missing $k"
done
if [ $rc -eq 0 ] && [ -z "$missing" ]; then
    ok "ferry bench decode --crop --format json: the floor and ceiling fields, positive"
else
    bad "ferry bench decode --crop --format json (exit $rc): missing or not positive:$missing"
    show "$tmp/out"; show "$tmp/err"
fi
mkdir -p "$tmp/cwd" && : > "$tmp/cachefile"
ferry_abs=$(cd "$(dirname "$ferry")" && pwd)/ferry
(cd "$tmp/cwd" && FERRY_CACHE_DIR="$tmp/cachefile" timeout 60 "$ferry_abs" bench --epochs 1 > /dev/null 2> "$tmp/err")
if [ ! -e "$tmp/cwd/build" ] && grep -q "exporting Fashion-MNIST to $tmp/cachefile/fashion-mnist" "$tmp/err"; then
    ok "ferry bench with no folder uses the cache folder and says where, not ./build/data"
else
    bad "ferry bench with no folder: wrote into the current folder or did not say where"; show "$tmp/err"
fi
mkdir -p "$tmp/lk/a" && cp "$imgs/a/$first" "$tmp/lk/a/" && ln -sf nowhere.png "$tmp/lk/a/zz.png"
run "$ferry" bench "$tmp/lk" --epochs 1 --workers 0
if [ $rc -ne 0 ] && ! grep -q 'on_error\|FERRY_ON_ERROR\|stream_shuffle_buffer' "$tmp/err" &&
   grep -q "zz.png" "$tmp/err"; then
    ok "ferry bench speaks the command line's words (no on_error = SKIP)"
else
    bad "ferry bench: API names in its messages"; show "$tmp/err"
fi
if [ -d "$tmp/gray/train" ] && [ -x "$tg" ]; then
    run "$tg" --data "$tmp/gray" --epochs 2 --resume "$tmp/ck.st" --seed 9 --out "$tmp/cur"
    if [ $rc -ne 0 ] && [ "$(grep -c 'does not fit' "$tmp/err")" -eq 1 ] && ! grep -q 'FERRY_ERR' "$tmp/err"; then
        ok "train_gray: a refused resume is said once, naming the seed ($(head -n 1 "$tmp/err"))"
    else
        bad "train_gray: a refused resume said $(grep -c 'does not fit' "$tmp/err") times"; show "$tmp/err"
    fi
fi
# ---- no shell: --compare-torch starts python3 with an argument vector ----
# A folder named q';touch INJECTED;' was pasted into a popen command line, and
# the shell ran the touch. A python3 of our own, first on PATH, writes down the
# arguments it was given: the folder's name must arrive whole, as one argument,
# and nothing must be run.
qdir="$tmp/q';touch INJECTED;'"
mkdir -p "$qdir/a" "$tmp/fakebin" "$tmp/qcwd" && cp "$imgs/a/$first" "$qdir/a/"
printf '%s\n' '#!/bin/sh' 'for a in "$@"; do printf "%s\n" "$a"; done > "$FERRY_FAKE_ARGS"' \
    'echo "{\"torch\": \"0.0-fake\", \"images_per_s\": 123.0}"' > "$tmp/fakebin/python3"
chmod +x "$tmp/fakebin/python3"
(cd "$tmp/qcwd" && PATH="$tmp/fakebin:$PATH" FERRY_FAKE_ARGS="$tmp/qargs" timeout 60 \
    "$ferry_abs" bench "$qdir" --epochs 1 --workers 0 --compare-torch > "$tmp/out" 2> "$tmp/err")
rc=$?
if [ $rc -eq 0 ] && [ ! -e "$tmp/qcwd/INJECTED" ] && [ ! -e "$tmp/INJECTED" ] &&
   [ "$(sed -n 2p "$tmp/qargs" 2> /dev/null)" = "$qdir" ] && grep -q "PyTorch 0.0-fake DataLoader" "$tmp/out"; then
    ok "ferry bench --compare-torch: a folder named q';touch INJECTED;' is one argument, no shell"
else
    bad "ferry bench --compare-torch on q';touch INJECTED;' (exit $rc; INJECTED: $(ls "$tmp/qcwd"))"
    show "$tmp/out"; show "$tmp/err"; [ -f "$tmp/qargs" ] && show "$tmp/qargs"
fi
# ---- names are printed safely: control characters as \xHH ----
# A tar member named ESC [2K CR ... (a cut PNG) and a file of that name in an
# image folder: ferry check's listing shows the escapes, never the raw bytes.
esc=$(printf '\033[2K\r')
if command -v python3 > /dev/null 2>&1; then
    python3 - "$imgs/a/$first" "$tmp/esc.tar" <<'PY'
import io, sys, tarfile
png = open(sys.argv[1], "rb").read()
with tarfile.open(sys.argv[2], "w", format=tarfile.GNU_FORMAT) as t:
    for name, data in (("a.png", png), ("a.cls", b"0"),
                       ("\x1b[2K\rhidden.png", png[:60]), ("\x1b[2K\rhidden.cls", b"0")):
        m = tarfile.TarInfo(name); m.size = len(data); t.addfile(m, io.BytesIO(data))
PY
    run "$ferry" check "$tmp/esc.tar"
    if [ $rc -eq 1 ] && grep -qF 'esc.tar:\x1b[2K\x0dhidden.png: ' "$tmp/out" &&
       ! grep -q "$(printf '\033')" "$tmp/out" && ! grep -q "$(printf '\r')" "$tmp/out"; then
        ok "ferry check on a tar member named ESC[2K CR...: listed as \\x1b[2K\\x0d, no raw escape"
    else
        bad "ferry check on a tar member named ESC[2K CR...: exit $rc"; show "$tmp/out"
    fi
else
    skip "ferry check on an escape-laden tar member (no python3 to write the tar)"
fi
mkdir -p "$tmp/escf/a" && head -c 60 "$imgs/a/$first" > "$tmp/escf/a/${esc}x.png"
run "$ferry" check "$tmp/escf/a/${esc}x.png" "$tmp/escf/a"
if [ $rc -eq 1 ] && [ "$(grep -cF 'escf/a/\x1b[2K\x0dx.png: ' "$tmp/out")" -eq 2 ] &&
   ! grep -q "$(printf '\033')" "$tmp/out"; then
    ok "ferry check on a file named ESC[2K CR x.png: listed with \\x1b, no raw escape"
else
    bad "ferry check on a file named ESC[2K CR x.png: exit $rc"; show "$tmp/out"
fi
# ---- help texts name every format the commands take ----
missing=
"$ferry" --help > "$tmp/out" 2>&1
grep -q '^  check .*\.jpg' "$tmp/out" || missing="$missing [ferry --help: check]"
grep -q '^  pack .*JPEG' "$tmp/out" || missing="$missing [ferry --help: pack]"
"$ferry" pack --help > "$tmp/out" 2>&1
grep -q 'SRC/<class>/<file>.png or .jpg' "$tmp/out" || missing="$missing [pack --help]"
"$ferry" check --help > "$tmp/out" 2>&1
grep -q 'every image (.png, .jpg, .jpeg)' "$tmp/out" || missing="$missing [check --help]"
"$ferry" bench --help > "$tmp/out" 2>&1
grep -q 'bench decode .*PNG or JPEG' "$tmp/out" || missing="$missing [bench --help: decode]"
grep -q 'CPU time of the worker threads (CLOCK_THREAD_CPUTIME_ID)' "$tmp/out" ||
    missing="$missing [bench --help: stage times are CPU time]"
if [ -x "$build/samples/embed" ]; then
    "$build/samples/embed" --help > "$tmp/out" 2>&1
    grep -q '<file>.png or .jpg' "$tmp/out" || missing="$missing [embed --help]"
fi
if [ -z "$missing" ]; then
    ok "help texts name JPEG beside PNG (ferry, check, pack, bench, embed)"
else
    bad "help texts say PNG only:$missing"
fi
# ---- no GPU: nothing about pinning unless asked; the driver said as it is ----
mkdir -p "$tmp/pin/a" && cp "$imgs/a/$first" "$tmp/pin/a/"
run "$ferry" bench "$tmp/pin" --epochs 1 --batch 1 --workers 0 --device cpu
if [ $rc -eq 0 ] && ! grep -q "pin_memory" "$tmp/err"; then
    ok "ferry bench without --pin: no pin_memory warning"
else
    bad "ferry bench without --pin: exit $rc, a warning about what was not asked"; show "$tmp/err"
fi
run "$ferry" bench "$tmp/pin" --epochs 1 --batch 1 --workers 0 --device cpu --pin on
if [ $rc -eq 0 ] && grep -q "pin_memory requested" "$tmp/err"; then
    ok "ferry bench --pin on with a CPU device: the warning, once asked"
else
    bad "ferry bench --pin on with a CPU device: exit $rc, no warning"; show "$tmp/err"
fi
# No NVIDIA driver at all (no libcuda): a CUDA build says so, not "insufficient".
if "$ferry" info | grep -q '^build: CUDA' && ! ldconfig -p 2> /dev/null | grep -q 'libcuda\.so\.1' &&
   [ ! -e /usr/lib/x86_64-linux-gnu/libcuda.so.1 ] && [ ! -e /usr/lib64/libcuda.so.1 ]; then
    run env FERRY_SIM_GPUS=0 "$ferry" info
    if grep -q "no CUDA device: no CUDA driver installed (no GPU)" "$tmp/out" &&
       ! grep -qi "insufficient" "$tmp/out"; then
        ok "ferry info without a driver: no CUDA driver installed (no GPU)"
    else
        bad "ferry info without a driver: $(grep 'no CUDA' "$tmp/out")"
    fi
else
    skip "ferry info without a CUDA driver (a CPU-only build, or a driver is installed)"
fi
# ---- ferry pack carries side files; check and bench show each field ----
npy=$(dirname "$0")/../tests/data/npy
mkdir -p "$tmp/side/c"
cp "$imgs/a/"*.png "$tmp/side/c/" 2>/dev/null
first=$(ls "$tmp/side/c" | head -n 1)
if [ -n "$first" ] && [ -f "$npy/f32_3x4.npy" ]; then
    cp "$npy/f32_3x4.npy" "$tmp/side/c/${first%%.*}.boxes.npy"
    run "$ferry" pack "$tmp/side" "$tmp/sideout"
    if [ $rc -eq 0 ] && grep -q '1 side files carried' "$tmp/out"; then
        ok "pack carries a same-stem side file (x.png + x.boxes.npy)"
    else
        bad "pack with a side file (exit $rc)"; show "$tmp/out"; show "$tmp/err"
    fi
    run "$ferry" check --fields png,cls,boxes.npy "$tmp/sideout"
    # one image has no .boxes.npy: it fails by name, the field is still shown
    if [ $rc -eq 1 ] && grep -q 'no .boxes.npy member' "$tmp/out" &&
        grep -q 'field boxes.npy    f32  \[3, 4\]' "$tmp/out"; then
        ok "check --fields shows each field and names a sample missing one"
    else
        bad "check --fields (exit $rc)"; show "$tmp/out"
    fi
    run "$ferry" bench "$tmp/sideout" --fields png,cls --workers 0 --batch 1
    if [ $rc -eq 0 ] && grep -q 'field cls          i64' "$tmp/out"; then
        ok "bench --fields shows each field"
    else
        bad "bench --fields (exit $rc)"; show "$tmp/out"; show "$tmp/err"
    fi
else
    skip "pack side files: no images or NPY fixtures"
fi
readme=$(dirname "$0")/../README.md
if [ -f "$readme" ]; then
    awk '/`samples\/embed.c`, whole/ { f = 1 } f && /^```c$/ { p = 1; next } p && /^```$/ { exit } p' "$readme" > "$tmp/listing"
    sed '1,/\*\//d' "$(dirname "$0")/../samples/embed.c" > "$tmp/embed"
    if cmp -s "$tmp/listing" "$tmp/embed"; then
        ok "README's whole embed.c listing is samples/embed.c (includes and all)"
    else
        bad "README's embed.c listing differs from samples/embed.c"; diff "$tmp/embed" "$tmp/listing" | head -5
    fi
fi
finish
