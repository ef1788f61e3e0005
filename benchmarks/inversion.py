"""Embedding inversion's throughput: texts per second of the inverter alone (greedy), of its beam reranked by
re-embedding (correction step 0) and of the default correction (3 steps), with the token F1 each buys.

On real data: the first ``--n`` texts of rt-polarity's test split (a corpus the inverters never learned from),
encoded by the default-backend MiniLM encoder (not timed). In one process with ``--threads`` threads, each mode
inverts the same vectors ``--reps`` times after a warm-up on 8 of them; the order of the modes rotates every
repetition and times are medians:

* ``greedy``: :meth:`Inverter.generate <veil.models.inverter.Inverter.generate>` (beam 1): the reference;
* ``rerank``: :func:`veil.attacks.inversion.correct.correct` with ``steps=0`` (beam ``--beam``, the hypotheses
  re-embedded and the closest kept);
* ``correct``: ``correct`` with ``steps=--steps`` (the attack's default: 3 steps of inverter-ranked word edits);
* ``shortlist`` (with ``--shortlist K``): the same, re-embedding only the K edits per text and step that the
  cosine's gradient ranks highest, with ``--batch-size B`` texts searched together (``veil attack invert
  --shortlist K --batch-size B``; the other modes search 16 together, the attack's default).

Reported: texts per second of each, the ratio of each to greedy (the cost of the search), and the token F1 of each
against the originals (so the cost is set against what it buys); for ``shortlist``, its token F1 minus that of
``correct`` on the same texts, with a paired bootstrap 95% interval (2,000 resamples of the texts, seed 0).
``--busy N`` runs N busy loops (``while True: pass`` processes) beside the timed runs: the synthetic load the
record names.

Usage::

    veil corpora pull rt-polarity            # once
    veil models train inverter [--quick]     # once (the full model: 5 minutes on a GPU, or veil models import DIR)
    python benchmarks/inversion.py [--inverter inverter] [--n 100] [--reps 2] [--threads 2] [--shortlist K]
        [--batch-size 64] [--busy 0] [--note TEXT]
        [--out result.json] [--results-file benchmarks/RESULTS.md] [--no-append]

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

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
CORPUS = "rt-polarity"
MODES = ("greedy", "rerank", "correct")


def run(args: argparse.Namespace) -> dict:
    import torch

    import veil.corpora
    from veil._threads import torch_threads
    from veil.attacks.inversion.correct import correct
    from veil.encoders import TextEncoder
    from veil.errors import ResourceMissingError
    from veil.models.inverter import load_inverter, mean_token_f1
    from veil.results import git_commit

    try:
        texts = veil.corpora.load(CORPUS).split("test").texts[:args.n]
        inverter = load_inverter(args.inverter)
    except ResourceMissingError as exc:
        sys.exit(str(exc))
    encoder = TextEncoder(inverter.manifest["config"]["encoder"])
    vectors = encoder.encode(texts, progress=False)

    def greedy(v):
        return inverter.generate(v)

    def rerank(v):
        return correct(inverter, encoder, v, steps=0, beam=args.beam).final

    def corrected(v):
        return correct(inverter, encoder, v, steps=args.steps, beam=args.beam).final

    def shortlisted(v):
        return correct(inverter, encoder, v, steps=args.steps, beam=args.beam, shortlist=args.shortlist,
                       batch_size=args.batch_size).final

    modes = {"greedy": greedy, "rerank": rerank, "correct": corrected}
    if args.shortlist:
        modes["shortlist"] = shortlisted
    seconds: dict[str, list[float]] = {m: [] for m in modes}
    outputs: dict[str, list[str]] = {}
    from _record import busy_loops

    with torch_threads(args.threads), busy_loops(args.busy):
        for fn in modes.values():
            fn(vectors[:8])
        for rep in range(args.reps):
            order = list(modes)[rep % len(modes):] + list(modes)[:rep % len(modes)]
            for m in order:
                start = time.perf_counter()
                outputs[m] = modes[m](vectors)
                seconds[m].append(time.perf_counter() - start)
    rate = {m: len(texts) / statistics.median(s) for m, s in seconds.items()}
    return {"benchmark": "inversion",
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": git_commit(HERE.parent),
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs", "threads": args.threads,
            "torch": torch.__version__, "load_after": round(os.getloadavg()[0], 2), "note": args.note,
            "command": "python benchmarks/inversion.py " + shlex.join(sys.argv[1:]),
            "corpus": CORPUS, "split": "test", "n": len(texts), "reps": args.reps,
            "inverter": {"name": args.inverter, "sha256": inverter.manifest.get("sha256"),
                         "device": inverter.manifest.get("device")},
            "encoder_backend": getattr(encoder, "active_backend", "torch"), "beam": args.beam, "steps": args.steps,
            "shortlist": args.shortlist, "batch_size": args.batch_size if args.shortlist else None,
            "busy_loops": args.busy,
            "texts_per_second": {m: round(r, 3) for m, r in rate.items()},
            "ratio_to_greedy": {m: round(r / rate["greedy"], 4) for m, r in rate.items()},
            "seconds": {m: [round(x, 3) for x in s] for m, s in seconds.items()},
            "token_f1": {m: round(mean_token_f1(texts, outputs[m]), 2) for m in modes},
            **({"shortlist_minus_correct": _paired(texts, outputs["shortlist"], outputs["correct"])}
               if args.shortlist else {})}


def _paired(texts: list[str], a: list[str], b: list[str]) -> dict:
    """Mean per-text token F1 of ``a`` minus ``b`` (percent) and its paired bootstrap 95% interval."""
    import numpy as np

    from veil.models.inverter import token_f1

    d = np.array([token_f1(t, x) - token_f1(t, y) for t, x, y in zip(texts, a, b)]) * 100
    means = d[np.random.default_rng(0).integers(0, len(d), (2000, len(d)))].mean(1)
    return {"mean": round(float(d.mean()), 2), "ci_low": round(float(np.percentile(means, 2.5)), 2),
            "ci_high": round(float(np.percentile(means, 97.5)), 2)}


def markdown(r: dict) -> str:
    titles = {"greedy": "inverter alone (greedy; reference)", "rerank": f"beam {r['beam']} reranked by re-embedding",
              "correct": f"correction, {r['steps']} steps",
              "shortlist": f"correction, {r['steps']} steps, the {r.get('shortlist')} edits per text and step "
                           "ranked highest by the cosine's gradient re-embedded"
                           + (f", {r['batch_size']} texts searched together" if r.get("batch_size") else "")}
    lines = [f"## Embedding inversion throughput, {r['date']}", "",
             f"- commit: {r['git_commit']}",
             f"- machine: {r['machine']}; threads {r['threads']}; torch {r['torch']}; 1-min load average "
             f"{r['load_after']} after the run"
             + (f"; {r['busy_loops']} busy loop(s) running beside it (synthetic load)" if r.get("busy_loops") else "")
             + (f"; note: {r['note']}" if r["note"] else ""),
             f"- command: `{r['command']}`",
             f"- workload: the first {r['n']} texts of {r['corpus']} ({r['split']} split), their MiniLM vectors "
             f"({r['encoder_backend']} backend); inverter `{r['inverter']['name']}` (sha256 "
             f"{str(r['inverter']['sha256'])[:12]}); median of {r['reps']} timed runs per mode, order rotated", "",
             "| mode | texts/s | ratio to greedy | token F1 |", "|---|---:|---:|---:|"]
    for m in [m for m in MODES + ("shortlist",) if m in r["texts_per_second"]]:
        lines.append(f"| {titles[m]} | {r['texts_per_second'][m]:.2f} | {r['ratio_to_greedy'][m]:.3f} | "
                     f"{r['token_f1'][m]:.1f} |")
    if "shortlist_minus_correct" in r:
        d = r["shortlist_minus_correct"]
        lines += ["", f"Shortlist minus full correction, token F1 on the same texts: {d['mean']:+.1f} "
                      f"[{d['ci_low']:+.1f}, {d['ci_high']:+.1f}] (paired bootstrap 95% interval)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inverter", default="inverter", help="inverter or inverter-quick (default inverter)")
    parser.add_argument("--n", type=int, default=100, help="texts inverted (default 100)")
    parser.add_argument("--reps", type=int, default=2, help="timed runs of each mode (default 2)")
    parser.add_argument("--beam", type=int, default=4, help="beam width of rerank and correct (default 4)")
    parser.add_argument("--steps", type=int, default=3, help="correction steps of correct (default 3)")
    parser.add_argument("--shortlist", type=int, default=0,
                        help="also time correct with this shortlist of edits per text and step (default 0: not)")
    parser.add_argument("--batch-size", type=int, default=64,
                        help="texts the shortlist mode searches together (default 64)")
    parser.add_argument("--busy", type=int, default=0,
                        help="busy loops run beside the timed runs, a synthetic load (default 0)")
    parser.add_argument("--threads", type=int, default=2, help="torch and BLAS/OpenMP threads (default 2)")
    parser.add_argument("--note", default="", help="what else was running (recorded with the numbers)")
    parser.add_argument("--out", type=Path, help="also write the result as JSON to this file")
    parser.add_argument("--results-file", type=Path, default=RESULTS, help="Markdown file the section is appended to")
    parser.add_argument("--no-append", action="store_true", help="print the section; leave the results file alone")
    args = parser.parse_args(argv)
    if not 0 <= args.busy <= 16:
        parser.error("--busy must be in [0, 16]")
    for name in ("n", "reps", "beam", "steps", "threads", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    if args.inverter not in ("inverter", "inverter-quick"):
        parser.error("--inverter takes inverter or inverter-quick")
    from _record import measure_and_publish

    return measure_and_publish(args, HERE.parent, run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
