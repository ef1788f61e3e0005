"""The SentDP privacy audit of DeepCandidate on a real document corpus (:mod:`veil.attacks.audit`).

Setting (Meehan et al. 2022, App. B, without the recoder): sentences are
encoded with the public encoder; the public candidates are the mean sentence
embeddings of the TRAIN documents with at least 8 sentences; the audited
private documents are TEST documents with at least 2 sentences. Every test
document gets its own projection set, drawn from ``seed`` (this is an audit,
not a release, so seeded projections are fine; a release draws them from the
OS CSPRNG), and ``neighbours_per_document`` neighbours, the kinds of
:data:`~veil.attacks.audit.NEIGHBOUR_KINDS` in turn; ``random`` neighbours are
sentences of the train documents. The exact log ratio is checked at every
epsilon in ``epsilons``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from veil.defenses.base import check_int, check_real
from veil.errors import DataFormatError, InvalidTypeError
from veil.results import Metric, ResultRecord

if TYPE_CHECKING:  # pragma: no cover
    from veil.corpora.base import Corpus
    from veil.encoders.text import TextEncoder

__all__ = ["run_sentdp_audit", "audit_file_name", "MIN_CANDIDATE_SENTENCES", "MIN_AUDIT_SENTENCES"]

MIN_CANDIDATE_SENTENCES = 8  # App. B: candidates from training documents with at least 8 sentences
MIN_AUDIT_SENTENCES = 2      # a document with one sentence has only trivial neighbours


def _eps_key(e: float) -> str:
    return f"{e:g}"


def audit_file_name(corpus: str, *, depth: str, n_documents: int | None, neighbours: int, n_projections: int,
                    seed: int) -> str:
    """``audit-<corpus>[-<depth>]-<documents, neighbours, projections, seed>.json``."""
    from veil.experiments.outputs import tag

    experiment = f"audit-{corpus}" + ("" if depth == "tukey-min" else f"-{depth}")
    return f"{experiment}-{tag(docs=n_documents or 'all', nb=neighbours, p=n_projections, seed=seed)}.json"


def run_sentdp_audit(corpus: str | Corpus, *, epsilons: Sequence[float] = (1, 3, 10, 30),
                     n_documents: int | None = None, neighbours_per_document: int = 35, n_projections: int = 50,
                     depth: str = "tukey-min", seed: int = 0, results_dir: str | Path | None = None,
                     encoder: TextEncoder | None = None, progress: bool = True, force: bool = False) -> ResultRecord:
    """Audit DeepCandidate on ``corpus`` (a registered name, or a loaded document :class:`Corpus`).

    ``n_documents``: how many eligible test documents to audit (None: all of
    them; otherwise a sample drawn with ``seed``). ``encoder`` defaults to
    ``TextEncoder("minilm")``. The record (experiment ``audit-<corpus>``, or
    ``audit-<corpus>-appendix`` for ``depth="appendix"``) is written
    atomically to ``results_dir/<experiment>-<documents, neighbours, projections, seed>.json``
    (``results_dir=None``: not written; the CLI defaults to ``./veil-results/sentdp``) and
    returned; a summary is printed. The output location is checked before any work, and an
    existing file is replaced only with ``force=True``.
    """
    import veil.corpora as vc
    from veil.attacks.audit import NEIGHBOUR_KINDS, audit_sentdp
    from veil.corpora.base import Corpus
    from veil.defenses.sentdp import DeepCandidate
    from veil.encoders import TextEncoder, encode_sentences

    start = time.perf_counter()
    seed = check_int("seed", seed, minimum=0)
    if isinstance(epsilons, (str, bytes)) or not isinstance(epsilons, Sequence) or not epsilons:
        raise InvalidTypeError("epsilons must be a non-empty sequence of numbers, e.g. (1, 3, 10, 30)")
    epsilons = tuple(check_real("epsilon", e, low=0.0, high=np.inf, low_open=True, high_open=True,
                                hint="; SentDP needs a finite epsilon > 0") for e in epsilons)
    if n_documents is not None:
        n_documents = check_int("n_documents", n_documents, minimum=1)
    out_path = None
    if results_dir is not None:
        from veil.experiments.outputs import check_output_dir, refuse_existing

        name = corpus if isinstance(corpus, str) else getattr(corpus, "name", "corpus")
        out_path = check_output_dir(results_dir) / audit_file_name(name, depth=depth, n_documents=n_documents,
                                                                   neighbours=neighbours_per_document,
                                                                   n_projections=n_projections, seed=seed)
        refuse_existing(out_path, force)
    if isinstance(corpus, str):
        data = vc.load(corpus)
    elif isinstance(corpus, Corpus):
        data = corpus
    else:
        raise InvalidTypeError(f"corpus must be a corpus name or a veil Corpus, not {type(corpus).__name__}")
    if data.documents is None:
        raise DataFormatError(f"corpus {data.name!r} has no sentence lists; use a document corpus "
                              f"(news-articles, spam-assassin)")
    counts = np.asarray([len(doc) for doc in data.documents], dtype=np.int64)
    train = [int(i) for i in data.indices("train") if counts[i] >= MIN_CANDIDATE_SENTENCES]
    if not train:
        raise DataFormatError(f"corpus {data.name!r} has no train document with >= {MIN_CANDIDATE_SENTENCES} "
                              f"sentences to build public candidates from")
    eligible = [int(i) for i in data.indices("test") if counts[i] >= MIN_AUDIT_SENTENCES]
    if not eligible:
        raise DataFormatError(f"corpus {data.name!r} has no test document with >= {MIN_AUDIT_SENTENCES} sentences")

    if encoder is None:
        encoder = TextEncoder("minilm")
    S_flat, offsets = encode_sentences(encoder, data, progress=progress)
    candidates = np.stack([S_flat[offsets[i]:offsets[i + 1]].astype(np.float64).mean(axis=0) for i in train])
    gen = np.random.default_rng(seed)
    if n_documents is not None and n_documents < len(eligible):
        eligible = sorted(int(i) for i in gen.choice(eligible, size=n_documents, replace=False))
    pool_idx = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in data.indices("train")])
    pool = S_flat[pool_idx]
    documents = [S_flat[offsets[i]:offsets[i + 1]] for i in eligible]

    # utilities do not depend on epsilon; rng=None keeps the mechanism's own sampling unseeded (it is not used)
    mechanism = DeepCandidate(candidates=candidates, epsilon=max(epsilons), n_projections=n_projections,
                              depth=depth)
    sweep = audit_sentdp(mechanism, documents, epsilons=epsilons,
                         neighbours_per_document=neighbours_per_document, pool=pool, document_ids=eligible,
                         rng=gen, progress=progress)

    config: dict[str, Any] = {
        "corpus": data.name, "epsilons": list(epsilons), "n_documents": len(documents),
        "n_documents_requested": n_documents, "neighbours_per_document": neighbours_per_document,
        "neighbour_kinds": list(NEIGHBOUR_KINDS), "n_projections": n_projections, "depth": depth, "seed": seed,
        "encoder": f"{getattr(encoder, 'model_name', type(encoder).__name__)} ({encoder.model_id}), "
                   f"pooling={encoder.pooling}, max_length={encoder.max_length}, normalize={encoder.normalize}",
        "candidates": f"mean sentence embedding (not re-normalised) of each train document with >= "
                      f"{MIN_CANDIDATE_SENTENCES} sentences, in corpus order",
        "m": int(candidates.shape[0]), "dim": int(candidates.shape[1]),
        "documents": f"test documents with >= {MIN_AUDIT_SENTENCES} sentences"
                     + ("" if n_documents is None else f", a sample of {n_documents} drawn with the seed"),
        "pool": f"sentences of all train documents ({len(pool)})",
        "projections": "seeded: one fixed projection set per audited document drawn from numpy "
                       "default_rng(seed) (sequentially with the document sample and the neighbours); this is an "
                       "audit, not a release, where projections come from the OS CSPRNG",
        "tolerance": sweep.audits[0].tolerance,
    }
    metrics: dict[str, Metric] = {
        "max_abs_log_ratio": Metric(mean=max(a.max_abs_log_ratio for a in sweep.audits), n=sweep.n_pairs),
        "max_ratio_over_epsilon": Metric(mean=max(a.max_abs_log_ratio / a.epsilon for a in sweep.audits),
                                         n=sweep.n_pairs),
        "pairs": Metric(mean=float(sweep.n_pairs)),
        "slack": Metric(mean=min(a.slack for a in sweep.audits), n=sweep.n_pairs),
        "passed": Metric(mean=float(sweep.passed)),
        "max_utility_change": Metric(mean=sweep.audits[0].max_utility_change, n=sweep.n_pairs),
        "pairs_per_second": Metric(mean=sweep.pairs_per_second),
    }
    for a in sweep.audits:
        metrics[f"max_abs_log_ratio_eps{_eps_key(a.epsilon)}"] = Metric(mean=a.max_abs_log_ratio, n=a.n_pairs)
        metrics[f"slack_eps{_eps_key(a.epsilon)}"] = Metric(mean=a.slack, n=a.n_pairs)
    extra = {
        "max_by_kind": {_eps_key(a.epsilon): dict(a.max_by_kind) for a in sweep.audits},
        "pairs_by_kind": dict(sweep.audits[0].pairs_by_kind),
        "worst": {_eps_key(a.epsilon): a.worst.to_dict() if a.worst else None for a in sweep.audits},
        "derivation_error": sweep.audits[0].derivation_error,
        "audit_wall_time_s": sweep.wall_time_s,
        "utility_stats": dict(sweep.utility_stats),
        "mechanism": mechanism.config(),
    }
    experiment = f"audit-{data.name}" + ("" if depth == "tukey-min" else f"-{depth}")
    record = ResultRecord(method="sentdp", experiment=experiment, config=config, metrics=metrics,
                          wall_time_s=time.perf_counter() - start, extra=extra)
    if out_path is not None:
        record.write(out_path)
    _print_summary(data.name, sweep)
    return record


def _print_summary(name: str, sweep: Any) -> None:
    verdict = "PASSED" if sweep.passed else "FAILED"
    print(f"SentDP audit of DeepCandidate on {name}: {verdict}, {sweep.n_pairs} neighbour pairs over "
          f"{sweep.n_documents} documents ({sweep.pairs_per_second:.0f} pairs/s)")
    for a in sweep.audits:
        print(f"  epsilon={a.epsilon:g}: largest |log P(f|S) - log P(f|S')| = {a.max_abs_log_ratio:.6g} "
              f"(slack {a.slack:.3g}, max utility change {a.max_utility_change:g})")
    st = sweep.utility_stats
    print(f"  utilities: mean top depth {st['mean_top_utility']:.3g}, attained by {st['mean_candidates_at_top']:.3g} "
          f"candidates on average; {100 * st['mean_fraction_zero_utility']:.3g}% of candidates at depth 0")
    worst = max(sweep.audits, key=lambda a: a.max_abs_log_ratio / a.epsilon)
    if worst.worst is not None:
        print(f"  closest to the bound (epsilon={worst.epsilon:g}): {worst.worst.describe()}")
