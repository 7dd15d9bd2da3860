#!/bin/sh
# Issue 39, item 7: the image + class path must cost nothing after fields
# landed. Builds `ferry` at BASE (default: where this branch left main) and at
# the working tree, then runs `ferry bench` on the Fashion-MNIST folder and
# on the JPEG recipe (RandomResizedCrop 224 + flip) alternately, REPS times
# each, and prints each run's images/s and the median ratio this / BASE.
# Run it on a quiet machine; within 3 % (ratio >= 0.97) is the goal.
#   sh bench/fields_overhead.sh [BASE] [REPS]
#   JPEG_DIR=/tmp/bench25 (made by scripts/make-bench-jpeg.py DIR 1000 10 when absent)
#   BUILD_ARGS="CUDA=0" (make arguments for both builds)
#   OLD_FERRY=PATH NEW_FERRY=PATH: ferry binaries built already (no builds then)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
base=${1:-$(git merge-base HEAD main 2>/dev/null || git rev-parse HEAD~1)}
reps=${2:-5}
jpeg=${JPEG_DIR:-/tmp/bench25}
args=${BUILD_ARGS:-CUDA=0}
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-fields-bench-XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "base $(git rev-parse --short "$base"), this tree $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + changes')"
if [ -n "${OLD_FERRY:-}" ] && [ -n "${NEW_FERRY:-}" ]; then
    old=$OLD_FERRY
    new=$NEW_FERRY
else
    mkdir -p "$work/base"
    git archive "$base" | tar -x -C "$work/base"
    # shellcheck disable=SC2086
    make -C "$work/base" -j2 $args BUILD=build/fb build/fb/ferry > "$work/base.log" 2>&1 ||
        { tail -20 "$work/base.log"; exit 1; }
    # shellcheck disable=SC2086
    make -j2 $args BUILD=build/fields-bench build/fields-bench/ferry > "$work/this.log" 2>&1 ||
        { tail -20 "$work/this.log"; exit 1; }
    old=$work/base/build/fb/ferry
    new=$here/build/fields-bench/ferry
fi
[ -d "$jpeg" ] || /usr/bin/python3 scripts/make-bench-jpeg.py "$jpeg" 1000 10

rate() { # ferry-binary args...: images/s of the run's one row
    bin=$1
    shift
    "$bin" bench "$@" --format json 2>/dev/null | sed -n 's/.*"images_per_s":\([0-9.]*\).*/\1/p' | tail -n 1
}

compare() { # name args...
    name=$1
    shift
    : > "$work/ratios"
    i=0
    while [ "$i" -lt "$reps" ]; do
        # alternate who runs first: a warming cache or clock favours neither
        if [ $((i % 2)) -eq 0 ]; then a=$(rate "$old" "$@"); b=$(rate "$new" "$@")
        else b=$(rate "$new" "$@"); a=$(rate "$old" "$@"); fi
        echo "  $name run $((i + 1)): base $a, this $b images/s"
        awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.4f\n", b / a }' >> "$work/ratios"
        i=$((i + 1))
    done
    med=$(sort -n "$work/ratios" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
    echo "$name: median ratio this / base = $med (goal >= 0.97)"
}

compare "Fashion-MNIST folder" --workers 2 --batch 256 --epochs 2 --pin off --no-digest
compare "JPEG recipe" "$jpeg" --rrc 224 --flip --workers 2 --batch 64 --pin off --no-digest
