"""Replay the same Zipf traces through libCacheSim and through Larder's MemoryStore.

For each alpha, one seeded trace of --requests requests over --objects objects is written
twice, as little-endian UInt32 ids (read by LarderPolicyReplay) and in libCacheSim's
oracleGeneral binary format (read by libCacheSim's TraceReader), so both sides replay the
same sequence. Objects have unit size. Cache sizes are 0.1%, 1% and 10% of the objects.

Targets: Larder LRU == libCacheSim LRU exactly; Larder S3-FIFO and W-TinyLFU within 2%
(relative) of libCacheSim's S3FIFO and WTinyLFU, and below LRU, at every point. Exits 1 if a
target is missed.

Variable object sizes: one more trace (alpha 1.0) with a heavy-tailed (Pareto) size per object,
replayed into byte-sized caches of 0.1%, 1% and 10% of the objects' total bytes, for LRU and
W-TinyLFU.
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


def object_sizes(objects: int, seed: int) -> np.ndarray:
    """A heavy-tailed size per object id 1...objects: Pareto (shape 1.5) from 20 bytes, capped
    at 20,000 (mean about 55)."""
    rng = np.random.default_rng(seed)
    sizes = np.minimum(20 * (rng.pareto(1.5, size=objects) + 1), 20_000).astype(np.uint32)
    return np.concatenate([[0], sizes])  # index 0 unused: ids start at 1


def write_traces(ids: np.ndarray, stem: Path, sizes: np.ndarray | None = None) -> tuple[Path, Path]:
    u32 = Path(f"{stem}.u32")
    ids.astype("<u4").tofile(u32)
    # oracleGeneral: uint32 clock time, uint64 obj id, uint32 obj size, int64 next access vtime.
    record = np.dtype([("time", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    rows = np.zeros(len(ids), dtype=record)
    rows["time"] = np.arange(len(ids)) // 1000 + 1
    rows["id"] = ids
    rows["size"] = 1 if sizes is None else sizes[ids]
    rows["next"] = -1
    oracle = Path(f"{stem}.oracleGeneral.bin")
    if sizes is not None:
        sizes[ids].astype("<u4").tofile(f"{stem}.sizes.u32")
    rows.tofile(oracle)
    return u32, oracle


def libcachesim_miss_ratio(cache_class, oracle: Path, size: int) -> float:
    reader = lcs.TraceReader(str(oracle), lcs.TraceType.ORACLE_GENERAL_TRACE)
    miss_ratio, _byte_miss_ratio = cache_class(size).process_trace(reader)
    return miss_ratio


def larder_miss_ratios(replay: str, u32: Path, sizes: list[int], sized: bool = False) -> dict[tuple[str, int], float]:
    command = [replay, "replay", str(u32)]
    if sized:
        command = [replay, "replay-sized", str(u32), str(u32).removesuffix(".u32") + ".sizes.u32"]
    # Swift seeds `hashValue` per process; W-TinyLFU's sketch positions come from it, so without
    # a fixed seed its miss ratios change in the last digit from run to run.
    environment = {**os.environ, "SWIFT_DETERMINISTIC_HASHING": "1"}
    output = subprocess.run(
        [*command, *map(str, sizes)], check=True, capture_output=True, text=True, env=environment
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
                "lcs_wtinylfu": libcachesim_miss_ratio(lcs.WTinyLFU, oracle, size),
                "larder_wtinylfu": ours[("wtinylfu", size)],
            })
        print(f"alpha {alpha}: done", file=sys.stderr)

    # Variable sizes: alpha 1.0, byte capacities of 0.1%, 1% and 10% of all objects' bytes.
    object_bytes = object_sizes(args.objects, args.seed + 100)
    ids = zipf_trace(args.objects, args.requests, 1.0, args.seed + 101)
    u32, oracle = write_traces(ids, traces / "zipf-1.0-sized", sizes=object_bytes)
    total = int(object_bytes.sum())
    capacities = [total // 1000, total // 100, total // 10]
    ours = larder_miss_ratios(args.replay, u32, capacities, sized=True)
    sized_rows = []
    for capacity in capacities:
        sized_rows.append({
            "alpha": 1.0,
            "cache_bytes": capacity,
            "cache_percent": 100 * capacity / total,
            "lcs_lru": libcachesim_miss_ratio(lcs.LRU, oracle, capacity),
            "larder_lru": ours[("lru", capacity)],
            "lcs_wtinylfu": libcachesim_miss_ratio(lcs.WTinyLFU, oracle, capacity),
            "larder_wtinylfu": ours[("wtinylfu", capacity)],
        })
    print("variable sizes: done", file=sys.stderr)

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

    def check_wtinylfu(row, where):
        relative = (row["larder_wtinylfu"] - row["lcs_wtinylfu"]) / row["lcs_wtinylfu"]
        gain = (row["larder_wtinylfu"] - row["larder_lru"]) / row["larder_lru"]
        row["wtinylfu_relative_diff"] = relative
        if abs(relative) > 0.02:
            failures.append(f"{where}: W-TinyLFU differs from libCacheSim by {relative:+.2%}")
        if not row["larder_wtinylfu"] < row["larder_lru"]:
            failures.append(f"{where}: W-TinyLFU {row['larder_wtinylfu']} not below LRU {row['larder_lru']}")
        return relative, gain

    w_lines = [
        "| α | cache size | libCacheSim LRU | Larder `.lru` | libCacheSim WTinyLFU | Larder `.wTinyLFU` "
        "| W-TinyLFU rel. diff | `.wTinyLFU` vs `.lru` | Larder `.s3fifo` (ref.) |",
        "|" + "---|" * 9,
    ]
    for row in rows:
        relative, gain = check_wtinylfu(row, f"α={row['alpha']}, size={row['cache_size']}")
        w_lines.append(
            f"| {row['alpha']:.1f} | {row['cache_size']:,} ({row['cache_percent']:g}%) "
            f"| {row['lcs_lru']:.4f} | {row['larder_lru']:.4f} "
            f"| {row['lcs_wtinylfu']:.4f} | {row['larder_wtinylfu']:.4f} | {relative:+.3%} "
            f"| {gain:+.1%} | {row['larder_s3fifo']:.4f} |"
        )
    w_table = "\n".join(w_lines)
    print("\nW-TinyLFU, same traces:\n")
    print(w_table)

    s_lines = [
        "| α | cache size (bytes) | libCacheSim LRU | Larder `.lru` | libCacheSim WTinyLFU | Larder `.wTinyLFU` "
        "| W-TinyLFU rel. diff | `.wTinyLFU` vs `.lru` |",
        "|" + "---|" * 8,
    ]
    for row in sized_rows:
        where = f"sized, {row['cache_bytes']} bytes"
        if abs(row["larder_lru"] - row["lcs_lru"]) > 1e-12:
            failures.append(f"{where}: LRU {row['larder_lru']} != libCacheSim {row['lcs_lru']}")
        relative, gain = check_wtinylfu(row, where)
        s_lines.append(
            f"| 1.0 | {row['cache_bytes']:,} ({row['cache_percent']:.2g}%) "
            f"| {row['lcs_lru']:.4f} | {row['larder_lru']:.4f} "
            f"| {row['lcs_wtinylfu']:.4f} | {row['larder_wtinylfu']:.4f} | {relative:+.3%} | {gain:+.1%} |"
        )
    s_table = "\n".join(s_lines)
    print("\nVariable object sizes (Pareto 1.5 from 20 bytes), byte capacities:\n")
    print(s_table)

    with open(results / "miss_ratios.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (results / "miss_ratios.md").write_text(table + "\n")
    (results / "wtinylfu_miss_ratios.md").write_text(w_table + "\n")
    (results / "sized_miss_ratios.md").write_text(s_table + "\n")
    with open(results / "sized_miss_ratios.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(sized_rows[0]))
        writer.writeheader()
        writer.writerows(sized_rows)
    plot(rows, args, results / "miss_ratios.png")
    plot_wtinylfu(rows, sized_rows, args, results / "wtinylfu_miss_ratios.png")

    if not args.skip_timing:
        timing = subprocess.run([args.replay, "time"], check=True, capture_output=True, text=True).stdout
        (results / "timing.csv").write_text(timing)
        times = {(r["policy"], r["operation"]): float(r["ns_per_op"]) for r in csv.DictReader(timing.splitlines())}
        print("\nRelease-mode time per operation (best of 5 rounds, 10,000 entries, UInt32 keys):\n")
        print("| operation | `.lru` ns | `.s3fifo` ns | `.wTinyLFU` ns | s3fifo / lru | wTinyLFU / lru |")
        print("|---|---|---|---|---|---|")
        for operation in ["hit", "zipf_hit", "miss", "evicting_insert"]:
            lru, s3, w = times[("lru", operation)], times[("s3fifo", operation)], times[("wtinylfu", operation)]
            print(f"| {operation} | {lru:.1f} | {s3:.1f} | {w:.1f} | {s3 / lru:.2f} | {w / lru:.2f} |")

    if failures:
        print("\nTARGETS MISSED:\n  " + "\n  ".join(failures))
        return 1
    print("\nAll targets met: LRU equals libCacheSim's exactly; S3-FIFO and W-TinyLFU within 2% of libCacheSim's and below LRU.")
    return 0


LRU_SERIES = [
    ("lcs_lru", "libCacheSim LRU", "C0", "o", "-"),
    ("larder_lru", "Larder .lru", "C0", "x", "--"),
]


def plot_panels(panels, series, suptitle: str, xlabel: str, path: Path) -> None:
    """One miss-ratio panel per (title, rows) against cache size, a line per series."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels), 4), sharey=False)
    axes = np.atleast_1d(axes)
    for axis, (title, subset) in zip(axes, panels):
        x = [row["cache_percent"] for row in subset]
        for key, label, color, marker, style in series:
            if all(key in row for row in subset):
                axis.plot(x, [row[key] for row in subset], color=color, marker=marker, linestyle=style, label=label)
        axis.set_xscale("log")
        axis.set_xticks(x, [f"{p:.2g}%" for p in x])
        axis.set_title(title)
        axis.set_xlabel(xlabel)
        axis.set_ylabel("miss ratio")
        axis.grid(True, alpha=0.3)
    axes[0].legend()
    figure.suptitle(suptitle)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def plot(rows, args, path: Path) -> None:
    series = [
        *LRU_SERIES,
        ("lcs_s3fifo", "libCacheSim S3FIFO", "C3", "o", "-"),
        ("larder_s3fifo", "Larder .s3fifo", "C3", "x", "--"),
        ("lcs_sieve", "libCacheSim Sieve", "C2", ".", ":"),
    ]
    panels = [(f"Zipf α = {alpha}", [row for row in rows if row["alpha"] == alpha]) for alpha in args.alphas]
    suptitle = f"{args.requests:,} requests over {args.objects:,} unit-size objects"
    plot_panels(panels, series, suptitle, "cache size (% of objects)", path)


def plot_wtinylfu(rows, sized_rows, args, path: Path) -> None:
    series = [
        *LRU_SERIES,
        ("lcs_wtinylfu", "libCacheSim WTinyLFU", "C1", "o", "-"),
        ("larder_wtinylfu", "Larder .wTinyLFU", "C1", "x", "--"),
        ("larder_s3fifo", "Larder .s3fifo", "C3", ".", ":"),
    ]
    panels = [(f"Zipf α = {alpha}, unit sizes", [row for row in rows if row["alpha"] == alpha]) for alpha in args.alphas]
    panels.append(("Zipf α = 1.0, Pareto sizes", sized_rows))
    suptitle = f"W-TinyLFU: {args.requests:,} requests over {args.objects:,} objects"
    plot_panels(panels, series, suptitle, "cache size (% of objects / of bytes)", path)


if __name__ == "__main__":
    sys.exit(main())
