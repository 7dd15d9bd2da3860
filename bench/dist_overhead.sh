#!/bin/sh
# What data-parallel training costs at world size 1: train_gray with and without
# --dist (started directly, MPI runs as a world of one), the same epochs on the
# same device, alternating runs. Prints the median training images/s of each and
# the overhead. On a GPU (--device cuda) the --dist run goes through NCCL.
#   sh bench/dist_overhead.sh [--device cuda] [--model mlp|cnn] [--runs N] [more train_gray options]
# Needs Fashion-MNIST: build/data/fashion-mnist (make run) or --idx DIR.
build=${FERRY_BUILD:-build}
runs=3
args=""
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=$2; shift 2 ;;
        *) args="$args $1"; shift ;;
    esac
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-distbench-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# Median over runs of the mean images/s of epochs 2 and later (epoch 1 warms up).
rate() {
    awk '$1 ~ /^[0-9]+$/ && NF == 7 && $1 > 1 { s += $7; n++ } END { if (n) printf "%.0f\n", s / n }' "$1"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

i=0
while [ $i -lt "$runs" ]; do
    for mode in plain dist; do
        flag=; [ $mode = dist ] && flag=--dist
        if ! "$build/samples/train_gray" $flag --epochs 4 --out "$tmp/out" $args > "$tmp/log" 2>&1; then
            echo "train_gray $flag failed:"; tail -n 5 "$tmp/log"; exit 1
        fi
        rate "$tmp/log" >> "$tmp/$mode"
    done
    i=$((i + 1))
done
plain=$(median < "$tmp/plain")
dist=$(median < "$tmp/dist")
grep -m1 '^distributed:' "$tmp/log"
awk -v p="$plain" -v d="$dist" -v r="$runs" 'BEGIN {
    printf "without --dist: %d images/s\nwith --dist (world size 1): %d images/s\noverhead: %.1f%% (median of %d runs, epochs 2-4)\n",
           p, d, 100 * (p - d) / p, r }'
