"""Wall time of the quick bench, sequential against 2 Ray workers, on the same cells (issue 12).

Each run writes into its own fresh folder (nothing skipped); corpora embeddings come from the cache (a warm
setup, as the quick bench's target states), and one untimed pass runs first so that neither timed run pays for
filling on-disk caches the other then reuses. The reference is the sequential run measured in the same
invocation; the ratio is sequential / parallel wall time. Keys are seeded (--key-seed) so both runs do the
same work; the numbers of every cell are compared and must agree.

    python benchmarks/bench.py [--corpora rt-polarity,drug-reviews] [--limit N]

Prints one JSON line and appends a dated section to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


def _metrics(folder: Path) -> dict[str, dict[str, float]]:
    out = {}
    for p in sorted((folder / "cells").glob("*.json")):
        rec = json.loads(p.read_text())
        out[p.name] = {k: v["mean"] for k, v in rec["metrics"].items()}
    return out


def main() -> None:
    import torch

    from veil._io import atomic_write_text
    from veil.bench.data import bench_data
    from veil.bench.plan import QUICK_CORPORA, BenchConfig, plan_cells
    from veil.bench.runner import run_bench
    from veil.results import git_commit

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", default=",".join(QUICK_CORPORA))
    ap.add_argument("--limit", type=int, default=None, help="cap every split (a smaller run)")
    args = ap.parse_args()
    corpora = args.corpora.split(",")
    config = BenchConfig(quick=True, key_seed=0, limit=args.limit)
    cells = plan_cells(corpora, config=config)
    for name in corpora:  # warm the embedding cache outside the timed runs
        bench_data(name, True, args.limit)
    load = [os.getloadavg()[0]]
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        # one untimed pass first: cells fill on-disk caches (index and public-corpus embeddings) on their first
        # run, and whichever timed run came first would otherwise pay for both
        warm = run_bench(cells, Path(tmp) / "warm", workers=1, progress=False)
        if warm.failed:
            raise SystemExit(f"{len(warm.failed)} cells failed: {warm.failed[0].error}")
        for workers in (1, 2):
            out = Path(tmp) / f"w{workers}"
            t = time.perf_counter()
            run = run_bench(cells, out, workers=workers, progress=False)
            times[workers] = time.perf_counter() - t
            if run.failed:
                raise SystemExit(f"{len(run.failed)} cells failed: {run.failed[0].error}")
        same = _metrics(Path(tmp) / "w1") == _metrics(Path(tmp) / "w2")
    load.append(os.getloadavg()[0])
    commit = git_commit()
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    machine = {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
               "load_1min": load}
    row = {"benchmark": "bench", "date": now, "git_commit": commit, "machine": machine, "cells": len(cells),
           "corpora": corpora, "limit": args.limit, "sequential_s": times[1], "workers2_s": times[2],
           "speedup": times[1] / times[2], "same_numbers": same}
    print(json.dumps(row))
    lines = [f"\n## quick bench wall time, sequential vs 2 Ray workers, {now}\n", f"- commit: {commit}",
             f"- machine: {machine['platform']}, {machine['cpu_count']} CPUs, torch {machine['torch']}; 1-min load "
             f"average {load[0]:.2f} at the start, {load[1]:.2f} at the end",
             f"- workload: `veil bench --quick` cells on {', '.join(corpora)}"
             + (f" (every split capped at {args.limit})" if args.limit else "")
             + f", {len(cells)} cells, seeded keys, embeddings cached, after one untimed warm-up pass; one run each", "",
             "| engine | wall time | ratio to sequential | same numbers |", "|---|---:|---:|---|",
             f"| sequential (reference) | {times[1]:.0f} s | 1.00x | |",
             f"| Ray, 2 workers | {times[2]:.0f} s | {times[1] / times[2]:.2f}x faster | {'yes' if same else 'NO'} |"]
    atomic_write_text(RESULTS, RESULTS.read_text() + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
