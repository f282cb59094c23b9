#!/usr/bin/env bash
# Gets per second of LarderRedis's RedisStore against redis-benchmark, on one redis-server
# started here on loopback, at 1 and 32 requests in flight (100-byte values, no pipelining
# beyond what concurrent callers share).
#
# Usage: Benchmarks/Redis/run.sh [seconds]   (default 5 per run; release build of the helper)
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-5}"
swift build -c release --traits Redis --product LarderRedisHelper >/dev/null
helper="$(swift build -c release --traits Redis --show-bin-path)/LarderRedisHelper"
port=$((20000 + RANDOM % 10000))
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no --loglevel warning &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
redis-cli -p "$port" set bench:x "$(head -c 100 /dev/zero | tr '\0' a)" >/dev/null
echo "| in flight | RedisStore gets/s | redis-benchmark GET/s | ratio |"
echo "|---|---|---|---|"
for inflight in 1 32; do
    ours=$("$helper" bench "$port" "$inflight" "$seconds" | awk '/gets\/s/ {print $2}')
    theirs=$(redis-benchmark -p "$port" -t get -d 100 -c "$inflight" -n $((inflight == 1 ? 20000 : 200000)) -q \
        | tr '\r' '\n' | sed -n 's/.*GET: \([0-9]*\).*requests per second.*/\1/p' | tail -1)
    echo "| $inflight | $ours | $theirs | $(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }') |"
done
echo
echo "$(date -u +%FT%TZ), commit $(git rev-parse --short HEAD), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
