#!/usr/bin/env bash
# Larder side by side with its peers and the hardware, in one run.
#
#   Benchmarks/compare.sh              full run: 5 interleaved rounds (about 8 minutes on 2 busy cores, plus the first build)
#   QUICK=1 Benchmarks/compare.sh      smoke run: small counts, 2 rounds (about 1 minute once built)
#   ROUNDS=7 Benchmarks/compare.sh     more rounds
#
# Contenders, all on the same workload (Benchmarks/README.md, "Workload"):
#   LarderCompare        DiskStore, Storage, MemoryStore, Larder codecs; Dictionary+NSLock, NSCache
#   baseline.c           raw SQLite (WAL, synchronous=NORMAL, one transaction per op), plain files
#                        (tmp + rename, open + read), zlib, OpenSSL EVP digests
#   diskcache_runner.py  Python diskcache.Cache with its defaults
#
# Each round runs every contender once, in a rotating order; report.py prints medians, ratios and
# the target of each row, and writes the same to Benchmarks/results/compare.md.
set -euo pipefail
cd "$(dirname "$0")"
BENCH_DIR=$(pwd)

QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
    ROUNDS=${ROUNDS:-2}
    COUNTS=(n100=2000 n4k=1000 n100k=200 n1m=30 ncodec=40 ndigest=100000 nmem=300000 memcap=10000 openrepeats=3)
else
    ROUNDS=${ROUNDS:-5}
    COUNTS=(n100=15000 n4k=8000 n100k=800 n1m=150 ncodec=200 ndigest=300000 nmem=2000000 memcap=10000 openrepeats=5)
fi
OUT=${OUT:-results/compare.md}

log() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }

# --- 1. What a fresh Debian machine lacks ---------------------------------------------------------
need=()
for package in gcc libsqlite3-dev zlib1g-dev libssl-dev python3-venv; do
    dpkg -s "$package" >/dev/null 2>&1 || need+=("$package")
done
if [ ${#need[@]} -gt 0 ]; then
    log "Installing ${need[*]}"
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${need[@]}"
fi
command -v swift >/dev/null || { echo "compare.sh: swift is not on PATH" >&2; exit 1; }

VENV="$BENCH_DIR/.venv"
if ! "$VENV/bin/python" -c 'import diskcache, matplotlib' 2>/dev/null; then
    log "Creating $VENV (diskcache, matplotlib)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pip
    "$VENV/bin/pip" install --quiet -r Scripts/requirements.txt
fi

# --- 2. Build ----------------------------------------------------------------------------------------
log "Building baseline.c and LarderCompare (release)"
mkdir -p .build/compare
gcc -O2 -Wall -Wextra -pthread -o .build/compare/baseline Baselines/baseline.c -lsqlite3 -lz -lcrypto
swift build -c release --product LarderCompare >&2
LARDER_COMPARE="$(swift build -c release --show-bin-path)/LarderCompare"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/larder-compare.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
RAW="$WORK/raw.tsv"
: >"$RAW"

log "Preparing DiskStores of 1k, 10k and 100k entries for the open-time cases"
"$LARDER_COMPARE" prepare-open opendir="$WORK/open"

# --- 3. Interleaved rounds ---------------------------------------------------------------------------
run_contender() {  # name round
    local dir="$WORK/run"
    rm -rf "$dir"
    mkdir -p "$dir"
    case "$1" in
        larder) "$LARDER_COMPARE" dir="$dir" opendir="$WORK/open" "${COUNTS[@]}" ;;
        c) .build/compare/baseline dir="$dir" "${COUNTS[@]}" ;;
        python) "$VENV/bin/python" Baselines/diskcache_runner.py dir="$dir" "${COUNTS[@]}" ;;
    esac | sed "s/^/$2\t/" >>"$RAW"
    rm -rf "$dir"
}

contenders=(larder c python)
start=$(date +%s)
for ((round = 1; round <= ROUNDS; round++)); do
    for ((k = 0; k < ${#contenders[@]}; k++)); do
        name=${contenders[$(((round - 1 + k) % ${#contenders[@]}))]}
        log "Round $round/$ROUNDS: $name"
        run_contender "$name" "$round"
    done
done
elapsed=$(($(date +%s) - start))

# --- 4. Report ---------------------------------------------------------------------------------------
mkdir -p results
cp "$RAW" "${OUT%.md}-raw.tsv"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
"$VENV/bin/python" Scripts/report.py --raw "$RAW" --out "$OUT" \
    --header "Command: \`$([ "$QUICK" = 1 ] && printf 'QUICK=1 ')Benchmarks/compare.sh\` (ROUNDS=$ROUNDS; ${COUNTS[*]}); $elapsed s of measuring" \
    --header "Date: $(date -u '+%Y-%m-%d %H:%M UTC'); commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')" \
    --header "Machine: $(nproc) cores ($cpu), $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(uname -sr); shared with other builds, so compare ratios, not absolute numbers" \
    --header "Software: $(swift --version 2>/dev/null | head -1); SQLite $(pkg-config --modversion sqlite3 2>/dev/null); zlib $(pkg-config --modversion zlib 2>/dev/null); OpenSSL $(pkg-config --modversion libcrypto 2>/dev/null); Python $("$VENV/bin/python" -c 'import platform; print(platform.python_version())') with diskcache $("$VENV/bin/python" -c 'import diskcache; print(diskcache.__version__)'); gcc -O2"
log "Wrote $BENCH_DIR/$OUT and ${OUT%.md}-raw.tsv"
