#!/bin/sh
# Streaming shards from nginx on 127.0.0.1 against the same shards on disk,
# for the figure in docs/BENCHMARKS.md ("Remote shards"). Rates on a shared
# 2-core machine move by 10 to 30 % from run to run, so the two sources are
# alternated, ROUNDS times, and the median of the per-round ratios is the
# figure (each ratio compares two runs seconds apart).
#   bench/remote_vs_disk.sh SHARDS_DIR ROUNDS [ferry bench options...]
# SHARDS_DIR holds shard-*.tar (and their .ferry-index, as `ferry pack
# --index` writes them). FERRY: the ferry binary (default build/cpu/ferry).
# Example (the ImageNet recipe on JPEG shards):
#   bench/remote_vs_disk.sh /tmp/rq/www/shards 8 --workers 2 --epochs 10 \
#       --batch 64 --device cpu --stream 64 --rrc 224 --flip
set -u
[ $# -ge 2 ] || { sed -n '2,13p' "$0"; exit 2; }
dir=$(cd "$1" && pwd) || exit 2
rounds=$2
shift 2
ferry=${FERRY:-build/cpu/ferry}
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "needs nginx (Debian nginx-light)"; exit 2; }
tmp=$(mktemp -d)
chmod a+rx "$tmp"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
port=$((20000 + $$ % 20000))
sh "$(dirname "$0")/../scripts/nginx-conf.sh" "$tmp/nginx" "$dir" "$port"
"$nginx" -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" > "$tmp/nginx/out" 2>&1 &
pid=$!
for f in "$dir"/*.tar "$dir"/*.tar.gz; do
    [ -e "$f" ] || continue
    echo "$f" >> "$tmp/disk.txt"
    echo "http://127.0.0.1:$port/${f##*/}" >> "$tmp/url.txt"
done
[ -s "$tmp/disk.txt" ] || { echo "no shards in $dir"; exit 2; }
sleep 1
rate() { # LIST OPTIONS... -> images/s and the digest (both sources must agree)
    list=$1
    shift
    rm -rf "$tmp/cache"
    FERRY_CACHE_DIR="$tmp/cache" "$ferry" bench "$list" "$@" 2>&1 |
        awk '/^ +[0-9]+ +[0-9]+ /{print $7, $NF}'
}
echo "round  disk img/s  nginx img/s  ratio"
i=1
while [ "$i" -le "$rounds" ]; do
    d=$(rate "$tmp/disk.txt" "$@") u=$(rate "$tmp/url.txt" "$@")
    dr=${d% *} ur=${u% *}
    [ "${d#* }" = "${u#* }" ] || echo "round $i: digests differ: disk ${d#* }, nginx ${u#* }" >&2
    echo "$i $dr $ur" | awk '{printf "%5d  %10s  %11s  %.3f\n", $1, $2, $3, $3 / $2}'
    i=$((i + 1))
done | tee "$tmp/rounds"
awk '{print $4}' "$tmp/rounds" | sort -n |
    awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
         printf "median ratio (nginx / disk) over %d rounds: %.3f\n", NR, m}'
uptime
