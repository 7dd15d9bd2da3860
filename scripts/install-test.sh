#!/bin/sh
# make install into a temporary prefix, then the checks a user of the installed
# libraries depends on: the files installed and no others, the sonames and their
# links, libferry.so and libferry-train.so exporting together exactly the
# FERRY_API functions of the installed headers (libferry's under FERRY_0, its
# internals for libferry-train only as ferry_* under FERRY_PRIVATE; nothing of the
# fd_/fk_/fm_ internals), libferry.so needing none of BLAS, cuBLAS, MPI, NCCL,
# every installed header compiling on its own, samples/embed.c built against
# libferry alone with nothing but
#   pkg-config --cflags --libs ferry            (shared; run from the prefix)
#   pkg-config --static --cflags --libs ferry   (libferry.a linked in)
# run on a small PNG folder, linking none of BLAS, cuBLAS, MPI, NCCL (readelf -d,
# nm) and, in a CUDA=0 build, under 1 MiB stripped (its size is printed either way);
# neither library needing libstdc++ (ferry is C, its .cu objects too);
# samples/train_gray.c built with pkg-config ferry-train (both libraries) and run;
# samples/embed.c (ferry::ferry, shared and FERRY_STATIC) and samples/train_gray.c
# (ferry::train) built with CMake's find_package(ferry) against the prefix;
# make uninstall removing every file again; the same for a DESTDIR install. Prints one line per check and a
# "N passed, N failed, N skipped" summary.
#   FERRY_BUILD=build sh scripts/install-test.sh
# FERRY_INSTALL_MAKEARGS: the variables the build was made with ("CUDA=0",
# make test passes CUDA, DIST, STATIC and CUDA_ARCH), so that make install finds
# it up to date instead of rebuilding it; FERRY_INSTALL_CC: the C compiler
# (passed to make as CC too when set).
# shellcheck disable=SC2046,SC2086 # make's and pkg-config's words split on purpose
cd "$(dirname "$0")/.." || exit 1
build=${FERRY_BUILD:-build}
margs=${FERRY_INSTALL_MAKEARGS:-}
cc=${FERRY_INSTALL_CC:-${CC:-cc}}
passed=0 failed=0 skipped=0
ok() { echo "ok    install $1"; passed=$((passed + 1)); }
bad() { echo "FAIL  install $1"; failed=$((failed + 1)); }
skip() { echo "skip  install $1"; skipped=$((skipped + 1)); }
finish() { echo "$passed passed, $failed failed, $skipped skipped"; [ "$failed" -eq 0 ]; exit $?; }

for tool in pkg-config nm readelf strip; do
    if ! command -v $tool >/dev/null 2>&1; then
        skip "(no $tool: install pkg-config and binutils)"
        finish
    fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-install-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
show() { tail -n 15 "$1" | sed 's/^/  /'; }

# make in this checkout, with the build's variables and none of the calling
# make's (its -j and jobserver belong to it).
mk() {
    if [ -n "${FERRY_INSTALL_CC:-}" ]; then
        env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} --no-print-directory \
            BUILD="$build" CC="$FERRY_INSTALL_CC" $margs LDCONFIG=true "$@"
    else
        env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} --no-print-directory \
            BUILD="$build" $margs LDCONFIG=true "$@"
    fi
}

part() { sed -n "s/^#define FERRY_VERSION_$1 *\([0-9][0-9]*\).*/\1/p" include/ferry/export.h; }
major=$(part MAJOR)
version=$major.$(part MINOR).$(part PATCH)

# Every file make install should put under a prefix, sorted.
expected() {
    {
        echo include/ferry.h
        for h in include/ferry/*.h; do echo "$h"; done
        for l in libferry libferry-train; do
            echo "lib/$l.a"
            echo "lib/$l.so"
            echo "lib/$l.so.$major"
            echo "lib/$l.so.$version"
        done
        echo lib/pkgconfig/ferry.pc
        echo lib/pkgconfig/ferry-train.pc
        echo lib/cmake/ferry/ferry-config.cmake
        echo lib/cmake/ferry/ferry-config-version.cmake
        echo bin/ferry
    } | sort
}
installed() { (cd "$1" && find . \( -type f -o -type l \) | sed 's|^\./||' | sort); }

# ---- install into PREFIX ----
flags_before=$(cat "$build/.flags" 2>/dev/null)
if ! mk PREFIX="$prefix" install > "$tmp/out" 2>&1; then
    bad "make install PREFIX=$prefix"; show "$tmp/out"; finish
fi
if [ "$(cat "$build/.flags" 2>/dev/null)" != "$flags_before" ]; then
    bad "make install rebuilt $build with other flags (set FERRY_INSTALL_MAKEARGS to the build's CUDA=, DIST=, ...)"
fi
if [ "$(installed "$prefix")" = "$(expected)" ]; then
    ok "make install: $(expected | wc -l) files (headers, libferry and libferry-train .a and .so*, bin/ferry, two .pc, the CMake package)"
else
    bad "make install: files differ from the expected list"
    expected > "$tmp/want"; installed "$prefix" > "$tmp/got"
    diff "$tmp/want" "$tmp/got" | sed 's/^/  /'
fi

lib=$prefix/lib
for l in libferry libferry-train; do
    soname=$(readelf -d "$lib/$l.so.$version" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    if [ "$(readlink "$lib/$l.so")" = "$l.so.$major" ] &&
       [ "$(readlink "$lib/$l.so.$major")" = "$l.so.$version" ] &&
       [ "$soname" = "$l.so.$major" ]; then
        ok "$l.so -> $l.so.$major -> $l.so.$version, soname $soname"
    else
        bad "$l: shared library links or soname (soname '$soname')"
        find "$lib" -maxdepth 1 -name "$l.*" -exec ls -ld {} + | sed 's/^/  /'
    fi
done

# ---- one direction: the data path needs nothing of the training stack ----
# The libraries a training dependency brings, as readelf -d names them.
heavy='libopenblas|libblas|libcblas|libmkl|libcublas|libmpi|libnccl'
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
for so in "$build/libferry.so" "$lib/libferry.so.$version"; do
    if [ ! -f "$so" ]; then
        bad "no $so"
    elif needed "$so" | grep -Eq "^($heavy)"; then
        bad "$so needs a training library: $(needed "$so" | grep -E "^($heavy)" | tr '\n' ' ')"
    else
        ok "$so needs none of BLAS, cuBLAS, MPI, NCCL ($(needed "$so" | tr '\n' ' '))"
    fi
done
# ferry is C: the simulated GPU's C++ objects are built without exceptions or
# the C++ runtime, so a C program linking ferry links no libstdc++.
for so in "$lib/libferry.so.$version" "$lib/libferry-train.so.$version"; do
    if needed "$so" | grep -q '^libstdc++'; then
        bad "$so needs the C++ runtime: $(needed "$so" | tr '\n' ' ')"
    else
        ok "$so needs no libstdc++"
    fi
done
if needed "$lib/libferry-train.so.$version" | grep -qx "libferry.so.$major"; then
    ok "libferry-train.so needs libferry.so.$major"
else
    bad "libferry-train.so does not need libferry.so.$major: $(needed "$lib/libferry-train.so.$version" | tr '\n' ' ')"
fi
if needed "$lib/libferry.so.$version" | grep -q 'libferry-train'; then
    bad "libferry.so needs libferry-train (the direction is the other way)"
fi

# ---- exported symbols ----
# libferry's FERRY_API functions under the version FERRY_0, its internals for
# libferry-train under FERRY_PRIVATE; libferry-train's exports are unversioned.
dsyms() { nm -D --defined-only "$1" | awk 'NF >= 3 {print $3}'; }
dsyms "$lib/libferry.so.$version" | sort -u > "$tmp/core_all"
sed -n 's/@@FERRY_0$//p' "$tmp/core_all" | sort -u > "$tmp/core_public"
sed -n 's/@@FERRY_PRIVATE$//p' "$tmp/core_all" | sort -u > "$tmp/core_private"
grep -v '@@FERRY_' "$tmp/core_all" | grep -v '^FERRY_' > "$tmp/core_unversioned"
dsyms "$lib/libferry-train.so.$version" | sort -u > "$tmp/train_exported"
cat "$tmp/core_public" "$tmp/core_private" "$tmp/train_exported" | sort -u > "$tmp/exported"
grep -v '^ferry_' "$tmp/exported" > "$tmp/other"
grep -ho '^FERRY_API[^(]*(' "$prefix"/include/ferry/*.h | sed 's/ *($//; s/.*[ *]//' | sort -u > "$tmp/api"
sort -u "$tmp/core_public" "$tmp/train_exported" > "$tmp/ferry_exported"
if [ ! -s "$tmp/other" ] && [ ! -s "$tmp/core_unversioned" ]; then
    ok "libferry.so and libferry-train.so export only ferry_* ($(wc -l < "$tmp/core_public") + $(wc -l < "$tmp/core_private") private, $(wc -l < "$tmp/train_exported"))"
else
    bad "exports not named ferry_*, or libferry.so exports outside FERRY_0/FERRY_PRIVATE:"
    cat "$tmp/other" "$tmp/core_unversioned" | head -n 20 | sed 's/^/  /'
fi
if [ -s "$tmp/api" ] && cmp -s "$tmp/api" "$tmp/ferry_exported" &&
   [ -z "$(comm -12 "$tmp/core_public" "$tmp/train_exported")" ]; then
    ok "the exported ferry_* are exactly the $(wc -l < "$tmp/api") FERRY_API functions of the headers, each in one library"
else
    bad "exported ferry_* and FERRY_API declarations differ (<: declared, not exported; >: exported, not declared)"
    diff "$tmp/api" "$tmp/ferry_exported" | grep '^[<>]' | head -n 20 | sed 's/^/  /'
    comm -12 "$tmp/core_public" "$tmp/train_exported" | head -n 5 | sed 's/^/  in both: /'
fi
if comm -12 "$tmp/api" "$tmp/core_private" | grep -q .; then
    bad "FERRY_API functions exported as FERRY_PRIVATE: $(comm -12 "$tmp/api" "$tmp/core_private" | head -n 5 | tr '\n' ' ')"
fi

# ---- headers and pkg-config ----
export PKG_CONFIG_PATH="$lib/pkgconfig"
hdr_bad=
for h in "$prefix"/include/ferry.h "$prefix"/include/ferry/*.h; do
    name=${h#"$prefix/include/"}
    printf '#include <%s>\nint main(void) { return 0; }\n' "$name" > "$tmp/h.c"
    $cc -std=c11 -Wall -Wextra -Werror -fsyntax-only $(pkg-config --cflags ferry) "$tmp/h.c" \
        > "$tmp/hout" 2>&1 || { hdr_bad="$hdr_bad $name"; show "$tmp/hout"; }
done
if [ -z "$hdr_bad" ]; then
    ok "every installed header compiles on its own (-std=c11 -Wall -Wextra -Werror)"
else
    bad "headers that do not compile on their own:$hdr_bad"
fi
if [ "$(pkg-config --modversion ferry 2>&1)" = "$version" ]; then
    ok "pkg-config --modversion ferry: $version"
else
    bad "pkg-config --modversion ferry: $(pkg-config --modversion ferry 2>&1)"
fi

# A small image folder for embed: 2 classes x 3 gray 8x8 PNGs, written by a
# program of its own built against the installed library (mkpng DIR [SIZE]: the
# training sample takes 28x28).
cat > "$tmp/mkpng.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ferry.h>

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3 || strcmp(ferry_version(), FERRY_VERSION) != 0)
        return 2;
    unsigned size = argc == 3 ? (unsigned)atoi(argv[2]) : 8;
    if (size < 1 || size > 28)
        return 2;
    unsigned char px[28 * 28];
    char path[4096];
    for (int c = 0; c < 2; c++) {
        snprintf(path, sizeof path, "%s/class%d", argv[1], c);
        mkdir(argv[1], 0755);
        mkdir(path, 0755);
        for (int i = 0; i < 3; i++) {
            memset(px, 40 * (c * 3 + i), size * size);
            snprintf(path, sizeof path, "%s/class%d/%d.png", argv[1], c, i);
            if (ferry_png_save(path, px, size, size, 1) != FERRY_OK) {
                fprintf(stderr, "%s\n", ferry_last_error());
                return 1;
            }
        }
    }
    return 0;
}
EOF
want='batch 0: images [6, 1, 8, 8] f32, labels [6]'
if $cc -std=c11 -Wall -Wextra -Werror -o "$tmp/mkpng" "$tmp/mkpng.c" $(pkg-config --cflags --libs ferry) \
        > "$tmp/out" 2>&1 &&
   LD_LIBRARY_PATH="$lib" "$tmp/mkpng" "$tmp/data" > "$tmp/out" 2>&1; then
    have_data=1
else
    have_data=
    bad "writing the test images with ferry_png_save"; show "$tmp/out"
fi

# ---- shared: pkg-config --cflags --libs ferry ----
if $cc -std=c11 -Wall -Wextra -Werror -o "$tmp/embed" samples/embed.c \
        $(pkg-config --cflags --libs ferry) > "$tmp/out" 2>&1; then
    needed=$(readelf -d "$tmp/embed" | sed -n 's/.*(NEEDED).*\[\(libferry[^]]*\)\]/\1/p')
    resolved=$(LD_LIBRARY_PATH="$lib" ldd "$tmp/embed" 2>/dev/null | sed -n 's/.*libferry[^ ]* => \([^ ]*\).*/\1/p')
    if [ "$needed" != "libferry.so.$major" ] || [ "$resolved" != "$lib/libferry.so.$major" ]; then
        bad "embed (shared) needs '$needed', found at '$resolved'"
    elif needed "$tmp/embed" | grep -Eq "^($heavy)"; then
        bad "embed (shared) needs a training library: $(needed "$tmp/embed" | tr '\n' ' ')"
    elif nm -D "$tmp/embed" | grep -q 'FERRY_PRIVATE'; then
        bad "embed (shared) binds libferry's private symbols: $(nm -D "$tmp/embed" | grep FERRY_PRIVATE | head -n 3 | tr '\n' ' ')"
    elif [ -z "$have_data" ]; then
        skip "embed (shared): no test images"
    elif LD_LIBRARY_PATH="$lib" "$tmp/embed" "$tmp/data" > "$tmp/out" 2>&1 && grep -qF "$want" "$tmp/out"; then
        ok "embed built with pkg-config --cflags --libs ferry (NEEDED: $(needed "$tmp/embed" | tr '\n' ' ')), runs on $lib/libferry.so.$major ($(head -n 1 "$tmp/out"))"
    else
        bad "embed (shared) run"; show "$tmp/out"
    fi
else
    bad "embed (shared) build: $cc samples/embed.c \$(pkg-config --cflags --libs ferry)"; show "$tmp/out"
fi

# ---- static: pkg-config --static --cflags --libs ferry ----
# libferry.so and libferry.a share the folder and the linker takes the .so when
# it is there: the development link is set aside for this link, as in an
# installation of the static library alone.
# Symbols of the training stack, defined or undefined, in a program.
heavy_syms='cblas_|cublas|MPI_|ncclComm|fk_cpu_|fk_cuda_'
mv "$lib/libferry.so" "$tmp/libferry.so.devlink"
mv "$lib/libferry-train.so" "$tmp/libferry-train.so.devlink"
if $cc -std=c11 -Wall -Wextra -Werror -o "$tmp/embed_static" samples/embed.c \
        $(pkg-config --static --cflags --libs ferry) > "$tmp/out" 2>&1; then
    # Stripped: the debug information of CFLAGS's -g is not what a user ships.
    size=$(strip -o "$tmp/embed_stripped" "$tmp/embed_static" && wc -c < "$tmp/embed_stripped")
    cuda_build=$(grep -c 'FERRY_HAVE_CUDA=1' "$build/.flags" 2>/dev/null)
    if readelf -d "$tmp/embed_static" | grep -q 'NEEDED.*libferry'; then
        bad "embed (static) still needs libferry.so"
    elif needed "$tmp/embed_static" | grep -Eq "^($heavy)"; then
        bad "embed (static) needs a training library: $(needed "$tmp/embed_static" | tr '\n' ' ')"
    elif nm "$tmp/embed_static" | grep -Eq " ($heavy_syms)"; then
        bad "embed (static) holds training symbols: $(nm "$tmp/embed_static" | grep -E " ($heavy_syms)" | head -n 3 | tr '\n' ' ')"
    elif [ "${cuda_build:-0}" = 0 ] && [ "$size" -ge 1048576 ]; then
        bad "embed (static, CUDA=0 build) is $size bytes stripped, not under 1 MiB"
    elif [ -z "$have_data" ]; then
        skip "embed (static): no test images"
    elif "$tmp/embed_static" "$tmp/data" > "$tmp/out" 2>&1 && grep -qF "$want" "$tmp/out"; then
        ok "embed built with pkg-config --static --cflags --libs ferry (libferry.a linked in, $size bytes stripped$([ "${cuda_build:-0}" = 0 ] && echo ', under 1 MiB' || echo ', CUDA build'), no BLAS/cuBLAS/MPI/NCCL) runs"
    else
        bad "embed (static) run"; show "$tmp/out"
    fi
else
    bad "embed (static) build: $cc samples/embed.c \$(pkg-config --static --cflags --libs ferry)"
    show "$tmp/out"
fi
mv "$tmp/libferry.so.devlink" "$lib/libferry.so"
mv "$tmp/libferry-train.so.devlink" "$lib/libferry-train.so"

# ---- a training sample: pkg-config ferry-train brings both libraries ----
if $cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -o "$tmp/train_gray" samples/train_gray.c \
        $(pkg-config --cflags --libs ferry-train) -lm > "$tmp/out" 2>&1; then
    tneeded=$(needed "$tmp/train_gray" | grep '^libferry' | sort | tr '\n' ' ')
    if [ "$tneeded" != "libferry-train.so.$major libferry.so.$major " ]; then
        bad "train_gray (shared) needs '$tneeded', not libferry-train.so.$major and libferry.so.$major"
    elif [ -z "$have_data" ] || ! mkdir -p "$tmp/gray" || ! LD_LIBRARY_PATH="$lib" "$tmp/mkpng" "$tmp/gray/train" 28 ||
         ! LD_LIBRARY_PATH="$lib" "$tmp/mkpng" "$tmp/gray/test" 28; then
        skip "train_gray (shared): no test images"
    elif LD_LIBRARY_PATH="$lib" "$tmp/train_gray" --data "$tmp/gray" --epochs 1 --batch 2 --workers 1 \
            --out "$tmp/gray_out" > "$tmp/out" 2>&1; then
        ok "train_gray built with pkg-config --cflags --libs ferry-train ($tneeded) trains an epoch"
    else
        bad "train_gray (shared) run"; show "$tmp/out"
    fi
else
    bad "train_gray build: $cc samples/train_gray.c \$(pkg-config --cflags --libs ferry-train)"; show "$tmp/out"
fi

# ---- CMake: find_package(ferry) with ferry::ferry and ferry::train ----
# embed against ferry::ferry (shared, then FERRY_STATIC), train_gray against
# ferry::train; the same checks as the pkg-config builds above.
cmake_build() { # NAME TARGET SOURCE STATIC -> $tmp/cm-NAME/build/NAME
    d=$tmp/cm-$1
    mkdir -p "$d"
    printf '%s\n' 'cmake_minimum_required(VERSION 3.13)' "project($1 C)" \
        "find_package(ferry $major.$(part MINOR) REQUIRED)" \
        "add_executable($1 $PWD/$3)" 'target_compile_definitions('"$1"' PRIVATE _GNU_SOURCE)' \
        "target_link_libraries($1 PRIVATE $2 m)" > "$d/CMakeLists.txt"
    cmake -S "$d" -B "$d/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="${cc%% *}" \
        -DFERRY_STATIC="$4" > "$tmp/out" 2>&1 && cmake --build "$d/build" >> "$tmp/out" 2>&1
}
if ! command -v cmake > /dev/null 2>&1; then
    skip "CMake package (no cmake: scripts/install-deps.sh installs it)"
else
    if ! cmake_build embed ferry::ferry samples/embed.c OFF; then
        bad "embed with find_package(ferry) and ferry::ferry"; show "$tmp/out"
    elif [ "$(needed "$tmp/cm-embed/build/embed" | grep '^libferry')" != "libferry.so.$major" ] ||
         needed "$tmp/cm-embed/build/embed" | grep -Eq "^($heavy)"; then
        bad "embed (CMake) needs: $(needed "$tmp/cm-embed/build/embed" | tr '\n' ' ')"
    elif [ -n "$have_data" ] && LD_LIBRARY_PATH="$lib" "$tmp/cm-embed/build/embed" "$tmp/data" > "$tmp/out" 2>&1 &&
         grep -qF "$want" "$tmp/out"; then
        ok "embed built with find_package(ferry) and ferry::ferry runs (NEEDED: $(needed "$tmp/cm-embed/build/embed" | tr '\n' ' '))"
    else
        bad "embed (CMake) run"; show "$tmp/out"
    fi
    mv "$lib/libferry.so" "$tmp/libferry.so.devlink"
    mv "$lib/libferry-train.so" "$tmp/libferry-train.so.devlink"
    if ! cmake_build embeds ferry::ferry samples/embed.c ON; then
        bad "embed with FERRY_STATIC=ON and ferry::ferry"; show "$tmp/out"
    elif readelf -d "$tmp/cm-embeds/build/embeds" | grep -q 'NEEDED.*libferry' ||
         nm "$tmp/cm-embeds/build/embeds" | grep -Eq " ($heavy_syms)"; then
        bad "embed (CMake, static) needs libferry.so or holds training symbols"
    elif [ -n "$have_data" ] && "$tmp/cm-embeds/build/embeds" "$tmp/data" > "$tmp/out" 2>&1 &&
         grep -qF "$want" "$tmp/out"; then
        ok "embed built with FERRY_STATIC=ON and ferry::ferry (libferry.a linked in) runs"
    else
        bad "embed (CMake, static) run"; show "$tmp/out"
    fi
    mv "$tmp/libferry.so.devlink" "$lib/libferry.so"
    mv "$tmp/libferry-train.so.devlink" "$lib/libferry-train.so"
    if ! cmake_build train_gray ferry::train samples/train_gray.c OFF; then
        bad "train_gray with find_package(ferry) and ferry::train"; show "$tmp/out"
    elif [ "$(needed "$tmp/cm-train_gray/build/train_gray" | grep '^libferry' | sort | tr '\n' ' ')" != \
           "libferry-train.so.$major libferry.so.$major " ]; then
        bad "train_gray (CMake) needs: $(needed "$tmp/cm-train_gray/build/train_gray" | tr '\n' ' ')"
    elif [ -d "$tmp/gray/train" ] && LD_LIBRARY_PATH="$lib" "$tmp/cm-train_gray/build/train_gray" --data "$tmp/gray" \
            --epochs 1 --batch 2 --workers 1 --out "$tmp/gray_out_cmake" > "$tmp/out" 2>&1; then
        ok "train_gray built with find_package(ferry) and ferry::train trains an epoch"
    else
        bad "train_gray (CMake) run"; show "$tmp/out"
    fi
    printf '%s\n' 'cmake_minimum_required(VERSION 3.13)' 'project(v C)' \
        "find_package(ferry $((major + 1)).0 QUIET)" 'if(ferry_FOUND)' '  message(FATAL_ERROR "accepted")' 'endif()' \
        > "$tmp/CMakeLists.txt"
    if cmake -S "$tmp" -B "$tmp/cm-version" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/out" 2>&1; then
        ok "find_package(ferry $((major + 1)).0) refuses ferry $version"
    else
        bad "find_package(ferry $((major + 1)).0) accepted ferry $version"; show "$tmp/out"
    fi
fi

if [ "$("$prefix/bin/ferry" --version 2>&1)" = "ferry $version" ]; then
    ok "bin/ferry --version: ferry $version"
else
    bad "bin/ferry --version: $("$prefix/bin/ferry" --version 2>&1 | head -n 1)"
fi

# ---- uninstall ----
if mk PREFIX="$prefix" uninstall > "$tmp/out" 2>&1 && [ -z "$(installed "$prefix")" ]; then
    ok "make uninstall leaves no file under the prefix"
else
    bad "make uninstall: left$(installed "$prefix" | tr '\n' ' ')"; show "$tmp/out"
fi

# ---- DESTDIR: staged under DESTDIR, ferry.pc naming the final PREFIX ----
dest=$tmp/dest
if mk DESTDIR="$dest" PREFIX=/opt/ferry install > "$tmp/out" 2>&1 &&
   [ "$(installed "$dest")" = "$(expected | sed 's|^|opt/ferry/|')" ] &&
   grep -qx 'prefix=/opt/ferry' "$dest/opt/ferry/lib/pkgconfig/ferry.pc" &&
   grep -q '"/opt/ferry/lib"' "$dest/opt/ferry/lib/cmake/ferry/ferry-config.cmake"; then
    if mk DESTDIR="$dest" PREFIX=/opt/ferry uninstall > "$tmp/out" 2>&1 && [ -z "$(installed "$dest")" ]; then
        ok "make install/uninstall DESTDIR=... PREFIX=/opt/ferry (ferry.pc says prefix=/opt/ferry)"
    else
        bad "make uninstall DESTDIR=...: left$(installed "$dest" | tr '\n' ' ')"; show "$tmp/out"
    fi
else
    bad "make install DESTDIR=... PREFIX=/opt/ferry"; show "$tmp/out"
fi
finish
