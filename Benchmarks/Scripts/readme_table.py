#!/usr/bin/env python3
"""Print the README's small figures table from Benchmarks/results/compare.md.

    python3 Benchmarks/Scripts/readme_table.py [path/to/compare.md]

Picks a few rows of the report that `Benchmarks/compare.sh` writes and prints them as a
Markdown table (Larder's speed, and its ratio to the peer and to the raw baseline), followed
by a line naming the source file, its date and commit. Paste the output into README.md after a
new `compare.sh` run.
"""
import pathlib
import sys

ROWS = [
    ("memory.get-hit", "memory hit"),
    ("memory.insert-evict", "memory insert that evicts"),
    ("disk.get-hit(100B)", "disk hit, 100 B"),
    ("disk.get-hit(4KiB)", "disk hit, 4 KiB"),
    ("disk.get-miss", "disk miss"),
    ("disk.set(100B)", "disk write, 100 B"),
    ("disk.get-hit(1MiB)", "disk hit, 1 MiB (file)"),
    ("disk.set(1MiB)", "disk write, 1 MiB (file)"),
]


def main() -> None:
    default = pathlib.Path(__file__).resolve().parent.parent / "results" / "compare.md"
    path = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else default
    text = path.read_text()
    cells = {}
    stamp = ""
    for line in text.splitlines():
        if line.startswith("- Date:"):
            stamp = line[len("- Date:"):].strip()
        if not line.startswith("| ") or line.startswith("| case"):
            continue
        parts = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(parts) >= 10:
            cells.setdefault(parts[0], parts)
    print("| operation | Larder ops/s | vs. peer | vs. raw baseline |")
    print("|---|---:|---|---|")
    for case, label in ROWS:
        parts = cells.get(case)
        if parts is None:
            continue
        peer = f"{parts[4]}× {parts[2]}" if parts[2] else ""
        limit = f"{parts[9]}× {parts[7]}" if parts[7] else ""
        print(f"| {label} | {parts[1]} | {peer} | {limit} |")
    print()
    print(f"Source: `Benchmarks/{path.parent.name}/{path.name}` ({stamp}), "
          "extracted by `python3 Benchmarks/Scripts/readme_table.py`.")


if __name__ == "__main__":
    main()
