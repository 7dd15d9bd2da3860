#!/bin/sh
# The build's dependency check (scripts/install-deps.sh --check, run by the
# Makefile before the first compile): on this machine it passes quietly; with a
# compiler that finds no headers or libraries (--sysroot on an empty folder), a
# missing CBLAS header or library, or no compiler at all, it fails naming each
# missing Debian package and the command that installs them; and `make` itself
# stops with that message before compiling anything. Prints one line per check
# and a "N passed, N failed, N skipped" summary.
#   sh scripts/deps-test.sh
cd "$(dirname "$0")/.." || exit 1
passed=0 failed=0 skipped=0
ok() { echo "ok    deps $1"; passed=$((passed + 1)); }
bad() { echo "FAIL  deps $1"; failed=$((failed + 1)); }
skip() { echo "skip  deps $1"; skipped=$((skipped + 1)); }
finish() { echo "$passed passed, $failed failed, $skipped skipped"; [ "$failed" -eq 0 ]; exit $?; }
show() { sed 's/^/  /' "$1"; }

cc=${CC:-cc}
if ! command -v "$cc" > /dev/null 2>&1; then
    skip "(no C compiler '$cc')"
    finish
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-deps-test-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/empty"
nothing="$cc --sysroot=$tmp/empty"

# check NAME: runs the check with the environment given after NAME into $tmp/out;
# sets rc.
check() {
    env -u FERRY_DEPS_CFLAGS -u FERRY_DEPS_LDFLAGS -u FERRY_DEPS_OPTIONAL -u FERRY_BLAS \
        -u FERRY_BLAS_HEADER -u FERRY_BLAS_LIBS "$@" sh scripts/install-deps.sh --check > "$tmp/out" 2>&1
    rc=$?
}
# has TEXT: the last check's output contains TEXT (fixed string).
has() { grep -qF -- "$1" "$tmp/out"; }

# ---- this machine: everything there (make test installed it), nothing printed ----
check CC="$cc"
if [ "$rc" -eq 0 ] && [ ! -s "$tmp/out" ]; then
    ok "check passes quietly with $cc"
else
    bad "check with $cc: exit $rc (the build's packages are installed: it should pass)"; show "$tmp/out"
fi

# ---- no headers, no libraries: every package named, one install command ----
install='apt-get install -y --no-install-recommends libpng-dev zlib1g-dev libjpeg62-turbo-dev libopenblas-dev'
check CC="$nothing"
if [ "$rc" -ne 0 ] && has "png.h not found (Debian package libpng-dev)" &&
   has "zlib.h not found (Debian package zlib1g-dev)" &&
   has "jpeglib.h not found (Debian package libjpeg62-turbo-dev)" &&
   has "cblas.h not found (Debian package libopenblas-dev)" && has "$install" &&
   has "make run and make test" && has "scripts/install-deps.sh"; then
    ok "an empty sysroot: names libpng-dev, zlib1g-dev, libjpeg62-turbo-dev, libopenblas-dev and '$install'"
else
    bad "an empty sysroot: exit $rc, want the four packages and '$install'"; show "$tmp/out"
fi

# ---- only the CBLAS header missing: that package alone ----
check CC="$cc" FERRY_BLAS_HEADER=ferry-no-such-cblas.h
if [ "$rc" -ne 0 ] && has "ferry-no-such-cblas.h not found (Debian package libopenblas-dev)" &&
   has "apt-get install -y --no-install-recommends libopenblas-dev" && ! has libpng-dev && ! has zlib1g-dev; then
    ok "a missing CBLAS header names libopenblas-dev alone"
else
    bad "a missing CBLAS header: exit $rc"; show "$tmp/out"
fi

# ---- BLAS=blas whose library is missing: the reference BLAS's package ----
check CC="$cc" FERRY_BLAS=blas FERRY_BLAS_LIBS=-lferry_no_such_blas
if [ "$rc" -ne 0 ] && has "-lferry_no_such_blas: cannot link cblas_sgemm (Debian package libblas-dev)" &&
   has "apt-get install -y --no-install-recommends libblas-dev"; then
    ok "BLAS=blas without its library names libblas-dev"
else
    bad "BLAS=blas without its library: exit $rc"; show "$tmp/out"
fi

# ---- a BLAS Debian has no package for: says which variables to set ----
check CC="$cc" FERRY_BLAS=ferry_no_such_blas
if [ "$rc" -ne 0 ] && has "no Debian package known for BLAS=ferry_no_such_blas: set BLAS_LIBS" &&
   ! has "apt-get install"; then
    ok "an unknown BLAS says to set BLAS_LIBS, BLAS_HEADER, BLAS_CFLAGS"
else
    bad "an unknown BLAS: exit $rc"; show "$tmp/out"
fi

# ---- no compiler at all ----
check CC=ferry-no-such-cc
if [ "$rc" -ne 0 ] && has "'ferry-no-such-cc' is not installed (Debian package build-essential" &&
   has "apt-get install -y --no-install-recommends build-essential"; then
    ok "a missing compiler names build-essential"
else
    bad "a missing compiler: exit $rc"; show "$tmp/out"
fi

# ---- optional tools: a note each, no failure ----
check CC="$cc" FERRY_DEPS_OPTIONAL="nvcc mpicc"
if [ "$rc" -eq 0 ] && has "nvcc not found, building without CUDA" && has "nvidia-cuda-toolkit" &&
   has "mpicc not found, building without MPI" && has "libopenmpi-dev openmpi-bin"; then
    ok "missing nvcc and mpicc are notes naming their packages, not failures"
else
    bad "optional tools: exit $rc"; show "$tmp/out"
fi

# ---- make: stops before the first compile, with the check's message ----
if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "${MAKE:-make}" --no-print-directory BUILD="$tmp/build" \
        CC="$nothing" CUDA=0 DIST=0 lib > "$tmp/out" 2>&1; then
    bad "make with an empty sysroot succeeded"; show "$tmp/out"
elif has "png.h not found (Debian package libpng-dev)" && has "$install" && [ ! -d "$tmp/build/obj" ] &&
     [ ! -e "$tmp/build/.deps-ok" ]; then
    ok "make stops before compiling, naming the packages"
else
    bad "make with an empty sysroot: no package message, or it compiled"; show "$tmp/out"
fi
finish
