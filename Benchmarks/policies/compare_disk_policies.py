"""Replay the same sized Zipf traces through libCacheSim and through a real Larder DiskStore.

For each alpha, one seeded trace of --requests requests over --objects objects, each object
with a heavy-tailed size (Pareto, shape 1.5, from 20 bytes, capped at --max-size), is written
as UInt32 ids plus UInt32 sizes (read by `LarderPolicyReplay replay-disk`, which drives a
DiskStore in a temporary directory under .lru and .s3fifo) and in libCacheSim's oracleGeneral
format (read by libCacheSim's TraceReader).

What the disk limit counts is the charge of a row, not its value size: every value is inline,
under an 8-byte key, so a row costs 2 x (size + 8) + 128 bytes, and a store with `sizeLimit` S
evicts when the rows' charge exceeds chargeLimit(S) = S - (wal(S) - 64 KiB) + 96 KiB, with
wal(S) = min(4 MiB, max(64 KiB, S / 16)) (Sources/Larder/Disk/DiskStore+Eviction.swift). The
size total never binds first (it is under half the charge). libCacheSim therefore gets each
object's charge as its size and chargeLimit(S) as its capacity, so both sides count the same
bytes against the same bound. Capacities are about 2%, 5% and 15% of all objects' charge (the charge limit is at least
96 KiB, so the smallest cache needs enough objects behind it).

Targets: disk .lru == libCacheSim LRU exactly; disk .s3fifo within 2% (relative) of
libCacheSim's S3FIFO and below LRU on every row. Exits 1 if a target is missed.
"""
import argparse
import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import libcachesim as lcs

from compare_policies import HERE, libcachesim_miss_ratio, plot_panels, zipf_trace

KEY_BYTES = 8


def charge(size):
    """What an inline row with an 8-byte key and no metadata costs under the size limit."""
    return 2 * (size + KEY_BYTES) + 128


def charge_limit(size_limit: int) -> int:
    wal = min(4 << 20, max(64 << 10, size_limit // 16))
    return max(0, size_limit - (wal - (64 << 10))) + (96 << 10)


def size_limit_for(capacity: int) -> int:
    """The smallest sizeLimit whose charge limit is at least `capacity` (charge_limit grows
    with the limit)."""
    low, high = 0, 4 * capacity + (1 << 20)
    while low < high:
        middle = (low + high) // 2
        if charge_limit(middle) < capacity:
            low = middle + 1
        else:
            high = middle
    return low


def object_sizes(objects: int, seed: int, max_size: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    sizes = np.minimum(20 * (rng.pareto(1.5, size=objects) + 1), max_size).astype(np.uint32)
    return np.concatenate([[0], sizes])  # index 0 unused: ids start at 1


def write_disk_traces(ids: np.ndarray, sizes: np.ndarray, stem: Path) -> tuple[Path, Path, Path]:
    u32 = Path(f"{stem}.u32")
    ids.astype("<u4").tofile(u32)
    size_file = Path(f"{stem}.sizes.u32")
    sizes[ids].astype("<u4").tofile(size_file)
    record = np.dtype([("time", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    rows = np.zeros(len(ids), dtype=record)
    rows["time"] = np.arange(len(ids)) // 1000 + 1
    rows["id"] = ids
    rows["size"] = charge(sizes[ids].astype(np.int64))
    rows["next"] = -1
    oracle = Path(f"{stem}.charges.oracleGeneral.bin")
    rows.tofile(oracle)
    return u32, size_file, oracle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replay", required=True, help="path to the LarderPolicyReplay binary")
    parser.add_argument("--objects", type=int, default=50_000)
    parser.add_argument("--requests", type=int, default=250_000)
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.8, 1.0, 1.2])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.02, 0.05, 0.15])
    parser.add_argument("--max-size", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=20231023)
    args = parser.parse_args()

    traces = HERE / "traces"
    results = HERE / "results"
    traces.mkdir(exist_ok=True)
    results.mkdir(exist_ok=True)
    sizes = object_sizes(args.objects, args.seed + 200, args.max_size)
    total_charge = int(charge(sizes[1:].astype(np.int64)).sum())
    size_limits = [size_limit_for(int(total_charge * fraction)) for fraction in args.fractions]
    largest = int(charge(int(sizes.max())))
    smallest_small_queue = int(charge_limit(size_limits[0]) * 0.1)
    if largest >= smallest_small_queue:
        print(f"the largest object ({largest} charged bytes) does not fit libCacheSim's smallest small queue "
              f"({smallest_small_queue}): lower --max-size", file=sys.stderr)
        return 2

    rows = []
    for index, alpha in enumerate(args.alphas):
        ids = zipf_trace(args.objects, args.requests, alpha, args.seed + 300 + index)
        u32, size_file, oracle = write_disk_traces(ids, sizes, traces / f"disk-zipf-{alpha:.1f}")
        command = [args.replay, "replay-disk", str(u32), str(size_file), *map(str, size_limits)]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        ours = {(r["policy"], int(r["size_limit"])): int(r["misses"]) / int(r["requests"])
                for r in csv.DictReader(output.splitlines())}
        for size_limit in size_limits:
            capacity = charge_limit(size_limit)
            rows.append({
                "alpha": alpha,
                "size_limit": size_limit,
                "capacity": capacity,
                "cache_percent": 100 * capacity / total_charge,
                "lcs_lru": libcachesim_miss_ratio(lcs.LRU, oracle, capacity),
                "larder_lru": ours[("lru", size_limit)],
                "lcs_s3fifo": libcachesim_miss_ratio(lcs.S3FIFO, oracle, capacity),
                "larder_s3fifo": ours[("s3fifo", size_limit)],
            })
        print(f"disk, alpha {alpha}: done", file=sys.stderr)

    failures = []
    lines = [
        "| α | sizeLimit (charge limit, % of all charge) | libCacheSim LRU | DiskStore `.lru` | libCacheSim S3FIFO "
        "| DiskStore `.s3fifo` | S3-FIFO rel. diff | `.s3fifo` vs `.lru` |",
        "|" + "---|" * 8,
    ]
    for row in rows:
        where = f"α={row['alpha']}, sizeLimit={row['size_limit']}"
        relative = (row["larder_s3fifo"] - row["lcs_s3fifo"]) / row["lcs_s3fifo"]
        gain = (row["larder_s3fifo"] - row["larder_lru"]) / row["larder_lru"]
        row["s3fifo_relative_diff"] = relative
        if abs(row["larder_lru"] - row["lcs_lru"]) > 1e-12:
            failures.append(f"{where}: disk LRU {row['larder_lru']} != libCacheSim {row['lcs_lru']}")
        if abs(relative) > 0.02:
            failures.append(f"{where}: disk S3-FIFO differs from libCacheSim by {relative:+.2%}")
        if not (row["larder_s3fifo"] < row["larder_lru"] and row["larder_s3fifo"] < row["lcs_lru"]):
            failures.append(f"{where}: disk S3-FIFO {row['larder_s3fifo']} not below LRU")
        lines.append(
            f"| {row['alpha']:.1f} | {row['size_limit']:,} ({row['capacity']:,}, {row['cache_percent']:.2g}%) "
            f"| {row['lcs_lru']:.4f} | {row['larder_lru']:.4f} "
            f"| {row['lcs_s3fifo']:.4f} | {row['larder_s3fifo']:.4f} | {relative:+.3%} | {gain:+.1%} |"
        )
    table = "\n".join(lines)
    print(f"\nDisk miss ratios, {args.requests:,} requests over {args.objects:,} objects per α "
          f"(Pareto 1.5 sizes from 20 bytes, max {args.max_size:,}; seed {args.seed}):\n")
    print(table)
    (results / "disk_miss_ratios.md").write_text(table + "\n")
    with open(results / "disk_miss_ratios.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    series = [
        ("lcs_lru", "libCacheSim LRU", "C0", "o", "-"),
        ("larder_lru", "DiskStore .lru", "C0", "x", "--"),
        ("lcs_s3fifo", "libCacheSim S3FIFO", "C3", "o", "-"),
        ("larder_s3fifo", "DiskStore .s3fifo", "C3", "x", "--"),
    ]
    panels = [(f"Zipf α = {alpha}", [row for row in rows if row["alpha"] == alpha]) for alpha in args.alphas]
    suptitle = f"DiskStore: {args.requests:,} requests over {args.objects:,} Pareto-sized objects"
    plot_panels(panels, series, suptitle, "capacity (% of all objects' charged bytes)", results / "disk_miss_ratios.png")

    if failures:
        print("\nTARGETS MISSED:\n  " + "\n  ".join(failures))
        return 1
    print("\nAll disk targets met: .lru equals libCacheSim's LRU; .s3fifo within 2% of libCacheSim's S3FIFO and below LRU.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
