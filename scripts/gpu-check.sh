#!/usr/bin/env bash
# One command that proves and measures ferry on a real GPU, in two halves:
#
#   scripts/gpu-check.sh prepare [BUILD]              here, on the machine without a GPU
#   scripts/gpu-check.sh run OUTDIR [BUILD] [options]  there, on the lent GPU machine
#
# prepare (BUILD defaults to build/gpu; `make gpu-check` runs it) builds with
# `make STATIC=1 CUDA_ARCH=90 BUILD=BUILD all` (libpng, zlib and the CUDA runtime
# linked in: the GPU machine has nvcc but no libpng/OpenBLAS headers; sm_90 alone,
# the lent H100 and H200, FERRY_GPU_CHECK_ARCH to change: every test program links
# the GPU code, and the default seven architectures would not fit the carry limit
# below), then packs into
# BUILD/gpu-check/ what the GPU machine needs and cannot make: ferry.tar.xz (the
# tool, the tests, the samples and libferry.so, debug info stripped, with the
# shared libraries they use that a bare machine may lack: OpenBLAS, Open MPI, ...)
# and fashion-mnist.tar.xz (`ferry export fashion-mnist`, 70000 PNGs). It prints
# the carry list (that one folder, well under the 64 MiB a call may carry) and the
# command to run there.
#
# run executes the steps below, each under its own time limit and all within
# FERRY_GPU_CHECK_BUDGET seconds (default 525: the whole run ends within 9
# minutes), goes on past a failing step, and writes OUTDIR/report.md,
# OUTDIR/report.json and OUTDIR/logs.txt (every command's output; three files,
# so that a device call can bring them all back from $OUT):
#   info         ferry info
#   gpu          nvidia-smi: name, driver, PCIe link, NUMA node
#   tests        every BUILD/tests/test_* (a GPU test skipped for "no CUDA device" fails it)
#   sanitizer    compute-sanitizer memcheck, racecheck, initcheck, synccheck over the GPU tests
#   h2d          ferry bench h2d: pinned H2D at 64 MiB >= 50 GB/s and >= 90 % of the best async copy
#   pipeline     ferry bench on the Fashion-MNIST PNGs, all cores, against the plain libpng rate
#   color        ferry bench on a generated RGB set, 224x224 with random crop and flip
#   overlap      ferry bench --overlap both --compute-ms X
#   torch        bench/compare_torch.py --device cuda: loader, MLP and CNN epochs
#   train        train_gray --model cnn --device cuda: test accuracy >= 0.915
#   train-amp    the same with --amp
#   nccl         test_dist under mpirun and bench/dist_overhead.sh --device cuda
#   safetensors  bench/check_safetensors.py: PyTorch loads a ferry checkpoint, same logits
# BUILD (default build/gpu when prepared, else build) is the prepared build
# folder (its gpu-check/ bundle is unpacked into gpu-check-run/root and
# gpu-check-run/data on first use, beside the carried folder, not in it) or any
# build folder with ferry, tests/ and
# samples/ in place. Options:
#   --dry-run      simulated GPU (FERRY_SIM_GPUS, default 1) and short limits: the
#                  check of the script itself (scripts/gpu-check-dry.sh, make test)
#   --only a,b     run only these steps; --skip a,b: all but these
# With FERRY_SIM_GPUS set, every step that needs real hardware (nvidia-smi,
# compute-sanitizer, bandwidth and throughput figures, NCCL, PyTorch on CUDA) says
# "skipped: simulated"; the others run on the simulated GPU, with tiny data.
# Environment: FERRY_GPU_CHECK_BUDGET (seconds for the whole run, default 525),
# FERRY_GPU_CHECK_DRY_RUN=1 (as --dry-run), FERRY_GPU_CHECK_EPOCHS (train_gray's
# epochs, default 10), FERRY_GPU_CHECK_NO_LINK=1 (run as root on a machine where
# the checkout is not where the bundle was built, the script links that folder
# to the checkout, so that the tests find tests/fuzz/corpus: this turns it
# off), FERRY_FASHION_IDX (the folder with the Fashion-MNIST IDX files, default
# Debian's /usr/share/datasets/fashion-mnist; used when no exported PNGs are at hand).
set -u
export LC_ALL=C
cd "$(dirname "$0")/.." || exit 2
repo=$PWD

die() { echo "gpu-check: $*" >&2; exit 1; }
usage() {
    sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}
now() { date +%s; }
nowf() { date +%s.%N; }
secs_since() { awk -v a="$1" -v b="$(nowf)" 'BEGIN { printf "%.1f", b - a }'; }

# ---------------------------------------------------------------- prepare ----

# The shared libraries FILE... load, as "name path" lines, less what every Linux
# machine has (the C and C++ runtimes) and what the CUDA toolkit brings.
bundle_candidates() {
    for f in "$@"; do ldd "$f" 2>/dev/null; done |
        awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' |
        grep -Ev '^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda|libnvidia)[.-]' |
        grep -Ev ' /usr/local/cuda' | sort -u
}

prepare() {
    local build=${1:-build/gpu}
    build=${build%/}
    case $build in
        /*) case $build in "$repo"/*) build=${build#"$repo"/} ;;
                *) echo "gpu-check: warning: $build is outside the repository: it cannot be carried" >&2 ;;
            esac ;;
    esac
    local stage=$build/gpu-check jobs idx=${FERRY_FASHION_IDX:-/usr/share/datasets/fashion-mnist}
    jobs=$(nproc 2>/dev/null || echo 2)
    local t0; t0=$(now)
    if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
        die "nvcc not found: the bundle must be built with CUDA here (the GPU machine has no libpng/OpenBLAS headers)"
    fi
    local arch=${FERRY_GPU_CHECK_ARCH:-90}
    echo "== make STATIC=1 CUDA_ARCH=$arch BUILD=$build all"
    ${MAKE:-make} --no-print-directory -j"$jobs" STATIC=1 CUDA_ARCH="$arch" BUILD="$build" all ||
        die "the build failed"
    local info; info=$("$build/ferry" info 2>&1)
    printf '%s\n' "$info" | grep -q '^build: CUDA' ||
        die "$build/ferry was built without CUDA: $(printf '%s\n' "$info" | grep '^build:')"

    mkdir -p "$stage" || die "cannot create $stage"
    # The carried folder holds the two archives and nothing else.
    find "$stage" -mindepth 1 -maxdepth 1 ! -name ferry.tar.xz ! -name fashion-mnist.tar.xz -exec rm -rf {} +
    local pack=$build/gpu-check-pack
    rm -rf "$pack"
    mkdir -p "$pack/tests" "$pack/samples" "$pack/lib" || die "cannot create $pack"
    echo "== packing $stage/ferry.tar.xz"
    local bins=() f
    strip --strip-debug -o "$pack/ferry" "$build/ferry" && bins+=("$build/ferry")
    for f in "$build"/tests/test_* "$build"/tests/dist_drill; do
        if [ ! -f "$f" ] || [ ! -x "$f" ]; then continue; fi
        strip --strip-debug -o "$pack/tests/${f##*/}" "$f" && bins+=("$f")
    done
    for f in "$build"/samples/*; do
        if [ ! -f "$f" ] || [ ! -x "$f" ]; then continue; fi
        strip --strip-debug -o "$pack/samples/${f##*/}" "$f" && bins+=("$f")
    done
    local so
    so=$(find "$build" -maxdepth 1 -name 'libferry.so.*.*.*' -printf '%f\n' | head -n 1)
    if [ -n "$so" ]; then
        strip --strip-debug -o "$pack/$so" "$build/$so" && bins+=("$build/$so")
        cp -P "$build"/libferry.so "$build"/libferry.so.[0-9] "$pack/" 2>/dev/null
    fi
    local name path nlib=0
    while read -r name path; do
        cp -L "$path" "$pack/lib/$name" && nlib=$((nlib + 1))
    done < <(bundle_candidates "${bins[@]}")
    {
        echo "srcdir=$repo"
        echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
        echo "git=$(git describe --always --dirty 2>/dev/null || echo unknown)"
        echo "build=$build (make STATIC=1)"
        printf '%s\n' "$info" | sed -n 's/^build: /features=/p; s/^distributed: /distributed=/p'
        echo "bundled_libs=$(find "$pack/lib" -type f -printf '%f\n' | sort | paste -sd ' ')"
    } > "$pack/MANIFEST"
    if ! tar -C "$pack" -cf - . | xz -T0 -6 > "$stage/ferry.tar.xz.new"; then
        die "cannot write $stage/ferry.tar.xz"
    fi
    mv "$stage/ferry.tar.xz.new" "$stage/ferry.tar.xz"
    rm -rf "$pack"
    echo "   ${#bins[@]} programs, $nlib shared libraries: $(du -h "$stage/ferry.tar.xz" | cut -f1)"

    if [ -f "$stage/fashion-mnist.tar.xz" ]; then
        echo "== $stage/fashion-mnist.tar.xz is there (delete it to export again)"
    elif [ -f "$idx/train-images-idx3-ubyte.gz" ]; then
        echo "== exporting Fashion-MNIST to PNG: $stage/fashion-mnist.tar.xz"
        local tmp; tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-gpu-check-XXXXXX") || die "mktemp failed"
        if "$build/ferry" export fashion-mnist "$tmp/fashion-mnist" --source "$idx" &&
           tar -C "$tmp" -cf - fashion-mnist | xz -T0 -1 > "$stage/fashion-mnist.tar.xz.new"; then
            mv "$stage/fashion-mnist.tar.xz.new" "$stage/fashion-mnist.tar.xz"
        else
            rm -f "$stage/fashion-mnist.tar.xz.new"
            echo "gpu-check: warning: the export failed; the Fashion-MNIST steps will skip" >&2
        fi
        rm -rf "$tmp"
    else
        echo "gpu-check: warning: no Fashion-MNIST at $idx (install dataset-fashion-mnist):" \
             "the Fashion-MNIST steps will skip" >&2
    fi

    # What a device call sends: the working tree (tracked and untracked files git
    # does not ignore) and the carried folder.
    local tree carried
    tree=$( { git ls-files -z; git ls-files -z -o --exclude-standard; } 2>/dev/null |
            xargs -0 stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
    carried=$(du -sb "$stage" | cut -f1)
    awk -v t="$tree" -v c="$carried" 'BEGIN {
        printf "== size: working tree %.1f MiB + carried %.1f MiB = %.1f MiB (limit 64 MiB)\n",
               t / 1048576, c / 1048576, (t + c) / 1048576 }'
    [ $((tree + carried)) -lt $((64 * 1048576)) ] ||
        echo "gpu-check: warning: over the 64 MiB a device call may carry" >&2
    echo "prepared in $(( $(now) - t0 )) s"
    echo
    echo "carry: [\"$stage\"]"
    echo "command (on the GPU machine, in the repository root):"
    echo "  bash scripts/gpu-check.sh run \"\$OUT\" $build"
}

# -------------------------------------------------------------------- run ----

# Step bookkeeping: parallel arrays indexed by step number.
S_NAME=() S_TITLE=() S_STATUS=() S_REASON=() S_SECS=() S_FIG=() S_CMDS=()
cur=-1 step_t0=0 step_deadline=0

want_step() {
    local n=$1
    if [ -n "$only" ]; then case ",$only," in *",$n,"*) ;; *) return 1 ;; esac; fi
    case ",$skip_list," in *",$n,"*) return 1 ;; esac
    return 0
}

# step_begin NAME CAP TITLE: 1 (and the step recorded as skipped) when the step
# was not asked for or no time is left.
step_begin() {
    cur=${#S_NAME[@]}
    S_NAME[cur]=$1 S_TITLE[cur]=$3 S_STATUS[cur]='' S_REASON[cur]='' S_SECS[cur]=0 S_FIG[cur]='' S_CMDS[cur]=
    step_t0=$(nowf)
    local t; t=$(now)
    step_deadline=$((t + $2))
    [ "$step_deadline" -le "$deadline" ] || step_deadline=$deadline
    echo "== ${S_NAME[cur]}: ${S_TITLE[cur]}" >&2
    if ! want_step "$1"; then
        S_STATUS[cur]=skipped S_REASON[cur]="not asked for (--only/--skip)"
        return 1
    fi
    if [ $((step_deadline - t)) -lt 3 ]; then
        S_STATUS[cur]=skipped S_REASON[cur]="out of time: the run's budget of ${budget} s is spent"
        return 1
    fi
    return 0
}
step_end() {
    S_STATUS[cur]=$1 S_REASON[cur]=${2:-}
    S_SECS[cur]=$(secs_since "$step_t0")
    echo "   ${S_STATUS[cur]}${S_REASON[cur]:+: ${S_REASON[cur]}} (${S_SECS[cur]} s)" >&2
}
# After step_begin said no.
step_skipped() {
    S_SECS[cur]=0.0
    echo "   ${S_STATUS[cur]}: ${S_REASON[cur]}" >&2
}
left() { local l=$((step_deadline - $(now))); [ "$l" -gt 1 ] && echo "$l" || echo 1; }
fig() { S_FIG[cur]+="$1"$'\t'"$2"$'\n'; }

# run_cmd LOG LIMIT [VAR=value...] PROGRAM ARGS...: runs it under `timeout`
# (the whole process group is killed at LIMIT seconds), output in $work/LOG,
# appended to logs.txt; records the exact command. Sets rc (124: timed out).
# In a background subshell (in_bg=1) it only leaves $work/LOG.meta behind, and
# the step takes it in afterwards, in order, with collect LOG.
run_cmd() {
    local log=$1 lim=$2; shift 2
    local envs=() shown=
    [ -n "$simulated" ] && shown="FERRY_SIM_GPUS=$FERRY_SIM_GPUS "
    while [ $# -gt 0 ]; do
        case $1 in [A-Z_]*=*) envs+=("$1"); shown+="$1 "; shift ;; *) break ;; esac
    done
    local a
    for a in "$@"; do shown+="$(printf '%q' "$a") "; done
    shown=${shown% }
    local t0; t0=$(nowf)
    env ${envs[@]+"${envs[@]}"} timeout -k 5 "$lim" "$@" > "$work/$log" 2>&1 < /dev/null
    rc=$?
    printf '%s\n%s\n%s\n' "$shown" "$rc" "$(secs_since "$t0")" > "$work/$log.meta"
    [ -n "${in_bg:-}" ] || collect "$log"
    return "$rc"
}
collect() {
    local shown secs
    { read -r shown; read -r rc; read -r secs; } < "$work/$1.meta"
    S_CMDS[cur]+="$shown"$'\n'
    log_append "$1" "$shown" "$rc" "$secs"
}
log_append() {
    local f=$work/$1 lines
    {
        printf '\n===== [%s] %s\n===== exit %s, %s s%s\n' "${S_NAME[cur]}" "$2" "$3" "$4" \
            "$([ "$3" = 124 ] && echo ', TIMED OUT')"
        lines=$(wc -l < "$f")
        if [ "$lines" -gt 1500 ]; then
            head -n 200 "$f"
            echo "..... ($((lines - 1200)) lines left out)"
            tail -n 1000 "$f"
        else
            cat "$f"
        fi
    } >> "$outdir/logs.txt"
}
note_cmd() { S_CMDS[cur]+="$1"$'\n'; }

# Values out of one-object-per-line JSON: the first KEY in TEXT.
jnum() { printf '%s\n' "$2" | grep -o "\"$1\": *-\{0,1\}[0-9][0-9.eE+-]*" | head -n 1 | sed 's/^[^:]*: *//'; }
jstr() { printf '%s\n' "$2" | grep -o "\"$1\": *\"[^\"]*\"" | head -n 1 | sed 's/^[^:]*: *"//; s/"$//'; }
calc() { awk "BEGIN { printf \"$1\", $2 }" 2>/dev/null || echo '?'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }

# ---- setup: the programs, the shared libraries, the data ----

# Unpacks TARBALL into DIR once (again when the tarball changes).
unpack() {
    local tarball=$1 dir=$2 stamp
    stamp=$(stat -c '%s %Y' "$tarball")
    [ -f "$dir/.unpacked" ] && [ "$(cat "$dir/.unpacked")" = "$stamp" ] && return 0
    rm -rf "$dir" && mkdir -p "$dir" || return 1
    if command -v xz >/dev/null 2>&1; then
        tar -C "$dir" -xJf "$tarball" || return 1
    else # no xz: Python's lzma
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' \
            "$tarball" | tar -C "$dir" -xf - || return 1
    fi
    echo "$stamp" > "$dir/.unpacked"
}

# Libraries the programs cannot find on this machine come from the bundle
# (linked one by one into $work/lib, so nothing else is shadowed), the CUDA
# toolkit, or the NVIDIA wheels of the local PyTorch.
resolve_libs() {
    local progs=() p
    for p in "$root/ferry" "$root"/tests/test_* "$root"/samples/* "$root/libferry.so"; do
        [ -f "$p" ] && progs+=("$p")
    done
    [ ${#progs[@]} -gt 0 ] || return 0
    local dirs=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib) d
    for p in $(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null); do
        for d in "$p"/*/lib "$p"/cu*/lib; do [ -d "$d" ] && dirs+=("$d"); done
    done
    mkdir -p "$work/lib"
    local missing='' lib found _
    for _ in 1 2 3 4 5; do
        missing=$(ldd "${progs[@]}" 2>/dev/null | awk '/not found/ { print $1 }' | sort -u)
        [ -n "$missing" ] || break
        found=
        for lib in $missing; do
            if [ -f "$root/lib/$lib" ] && [ ! -e "$work/lib/$lib" ]; then
                ln -s "$(cd "$root/lib" && pwd)/$lib" "$work/lib/$lib" && found=1
                libs_note+="$lib (bundled), "
                continue
            fi
            for d in "${dirs[@]}"; do
                [ -e "$d/$lib" ] || continue
                case ":${LD_LIBRARY_PATH:-}:" in
                    *":$d:"*) ;;
                    *) export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"; found=1
                       libs_note+="$lib ($d), " ;;
                esac
                break
            done
        done
        if [ -n "$(ls -A "$work/lib")" ]; then
            case ":${LD_LIBRARY_PATH:-}:" in
                *":$work/lib:"*) ;;
                *) export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
            esac
        fi
        [ -n "$found" ] || break
    done
    [ -z "$missing" ] || libs_missing=$(printf '%s\n' "$missing" | paste -sd ' ')
    libs_note=${libs_note%, }
}

# The Fashion-MNIST PNG folder (train/ and test/): the prepared one, or one
# exported now from the IDX files. Sets fashion (empty: none, why in fashion_why).
find_fashion() {
    fashion='' fashion_why=
    local idx=${FERRY_FASHION_IDX:-/usr/share/datasets/fashion-mnist}
    if [ -f "$stage/fashion-mnist.tar.xz" ] && unpack "$stage/fashion-mnist.tar.xz" "$unpacked/data"; then
        fashion=$unpacked/data/fashion-mnist
    elif [ -f "$idx/t10k-images-idx3-ubyte.gz" ]; then
        if [ -n "$short" ]; then # the test split is plenty for tiny runs
            "$root/ferry" export idx "$idx/t10k-images-idx3-ubyte.gz" "$idx/t10k-labels-idx1-ubyte.gz" \
                "$work/fashion-mnist/test" > "$work/export.log" 2>&1 && fashion=$work/fashion-mnist
        else
            "$root/ferry" export fashion-mnist "$work/fashion-mnist" --source "$idx" \
                > "$work/export.log" 2>&1 && fashion=$work/fashion-mnist
        fi
        [ -n "$fashion" ] || fashion_why="ferry export failed: $(tail -n 1 "$work/export.log")"
    else
        fashion_why="no Fashion-MNIST: neither $stage/fashion-mnist.tar.xz (scripts/gpu-check.sh prepare) nor $idx"
    fi
    [ -n "$fashion" ] || return 0
    if [ -n "$short" ]; then
        # Tiny: 40 training and 10 test images a class, copied out of whichever split is there.
        local src=$fashion/train c files
        [ -d "$src" ] || src=$fashion/test
        for c in "$src"/*/; do
            c=${c%/}; c=${c##*/}
            files=("$src/$c"/*.png)
            mkdir -p "$work/fashion-mini/train/$c" "$work/fashion-mini/test/$c"
            if ! cp "${files[@]:0:40}" "$work/fashion-mini/train/$c/" ||
               ! cp "${files[@]:40:10}" "$work/fashion-mini/test/$c/"; then
                fashion='' fashion_why="cannot copy $src/$c into $work/fashion-mini"
                return 0
            fi
        done
        fashion=$work/fashion-mini
    fi
}

# ---- the steps ----

step_info() {
    step_begin info 10 "ferry info: version, build, devices, pinned memory" || { step_skipped; return; }
    run_cmd info.log "$(left)" "$root/ferry" info
    local out; out=$(cat "$work/info.log")
    ferry_version=$(printf '%s\n' "$out" | sed -n 's/^ferry //p' | head -n 1)
    ferry_build=$(printf '%s\n' "$out" | sed -n 's/^build: //p')
    ferry_dist=$(printf '%s\n' "$out" | sed -n 's/^distributed: //p')
    fig version "$ferry_version"; fig build "$ferry_build"; fig distributed "$ferry_dist"
    local cuda; cuda=$(printf '%s\n' "$out" | grep -E '^ +cuda:[0-9]' | sed 's/^ *//')
    fig devices "$(printf '%s\n' "$out" | grep -E '^ +(cpu|cuda:)' | sed 's/^ *//; s/ (simulated:.*/ (simulated)/' | paste -sd ';' | sed 's/;/; /g')"
    fig pinned "$(printf '%s\n' "$out" | sed -n 's/^pinned memory: //p')"
    ferry_device=$(printf '%s\n' "$cuda" | head -n 1 | sed 's/^cuda:0 *//; s/, compute capability.*//')
    if [ "$rc" != 0 ]; then
        step_end fail "ferry info exited with $rc"
    elif [ -z "$cuda" ]; then
        step_end fail "no CUDA device listed ($(printf '%s\n' "$out" | grep -m1 'no CUDA device' | sed 's/^ *//'))"
    elif [ -n "$simulated" ] && ! printf '%s\n' "$cuda" | grep -q simulated; then
        step_end fail "FERRY_SIM_GPUS is set but cuda:0 is not marked simulated"
    elif [ -z "$simulated" ] && printf '%s\n' "$cuda" | grep -q simulated; then
        step_end fail "cuda:0 is the simulated GPU"
    else
        step_end ok
    fi
}

step_gpu() {
    step_begin gpu 15 "nvidia-smi: name, driver, PCIe link, NUMA node; the host" || { step_skipped; return; }
    fig cpu "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores"
    fig memory "$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
    if [ -n "$simulated" ]; then
        step_end skipped "simulated (nvidia-smi reads real hardware)"; return
    fi
    if ! command -v nvidia-smi >/dev/null 2>&1; then
        step_end fail "nvidia-smi not found"; return
    fi
    local f v q=
    # One field at a time: a field this driver does not know fails only itself.
    for f in name driver_version memory.total pci.bus_id pcie.link.gen.current pcie.link.gen.max \
             pcie.link.width.current pcie.link.width.max clocks.max.sm power.limit; do
        v=$(timeout 10 nvidia-smi -i 0 --query-gpu="$f" --format=csv,noheader 2>/dev/null | head -n 1)
        case $v in ''|*"Field"*|*"not a valid"*) v=unknown ;; esac
        q+="$f=$v"$'\n'
        fig "$f" "$v"
    done
    note_cmd "nvidia-smi -i 0 --query-gpu=FIELD --format=csv,noheader   (FIELD: name, driver_version, memory.total, pci.bus_id, pcie.link.gen.current, pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max, clocks.max.sm, power.limit)"
    gpu_name=$(printf '%s' "$q" | sed -n 's/^name=//p')
    gpu_driver=$(printf '%s' "$q" | sed -n 's/^driver_version=//p')
    local bus numa=unknown
    bus=$(printf '%s' "$q" | sed -n 's/^pci.bus_id=//p' | tr 'A-F' 'a-f')
    bus=${bus: -12}
    [ -r "/sys/bus/pci/devices/$bus/numa_node" ] && numa=$(cat "/sys/bus/pci/devices/$bus/numa_node")
    fig numa_node "$numa (/sys/bus/pci/devices/$bus/numa_node)"
    note_cmd "cat /sys/bus/pci/devices/$bus/numa_node"
    run_cmd nvidia-smi.log "$(left)" nvidia-smi
    gpu_cuda=$(sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' "$work/nvidia-smi.log" | head -n 1)
    fig cuda_driver_api "${gpu_cuda:-unknown}"
    run_cmd nvidia-smi-q.log "$(left)" nvidia-smi -q -i 0
    if command -v nvcc >/dev/null 2>&1; then
        fig nvcc "$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
    fi
    if [ -z "$gpu_name" ] || [ "$gpu_name" = unknown ]; then
        step_end fail "nvidia-smi did not name the GPU"
    else
        step_end ok
    fi
}

step_tests() {
    step_begin tests 90 "every test program on the $([ -n "$simulated" ] && echo 'simulated' || echo 'real') GPU" ||
        { step_skipped; return; }
    local soak=10 jobs=1
    [ -n "$short" ] && soak=2 jobs=$(nproc 2>/dev/null || echo 2)
    local tests=() t all=0 src
    for t in "$root"/tests/test_*; do
        if [ ! -f "$t" ] || [ ! -x "$t" ]; then continue; fi
        all=$((all + 1))
        # The dry run keeps to the programs that use a device (make test runs them all anyway).
        src=tests/${t##*/}.c
        if [ -n "$short" ] && [ -f "$src" ] &&
           ! grep -q -E 'ft_require_cuda|ft_require_nvidia|ferry_cuda\(|"cuda' "$src"; then
            continue
        fi
        # MPI_Init needs an Open MPI installation (its plugins, orted), not only
        # the library the bundle brings: without mpirun, test_dist is the nccl step's.
        if [ "${t##*/}" = test_dist ] && ! command -v mpirun >/dev/null 2>&1; then
            fig not_run "test_dist: no MPI installation here (no mpirun); see the nccl step"
            continue
        fi
        tests+=("$t")
    done
    if [ ${#tests[@]} -eq 0 ]; then step_end fail "no test programs in $root/tests"; return; fi
    [ -z "$short" ] || [ "$all" = ${#tests[@]} ] || fig dry_run "the ${#tests[@]} of $all programs that use a device"
    # Parallel only in the dry run: on a real GPU the tests take what memory they find.
    local i=0 running=0
    for t in "${tests[@]}"; do
        ( in_bg=1 run_cmd "test-${t##*/}.log" "$(left)" FERRY_SOAK_SECONDS=$soak "$t" ) &
        running=$((running + 1)); i=$((i + 1))
        if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
    done
    wait
    local passed=0 failed=0 skipped=0 bad='' nodev='' last n reasons=
    for t in "${tests[@]}"; do
        n=${t##*/}
        collect "test-$n.log"
        last=$(tail -n 1 "$work/test-$n.log")
        case $last in
            *" passed, "*" failed, "*" skipped")
                # shellcheck disable=SC2086 # the summary's words
                set -- $last
                passed=$((passed + $1)); failed=$((failed + $3)); skipped=$((skipped + $5))
                [ "$3" = 0 ] || bad+="$n ($3 failed: $(grep '^FAIL ' "$work/test-$n.log" | cut -c7- | paste -sd, | sed 's/,/, /g')); "
                ;;
            *)
                failed=$((failed + 1))
                bad+="$n (exit $rc, no summary$([ "$rc" = 124 ] && echo ': timed out')); "
                ;;
        esac
        if grep -q 'no CUDA device' "$work/test-$n.log"; then
            nodev+="$n ($(grep -c 'no CUDA device' "$work/test-$n.log")), "
        fi
        reasons+=$(grep '^  skipped: ' "$work/test-$n.log" | sed "s/^  skipped: //; s/^/$n: /")$'\n'
    done
    fig programs "${#tests[@]}"
    fig passed "$passed"; fig failed "$failed"; fig skipped "$skipped"
    fig skip_reasons "$(printf '%s' "$reasons" | grep -v '^$' | sort | uniq -c | sed 's/^ *\([0-9]*\) \(.*\)/\2 (x\1)/' | paste -sd ';' | sed 's/;/; /g')"
    [ -n "$bad" ] && fig failing "${bad%; }"
    if [ -n "$bad" ]; then
        step_end fail "${bad%; }"
    elif [ -z "$simulated" ] && [ -n "$nodev" ]; then
        step_end fail "GPU tests skipped for lack of a device: ${nodev%, }"
    else
        step_end ok "$passed passed, $failed failed, $skipped skipped in ${#tests[@]} programs"
    fi
}

step_sanitizer() {
    step_begin sanitizer 100 "compute-sanitizer memcheck, racecheck, initcheck, synccheck over the GPU tests" ||
        { step_skipped; return; }
    local tests=(test_nn test_loader_gpu test_ops test_allocator test_pinned test_backend_ops)
    local tools=(memcheck racecheck initcheck synccheck)
    fig tests "${tests[*]}"; fig tools "${tools[*]}"
    if [ -n "$simulated" ]; then step_end skipped "simulated (compute-sanitizer needs a real GPU)"; return; fi
    local cs
    cs=$(command -v compute-sanitizer || { [ -x /usr/local/cuda/bin/compute-sanitizer ] && echo /usr/local/cuda/bin/compute-sanitizer; })
    if [ -z "$cs" ]; then step_end fail "compute-sanitizer not found"; return; fi
    # Lanes of runs in parallel; test_nn (it fills half the free device memory
    # on purpose) has a lane of its own. API errors are not counted: the tests
    # provoke them on purpose (out of memory, bad arguments) and check them.
    local lanes=6 lane k=0 t tool
    declare -A lane_runs=()
    for tool in "${tools[@]}"; do lane_runs[0]+="$tool test_nn "; done
    for t in "${tests[@]:1}"; do
        for tool in "${tools[@]}"; do
            lane=$((1 + k % (lanes - 1))); k=$((k + 1))
            lane_runs[$lane]+="$tool $t "
        done
    done
    for lane in "${!lane_runs[@]}"; do
        (
            # shellcheck disable=SC2086 # "tool test" pairs
            set -- ${lane_runs[$lane]}
            while [ $# -ge 2 ]; do
                in_bg=1 run_cmd "cs-$1-$2.log" "$(left)" "$cs" --tool "$1" --report-api-errors no \
                    --print-limit 20 "$root/tests/$2"
                shift 2
            done
        ) &
    done
    wait
    local bad='' errs warns total=0 summary res
    for tool in "${tools[@]}"; do
        res=
        for t in "${tests[@]}"; do
            if [ -f "$work/cs-$tool-$t.log.meta" ]; then collect "cs-$tool-$t.log"; else rc="not run"; fi
            # racecheck ends with "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)",
            # the others with "ERROR SUMMARY: E errors".
            errs=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p; s/.*RACECHECK SUMMARY: .*(\([0-9]*\) error.*/\1/p' \
                   "$work/cs-$tool-$t.log" 2>/dev/null | tail -n 1)
            warns=$(sed -n 's/.*RACECHECK SUMMARY: .*, \([0-9]*\) warning.*/\1/p' "$work/cs-$tool-$t.log" 2>/dev/null | tail -n 1)
            summary=$(grep -E '^[0-9]+ passed, ' "$work/cs-$tool-$t.log" 2>/dev/null | tail -n 1)
            if [ -z "$errs" ]; then
                bad+="$tool $t: no summary line (exit $rc$([ "$rc" = 124 ] && echo ', timed out')); "
                res+="$t ?, "
            else
                total=$((total + errs))
                [ "$errs" = 0 ] || bad+="$tool $t: $errs errors; "
                case $summary in *" 0 failed, "*) ;; *) bad+="$tool $t: the test failed under the sanitizer (${summary:-no summary}); " ;; esac
                res+="$t $errs${warns:+ ($warns warnings)}, "
            fi
        done
        fig "$tool" "${res%, }"
    done
    fig errors "$total"
    if [ -n "$bad" ]; then step_end fail "${bad%; }"; else step_end ok "0 errors in ${#tests[@]} x ${#tools[@]} runs"; fi
}

step_h2d() {
    step_begin h2d 20 "ferry bench h2d: pinned vs pageable copies, 4 KiB to 256 MiB" || { step_skipped; return; }
    local args=(--format json)
    [ -n "$simulated" ] && args+=(--max-mib 1 --reps 1)
    run_cmd h2d.log "$(left)" "$root/ferry" bench h2d "${args[@]}"
    local log=$work/h2d.log
    if [ "$rc" != 0 ]; then step_end fail "ferry bench h2d exited with $rc: $(tail -n 1 "$log")"; return; fi
    local rows; rows=$(grep -c '"direction":' "$log")
    fig rows "$rows"
    if grep -q '"gpu": false' "$log"; then
        step_end fail "no CUDA device: ferry bench h2d measured host memcpy only"; return
    fi
    if [ -n "$simulated" ]; then
        step_end skipped "simulated (bandwidth needs real hardware; the command ran and gave $rows rows)"; return
    fi
    row() { grep -F "\"direction\": \"$1\", \"memory\": \"$2\", \"mode\": \"$3\", \"bytes\": $4," "$log" | head -n 1; }
    local mib64=67108864 pin page_a page_s d2h best
    pin=$(jnum gb_per_s "$(row H2D pinned async $mib64)")
    page_a=$(jnum gb_per_s "$(row H2D pageable async $mib64)")
    page_s=$(jnum gb_per_s "$(row H2D pageable sync $mib64)")
    d2h=$(jnum gb_per_s "$(row D2H pinned async $mib64)")
    best=$(grep '"direction": "H2D"' "$log" | grep '"mode": "async"' | sed -n 's/.*"gb_per_s": *\([0-9.]*\).*/\1/p' | sort -g | tail -n 1)
    fig h2d_pinned_async_64MiB_GBps "${pin:-?}"
    fig h2d_pageable_async_64MiB_GBps "${page_a:-?}"
    fig h2d_pageable_sync_64MiB_GBps "${page_s:-?}"
    fig d2h_pinned_async_64MiB_GBps "${d2h:-?}"
    fig h2d_best_async_GBps "${best:-?}"
    fig h2d_pinned_256MiB_GBps "$(jnum gb_per_s "$(row H2D pinned async 268435456)")"
    if [ -z "$pin" ] || [ -z "$best" ]; then step_end fail "no pinned async H2D row at 64 MiB"; return; fi
    local frac; frac=$(calc %.3f "$pin / $best")
    fig pinned_vs_best "$frac"
    local why=
    ge "$pin" 50 || why+="pinned H2D at 64 MiB is $pin GB/s (< 50); "
    ge "$frac" 0.9 || why+="pinned H2D at 64 MiB is $frac of the best async copy (< 0.90); "
    if [ -n "$why" ]; then step_end fail "${why%; }"
    else step_end ok "pinned $pin GB/s at 64 MiB ($frac of the best async copy), pageable $page_a GB/s"; fi
}

# pipeline_figs LOG: the rows of `ferry bench --format json` as figures.
pipeline_figs() {
    local log=$1 base line w ips stall h2d ratio
    base=$(jnum images_per_s "$(grep '"baseline"' "$log")")
    [ -n "$base" ] && fig plain_libpng_1_thread_ips "$base"
    while IFS= read -r line; do
        w=$(jnum workers "$line"); ips=$(jnum images_per_s "$line")
        stall=$(jnum stall_pct "$line"); h2d=$(jnum h2d_gbps "$line")
        local key="workers_$w"
        case $line in *'"overlap":false'*) key+="_overlap_off" ;; esac
        ratio=
        [ -n "$base" ] && [ "$w" -gt 0 ] && ratio=$(calc %.2f "$ips / ($w * $base)")
        fig "$key" "$ips images/s, stall $stall %, H2D $h2d GB/s${ratio:+, $ratio x ($w x plain libpng)}$(case $line in *'"simulated":true'*) echo ' (simulated)' ;; esac)"
        last_ratio=$ratio last_ips=$ips
    done < <(grep '"workers":' "$log")
    fig digest "$(grep -o '"digest":"[0-9a-f]*"' "$log" | sort -u | cut -d'"' -f4 | paste -sd ' ')"
}

worker_list() {
    local n; n=$(nproc 2>/dev/null || echo 2)
    [ -n "$short" ] || [ -n "$simulated" ] && { echo 2; return; }
    if [ "$n" -ge 4 ]; then echo "1,$((n / 2)),$n"; else echo "1,$n"; fi
}

step_pipeline() {
    step_begin pipeline 35 "ferry bench on the Fashion-MNIST PNGs, all cores, against the plain libpng loop" ||
        { step_skipped; return; }
    if [ -z "$fashion" ]; then step_end skipped "$fashion_why"; return; fi
    local n epochs=3 batch=256
    n=$(nproc 2>/dev/null || echo 2)
    [ -n "$simulated" ] && epochs=1 batch=64
    run_cmd pipeline.log "$(left)" "$root/ferry" bench "$fashion/train" --workers "$(worker_list)" --batch $batch \
        --epochs $epochs --device cuda --pin on --baseline --format json
    local log=$work/pipeline.log last_ratio='' last_ips=''
    pipeline_figs "$log"
    if [ "$rc" != 0 ]; then step_end fail "ferry bench exited with $rc: $(grep -v '^{' "$log" | tail -n 1)"; return; fi
    if [ -n "$simulated" ]; then step_end ok "ran on the simulated GPU (figures mean nothing)"; return; fi
    local goal=met
    ge "${last_ratio:-0}" 0.9 || goal="not met"
    fig goal "with $n workers >= 0.9 x $n x the plain libpng rate: $goal"
    step_end ok "$last_ips images/s with $n workers, $last_ratio x $n x the plain libpng rate (goal 0.9: $goal)"
}

step_color() {
    step_begin color 35 "ferry bench on generated RGB PNGs at 224x224 with random crop and flip" ||
        { step_skipped; return; }
    local n lanes=16 per=64 k dir=$work/color epochs=5 batch=64
    # Kept beside the bundle's data in a real run (the commands in the report stay valid).
    [ -z "$short" ] && [ -d "$unpacked/data" ] && dir=$unpacked/data/color-256
    n=$(nproc 2>/dev/null || echo 2)
    [ -n "$simulated" ] && lanes=2 per=4 epochs=1 batch=4
    # The generator writes images 0..N-1 of a fixed sequence: the same set in each
    # class folder, generated in parallel.
    rm -rf "$dir"
    for ((k = 0; k < lanes; k++)); do
        ( in_bg=1 run_cmd "gen-$k.log" "$(left)" "$root/ferry" bench decode --generate "$(printf '%s/c%02d' "$dir" "$k")" "$per" ) &
    done
    wait
    local bad=
    for ((k = 0; k < lanes; k++)); do
        collect "gen-$k.log"
        [ "$rc" = 0 ] || bad="ferry bench decode --generate exited with $rc: $(tail -n 1 "$work/gen-$k.log")"
    done
    if [ -n "$bad" ]; then step_end fail "$bad"; return; fi
    fig images "$((lanes * per)) of 256x256x3 ($lanes class folders of the same $per)"
    fig transforms "decoded 256x256, center-cropped to 224x224, then a seeded random crop (pad 16) and left-right flip per sample (--size 224 --crop-pad 16 --flip)"
    run_cmd color.log "$(left)" "$root/ferry" bench "$dir" --workers "$(worker_list)" --batch $batch --epochs $epochs \
        --device cuda --pin on --baseline --size 224 --crop-pad 16 --flip --format json
    local log=$work/color.log last_ratio='' last_ips=''
    pipeline_figs "$log"
    if [ "$rc" != 0 ]; then step_end fail "ferry bench exited with $rc: $(grep -v '^{' "$log" | tail -n 1)"; return; fi
    if [ -n "$simulated" ]; then step_end ok "ran on the simulated GPU (figures mean nothing)"; return; fi
    step_end ok "$last_ips images/s with $n workers, $last_ratio x $n x the plain libpng rate"
}

step_overlap() {
    step_begin overlap 25 "ferry bench --overlap both --compute-ms X: loading hidden behind compute" ||
        { step_skipped; return; }
    if [ -z "$fashion" ]; then step_end skipped "$fashion_why"; return; fi
    local n x xs="1 2 5" res='' line
    n=$(nproc 2>/dev/null || echo 2)
    [ -n "$simulated" ] && xs=1 n=2
    for x in $xs; do
        run_cmd "overlap-$x.log" "$(left)" "$root/ferry" bench "$fashion/train" --workers "$n" --batch 256 --epochs 1 \
            --device cuda --overlap both --compute-ms "$x" --format json
        if [ "$rc" != 0 ]; then res+="compute $x ms: exit $rc; "; continue; fi
        local on off
        on=$(grep '"overlap":true' "$work/overlap-$x.log" | head -n 1)
        off=$(grep '"overlap":false' "$work/overlap-$x.log" | head -n 1)
        fig "compute_${x}ms" "overlap on $(jnum images_per_s "$on") images/s (stall $(jnum stall_pct "$on") %), off $(jnum images_per_s "$off") images/s (stall $(jnum stall_pct "$off") %)$([ -n "$simulated" ] && echo ' (simulated)')"
    done
    if [ -n "$res" ]; then step_end fail "${res%; }"
    elif [ -n "$simulated" ]; then step_end ok "ran on the simulated GPU (figures mean nothing)"
    else step_end ok; fi
}

# A python3 that imports all of MODULES (PyTorch's usually lives in python3).
find_python() {
    local py
    for py in python3 /usr/bin/python3; do
        command -v "$py" >/dev/null 2>&1 || continue
        if "$py" -c "import $1" >/dev/null 2>&1; then echo "$py"; return 0; fi
    done
    return 1
}

step_torch() {
    step_begin torch 55 "bench/compare_torch.py --device cuda: loader, MLP and CNN epochs against PyTorch" ||
        { step_skipped; return; }
    if [ -n "$simulated" ]; then step_end skipped "simulated (PyTorch needs a real GPU for --device cuda)"; return; fi
    if [ -z "$fashion" ]; then step_end skipped "$fashion_why"; return; fi
    local py
    if ! py=$(find_python "torch, torchvision, PIL"); then step_end skipped "torch (with torchvision and PIL) not importable"; return; fi
    fig torch "$("$py" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null)"
    if ! "$py" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' >/dev/null 2>&1; then
        step_end fail "PyTorch ($py) sees no CUDA device"; return
    fi
    local n what out bad=
    n=$(nproc 2>/dev/null || echo 2)
    for what in loader mlp cnn; do
        local extra=()
        [ "$what" != loader ] && extra=(--model "$what")
        run_cmd "torch-$what.log" "$(left)" PYTHONUNBUFFERED=1 "$py" bench/compare_torch.py "$fashion/train" \
            --device cuda --workers "$n" --batch 256 --ferry "$root/ferry" --json "${extra[@]}"
        out=$(grep '^{' "$work/torch-$what.log" | tail -n 1)
        if [ "$rc" != 0 ] || [ -z "$out" ]; then bad+="$what: exit $rc; "; continue; fi
        if [ $what = loader ]; then
            fig loader "ferry $(calc %.0f "$(jnum images_per_s "${out#*\"ferry\"}")") images/s, PyTorch $(calc %.0f "$(jnum images_per_s "${out#*\"torch\"}")") images/s, ratio $(calc %.2f "$(jnum ratio "$out")")"
        else
            fig "$what" "ferry $(calc %.0f "$(jnum ferry_images_per_s "$out")") images/s, PyTorch $(calc %.0f "$(jnum images_per_s "${out#*\"torch\"}")") images/s, ratio $(calc %.2f "$(jnum ratio "$out")") (one training epoch)"
        fi
    done
    if [ -n "$bad" ]; then step_end fail "${bad%; }"; else step_end ok; fi
}

# step_train NAME CAP AMP
step_train() {
    local name=$1 amp=$2
    step_begin "$name" "$3" "train_gray --model cnn --device cuda${amp:+ --amp}: test accuracy >= 0.915, epoch time" ||
        { step_skipped; return; }
    if [ -z "$fashion" ]; then step_end skipped "$fashion_why"; return; fi
    local epochs=${FERRY_GPU_CHECK_EPOCHS:-10} workers=4 args=()
    [ -n "$simulated" ] && epochs=1 workers=2
    [ -n "$amp" ] && args+=(--amp)
    local ck=$work/$name.safetensors
    run_cmd "$name.log" "$(left)" "$root/samples/train_gray" --data "$fashion" --model cnn --device cuda \
        --epochs "$epochs" --workers "$workers" --seed 0 --out "$work/$name" --save "$ck" ${args[@]+"${args[@]}"}
    local log=$work/$name.log acc ntrain eps
    acc=$(sed -n 's/^test accuracy: //p' "$log")
    ntrain=$(sed -n 's/^data: \([0-9]*\) train.*/\1/p' "$log")
    # Epoch lines: epoch, train loss, train acc, val loss, val acc, stall, images/s.
    eps=$(awk 'NF == 7 && $1 ~ /^[0-9]+$/ { print $1, $7, $6 }' "$log")
    fig device "$(sed -n 's/^device: //p' "$log")"
    fig epochs_done "$(printf '%s\n' "$eps" | grep -c .)"
    if [ -n "$eps" ] && [ -n "$ntrain" ]; then
        fig epoch_seconds "$(printf '%s\n' "$eps" | awk -v n="$ntrain" '{ printf "%s%.2f", (NR > 1 ? " " : ""), n / $2 }')"
        fig train_images_per_s "$(printf '%s\n' "$eps" | awk '{ printf "%s%s", (NR > 1 ? " " : ""), $2 }')"
        fig mean_epoch_s_after_first "$(printf '%s\n' "$eps" | awk -v n="$ntrain" 'NR > 1 { s += n / $2; k++ } END { if (k) printf "%.2f", s / k; else print "-" }')"
    fi
    fig test_accuracy "${acc:-none}"
    [ -f "$ck" ] && [ -z "$amp" ] && checkpoint=$ck
    if [ "$rc" != 0 ]; then
        step_end fail "train_gray exited with $rc$([ "$rc" = 124 ] && echo ' (timed out)'): $(tail -n 1 "$log")"
    elif [ -z "$acc" ]; then
        step_end fail "no test accuracy line"
    elif [ -n "$simulated" ]; then
        step_end ok "ran on the simulated GPU, tiny data (accuracy $acc not checked)"
    elif ge "$acc" 0.915; then
        step_end ok "test accuracy $acc (goal 0.915)"
    else
        step_end fail "test accuracy $acc < 0.915"
    fi
}

step_nccl() {
    step_begin nccl 20 "NCCL: test_dist under mpirun, bench/dist_overhead.sh --device cuda" || { step_skipped; return; }
    if [ -n "$simulated" ]; then step_end skipped "simulated (NCCL needs NVIDIA hardware)"; return; fi
    case $ferry_dist in *NCCL*) ;; *) step_end skipped "built without NCCL (${ferry_dist:-unknown})"; return ;; esac
    if ! command -v mpirun >/dev/null 2>&1; then step_end skipped "no mpirun"; return; fi
    local mpi=(mpirun -np 1 --oversubscribe)
    [ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
    local bad=
    run_cmd nccl-test.log "$(left)" "${mpi[@]}" "$root/tests/test_dist"
    local sum; sum=$(grep -E '^[0-9]+ passed, ' "$work/nccl-test.log" | tail -n 1)
    fig test_dist "${sum:-no summary (exit $rc)}"
    if grep -q -A1 'skipped:.*\(NCCL\|NVIDIA\)' "$work/nccl-test.log"; then
        bad+="the NCCL test skipped: $(grep -m1 'skipped:' "$work/nccl-test.log" | sed 's/^ *//'); "
    fi
    case $sum in *" 0 failed, "*) [ "$rc" = 0 ] || bad+="test_dist exited with $rc; " ;; *) bad+="test_dist: ${sum:-exit $rc}; " ;; esac
    if [ -n "$fashion" ]; then
        run_cmd nccl-overhead.log "$(left)" FERRY_BUILD="$root" sh bench/dist_overhead.sh --device cuda --runs 1 \
            --data "$fashion" --limit 16384 --workers 4
        if [ "$rc" = 0 ]; then
            fig dist_overhead "$(grep -E '^(without|with|overhead)' "$work/nccl-overhead.log" | paste -sd ';' | sed 's/;/; /g')"
            fig backend "$(grep -m1 '^distributed:' "$work/nccl-overhead.log")"
        else
            bad+="dist_overhead.sh exited with $rc; "
        fi
    fi
    if [ -n "$bad" ]; then step_end fail "${bad%; }"; else step_end ok; fi
}

step_safetensors() {
    step_begin safetensors 20 "PyTorch loads a ferry checkpoint (safetensors) and gives the same logits" ||
        { step_skipped; return; }
    local py reader=safetensors
    if [ -n "$simulated" ]; then
        # The dry run checks the helper with whatever PyTorch is at hand; the
        # safetensors package is optional there (the helper reads the format itself).
        if ! py=$(find_python torch); then step_end skipped "torch not importable"; return; fi
        "$py" -c 'import safetensors' >/dev/null 2>&1 || reader=builtin
    elif ! py=$(find_python "torch, safetensors"); then
        step_end skipped "torch and safetensors not importable"; return
    fi
    if [ ! -f "$root/libferry.so" ]; then step_end fail "no $root/libferry.so (the helper calls it through ctypes)"; return; fi
    if [ -z "$checkpoint" ]; then
        if [ -z "$fashion" ]; then step_end skipped "no checkpoint and $fashion_why"; return; fi
        checkpoint=$work/ck.safetensors
        run_cmd ck.log "$(left)" "$root/samples/train_gray" --data "$fashion" --model cnn --device cuda --epochs 1 \
            --limit 2048 --workers 2 --out "$work/ck" --save "$checkpoint"
        [ "$rc" = 0 ] || { step_end fail "train_gray --save exited with $rc"; return; }
    fi
    run_cmd safetensors.log "$(left)" PYTHONUNBUFFERED=1 "$py" bench/check_safetensors.py "$checkpoint" \
        --lib "$root/libferry.so" --device cuda --reader $reader --json
    local out; out=$(grep '^{' "$work/safetensors.log" | tail -n 1)
    local k
    for k in model reader torch_device max_abs_diff rel_diff argmax_agree batch; do
        local v; v=$(jstr "$k" "$out"); [ -n "$v" ] || v=$(jnum "$k" "$out")
        [ -n "$v" ] && fig "$k" "$v"
    done
    local verdict; verdict=$(jstr verdict "$out")
    if [ "$rc" = 0 ] && [ -n "$out" ]; then
        step_end ok "$verdict"
    else
        step_end fail "${verdict:-exit $rc: $(tail -n 1 "$work/safetensors.log")}"
    fi
}

# ---- the report ----

jesc() {
    local s=$1
    s=${s//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\t'/\\t}; s=${s//$'\n'/\\n}; s=${s//$'\r'/}
    printf '%s' "$s" | tr -d '\000-\010\013\014\016-\037'
}
jval() { # a number stays a number
    if printf '%s' "$1" | grep -Eq '^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$'; then printf '%s' "$1"
    else printf '"%s"' "$(jesc "$1")"; fi
}
mdesc() { printf '%s' "$1" | sed 's/|/\\|/g'; }

write_reports() {
    local total i nok=0 nfail=0 nskip=0
    total=$(secs_since "$t_start")
    for i in "${!S_NAME[@]}"; do
        case ${S_STATUS[i]} in ok) nok=$((nok + 1)) ;; fail) nfail=$((nfail + 1)) ;; *) nskip=$((nskip + 1)) ;; esac
    done
    local mode device
    if [ -n "$simulated" ]; then
        mode="simulated GPU (FERRY_SIM_GPUS=$FERRY_SIM_GPUS)$([ -n "$dry" ] && echo ', dry run (short limits)')"
        device="${ferry_device:-none} (simulated)"
    else
        mode="real GPU"
        device=${gpu_name:-${ferry_device:-unknown}}
    fi
    local driver=${gpu_driver:-}${gpu_cuda:+ (CUDA $gpu_cuda)}
    [ -n "$driver" ] || driver=$([ -n "$simulated" ] && echo "none (simulated)" || echo unknown)
    local host cpu
    host=$(hostname 2>/dev/null || echo unknown)
    cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores"
    local date; date=$(date -u '+%Y-%m-%d %H:%M UTC')

    {
        printf '{\n'
        printf '  "date": "%s",\n' "$date"
        printf '  "mode": "%s",\n' "$([ -n "$simulated" ] && echo simulated || echo real)"
        printf '  "dry_run": %s,\n' "$([ -n "$dry" ] && echo true || echo false)"
        printf '  "device": "%s",\n' "$(jesc "$device")"
        printf '  "driver": "%s",\n' "$(jesc "$driver")"
        printf '  "host": "%s",\n' "$(jesc "$host; $cpu")"
        printf '  "ferry": "%s",\n' "$(jesc "${ferry_version:-?}; ${ferry_build:-?}; ${ferry_dist:-?}")"
        printf '  "bundle": "%s",\n' "$(jesc "$bundle_note")"
        printf '  "libraries": "%s",\n' "$(jesc "${libs_note:-system}${libs_missing:+; still missing: $libs_missing}")"
        printf '  "command": "%s",\n' "$(jesc "$invocation")"
        printf '  "seconds": %s,\n' "$total"
        printf '  "summary": {"ok": %d, "fail": %d, "skipped": %d},\n' "$nok" "$nfail" "$nskip"
        printf '  "steps": [\n'
        for i in "${!S_NAME[@]}"; do
            local figs='' k v cmds=''
            while IFS=$'\t' read -r k v; do
                [ -n "$k" ] && figs+="\"$(jesc "$k")\": $(jval "$v"), "
            done <<< "${S_FIG[i]}"
            while IFS= read -r v; do [ -n "$v" ] && cmds+="\"$(jesc "$v")\", "; done <<< "${S_CMDS[i]}"
            printf '    {"name": "%s", "status": "%s", "reason": "%s", "seconds": %s, "title": "%s", "figures": {%s}, "commands": [%s]}%s\n' \
                "${S_NAME[i]}" "${S_STATUS[i]}" "$(jesc "${S_REASON[i]}")" "${S_SECS[i]}" "$(jesc "${S_TITLE[i]}")" \
                "${figs%, }" "${cmds%, }" "$([ "$i" -lt $((${#S_NAME[@]} - 1)) ] && echo ,)"
        done
        printf '  ]\n}\n'
    } > "$outdir/report.json"

    {
        echo "# ferry gpu-check"
        echo
        echo "- Date: $date"
        echo "- Device: $device; driver: $driver"
        echo "- Mode: $mode"
        echo "- Host: $host, $cpu"
        echo "- ferry: ${ferry_version:-?}; build: ${ferry_build:-?}; distributed: ${ferry_dist:-?}"
        echo "- Bundle: $bundle_note"
        echo "- Libraries: ${libs_note:-all found on the system}${libs_missing:+; still missing: $libs_missing}"
        echo "- Command: \`$invocation\`"
        echo "- Result: $nok ok, $nfail failed, $nskip skipped in ${total} s (each command's output: logs.txt)"
        echo
        echo "| step | status | s | key figures |"
        echo "|---|---|---|---|"
        for i in "${!S_NAME[@]}"; do
            local key=${S_REASON[i]}
            [ -n "$key" ] || key=$(printf '%s' "${S_FIG[i]}" | head -n 3 | sed 's/\t/: /' | paste -sd ';' | sed 's/;/; /g')
            echo "| ${S_NAME[i]} | ${S_STATUS[i]} | ${S_SECS[i]} | $(mdesc "$key") |"
        done
        for i in "${!S_NAME[@]}"; do
            echo
            echo "## ${S_NAME[i]}: ${S_STATUS[i]}"
            echo
            echo "${S_TITLE[i]}. ${S_SECS[i]} s.${S_REASON[i]:+ ${S_STATUS[i]^}: ${S_REASON[i]}}"
            if [ -n "${S_FIG[i]}" ]; then
                echo
                printf '%s' "${S_FIG[i]}" | while IFS=$'\t' read -r k v; do [ -n "$k" ] && echo "- $k: $v"; done
            fi
            if [ -n "${S_CMDS[i]}" ]; then
                echo
                echo '```sh'
                printf '%s' "${S_CMDS[i]}"
                echo '```'
            fi
        done
    } > "$outdir/report.md"
    echo "gpu-check: $nok ok, $nfail failed, $nskip skipped in ${total} s: $outdir/report.md, $outdir/report.json, $outdir/logs.txt" >&2
}

run_main() {
    outdir='' build='' dry='' only='' skip_list=''
    invocation="scripts/gpu-check.sh run $*"
    while [ $# -gt 0 ]; do
        case $1 in
            --dry-run) dry=1 ;;
            --only) only=$2; shift ;;
            --skip) skip_list=$2; shift ;;
            -h|--help) usage ;;
            -*) echo "gpu-check: unknown option $1" >&2; usage ;;
            *) if [ -z "$outdir" ]; then outdir=$1; elif [ -z "$build" ]; then build=$1; else usage; fi ;;
        esac
        shift
    done
    [ -n "$outdir" ] || usage
    [ -n "${FERRY_GPU_CHECK_DRY_RUN:-}" ] && [ "${FERRY_GPU_CHECK_DRY_RUN}" != 0 ] && dry=1
    if [ -z "$build" ]; then
        if [ -f build/gpu/gpu-check/ferry.tar.xz ]; then build=build/gpu; else build=build; fi
    fi
    build=${build%/}
    t_start=$(nowf)
    budget=${FERRY_GPU_CHECK_BUDGET:-525}
    deadline=$(( ${t_start%.*} + budget ))

    simulated='' short=''
    if [ -n "$dry" ]; then export FERRY_SIM_GPUS=${FERRY_SIM_GPUS:-1}; [ "$FERRY_SIM_GPUS" != 0 ] || FERRY_SIM_GPUS=1; short=1; fi
    if [ -n "${FERRY_SIM_GPUS:-}" ] && [ "$FERRY_SIM_GPUS" != 0 ]; then
        simulated=1; export FERRY_SIM_GPUS
    else
        unset FERRY_SIM_GPUS
    fi

    mkdir -p "$outdir" || die "cannot create $outdir"
    rm -f "$outdir/report.md" "$outdir/report.json" "$outdir/logs.txt"
    : > "$outdir/logs.txt"
    work=$(mktemp -d "${TMPDIR:-/tmp}/ferry-gpu-check-XXXXXX") || die "mktemp failed"
    trap 'rm -rf "$work"' EXIT

    stage=$build/gpu-check unpacked=$build/gpu-check-run
    bundle_note=
    if [ -f "$stage/ferry.tar.xz" ]; then
        unpack "$stage/ferry.tar.xz" "$unpacked/root" || die "cannot unpack $stage/ferry.tar.xz"
        root=$unpacked/root
        bundle_note="$stage/ferry.tar.xz: $(sed -n 's/^\(git\|date\|build\)=//p' "$root/MANIFEST" | paste -sd ';' | sed 's/;/; /g')"
    elif [ -x "$build/ferry" ]; then
        root=$build
        bundle_note="none: the programs of $build as built"
    else
        die "no $stage/ferry.tar.xz and no $build/ferry: run scripts/gpu-check.sh prepare $build first"
    fi
    # The tests find their data (tests/fuzz/corpus) through the source folder
    # compiled into them; on a machine where the checkout lives elsewhere, a link
    # from there (root only, and only where nothing is).
    local srcdir
    srcdir=$(sed -n 's/^srcdir=//p' "$root/MANIFEST" 2>/dev/null)
    if [ -n "$srcdir" ] && [ "$srcdir" != "$repo" ] && [ ! -e "$srcdir" ] && [ "$(id -u)" = 0 ] &&
       [ -z "${FERRY_GPU_CHECK_NO_LINK:-}" ]; then
        mkdir -p "$(dirname "$srcdir")" && ln -s "$repo" "$srcdir" && bundle_note+="; linked $srcdir -> $repo (the tests' compiled-in source folder)"
    fi
    libs_note='' libs_missing=''
    resolve_libs
    ferry_version='' ferry_build='' ferry_dist='' ferry_device='' gpu_name='' gpu_driver='' gpu_cuda='' checkpoint=''
    find_fashion

    step_info
    step_gpu
    step_tests
    step_sanitizer
    step_h2d
    step_pipeline
    step_color
    step_overlap
    step_torch
    step_train train "" 60
    step_train train-amp 1 40
    step_nccl
    step_safetensors
    write_reports
    local i
    for i in "${!S_STATUS[@]}"; do [ "${S_STATUS[i]}" != fail ] || return 1; done
    return 0
}

case ${1:-} in
    prepare) shift; prepare "$@" ;;
    run) shift; run_main "$@" ;;
    *) usage ;;
esac
