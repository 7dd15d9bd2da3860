#!/bin/sh
# Runs each libFuzzer binary of `make fuzz` for a bounded time over its seed
# corpus (tests/fuzz/corpus/<target>/, PngSuite too for png) and prints one test
# line per target and a "N passed, N failed, N skipped" summary, like a test
# program, so scripts/run-tests.sh can fold it into its sum.
#   scripts/fuzz-run.sh --check   exit 0 when clang can build libFuzzer binaries
#   FERRY_FUZZ_DIR=build/fuzz FERRY_FUZZ_SECONDS=10 scripts/fuzz-run.sh
# New inputs go to a temporary folder, never into the source tree; a crash
# leaves its input in $FERRY_FUZZ_DIR/artifacts/ (copy it to
# tests/data/crashers/<target>/ once the bug is fixed).
cc=${FUZZ_CC:-clang}
targets=${FUZZ_TARGETS:-"png idx list device tar jpeg index npy"}
root=$(cd "$(dirname "$0")/.." && pwd)

if [ "$1" = "--check" ]; then
    command -v "$cc" >/dev/null 2>&1 || exit 1
    t=$(mktemp -d) || exit 1
    printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' > "$t/f.c"
    "$cc" -fsanitize=fuzzer,address,undefined "$t/f.c" -o "$t/f" >/dev/null 2>&1; rc=$?
    rm -rf "$t"
    exit $rc
fi

dir=${FERRY_FUZZ_DIR:-$root/build/fuzz}
case "$dir" in /*) ;; *) dir=$(pwd)/$dir ;; esac
secs=${FERRY_FUZZ_SECONDS:-10}
passed=0 failed=0 skipped=0
if ! sh "$0" --check; then
    for t in $targets; do
        echo "skip  fuzz_$t (no $cc with libFuzzer)"
        skipped=$((skipped + 1))
    done
    echo "$passed passed, $failed failed, $skipped skipped"
    exit 0
fi
pngsuite=${FERRY_PNGSUITE:-$root/../shared/testdata/pngsuite}
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-fuzz-run-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
mkdir -p "$dir/artifacts"
for t in $targets; do
    bin=$dir/fuzz_$t
    if [ ! -x "$bin" ]; then
        echo "FAIL  fuzz_$t ($bin missing: did make fuzz fail?)"
        failed=$((failed + 1))
        continue
    fi
    mkdir -p "$work/$t"
    extra=
    [ "$t" = png ] && [ -f "$pngsuite/basn0g08.png" ] && extra=$pngsuite
    # -timeout: one input running longer than this is a hang; -rss_limit_mb: a bomb.
    ( cd "$work" && "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=20 \
        -print_final_stats=1 -artifact_prefix="$dir/artifacts/$t-" \
        "$work/$t" "$root/tests/fuzz/corpus/$t" $extra ) > "$work/$t.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log" | tail -n 1)
    if [ $rc -eq 0 ]; then
        echo "ok    fuzz_$t (${runs:-?} runs in ${secs} s)"
        passed=$((passed + 1))
    else
        echo "FAIL  fuzz_$t (exit $rc; input and log in $dir/artifacts/)"
        cp "$work/$t.log" "$dir/artifacts/$t.log"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|artifact_prefix|Test unit written)' \
            "$work/$t.log" | head -n 8 | sed 's/^/  /'
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
