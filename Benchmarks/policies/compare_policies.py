"""Replay the same Zipf traces through libCacheSim and through Larder's MemoryStore.

For each alpha, one seeded trace of --requests requests over --objects objects is written
twice, as little-endian UInt32 ids (read by LarderPolicyReplay) and in libCacheSim's
oracleGeneral binary format (read by libCacheSim's TraceReader), so both sides replay the
same sequence. Objects have unit size. Cache sizes are 0.1%, 1% and 10% of the objects.

Targets: Larder LRU == libCacheSim LRU exactly; Larder S3-FIFO within 2% (relative) of
libCacheSim S3FIFO and below LRU at every point. Exits 1 if a target is missed.
"""
import argparse
import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import libcachesim as lcs

HERE = Path(__file__).resolve().parent


def zipf_trace(objects: int, requests: int, alpha: float, seed: int) -> np.ndarray:
    """Object ids 1...objects, P(rank r) ∝ 1/r^alpha, ranks shuffled onto ids."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, objects + 1, dtype=np.float64) ** alpha
    ranks = rng.choice(objects, size=requests, p=weights / weights.sum())
    ids = rng.permutation(objects)[ranks] + 1
    return ids.astype(np.uint32)


def write_traces(ids: np.ndarray, stem: Path) -> tuple[Path, Path]:
    u32 = stem.with_suffix(".u32")
    ids.astype("<u4").tofile(u32)
    # oracleGeneral: uint32 clock time, uint64 obj id, uint32 obj size, int64 next access vtime.
    record = np.dtype([("time", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    rows = np.zeros(len(ids), dtype=record)
    rows["time"] = np.arange(len(ids)) // 1000 + 1
    rows["id"] = ids
    rows["size"] = 1
    rows["next"] = -1
    oracle = stem.with_suffix(".oracleGeneral.bin")
    rows.tofile(oracle)
    return u32, oracle


def libcachesim_miss_ratio(cache_class, oracle: Path, size: int) -> float:
    reader = lcs.TraceReader(str(oracle), lcs.TraceType.ORACLE_GENERAL_TRACE)
    miss_ratio, _byte_miss_ratio = cache_class(size).process_trace(reader)
    return miss_ratio


def larder_miss_ratios(replay: str, u32: Path, sizes: list[int]) -> dict[tuple[str, int], float]:
    output = subprocess.run(
        [replay, "replay", str(u32), *map(str, sizes)], check=True, capture_output=True, text=True
    ).stdout
    result = {}
    for row in csv.DictReader(output.splitlines()):
        result[(row["policy"], int(row["cache_size"]))] = int(row["misses"]) / int(row["requests"])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replay", required=True, help="path to the LarderPolicyReplay binary")
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=2_000_000)
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.8, 1.0, 1.2])
    parser.add_argument("--seed", type=int, default=20231023)
    parser.add_argument("--skip-timing", action="store_true")
    args = parser.parse_args()

    traces = HERE / "traces"
    results = HERE / "results"
    traces.mkdir(exist_ok=True)
    results.mkdir(exist_ok=True)
    sizes = [max(1, args.objects // 1000), args.objects // 100, args.objects // 10]

    rows = []
    for index, alpha in enumerate(args.alphas):
        ids = zipf_trace(args.objects, args.requests, alpha, args.seed + index)
        u32, oracle = write_traces(ids, traces / f"zipf-{alpha:.1f}")
        ours = larder_miss_ratios(args.replay, u32, sizes)
        for size in sizes:
            rows.append({
                "alpha": alpha,
                "cache_size": size,
                "cache_percent": 100 * size / args.objects,
                "lcs_lru": libcachesim_miss_ratio(lcs.LRU, oracle, size),
                "larder_lru": ours[("lru", size)],
                "lcs_s3fifo": libcachesim_miss_ratio(lcs.S3FIFO, oracle, size),
                "larder_s3fifo": ours[("s3fifo", size)],
                "lcs_sieve": libcachesim_miss_ratio(lcs.Sieve, oracle, size),
            })
        print(f"alpha {alpha}: done", file=sys.stderr)

    failures = []
    header = (
        "| α | cache size | libCacheSim LRU | Larder `.lru` | libCacheSim S3FIFO | Larder `.s3fifo` "
        "| S3-FIFO rel. diff | `.s3fifo` vs `.lru` | libCacheSim Sieve (ref.) |"
    )
    lines = [header, "|" + "---|" * 9]
    for row in rows:
        relative = (row["larder_s3fifo"] - row["lcs_s3fifo"]) / row["lcs_s3fifo"]
        gain = (row["larder_s3fifo"] - row["larder_lru"]) / row["larder_lru"]
        row["s3fifo_relative_diff"] = relative
        where = f"α={row['alpha']}, size={row['cache_size']}"
        if abs(row["larder_lru"] - row["lcs_lru"]) > 1e-12:
            failures.append(f"{where}: LRU {row['larder_lru']} != libCacheSim {row['lcs_lru']}")
        if abs(relative) > 0.02:
            failures.append(f"{where}: S3-FIFO differs from libCacheSim by {relative:+.2%}")
        if not row["larder_s3fifo"] < row["larder_lru"]:
            failures.append(f"{where}: S3-FIFO {row['larder_s3fifo']} not below LRU {row['larder_lru']}")
        lines.append(
            f"| {row['alpha']:.1f} | {row['cache_size']:,} ({row['cache_percent']:g}%) "
            f"| {row['lcs_lru']:.4f} | {row['larder_lru']:.4f} "
            f"| {row['lcs_s3fifo']:.4f} | {row['larder_s3fifo']:.4f} | {relative:+.3%} "
            f"| {gain:+.1%} | {row['lcs_sieve']:.4f} |"
        )
    table = "\n".join(lines)
    print(f"\nMiss ratios, {args.requests:,} requests over {args.objects:,} objects per α (seed {args.seed}):\n")
    print(table)

    with open(results / "miss_ratios.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (results / "miss_ratios.md").write_text(table + "\n")
    plot(rows, args, results / "miss_ratios.png")

    if not args.skip_timing:
        timing = subprocess.run([args.replay, "time"], check=True, capture_output=True, text=True).stdout
        (results / "timing.csv").write_text(timing)
        times = {(r["policy"], r["operation"]): float(r["ns_per_op"]) for r in csv.DictReader(timing.splitlines())}
        print("\nRelease-mode time per operation (best of 5 rounds, 10,000 entries, UInt32 keys):\n")
        print("| operation | `.lru` ns | `.s3fifo` ns | s3fifo / lru |")
        print("|---|---|---|---|")
        for operation in ["hit", "miss", "evicting_insert"]:
            lru, s3 = times[("lru", operation)], times[("s3fifo", operation)]
            print(f"| {operation} | {lru:.1f} | {s3:.1f} | {s3 / lru:.2f} |")

    if failures:
        print("\nTARGETS MISSED:\n  " + "\n  ".join(failures))
        return 1
    print("\nAll targets met: LRU equals libCacheSim's exactly; S3-FIFO within 2% of libCacheSim's and below LRU.")
    return 0


def plot(rows, args, path: Path) -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(args.alphas), figsize=(5 * len(args.alphas), 4), sharey=False)
    axes = np.atleast_1d(axes)
    series = [
        ("lcs_lru", "libCacheSim LRU", "C0", "o", "-"),
        ("larder_lru", "Larder .lru", "C0", "x", "--"),
        ("lcs_s3fifo", "libCacheSim S3FIFO", "C3", "o", "-"),
        ("larder_s3fifo", "Larder .s3fifo", "C3", "x", "--"),
        ("lcs_sieve", "libCacheSim Sieve", "C2", ".", ":"),
    ]
    for axis, alpha in zip(axes, args.alphas):
        subset = [row for row in rows if row["alpha"] == alpha]
        x = [row["cache_percent"] for row in subset]
        for key, label, color, marker, style in series:
            axis.plot(x, [row[key] for row in subset], color=color, marker=marker, linestyle=style, label=label)
        axis.set_xscale("log")
        axis.set_xticks(x, [f"{p:g}%" for p in x])
        axis.set_title(f"Zipf α = {alpha}")
        axis.set_xlabel("cache size (% of objects)")
        axis.set_ylabel("miss ratio")
        axis.grid(True, alpha=0.3)
    axes[0].legend()
    figure.suptitle(f"{args.requests:,} requests over {args.objects:,} unit-size objects")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
