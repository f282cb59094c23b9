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

raw=results/memcached-raw.tsv
: >"$raw"
for round in $(seq "$ROUNDS"); do
    echo "round $round" >&2
    .build/compare/baseline_libmemcached "$port" "$OPS" >>"$raw"
    python3 pymemcache_runner.py "$port" "$OPS" >>"$raw"
    "$LARDER" "$port" "$OPS" >>"$raw"
    # The same gets with swift-nio's event loops as Swift's global executor (a server's choice).
    LARDER_BENCH_NIO_EXECUTOR=1 "$LARDER" "$port" "$OPS" "store	get" >>"$raw"
    if [ -n "${BEFORE_BIN:-}" ]; then
        "$BEFORE_BIN" "$port" "$OPS" | sed 's/^larder-/before-larder-/' >>"$raw"
    fi
done

python3 - "$raw" <<'PY' | tee results/memcached.md
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
    ("Storage get at 1 in flight vs the bare store (≈ 1)", ("larder-storage", "get", "1"), ("larder-store", "get", "1"), 0.8),
    ("Storage get at 32 in flight vs the bare store (≈ 1)", ("larder-storage", "get", "32"), ("larder-store", "get", "32"), 0.8),
    ("Storage batch of 32 vs the bare store's batch (≈ 1)", ("larder-storage", "get-batch", "32"), ("larder-store", "get-batch", "32"), 0.8),
    ("memory hit of a remote-derived value = any memory hit", ("larder-memory-hit", "remote-derived", "1"), ("larder-memory-hit", "local", "1"), 0.9),
]:
    r = ratio(a, b)
    print(f"| {label} | {r:.2f} | {'yes' if r >= goal else 'no'} |")
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
