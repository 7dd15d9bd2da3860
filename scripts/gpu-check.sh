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
# tool, the tests, the samples, libferry.so and libferry-train.so, debug info stripped, with the
# shared libraries they use that a bare machine may lack: OpenBLAS, Open MPI, ...)
# and fashion-mnist.tar.xz (`ferry export fashion-mnist`, 70000 PNGs). It prints
# the carry list (that one folder, well under the 64 MiB a call may carry) and the
# command to run there.
#
# run executes the steps below, each under its own time limit and all within
# FERRY_GPU_CHECK_BUDGET seconds (default 525: the whole run ends within 9
# minutes), goes on past a failing step, and writes OUTDIR/report.md,
# OUTDIR/report.json and OUTDIR/logs.txt (every command's output; three files,
# so that a device call can bring them all back from $OUT). The shell runs the
# programs; scripts/gpu_report.py (python3, standard library only) reads what
# each step leaves and writes the figures, the verdicts and the two reports:
#   info         ferry info
#   gpu          nvidia-smi: name, driver, PCIe link, NUMA node
#   tests        every BUILD/tests/test_* (a GPU test skipped for "no CUDA device" fails it)
#   sanitizer    compute-sanitizer memcheck, racecheck, initcheck, synccheck over the GPU tests
#   kernels      tests/test_backend_ops timed on cuda:0 (FERRY_BACKEND_OPS_TIME): against the peak
#   h2d          ferry bench h2d: pinned H2D at 64 MiB >= 50 GB/s and >= 90 % of the best async copy
#   pipeline     ferry bench on the Fashion-MNIST PNGs, all cores, against the plain libpng rate
#   color        ferry bench on a generated RGB set, 224x224 with random crop and flip
#   overlap      ferry bench --overlap both --compute-ms X
#   torch        bench/compare_torch.py --device cuda: loader, MLP and CNN epochs
#   step         samples/bench_step (the CNN step alone, eager and --graph, batch 128
#                and 256) and bench/step_torch.py (the same step in PyTorch, eager and
#                torch.compile) when torch has CUDA: ms per step, graph against eager
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
    local so l
    for l in libferry libferry-train; do
        # The file the link points at: an older version's file may lie beside it.
        so=$(readlink -f "$build/$l.so" 2>/dev/null) && so=${so##*/}
        if [ -n "$so" ] && [ -f "$build/$so" ]; then
            strip --strip-debug -o "$pack/$so" "$build/$so" && bins+=("$build/$so")
            cp -P "$build/$l.so" "$build/$l".so.[0-9] "$pack/" 2>/dev/null
        fi
    done
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

# Each step leaves its record in $work/steps/NN-NAME (key=value lines: its title,
# the status and reason where the shell decides them, seconds, each command as
# cmd=LOG<tab>EXIT<tab>SECONDS<tab>COMMAND, fact.KEY=VALUE for what no log holds)
# and each command's output in $work/LOG; scripts/gpu_report.py reads them: the
# figures, the verdicts that depend on them, report.md and report.json.
nstep=0 rec='' step_name='' step_t0=0 step_deadline=0

want_step() {
    local n=$1
    if [ -n "$only" ]; then case ",$only," in *",$n,"*) ;; *) return 1 ;; esac; fi
    case ",$skip_list," in *",$n,"*) return 1 ;; esac
    return 0
}
put() { printf '%s=%s\n' "$1" "${2//$'\n'/ }" >> "$rec"; }
fact() { put "fact.$1" "$2"; }
report() { python3 "$repo/scripts/gpu_report.py" "$@"; }

# begin NAME CAP TITLE: 1 (and the step recorded as skipped) when the step was
# not asked for or no time is left.
begin() {
    nstep=$((nstep + 1)) step_name=$1 step_t0=$(nowf)
    rec=$(printf '%s/steps/%02d-%s' "$work" "$nstep" "$1")
    put name "$1"; put title "$3"
    local t why=''; t=$(now)
    # The dry run's programs share two simulated lanes with make test's other
    # work: its caps are twice a GPU's (the run's budget still bounds them).
    local scale=1; [ -z "$short" ] || scale=2
    step_deadline=$((t + $2 * scale))
    [ "$step_deadline" -le "$deadline" ] || step_deadline=$deadline
    echo "== $1: $3" >&2
    if ! want_step "$1"; then
        why="not asked for (--only/--skip)"
    elif [ $((step_deadline - t)) -lt 3 ]; then
        why="out of time: the run's budget of ${budget} s is spent"
    else
        put started 1; return 0
    fi
    put status skipped; put reason "$why"; put seconds 0.0
    report line "$rec"
    return 1
}
# end [STATUS REASON]: without a status, gpu_report.py judges the step by its logs.
end() {
    [ $# -eq 0 ] || { put status "$1"; put reason "${2:-}"; }
    put seconds "$(secs_since "$step_t0")"
    report line "$rec"
}
left() { local l=$((step_deadline - $(now))); [ "$l" -gt 1 ] && echo "$l" || echo 1; }
# share N: the step's time left over N runs still to come (at least 1 s).
share() { local l; l=$(left); [ $((l / $1)) -gt 1 ] && echo $((l / $1)) || echo 1; }

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
    put cmd "$1"$'\t'"$rc"$'\t'"$secs"$'\t'"$shown"
    log_append "$1" "$shown" "$rc" "$secs"
}
log_append() {
    local f=$work/$1 lines
    {
        printf '\n===== [%s] %s\n===== exit %s, %s s%s\n' "$step_name" "$2" "$3" "$4" \
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
note_cmd() { put cmd $'\t\t\t'"$1"; }

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
    for p in "$root/ferry" "$root"/tests/test_* "$root"/samples/* "$root/libferry.so" "$root/libferry-train.so"; do
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
    begin info 10 "ferry info: version, build, devices, pinned memory" || return 0
    run_cmd info.log "$(left)" "$root/ferry" info
    ferry_dist=$(sed -n 's/^distributed: //p' "$work/info.log")
    # The host's topology, so the loader's figure at 16 workers reads against
    # physical cores, not hardware threads (issue 41).
    local k v
    if command -v lscpu >/dev/null 2>&1; then
        for k in "Thread(s) per core:threads_per_core" "Core(s) per socket:cores_per_socket" \
            "Socket(s):sockets" "NUMA node(s):numa_nodes"; do
            v=$(LC_ALL=C lscpu 2>/dev/null | sed -n "s/^${k%%:*}:[[:space:]]*//p" | head -n 1)
            fact "cpu_${k##*:}" "${v:-unknown}"
        done
        note_cmd "LC_ALL=C lscpu"
    fi
    end
}

step_gpu() {
    begin gpu 15 "nvidia-smi: name, driver, PCIe link, NUMA node; the host" || return 0
    if [ -n "$simulated" ]; then end skipped "simulated (nvidia-smi reads real hardware)"; return; fi
    if ! command -v nvidia-smi >/dev/null 2>&1; then end fail "nvidia-smi not found"; return; fi
    local f v bus='' numa=unknown fields=(name driver_version memory.total pci.bus_id pcie.link.gen.current
        pcie.link.gen.max pcie.link.width.current pcie.link.width.max clocks.max.sm power.limit)
    # One field at a time: a field this driver does not know fails only itself.
    for f in "${fields[@]}"; do
        v=$(timeout 10 nvidia-smi -i 0 --query-gpu="$f" --format=csv,noheader 2>/dev/null | head -n 1)
        case $v in ''|*"Field"*|*"not a valid"*) v=unknown ;; esac
        fact "$f" "$v"
        [ "$f" != pci.bus_id ] || bus=$(printf '%s' "$v" | tr 'A-F' 'a-f')
    done
    f="${fields[*]}"
    note_cmd "nvidia-smi -i 0 --query-gpu=FIELD --format=csv,noheader   (FIELD: ${f// /, })"
    bus=${bus: -12}
    [ -r "/sys/bus/pci/devices/$bus/numa_node" ] && numa=$(cat "/sys/bus/pci/devices/$bus/numa_node")
    fact numa_node "$numa (/sys/bus/pci/devices/$bus/numa_node)"
    note_cmd "cat /sys/bus/pci/devices/$bus/numa_node"
    run_cmd nvidia-smi.log "$(left)" nvidia-smi
    run_cmd nvidia-smi-q.log "$(left)" nvidia-smi -q -i 0
    if command -v nvcc >/dev/null 2>&1; then
        fact nvcc "$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
    fi
    end
}

step_tests() {
    begin tests 90 "every test program on the $([ -n "$simulated" ] && echo 'simulated' || echo 'real') GPU" ||
        return 0
    local soak=10 jobs=1
    [ -n "$short" ] && soak=2 jobs=$(nproc 2>/dev/null || echo 2)
    local tests=() t all=0 src running=0
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
            fact not_run "test_dist: no MPI installation here (no mpirun); see the nccl step"
            continue
        fi
        tests+=("$t")
    done
    if [ ${#tests[@]} -eq 0 ]; then end fail "no test programs in $root/tests"; return; fi
    [ -z "$short" ] || [ "$all" = ${#tests[@]} ] || fact dry_run "the ${#tests[@]} of $all programs that use a device"
    # Parallel only in the dry run: on a real GPU the tests take what memory they find.
    for t in "${tests[@]}"; do
        ( in_bg=1 run_cmd "test-${t##*/}.log" "$(left)" FERRY_SOAK_SECONDS=$soak "$t" ) &
        running=$((running + 1))
        if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
    done
    wait
    for t in "${tests[@]}"; do collect "test-${t##*/}.log"; done
    end
}

step_sanitizer() {
    begin sanitizer 115 "compute-sanitizer memcheck, racecheck, initcheck, synccheck over the GPU tests" || return 0
    local tests=(test_nn test_loader_gpu test_ops test_allocator test_pinned test_backend_ops)
    local tools=(memcheck racecheck initcheck synccheck)
    # The two heavy programs run the cases that launch kernels and end in
    # seconds (test names as the harness's filter arguments): test_nn's AMP
    # and out-of-memory cases and test_ops' threaded cuBLAS case took the whole
    # step under memcheck and racecheck alone. initcheck leaves out the f16
    # matmul: cuBLAS's sm_90 kernels write its output in a way initcheck does
    # not track (748 reports on values the test checks against the CPU;
    # docs/BENCHMARKS.md, section GPU); memcheck and racecheck still run it.
    declare -A cases=([test_nn]="mlp_overfits_one_batch_cuda cuda_layers_match_cpu to_device_round_trip"
                      [test_ops]="cuda_elementwise cuda_reductions cuda_matmul_matches cuda_rand cuda_copy"
                      [initcheck:test_ops]="cuda_elementwise cuda_reductions cuda_rand cuda_copy")
    fact tests "${tests[*]}"; fact tools "${tools[*]}"
    fact cases "test_nn: ${cases[test_nn]}; test_ops: ${cases[test_ops]} (initcheck: ${cases[initcheck:test_ops]}); the others: all"
    if [ -n "$simulated" ]; then end skipped "simulated (compute-sanitizer needs a real GPU)"; return; fi
    local cs
    cs=$(command -v compute-sanitizer || { [ -x /usr/local/cuda/bin/compute-sanitizer ] && echo /usr/local/cuda/bin/compute-sanitizer; })
    if [ -z "$cs" ]; then end fail "compute-sanitizer not found"; return; fi
    # Lanes of runs in parallel, by the last H200 run's times: racecheck of
    # test_loader_gpu (96 s) and each tool over test_backend_ops (34-56 s) have
    # a lane each; the quick runs share. Each run gets the lane's time left over
    # the runs left in it, so a slow run cannot starve the ones after it. API
    # errors are not counted: the tests provoke them on purpose (out of memory,
    # bad arguments) and check them.
    local lane l t tool
    local -a lane_runs=()
    for t in test_nn test_ops; do
        l=''; for tool in "${tools[@]}"; do l+="$tool $t "; done; lane_runs+=("$l")
    done
    lane_runs+=("racecheck test_loader_gpu" "memcheck test_loader_gpu initcheck test_loader_gpu synccheck test_loader_gpu")
    for tool in "${tools[@]}"; do lane_runs+=("$tool test_backend_ops"); done
    l=''; for t in test_allocator test_pinned; do for tool in "${tools[@]}"; do l+="$tool $t "; done; done
    lane_runs+=("$l")
    for lane in "${!lane_runs[@]}"; do
        (
            # shellcheck disable=SC2086 # "tool test" pairs; the case names
            set -- ${lane_runs[$lane]}
            while [ $# -ge 2 ]; do
                # shellcheck disable=SC2086 # the case names, one word each
                in_bg=1 run_cmd "cs-$1-$2.log" "$(share $(($# / 2)))" "$cs" --tool "$1" --report-api-errors no \
                    --print-limit 20 "$root/tests/$2" ${cases[$1:$2]:-${cases[$2]:-}}
                shift 2
            done
        ) &
    done
    wait
    for tool in "${tools[@]}"; do
        for t in "${tests[@]}"; do [ ! -f "$work/cs-$tool-$t.log.meta" ] || collect "cs-$tool-$t.log"; done
    done
    end
}

step_kernels() {
    begin kernels 25 "FERRY_BACKEND_OPS_TIME tests/test_backend_ops on cuda:0: kernel time, GB/s, FLOP/s" || return 0
    local runs=20 only=()
    # The simulated GPU's times mean nothing: there the step checks itself on two kernels.
    [ -n "$simulated" ] && runs=1 only=(backend_ops_gemm backend_ops_binary)
    fact runs "$runs"
    command -v nvidia-smi >/dev/null 2>&1 && [ -z "$simulated" ] &&
        fact gpu "$(nvidia-smi -i 0 --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
    run_cmd kernels.log "$(left)" FERRY_BACKEND_OPS_TIME=$runs FERRY_BACKEND_OPS_TIME_DEVICE=cuda:0 \
        "$root/tests/test_backend_ops" ${only[@]+"${only[@]}"}
    end
}

step_h2d() {
    begin h2d 20 "ferry bench h2d: pinned vs pageable copies, 4 KiB to 256 MiB" || return 0
    local args=(--format json)
    [ -n "$simulated" ] && args+=(--max-mib 1 --reps 1)
    run_cmd h2d.log "$(left)" "$root/ferry" bench h2d "${args[@]}"
    end
}

worker_list() {
    local n; n=$(nproc 2>/dev/null || echo 2)
    [ -n "$short" ] || [ -n "$simulated" ] && { echo 2; return; }
    if [ "$n" -ge 4 ]; then echo "1,$((n / 2)),$n"; else echo "1,$n"; fi
}

step_pipeline() {
    begin pipeline 35 "ferry bench on the Fashion-MNIST PNGs, all cores, against the plain libpng loop" || return 0
    if [ -z "$fashion" ]; then end skipped "$fashion_why"; return; fi
    local epochs=3 batch=256
    [ -n "$simulated" ] && epochs=1 batch=64
    run_cmd pipeline.log "$(left)" "$root/ferry" bench "$fashion/train" --workers "$(worker_list)" --batch $batch \
        --epochs $epochs --device cuda --pin on --baseline --format json
    end
}

step_color() {
    begin color 35 "ferry bench on generated RGB PNGs at 224x224 with random crop and flip" || return 0
    local lanes=16 per=64 k dir=$work/color epochs=5 batch=64 bad=
    # Kept beside the bundle's data in a real run (the commands in the report stay valid).
    [ -z "$short" ] && [ -d "$unpacked/data" ] && dir=$unpacked/data/color-256
    [ -n "$simulated" ] && lanes=2 per=4 epochs=1 batch=4
    fact lanes "$lanes"; fact per "$per"
    # The generator writes images 0..N-1 of a fixed sequence: the same set in each
    # class folder, generated in parallel.
    rm -rf "$dir"
    for ((k = 0; k < lanes; k++)); do
        ( in_bg=1 run_cmd "gen-$k.log" "$(left)" "$root/ferry" bench decode --generate "$(printf '%s/c%02d' "$dir" "$k")" "$per" ) &
    done
    wait
    for ((k = 0; k < lanes; k++)); do
        collect "gen-$k.log"
        [ "$rc" = 0 ] || bad="ferry bench decode --generate exited with $rc: $(tail -n 1 "$work/gen-$k.log")"
    done
    if [ -n "$bad" ]; then end fail "$bad"; return; fi
    run_cmd color.log "$(left)" "$root/ferry" bench "$dir" --workers "$(worker_list)" --batch $batch --epochs $epochs \
        --device cuda --pin on --baseline --size 224 --crop-pad 16 --flip --format json
    end
}

step_overlap() {
    begin overlap 25 "ferry bench --overlap both --compute-ms X: loading hidden behind compute" || return 0
    if [ -z "$fashion" ]; then end skipped "$fashion_why"; return; fi
    local n x xs="1 2 5"
    n=$(nproc 2>/dev/null || echo 2)
    [ -n "$simulated" ] && xs=1 n=2
    for x in $xs; do
        run_cmd "overlap-$x.log" "$(left)" "$root/ferry" bench "$fashion/train" --workers "$n" --batch 256 --epochs 1 \
            --device cuda --overlap both --compute-ms "$x" --format json
    done
    end
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
    begin torch 70 "bench/compare_torch.py --device cuda: loader, MLP and CNN epochs against PyTorch" || return 0
    if [ -n "$simulated" ]; then end skipped "simulated (PyTorch needs a real GPU for --device cuda)"; return; fi
    if [ -z "$fashion" ]; then end skipped "$fashion_why"; return; fi
    local py n what v limit=8192
    if ! py=$(find_python "torch, torchvision, PIL"); then end skipped "torch (with torchvision and PIL) not importable"; return; fi
    # One import of torch (seconds each) for the version and the device.
    v=$("$py" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' 2>/dev/null)
    fact torch "${v% *}"
    if [ "${v##* }" != True ]; then end fail "PyTorch ($py) sees no CUDA device"; return; fi
    # The CNN epoch on a bounded set, the same count on both sides: ferry's
    # CNN and PyTorch's full epochs together outran the step.
    fact cnn_limit "$limit"
    n=$(nproc 2>/dev/null || echo 2)
    for what in loader mlp cnn; do
        local extra=()
        [ "$what" != loader ] && extra=(--model "$what")
        [ "$what" = cnn ] && extra+=(--limit "$limit")
        run_cmd "torch-$what.log" "$(left)" PYTHONUNBUFFERED=1 "$py" bench/compare_torch.py "$fashion/train" \
            --device cuda --workers "$n" --batch 256 --ferry "$root/ferry" --json "${extra[@]}"
    done
    end
}

# The training step alone, ferry eager and --graph against PyTorch eager and
# torch.compile on the same GPU (issue 41's goal: --graph at least 1x eager
# PyTorch at batch 128 and 256). Each run prints one JSON line.
step_step() {
    begin step 90 "bench_step: the CNN step, eager and --graph, against PyTorch eager and torch.compile" || return 0
    local steps=200 warmup=5 batches="128 256" b mode py v
    # The dry run proves the programs and the report (a simulated step of
    # the CNN at batch 8 takes about a second on the shared machine).
    if [ -n "$simulated" ]; then steps=2 warmup=2 batches=8; fi
    fact step_steps "$steps"
    for b in $batches; do
        for mode in eager graph; do
            local extra=()
            [ "$mode" = graph ] && extra=(--graph)
            run_cmd "step-ferry-$mode-$b.log" "$(share 6)" "$root/samples/bench_step" --model cnn \
                --device cuda --batch "$b" --steps "$steps" --warmup "$warmup" ${extra[@]+"${extra[@]}"}
        done
    done
    if [ -n "$simulated" ]; then fact torch_step "skipped: simulated"; end; return; fi
    if ! py=$(find_python torch); then fact torch_step "skipped: torch not importable"; end; return; fi
    v=$("$py" -c 'import torch; print(torch.__version__, torch.cuda.is_available())' 2>/dev/null)
    if [ "${v##* }" != True ]; then fact torch_step "skipped: PyTorch ($py) sees no CUDA device"; end; return; fi
    fact torch_step "torch ${v% *}"
    for b in $batches; do
        for mode in eager compile; do
            local extra=()
            [ "$mode" = compile ] && extra=(--compile)
            run_cmd "step-torch-$mode-$b.log" "$(share 4)" PYTHONUNBUFFERED=1 "$py" bench/step_torch.py \
                --model cnn --device cuda --batch "$b" --steps "$steps" ${extra[@]+"${extra[@]}"}
        done
    done
    end
}

# step_train NAME AMP CAP
step_train() {
    local name=$1 amp=$2
    begin "$name" "$3" "train_gray --model cnn --device cuda${amp:+ --amp}: test accuracy >= 0.915, epoch time" ||
        return 0
    if [ -z "$fashion" ]; then end skipped "$fashion_why"; return; fi
    local epochs=${FERRY_GPU_CHECK_EPOCHS:-10} workers=4 args=() ck=$work/$name.safetensors
    [ -n "$simulated" ] && epochs=1 workers=2
    [ -n "$amp" ] && args+=(--amp)
    run_cmd "$name.log" "$(left)" "$root/samples/train_gray" --data "$fashion" --model cnn --device cuda \
        --epochs "$epochs" --workers "$workers" --seed 0 --out "$work/$name" --save "$ck" ${args[@]+"${args[@]}"}
    [ -f "$ck" ] && [ -z "$amp" ] && checkpoint=$ck
    end
}

step_nccl() {
    begin nccl 25 "NCCL: test_dist under mpirun, bench/dist_overhead.sh --device cuda" || return 0
    if [ -n "$simulated" ]; then end skipped "simulated (NCCL needs NVIDIA hardware)"; return; fi
    case $ferry_dist in *NCCL*) ;; *) end skipped "built without NCCL (${ferry_dist:-unknown})"; return ;; esac
    if ! command -v mpirun >/dev/null 2>&1; then end skipped "no mpirun"; return; fi
    local mpi=(mpirun -np 1 --oversubscribe)
    [ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
    run_cmd nccl-test.log "$(left)" "${mpi[@]}" "$root/tests/test_dist"
    if [ -n "$fashion" ]; then
        # One run took 3 s and swung from 3 % to 22 %: the median of 3 where
        # the time is there (about 4 s each), else 1, said as such.
        local runs=3
        [ "$(left)" -ge 16 ] || runs=1
        fact overhead_runs "$runs"
        run_cmd nccl-overhead.log "$(left)" FERRY_BUILD="$root" sh bench/dist_overhead.sh --device cuda --runs $runs \
            --data "$fashion" --limit 16384 --workers 4
    fi
    end
}

step_safetensors() {
    begin safetensors 20 "PyTorch loads a ferry checkpoint (safetensors) and gives the same logits" || return 0
    local py reader=safetensors
    if [ -n "$simulated" ]; then
        # The dry run checks the helper with whatever PyTorch is at hand; the
        # safetensors package is optional there (the helper reads the format itself).
        if ! py=$(find_python torch); then end skipped "torch not importable"; return; fi
        "$py" -c 'import safetensors' >/dev/null 2>&1 || reader=builtin
    elif ! py=$(find_python "torch, safetensors"); then
        end skipped "torch and safetensors not importable"; return
    fi
    if [ ! -f "$root/libferry-train.so" ]; then end fail "no $root/libferry-train.so (the helper calls it through ctypes)"; return; fi
    if [ -z "$checkpoint" ]; then
        if [ -z "$fashion" ]; then end skipped "no checkpoint and $fashion_why"; return; fi
        checkpoint=$work/ck.safetensors
        run_cmd ck.log "$(left)" "$root/samples/train_gray" --data "$fashion" --model cnn --device cuda --epochs 1 \
            --limit 2048 --workers 2 --out "$work/ck" --save "$checkpoint"
        [ "$rc" = 0 ] || { end fail "train_gray --save exited with $rc"; return; }
    fi
    run_cmd safetensors.log "$(left)" PYTHONUNBUFFERED=1 "$py" bench/check_safetensors.py "$checkpoint" \
        --lib "$root/libferry-train.so" --device cuda --reader $reader --json
    end
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
    command -v python3 >/dev/null 2>&1 || die "no python3 (scripts/gpu_report.py writes the report)"
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
    ferry_dist='' checkpoint=''
    find_fashion
    mkdir -p "$work/steps" || die "cannot create $work/steps"
    rec=$work/run
    put simulated "$simulated"; put sim_gpus "${FERRY_SIM_GPUS:-}"; put dry "$dry"; put t_start "$t_start"
    put nproc "$(nproc)"; put bundle "$bundle_note"; put libs "$libs_note"; put libs_missing "$libs_missing"
    put command "$invocation"

    step_info
    step_gpu
    step_tests
    step_sanitizer
    step_kernels
    step_h2d
    step_pipeline
    step_color
    step_overlap
    step_torch
    step_step
    step_train train "" 60
    step_train train-amp 1 40
    step_nccl
    step_safetensors
    report report "$work" "$outdir"
}

case ${1:-} in
    prepare) shift; prepare "$@" ;;
    run) shift; run_main "$@" ;;
    *) usage ;;
esac
