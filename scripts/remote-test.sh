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
    cat > "$tmp/nginx/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $tmp/nginx; proxy_temp_path $tmp/nginx;
    fastcgi_temp_path $tmp/nginx; uwsgi_temp_path $tmp/nginx; scgi_temp_path $tmp/nginx;
    server { listen 127.0.0.1:$port; root $tmp/www; location / { } }
}
CONF
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
echo "$pass passed, $fail failed, $skipn skipped"
[ "$fail" -eq 0 ] && [ $rc -eq 0 ]
