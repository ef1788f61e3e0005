"""Wall time of the quick bench, sequential against 2 Ray workers, on the same cells (issue 12).

Each run writes into its own fresh folder (nothing skipped); corpora embeddings come from the cache (a warm
setup, as the quick bench's target states), and one untimed pass runs first so that neither timed run pays for
filling on-disk caches the other then reuses. The reference is the sequential run measured in the same
invocation; the ratio is sequential / parallel wall time. Keys are seeded (--key-seed) so both runs do the
same work; the numbers of every cell are compared and must agree.

    python benchmarks/bench.py [--corpora rt-polarity,drug-reviews] [--limit N]
    python benchmarks/bench.py --full results/bench-full

``--full DIR`` times nothing: it reads a full bench's cell records (``veil bench --out DIR``, resumable over several
sessions) and records how many of the planned cells are done, their summed cell time per corpus, and the commits
that made them.

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
    ap.add_argument("--full", type=Path, default=None, help="summarise the full bench records in this folder")
    args = ap.parse_args()
    if args.full is not None:
        return full_summary(args.full)
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


def full_summary(folder: Path) -> None:
    """Cell count (done of planned) and summed cell time per corpus of the full bench in ``folder``."""
    from collections import defaultdict

    from veil._io import atomic_write_text
    from veil.bench.plan import FULL_CORPORA, BenchConfig, plan_cells
    from veil.results import git_commit

    planned = plan_cells(list(FULL_CORPORA), config=BenchConfig(quick=False))
    ids = {c.id for c in planned}
    done: dict[str, list[float]] = defaultdict(list)
    commits: set[str] = set()
    for p in sorted((folder / "cells").glob("*.json")):
        rec = json.loads(p.read_text())
        cell = rec.get("config", {}).get("cell", {})
        if cell.get("id") in ids:
            done[cell["corpus"]].append(float(rec.get("wall_time_s", 0.0)))
            commits.add(str(rec.get("git_commit")))
    per = {c: {"planned": sum(1 for x in planned if x.corpus == c), "done": len(done[c]),
               "cell_seconds": round(sum(done[c]), 1)} for c in FULL_CORPORA}
    total = sum(len(v) for v in done.values())
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    row = {"benchmark": "bench-full", "date": now, "git_commit": git_commit(), "folder": str(folder),
           "planned": len(planned), "done": total, "cell_seconds": round(sum(sum(v) for v in done.values()), 1),
           "record_commits": sorted(commits), "per_corpus": per}
    print(json.dumps(row))
    lines = [f"\n## full bench: cells done and summed cell time ({folder}), {now}\n",
             f"- commit of this summary: {row['git_commit']}; the records were made at {', '.join(sorted(commits))}",
             f"- {total} of {len(planned)} planned cells done; summed cell time {row['cell_seconds'] / 3600:.2f} h "
             "(cell wall times, one CPU each, on a 2-core machine shared with other work: not a timing "
             "measurement, a size)", "",
             "| corpus | cells planned | done | summed cell time |", "|---|---:|---:|---:|"]
    lines += [f"| {c} | {v['planned']} | {v['done']} | {v['cell_seconds'] / 60:.1f} min |" for c, v in per.items()]
    atomic_write_text(RESULTS, RESULTS.read_text() + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
