#!/usr/bin/env bash
# Gets per second of LarderRedis's RedisStore against redis-benchmark (C) and redis-py (Python)
# on one redis-server, and beside them, in the same rounds, LarderMemcached's MemcachedStore
# against pymemcache on one memcached: 100-byte values, at 1 request in flight and at 32.
#
# At 32 in flight: Larder runs 32 concurrent calls (pipelined on the store's 2 connections) and
# a batch of 32 keys (`entries(forKeys:)`: one MGET); redis-benchmark runs 32 connections of one
# GET each (`-c 32`) and one connection with 32 GETs pipelined (`-P 32`); redis-py pipelines 32
# GETs (`pipeline(transaction=False)`); pymemcache sends a get_many of 32.
#
#   Benchmarks/Redis/run.sh            OPS=20000 ROUNDS=3 (median of the rounds)
#
# LARDER_BIN=path skips the release build of LarderRedisHelper; MEMCACHED_BENCH_BIN=path skips
# the build of Benchmarks/Memcached's LarderMemcachedBench.
# Needs: redis-server, redis-benchmark, memcached, python3 with redis and pymemcache
# (pip install redis pymemcache). Not for CI: figures on a shared machine are only comparable
# within one run. Writes results/redis.md (and the raw rows to results/redis-raw.tsv).
set -euo pipefail
cd "$(dirname "$0")"
OPS=${OPS:-20000}
ROUNDS=${ROUNDS:-3}
command="OPS=$OPS ROUNDS=$ROUNDS${LARDER_BIN:+ LARDER_BIN=$LARDER_BIN}${MEMCACHED_BENCH_BIN:+ MEMCACHED_BENCH_BIN=$MEMCACHED_BENCH_BIN} Benchmarks/Redis/run.sh"
mkdir -p results

if [ -n "${LARDER_BIN:-}" ]; then
    larder="$LARDER_BIN"
else
    (cd ../.. && swift build -c release --traits Redis --product LarderRedisHelper >&2)
    larder="$(cd ../.. && swift build -c release --traits Redis --show-bin-path)/LarderRedisHelper"
fi
if [ -n "${MEMCACHED_BENCH_BIN:-}" ]; then
    memcached_bench="$MEMCACHED_BENCH_BIN"
else
    (cd ../Memcached && swift build -c release --product LarderMemcachedBench >&2)
    memcached_bench="$(cd ../Memcached && swift build -c release --show-bin-path)/LarderMemcachedBench"
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() { for _ in $(seq 200); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $1))" 2>/dev/null && return; sleep 0.05; done; }
redis_port=$(free_port)
memcached_port=$(free_port)
while [ "$memcached_port" = "$redis_port" ]; do memcached_port=$(free_port); done
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no --loglevel warning >/dev/null &
redis_server=$!
user_args=()
[ "$(id -u)" -eq 0 ] && user_args=(-u root)
memcached -l 127.0.0.1 -p "$memcached_port" -U 0 -m 256 -t 2 "${user_args[@]}" &
memcached_server=$!
trap 'kill "$redis_server" "$memcached_server" 2>/dev/null || true' EXIT
wait_for "$redis_port"
wait_for "$memcached_port"
echo "redis-server on 127.0.0.1:$redis_port, memcached on 127.0.0.1:$memcached_port" >&2
# redis-benchmark reads the key `key:__rand_int__` (no -r): give it a 100-byte value.
redis-cli -p "$redis_port" set key:__rand_int__ "$(head -c 100 /dev/zero | tr '\0' v)" >/dev/null

# redis_benchmark NAME IN_FLIGHT ARGS…: one TSV row from redis-benchmark's CSV output.
redis_benchmark() {
    local name=$1 inflight=$2
    shift 2
    redis-benchmark -p "$redis_port" -t get -n "$OPS" --csv "$@" \
        | awk -F'"' -v name="$name" -v inflight="$inflight" '$2 == "GET" { printf "%s\tget\t%s\t%.0f\n", name, inflight, $4 }'
}

raw=results/redis-raw.tsv
: >"$raw"
for round in $(seq "$ROUNDS"); do
    echo "round $round" >&2
    "$larder" bench "$redis_port" "$OPS" >>"$raw"
    redis_benchmark redis-benchmark 1 -c 1 >>"$raw"
    redis_benchmark redis-benchmark 32 -c 32 >>"$raw"
    redis_benchmark redis-benchmark-pipelined 32 -c 1 -P 32 >>"$raw"
    python3 redis_py_runner.py "$redis_port" "$OPS" >>"$raw"
    LARDER_BENCH_NO_BATCHES=1 "$memcached_bench" "$memcached_port" "$OPS" "store	get" | sed 's/^larder-store/larder-memcached/' >>"$raw"
    python3 ../Memcached/pymemcache_runner.py "$memcached_port" "$OPS" get1 >>"$raw"
    python3 ../Memcached/pymemcache_runner.py "$memcached_port" "$OPS" get_many >>"$raw"
done

echo "results/redis.md: $command" >&2
python3 - "$raw" "$command" <<'PY' | tee results/redis.md
import datetime, os, platform, statistics, subprocess, sys
rows = {}
for line in open(sys.argv[1]):
    name, op, inflight, rate = line.rstrip("\n").split("\t")
    rows.setdefault((name, op, inflight), []).append(float(rate))
median = {k: statistics.median(v) for k, v in rows.items()}
load = open("/proc/loadavg").read().split()[:3]
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
redis = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2]
print(f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC at commit {commit} on "
      f"{platform.machine()}, {os.cpu_count()} cores (load average {' '.join(load)} at the end: a shared, noisy "
      f"machine), Redis {redis}; median of {len(next(iter(rows.values())))} rounds. Ratios are only meaningful "
      "within one run.")
print()
print(f"Command: `{sys.argv[2]}` (one redis-server and one memcached on 127.0.0.1, started by the script; "
      "100-byte values; the Redis stores without tracking).")
print()
print("| contender | operation | in flight | gets/s (median) |")
print("|---|---|---|---|")
for (name, op, inflight), rate in sorted(median.items()):
    print(f"| {name} | {op} | {inflight} | {rate:,.0f} |")
def ratio(a, b):
    return median.get(a, 0) / median[b] if median.get(b) else float("nan")
print()
print("| comparison | ratio |")
print("|---|---|")
for label, a, b in [
    ("RedisStore get at 1 in flight / redis-benchmark -c 1", ("larder-redis", "get", "1"), ("redis-benchmark", "get", "1")),
    ("RedisStore get at 1 in flight / redis-py get", ("larder-redis", "get", "1"), ("redis-py", "get", "1")),
    ("RedisStore get at 32 in flight / redis-benchmark -c 32", ("larder-redis", "get", "32"), ("redis-benchmark", "get", "32")),
    ("RedisStore get at 32 in flight / redis-benchmark -P 32", ("larder-redis", "get", "32"), ("redis-benchmark-pipelined", "get", "32")),
    ("RedisStore get at 32 in flight / redis-py pipeline of 32", ("larder-redis", "get", "32"), ("redis-py", "get", "32")),
    ("RedisStore batch of 32 (one MGET) / redis-benchmark -P 32", ("larder-redis", "get-batch", "32"), ("redis-benchmark-pipelined", "get", "32")),
    ("RedisStore batch of 32 (one MGET) / redis-py pipeline of 32", ("larder-redis", "get-batch", "32"), ("redis-py", "get", "32")),
    ("RedisStore / MemcachedStore, get at 1 in flight", ("larder-redis", "get", "1"), ("larder-memcached", "get", "1")),
    ("RedisStore / MemcachedStore, get at 32 in flight", ("larder-redis", "get", "32"), ("larder-memcached", "get", "32")),
    ("MemcachedStore get at 1 in flight / pymemcache get", ("larder-memcached", "get", "1"), ("pymemcache", "get", "1")),
    ("MemcachedStore get at 32 in flight / pymemcache get_many of 32", ("larder-memcached", "get", "32"), ("pymemcache", "get", "32")),
]:
    print(f"| {label} | {ratio(a, b):.2f} |")
PY
