"""Does a faster encoder backend change veil's results? A backend (onnx or bf16) against the float32 torch reference
on two tasks of rt-polarity (no defense), in one run.

* Frozen-encoder accuracy: a logistic regression (scikit-learn, C=1, lbfgs) on the backend's vectors of the
  whole train split, scored on the whole test split (Wilson 95% interval), and how many test predictions differ
  between the two backends.
* RSS identity: the attacker's index holds the reference (torch) vectors of every train and test text
  (:class:`veil.attacks.retrieval.SimilaritySearch`); the owner releases the vectors of ``--queries`` test texts
  (drawn with seed 0) made by the backend under test, and :class:`veil.attacks.retrieval.RSS` answers each with
  its nearest index text; identity is the share answered with the query's own text (Wilson 95%). With the torch
  backend this is the usual no-defense row; with onnx or bf16 it asks whether the rounding differences move a
  nearest neighbour.
* The minimum and mean cosine between the two backends' vectors over every text.

Usage::

    veil corpora pull rt-polarity            # once
    python benchmarks/encode_quality.py [--backend onnx] [--queries 1000] [--threads 2] [--no-append]

Prints one JSON line and appends a dated section to benchmarks/RESULTS.md (refused from a tree with uncommitted
changes).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
CORPUS = "rt-polarity"


def run(args: argparse.Namespace) -> dict:
    import numpy as np
    import torch
    from sklearn.linear_model import LogisticRegression

    import veil.corpora
    from veil.attacks.retrieval import RSS, SimilaritySearch
    from veil.attacks.retrieval.observe import observe
    from veil.encoders import TextEncoder
    from veil.metrics.leakage import wilson_interval
    from veil.results import git_commit

    torch.set_num_threads(args.threads)
    corpus = veil.corpora.load(CORPUS)
    train, test = corpus.split("train"), corpus.split("test")
    texts = list(train.texts) + list(test.texts)
    n_train = len(train.texts)
    vectors, seconds = {}, {}
    for backend in ("torch", args.backend):
        enc = TextEncoder("minilm", backend=backend)
        enc.encode(texts[:64], progress=False)  # warm-up (the onnx export is made once, not timed)
        start = time.perf_counter()
        vectors[backend] = enc.encode(texts, progress=False)
        seconds[backend] = time.perf_counter() - start
    cosine = np.sum(vectors["torch"] * vectors[args.backend], axis=1)

    rows: dict[str, dict] = {}
    predictions = {}
    y_train, y_test = np.asarray(train.labels), np.asarray(test.labels)
    index = SimilaritySearch(texts, vectors["torch"])  # the attacker's index: the reference encoder
    rng = np.random.default_rng(0)
    queries = np.sort(rng.choice(np.arange(n_train, len(texts)), size=min(args.queries, len(test.texts)),
                                 replace=False))
    for backend in ("torch", args.backend):
        X = vectors[backend]
        clf = LogisticRegression(C=1.0, max_iter=3000).fit(X[:n_train], y_train)
        predictions[backend] = clf.predict(X[n_train:])
        correct = int((predictions[backend] == y_test).sum())
        lo, hi = wilson_interval(correct, len(y_test))
        top1 = RSS(index).run(observe(X[queries])).top1
        hits = int((np.asarray(top1) == queries).sum())
        ilo, ihi = wilson_interval(hits, len(queries))
        rows[backend] = {"accuracy": correct / len(y_test), "accuracy_ci": [lo, hi], "identity": hits / len(queries),
                         "identity_ci": [ilo, ihi], "encode_seconds": seconds[backend],
                         "sentences_per_s": len(texts) / seconds[backend]}
    ref, new = rows["torch"], rows[args.backend]
    commit = git_commit(HERE.parent)
    return {
        "benchmark": "encode-quality",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": commit,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
                    "threads": args.threads},
        "load_average": list(os.getloadavg()),
        "config": {"corpus": CORPUS, "train": n_train, "test": len(test.texts), "queries": int(len(queries)),
                   "backend": args.backend, "classifier": "LogisticRegression(C=1, lbfgs, max_iter=3000)",
                   "index": "torch vectors of every train and test text"},
        "rows": rows,
        "predictions_differing": int((predictions["torch"] != predictions[args.backend]).sum()),
        "accuracy_within_reference_ci": ref["accuracy_ci"][0] <= new["accuracy"] <= ref["accuracy_ci"][1],
        "identity_within_reference_ci": ref["identity_ci"][0] <= new["identity"] <= ref["identity_ci"][1],
        "min_cosine": float(cosine.min()),
        "mean_cosine": float(cosine.mean()),
    }


def markdown(result: dict) -> str:
    c, m = result["config"], result["machine"]

    def pct(v: float, ci: list[float]) -> str:
        return f"{100 * v:.1f} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"

    lines = [f"## encoder backend against fp32 on the tasks ({c['backend']} vs torch, {c['corpus']}), {result['date']}",
             "",
             f"- commit: {result['git_commit']}",
             f"- machine: {m['platform']}, {m['cpu_count']} CPUs, torch {m['torch']} with {m['threads']} threads; "
             f"load average {', '.join(f'{x:.2f}' for x in result['load_average'])} at the end",
             f"- workload: every {c['corpus']} text ({c['train']} train, {c['test']} test) encoded by each backend; "
             f"{c['classifier']} on train, scored on test; RSS identity of {c['queries']} test texts (seed 0) "
             f"released by each backend against an index of {c['index']}",
             "",
             "| backend | frozen-encoder test accuracy | RSS identity | sentences/s (one pass) |",
             "|---|---|---|---:|"]
    for backend, r in result["rows"].items():
        label = "torch (fp32, the reference)" if backend == "torch" else backend
        lines.append(f"| {label} | {pct(r['accuracy'], r['accuracy_ci'])} | {pct(r['identity'], r['identity_ci'])} "
                     f"| {r['sentences_per_s']:.1f} |")
    lines += ["",
              f"{c['backend']} inside the reference's 95% interval: accuracy "
              f"**{'yes' if result['accuracy_within_reference_ci'] else 'no'}**, RSS identity "
              f"**{'yes' if result['identity_within_reference_ci'] else 'no'}**; test predictions that differ between "
              f"the backends: {result['predictions_differing']} of {c['test']}; cosine between the backends' vectors "
              f"over all {c['train'] + c['test']} texts: min {result['min_cosine']:.7f}, mean {result['mean_cosine']:.7f}",
              ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="onnx", help="the backend compared with torch (default onnx)")
    parser.add_argument("--queries", type=int, default=1000, help="test texts released for RSS (default 1000)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, help="also write the result as JSON to this file")
    parser.add_argument("--results-file", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--no-append", action="store_true", help="print the section instead of appending it")
    args = parser.parse_args(argv)
    if args.queries < 1 or args.threads < 1:
        parser.error("--queries and --threads must be >= 1")
    if args.backend == "torch":
        parser.error("--backend names the backend compared WITH torch: give another one (e.g. onnx)")
    sys.path.insert(0, str(HERE))
    from _record import measure_and_publish

    return measure_and_publish(args, HERE.parent, run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
