"""The Python baseline for Larder's remote tier: pymemcache against the same server and keys.

Prints one TSV line per measurement: contender, operation, in-flight, operations per second.
    python3 pymemcache_runner.py PORT OPS [ONLY]   (ONLY: get1, get_many, set1 or set_many runs just that one)
    python3 pymemcache_runner.py PORT,PORT,PORT OPS [ONLY]

With several ports it is pymemcache's pooled client, `HashClient`, over 127.0.0.1 on each port
(its own rendezvous hashing: each client reads back the keys it placed), and names its rows
`pymemcache-pool`; its get_many asks each server for its part of the 32 keys, one after another.
Every set waits for its reply (`noreply=False`; pymemcache's default sends and moves on), as
Larder's writes learn whether each value was stored; set_many writes 100 values per call.
"""
import sys
import time

from pymemcache.client.base import Client
from pymemcache.client.hash import HashClient


def main() -> None:
    ports, ops = [int(port) for port in sys.argv[1].split(",")], int(sys.argv[2])
    only = sys.argv[3] if len(sys.argv) > 3 else None
    if len(ports) > 1:
        name = "pymemcache-pool"
        client = HashClient([("127.0.0.1", port) for port in ports], no_delay=True)
    else:
        name = "pymemcache"
        client = Client(("127.0.0.1", ports[0]), no_delay=True)
    keys = [f"p:key-{i}" for i in range(1000)]
    value = b"v" * 100
    for key in keys:
        client.set(key, value)
    if only in (None, "get1"):
        start = time.perf_counter()
        for i in range(ops):
            assert client.get(keys[i % 1000]) == value
        print(f"{name}\tget\t1\t{ops / (time.perf_counter() - start):.0f}")
    if only in (None, "get_many"):
        start = time.perf_counter()
        fetched = 0
        for i in range(0, ops, 32):
            batch = [keys[(i + j) % 1000] for j in range(32)]
            fetched += len(client.get_many(batch))
        print(f"{name}\tget\t32\t{fetched / (time.perf_counter() - start):.0f}")
    if only in (None, "set1"):
        start = time.perf_counter()
        for i in range(ops):
            client.set(keys[i % 1000], value, noreply=False)
        print(f"{name}\tset\t1\t{ops / (time.perf_counter() - start):.0f}")
    if only in (None, "set_many"):
        start = time.perf_counter()
        for i in range(0, ops, 100):
            first = i % 1000
            assert not client.set_many({key: value for key in keys[first:first + 100]}, noreply=False)
        print(f"{name}\tset\t100\t{ops / (time.perf_counter() - start):.0f}")


if __name__ == "__main__":
    main()
