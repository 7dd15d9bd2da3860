#!/bin/sh
# Streaming shards from nginx on 127.0.0.1 against the same shards on disk,
# for the figure in docs/BENCHMARKS.md ("Remote shards"). Rates on a shared
# 2-core machine move by 10 to 30 % from run to run, so the two sources are
# alternated, ROUNDS times, and the median of the per-round ratios is the
# figure (each ratio compares two runs seconds apart). Beside the rates, per
# run: ferry's CPU time per image (user + system, /usr/bin/time) and nginx's
# over the run, and the share of the machine's CPU time left idle
# (/proc/stat): on a quiet machine, idle while ferry runs is workers waiting.
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
cpu_ticks() { # PID -> its and its children's (nginx's worker) user + system ticks so far
    for p in "$1" $(pgrep -P "$1"); do cat "/proc/$p/stat" 2>/dev/null; done |
        awk '{t += $14 + $15} END {print t + 0}'
}
idle_ticks() { # -> the machine's idle and total clock ticks so far
    awk '/^cpu /{t = 0; for (i = 2; i <= NF; i++) t += $i; print $5 + $6, t}' /proc/stat
}
tck=$(getconf CLK_TCK)
rate() { # LIST OPTIONS... -> images/s, digest, ferry CPU us/image, nginx CPU s, idle %
    list=$1
    shift
    rm -rf "$tmp/cache"
    n0=$(cpu_ticks "$pid") i0=$(idle_ticks)
    FERRY_CACHE_DIR="$tmp/cache" /usr/bin/time -f "%U %S" -o "$tmp/time" \
        "$ferry" bench "$list" "$@" > "$tmp/out" 2>&1
    n1=$(cpu_ticks "$pid") i1=$(idle_ticks)
    awk -v n="$((n1 - n0))" -v tck="$tck" -v i0="$i0" -v i1="$i1" -v t="$(cat "$tmp/time")" '
        /images of .* epoch/ {imgs = $4 * $8}
        /^ +[0-9]+ +[0-9]+ / {r = $7; d = $NF}
        END {split(i0, a, " "); split(i1, b, " "); split(t, c, " ")
             printf "%s %s %.2f %.2f %.1f\n", r, d, (c[1] + c[2]) * 1e6 / imgs, n / tck,
                    100 * (b[1] - a[1]) / (b[2] - a[2])}' "$tmp/out"
}
echo "round  disk img/s  nginx img/s  ratio   CPU us/img disk nginx(ferry+server)  idle % disk nginx"
i=1
while [ "$i" -le "$rounds" ]; do
    d=$(rate "$tmp/disk.txt" "$@") u=$(rate "$tmp/url.txt" "$@")
    echo "$i $d $u" | awk '{if ($3 != $8) printf "round %d: digests differ: disk %s, nginx %s\n", $1, $3, $8 > "/dev/stderr"
        printf "%5d  %10s  %11s  %.3f  %8.2f %8.2f + %.2f s  %6.1f %6.1f\n", $1, $2, $7, $7 / $2,
               $4, $9, $10, $6, $11}'
    i=$((i + 1))
done | tee "$tmp/rounds"
awk '{print $4}' "$tmp/rounds" | sort -n |
    awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
         printf "median ratio (nginx / disk) over %d rounds: %.3f\n", NR, m}'
uptime
