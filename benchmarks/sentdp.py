"""Cost of DeepCandidate (SentDP, Meehan et al. 2022): fast mechanism vs the App. A.1 loop, and vs encoding.

Measured in one run, on ``--docs`` news-articles documents with at least
``--k`` sentences (their first ``--k`` sentences, corpus order):

* encoding: ``TextEncoder("minilm").encode`` of those sentences (cache off,
  batch 64), which also gives the documents' real sentence embeddings;
* the projection set: drawing p unit vectors and projecting + sorting the m
  candidates (``DeepCandidate.projections()``), once per projection set;
* the mechanism (utilities + sampling from the OS CSPRNG): ``.release(docs,
  projections)`` for all documents, and per-document ``.sample(S,
  projections)``, each the median of ``--reps`` runs;
* the naive loop: ``depth_reference`` (App. A.1, one Python step per
  candidate, projection and sentence) plus a per-candidate exponential
  mechanism, on ``--naive-docs`` documents (seconds each); its utilities are
  checked equal to the fast path's.

Targets: release >= 100x the naive loop's documents/s; the mechanism <= 5% of
encoding the same documents. Candidates: mean MiniLM embeddings of
consecutive 8-sentence passages of the other news-articles documents when the
corpus' sentence embeddings are already cached (``veil.encoders.encode_sentences``;
never computed here), else random unit vectors (``--candidates`` forces one).

    python benchmarks/sentdp.py [--docs 200] [--naive-docs 2] [--m 5000] [--p 100] [--k 20] [--epsilon 10]
                                [--reps 3] [--candidates auto|real|random] [--note TEXT] [--out result.json]
                                [--no-append]

Prints one JSON line and appends a dated section to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

from veil._io import atomic_write_json, atomic_write_text  # noqa: E402
from veil.results import git_commit  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")
CORPUS = "news-articles"
PASSAGE = 8  # sentences per candidate passage (the paper's candidates have >= 8 sentences)


def median_s(fn, reps: int) -> tuple[float, list[float]]:
    fn()  # warm-up (lazy imports, allocations)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times


def cached_sentence_embeddings(enc, corpus) -> tuple[np.ndarray, np.ndarray] | None:
    """The corpus' sentence embeddings if the cache already holds them (never computes them)."""
    from veil.encoders import CacheKey, EmbeddingCache, encode_sentences, texts_sha256

    flat = [s for doc in corpus.documents for s in doc]
    key = CacheKey(model_id=enc.model_id, pooling=enc.pooling, max_length=enc.max_length,
                   normalize=bool(enc.normalize), corpus=corpus.name, split="sentences",
                   texts_sha256=texts_sha256(flat), n=len(flat), dim=enc.dim)
    if not EmbeddingCache().path(key).is_file():
        return None
    return encode_sentences(enc, corpus, progress=False)


def real_candidates(S: np.ndarray, offsets: np.ndarray, exclude: set[int], m: int) -> np.ndarray | None:
    """Means of consecutive PASSAGE-sentence passages of the documents not in ``exclude``, first ``m``."""
    rows = []
    for i in range(len(offsets) - 1):
        if i in exclude:
            continue
        doc = S[offsets[i]:offsets[i + 1]]
        rows += [doc[j:j + PASSAGE].mean(axis=0) for j in range(0, len(doc) - PASSAGE + 1, PASSAGE)]
        if len(rows) >= m:
            return np.asarray(rows[:m], dtype=np.float64)
    return None


def naive_mechanism(S: np.ndarray, F: np.ndarray, vectors: np.ndarray, depth: str, epsilon: float,
                    u01: float) -> tuple[int, np.ndarray]:
    """App. A.1 as written: the per-candidate depth loop, then the exponential mechanism candidate by candidate."""
    from veil.defenses.sentdp.depth import depth_reference

    utilities = depth_reference(S, F, vectors, depth)
    scores = [epsilon * float(u) / 2.0 for u in utilities]
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    target, acc = u01 * sum(weights), 0.0
    for i, w in enumerate(weights):
        acc += w
        if acc > target:
            return i, utilities
    return len(weights) - 1, utilities


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--naive-docs", type=int, default=2)
    parser.add_argument("--m", type=int, default=5000)
    parser.add_argument("--p", type=int, default=100)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--epsilon", type=float, default=10.0)
    parser.add_argument("--depth", default="tukey-min")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--candidates", choices=("auto", "real", "random"), default="auto")
    parser.add_argument("--note", default="", help="what else was running (recorded with the numbers)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--no-append", action="store_true", help="print only; leave RESULTS.md alone (smoke runs)")
    args = parser.parse_args()
    load_start = os.getloadavg()[0]

    import torch

    import veil.corpora as vc
    from veil.defenses.sentdp import DeepCandidate
    from veil.defenses.sentdp.depth import depth_fast
    from veil.encoders import TextEncoder
    from veil.random import secure_uniform

    corpus = vc.load(CORPUS)
    chosen = [i for i, doc in enumerate(corpus.documents) if len(doc) >= args.k][: args.docs]
    if len(chosen) < args.docs:
        sys.exit(f"{CORPUS} has only {len(chosen)} documents with >= {args.k} sentences; lower --docs")
    sentences = [s for i in chosen for s in corpus.documents[i][: args.k]]
    enc = TextEncoder("minilm")
    enc.encode(sentences[:64], progress=False)  # warm-up
    t = time.perf_counter()
    flat = enc.encode(sentences, batch_size=64, progress=False)
    encode_s = time.perf_counter() - t
    docs = [flat[n * args.k:(n + 1) * args.k] for n in range(len(chosen))]

    F, source = None, "random unit vectors, seed 0"
    if args.candidates != "random":
        cached = cached_sentence_embeddings(enc, corpus)
        if cached is not None:
            F = real_candidates(*cached, exclude=set(chosen), m=args.m)
            source = (f"real: mean MiniLM embeddings of {PASSAGE}-sentence passages of the other {CORPUS} "
                      f"documents (cached sentence embeddings)")
        if F is None and args.candidates == "real":
            sys.exit(f"no cached {CORPUS} sentence embeddings with enough passages; run encode_sentences first")
    if F is None:
        F = np.random.default_rng(0).standard_normal((args.m, enc.dim))
        F /= np.linalg.norm(F, axis=1, keepdims=True)

    dc = DeepCandidate(candidates=F, epsilon=args.epsilon, n_projections=args.p, depth=args.depth)  # OS CSPRNG
    build_s, build_runs = median_s(dc.projections, args.reps)
    proj = dc.projections()
    release_s, release_runs = median_s(lambda: dc.release(docs, proj), args.reps)
    sample_s, sample_runs = median_s(lambda: [dc.sample(S, proj) for S in docs], args.reps)

    naive_times, equal = [], True
    for S in docs[: args.naive_docs]:
        u01 = float(secure_uniform(1)[0])
        t = time.perf_counter()
        _, utilities = naive_mechanism(S, dc.candidates, proj.vectors, args.depth, args.epsilon, u01)
        naive_times.append(time.perf_counter() - t)
        equal &= bool(np.array_equal(utilities, depth_fast(S, proj, args.depth)))
    naive_s = sum(naive_times)

    n = len(docs)
    res = {
        "encode_s": encode_s, "encode_ms_per_doc": 1000 * encode_s / n,
        "projection_set_ms": 1000 * build_s, "projection_set_runs_s": build_runs,
        "release_s": release_s, "release_ms_per_doc": 1000 * release_s / n, "release_docs_per_s": n / release_s,
        "release_runs_s": release_runs,
        "sample_s": sample_s, "sample_ms_per_doc": 1000 * sample_s / n, "sample_docs_per_s": n / sample_s,
        "naive_docs": len(naive_times), "naive_s_per_doc": naive_s / len(naive_times),
        "naive_docs_per_s": len(naive_times) / naive_s, "naive_utilities_equal_fast": equal,
    }
    res["speedup_release_vs_naive"] = res["release_docs_per_s"] / res["naive_docs_per_s"]
    res["speedup_sample_vs_naive"] = res["sample_docs_per_s"] / res["naive_docs_per_s"]
    res["release_over_encode"] = release_s / encode_s
    res["sample_over_encode"] = sample_s / encode_s
    res["release_with_projections_over_encode"] = (release_s + build_s) / encode_s
    commit = git_commit()
    machine = {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
               "torch_threads": torch.get_num_threads(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
               "load_avg_1m_start": load_start, "load_avg_1m_end": os.getloadavg()[0],
               "other_load": args.note or "not stated"}
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    config = {"corpus": CORPUS, "docs": n, "k": args.k, "m": args.m, "p": args.p, "d": int(F.shape[1]),
              "epsilon": args.epsilon, "depth": args.depth, "reps": args.reps, "candidates": source}
    record = {"benchmark": "sentdp", "date": now, "git_commit": commit, "machine": machine, "config": config, **res}
    print(json.dumps(record))
    if args.out:
        atomic_write_json(args.out, record)
    met = lambda ok: "**met**" if ok else "**MISSED**"  # noqa: E731
    section = [
        f"\n## DeepCandidate mechanism cost (SentDP), {now}\n",
        f"- commit: {commit}",
        f"- machine: {machine['platform']}, {machine['cpu_count']} CPUs, torch {machine['torch']} with "
        f"{machine['torch_threads']} threads (OMP_NUM_THREADS={machine['OMP_NUM_THREADS']}); 1-min load average "
        f"{load_start:.2f} at the start, {machine['load_avg_1m_end']:.2f} at the end (other jobs running: "
        f"{machine['other_load']})",
        f"- workload: {n} {CORPUS} documents with >= {args.k} sentences, their first {args.k} sentences (real MiniLM "
        f"sentence embeddings, d={F.shape[1]}); m={args.m} candidates ({source}); p={args.p} projections; "
        f"ε={args.epsilon:g}; depth {args.depth}; sampling from the OS CSPRNG; median of {args.reps} run(s)",
        "",
        "| measurement | total | per document | documents/s |",
        "|---|---:|---:|---:|",
        f"| MiniLM encoding of the {n * args.k:,} sentences (cache off, batch 64) | {encode_s:.2f} s | "
        f"{res['encode_ms_per_doc']:.1f} ms | {n / encode_s:,.1f} |",
        f"| projection set: draw p vectors, project and sort m candidates (once per set) | "
        f"{res['projection_set_ms']:.1f} ms | | |",
        f"| DeepCandidate.release (utilities + sampling), {n} documents, one projection set | {release_s:.3f} s | "
        f"{res['release_ms_per_doc']:.2f} ms | {res['release_docs_per_s']:,.0f} |",
        f"| DeepCandidate.sample, document by document | {sample_s:.3f} s | {res['sample_ms_per_doc']:.2f} ms | "
        f"{res['sample_docs_per_s']:,.0f} |",
        f"| naive App. A.1 loop (depth_reference) + exponential mechanism, {len(naive_times)} document(s) | "
        f"{naive_s:.2f} s | {res['naive_s_per_doc']:.2f} s | {res['naive_docs_per_s']:.3f} |",
        "",
        f"- the naive loop's utilities equal the fast path's on the timed documents: "
        f"{'yes' if equal else '**NO**'}",
        f"- speed-up of release over the naive loop: {res['speedup_release_vs_naive']:,.0f}x (sample: "
        f"{res['speedup_sample_vs_naive']:,.0f}x); target >= 100x: {met(res['speedup_release_vs_naive'] >= 100)}",
        f"- mechanism / encoding the same documents: release {res['release_over_encode']:.2%}, sample "
        f"{res['sample_over_encode']:.2%}, release + one projection set "
        f"{res['release_with_projections_over_encode']:.2%}; "
        f"target <= 5%: {met(res['release_over_encode'] <= 0.05)}",
    ]
    if args.no_append:
        print("\n".join(section))
        return
    old = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    atomic_write_text(RESULTS, old + "\n".join(section) + "\n")  # rewrite whole file atomically


if __name__ == "__main__":
    main()
