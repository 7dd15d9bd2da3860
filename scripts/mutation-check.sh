#!/usr/bin/env bash
# Applies each known small bug of tests/mutations/list.txt, one at a time, in a
# scratch copy of the tree, rebuilds, runs the test programs the stanza names,
# and fails if any mutation survives (all of its tests pass). A mutation whose
# text is not found exactly once is stale and fails the run too, as does a test
# that fails before any mutation (it would prove nothing).
#
#   scripts/mutation-check.sh [--keep] [NAME-SUBSTRING...]
#
# With substrings, only the stanzas whose name contains one of them run, and
# only their tests are run unmutated first.
# The copy is built once with CUDA=0 DEBUG=1 (the simulated GPU is there all the
# same; DEBUG=1 turns the invariant checks on);
# each mutation then costs an incremental build. Not part of make test: run it
# before changing the tests or the code they guard; the result goes in
# docs/BENCHMARKS.md (Testing).
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
keep=0
[ "${1:-}" = "--keep" ] && { keep=1; shift; }
only=("$@")
list=$src/tests/mutations/list.txt
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-mutation-XXXXXX") || exit 1
[ "$keep" = 1 ] && echo "scratch copy: $work" || trap 'rm -rf "$work"' EXIT

# The working tree as it is (tracked and new files, not ignored ones).
(cd "$src" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$work") || exit 1
# DEBUG=1: FERRY_ASSERT on, so a mutation that breaks an invariant trips it.
build() { make -C "$work" --no-print-directory -j"$jobs" CUDA=0 DEBUG=1 BUILD=build tests >"$work/build.log" 2>&1; }

# run_tests NAMES...: 0 when every named program passes. A stanza's "env:"
# line (VAR=value ..., such as FERRY_SIM_GPUS=1 for the CUDA sources, which run
# on the simulated GPU) is in $stanza_env while its tests run.
stanza_env=
run_tests() {
    local t rc=0
    for t in "$@"; do
        # shellcheck disable=SC2086
        if ! env $stanza_env FERRY_PNGSUITE=${FERRY_PNGSUITE:-$src/../shared/testdata/pngsuite} \
             timeout 600 "$work/build/tests/$t" >"$work/test.log" 2>&1; then
            rc=1
            # An invariant's assertion names itself; else the first failure.
            why=$(grep -m1 'internal assertion failed' "$work/test.log" ||
                  grep -m1 '^  [^ ]*:[0-9]*: ' "$work/test.log" || grep -m1 '^  ' "$work/test.log")
            last_fail="$t: $(printf '%s' "$why" | sed 's/^ *//' | cut -c1-150)"
        fi
    done
    return $rc
}

# replace FILE FROM TO: exactly one occurrence, else exit 3.
replace() {
    python3 - "$@" <<'PY'
import sys
path, old, new = sys.argv[1:4]
text = open(path).read()
n = text.count(old)
if n != 1:
    print(f"'{old}' occurs {n} times in {path}")
    sys.exit(3)
open(path, "w").write(text.replace(old, new))
PY
}

echo "building the scratch copy ($work) ..."
build || { echo "the unmutated tree does not build:"; tail -n 20 "$work/build.log"; exit 1; }

# selected NAME: 0 when no substring was given or NAME contains one of them.
selected() {
    local s
    [ ${#only[@]} -eq 0 ] && return 0
    for s in "${only[@]}"; do
        case "$1" in *"$s"*) return 0 ;; esac
    done
    return 1
}

# Every test of a selected stanza must pass before any mutation, or catching
# proves nothing.
all_tests=$(awk '/^name: /{n=substr($0, 7)} /^tests: /{print n "\t" substr($0, 8)}' "$list" |
    while IFS=$'\t' read -r n t; do selected "$n" && echo "$t"; done | tr ' ' '\n' | sort -u)
# shellcheck disable=SC2086
run_tests $all_tests || { echo "fails without any mutation: $last_fail"; exit 1; }

caught=0 survived=0 broken=0
check_one() { # name file tests from to env
    local name=$1 file=$2 tests=$3 from=$4 to=$5
    stanza_env=$6
    selected "$name" || return
    cp "$work/$file" "$work/$file.orig"
    if ! msg=$(replace "$work/$file" "$from" "$to"); then
        echo "STALE   $name: $msg"; broken=$((broken + 1)); mv "$work/$file.orig" "$work/$file"; return
    fi
    if ! build; then
        echo "BROKEN  $name: the mutated tree does not build"; broken=$((broken + 1))
    elif run_tests $tests; then
        echo "SURVIVED $name ($file; $tests all pass)"; survived=$((survived + 1))
    else
        echo "caught  $name ($last_fail)"; caught=$((caught + 1))
    fi
    stanza_env=
    # Restored; the next mutation's build recompiles it along with its own file.
    mv "$work/$file.orig" "$work/$file"
    touch "$work/$file"
}

name= file= tests= from= to= envs=
flush() {
    [ -n "$name" ] && check_one "$name" "$file" "$tests" "$from" "$to" "$envs"
    name= file= tests= from= to= envs=
}
while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in
        '#'*) ;;
        '') flush ;;
        'name: '*) name=${line#name: } ;;
        'file: '*) file=${line#file: } ;;
        'tests: '*) tests=${line#tests: } ;;
        'from: '*) from=${line#from: } ;;
        'to: '*) to=${line#to: } ;;
        'env: '*) envs=${line#env: } ;;
        *) echo "$list: cannot read: $line"; exit 2 ;;
    esac
done <"$list"
flush
echo "$caught caught, $survived survived, $broken stale or broken"
[ "$survived" -eq 0 ] && [ "$broken" -eq 0 ]
