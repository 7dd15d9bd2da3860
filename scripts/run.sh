#!/bin/sh
# `make run`: the main job on a fresh machine. Exports Fashion-MNIST to a PNG
# folder once, shows the devices, benchmarks the pipeline over a short grid, then
# trains the grayscale sample for one epoch. Usage: scripts/run.sh BUILD_DIR
set -eu
build=${1:-build}
ferry="$build/ferry"
data="$build/data/fashion-mnist"
out="$build/run"

"$ferry" info
echo

if [ ! -f "$data/.complete" ]; then
    echo "== exporting Fashion-MNIST to $data (once)"
    "$ferry" export fashion-mnist "$data"
    touch "$data/.complete"
    echo
fi

echo "== host-to-device bandwidth"
"$ferry" bench h2d --max-mib 64
echo

echo "== the pipeline: PNG folder -> batches, by worker count"
mkdir -p "$out"
"$ferry" bench "$data/train" --workers 0,1,2 --batch 256 --limit 20000 --plot "$out/bench.svg"
echo

if [ -x "$build/samples/train_gray" ]; then
    echo "== training the MLP on Fashion-MNIST for one epoch"
    "$build/samples/train_gray" --data "$data" --model mlp --epochs 1 --out "$out"
    echo
    echo "curves: $out/curves.csv and $out/curves.svg"
fi
echo "bench plot: $out/bench.svg"
