#!/usr/bin/env bash
# Compares MemoryStore's eviction policies with libCacheSim's on the same Zipf traces.
#
#   Benchmarks/policies/compare_policies.sh [--requests N] [--seed S] [--skip-timing]
#   Benchmarks/policies/compare_policies.sh disk [--requests N] [--objects N]   (DiskStore vs libCacheSim)
#
# Installs libcachesim + matplotlib into Benchmarks/policies/.venv (git-ignored), builds
# LarderPolicyReplay in release mode, and writes the table, CSV and plot to results/.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check "libcachesim==0.3.5" "matplotlib>=3.8" "numpy>=1.26"

swift build -c release --product LarderPolicyReplay
REPLAY="$(swift build -c release --show-bin-path)/LarderPolicyReplay"

# `compare_policies.sh disk [options]`: the DiskStore comparison (compare_disk_policies.py).
if [[ "${1:-}" == "disk" ]]; then
    shift
    # The replayed stores live in tmpfs where there is one: the miss ratios do not depend on
    # the file system, and the root disk of a shared VM makes the run several times slower.
    if [[ -z "${TMPDIR:-}" && -d /dev/shm ]]; then export TMPDIR=/dev/shm; fi
    exec .venv/bin/python compare_disk_policies.py --replay "$REPLAY" "$@"
fi
.venv/bin/python compare_policies.py --replay "$REPLAY" "$@"
