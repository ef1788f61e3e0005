"""Throughput of veil's biaffine parser (batched) against spaCy sm's parser, and of the random obfuscator.

On the first ``--n`` sentences of the silver test split (the same pre-tokenised sentences for both parsers):

* biaffine: ``veil.parsing.evaluate.predict_biaffine`` (length-sorted batches of ``--batch``; decoding
  included: argmax, and Edmonds' algorithm where the argmax is not a tree);
* spaCy sm: tok2vec + tagger + parser + attribute_ruler on ``Doc(words, spaces)`` (``nlp.pipe``, batch 256);
  spaCy also tags, the biaffine parser is given the tags;
* obfuscator: ``RandomSubstitution.obfuscate`` at level P3, OS-entropy draws (the release setting) and seeded.

Each is the median of ``--reps`` runs after one warm-up; torch runs with ``--threads`` threads. Prints a
Markdown section to paste into benchmarks/RESULTS.md (this script does not edit it) and one JSON line.

    python benchmarks/parsing.py [--n 1000] [--batch 64] [--reps 3] [--threads 1] [--model PATH]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import time
import warnings


def _timed(fn, reps: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", default=None)
    args = ap.parse_args()

    import torch

    from veil.defenses.obfuscation import RandomSubstitution, TagVocabulary
    from veil.errors import PrivacyLeakWarning
    from veil.parsing.evaluate import predict_biaffine
    from veil.models.spacy_pipelines import load_spacy, parse_words
    from veil.parsing.train import load_parser
    from veil.parsing.treebank import load_treebank
    from veil.results import git_commit

    torch.set_num_threads(args.threads)
    test = load_treebank("test", limit=args.n)
    words = sum(map(len, test))
    net = load_parser(args.model)
    nlp = load_spacy("spacy-sm")
    vocab = TagVocabulary.from_sentences((t.words, t.tags) for t in load_treebank("train"))
    secure = RandomSubstitution(vocabulary=vocab, level="P3")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        seeded = RandomSubstitution(vocabulary=vocab, level="P3", rng=0)

    runs = {
        "biaffine (veil, batched)": _timed(lambda: predict_biaffine(net, test, batch_size=args.batch), args.reps),
        "spaCy sm (tok2vec+tagger+parser)": _timed(
            lambda: list(parse_words(nlp, [(t.words, t.spaces) for t in test])), args.reps),
        "random obfuscator P3 (OS entropy)": _timed(lambda: [secure.obfuscate(t.words, t.tags) for t in test],
                                                    args.reps),
        "random obfuscator P3 (seeded)": _timed(lambda: [seeded.obfuscate(t.words, t.tags) for t in test],
                                                args.reps),
    }
    rates = {k: len(test) / statistics.median(v) for k, v in runs.items()}
    ratio = rates["biaffine (veil, batched)"] / rates["spaCy sm (tok2vec+tagger+parser)"]
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    lines = [f"## parsing throughput, {stamp}", "", f"- commit: {git_commit()}",
             f"- machine: {platform.platform()}, torch {torch.__version__} with {args.threads} threads",
             f"- workload: first {len(test)} silver test sentences ({words} words); biaffine batch {args.batch}; "
             f"median of {args.reps} runs after a warm-up", "", "| what | sentences/s (median) | runs (s) |",
             "|---|---:|---|"]
    lines += [f"| {k} | {rates[k]:.1f} | {', '.join(f'{x:.2f}' for x in runs[k])} |" for k in runs]
    lines += ["", f"ratio biaffine / spaCy sm: **{ratio:.2f}**", ""]
    print("\n".join(lines))
    print(json.dumps({"sentences": len(test), "words": words, "rates": rates, "ratio": ratio, "runs": runs}))


if __name__ == "__main__":
    main()
