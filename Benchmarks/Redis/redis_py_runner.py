"""The Python baseline for Larder's Redis tier: redis-py against the same server.

Prints one TSV line per measurement: contender, operation, in-flight, operations per second.
    python3 redis_py_runner.py PORT OPS

`get 1` is one GET at a time on one connection; `get 32` sends 32 GETs at once in a
non-transactional pipeline (redis-py's way to have 32 requests in flight on one connection).
"""
import sys
import time

import redis


def main() -> None:
    port, ops = int(sys.argv[1]), int(sys.argv[2])
    client = redis.Redis(host="127.0.0.1", port=port, protocol=3)
    keys = [f"py:key-{i}" for i in range(1000)]
    value = b"v" * 100
    for key in keys:
        client.set(key, value)
    start = time.perf_counter()
    for i in range(ops):
        assert client.get(keys[i % 1000]) == value
    print(f"redis-py\tget\t1\t{ops / (time.perf_counter() - start):.0f}")
    start = time.perf_counter()
    fetched = 0
    pipeline = client.pipeline(transaction=False)
    for i in range(0, ops, 32):
        for j in range(32):
            pipeline.get(keys[(i + j) % 1000])
        replies = pipeline.execute()
        assert all(reply == value for reply in replies)
        fetched += len(replies)
    print(f"redis-py\tget\t32\t{fetched / (time.perf_counter() - start):.0f}")


if __name__ == "__main__":
    main()
