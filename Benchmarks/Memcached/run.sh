#!/usr/bin/env bash
# Larder's remote tier side by side with libmemcached (C) and pymemcache (Python), in one run
# against the same local memcached: get and set of 100-byte values at 1 request in flight and
# at 32 (the baselines batch 32 keys in one multi-get; Larder pipelines 32 concurrent calls, and
# its `get-batch` rows send 32 keys as one quiet `mg` pipeline: `MemcachedStore.entries(forKeys:)`
# and `Storage.values(forKeys:)`, one batch in flight at a time, as the baselines' multi-gets).
# Larder is measured twice: callers on Swift's global executor (most callers), and callers that
# prefer the store's event loop (`withTaskExecutorPreference(store.taskExecutor)`: no thread hop),
# callers spread over every connection's loop (`store.taskExecutors`, the `store-on-loops` rows),
# and the gets once more with swift-nio's event loops installed as Swift's global executor.
# The `set-batch` row writes 100 values in one `MemcachedStore.setValues(_:)` (one quiet `ms`
# pipeline), beside pymemcache's set_many of 100 and 100 single sets.
# Beside that one server, in the same rounds, a pool of 3 servers (setup.sh starts both): the
# `-pool` rows are each contender's pooled client over the same 3 servers: libmemcached with
# MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED (multi-get of 32, get at 1), pymemcache's HashClient
# (get_many of 32, get at 1), and Larder's `MemcachedStore(servers:)` (get at 1 and at 32 in
# flight from Swift's global executor, and its quiet batch of 32 split by server).
#
#   Benchmarks/Memcached/run.sh            OPS=100000 ROUNDS=3 (median of the rounds)
#
# LARDER_BIN=path skips the build and measures that binary; BEFORE_BIN=path also measures an
# older build in the same rounds (its rows are named `before-larder-…`), for before/after ratios.
#
# Needs: memcached, libmemcached-dev, python3 with pymemcache (pip install pymemcache).
# Not for CI: figures on a shared machine are only comparable within one run.
set -euo pipefail
cd "$(dirname "$0")"
OPS=${OPS:-100000}
ROUNDS=${ROUNDS:-3}
# shellcheck source=setup.sh
source ./setup.sh
# The command that produced the results, named in them.
command="OPS=$OPS ROUNDS=$ROUNDS${LARDER_BIN:+ LARDER_BIN=$LARDER_BIN}${BEFORE_BIN:+ BEFORE_BIN=$BEFORE_BIN} Benchmarks/Memcached/run.sh"

raw=results/memcached-raw.tsv
crashes=.build/compare/crashes.txt
: >"$raw"
: >"$crashes"
# larder ARGS…: one Larder bench process; a crash costs only its rows, and is named in the results.
larder() {
    local status=0
    "$@" >>"$raw" 2>.build/compare/crash.log || status=$?
    if [ "$status" -ne 0 ]; then
        where=$(sed -n '/crashed:/,$p' .build/compare/crash.log | grep -m1 -o 'Sources/LarderMemcached/[^ ]*' || true)
        echo "round $round: \`$(basename "$1") ${*:2}\` (${LARDER_BENCH_NIO_EXECUTOR:+NIO as the global executor, }exit $status) ${where:+crashed at $where}" | tr '\t' ' ' >>"$crashes"
        echo "warning: $* exited $status" >&2
    fi
}
for round in $(seq "$ROUNDS"); do
    echo "round $round" >&2
    .build/compare/baseline_libmemcached "$port" "$OPS" >>"$raw"
    python3 pymemcache_runner.py "$port" "$OPS" >>"$raw"
    LARDER_BENCH_NO_BATCHES=1 larder "$LARDER" "$port" "$OPS"
    for batch in "store	get-batch" "storage	get-batch" "store-on-loop	get-batch" "storage-on-loop	get-batch" "store	set-batch"; do
        larder "$LARDER" "$port" "$OPS" "$batch"
    done
    # The same gets with swift-nio's event loops as Swift's global executor (a server's choice).
    LARDER_BENCH_NIO_EXECUTOR=1 larder "$LARDER" "$port" "$OPS" "store	get"
    if [ -n "${BEFORE_BIN:-}" ]; then
        "$BEFORE_BIN" "$port" "$OPS" | sed 's/^larder-/before-larder-/' >>"$raw"
    fi
    # The pool of 3: each contender's pooled client over the same servers.
    .build/compare/baseline_libmemcached "$pool_ports" "$OPS" get1 >>"$raw"
    .build/compare/baseline_libmemcached "$pool_ports" "$OPS" mget >>"$raw"
    python3 pymemcache_runner.py "$pool_ports" "$OPS" get1 >>"$raw"
    python3 pymemcache_runner.py "$pool_ports" "$OPS" get_many >>"$raw"
    LARDER_BENCH_NO_BATCHES=1 larder "$LARDER" "$pool_ports" "$OPS"
    larder "$LARDER" "$pool_ports" "$OPS" "store	get-batch"
done

echo "results/memcached.md: $command" >&2
python3 - "$raw" "$command" "$crashes" <<'PY' | tee results/memcached.md
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, op, inflight, rate = line.rstrip("\n").split("\t")
    rows.setdefault((name, op, inflight), []).append(float(rate))
median = {k: statistics.median(v) for k, v in rows.items()}
import datetime, os
load = open("/proc/loadavg").read().split()[:3]
print(f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores "
      f"(load average {' '.join(load)} at the end: a shared, noisy machine), median of the rounds; "
      "ratios are only meaningful within one run.")
print()
print(f"Command: `{sys.argv[2]}` (one memcached for the one-server rows and a pool of 3 for the "
      "`-pool` rows, all on 127.0.0.1, started by setup.sh).")
print()
print("| contender | operation | in flight | ops/s (median) |")
print("|---|---|---|---|")
for (name, op, inflight), rate in sorted(median.items()):
    print(f"| {name} | {op} | {inflight} | {rate:,.0f} |")
def ratio(a, b):
    return median.get(a, 0) / median[b] if median.get(b) else float("nan")
print()
print("| target | ratio | met |")
print("|---|---|---|")
for label, a, b, goal in [
    # Issue #43's targets.
    ("Larder get at 1 in flight from Swift's default executor ≥ 1× pymemcache (one server)", ("larder-store", "get", "1"), ("pymemcache", "get", "1"), 1.0),
    ("Pool of 3: Larder get at 32 in flight ≥ 1.5× pymemcache HashClient get_many", ("larder-pool-store", "get", "32"), ("pymemcache-pool", "get", "32"), 1.5),
    ("Pool of 3: Larder get at 32 in flight ≥ 0.6× libmemcached (ketama weighted) multi-get", ("larder-pool-store", "get", "32"), ("libmemcached-pool", "get", "32"), 0.6),
    ("Pool of 3: Larder quiet batch of 32 (entries(forKeys:)) vs libmemcached multi-get (≥ 1)", ("larder-pool-store", "get-batch", "32"), ("libmemcached-pool", "get", "32"), 1.0),
    ("Pool of 3: Larder get at 1 in flight vs libmemcached (≥ 0.8)", ("larder-pool-store", "get", "1"), ("libmemcached-pool", "get", "1"), 0.8),
    ("Larder get at 1 in flight ≥ 0.8× libmemcached", ("larder-store", "get", "1"), ("libmemcached", "get", "1"), 0.8),
    ("Larder get at 32 in flight ≥ 1× libmemcached multi-get", ("larder-store", "get", "32"), ("libmemcached", "get", "32"), 1.0),
    ("Larder get at 32 in flight ≥ 2× pymemcache get_many", ("larder-store", "get", "32"), ("pymemcache", "get", "32"), 2.0),
    ("Larder get at 1 in flight, caller on the store's loop, ≥ 0.8× libmemcached", ("larder-store-on-loop", "get", "1"), ("libmemcached", "get", "1"), 0.8),
    ("Larder get at 32 in flight, callers on the store's loop, ≥ 1× libmemcached multi-get", ("larder-store-on-loop", "get", "32"), ("libmemcached", "get", "32"), 1.0),
    ("Larder get at 32 in flight, callers on the store's loop, ≥ 2× pymemcache get_many", ("larder-store-on-loop", "get", "32"), ("pymemcache", "get", "32"), 2.0),
    ("Larder get at 32 in flight, callers spread over the store's loops, ≥ 1× libmemcached multi-get", ("larder-store-on-loops", "get", "32"), ("libmemcached", "get", "32"), 1.0),
    ("Larder get at 32 in flight, callers spread over the store's loops, ≥ 2× pymemcache get_many", ("larder-store-on-loops", "get", "32"), ("pymemcache", "get", "32"), 2.0),
    ("Larder get at 1 in flight, NIO as the global executor, ≥ 0.8× libmemcached", ("larder-nio-executor-store", "get", "1"), ("libmemcached", "get", "1"), 0.8),
    ("Larder get at 32 in flight, NIO as the global executor, ≥ 2× pymemcache get_many", ("larder-nio-executor-store", "get", "32"), ("pymemcache", "get", "32"), 2.0),
    ("Larder quiet batch of 32 (entries(forKeys:)) ≥ 1× libmemcached multi-get", ("larder-store", "get-batch", "32"), ("libmemcached", "get", "32"), 1.0),
    ("Larder quiet batch of 32 (entries(forKeys:)) ≥ 2× pymemcache get_many", ("larder-store", "get-batch", "32"), ("pymemcache", "get", "32"), 2.0),
    ("Larder quiet batch of 32, caller on the store's loop, ≥ 1× libmemcached multi-get", ("larder-store-on-loop", "get-batch", "32"), ("libmemcached", "get", "32"), 1.0),
    ("Larder quiet batch of 32, caller on the store's loop, ≥ 2× pymemcache get_many", ("larder-store-on-loop", "get-batch", "32"), ("pymemcache", "get", "32"), 2.0),
    ("Storage.values(forKeys:) batch of 32 ≥ 1× libmemcached multi-get", ("larder-storage", "get-batch", "32"), ("libmemcached", "get", "32"), 1.0),
    ("Storage.values(forKeys:) batch of 32 ≥ 2× pymemcache get_many", ("larder-storage", "get-batch", "32"), ("pymemcache", "get", "32"), 2.0),
    ("Storage.values(forKeys:) batch of 32, caller on the store's loop, ≥ 1× libmemcached multi-get", ("larder-storage-on-loop", "get-batch", "32"), ("libmemcached", "get", "32"), 1.0),
    ("Storage.values(forKeys:) batch of 32, caller on the store's loop, ≥ 2× pymemcache get_many", ("larder-storage-on-loop", "get-batch", "32"), ("pymemcache", "get", "32"), 2.0),
    ("Larder quiet write batch of 100 (setValues) ≥ 1× pymemcache set_many of 100", ("larder-store", "set-batch", "100"), ("pymemcache", "set", "100"), 1.0),
    ("Larder quiet write batch of 100 (setValues) ≥ 2× 100 single sets at 1 in flight", ("larder-store", "set-batch", "100"), ("larder-store", "set", "1"), 2.0),
    ("Storage get at 1 in flight vs the bare store (≈ 1)", ("larder-storage", "get", "1"), ("larder-store", "get", "1"), 0.8),
    ("Storage get at 32 in flight vs the bare store (≈ 1)", ("larder-storage", "get", "32"), ("larder-store", "get", "32"), 0.8),
    ("Storage batch of 32 vs the bare store's batch (≈ 1)", ("larder-storage", "get-batch", "32"), ("larder-store", "get-batch", "32"), 0.8),
    ("memory hit of a remote-derived value = any memory hit", ("larder-memory-hit", "remote-derived", "1"), ("larder-memory-hit", "local", "1"), 0.9),
]:
    r = ratio(a, b)
    print(f"| {label} | {r:.2f} | {'yes' if r >= goal else 'no'} |")
crashed = [line.strip() for line in open(sys.argv[3]) if line.strip()]
if crashed:
    print()
    print("Crashed (their rows are missing from those rounds; a missing row reads as ratio 0):")
    print()
    for line in crashed:
        print(f"- {line}")
before = sorted(k for k in median if k[0].startswith("before-"))
if before:
    print()
    print("| row | before (ops/s) | after (ops/s) | after / before |")
    print("|---|---|---|---|")
    for key in before:
        after = (key[0][len("before-"):],) + key[1:]
        if after in median:
            print(f"| {' '.join(after)} | {median[key]:,.0f} | {median[after]:,.0f} | {median[after] / median[key]:.2f} |")
PY
