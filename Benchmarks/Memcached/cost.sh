#!/usr/bin/env bash
# Where the time of a remote get goes: for each contender's get, the client's CPU and the
# memcached server's CPU per key, beside the rate. On a 2-core machine that runs both, the
# sum bounds the rate: no client can fetch faster than 2 cores / (its CPU + the server's CPU)
# per key, and a client that waits for each reply (one batch or one call in flight) gets at
# most 1 / (the sum) per key.
#
#   Benchmarks/Memcached/cost.sh        OPS_BATCH=640000 OPS_SINGLE=40000 ROUNDS=3 (median)
#
# Each measurement runs alone in its own process (the contenders' ONLY argument); the CPU of a
# run that only sets up (1,000 sets) is subtracted. Client CPU is the child's rusage (user +
# system); server CPU is memcached's utime + stime from /proc (10 ms ticks, so runs last
# seconds). LARDER_BIN=path measures that build. Needs what run.sh needs.
set -euo pipefail
cd "$(dirname "$0")"
OPS_BATCH=${OPS_BATCH:-640000}
OPS_SINGLE=${OPS_SINGLE:-40000}
ROUNDS=${ROUNDS:-3}
# shellcheck source=setup.sh
source ./setup.sh

python3 - "$port" "$server" "$OPS_BATCH" "$OPS_SINGLE" "$ROUNDS" "$LARDER" <<'PY' | tee results/memcached-cost.md
import datetime, os, statistics, subprocess, sys
port, server, ops_batch, ops_single, rounds, larder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
tick = 1 / os.sysconf("SC_CLK_TCK")
libmemcached = ".build/compare/baseline_libmemcached"

def server_cpu():
    fields = open(f"/proc/{server}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * tick

def run(command):
    """Runs `command`; returns its output, its CPU seconds and the server's CPU seconds meanwhile."""
    before = server_cpu()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        sys.exit(f"{command} failed ({status})")
    return output, usage.ru_utime + usage.ru_stime, server_cpu() - before

T = "\t"
# (label, in flight, ops, command, setup-only command)
cases = [
    ("libmemcached get", 1, ops_single, [libmemcached, port, str(ops_single), "get1"], [libmemcached, port, "0", "none"]),
    ("pymemcache get", 1, ops_single, ["python3", "pymemcache_runner.py", port, str(ops_single), "get1"], ["python3", "pymemcache_runner.py", port, "0", "none"]),
    ("Larder get", 1, ops_single, [larder, port, str(ops_single), f"store{T}get{T}1"], [larder, port, "0", "setup-only"]),
    ("Larder get, caller on the store's loop", 1, ops_single, [larder, port, str(ops_single), f"store-on-loop{T}get{T}1"], [larder, port, "0", "setup-only"]),
    ("libmemcached multi-get of 32", 32, ops_batch, [libmemcached, port, str(ops_batch), "mget"], [libmemcached, port, "0", "none"]),
    ("pymemcache get_many of 32", 32, ops_batch, ["python3", "pymemcache_runner.py", port, str(ops_batch), "get_many"], ["python3", "pymemcache_runner.py", port, "0", "none"]),
    ("Larder 32 concurrent gets", 32, ops_batch, [larder, port, str(ops_batch), f"store{T}get{T}32"], [larder, port, "0", "setup-only"]),
    ("Larder 32 concurrent gets, callers on the store's loop", 32, ops_batch, [larder, port, str(ops_batch), f"store-on-loop{T}get{T}32"], [larder, port, "0", "setup-only"]),
    ("Larder 32 concurrent gets, callers spread over the store's loops", 32, ops_batch, [larder, port, str(ops_batch), f"store-on-loops{T}get{T}32"], [larder, port, "0", "setup-only"]),
    ("Larder quiet batch of 32", 32, ops_batch, [larder, port, str(ops_batch), f"store{T}get-batch"], [larder, port, "0", "setup-only"]),
    ("Larder quiet batch of 32, caller on the store's loop", 32, ops_batch, [larder, port, str(ops_batch), f"store-on-loop{T}get-batch"], [larder, port, "0", "setup-only"]),
]
results = {}
for round in range(rounds):
    print(f"round {round + 1}", file=sys.stderr)
    for label, inflight, ops, command, setup in cases:
        _, setup_client, setup_server = run(setup)
        output, client, served = run(command)
        rate = float(output.strip().splitlines()[-1].split(T)[-1])
        results.setdefault(label, []).append(
            (rate, (client - setup_client) / ops * 1e6, (served - setup_server) / ops * 1e6))
load = open("/proc/loadavg").read().split()[:3]
print(f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores "
      f"(load average {' '.join(load)} at the end), median of {rounds} rounds; "
      f"{ops_single:,} gets at 1 in flight, {ops_batch:,} at 32. CPU is µs per key, setup subtracted.")
print()
print("| contender | in flight | gets/s | client CPU µs/key | server CPU µs/key | sum | 1 / sum (keys/s) | 2 cores / sum (keys/s) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for label, inflight, *_ in cases:
    rate, client, served = (statistics.median(column) for column in zip(*results[label]))
    total = client + served
    print(f"| {label} | {inflight} | {rate:,.0f} | {client:.2f} | {served:.2f} | {total:.2f} | {1e6 / total:,.0f} | {2e6 / total:,.0f} |")
PY
