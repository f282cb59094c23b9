"""Turns the raw lines of Benchmarks/compare.sh into one table of medians, ratios and targets.

Input (--raw): `round<TAB>case<TAB>contender<TAB>value<TAB>unit` lines, as compare.sh collects
them from LarderCompare, baseline.c and diskcache_runner.py. Prints a Markdown report and writes
it to --out. Exits 0 whether targets are met or not (a benchmark run is a measurement, not a gate);
a case with no Larder number is shown as "-" and counted as pending.
"""

import argparse
import statistics
import sys
from collections import defaultdict

# Larder contenders, in the order their rows appear. `storage` (Storage<String, Data>, disk tier)
# appears automatically once LarderCompare prints it.
LARDER = [("larder", "Larder"), ("storage", "Storage")]

NAMES = {
    "diskcache": "diskcache",
    "sqlite": "raw SQLite",
    "file": "raw file",
    "zlib": "raw zlib",
    "openssl": "raw OpenSSL",
    "nscache": "NSCache",
    "dict+nslock": "Dictionary+NSLock",
    "lru": "MemoryStore .lru",
    "disk-lru": "DiskStore .lru",
    "1thread": "1 thread",
    "sqlite-1thread": "raw SQLite, 1 thread",
}

# case, peer, min Larder/peer speed ratio, limit, min Larder/limit speed ratio, note on the target.
# A ratio is Larder ops/s divided by the other's ops/s: 2.0 means Larder is twice as fast.
ROWS = [
    ("memory.get-hit", "nscache", 4.0, "dict+nslock", 1 / 1.5, "≥4× NSCache; ≤1.5× the time of Dictionary+NSLock"),
    ("memory.insert-evict", "nscache", None, "dict+nslock", 0.5, "≤2× the time of a Dictionary+NSLock insert"),
    ("memory.get-hit(wTinyLFU)", None, None, "lru", 1 / 1.3, "a W-TinyLFU hit ≤1.3× the time of an .lru hit (#18)"),
    ("disk.set(100B)", "diskcache", 2.0, "sqlite", 0.5, None),
    ("disk.set(4KiB)", "diskcache", 2.0, "sqlite", 0.5, None),
    ("disk.get-hit(100B)", "diskcache", 1.5, "sqlite", 0.5, None),
    ("disk.get-hit(4KiB)", "diskcache", 1.5, "sqlite", 0.5, None),
    ("disk.get-miss", "diskcache", 3.0, "sqlite", 0.9, None),
    ("disk.set(100KiB)", "diskcache", 1.0, "file", 0.7, None),
    ("disk.set(1MiB)", "diskcache", 1.0, "file", 0.7, None),
    ("disk.get-hit(100KiB)", "diskcache", 1.5, "file", 0.7, None),
    ("disk.get-hit(1MiB)", "diskcache", 1.5, "file", 0.7, None),
    ("disk.get-hit(100B, s3fifo)", None, None, "disk-lru", 1.2, "an .s3fifo get-hit ≥1.2× the speed of an .lru one (#18)"),
    ("disk.get-hit(100B, s3fifo, ranked inline)", None, None, "disk-lru", 1.2, "the same, reads ranked on the reading thread"),
    ("disk.get-hit(100B, s3fifo, warm)", None, None, "disk-lru", 1.2, "the same, re-reads of entries read three times before"),
    ("disk.get-hit(100B, 2 threads)", "1thread", 1.6, None, None, "two reading threads vs one (2 cores)"),
    ("disk.get-hit(4KiB, 2 threads)", "1thread", 1.6, None, None, "two reading threads vs one (2 cores)"),
    ("gzip.compress(100KiB text)", None, None, "zlib", 0.9, None),
    ("gzip.decompress(100KiB text)", None, None, "zlib", 0.9, None),
    ("crc32(100KiB)", None, None, "zlib", 0.9, None),
    ("crc32c(100KiB)", None, None, None, None, "the disk checksum since schema 2; GB/s in the samples"),
    ("crc32c(1MiB)", None, None, None, None, "the disk checksum since schema 2; GB/s in the samples"),
    ("md5(64B)", None, None, "openssl", 0.9, None),
    ("sha1(64B)", None, None, "openssl", 0.9, None),
    ("sha256(64B)", None, None, "openssl", 0.9, None),
    ("md5(64KiB)", None, None, "openssl", 0.9, None),
    ("sha1(64KiB)", None, None, "openssl", 0.9, None),
    ("sha256(64KiB)", None, None, "openssl", 0.9, None),
]
OPEN_CASES = ["disk.open(1k)", "disk.open(10k)", "disk.open(100k)"]
OPEN_LIMIT_MS = 50.0
OPEN_FLATNESS = 2.0  # open(100k) at most 2x open(1k)


def load(path):
    samples = defaultdict(list)  # (case, contender) -> [value]
    units = {}
    rounds = set()
    by_round = {}  # (case, contender, round) -> value
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 5:
                continue
            rnd, case, contender, value, unit = parts
            samples[(case, contender)].append(float(value))
            by_round[(case, contender, rnd)] = float(value)
            units[case] = unit
            rounds.add(rnd)
    return samples, units, len(rounds), by_round


def paired_ratio(by_round, case, mine, other):
    """Median over rounds of Larder's value / the other's value in the same round: contenders of
    one round run minutes apart at most, so this follows the machine's load better than a ratio
    of medians."""
    ratios = [value / by_round[(c, other, r)]
              for (c, m, r), value in by_round.items()
              if c == case and m == mine and (c, other, r) in by_round and by_round[(c, other, r)] > 0]
    return statistics.median(ratios) if ratios else None


def fmt_ops(value):
    if value is None:
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M"
    if value >= 1e3:
        return f"{value / 1e3:.1f} k"
    return f"{value:.0f}"


def judge(ratio, target):
    if target is None:
        return ""
    if ratio is None:
        return "pending"
    verdict = "met" if ratio >= target else "**missed**"
    # Within 10% of the target the verdict can flip from run to run on a shared machine.
    return verdict + (" (±10%)" if abs(ratio / target - 1) < 0.1 else "")


def build(samples, units, rounds, by_round, header):
    med = {key: statistics.median(values) for key, values in samples.items()}
    spread = {key: (min(v), max(v)) for key, v in samples.items()}
    out = list(header)
    out.append(f"ops/s are medians of {rounds} interleaved rounds (each round runs every contender once, "
               "in a rotating order). A ratio is Larder's speed over the other's, taken within each round "
               "and then the median over rounds: 2.00 = twice as fast, 0.50 = takes twice the time. "
               "A target is met when the ratio reaches it.")
    out.append("")
    out.append("| case | Larder ops/s | peer | peer ops/s | Larder/peer | target | | limit | limit ops/s | Larder/limit | target | |")
    out.append("|---|---:|---|---:|---:|---:|---|---|---:|---:|---:|---|")
    tally = defaultdict(int)
    present = [c for c, _ in LARDER if any(k[1] == c for k in med)] or ["larder"]
    for contender, label in LARDER:
        if contender not in present:
            continue
        for case, peer, peer_target, limit, limit_target, _note in ROWS:
            mine = med.get((case, contender))
            if contender != "larder" and mine is None:
                continue  # Storage only runs the disk and memory cases
            cells = [f"{case}" + ("" if contender == "larder" else f" [{label}]"), fmt_ops(mine)]
            for other, target in ((peer, peer_target), (limit, limit_target)):
                if other is None:
                    cells += ["", "", "", "", ""]
                    continue
                theirs = med.get((case, other))
                ratio = paired_ratio(by_round, case, contender, other)
                verdict = judge(ratio, target)
                if verdict:
                    tally["met" if verdict.startswith("met") else "pending" if verdict == "pending" else "missed"] += 1
                cells += [NAMES.get(other, other), fmt_ops(theirs),
                          "-" if ratio is None else f"{ratio:.2f}",
                          "" if target is None else f"≥ {target:.2f}", verdict]
            out.append("| " + " | ".join(cells) + " |")
    out.append("")

    # Two reading threads: Larder's scaling beside raw SQLite's own in the same rounds (baseline.c:
    # a connection per thread, a read transaction per get). Not a target: what the machine gives.
    scaling = []
    for case in ("disk.get-hit(100B, 2 threads)", "disk.get-hit(4KiB, 2 threads)"):
        larder = paired_ratio(by_round, case, "larder", "1thread")
        raw = paired_ratio(by_round, case, "sqlite", "sqlite-1thread")
        if larder is not None or raw is not None:
            scaling.append(f"| {case} | {'-' if larder is None else f'{larder:.2f}×'} | "
                           f"{'-' if raw is None else f'{raw:.2f}×'} |")
    if scaling:
        out.append("Two reading threads over one, each taken within a round (median over rounds): Larder "
                   "beside raw SQLite reading the same keys, a connection per thread (the reference, not "
                   "a target).")
        out.append("")
        out.append("| case | Larder 2 threads / 1 | raw SQLite 2 threads / 1 |")
        out.append("|---|---:|---:|")
        out += scaling
        out.append("")

    # Open time: absolute target.
    out.append(f"Open time of a `DiskStore` (open, read `totalCount`, one lookup, close; median of 5 "
               f"opens per round): target < {OPEN_LIMIT_MS:.0f} ms at every size, and flat "
               f"(100k ≤ {OPEN_FLATNESS:.0f}× 1k).")
    out.append("")
    out.append("| case | Larder ms | target | |")
    out.append("|---|---:|---:|---|")
    opens = []
    for case in OPEN_CASES:
        value = med.get((case, "larder"))
        opens.append(value)
        verdict = "pending" if value is None else ("met" if value < OPEN_LIMIT_MS else "**missed**")
        tally["met" if verdict == "met" else "pending" if verdict == "pending" else "missed"] += 1
        out.append(f"| {case} | {'-' if value is None else f'{value:.1f}'} | < {OPEN_LIMIT_MS:.0f} | {verdict} |")
    if opens[0] is not None and opens[-1] is not None:
        flat = opens[-1] / opens[0]
        verdict = "met" if flat <= OPEN_FLATNESS else "**missed**"
        tally["met" if verdict == "met" else "missed"] += 1
        out.append(f"| open(100k) / open(1k) | {flat:.2f}× | ≤ {OPEN_FLATNESS:.0f}× | {verdict} |")
    else:
        tally["pending"] += 1
        out.append(f"| open(100k) / open(1k) | - | ≤ {OPEN_FLATNESS:.0f}× | pending |")
    out.append("")
    out.append(f"Targets: {tally['met']} met, {tally['missed']} missed, {tally['pending']} pending. "
               "\"(±10%)\" marks a ratio within 10% of its target: on a shared machine such a verdict can "
               "flip between runs.")
    out.append("")

    # Every sample, for the record.
    out.append("<details><summary>All samples (min / median / max over rounds)</summary>")
    out.append("")
    out.append("| case | contender | unit | min | median | max | rounds |")
    out.append("|---|---|---|---:|---:|---:|---:|")
    for (case, contender) in sorted(med):
        lo, hi = spread[(case, contender)]
        out.append(f"| {case} | {contender} | {units.get(case, '')} | {lo:.1f} | {med[(case, contender)]:.1f} | "
                   f"{hi:.1f} | {len(samples[(case, contender)])} |")
    out.append("")
    out.append("</details>")
    return "\n".join(out) + "\n", tally


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--raw", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--header", action="append", default=[], help="a line for the report's header")
    args = parser.parse_args()
    samples, units, rounds, by_round = load(args.raw)
    if not samples:
        sys.exit("report.py: no samples in " + args.raw)
    header = ["# Larder side by side: diskcache, raw SQLite/file/zlib/OpenSSL, Foundation", ""]
    header += [f"- {line}" for line in args.header]
    header.append("")
    text, _ = build(samples, units, rounds, by_round, header)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
