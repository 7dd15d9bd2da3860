#!/bin/sh
# Distributed training under mpirun with 2 ranks on this machine: the
# collective and data-parallel tests, the failure drills (no rank may hang), and
# train_gray --dist against one process with twice the batch. Prints one line
# per check and a "N passed, N failed, N skipped" summary.
#   FERRY_BUILD=build sh scripts/dist-test.sh
# FERRY_FASHION_IDX names the folder with the Fashion-MNIST IDX files
# (default: Debian's /usr/share/datasets/fashion-mnist).
build=${FERRY_BUILD:-build}
idx=${FERRY_FASHION_IDX:-/usr/share/datasets/fashion-mnist}
passed=0 failed=0 skipped=0
ok() { echo "ok    dist $1"; passed=$((passed + 1)); }
bad() { echo "FAIL  dist $1"; failed=$((failed + 1)); }
skip() { echo "skip  dist $1"; skipped=$((skipped + 1)); }
finish() { echo "$passed passed, $failed failed, $skipped skipped"; [ "$failed" -eq 0 ]; exit $?; }

if ! command -v mpirun >/dev/null 2>&1; then
    skip "(mpirun not found: install openmpi-bin)"
    finish
fi
if ! "$build/ferry" info 2>/dev/null | grep -q '^distributed: MPI'; then
    skip "($build was built without MPI)"
    finish
fi
# Open MPI refuses root unless told; oversubscribe: 2 ranks on any core count.
mpi="mpirun -np 2 --oversubscribe"
[ "$(id -u)" = 0 ] && mpi="$mpi --allow-run-as-root"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-dist-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# Runs mpirun with a bound (a hang fails the check instead of the suite);
# output in $tmp/out, exit status in $rc, seconds in $secs.
run() {
    start=$(date +%s)
    timeout 120 $mpi "$@" > "$tmp/out" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
}
show() { grep -v '^ok  ' "$tmp/out" | tail -n 15 | sed 's/^/  /'; }

run "$build/tests/test_dist"
n=$(grep -c ' passed, 0 failed' "$tmp/out")
if [ $rc -eq 0 ] && [ "$n" -eq 2 ]; then
    ok "test_dist on 2 ranks ($(grep ' passed, ' "$tmp/out" | head -n 1); ${secs} s)"
else
    bad "test_dist on 2 ranks (exit $rc)"; show
fi

# drill NAME EXPECTED...: every expected line must be in the output, the job
# must end with an error, and in well under the 120 s bound.
drill() {
    name=$1; shift
    run "$build/tests/dist_drill" "$name"
    missing=
    for want in "$@"; do grep -qF "$want" "$tmp/out" || missing="$missing [$want]"; done
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ -z "$missing" ] && [ $secs -lt 60 ]; then
        ok "drill $name: every rank stopped with an error (${secs} s)"
    else
        bad "drill $name (exit $rc, ${secs} s; missing:$missing)"; show
    fi
}
drill abort "rank 1: FERRY_ERR_DEVICE_OOM: drill: out of memory in step 3" \
    "rank 0: FERRY_ERR_DIST" "rank 0: stopping because rank 1 failed: drill: out of memory in step 3"
drill timeout "rank 0: FERRY_ERR_TIMEOUT: rank 0: MPI_Iallreduce did not complete within 2 s"
drill init "rank 1: FERRY_ERR_NO_DEVICE" "rank 0: FERRY_ERR_DIST: rank 0: ferry_dist_create failed on another rank"

# train_gray --dist: 2 ranks x batch 32 must end where one process with batch
# 64 ends (same data order, same steps), up to float rounding.
if [ ! -f "$idx/train-images-idx3-ubyte.gz" ]; then
    skip "train_gray --dist (no Fashion-MNIST at $idx: install dataset-fashion-mnist)"
    finish
fi
common="--idx $idx --limit 4096 --epochs 2 --workers 1 --seed 3"
start=$(date +%s)
if ! "$build/samples/train_gray" $common --batch 64 --out "$tmp/one" --save "$tmp/one.safetensors" \
        > "$tmp/out" 2>&1; then
    bad "train_gray, one process"; show; finish
fi
run "$build/samples/train_gray" --dist $common --batch 32 --out "$tmp/two" --save "$tmp/two.safetensors"
if [ $rc -ne 0 ]; then
    bad "train_gray --dist on 2 ranks (exit $rc)"; show; finish
fi
if "$build/ferry" diff "$tmp/one.safetensors" "$tmp/two.safetensors" --tol 1e-4 > "$tmp/diff" 2>&1; then
    ok "train_gray --dist, 2 ranks x 32 = 1 process x 64: $(cat "$tmp/diff") ($(( $(date +%s) - start )) s)"
else
    bad "train_gray --dist, 2 ranks x 32 vs 1 process x 64: $(cat "$tmp/diff")"
fi

# Elastic: a run stopped (as if preempted) after 40 steps on one world size and
# resumed on another goes on with the same samples in every global step, so it
# ends within the data-parallel tolerance of the uninterrupted 1 x 64 run.
elastic() { # label, then how the first part runs, then how the second does
    label=$1 first=$2 second=$3
    start=$(date +%s)
    one_or_two() { # dist|one, extra arguments...
        how=$1; shift
        if [ "$how" = dist ]; then
            run "$build/samples/train_gray" --dist $common --batch 32 "$@"
        else
            timeout 120 "$build/samples/train_gray" $common --batch 64 "$@" > "$tmp/out" 2>&1
            rc=$?
        fi
    }
    one_or_two "$first" --out "$tmp/el" --save "$tmp/mid.safetensors" --stop-after 40
    if [ $rc -ne 0 ] || ! grep -q "stopped after 40 steps" "$tmp/out"; then
        bad "elastic $label: the first part (exit $rc)"; show; return
    fi
    one_or_two "$second" --out "$tmp/el" --save "$tmp/end.safetensors" --resume "$tmp/mid.safetensors"
    if [ $rc -ne 0 ] || ! grep -q "resumed: " "$tmp/out"; then
        bad "elastic $label: the resumed part (exit $rc)"; show; return
    fi
    if "$build/ferry" diff "$tmp/one.safetensors" "$tmp/end.safetensors" --tol 1e-4 > "$tmp/diff" 2>&1; then
        ok "elastic $label after 40 steps = 1 process x 64 throughout: $(cat "$tmp/diff") ($(( $(date +%s) - start )) s)"
    else
        bad "elastic $label after 40 steps vs 1 process x 64: $(cat "$tmp/diff")"
    fi
}
elastic "2 ranks x 32 -> 1 process x 64" dist one
elastic "1 process x 64 -> 2 ranks x 32" one dist
finish
