#!/bin/sh
# The headers tell the two libraries apart. <ferry.h> is libferry's umbrella
# and <ferry/train.h> libferry-train's (it includes <ferry.h>): a program that
# includes <ferry.h> and calls every function it declares links against
# libferry alone, and one that includes <ferry/train.h> against both. Checked
# on the build's shared libraries:
#   - every FERRY_API function the headers <ferry.h> reaches declare is defined
#     by libferry.so (nm -D), and a program taking each one's address, built
#     with -lferry only, links;
#   - the same for <ferry/train.h> with -lferry-train -lferry;
#   - every public header says in its opening comment which library it needs
#     ("Library: libferry" or "Library: libferry-train"), and says it truly:
#     a libferry header is reached from <ferry.h>, a libferry-train one is not.
# Prints one line per check and a "N passed, N failed, N skipped" summary.
#   FERRY_BUILD=build sh scripts/header-test.sh
# shellcheck disable=SC2086 # word lists split on purpose
cd "$(dirname "$0")/.." || exit 1
build=${FERRY_BUILD:-build}
cc=${FERRY_INSTALL_CC:-${CC:-cc}}
passed=0 failed=0 skipped=0
ok() { echo "ok    headers $1"; passed=$((passed + 1)); }
bad() { echo "FAIL  headers $1"; failed=$((failed + 1)); }
skip() { echo "skip  headers $1"; skipped=$((skipped + 1)); }
finish() { echo "$passed passed, $failed failed, $skipped skipped"; [ "$failed" -eq 0 ]; exit $?; }

if ! command -v nm >/dev/null 2>&1; then skip "(no nm: install binutils)"; finish; fi
for l in libferry libferry-train; do
    if [ ! -f "$build/$l.so" ]; then skip "($build/$l.so not built: make lib)"; finish; fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-headers-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# The public headers an umbrella reaches, one a line (the preprocessor's list).
reached() {
    printf '#include <%s>\n' "$1" > "$tmp/u.c"
    $cc -std=c11 -MM -Iinclude "$tmp/u.c" | tr ' \\' '\n\n' | grep '^include/.*\.h$' | sort -u
}
# The FERRY_API functions those headers declare (the name before the '(').
declared() { grep -ho '^FERRY_API[^(]*(' $1 | sed 's/ *($//; s/.*[ *]//' | sort -u; }
defined() { nm -D --defined-only "$1" | awk 'NF >= 3 {print $3}' | sed 's/@.*//' | sort -u; }

defined "$build/libferry.so" > "$tmp/core"
defined "$build/libferry-train.so" | sort -u - "$tmp/core" > "$tmp/both"

# umbrella, the symbols it may use, the -l flags, a name for messages
check_umbrella() {
    reached "$1" > "$tmp/hdrs"
    declared "$(cat "$tmp/hdrs")" > "$tmp/api"
    n=$(wc -l < "$tmp/api")
    comm -23 "$tmp/api" "$2" > "$tmp/missing"
    if [ "$n" -gt 0 ] && [ ! -s "$tmp/missing" ]; then
        ok "<$1>: its $n FERRY_API functions are all defined by $4"
    else
        bad "<$1> declares functions $4 does not define: $(head -n 8 "$tmp/missing" | tr '\n' ' ')"
    fi
    # A program that takes every one's address links with these libraries only.
    {
        printf '#include <%s>\nstatic void (*const fns[])(void) = {\n' "$1"
        sed 's/.*/    (void (*)(void))&,/' "$tmp/api"
        printf '};\nint main(void) { return fns[0] == 0; }\n'
    } > "$tmp/p.c"
    if $cc -std=c11 -Wall -Wextra -Werror -Iinclude -o "$tmp/p" "$tmp/p.c" -L"$build" $3 \
           > "$tmp/out" 2>&1; then
        ok "a program calling every function <$1> declares links with $3 alone"
    else
        bad "a program calling every function <$1> declares does not link with $3 alone:"
        grep -o "undefined reference to [^ ]*" "$tmp/out" | sort -u | head -n 8 | sed 's/^/  /'
    fi
}
check_umbrella ferry.h "$tmp/core" "-lferry" "libferry.so"
check_umbrella ferry/train.h "$tmp/both" "-lferry-train -lferry" "libferry.so and libferry-train.so"

# Each header names its library, and the umbrellas agree with it.
reached ferry.h > "$tmp/core_hdrs"
wrong=
for h in include/ferry.h include/ferry/*.h; do
    says=$(head -n 12 "$h" | sed -n 's/.*Library: \(libferry[a-z-]*\).*/\1/p' | head -n 1)
    in_core=no
    grep -qx "$h" "$tmp/core_hdrs" && in_core=yes
    case "$says:$in_core" in
        libferry:yes|libferry-train:no) ;;
        :*) wrong="$wrong $h(says no library)" ;;
        *) wrong="$wrong $h(says $says, reached from <ferry.h>: $in_core)" ;;
    esac
done
if [ -z "$wrong" ]; then
    ok "every public header names its library, as the umbrellas include them"
else
    bad "headers whose 'Library:' line is missing or wrong:$wrong"
fi
finish
