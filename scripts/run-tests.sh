#!/bin/sh
# Runs every test program in the given folders and sums their last lines into
# one "N passed, N failed, N skipped". A program that crashes or prints no
# summary counts as one failure. An argument that is an executable file (such
# as scripts/fuzz-run.sh) is run as one more program of the same kind.
# An argument sim=N:DIR runs DIR's tests again on N simulated GPUs
# (FERRY_SIM_GPUS=N), so the GPU tests run on machines without a GPU.
passed=0 failed=0 skipped=0
for dir in "$@"; do
    pat='test_*'
    sim=
    case "$dir" in sim=*:*) sim=${dir%%:*}; sim=${sim#sim=}; dir=${dir#*:} ;; esac
    if [ -f "$dir" ] && [ -x "$dir" ]; then pat=${dir##*/}; dir=$(dirname "$dir"); fi
    [ -d "$dir" ] || continue
    for t in "$dir"/$pat; do
        [ -x "$t" ] || continue
        case "$t" in *.d|*.o) continue ;; esac
        if [ -n "$sim" ]; then
            echo "== $t (FERRY_SIM_GPUS=$sim)"
            out=$(FERRY_SIM_GPUS=$sim "$t" 2>&1); rc=$?
        else
            echo "== $t"
            out=$("$t" 2>&1); rc=$?
        fi
        printf '%s\n' "$out" | grep -v '^ok  ' 
        last=$(printf '%s\n' "$out" | tail -n 1)
        case "$last" in
            *" passed, "*" failed, "*" skipped")
                n=$(printf '%s\n' "$last" | awk '{print $1, $3, $5}')
                passed=$((passed + ${n%% *})); n=${n#* }
                failed=$((failed + ${n%% *})); skipped=$((skipped + ${n#* }))
                ;;
            *)
                echo "$t: exited with status $rc without a summary (crash?)"
                failed=$((failed + 1))
                ;;
        esac
    done
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
