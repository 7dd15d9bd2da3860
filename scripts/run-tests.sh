#!/bin/sh
# Runs every test program in the given folders and sums their last lines into
# one "N passed, N failed, N skipped". A program that crashes or prints no
# summary counts as one failure. An argument that is an executable file (such
# as scripts/fuzz-run.sh) is run as one more program of the same kind.
# An argument sim=N:DIR runs DIR's tests again on N simulated GPUs
# (FERRY_SIM_GPUS=N), so the GPU tests run on machines without a GPU; there a
# test that finds no GPU fails (FERRY_REQUIRE gains "gpu", see tests/harness.h).
# Each program runs under a time limit (FERRY_TEST_TIMEOUT seconds, default
# 900): a hang is reported as a failure naming the program, not a stuck run.
passed=0 failed=0 skipped=0
limit=${FERRY_TEST_TIMEOUT:-900}
for dir in "$@"; do
    pat='test_*'
    sim=
    case "$dir" in sim=*:*) sim=${dir%%:*}; sim=${sim#sim=}; dir=${dir#*:} ;; esac
    if [ -f "$dir" ] && [ -x "$dir" ]; then pat=${dir##*/}; dir=$(dirname "$dir"); fi
    [ -d "$dir" ] || continue
    for t in "$dir"/$pat; do
        [ -x "$t" ] || continue
        case "$t" in *.d|*.o) continue ;; esac
        # OpenBLAS's own threads synchronise in ways TSan cannot see: one thread there.
        tsan=; case "$t" in */tsan/*) tsan=1 ;; esac
        echo "== $t${sim:+ (FERRY_SIM_GPUS=$sim)}"
        out=$(if [ -n "$tsan" ]; then export OPENBLAS_NUM_THREADS=1; fi
              if [ -n "$sim" ]; then
                  export FERRY_SIM_GPUS="$sim" FERRY_REQUIRE="${FERRY_REQUIRE:+$FERRY_REQUIRE,}gpu"
              fi
              timeout -k 10 "$limit" "$t" 2>&1); rc=$?
        printf '%s\n' "$out" | grep -v '^ok  ' 
        last=$(printf '%s\n' "$out" | tail -n 1)
        case "$last" in
            *" passed, "*" failed, "*" skipped")
                n=$(printf '%s\n' "$last" | awk '{print $1, $3, $5}')
                passed=$((passed + ${n%% *})); n=${n#* }
                failed=$((failed + ${n%% *})); skipped=$((skipped + ${n#* }))
                ;;
            *)
                if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
                    echo "$t: timed out after $limit s (a hang?)"
                else
                    echo "$t: exited with status $rc without a summary (crash?)"
                fi
                failed=$((failed + 1))
                ;;
        esac
    done
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
