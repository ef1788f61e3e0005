"""DeepCandidate (SentDP, Meehan et al. 2022) documents/s: the batched release against per-document loops.

Measured in one run, in the paper's setting (m = 5000 public candidates, p = 100 projections, Tukey
depth, epsilon 10), on ``--docs`` news-articles documents with at least ``--k`` sentences (their first
``--k`` sentences, corpus order):

* encoding: ``TextEncoder("minilm").encode`` of those sentences (cache off, batch 64), which also gives
  the documents' real sentence embeddings (``--documents synthetic``: topic clouds, no encoding);
* the projection set: drawing p unit vectors and projecting + sorting the m candidates, once per set;
* ``DeepCandidate.release`` (utilities + exact sampling from the OS CSPRNG) of the documents, each
  released ``--repeat`` times, with the default threads and with one thread; median of ``--reps`` runs;
* ``DeepCandidate.sample``, one document per call;
* the per-document loop that ``release`` ran before the batched path: ``depth_histogram`` (the
  per-projection counts) then the exact draw, document by document;
* the naive loop: ``depth_reference`` (App. A.1, one Python step per candidate, projection and
  sentence) plus a per-candidate exponential mechanism, on ``--naive-docs`` documents (seconds each).

Checks in the same run: the batched utilities equal the per-document loop's on every benchmark document
and the naive loop's on the documents it ran, bit for bit. Target: release >= 1,000 documents/s.

Candidates (``--candidates``): ``real``: mean MiniLM embeddings of consecutive 8-sentence passages of the
other news-articles documents, from the cached sentence embeddings (``veil.encoders.encode_sentences``;
never computed here); ``passages``: means of 8 random sentences of one document, over ``--pool-docs``
other news-articles documents encoded here; ``auto`` (default): ``real`` when cached, else ``passages``;
``random``: random unit vectors (far from every document: most candidates leave at the first level, so
this flatters the batched path; for smoke runs only).

    python benchmarks/sentdp.py [--docs 200] [--repeat 5] [--naive-docs 2] [--m 5000] [--p 100] [--k 20]
        [--epsilon 10] [--reps 3] [--candidates auto|real|passages|random] [--documents real|synthetic]
        [--workers N] [--note TEXT] [--out result.json] [--results-file benchmarks/RESULTS.md] [--no-append]

Prints one JSON line and appends a dated section to ``--results-file`` (written atomically).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shlex
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


def passage_candidates(blocks: list[np.ndarray], m: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` means of PASSAGE random sentences of one random document (document-like public candidates)."""
    rows = []
    for _ in range(m):
        doc = blocks[int(rng.integers(len(blocks)))]
        rows.append(doc[rng.choice(len(doc), size=PASSAGE, replace=False)].mean(axis=0))
    return np.asarray(rows, dtype=np.float64)


def synthetic_documents(n: int, k: int, d: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Unit sentence vectors around one of 20 topics per document (the workload of sentdp_sampler.py)."""
    topics = rng.standard_normal((20, d))
    docs = []
    for _ in range(n):
        s = topics[int(rng.integers(20))] + 1.5 * rng.standard_normal((k, d))
        docs.append((s / np.linalg.norm(s, axis=1, keepdims=True)).astype(np.float32))
    return docs


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


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5, help="times each document is released per timed run")
    parser.add_argument("--naive-docs", type=int, default=2)
    parser.add_argument("--m", type=int, default=5000)
    parser.add_argument("--p", type=int, default=100)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--epsilon", type=float, default=10.0)
    parser.add_argument("--depth", default="tukey-min", choices=("tukey-min", "appendix"))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--candidates", choices=("auto", "real", "passages", "random"), default="auto")
    parser.add_argument("--pool-docs", type=int, default=100, help="documents encoded for --candidates passages")
    parser.add_argument("--documents", choices=("real", "synthetic"), default="real")
    parser.add_argument("--workers", type=int, default=None, help="threads for release (default: the library's)")
    parser.add_argument("--note", default="", help="what else was running (recorded with the numbers)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--results-file", type=Path, default=RESULTS, help="Markdown file the section is appended to")
    parser.add_argument("--no-append", action="store_true", help="print only; leave the results file alone")
    args = parser.parse_args()
    for name in ("docs", "repeat", "m", "p", "k", "reps", "pool_docs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.naive_docs < 0 or args.naive_docs > args.docs:
        parser.error("--naive-docs must be in [0, --docs]")
    if args.workers is not None and args.workers < 1:
        parser.error("--workers must be >= 1")
    return args


def workload(args: argparse.Namespace):
    """(documents, their encoding time or None, candidates F, where F came from, the encoder's backend or None)."""
    import veil.corpora as vc
    from veil.encoders import TextEncoder

    rng = np.random.default_rng(0)  # which public documents / synthetic data: a seed is fine here
    if args.documents == "synthetic":
        docs = synthetic_documents(args.docs, args.k, 384, rng)
        if args.candidates in ("real", "passages"):
            sys.exit("--documents synthetic goes with --candidates auto or random")
        pool = synthetic_documents(args.pool_docs, args.k, 384, np.random.default_rng(1))
        if args.candidates == "auto":
            return docs, None, passage_candidates(pool, args.m, rng), "passages of synthetic documents", None
        F = rng.standard_normal((args.m, 384))
        return docs, None, F / np.linalg.norm(F, axis=1, keepdims=True), "random unit vectors, seed 0", None
    corpus = vc.load(CORPUS)
    long_docs = [i for i, doc in enumerate(corpus.documents) if len(doc) >= args.k]
    chosen = long_docs[: args.docs]
    if len(chosen) < args.docs:
        sys.exit(f"{CORPUS} has only {len(chosen)} documents with >= {args.k} sentences; lower --docs")
    sentences = [s for i in chosen for s in corpus.documents[i][: args.k]]
    enc = TextEncoder("minilm")
    enc.encode(sentences[:64], progress=False)  # warm-up
    t = time.perf_counter()
    flat = enc.encode(sentences, batch_size=64, progress=False)
    encode_s = time.perf_counter() - t
    docs = [flat[n * args.k:(n + 1) * args.k] for n in range(len(chosen))]
    backend = str(getattr(enc, "active_backend", "torch"))
    if args.candidates in ("auto", "real"):
        cached = cached_sentence_embeddings(enc, corpus)
        F = None if cached is None else real_candidates(*cached, exclude=set(chosen), m=args.m)
        if F is not None:
            return docs, encode_s, F, (f"real: mean MiniLM embeddings of {PASSAGE}-sentence passages of the other "
                                       f"{CORPUS} documents (cached sentence embeddings)"), backend
        if args.candidates == "real":
            sys.exit(f"no cached {CORPUS} sentence embeddings with enough passages; run encode_sentences first "
                     f"or use --candidates passages")
    if args.candidates == "random":
        F = rng.standard_normal((args.m, enc.dim))
        return docs, encode_s, F / np.linalg.norm(F, axis=1, keepdims=True), "random unit vectors, seed 0", backend
    others = [i for i in range(len(corpus.documents)) if i not in set(chosen) and len(corpus.documents[i]) >= PASSAGE]
    picked = [others[j] for j in np.sort(rng.choice(len(others), size=min(args.pool_docs, len(others)),
                                                    replace=False))]
    pool = enc.encode([s for i in picked for s in corpus.documents[i]], batch_size=64, progress=False)
    bounds = np.concatenate([[0], np.cumsum([len(corpus.documents[i]) for i in picked])])
    blocks = [pool[bounds[j]:bounds[j + 1]] for j in range(len(picked))]
    return docs, encode_s, passage_candidates(blocks, args.m, rng), (
        f"passages: means of {PASSAGE} random sentences of one of {len(picked)} other {CORPUS} documents "
        f"(MiniLM, encoded here)"), backend


def main() -> None:
    args = parse_args()
    load_start = os.getloadavg()[0]

    import torch

    from veil.defenses.sentdp import DeepCandidate
    from veil.defenses.sentdp.depth import depth_histogram
    from veil.defenses.sentdp.levels import default_workers, depth_batch
    from veil.random import secure_uniform

    docs, encode_s, F, source, backend = workload(args)
    workers = default_workers() if args.workers is None else args.workers
    dc = DeepCandidate(candidates=F, epsilon=args.epsilon, n_projections=args.p, depth=args.depth)  # OS CSPRNG
    build_s, _ = median_s(dc.projections, args.reps)
    proj = dc.projections()
    releases = docs * args.repeat
    release_s, release_runs = median_s(lambda: dc.release(releases, proj, workers=workers), args.reps)
    single_s, single_runs = median_s(lambda: dc.release(releases, proj, workers=1), args.reps)
    sample_s, _ = median_s(lambda: [dc.sample(S, proj) for S in docs], args.reps)
    loop_s, loop_runs = median_s(lambda: [dc._draw(depth_histogram(S, proj, args.depth)) for S in docs], args.reps)

    fast = depth_batch(docs, proj, args.depth)
    loop_equal = bool(np.array_equal(fast, np.stack([depth_histogram(S, proj, args.depth) for S in docs])))
    naive_times, naive_equal = [], True
    for n, S in enumerate(docs[: args.naive_docs]):
        u01 = float(secure_uniform(1)[0])
        t = time.perf_counter()
        _, utilities = naive_mechanism(S, dc.candidates, proj.vectors, args.depth, args.epsilon, u01)
        naive_times.append(time.perf_counter() - t)
        naive_equal &= bool(np.array_equal(utilities, fast[n]))

    n, n_rel = len(docs), len(releases)
    res = {
        "encode_s": encode_s, "encode_docs_per_s": None if encode_s is None else n / encode_s,
        "projection_set_ms": 1000 * build_s,
        "release_workers": workers, "release_s": release_s, "release_docs_per_s": n_rel / release_s,
        "release_runs_s": release_runs,
        "release_1_thread_s": single_s, "release_1_thread_docs_per_s": n_rel / single_s,
        "release_1_thread_runs_s": single_runs,
        "sample_docs_per_s": n / sample_s,
        "loop_s": loop_s, "loop_docs_per_s": n / loop_s, "loop_runs_s": loop_runs, "loop_utilities_equal": loop_equal,
        "naive_docs": len(naive_times), "naive_utilities_equal": naive_equal if naive_times else None,
        "naive_docs_per_s": len(naive_times) / sum(naive_times) if naive_times else None,
        "utility_levels_median": float(np.median([len(np.unique(u)) for u in fast])),
        "utility_max_median": float(np.median(fast.max(axis=1))),
    }
    res["speedup_vs_loop"] = res["release_docs_per_s"] / res["loop_docs_per_s"]
    res["speedup_1_thread_vs_loop"] = res["release_1_thread_docs_per_s"] / res["loop_docs_per_s"]
    res["speedup_vs_naive"] = (res["release_docs_per_s"] / res["naive_docs_per_s"]) if naive_times else None
    res["release_over_encode"] = None if encode_s is None else (release_s / args.repeat) / encode_s
    res["target_met"] = res["release_docs_per_s"] >= 1000 and loop_equal and naive_equal
    commit = git_commit()
    machine = {"platform": platform.platform(), "cpu_count": os.cpu_count(),
               "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
               "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
               "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "load_avg_1m_start": load_start,
               "load_avg_1m_end": os.getloadavg()[0], "other_load": args.note or "not stated"}
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    config = {"corpus": CORPUS, "documents": args.documents, "docs": n, "repeat": args.repeat, "k": args.k,
              "m": int(F.shape[0]), "p": args.p, "d": int(F.shape[1]), "epsilon": args.epsilon, "depth": args.depth,
              "reps": args.reps, "candidates": source, "encoder_backend": backend}
    record = {"benchmark": "sentdp", "date": now, "git_commit": commit, "machine": machine, "config": config, **res}
    print(json.dumps(record))
    if args.out:
        atomic_write_json(args.out, record)
    section = render(record, args)
    if args.no_append:
        print(section)
        return
    path = args.results_file
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    atomic_write_text(path, old + section + "\n")  # rewrite whole file atomically
    print(f"appended to {path}", file=sys.stderr)


def render(r: dict, args: argparse.Namespace) -> str:
    """The Markdown section of one run."""
    c, mc = r["config"], r["machine"]
    met = "**met**" if r["target_met"] else "**MISSED**"
    docs_text = (f"{c['docs']} {CORPUS} documents with >= {c['k']} sentences, their first {c['k']} sentences (real "
                 f"MiniLM sentence embeddings)" if c["documents"] == "real" else
                 f"{c['docs']} synthetic documents of {c['k']} unit sentence vectors (topic clouds)")
    rows = [
        f"| DeepCandidate.release, {r['release_workers']} thread(s) (utilities + exact sampling) | "
        f"{r['release_s']:.3f} s | {1000 / r['release_docs_per_s']:.3f} ms | {r['release_docs_per_s']:,.0f} |",
        f"| DeepCandidate.release, 1 thread | {r['release_1_thread_s']:.3f} s | "
        f"{1000 / r['release_1_thread_docs_per_s']:.3f} ms | {r['release_1_thread_docs_per_s']:,.0f} |",
        f"| DeepCandidate.sample, one document per call | | {1000 / r['sample_docs_per_s']:.3f} ms | "
        f"{r['sample_docs_per_s']:,.0f} |",
        f"| per-document loop (reference): depth_histogram + exact draw, document by document | {r['loop_s']:.3f} s | "
        f"{1000 / r['loop_docs_per_s']:.3f} ms | {r['loop_docs_per_s']:,.0f} |",
    ]
    if r["naive_docs"]:
        rows.append(f"| naive App. A.1 loop (depth_reference) + exponential mechanism, {r['naive_docs']} document(s) "
                    f"| | {1000 / r['naive_docs_per_s']:,.0f} ms | {r['naive_docs_per_s']:.3f} |")
    if r["encode_s"] is not None:
        rows.insert(0, f"| MiniLM encoding ({c['encoder_backend']} backend) of the {c['docs'] * c['k']:,} sentences "
                       f"(cache off, batch 64) | "
                       f"{r['encode_s']:.2f} s | {1000 / r['encode_docs_per_s']:.1f} ms | "
                       f"{r['encode_docs_per_s']:,.1f} |")
    lines = [
        f"\n## DeepCandidate documents/s (SentDP), {r['date']}\n",
        f"- commit: {r['git_commit']}",
        f"- machine: {mc['platform']}, {mc['cpu_count']} CPUs ({mc['usable_cpus']} usable), torch {mc['torch']} "
        f"with {mc['torch_threads']} threads (OMP_NUM_THREADS={mc['OMP_NUM_THREADS']}); 1-min load average "
        f"{mc['load_avg_1m_start']:.2f} at the start, {mc['load_avg_1m_end']:.2f} at the end (other jobs running: "
        f"{mc['other_load']})",
        f"- command: `python benchmarks/sentdp.py {shlex.join(sys.argv[1:])}`",
        f"- workload: {docs_text}, d={c['d']}; m={c['m']} candidates ({c['candidates']}); p={c['p']} projections; "
        f"ε={c['epsilon']:g}; depth {c['depth']} (median over documents: {r['utility_levels_median']:.0f} utility "
        f"levels, deepest candidate {r['utility_max_median']:.0f}); sampling exact, from the OS CSPRNG; each "
        f"document released {c['repeat']} times per run ({c['docs'] * c['repeat']:,} releases); one projection set "
        f"({r['projection_set_ms']:.1f} ms to build); median of {c['reps']} run(s)",
        "",
        "| measurement | total | per document | documents/s |",
        "|---|---:|---:|---:|",
        *rows,
        "",
        f"- utilities of the batched path equal the per-document loop's on all {c['docs']} documents: "
        f"{'yes' if r['loop_utilities_equal'] else '**NO**'}"
        + ("" if not r["naive_docs"] else f"; the naive loop's on {r['naive_docs']}: "
           f"{'yes' if r['naive_utilities_equal'] else '**NO**'}"),
        f"- release / per-document loop: {r['speedup_vs_loop']:.2f}x ({r['speedup_1_thread_vs_loop']:.2f}x with one "
        f"thread)" + ("" if not r["naive_docs"] else f"; / naive loop: {r['speedup_vs_naive']:,.0f}x"),
        f"- target release >= 1,000 documents/s with identical utilities: {met}",
    ]
    if r["release_over_encode"] is not None:
        lines.append(f"- mechanism / encoding the same documents: {r['release_over_encode']:.2%}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
