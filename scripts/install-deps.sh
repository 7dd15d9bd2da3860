#!/bin/sh
# The Debian packages ferry builds and runs with, in one place.
#
# scripts/install-deps.sh [extra-package ...]
#   Installs the packages that are missing. As root it uses apt-get (refreshing
#   stale package lists first); otherwise it prints the exact command to run and
#   fails. Costs one dpkg query when all is present. `make run`, `make test` and
#   `make deps` run it.
#
# scripts/install-deps.sh --check
#   What the Makefile runs before the first compile in a build folder: tries each
#   header and library the build uses with the build's compiler, names the Debian
#   package of each one missing and the command that installs it, and exits 1 then.
#   Works without dpkg (a compile test, not a package query). Environment, set by
#   the Makefile: CC; FERRY_DEPS_CFLAGS (-I flags), FERRY_DEPS_LDFLAGS (-L flags);
#   FERRY_BLAS (openblas, blas, ...), FERRY_BLAS_HEADER (cblas.h), FERRY_BLAS_LIBS
#   (-lopenblas); FERRY_DEPS_OPTIONAL: the optional tools the build looked for and
#   did not find (nvcc, mpicc): a note each, not a failure.
set -u

PNG_PKG=libpng-dev
# libjpeg-turbo with the libjpeg API (jpeg_crop_scanline, jpeg_skip_scanlines).
JPEG_PKG=libjpeg62-turbo-dev
ZLIB_PKG=zlib1g-dev
MPI_PKGS="libopenmpi-dev openmpi-bin"
# Shards by URL (http(s)://, s3://); the build goes without them when absent.
CURL_PKG=libcurl4-openssl-dev
# The package of the CBLAS the Makefile's BLAS= names; empty for one Debian lacks.
blas_pkg() {
    case "$1" in
        openblas) echo libopenblas-dev ;;
        blas) echo libblas-dev ;;
    esac
}
install_cmd() { echo "apt-get install -y --no-install-recommends $*"; }

# ---- --check ----

# check_dep HEADER SYMBOL LIBS PACKAGE: compiles and links a program that includes
# HEADER and takes SYMBOL's address, against LIBS; on failure records the package
# and says whether the header or the library is what is missing. (stdio.h first:
# jpeglib.h needs FILE.)
check_dep() {
    printf '#include <stdio.h>\n#include <%s>\nint main(void) { void (*volatile f)(void) = (void (*)(void))%s; return f == 0; }\n' \
        "$1" "$2" > "$tmp/dep.c"
    # shellcheck disable=SC2086 # compiler and flags split into words on purpose
    $cc $cflags -c "$tmp/dep.c" -o "$tmp/dep.o" > "$tmp/err" 2>&1 || {
        missing_dep "$1 not found" "$4"
        return
    }
    # shellcheck disable=SC2086
    $cc "$tmp/dep.o" -o "$tmp/dep" $ldflags $3 > "$tmp/err" 2>&1 ||
        missing_dep "$3: cannot link $2" "$4"
}

missing_dep() {
    problems="$problems
ferry:   $1 ($([ -n "$2" ] && echo "Debian package $2" || echo "no Debian package known for BLAS=$blas: set BLAS_LIBS, BLAS_HEADER, BLAS_CFLAGS"))"
    [ -n "$2" ] && pkgs="$pkgs $2"
}

note_optional() {
    for tool in ${FERRY_DEPS_OPTIONAL:-}; do
        case "$tool" in
            nvcc) echo "ferry: note: nvcc not found, building without CUDA (the CUDA toolkit: Debian package nvidia-cuda-toolkit, or NVIDIA's from developer.nvidia.com/cuda-downloads)" >&2 ;;
            mpicc) echo "ferry: note: mpicc not found, building without MPI (install: $(install_cmd "$MPI_PKGS"))" >&2 ;;
            curl) echo "ferry: note: curl/curl.h not found, building without shards by URL (install: $(install_cmd "$CURL_PKG"))" >&2 ;;
        esac
    done
}

check() {
    cc=${CC:-cc}
    cflags=${FERRY_DEPS_CFLAGS:-}
    ldflags=${FERRY_DEPS_LDFLAGS:-}
    blas=${FERRY_BLAS:-openblas}
    problems="" pkgs=""
    if ! command -v "${cc%% *}" > /dev/null 2>&1; then
        echo "ferry: cannot build: the C compiler '${cc%% *}' is not installed (Debian package build-essential, or set CC=)" >&2
        echo "ferry: install it (as root):  apt-get update && $(install_cmd build-essential)" >&2
        return 1
    fi
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-deps-XXXXXX") || return 1
    check_dep png.h png_get_libpng_ver -lpng "$PNG_PKG"
    check_dep zlib.h zlibVersion -lz "$ZLIB_PKG"
    check_dep jpeglib.h jpeg_crop_scanline -ljpeg "$JPEG_PKG"
    check_dep "${FERRY_BLAS_HEADER:-cblas.h}" cblas_sgemm "${FERRY_BLAS_LIBS:--l$blas}" "$(blas_pkg "$blas")"
    rm -rf "$tmp"
    note_optional
    [ -z "$problems" ] && return 0
    echo "ferry: cannot build, missing:$problems" >&2
    if [ -n "$pkgs" ]; then
        echo "ferry: install them (as root):  apt-get update && $(install_cmd "${pkgs# }")" >&2
        echo "ferry: (make run and make test do this for you: they run scripts/install-deps.sh)" >&2
    fi
    return 1
}

if [ "${1:-}" = "--check" ]; then
    check
    exit $?
fi

# ---- install ----

want="$PNG_PKG $JPEG_PKG $ZLIB_PKG $(blas_pkg "${FERRY_BLAS:-openblas}") pkg-config dataset-fashion-mnist $MPI_PKGS $CURL_PKG clang-tidy cppcheck cmake $*"

missing=""
for p in $want; do
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null)
    case "$status" in
        ii*) ;;
        *) missing="$missing $p" ;;
    esac
done
[ -z "$missing" ] && exit 0

cmd=$(install_cmd "${missing# }")
if [ "$(id -u)" != "0" ]; then
    echo "ferry: missing Debian packages:$missing" >&2
    echo "ferry: run as root:  apt-get update && $cmd" >&2
    exit 1
fi

echo "ferry: installing$missing" >&2
lists=/var/lib/apt/lists
# Refresh the package lists when they are empty or older than a day.
if [ -z "$(find "$lists" -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
    apt-get update -q >&2 || { echo "ferry: apt-get update failed" >&2; exit 1; }
fi
DEBIAN_FRONTEND=noninteractive $cmd >&2 || {
    echo "ferry: '$cmd' failed" >&2
    exit 1
}
