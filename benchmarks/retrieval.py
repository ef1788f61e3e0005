"""Exact similarity search for RSS (TextHide Sec. 4.4, App. C.2): torch vs faiss, and index build time.

Measured in one run:

* queries per second of :meth:`veil.attacks.retrieval.SimilaritySearch.query`
  (top-1, exact, including the float64 re-scoring and tie handling) over
  10k and 60k x 384 L2-normalised index vectors, 1,000 queries, median of
  ``--reps`` runs, torch backend vs faiss backend (both answers checked equal),
  at each of ``--threads`` (default 1 and 2 threads for both libraries);
  random unit vectors by default, real MiniLM embeddings of rt-polarity
  (10k rows of it) and health-tweets (60k) with ``--real``;
* index build time = encoding every text of rt-polarity with MiniLM (cache
  off, so the encoder really runs) + building the index; with ``--real`` also
  health-tweets (~63k tweets, several minutes). The paper reports 267 s (CoLA)
  and 1,576 s (SST-2) to build its BERT index, each search < 0.1 s.

    python benchmarks/retrieval.py [--reps 5] [--threads 1,2] [--real] [--cached-encode] [--note TEXT]
                                   [--out result.json]

Prints one JSON line and appends a dated section to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

from veil._io import atomic_write_json, atomic_write_text  # noqa: E402
from veil.results import git_commit  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")
PAPER_BUILD_S = {"CoLA": 267.0, "SST-2": 1576.0}
SIZES = (10_000, 60_000)


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def time_queries(index, queries: np.ndarray, reps: int) -> tuple[float, list[float], np.ndarray]:
    answer = index.query(queries[:50])[0]  # warm-up (lazy imports, caches)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        answer = index.query(queries)[0]
        times.append(time.perf_counter() - t)
    return statistics.median(times), times, answer


def search_benchmark(vectors: np.ndarray, name: str, n_queries: int, reps: int, rng: np.random.Generator) -> dict:
    from veil.attacks.retrieval import SimilaritySearch

    texts = [str(i) for i in range(len(vectors))]
    # queries: perturbed index rows (like an RSS query that still resembles its source)
    rows = rng.choice(len(vectors), size=n_queries, replace=False)
    noise = rng.normal(scale=0.5 / np.sqrt(vectors.shape[1]), size=(n_queries, vectors.shape[1]))
    queries = unit(vectors[rows] + noise)
    out: dict = {"data": name, "n": int(len(vectors)), "dim": int(vectors.shape[1]), "queries": n_queries}
    answers = {}
    for backend in ("torch", "faiss"):
        t = time.perf_counter()
        index = SimilaritySearch(texts, vectors, backend=backend)
        out[f"{backend}_build_s"] = time.perf_counter() - t
        med, times, answers[backend] = time_queries(index, queries, reps)
        out[f"{backend}_s"] = med
        out[f"{backend}_qps"] = n_queries / med
        out[f"{backend}_runs_s"] = [round(x, 4) for x in times]
    out["torch_over_faiss_speed"] = out["torch_qps"] / out["faiss_qps"]
    out["answers_equal"] = bool(np.array_equal(answers["torch"], answers["faiss"]))
    return out


def build_benchmark(corpus_name: str, cached: bool) -> dict:
    import veil.corpora as vc
    from veil.attacks.retrieval import SimilaritySearch
    from veil.encoders import TextEncoder

    corpus = vc.load(corpus_name)
    enc = TextEncoder("minilm")
    t = time.perf_counter()
    X = enc.encode_corpus(corpus, None, cache=cached, progress=False)
    encode_s = time.perf_counter() - t
    t = time.perf_counter()
    SimilaritySearch(corpus.texts, X, labels=corpus.labels)
    build_s = time.perf_counter() - t
    return {"corpus": corpus_name, "n": len(corpus), "encode_s": encode_s, "index_s": build_s,
            "total_s": encode_s + build_s, "sentences_per_s": len(corpus) / (encode_s + build_s),
            "encode_cached": cached, "vectors": X}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--real", action="store_true", help="also real MiniLM vectors (encodes health-tweets)")
    parser.add_argument("--cached-encode", action="store_true", help="read embeddings from the cache if present")
    parser.add_argument("--threads", default="1,2", help="thread counts for the search timings (torch and faiss)")
    parser.add_argument("--note", default="", help="what else was running (recorded with the numbers)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    thread_counts = [int(t) for t in args.threads.split(",")]

    import faiss
    import torch

    from veil.attacks.retrieval.index import resolve_backend

    rng = np.random.default_rng(0)
    builds = [build_benchmark("rt-polarity", args.cached_encode)]
    if args.real:
        builds.append(build_benchmark("health-tweets", args.cached_encode))
    datasets = [("random unit", unit(rng.normal(size=(n, 384)))) for n in SIZES]
    if args.real:
        datasets += [("rt-polarity", builds[0]["vectors"][:SIZES[0]]),
                     ("health-tweets", builds[1]["vectors"][:SIZES[1]])]
    default_threads = (torch.get_num_threads(), faiss.omp_get_max_threads())
    search = []
    for threads in thread_counts:  # the benchmark sets threads; the library never does
        torch.set_num_threads(threads)
        faiss.omp_set_num_threads(threads)
        for name, vectors in datasets:
            search.append({"threads": threads, "auto_picks": resolve_backend("auto"),
                           **search_benchmark(vectors, name, args.queries, args.reps, rng)})
    torch.set_num_threads(default_threads[0])
    faiss.omp_set_num_threads(default_threads[1])
    for b in builds:
        del b["vectors"]
    commit = git_commit()
    machine = {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
               "faiss": faiss.__version__,
               "default_threads": {"torch": default_threads[0], "faiss": default_threads[1]},
               "load_avg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
               "other_load": args.note or "not stated"}
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    record = {"benchmark": "retrieval", "date": now, "git_commit": commit, "machine": machine,
              "config": {"reps": args.reps, "queries": args.queries, "top_k": 1, "real": args.real},
              "search": search, "build": builds, "paper_build_s": PAPER_BUILD_S}
    print(json.dumps(record))
    if args.out:
        atomic_write_json(args.out, record)
    section = [
        f"\n## exact similarity search (RSS index), {now}\n",
        f"- commit: {commit}",
        f"- machine: {machine['platform']}, {machine['cpu_count']} CPUs, torch {machine['torch']}, faiss "
        f"{machine['faiss']}; encoding with {default_threads[0]} torch threads; 1-min load average at the end: "
        f"{machine['load_avg_1m']:.2f} (other jobs running: {machine['other_load']})",
        f"- workload: {args.queries} top-1 queries (perturbed index rows) through SimilaritySearch.query (exact, "
        f"float64 re-scoring, lowest-index ties); median of {args.reps} runs",
        "",
        "| threads | data | index size | torch q/s | faiss q/s | torch / faiss | same answers | auto picks |",
        "|---:|---|---:|---:|---:|---:|---|---|",
        *(f"| {s['threads']} | {s['data']} | {s['n']:,} x {s['dim']} | {s['torch_qps']:,.0f} | "
          f"{s['faiss_qps']:,.0f} | {s['torch_over_faiss_speed']:.2f} | {'yes' if s['answers_equal'] else 'NO'} | "
          f"{s['auto_picks']} |" for s in search),
        "",
        "| index build | texts | encode (s) | index (s) | total (s) | texts/s |",
        "|---|---:|---:|---:|---:|---:|",
        *(f"| {b['corpus']} (MiniLM, {'cached' if b['encode_cached'] else 'encoded'}) | {b['n']:,} | "
          f"{b['encode_s']:.1f} | {b['index_s']:.2f} | {b['total_s']:.1f} | {b['sentences_per_s']:.0f} |"
          for b in builds),
        *(f"| paper: {k} (BERT, hardware not stated) | | | | {v:,.0f} | |" for k, v in PAPER_BUILD_S.items()),
    ]
    old = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    atomic_write_text(RESULTS, old + "\n".join(section) + "\n")  # rewrite whole file atomically


if __name__ == "__main__":
    main()
