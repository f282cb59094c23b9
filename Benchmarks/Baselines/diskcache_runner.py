"""Python diskcache peer for Benchmarks/compare.sh.

Runs the disk workload that LarderCompare (Swift) and baseline.c (C) run, against
`diskcache.Cache(directory)` with its defaults (SQLite WAL, synchronous=NORMAL, values of
32 KiB and more in files, 1 GB size limit), and prints one line per case:

    case<TAB>contender<TAB>value<TAB>unit

Usage: diskcache_runner.py dir=/tmp/x n100=20000 n4k=10000 n100k=1000 n1m=200 [...]
"""

import os
import shutil
import sys
import time

import diskcache

MASK64 = (1 << 64) - 1
SIZES = [(100, "100B", "n100"), (4096, "4KiB", "n4k"), (102400, "100KiB", "n100k"), (1048576, "1MiB", "n1m")]


def splitmix64_bytes(count, seed=42):
    """Incompressible bytes: splitmix64(seed 42), little-endian 8 bytes at a time (as baseline.c)."""
    state = seed
    out = bytearray()
    while len(out) < count:
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        z = z ^ (z >> 31)
        out += z.to_bytes(8, "little")
    return bytes(out[:count])


def read_index(i, n):
    """Read order: i * 7919 mod n when that is a permutation (as baseline.c)."""
    from math import gcd

    return (i * 7919) % n if gcd(7919, n) == 1 else i


def report(name, ops, seconds):
    print(f"{name}\tdiskcache\t{ops / seconds:.1f}\tops/s", flush=True)


def warm_page_cache(directory, count):
    """Writes `count` bytes (at most 512 MiB) to a scratch file and deletes it, as baseline.c's
    `warm_page_cache` does: the timed writes then get memory the VM's host already backs."""
    path = os.path.join(directory, "warm-up")
    chunk = bytes(1 << 20)
    with open(path, "wb") as scratch:
        for _ in range(0, min(count, 512 << 20), len(chunk)):
            scratch.write(chunk)
    os.unlink(path)


def bench(directory, size, label, n, with_miss):
    path = os.path.join(directory, f"diskcache-{label}")
    shutil.rmtree(path, ignore_errors=True)
    cache = diskcache.Cache(path)
    base = splitmix64_bytes(size)
    keys = [f"k{label}-{i}" for i in range(n)]
    # Each value differs in its first 8 bytes; building them is outside the timed loop, as in Swift.
    values = [i.to_bytes(8, "little") + base[8:] for i in range(n)]

    os.sync()  # earlier cases' dirty pages are written back before, not during, the timed writes
    warm_page_cache(directory, n * size)
    start = time.perf_counter()
    for key, value in zip(keys, values):
        cache.set(key, value)
    report(f"disk.set({label})", n, time.perf_counter() - start)

    order = [keys[read_index(i, n)] for i in range(n)]
    start = time.perf_counter()
    for key in order:
        value = cache.get(key)
        if value is None or len(value) != size:
            sys.exit(f"diskcache_runner: miss or wrong size for {key}")
    report(f"disk.get-hit({label})", n, time.perf_counter() - start)

    if with_miss:
        misses = [f"miss{label}-{i}" for i in range(n)]
        start = time.perf_counter()
        for key in misses:
            if cache.get(key) is not None:
                sys.exit("diskcache_runner: unexpected hit")
        report("disk.get-miss", n, time.perf_counter() - start)

    cache.close()
    shutil.rmtree(path, ignore_errors=True)


def main():
    args = dict(arg.split("=", 1) for arg in sys.argv[1:])
    directory = args.get("dir", "/tmp/larder-diskcache")
    os.makedirs(directory, exist_ok=True)
    for size, label, count_key in SIZES:
        bench(directory, size, label, int(args.get(count_key, "1000")), with_miss=(size == 100))


if __name__ == "__main__":
    main()
