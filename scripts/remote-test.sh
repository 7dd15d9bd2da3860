#!/bin/sh
# Shards by URL against real servers on 127.0.0.1: nginx (Debian nginx-light)
# serving the test's shards with Range, and s3rver (npm, installed into
# BUILD/npm) for s3:// with signed requests. Starts both, runs
# BUILD/tests/test_remote with FERRY_TEST_URL / FERRY_TEST_S3_URL set, stops
# them. A server whose package cannot be installed is a skip with the reason.
# Every wait is bounded. Prints the test program's lines and a summary.
#   FERRY_BUILD=build sh scripts/remote-test.sh
build=${FERRY_BUILD:-build}
test=$build/tests/test_remote
skip() { echo "skip  remote-test: $1"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }
[ -x "$test" ] || skip "$test not built"
"$test" build_without_curl_refuses_urls 2>&1 | grep -q '^skip' || skip "built without libcurl"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ferry-remote-test-XXXXXX") || exit 1
nginx_pid= s3_pid=
cleanup() {
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null
    [ -n "$s3_pid" ] && kill "$s3_pid" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# A free port on 127.0.0.1, from the kernel.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $((20000 + $$ % 20000))
}

# wait_port PORT: up to 15 s for something to listen there.
wait_port() {
    i=0
    while [ $i -lt 150 ]; do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        command -v bash > /dev/null && bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

notes=
# ---- nginx ----
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || sh scripts/install-deps.sh nginx-light > "$tmp/apt.log" 2>&1
if [ -x "$nginx" ]; then
    port=$(free_port)
    mkdir -p "$tmp/www" "$tmp/nginx"
    chmod a+rx "$tmp" "$tmp/www" # nginx's workers run as nobody under root
    sh scripts/nginx-conf.sh "$tmp/nginx" "$tmp/www" "$port"
    "$nginx" -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" > "$tmp/nginx/out" 2>&1 &
    nginx_pid=$!
    if wait_port "$port"; then
        export FERRY_TEST_URL="http://127.0.0.1:$port" FERRY_TEST_WWW="$tmp/www"
    else
        notes="$notes; nginx did not start: $(tail -n 2 "$tmp/nginx/error.log" "$tmp/nginx/out" 2>/dev/null | tr '\n' ' ')"
    fi
else
    notes="$notes; nginx (Debian nginx-light) cannot be installed: $(tail -n 1 "$tmp/apt.log")"
fi

# ---- s3rver ----
npmdir=$build/npm
s3rver=$npmdir/node_modules/.bin/s3rver
if [ ! -x "$s3rver" ] && command -v npm > /dev/null; then
    mkdir -p "$npmdir"
    timeout 300 npm install --prefix "$npmdir" --no-audit --no-fund --silent s3rver@3 > "$tmp/npm.log" 2>&1
fi
if [ -x "$s3rver" ]; then
    port=$(free_port)
    mkdir -p "$tmp/s3"
    "$s3rver" -d "$tmp/s3" -a 127.0.0.1 -p "$port" --configure-bucket ferry --silent > "$tmp/s3.log" 2>&1 &
    s3_pid=$!
    if wait_port "$port"; then
        export FERRY_TEST_S3_URL="s3://ferry" AWS_ENDPOINT_URL="http://127.0.0.1:$port" \
            AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
        unset AWS_SESSION_TOKEN AWS_ENDPOINT_URL_S3
    else
        notes="$notes; s3rver did not start: $(tail -n 2 "$tmp/s3.log" | tr '\n' ' ')"
    fi
else
    notes="$notes; s3rver (npm) cannot be installed: $(tail -n 1 "$tmp/npm.log" 2>/dev/null)"
fi

[ -n "$notes" ] && echo "remote-test: ${notes#; }"
out=$(timeout -k 5 300 "$test" 2>&1)
rc=$?
printf '%s\n' "$out" | grep -v ' passed, .* failed, .* skipped$'
sum=$(printf '%s\n' "$out" | grep ' passed, .* failed, .* skipped$' | tail -n 1)
set -- $sum
pass=${1:-0} fail=${3:-0} skipn=${5:-0}
[ -n "$sum" ] || fail=$((fail + 1)) # the program died before its summary

# ferry bench on URLs (the shards the test put in nginx's root) reports what it
# did on the network, in the streaming and the random order.
bench=$build/ferry
if [ -z "${FERRY_TEST_URL:-}" ] || [ ! -x "$bench" ]; then
    echo "skip  bench_reports_network_counters"
    echo "  skipped: needs nginx (FERRY_TEST_URL) and $bench"
    skipn=$((skipn + 1))
else
    for f in a.tar b.tar d.tar; do echo "$FERRY_TEST_URL/$f"; done > "$tmp/urls.txt"
    ok=1
    for order in "--stream 8" ""; do
        # shellcheck disable=SC2086 # $order is two words or none
        b=$(FERRY_CACHE_DIR="$tmp/cache" timeout -k 5 120 "$bench" bench "$tmp/urls.txt" \
            --workers 2 --epochs 2 --batch 4 --device cpu $order 2>&1)
        if ! printf '%s\n' "$b" | grep -Eq 'network: [0-9.]+ MB fetched, [0-9]+ requests, [0-9]+ retries; hits [0-9]+, misses [0-9]+, waited [0-9.]+ s'; then
            ok=0
            echo "  ferry bench ${order:-(random)} on URLs printed no network counters:"
            printf '%s\n' "$b" | sed 's/^/    /' | tail -n 12
        fi
    done
    if [ $ok = 1 ]; then
        echo "ok    bench_reports_network_counters"
        pass=$((pass + 1))
    else
        echo "FAIL  bench_reports_network_counters"
        fail=$((fail + 1))
    fi
fi

# ---- ferry pack --upload: to s3rver (signed PUTs), read back by URL ----
ok() { echo "ok    pack-upload $1"; pass=$((pass + 1)); }
bad() { echo "FAIL  pack-upload $1"; fail=$((fail + 1)); }
check() { if [ "$2" = 0 ]; then ok "$1"; else bad "$1"; fi; }
ferry=$build/ferry
if [ -z "$FERRY_TEST_S3_URL" ] || [ ! -x "$ferry" ] || [ ! -x /usr/bin/python3 ]; then
    echo "skip  pack-upload (needs s3rver, $ferry and python3)"
    skipn=$((skipn + 1))
else
    # 60 images of 9x7, 3 classes, as an IDX pair exported to a folder.
    /usr/bin/python3 - "$tmp" <<'PY'
import random, struct, sys
d = sys.argv[1]; n, h, w = 60, 7, 9
r = random.Random(8)
with open(d + "/img.idx", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, n, h, w))
    f.write(bytes(r.randrange(256) for _ in range(n * h * w)))
with open(d + "/lab.idx", "wb") as f:
    f.write(struct.pack(">II", 0x801, n))
    f.write(bytes(r.randrange(3) for _ in range(n)))
PY
    "$ferry" export idx "$tmp/img.idx" "$tmp/lab.idx" "$tmp/folder" > /dev/null 2>&1
    # --index: each shard's index goes up beside it, so the reads by URL
    # below open the shards from their indexes.
    timeout 120 "$ferry" pack "$tmp/folder" "$tmp/packed" --shard-size 10K --index \
        --upload "$FERRY_TEST_S3_URL/packed/" > "$tmp/pack.out" 2>&1
    check "pack --index --upload s3:// exits 0 ($(tail -n 1 "$tmp/pack.out"))" $?
    n=$(ls "$tmp/packed" | grep -c '^shard-.*\.tar$')
    up=$(grep -c "^$FERRY_TEST_S3_URL/packed/shard-[0-9]*\.tar: uploaded" "$tmp/pack.out")
    ix=$(grep -c "^$FERRY_TEST_S3_URL/packed/shard-[0-9]*\.tar\.ferry-index: uploaded" "$tmp/pack.out")
    [ "$n" -gt 1 ] && [ "$up" = "$n" ] && [ "$ix" = "$n" ] &&
        [ "$(grep ": uploaded" "$tmp/pack.out" | tail -n 1 | grep -c "/packed/PACK.txt: uploaded")" = 1 ] &&
        grep -q "/packed/urls.txt: uploaded" "$tmp/pack.out"
    check "$up of $n shards and $ix indexes uploaded, then urls.txt and PACK.txt" $?
    digest() {
        timeout 120 "$ferry" bench "$1" --workers 2 --epochs 1 --batch 4 2> /dev/null |
            awk '$1 ~ /^[0-9]+$/ { print $NF }'
    }
    same=0
    for f in "$tmp/packed"/shard-*.tar; do
        a=$(digest "$f") b=$(digest "$FERRY_TEST_S3_URL/packed/${f##*/}")
        if [ -z "$a" ] || [ "$a" != "$b" ]; then
            same=1
            echo "  ${f##*/}: digest $a on disk, '$b' read back by URL"
        fi
    done
    check "every uploaded shard read back by URL has the local shard's digest" $same
    # What pack printed for the reader: the list OUT/urls.txt and the brace pattern.
    pattern=$(sed -n "s/.*by the pattern '\(.*\)' .*/\1/p" "$tmp/pack.out")
    a=$(digest "$tmp/packed") b=$(digest "$tmp/packed/urls.txt") c=$(digest "$pattern")
    [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ]
    check "OUT/urls.txt and the pattern '$pattern' read the local shards' digest ($a, $b, $c)" $?
    AWS_ACCESS_KEY_ID=wrong AWS_SECRET_ACCESS_KEY=wrong timeout 120 "$ferry" pack "$tmp/folder" "$tmp/packed2" \
        --upload "$FERRY_TEST_S3_URL/p2" > "$tmp/p2.out" 2>&1
    r=$?
    [ "$r" -ne 0 ] && grep -q "$FERRY_TEST_S3_URL/p2/shard-000000.tar: PUT answered HTTP 403" "$tmp/p2.out"
    check "wrong credentials: exit $r, the URL and HTTP 403 named ($(grep "upload:" "$tmp/p2.out"))" $?
    if [ -n "$FERRY_TEST_URL" ]; then
        timeout 120 "$ferry" pack "$tmp/folder" "$tmp/packed3" --upload "$FERRY_TEST_URL/up" \
            > "$tmp/p3.out" 2>&1
        r=$?
        [ "$r" -ne 0 ] && grep -q "$FERRY_TEST_URL/up/shard-000000.tar: PUT answered HTTP 405" "$tmp/p3.out"
        check "nginx refuses PUT: exit $r, the URL and HTTP 405 named ($(grep "upload:" "$tmp/p3.out"))" $?
    fi
fi
echo "$pass passed, $fail failed, $skipn skipped"
[ "$fail" -eq 0 ] && [ $rc -eq 0 ]
