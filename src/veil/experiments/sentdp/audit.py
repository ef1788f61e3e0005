"""SentDP privacy audits on a real document corpus: the exact audit.

Exact audit (:func:`run_sentdp_audit`, :mod:`veil.attacks.audit.exact`). The mechanism audited is the
pipeline's own (Meehan et al. 2022, App. B): :class:`~veil.defenses.sentdp.SentDPPipeline`,
fitted on the corpus' public train/dev split (for a registered corpus, the cached pipeline that
``veil sentdp embed`` releases with), supplies the candidates (recoded means of train documents
with at least 8 sentences) and the recoder H; the audited private documents are TEST documents
with at least 2 sentences, their sentence embeddings recoded by H, and ``random`` neighbours are
recoded train sentences. The other neighbour kinds are arbitrary vectors in the recoded space,
i.e. more than an adversary choosing real sentences can reach. ``recoder=False`` audits the
ablation without H. Every test document gets its own projection set, drawn from ``seed`` (an
audit, not a release: a release draws them from the OS CSPRNG), and ``neighbours_per_document``
neighbours, the kinds of :data:`~veil.attacks.audit.exact.NEIGHBOUR_KINDS` in turn. ``control=`` audits a
deliberately broken mechanism (:data:`~veil.defenses.sentdp.controls.NEGATIVE_CONTROLS`) over the same
candidates instead: that audit must FAIL.

Scale. The library's defaults are the paper's run: every eligible test document, the pipeline fitted on the whole
train/dev split (the whole corpus is encoded; spam-assassin's 289k sentences take about an hour on 2 cores). ``veil
audit sentdp`` runs :data:`QUICK` unless ``--full`` (:func:`audit_scale`): ``fit_documents=N`` fits the pipeline on a
seeded subsample of N train and N // 4 dev documents (the random neighbours are then that subsample's train
sentences), and only the sentences of those and of the audited test documents are encoded.

The empirical lower bounds are in :mod:`veil.experiments.sentdp.empirical`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from veil.validation import check_int, check_real
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.results import Metric, ResultRecord

if TYPE_CHECKING:  # pragma: no cover
    from veil.corpora.base import Corpus
    from veil.defenses.sentdp.pipeline import SentDPPipeline
    from veil.encoders.text import TextEncoder

__all__ = ["run_sentdp_audit", "audit_file_name", "audit_scale", "QUICK", "FULL", "MIN_CANDIDATE_SENTENCES",
           "MIN_AUDIT_SENTENCES", "MIN_FIT_DOCUMENTS"]

MIN_CANDIDATE_SENTENCES = 8  # App. B: candidates from training documents with at least 8 sentences
MIN_AUDIT_SENTENCES = 2      # a document with one sentence has only trivial neighbours
MIN_FIT_DOCUMENTS = 2        # the recoder's k-means needs as many train documents as clusters (at least 2)

#: the command's default scale: 20 test documents audited, the pipeline fitted on 200 train and 50 dev documents
#: (14,529 sentences of spam-assassin, 6,562 of news-articles; a cold-cache run on 2 busy cores took 3m12s and 2m36s)
QUICK: dict[str, Any] = {"n_documents": 20, "fit_documents": 200}
#: ``--full``: the paper's run, every eligible test document and the whole train/dev split (the whole corpus encoded)
FULL: dict[str, Any] = {"n_documents": None, "fit_documents": None}


def audit_scale(*, full: bool = False, n_documents: int | None = None, fit_documents: int | None = None
                ) -> dict[str, int | None]:
    """The ``n_documents`` and ``fit_documents`` of ``veil audit sentdp``: those given as None take :data:`QUICK`
    (or :data:`FULL` with ``full=True``); 0 means all of them (None, as ``--full`` does). Pass them on to
    :func:`run_sentdp_audit`.
    """
    if not isinstance(full, bool):
        raise InvalidTypeError(f"full must be True or False, not {type(full).__name__}")
    given = {"n_documents": n_documents, "fit_documents": fit_documents}
    out: dict[str, int | None] = {}
    for key, value in given.items():
        value = (FULL if full else QUICK)[key] if value is None else check_int(
            key, value, minimum=0, hint="; 0 means all of them")
        out[key] = value or None
    if out["fit_documents"] is not None and out["fit_documents"] < MIN_FIT_DOCUMENTS:
        raise InvalidParameterError(f"fit_documents (--fit-documents) must be 0 (the whole train/dev split) or at "
                                    f"least {MIN_FIT_DOCUMENTS}, got {out['fit_documents']}: the recoder clusters "
                                    "the train documents")
    return out


def _eps_key(e: float) -> str:
    return f"{e:g}"


def audit_file_name(corpus: str, *, depth: str, n_documents: int | None, neighbours: int, n_projections: int,
                    seed: int, recoder: bool = True, control: str | None = None,
                    fit_documents: int | None = None) -> str:
    """``audit-<corpus>[-<depth>][-control-<name>]-<documents, [fit,] neighbours, projections, [rec0,] seed>.json``.

    ``fit<N>`` only for a pipeline fitted on a subsample (``fit_documents``): the paper runs' names stay.
    """
    from veil.outputs import tag

    sizes = tag(docs=n_documents or "all", fit=fit_documents, nb=neighbours, p=n_projections,
                rec=None if recoder else 0, seed=seed)
    return f"{_audit_experiment(corpus, depth, control)}-{sizes}.json"


def _audit_experiment(corpus: str, depth: str, control: str | None) -> str:
    return (f"audit-{corpus}" + ("" if depth == "tukey-min" else f"-{depth}")
            + ("" if control is None else f"-control-{control}"))


def _load_corpus(corpus: str | Corpus) -> Corpus:
    import veil.corpora as vc
    from veil.corpora.base import Corpus

    if isinstance(corpus, str):
        data = vc.load(corpus)
    elif isinstance(corpus, Corpus):
        data = corpus
    else:
        raise InvalidTypeError(f"corpus must be a corpus name or a veil Corpus, not {type(corpus).__name__}")
    if data.documents is None:
        raise DataFormatError(f"corpus {data.name!r} has no sentence lists; use a document corpus "
                              f"(news-articles, spam-assassin)")
    return data


def _pipeline(corpus: str | Corpus, data: Corpus, encoder: TextEncoder, *, recoder: bool, progress: bool
              ) -> SentDPPipeline:
    """The cached pipeline of ``veil sentdp embed`` for a registered corpus; otherwise one fitted on ``data``."""
    from veil.defenses.sentdp.pipeline import SentDPPipeline
    from veil.defenses.sentdp.recoder import RecoderConfig

    if isinstance(corpus, str) and recoder:
        from veil.experiments.sentdp.embed import fitted_pipeline

        return fitted_pipeline(corpus, progress=progress)
    n_train = int(sum(len(data.documents[i]) >= 1 for i in data.indices("train")))
    config = None
    if recoder:  # the paper's 50 clusters, fewer on a small (quick) corpus; recorded in the pipeline's config
        config = RecoderConfig() if n_train >= 100 else RecoderConfig(n_clusters=max(2, n_train // 2))
    return SentDPPipeline.fit(data, encoder=encoder, recoder=config, progress=progress)


def _check_candidates(data: Corpus, counts: np.ndarray, where: str = "") -> None:
    if not any(counts[i] >= MIN_CANDIDATE_SENTENCES for i in data.indices("train")):
        raise DataFormatError(f"corpus {data.name!r} has no train document with >= {MIN_CANDIDATE_SENTENCES} "
                              f"sentences to build public candidates from{where}")


def _fit_sample(data: Corpus, counts: np.ndarray, fit_documents: int, seed: int) -> dict[str, np.ndarray]:
    """The train and dev documents (>= 1 sentence) the pipeline is fitted on: ``fit_documents`` train documents and
    ``fit_documents // 4`` (at least 1) dev documents, drawn with ``default_rng([seed, 1])`` (apart from the audit's
    own draws, so the audited documents, projections and neighbours do not depend on it)."""
    rng = np.random.default_rng([seed, 1])
    out = {}
    for split, size in (("train", fit_documents), ("dev", max(1, fit_documents // 4))):
        pool = np.asarray([i for i in data.indices(split) if counts[i] >= 1], dtype=np.int64)
        if not len(pool):
            raise DataFormatError(f"corpus {data.name!r} has no {split} document to fit the pipeline on")
        if size > len(pool):
            _warn_capped(f"fit_documents {fit_documents} asks for {size} {split} documents but {data.name} has "
                         f"{len(pool)}; the pipeline is fitted on all of them (the record says how many)")
        out[split] = np.sort(rng.permutation(pool)[:size])
    return out


def _warn_capped(message: str) -> None:
    """One line: a value larger than the data was capped (never silently)."""
    import warnings

    from veil.errors import DataWarning

    warnings.warn(message, DataWarning, stacklevel=3)


def _announce_sentences(encoder: TextEncoder, data: Corpus, what: str, log: Any = None) -> None:
    """One line before ``encode_sentences(encoder, data)``: how many sentences, how many cached, how long."""
    from veil.encoders.plan import announce_sentences

    announce_sentences(encoder, data, what=what, log=log)


def _encoder_text(encoder: TextEncoder) -> str:
    return (f"{getattr(encoder, 'model_name', type(encoder).__name__)} ({encoder.model_id}), "
            f"pooling={encoder.pooling}, max_length={encoder.max_length}, normalize={encoder.normalize}")


def run_sentdp_audit(corpus: str | Corpus, *, epsilons: Sequence[float] = (1, 3, 10, 30),
                     n_documents: int | None = None, neighbours_per_document: int = 35, n_projections: int = 50,
                     depth: str = "tukey-min", seed: int = 0, results_dir: str | Path | None = None,
                     encoder: TextEncoder | None = None, progress: bool = True, force: bool = False,
                     pipeline: SentDPPipeline | None = None, recoder: bool = True,
                     control: str | None = None, fit_documents: int | None = None,
                     log: Callable[[str], object] | None = None) -> ResultRecord:
    """Audit DeepCandidate on ``corpus`` (a registered name, or a loaded document :class:`Corpus`).

    ``n_documents``: how many eligible test documents to audit (None: all of
    them; otherwise a sample drawn with ``seed``). ``encoder`` defaults to
    ``TextEncoder("minilm")``. ``pipeline``: the fitted pipeline to audit (default: see the
    module docstring; ``recoder=False`` fits one without H). ``fit_documents``: None fits the
    pipeline on the whole train/dev split (the whole corpus is encoded); N fits it on a sample of
    N train and N // 4 dev documents drawn with ``seed``, and only their sentences and the
    audited documents' are encoded (:func:`audit_scale` gives the command's quick default).
    ``control``: a name from
    :data:`~veil.defenses.sentdp.controls.NEGATIVE_CONTROLS`, audited instead of the real mechanism
    (it must fail). The record (experiment ``audit-<corpus>[-<depth>][-control-<name>]``) is written
    atomically to ``results_dir/`` (:func:`audit_file_name`; ``results_dir=None``: not written; the
    CLI defaults to ``./veil-results/sentdp``) and returned; a summary is printed. The output
    location is checked before any work, and an existing file is replaced only with ``force=True``.
    The number of sentences to encode and an estimate of the time are given to ``log`` (default:
    stderr) before encoding.
    """
    from veil.attacks.audit.exact import NEIGHBOUR_KINDS, audit_sentdp
    from veil.defenses.sentdp.controls import NEGATIVE_CONTROLS
    from veil.encoders import TextEncoder, encode_sentences

    start = time.perf_counter()
    seed = check_int("seed", seed, minimum=0)
    if isinstance(epsilons, (str, bytes)) or not isinstance(epsilons, Sequence) or not epsilons:
        raise InvalidTypeError("epsilons must be a non-empty sequence of numbers, e.g. (1, 3, 10, 30)")
    epsilons = tuple(check_real("epsilon", e, low=0.0, high=np.inf, low_open=True, high_open=True,
                                hint="; SentDP needs a finite epsilon > 0") for e in epsilons)
    if n_documents is not None:
        n_documents = check_int("n_documents", n_documents, minimum=1)
    if fit_documents is not None:
        fit_documents = check_int("fit_documents", fit_documents, minimum=MIN_FIT_DOCUMENTS,
                                  hint="; None fits the pipeline on the whole train/dev split")
        if pipeline is not None:
            raise InvalidParameterError("fit_documents chooses the documents the pipeline is fitted on, but a "
                                        "fitted pipeline was given; leave fit_documents None")
    if control is not None and control not in NEGATIVE_CONTROLS:
        raise InvalidParameterError(f"unknown negative control {control!r}; valid: {', '.join(NEGATIVE_CONTROLS)}")
    if pipeline is not None:
        recoder = pipeline.recoder is not None
    out_path = None
    if results_dir is not None:
        from veil.outputs import check_output_dir, existing_record

        name = corpus if isinstance(corpus, str) else getattr(corpus, "name", "corpus")
        out_path = check_output_dir(results_dir) / audit_file_name(
            name, depth=depth, n_documents=n_documents, neighbours=neighbours_per_document,
            n_projections=n_projections, seed=seed, recoder=recoder, control=control, fit_documents=fit_documents)
        # the file name holds everything but the epsilons: another epsilon list is named as the difference;
        # fit_documents only when set, so the paper runs' records (made before it existed) are still this config
        existing_record(out_path, {"corpus": name, "epsilons": list(epsilons), "n_documents_requested": n_documents,
                                   "neighbours_per_document": neighbours_per_document,
                                   "n_projections": n_projections, "depth": depth, "seed": seed,
                                   "recoder": recoder, "control": control,
                                   **({} if fit_documents is None else {"fit_documents": fit_documents})},
                        force=force, keep=False)
    data = _load_corpus(corpus)
    counts = np.asarray([len(doc) for doc in data.documents], dtype=np.int64)
    _check_candidates(data, counts)
    eligible = [int(i) for i in data.indices("test") if counts[i] >= MIN_AUDIT_SENTENCES]
    if not eligible:
        raise DataFormatError(f"corpus {data.name!r} has no test document with >= {MIN_AUDIT_SENTENCES} sentences")
    # the audited documents are chosen before anything is encoded (the same draws from ``gen`` as always)
    gen = np.random.default_rng(seed)
    if n_documents is not None and n_documents > len(eligible):
        _warn_capped(f"{n_documents} documents asked but {data.name} has only {len(eligible)} test documents with "
                     f">= {MIN_AUDIT_SENTENCES} sentences; auditing all {len(eligible)} (the record says "
                     "n_documents)")
    if n_documents is not None and n_documents < len(eligible):
        eligible = sorted(int(i) for i in gen.choice(eligible, size=n_documents, replace=False))
    fit = None
    if fit_documents is not None:
        fit = _fit_sample(data, counts, fit_documents, seed)
        rows = np.sort(np.concatenate([fit["train"], fit["dev"], np.asarray(eligible, dtype=np.int64)]))
        position = {int(i): n for n, i in enumerate(rows)}
        data, counts = data.select(rows), counts[rows]
        audited = [position[i] for i in eligible]  # the subsample's positions; the record keeps the corpus' ids
        _check_candidates(data, counts, " in the subsample the pipeline is fitted on; raise fit_documents")
    else:
        audited = eligible

    if encoder is None:
        encoder = TextEncoder("minilm")
    if fit is None:
        scope = "every split: the pipeline is fitted on train/dev, random neighbours are train sentences"
    else:
        scope = (f"a seeded subsample: the {len(audited)} audited test documents and the {len(fit['train'])} "
                 f"train and {len(fit['dev'])} dev documents the pipeline is fitted on; --full audits every test "
                 "document with the pipeline fitted on the whole corpus")
    _announce_sentences(encoder, data, f"sentences of {data.name} ({scope})", log)
    S_flat, offsets = encode_sentences(encoder, data, progress=progress)
    if pipeline is not None:
        pipe = pipeline
    else:
        pipe = _pipeline(corpus if fit is None else data, data, encoder, recoder=recoder, progress=progress)
    if pipe.dim != S_flat.shape[1]:
        raise DataFormatError(f"the pipeline's candidates have {pipe.dim} dimensions but the encoder gives "
                              f"{S_flat.shape[1]}; fit the pipeline with the same encoder")
    R = pipe.recode(S_flat)  # the sentence embeddings DeepCandidate sees (H applied; identity without H)
    pool_idx = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in data.indices("train")])
    pool = R[pool_idx]
    documents = [R[offsets[i]:offsets[i + 1]] for i in audited]

    # utilities do not depend on epsilon; rng=None keeps the mechanism's own sampling unseeded (it is not used)
    if control is None:
        mechanism = pipe.mechanism(epsilon=max(epsilons), n_projections=n_projections, depth=depth)
    else:
        mechanism = NEGATIVE_CONTROLS[control](candidates=pipe.candidates, epsilon=max(epsilons),
                                               n_projections=n_projections, depth=depth)
    sweep = audit_sentdp(mechanism, documents, epsilons=epsilons,
                         neighbours_per_document=neighbours_per_document, pool=pool, document_ids=eligible,
                         rng=gen, progress=progress)

    config: dict[str, Any] = {
        "corpus": data.name, "epsilons": list(epsilons), "n_documents": len(documents),
        "n_documents_requested": n_documents, "neighbours_per_document": neighbours_per_document,
        "neighbour_kinds": list(NEIGHBOUR_KINDS), "n_projections": n_projections, "depth": depth, "seed": seed,
        "encoder": _encoder_text(encoder), "recoder": pipe.recoder is not None,
        "control": control, "expected": "pass" if control is None else "fail (a deliberately broken mechanism)",
        "candidates": "the SentDPPipeline's own: recoded mean sentence embeddings of train documents with >= "
                      f"{MIN_CANDIDATE_SENTENCES} sentences" + ("" if pipe.recoder is not None else " (no recoder)"),
        "m": int(pipe.candidates.shape[0]), "dim": int(pipe.candidates.shape[1]), "pipeline": pipe.config(),
        "documents": f"test documents with >= {MIN_AUDIT_SENTENCES} sentences, recoded by the pipeline"
                     + ("" if n_documents is None else f", a sample of {n_documents} drawn with the seed"),
        "pool": (f"sentences of all train documents, recoded by the pipeline ({len(pool)})" if fit is None else
                 f"sentences of the {len(fit['train'])} train documents the pipeline is fitted on, recoded by it "
                 f"({len(pool)})"),
        "projections": "seeded: one fixed projection set per audited document drawn from numpy "
                       "default_rng(seed) (sequentially with the document sample and the neighbours); this is an "
                       "audit, not a release, where projections come from the OS CSPRNG",
        "tolerance": sweep.audits[0].tolerance,
    }
    if fit is not None:  # absent from the paper runs' configs (fitted on the whole train/dev split)
        config["fit_documents"] = fit_documents
        config["fit"] = (f"the pipeline fitted on a sample of {len(fit['train'])} train and {len(fit['dev'])} dev "
                         "documents (>= 1 sentence) drawn with numpy default_rng([seed, 1]); only their sentences and "
                         "the audited documents' were encoded")
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
    if control is not None:
        metrics["control_caught"] = Metric(mean=float(not sweep.passed))
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
    record = ResultRecord(method="sentdp", experiment=_audit_experiment(data.name, depth, control), config=config,
                          metrics=metrics, wall_time_s=time.perf_counter() - start, extra=extra)
    if out_path is not None:
        record.write(out_path)
    _print_summary(data.name, sweep, control)
    return record


def _print_summary(name: str, sweep: Any, control: str | None = None) -> None:
    verdict = "PASSED" if sweep.passed else "FAILED"
    if control is not None:
        verdict += f" (negative control {control}: {'caught, as it must be' if not sweep.passed else 'NOT CAUGHT'})"
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
