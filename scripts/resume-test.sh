#!/usr/bin/env bash
# Kill and resume: train_color runs with --save-every, is killed with SIGKILL at
# seeded random instants, and is restarted with --resume (each time with another
# --workers) until it finishes; its last checkpoint must equal the uninterrupted
# run's bit for bit (ferry diff at tolerance 0, and cmp), and its last epoch's
# row (train and validation loss and accuracy) must be the uninterrupted run's:
# the epoch's running sums are in the checkpoint. On the CPU and on a
# simulated GPU. Prints one line per check and "N passed, N failed, N skipped".
#   FERRY_BUILD  build folder (default build); FERRY_RESUME_SEED  kill times
set -u
build=${FERRY_BUILD:-build}
seed=${FERRY_RESUME_SEED:-4242}
passed=0 failed=0 skipped=0
ok() { echo "ok    resume $1"; passed=$((passed + 1)); }
bad() { echo "FAIL  resume $1"; failed=$((failed + 1)); }
finish() { echo "$passed passed, $failed failed, $skipped skipped"; [ "$failed" -eq 0 ]; exit $?; }
for p in "$build/samples/train_color" "$build/ferry"; do
    [ -x "$p" ] || { echo "skip  resume ($p not built)"; skipped=1; finish; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-resume-XXXXXX") || exit 1
[ -n "${FERRY_RESUME_KEEP:-}" ] && echo "  keeping $tmp" || trap 'rm -rf "$tmp"' EXIT
echo "  kill seed $seed (FERRY_RESUME_SEED to replay)"
RANDOM=$seed
"$build/samples/train_color" --make-data "$tmp/data" --train 60 --test 10 >/dev/null || {
    bad "make-data"; finish; }

# The command line of a run: device, checkpoint, workers, then any more arguments.
args() {
    local dev=$1 ck=$2 w=$3; shift 3
    cmd=("$build/samples/train_color" --data "$tmp/data" --channels 3 --epochs 2 --batch 16
         --device "$dev" --workers "$w" --out "$tmp/out-$dev" --save "$ck" --save-every 2 "$@")
}
train() { args "$@"; "${cmd[@]}"; }
# Epoch 2's train loss, train accuracy, validation loss and accuracy in a log.
last_row() { awk '$1 == "2" && NF == 7 && $2 ~ /^[0-9.]+$/ { r = $2 " " $3 " " $4 " " $5 } END { print r }' "$1"; }

check_device() { # label device env...
    local label=$1 dev=$2
    local ref=$tmp/ref-$label.st ck=$tmp/run-$label.st
    local t0 t1
    t0=$(date +%s.%N)
    if ! train "$dev" "$ref" 2 --out "$tmp/ref-out-$label" >"$tmp/ref.log" 2>&1; then
        bad "$label: the uninterrupted run failed"; sed 's/^/    /' "$tmp/ref.log" | tail -5; return
    fi
    t1=$(date +%s.%N)
    local kills=0 resumes=0 attempt rc cycle
    # A run that ends before its kill proves nothing: start over (three times at most).
    for cycle in 1 2 3; do
    [ "$kills" -gt 0 ] && break
    rm -f "$ck"
    kills=0 resumes=0
    for attempt in 1 2 3 4 5 6 7 8 9 10; do
        local w=$((attempt % 3))
        local resume=(); [ -f "$ck" ] && resume=(--resume "$ck") && resumes=$((resumes + 1))
        # Started directly (no subshell), so that the kill reaches the trainer itself.
        args "$dev" "$ck" "$w" "${resume[@]}"
        "${cmd[@]}" >"$tmp/run.log" 2>&1 &
        local pid=$!
        # Until the first checkpoint is there, so that a resume follows; then 0 to
        # 30 % of the uninterrupted run's time: at any step or write, on a fast
        # machine or a loaded one.
        while [ ! -f "$ck" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
        sleep "$(awk -v r=$RANDOM -v a="$t0" -v b="$t1" \
                 'BEGIN { printf "%.3f", (b - a) * (r % 300) / 1000 }')"
        if kill -9 "$pid" 2>/dev/null; then
            wait "$pid" 2>/dev/null
            kills=$((kills + 1))
        else
            wait "$pid"; rc=$?
            [ $rc -eq 0 ] || { bad "$label: a resumed run failed (exit $rc)"; tail -5 "$tmp/run.log"; return; }
            break
        fi
    done
    done
    if [ -f "$ck" ] && ! grep -q "^saved:" "$tmp/run.log"; then
        train "$dev" "$ck" 1 --resume "$ck" >"$tmp/run.log" 2>&1 || {
            bad "$label: the last resumed run failed"; tail -5 "$tmp/run.log"; return; }
    fi
    if [ "$kills" -eq 0 ] || [ "$resumes" -eq 0 ]; then
        bad "$label: $kills kills, $resumes resumes: nothing was tested (kill times off?)"; return
    fi
    # A kill mid-save leaves CK.tmpPID; the next save or resume removes it.
    local left; left=$(ls "$ck".tmp* 2>/dev/null | wc -l)
    if [ "$left" -eq 0 ]; then
        ok "$label: no temporary checkpoint left beside $ck after $kills kills"
    else
        bad "$label: $left temporary checkpoint(s) left: $(ls "$ck".tmp* | head -3 | tr '\n' ' ')"
    fi
    # The last epoch's row, as the run that ended printed it (made again from
    # the checkpoint when the epoch had ended before the last kill).
    local want got
    want=$(last_row "$tmp/ref.log") got=$(last_row "$tmp/run.log")
    if [ -n "$want" ] && [ "$want" = "$got" ]; then
        ok "$label: the resumed run's last row is the uninterrupted run's ($got)"
    else
        bad "$label: the last row: uninterrupted '$want', resumed '$got' (train loss, acc, val loss, acc)"
        sed 's/^/    /' "$tmp/run.log" | tail -5
    fi
    if "$build/ferry" diff "$ref" "$ck" --tol 0 >"$tmp/diff.log" 2>&1 && cmp -s "$ref" "$ck"; then
        ok "$label: killed $kills times, resumed $resumes times with 0/1/2 workers: the final checkpoint is the uninterrupted run's"
    else
        bad "$label: after $kills kills the final checkpoint differs"; sed 's/^/    /' "$tmp/diff.log" | tail -5
    fi
}

check_device cpu cpu

# Two runs saving to one checkpoint: the second is refused, naming the first's pid.
args cpu "$tmp/locked.st" 0 --epochs 1000
"${cmd[@]}" >"$tmp/first.log" 2>&1 &
first=$!
for _ in $(seq 500); do grep -q "^$first\$" "$tmp/locked.st.lock" 2>/dev/null && break; sleep 0.01; done
args cpu "$tmp/locked.st" 0
"${cmd[@]}" >"$tmp/second.log" 2>&1
rc=$?
kill "$first" 2>/dev/null; wait "$first" 2>/dev/null
if [ $rc -ne 0 ] && grep -q "another run (pid $first) is saving to it" "$tmp/second.log"; then
    ok "a second run saving to the same checkpoint is refused, naming pid $first"
else
    bad "a second run saving to the same checkpoint: exit $rc"; sed 's/^/    /' "$tmp/second.log" | tail -3
fi

export FERRY_SIM_GPUS=1
check_device sim-gpu cuda
finish
