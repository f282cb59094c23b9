"""Plots LarderEviction's results (run inside Benchmarks/.venv, which has matplotlib).

    .venv/bin/python Scripts/plot_eviction.py [results]

Reads <results>/eviction.csv and writes
  <results>/eviction-hit-ratio.png   hit ratio vs cache size (% of the key space, log scale), one
                                     line per trace
  <results>/eviction-throughput.png  MemoryStore and reference LRU requests/s vs cache size
and, when <results>/scaling.csv exists, <results>/scaling.png (throughput vs entries).
Also prints both as Markdown tables (for Benchmarks/README.md).
"""

import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def by_trace(rows):
    traces = {}
    for row in rows:
        traces.setdefault(row["trace"], []).append(row)
    return traces


def plot_hit_ratio(rows, out):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for trace, points in by_trace(rows).items():
        xs = [float(p["cache_fraction"]) * 100 for p in points]
        ys = [float(p["hit_ratio"]) for p in points]
        ax.plot(xs, ys, marker="o", label=trace)
    ax.set_xscale("log")
    ax.set_xlabel("cache size (% of the key space)")
    ax.set_ylabel("hit ratio")
    ax.set_ylim(0, 1)
    ax.set_title(f"MemoryStore LRU hit ratio (= reference LRU), {int(rows[0]['requests']):,} requests, "
                 f"{int(float(rows[0]['cache_size']) / float(rows[0]['cache_fraction'])):,} keys", fontsize="medium")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_throughput(rows, out):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for trace, points in by_trace(rows).items():
        xs = [float(p["cache_fraction"]) * 100 for p in points]
        line, = ax.plot(xs, [float(p["memorystore_requests_per_s"]) / 1e6 for p in points], marker="o",
                        label=f"{trace} MemoryStore")
        ax.plot(xs, [float(p["reference_requests_per_s"]) / 1e6 for p in points], linestyle="--",
                color=line.get_color(), alpha=0.5)
    ax.set_xscale("log")
    ax.set_xlabel("cache size (% of the key space)")
    ax.set_ylabel("million requests/s (get, insert on miss)")
    ax.set_title("Replay throughput: MemoryStore (solid) vs plain reference LRU (dashed)", fontsize="medium")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="x-small")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_scaling(rows, out):
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, store in zip(axes, ["memory", "disk"]):
        points = [r for r in rows if r["store"] == store]
        if not points:
            continue
        xs = [int(p["entries"]) for p in points]
        for column, label in [("fill_per_s", "fill"), ("get_per_s", "get"), ("set_per_s", "set (new keys)")]:
            ax.plot(xs, [float(p[column]) for p in points], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("entries")
        ax.set_ylabel("operations/s")
        ax.set_title("MemoryStore" if store == "memory" else "DiskStore (100 B values)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def markdown(rows, scaling):
    sizes = {float(r["cache_fraction"]): int(r["cache_size"]) for r in rows}
    fractions = sorted(sizes)
    lines = ["| trace | " + " | ".join(f"{f * 100:g}% ({sizes[f]:,})" for f in fractions)
             + " | MemoryStore req/s at 1% | reference LRU req/s at 1% |",
             "|---|" + "---:|" * (len(fractions) + 2)]
    for trace, points in by_trace(rows).items():
        cells = {float(p["cache_fraction"]): p for p in points}
        one = cells.get(0.01)
        lines.append(f"| {trace} | " + " | ".join(f"{float(cells[f]['hit_ratio']):.3f}" for f in fractions)
                     + (f" | {float(one['memorystore_requests_per_s']) / 1e6:.2f} M | "
                        f"{float(one['reference_requests_per_s']) / 1e6:.2f} M |" if one else " | | |"))
    if scaling:
        lines += ["", "| store | entries | fill/s | get/s | set (new keys)/s | resident bytes/entry |",
                  "|---|---:|---:|---:|---:|---:|"]
        for r in scaling:
            lines.append(f"| {r['store']} | {int(r['entries']):,} | {float(r['fill_per_s']):,.0f} | "
                         f"{float(r['get_per_s']):,.0f} | {float(r['set_per_s']):,.0f} | {r['rss_bytes_per_entry']} |")
    return "\n".join(lines)


def main():
    results = sys.argv[1] if len(sys.argv) > 1 else "results"
    rows = read(os.path.join(results, "eviction.csv"))
    plot_hit_ratio(rows, os.path.join(results, "eviction-hit-ratio.png"))
    plot_throughput(rows, os.path.join(results, "eviction-throughput.png"))
    scaling_path = os.path.join(results, "scaling.csv")
    scaling = read(scaling_path) if os.path.exists(scaling_path) else []
    if scaling:
        plot_scaling(scaling, os.path.join(results, "scaling.png"))
    print(markdown(rows, scaling))
    print("wrote plots to", results, file=sys.stderr)


if __name__ == "__main__":
    main()
