"""DeepCandidate's exact sampler against the float64 inverse-CDF sampler it replaced, on the same utilities.

The reference is the sampler veil shipped before issue 16, reimplemented here line for line (log-sum-exp
normalised scores, ``exp``, ``cumsum``, inverse CDF at one OS-entropy uniform): it is not in the library any
more because it is only (epsilon, delta)-DP (see ``veil.defenses.sentdp.sampling``). Both draw from the same
utility vectors, so the ratio is the cost of exactness alone.

Workload (synthetic, reproducible from ``--seed``): 20 topic clouds in d = 384 (unit-normalised sentence
vectors); ``--docs`` documents of 8-29 sentences from one topic; ``m`` candidates, each the mean of 8 sentences
of a topic (document-like). Utilities: tukey-min depth over ``p`` projections. For every (m, p, epsilon):
per-draw time of each sampler (best of ``--reps`` passes over the documents) and the whole
``DeepCandidate.release`` time per document (depth + exact draw), so the draw's share is visible.

Prints a Markdown section to paste into benchmarks/RESULTS.md (this script does not edit it) and one JSON line.

    OMP_NUM_THREADS=1 python benchmarks/sentdp_sampler.py [--docs 200] [--reps 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import time

import numpy as np


def float_draw(u: np.ndarray, eps: float) -> int:
    """The pre-issue-16 sampler (reference only: NOT epsilon-DP in floating point)."""
    from veil.random import secure_uniform

    scores = eps * u / 2.0
    shifted = scores - scores.max()
    log_p = shifted - np.log(np.exp(shifted).sum())
    cdf = np.cumsum(np.exp(log_p))
    x = float(secure_uniform(1)[0])
    return int(min(np.searchsorted(cdf, x * cdf[-1], side="right"), len(cdf) - 1))


def best_per_item(fn, n: int, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) / n)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from veil.defenses.sentdp import DeepCandidate
    from veil.defenses.sentdp.depth import depth_fast
    from veil.results import git_commit

    rng = np.random.default_rng(args.seed)
    d = 384
    topics = rng.standard_normal((20, d))

    def sentences(t: int, k: int) -> np.ndarray:
        s = topics[t] + 1.5 * rng.standard_normal((k, d))
        return s / np.linalg.norm(s, axis=1, keepdims=True)

    docs = [sentences(int(rng.integers(20)), int(rng.integers(8, 30))) for _ in range(args.docs)]
    pool = np.asarray([sentences(int(rng.integers(20)), 8).mean(axis=0) for _ in range(5000)])
    rows = []
    for m in (1000, 5000):
        for p in (10, 50):
            for eps in (1.0, 10.0, 30.0):
                dc = DeepCandidate(candidates=pool[:m], epsilon=eps, n_projections=p)
                proj = dc.projections()
                utilities = [depth_fast(S, proj, "tukey-min") for S in docs]
                exact = best_per_item(lambda: [dc._draw(u) for u in utilities], len(docs), args.reps)
                ref = best_per_item(lambda: [float_draw(u, eps) for u in utilities], len(docs), args.reps)
                release = best_per_item(lambda: dc.release(docs, proj), len(docs), max(1, args.reps - 1))
                rows.append({"m": m, "p": p, "epsilon": eps,
                             "levels_median": float(np.median([len(np.unique(u)) for u in utilities])),
                             "exact_us": 1e6 * exact, "float_us": 1e6 * ref, "ratio": exact / ref,
                             "release_ms_per_doc": 1e3 * release, "draw_share": exact / release})
    load = os.getloadavg()[0]
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    print(f"## SentDP sampler: exact against the old float64 inverse CDF, {stamp}\n")
    print(f"- commit: {git_commit()[:12]}")
    print(f"- machine: {platform.platform()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
          f"1-min load average {load:.2f} after the run")
    print(f"- workload: {args.docs} synthetic documents (8-29 sentences, d=384), tukey-min depth; per draw, best of "
          f"{args.reps} passes\n")
    print("| m | p | epsilon | levels (median) | exact draw | float64 draw (reference) | exact / float | "
          "release per document | draw's share |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['m']} | {r['p']} | {r['epsilon']:g} | {r['levels_median']:.0f} | {r['exact_us']:.0f} us | "
              f"{r['float_us']:.0f} us | {r['ratio']:.2f} | {r['release_ms_per_doc']:.2f} ms | "
              f"{r['draw_share']:.0%} |")
    ratios = [r["ratio"] for r in rows]
    print(f"\nexact / float per draw: {min(ratios):.2f}-{max(ratios):.2f}\n")
    print(json.dumps({"benchmark": "sentdp_sampler", "date": stamp, "commit": git_commit(), "load": load,
                      "rows": rows}))


if __name__ == "__main__":
    main()
