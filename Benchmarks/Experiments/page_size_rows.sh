#!/usr/bin/env bash
# page_size_rows.sh: how much of the 4 KiB rows' distance to raw SQLite is the page size?
#
# DiskStore's index uses 2 KiB pages (finding 15), raw SQLite in `baseline` SQLite's default of
# 4 KiB, and a 4 KiB value overflows a 2 KiB page into two overflow pages, each read with its
# own `pread`, against one with 4 KiB pages. This runs, in rotating order over ROUNDS rounds,
# Larder (`LarderCompare cases=disk`), `baseline` with SQLite's default pages, `baseline
# pagesize=2048` (raw SQLite with DiskStore's pages) and diskcache, all with compare.sh's counts,
# and prints the 4 KiB rows: medians over rounds and each contender's per-round ratio to
# diskcache. Build first with compare.sh (it makes the binaries and the venv).
#
#   Benchmarks/Experiments/page_size_rows.sh [ROUNDS, default 5]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
COUNTS=(n100=15000 n4k=8000 n100k=800 n1m=150 ncodec=200 ndigest=300000 nmem=2000000 memcap=10000 openrepeats=5)
LARDER_COMPARE="$(swift build -c release --show-bin-path)/LarderCompare"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/larder-page-size.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
contenders=(larder c c2048 python)
for ((round = 1; round <= ROUNDS; round++)); do
    for ((k = 0; k < ${#contenders[@]}; k++)); do
        name=${contenders[$(((round - 1 + k) % ${#contenders[@]}))]}
        rm -rf "$WORK/run" && mkdir -p "$WORK/run"
        case "$name" in
            larder) "$LARDER_COMPARE" cases=disk dir="$WORK/run" "${COUNTS[@]}" ;;
            c) .build/compare/baseline dir="$WORK/run" "${COUNTS[@]}" ;;
            c2048) .build/compare/baseline dir="$WORK/run" pagesize=2048 "${COUNTS[@]}" ;;
            python) .venv/bin/python Baselines/diskcache_runner.py dir="$WORK/run" "${COUNTS[@]}" ;;
        esac | grep -P '\(4KiB\)\t' | sed "s/^/$round\t/" >>"$WORK/raw.tsv"
    done
done
python3 - "$WORK/raw.tsv" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(lambda: collections.defaultdict(dict))
for line in open(sys.argv[1]):
    round_, case, contender, value, _ = line.rstrip("\n").split("\t")
    rows[case][contender][round_] = float(value)
for case, contenders in rows.items():
    print(case)
    peer = contenders.get("diskcache", {})
    for contender, rounds in contenders.items():
        line = f"  {contender:12s} {statistics.median(rounds.values()):10,.0f} ops/s"
        ratios = [rounds[r] / peer[r] for r in rounds if r in peer]
        if contender != "diskcache" and ratios:
            line += f"   {statistics.median(ratios):.2f}x diskcache (rounds: {', '.join(f'{x:.2f}' for x in ratios)})"
        print(line)
PY
