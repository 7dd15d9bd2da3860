#!/bin/sh
# Static analysis: clang-tidy (checks in .clang-tidy) and cppcheck over the C
# files given, and a check that no public header names a file under src/ or
# tests/ (headers state contracts, docs/DESIGN.md the mechanism), that no
# program is run through a shell (popen, system), that libferry includes no
# header of libferry-train (src/model/), that messages keep one pattern (the
# function in front; distributed: the rank first), and that every
# FERRY_API prototype has a definition in src/ (make lint passes what the
# build compiles, without the CUDA variants), with the project's flags. Prints
# the findings, one line per tool, and a "N passed, N failed, N skipped"
# summary; exits 1 when anything was found.
#   scripts/lint.sh src/loader/*.c
# Without arguments it reads the list from FERRY_LINT_SRC (how make test runs it
# through run-tests.sh), else takes every C file in src/ and tools/ but *_cuda.c.
# FERRY_LINT_FLAGS adds compiler flags (the MPI headers as -isystem, so clang-tidy
# leaves them alone; cppcheck gets only the -D and -I ones).
# JOBS=N runs N clang-tidy processes at once (default: the CPU count).
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
if [ $# -eq 0 ]; then
    # split on purpose: a list of paths without spaces
    if [ -n "${FERRY_LINT_SRC:-}" ]; then set -- $FERRY_LINT_SRC
    else set -- $(find src tools -name '*.c' ! -name '*_cuda.c' | sort); fi
fi
extra=${FERRY_LINT_FLAGS:-}
flags="-std=c11 -D_GNU_SOURCE -Iinclude -Isrc $extra"
# cppcheck takes the defines and include folders only.
cpp_extra=
for f in $extra; do
    case "$f" in -D*|-I*) cpp_extra="$cpp_extra $f" ;; esac
done
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
tidy=${CLANG_TIDY:-$(command -v clang-tidy || command -v clang-tidy-14)}
passed=0 failed=0 skipped=0
out=$(mktemp "${TMPDIR:-/tmp}/ferry-lint-XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT

if [ -n "$tidy" ]; then
    printf '%s\n' "$@" | xargs -P "$jobs" -I{} "$tidy" --quiet {} -- $flags > "$out" 2>/dev/null
    n=$(grep -c ': warning: \|: error: ' "$out")
    if [ "$n" -eq 0 ]; then
        echo "ok    clang-tidy ($# files)"
        passed=$((passed + 1))
    else
        echo "FAIL  clang-tidy: $n findings"
        grep -A3 ': warning: \|: error: ' "$out" | grep -v '^--$'
        failed=$((failed + 1))
    fi
else
    echo "skip  clang-tidy (not found)"
    skipped=$((skipped + 1))
fi

if command -v cppcheck >/dev/null 2>&1; then
    supp=
    [ -f "$root/.cppcheck-suppressions" ] && supp="--suppressions-list=$root/.cppcheck-suppressions"
    cppcheck --quiet --std=c11 -D_GNU_SOURCE -Iinclude -Isrc $cpp_extra --enable=warning,portability,performance \
        --inline-suppr --library=posix $supp -j "$jobs" \
        --template='{file}:{line}: {severity}: {message} [{id}]' "$@" > "$out" 2>&1
    n=$(grep -c ': \(error\|warning\|portability\|performance\|style\): ' "$out")
    if [ "$n" -eq 0 ]; then
        echo "ok    cppcheck ($# files)"
        passed=$((passed + 1))
    else
        echo "FAIL  cppcheck: $n findings"
        cat "$out"
        failed=$((failed + 1))
    fi
else
    echo "skip  cppcheck (not found)"
    skipped=$((skipped + 1))
fi
# Public headers state contracts; where the code or its tests live is for
# docs/DESIGN.md, and a path into src/ or tests/ goes stale with the next move.
if grep -n -E '(^|[^A-Za-z0-9_])(src|tests)/[A-Za-z0-9_./-]+' include/ferry.h include/ferry/*.h > "$out"; then
    echo "FAIL  public headers name files under src/ or tests/ (say it in docs/DESIGN.md):"
    cat "$out"
    failed=$((failed + 1))
else
    echo "ok    public headers name no file under src/ or tests/"
    passed=$((passed + 1))
fi
# No shell: a command line built from a name (a folder with a quote in it)
# runs whatever the name says. Programs are started with posix_spawn and an
# argument vector; popen, system, the execl family and "sh -c" are refused in
# src/, tools/ and samples/ (FERRY_LINT_SHELL_DIRS to point it elsewhere).
shell_dirs=${FERRY_LINT_SHELL_DIRS:-src tools samples}
# shellcheck disable=SC2086 # a list of folders
if grep -rnE --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' \
        '(^|[^A-Za-z0-9_])(popen|system|execl|execlp|execle)[[:space:]]*\(|"(/bin/)?sh"|sh -c' \
        $shell_dirs > "$out"; then
    echo "FAIL  a shell or popen/system/execl in $shell_dirs (use posix_spawn with an argument vector):"
    cat "$out"
    failed=$((failed + 1))
else
    echo "ok    no shell, popen, system or execl in $shell_dirs"
    passed=$((passed + 1))
fi
# One direction: libferry (every folder of src/ but src/model/) includes no
# header of libferry-train (src/model/); the folder says the library.
if grep -rnE --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' \
        '^[[:space:]]*#[[:space:]]*include[[:space:]]+"model/' src | grep -v '^src/model/' > "$out"; then
    echo "FAIL  libferry includes a libferry-train header (src/model/ depends on the rest, never the reverse):"
    cat "$out"
    failed=$((failed + 1))
else
    echo "ok    nothing outside src/model/ includes a header from it"
    passed=$((passed + 1))
fi
# One message pattern (docs/API_ERRORS.md, "Messages"): the function names
# itself in front ("ferry_add: shapes ..."), never in an "(in ferry_add)"
# suffix; distributed messages put the rank first ("rank 1: ferry_dist_...:
# reason"), never after the function (FERRY_ARG_ERROR/ferry_arg_error_ with a
# "rank" reason, or "%s: rank %d").
if grep -rnE --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' \
        '\(in [^)"]*\)"' src tools > "$out" ||
   grep -rnE --include='*.c' --include='*.h' --include='*.cu' \
        '"%s: rank %d|ARG_ERROR\("rank|arg_error_\([A-Za-z_]+, *"rank' src/model/distributed >> "$out"; then
    echo "FAIL  messages off the pattern (\"func: reason\"; distributed: \"rank N: func: reason\"):"
    cat "$out"
    failed=$((failed + 1))
else
    echo "ok    messages name the function in front; distributed ones the rank first"
    passed=$((passed + 1))
fi
# Every FERRY_API prototype has a definition in src/ (a line that starts with
# its return type and names it, in a .c or .cu file): a declared function the
# library lacks links only until someone calls it.
sed -n 's/^FERRY_API[^(]*[ *]\(ferry_[a-z0-9_]*\)(.*/\1/p' include/ferry.h include/ferry/*.h | sort -u > "$out"
api_n=$(wc -l < "$out")
undefined=
for fn in $(cat "$out"); do
    grep -rqE --include='*.c' --include='*.cu' "^[a-z][a-z0-9_ *]*[ *]$fn\(" src || undefined="$undefined $fn"
done
if [ -n "$undefined" ]; then
    echo "FAIL  FERRY_API prototypes without a definition in src/:$undefined"
    failed=$((failed + 1))
else
    echo "ok    every FERRY_API prototype has a definition ($api_n)"
    passed=$((passed + 1))
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
