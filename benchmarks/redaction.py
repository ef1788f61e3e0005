"""Redaction throughput (sentences/s): Presidio on veil's spaCy sm and md against the spaCy pipeline alone.

On the first ``--n`` sentences of a built-in corpus (default: news-articles, the sentences of its train
documents in corpus order, where people, places, organisations and dates are common; ``--corpus rt-polarity``:
the first texts of its train split, movie-review snippets with little PII), for each spaCy model (sm, md),
in one process and on the same texts:

* spaCy alone: ``nlp.pipe(texts, batch_size=--batch-size)`` with the very pipeline object Presidio runs (the
  whole pipeline, NER included, as ``veil.defenses.redaction.engine`` loads it), the Docs kept in a list;
* Presidio analysis: ``Detector(model=...).detect(texts)`` (Presidio's BatchAnalyzerEngine: the same ``nlp.pipe``
  at the same batch size, Presidio's NLP artifacts, every predefined recognizer, overlaps merged);
* the full redaction: ``PresidioRedaction(operator="type", model=...).transform(texts)`` (analysis, then
  Presidio's anonymizer, each span replaced by ``<ENTITY>``);
* the anonymizer alone: ``PresidioRedaction.redact(texts, detections)`` on detections made beforehand (not timed).

Every entity type the analyzer supports, threshold 0 (Presidio's defaults). The pipelines and the analyzer are
loaded first (their load time is reported, not in the rates); each measurement is warmed up on the first 256
texts, then timed ``--reps`` times, the order of the four rotating every repetition; the rates are medians.
One thread by default (``--threads``): torch's and the BLAS/OpenMP pools' (threadpoolctl), which spaCy's
numpy ops use. Reported per model: sentences/s of each, the ratio redaction / spaCy alone, and the share of
the redaction time Presidio adds on top of spaCy (1 - spaCy / redaction, medians), with the part of it that
analysis beyond spaCy takes (Presidio's NLP artifacts + recognizers: detect - spaCy, medians; a difference, so
noisy on a busy machine) and the anonymizer's own time (measured alone). Checked in the same run: the timed
analysis finds, in every run, the detections made beforehand, and the timed redaction and anonymizer release
the texts the anonymizer made of them beforehand.

Usage::

    veil corpora pull news-articles          # once (or rt-polarity with --corpus rt-polarity)
    python benchmarks/redaction.py [--n 1000] [--reps 3] [--batch-size 64] [--threads 1] [--models sm,md]
        [--corpus news-articles|rt-polarity] [--note TEXT] [--out result.json]
        [--results-file benchmarks/RESULTS.md] [--no-append]

Prints one JSON line and appends a dated section to ``--results-file`` (written atomically); refuses to append
from a tree with uncommitted changes to tracked files (``--no-append`` prints the section instead).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
CORPORA = ("news-articles", "rt-polarity")
WARM_UP = 256
STAGES = ("spacy", "detect", "redact", "anonymize")
ANON = "anonymize"
LABEL = {"spacy": "spaCy pipeline alone (nlp.pipe)", "detect": "Presidio analysis (Detector.detect)",
         "redact": "full redaction (PresidioRedaction type .transform)",
         "anonymize": "anonymizer alone, on given detections (.redact(texts, detections))"}


def load_sentences(corpus: str, n: int) -> list[str]:
    """The first ``n`` sentences: news-articles' train documents sentence by sentence, or rt-polarity's train
    texts, in corpus order."""
    import veil.corpora
    from veil.errors import ResourceMissingError

    try:
        data = veil.corpora.load(corpus)
    except ResourceMissingError:
        sys.exit(f"corpus {corpus!r} is not pulled; run `veil corpora pull {corpus}` first")
    train = data.split("train")
    texts = [s for doc in train.documents for s in doc] if data.is_documents else list(train.texts)
    if len(texts) < n:
        sys.exit(f"{corpus} train split has only {len(texts)} sentences; lower --n")
    return texts[:n]


def run(args: argparse.Namespace) -> dict:
    from importlib.metadata import version

    import spacy
    import threadpoolctl
    import torch
    from presidio_analyzer import BatchAnalyzerEngine  # noqa: F401 (imported before the load is timed)
    from presidio_anonymizer import AnonymizerEngine  # noqa: F401

    from veil.defenses.redaction import engine
    from veil.defenses.redaction.engine import Detector
    from veil.defenses.redaction.presidio import PresidioRedaction
    from veil.results import git_commit

    torch.set_num_threads(args.threads)
    limits = threadpoolctl.threadpool_limits(limits=args.threads)  # noqa: F841 (held for the whole run)
    load_start = os.getloadavg()[0]
    texts = load_sentences(args.corpus, args.n)
    models: dict[str, dict] = {}
    for model in args.models:
        t = time.perf_counter()
        detector = Detector(model=model, batch_size=args.batch_size)  # loads the pipeline and the analyzer
        setup_s = time.perf_counter() - t
        redactor = PresidioRedaction(operator="type", model=model)  # OS-entropy key (unused by "type")
        redactor.detector.batch_size = args.batch_size
        nlp = engine._pipeline(model)  # the object Presidio's engine runs (lru-cached), not a second copy
        detections = detector.detect(texts)  # what the anonymizer alone is given, and the checks' reference
        expected = [r.text for r in redactor.redact(texts, detections)]
        check = {"spacy": lambda out: len(out) == len(texts), "detect": lambda out: out == detections,
                 "redact": lambda out: out == expected, "anonymize": lambda out: [r.text for r in out] == expected}
        fns = {"spacy": lambda b, nlp=nlp: list(nlp.pipe(b, batch_size=args.batch_size)),
               "detect": detector.detect, "redact": redactor.transform,
               "anonymize": lambda b: redactor.redact(b, detections[:len(b)])}
        for fn in fns.values():
            fn(texts[:WARM_UP])
        seconds: dict[str, list[float]] = {s: [] for s in STAGES}
        same = True
        for rep in range(args.reps):
            for stage in STAGES[rep % len(STAGES):] + STAGES[:rep % len(STAGES)]:
                t = time.perf_counter()
                out = fns[stage](texts)
                seconds[stage].append(time.perf_counter() - t)
                same &= check[stage](out)
        med = {s: statistics.median(v) for s, v in seconds.items()}
        models[model] = {
            "pipeline": list(nlp.pipe_names), "setup_s": setup_s, "seconds": seconds,
            "sentences_per_s": {s: len(texts) / m for s, m in med.items()},
            "ratio_redact_over_spacy": med["spacy"] / med["redact"],
            "presidio_share": (med["redact"] - med["spacy"]) / med["redact"],
            "analysis_share": (med["detect"] - med["spacy"]) / med["redact"],
            "anonymizer_share": med["anonymize"] / med["redact"],
            "detections": sum(map(len, detections)),
            "sentences_with_detections": sum(1 for d in detections if d),
            "same_detections_and_texts": same,
        }
    return {
        "benchmark": "redaction",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(HERE.parent),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpu_count": os.cpu_count(),
                    "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
                    "blas_openmp_threads": sorted({p["num_threads"] for p in threadpoolctl.threadpool_info()}),
                    "spacy": spacy.__version__, "presidio_analyzer": version("presidio-analyzer"),
                    "presidio_anonymizer": version("presidio-anonymizer"),
                    "load_avg_1m_start": load_start, "load_avg_1m_end": os.getloadavg()[0],
                    "other_load": args.note or "not stated"},
        "config": {"corpus": args.corpus, "split": "train", "n_sentences": len(texts),
                   "mean_chars": sum(map(len, texts)) / len(texts), "batch_size": args.batch_size,
                   "reps": args.reps, "warm_up_texts": min(WARM_UP, len(texts)), "threads": args.threads,
                   "operator": "type", "entities": "all supported", "threshold": 0.0},
        "models": models,
    }


def markdown(r: dict) -> str:
    m, c = r["machine"], r["config"]
    what = ("sentences of the train documents" if c["corpus"] == "news-articles" else "train texts")
    lines = [
        f"## redaction throughput (Presidio on spaCy {' and '.join(r['models'])}), {r['date']}",
        "",
        f"- commit: {r['git_commit']}",
        f"- machine: {m['platform']}, {m['cpu_count']} CPUs, torch {m['torch']}, spaCy {m['spacy']}, "
        f"presidio-analyzer {m['presidio_analyzer']}, presidio-anonymizer {m['presidio_anonymizer']}; "
        f"{c['threads']} thread(s) (torch {m['torch_threads']}, BLAS/OpenMP {m['blas_openmp_threads']}); 1-min load "
        f"average {m['load_avg_1m_start']:.2f} at the start, {m['load_avg_1m_end']:.2f} at the end (other jobs "
        f"running: {m['other_load']})",
        f"- command: `python benchmarks/redaction.py {shlex.join(sys.argv[1:])}`",
        f"- workload: first {c['n_sentences']} {c['corpus']} {what} (corpus order, {c['mean_chars']:.0f} characters "
        f"on average); batch {c['batch_size']}; every supported entity type, threshold 0, operator `type`; "
        f"median of {c['reps']} runs after a warm-up on the first {c['warm_up_texts']} texts, the order of the "
        "four rotating every run",
        "",
        "| model | what | sentences/s (median) | vs spaCy alone | runs (s) |",
        "|---|---|---:|---:|---|",
    ]
    for model, res in r["models"].items():
        rate = res["sentences_per_s"]
        lines += [f"| {model} | {LABEL[s]} | {rate[s]:.1f} | "
                  f"{'' if s == ANON else format(rate[s] / rate['spacy'], '.2f')} | "
                  f"{', '.join(f'{x:.{3 if s == ANON else 2}f}' for x in res['seconds'][s])} |" for s in STAGES]
    lines.append("")
    for model, res in r["models"].items():
        lines.append(
            f"- {model} (pipeline {', '.join(res['pipeline'])}; loaded with the analyzer in {res['setup_s']:.1f} s): "
            f"redaction / spaCy alone (sentences/s) **{res['ratio_redact_over_spacy']:.2f}**; Presidio adds "
            f"**{res['presidio_share']:.1%}** of the redaction time (analysis beyond spaCy "
            f"{res['analysis_share']:.1%}, anonymizer alone {res['anonymizer_share']:.1%}); {res['detections']} "
            f"detections in {res['sentences_with_detections']} of {c['n_sentences']} sentences; same detections "
            f"and redacted texts in every run: {'yes' if res['same_detections_and_texts'] else '**NO**'}")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="sentences (default 1000)")
    parser.add_argument("--reps", type=int, default=3, help="timed runs of each measurement (default 3)")
    parser.add_argument("--batch-size", type=int, default=64, help="spaCy batch size, for all three (default 64)")
    parser.add_argument("--threads", type=int, default=1, help="torch and BLAS/OpenMP threads (default 1)")
    parser.add_argument("--models", default="sm,md", help="comma-separated spaCy models (default sm,md)")
    parser.add_argument("--corpus", choices=CORPORA, default="news-articles")
    parser.add_argument("--note", default="", help="what else was running (recorded with the numbers)")
    parser.add_argument("--out", type=Path, help="also write the result as JSON to this file")
    parser.add_argument("--results-file", type=Path, default=RESULTS, help="Markdown file the section is appended to")
    parser.add_argument("--no-append", action="store_true", help="print the section; leave the results file alone")
    args = parser.parse_args(argv)
    for name in ("n", "reps", "batch_size", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not args.models or any(m not in ("sm", "md") for m in args.models):
        parser.error("--models takes sm, md or sm,md")
    from _record import measure_and_publish

    return measure_and_publish(args, HERE.parent, run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
