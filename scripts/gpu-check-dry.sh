#!/bin/sh
# The dry run of scripts/gpu-check.sh, so that the GPU check cannot rot on
# machines without a GPU (make test runs it): `gpu-check.sh run OUT BUILD
# --dry-run` on the simulated GPU (FERRY_SIM_GPUS=1) into a temporary folder,
# then report.md and report.json must be there and every step ok or skipped
# (scripts/gpu_report.py steps reads report.json back).
# Prints one line per check and a "N passed, N failed, N skipped" summary.
#   FERRY_GPU_CHECK_BUILD=build sh scripts/gpu-check-dry.sh
# BUILD defaults to FERRY_BUILD (which make test sets to its build folder),
# else build.
build=${FERRY_GPU_CHECK_BUILD:-${FERRY_BUILD:-build}}
dir=$(cd "$(dirname "$0")" && pwd)
passed=0 failed=0 skipped=0
ok() { echo "ok    gpu-check $1"; passed=$((passed + 1)); }
bad() { echo "FAIL  gpu-check $1"; failed=$((failed + 1)); }
skip() { echo "skip  gpu-check $1"; skipped=$((skipped + 1)); }
finish() { echo "$passed passed, $failed failed, $skipped skipped"; [ "$failed" -eq 0 ]; exit $?; }

if ! command -v bash >/dev/null 2>&1; then
    skip "(no bash)"; finish
fi
if ! command -v python3 >/dev/null 2>&1; then
    skip "(no python3: scripts/gpu_report.py writes the report)"; finish
fi
if [ ! -x "$build/ferry" ]; then
    skip "($build/ferry not built: make BUILD=$build all)"; finish
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-gpu-check-dry-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

start=$(date +%s)
# The simulated GPU runs the CUDA sources, as a real GPU's run would (the
# CPU kernels with FERRY_SIM_KERNELS=cpu). Timed on the shared two-core machine
# beside a two-job build: the whole run 142 s, the tests step 65 s of its 90 s
# cap (test_nn about 33 s of that), train 13 s, train-amp 24 s, safetensors 5 s
# of its 20 s (test_nn had overrun the cap in an earlier state of the code).
FERRY_SIM_KERNELS=${FERRY_SIM_KERNELS:-cuda} \
FERRY_SIM_GPUS=${FERRY_SIM_GPUS:-1} bash "$dir/gpu-check.sh" run "$tmp/out" "$build" --dry-run \
    > "$tmp/run.log" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
json=$tmp/out/report.json
for f in report.md report.json logs.txt; do
    if [ -s "$tmp/out/$f" ]; then ok "dry run wrote $f"; else bad "dry run wrote no $f"; fi
done
if [ ! -s "$json" ]; then
    tail -n 20 "$tmp/run.log" | sed 's/^/  /'
    finish
fi
python3 "$dir/gpu_report.py" steps "$json" > "$tmp/steps" 2>&1 || { bad "report.json does not read"; sed 's/^/  /' "$tmp/steps"; }
if [ "$(head -n 1 "$tmp/steps")" = "simulated dry-run" ]; then
    ok "report.json says simulated, dry run"
else
    bad "report.json does not say simulated, dry run"
fi
# One step a line: status, name, seconds, reason (tab-separated).
tab=$(printf '\t') n=0
while IFS=$tab read -r status name secs_step reason; do
    n=$((n + 1))
    case $status in
        ok) ok "dry run: $name (${secs_step} s${reason:+: $reason})" ;;
        skipped) skip "dry run: $name ($reason)" ;;
        *) bad "dry run: $name: ${status:-no status}${reason:+: $reason}"
           grep -A 12 "^===== \[$name\]" "$tmp/out/logs.txt" | tail -n 12 | sed 's/^/  /' ;;
    esac
done <<EOF
$(tail -n +2 "$tmp/steps")
EOF
if [ "$n" -ge 14 ]; then ok "report.json lists $n steps"; else bad "report.json lists $n steps (14 expected)"; fi
if [ "$rc" -eq 0 ]; then ok "gpu-check.sh run exited 0 (${secs} s)"; else bad "gpu-check.sh run exited $rc (${secs} s)"; fi
finish
