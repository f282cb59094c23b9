"""The Python baseline for Larder's remote tier: pymemcache against the same server and keys.

Prints one TSV line per measurement: contender, operation, in-flight, operations per second.
    python3 pymemcache_runner.py PORT OPS [ONLY]   (ONLY: get1, get_many or set1 runs just that one)
"""
import sys
import time

from pymemcache.client.base import Client


def main() -> None:
    port, ops = int(sys.argv[1]), int(sys.argv[2])
    only = sys.argv[3] if len(sys.argv) > 3 else None
    client = Client(("127.0.0.1", port), no_delay=True)
    keys = [f"p:key-{i}" for i in range(1000)]
    value = b"v" * 100
    for key in keys:
        client.set(key, value)
    if only in (None, "get1"):
        start = time.perf_counter()
        for i in range(ops):
            assert client.get(keys[i % 1000]) == value
        print(f"pymemcache\tget\t1\t{ops / (time.perf_counter() - start):.0f}")
    if only in (None, "get_many"):
        start = time.perf_counter()
        fetched = 0
        for i in range(0, ops, 32):
            batch = [keys[(i + j) % 1000] for j in range(32)]
            fetched += len(client.get_many(batch))
        print(f"pymemcache\tget\t32\t{fetched / (time.perf_counter() - start):.0f}")
    if only in (None, "set1"):
        start = time.perf_counter()
        for i in range(ops):
            client.set(keys[i % 1000], value)
        print(f"pymemcache\tset\t1\t{ops / (time.perf_counter() - start):.0f}")


if __name__ == "__main__":
    main()
