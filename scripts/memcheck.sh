#!/bin/sh
# Runs test programs under valgrind memcheck (errors and definite/possible leaks
# fail) and prints one line per program and a "N passed, N failed, N skipped"
# summary. Arguments: test programs, each optionally followed by ":filter" (the
# harness runs only tests whose name contains the filter).
#   scripts/memcheck.sh build/tests/test_loader build/tests/test_faults:inline
# With no arguments, the programs come from $FERRY_MEMCHECK_TESTS (for make test).
[ $# -eq 0 ] && set -- $FERRY_MEMCHECK_TESTS
passed=0 failed=0 skipped=0
if ! command -v valgrind >/dev/null 2>&1; then
    for t in "$@"; do echo "skip  memcheck ${t##*/} (valgrind not found)"; skipped=$((skipped + 1)); done
    echo "$passed passed, $failed failed, $skipped skipped"
    exit 0
fi
log=$(mktemp "${TMPDIR:-/tmp}/ferry-memcheck-XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT
for arg in "$@"; do
    t=${arg%%:*}
    filter=
    [ "$t" != "$arg" ] && filter=${arg#*:}
    name=${t##*/}${filter:+ $filter}
    start=$(date +%s)
    valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,possible \
        --show-leak-kinds=definite,possible --track-origins=yes --num-callers=30 \
        --log-file="$log" "$t" $filter > "$log.out" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    summary=$(tail -n 1 "$log.out")
    if [ $rc -eq 0 ]; then
        echo "ok    memcheck $name ($summary; ${secs} s)"
        passed=$((passed + 1))
    else
        echo "FAIL  memcheck $name (exit $rc; $summary; ${secs} s)"
        grep -v '^ok  ' "$log.out" | tail -n 20 | sed 's/^/  /'
        grep -E '^==[0-9]+== (Invalid|Conditional|Use of|Syscall|Mismatched|[0-9,]+ bytes in)|ERROR SUMMARY' "$log" \
            | head -n 20 | sed 's/^/  /'
        failed=$((failed + 1))
    fi
    rm -f "$log.out"
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
