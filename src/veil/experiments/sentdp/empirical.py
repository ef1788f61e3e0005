"""SentDP privacy audits on a real document corpus: the empirical lower bounds.

Empirical lower bounds (:func:`run_empirical_audit`, :mod:`veil.attacks.audit.empirical`): for
DeepCandidate (the same pipeline), truncation and word-level metric DP at each epsilon and
neighbour kind (:data:`~veil.attacks.audit.pairs.NEIGHBOUR_KINDS`), a distinguishing game on
test documents gives epsilon_lb at a stated confidence, beside the formal sentence-level epsilon. The exact audit and
the helpers both share (the corpus, the pipeline, the encoder's description) are in
:mod:`veil.experiments.sentdp.audit`.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.experiments.sentdp.audit import (MIN_AUDIT_SENTENCES, _announce_sentences, _encoder_text, _eps_key,
                                           _load_corpus, _pipeline, _warn_capped)
from veil.results import Metric, ResultRecord
from veil.validation import check_int, check_real

if TYPE_CHECKING:  # pragma: no cover
    from veil.corpora.base import Corpus
    from veil.defenses.sentdp.pipeline import SentDPPipeline
    from veil.encoders.text import TextEncoder

__all__ = ["EmpiricalAuditConfig", "run_empirical_audit", "empirical_file_name", "MECHANISMS", "QUICK", "FULL",
           "empirical_config", "mdp_encodes_per_cell"]

MECHANISMS = ("deepcandidate", "truncation", "metric-dp")

@dataclass(frozen=True)
class EmpiricalAuditConfig:
    """One corpus' empirical audit: every (mechanism, epsilon, neighbour kind) gets one game and one record.

    ``trials``: scoring runs per input (DeepCandidate, truncation); ``selection_trials`` (default
    ``trials``): runs per input of each of the ``pairs`` candidate pairs kept after screening, to
    choose the test; ``mdp_trials``: both, for metric DP (every run re-encodes a sentence).
    ``documents``: test documents (>= 2 sentences) sampled with ``seed``, each offering
    ``neighbours_per_document`` neighbours to the screening (metric DP: their sentences of 8-30
    words). ``max_documents``: a seeded subsample per split (quick runs; the pipeline is then
    fitted on it). Mechanism randomness is the OS CSPRNG (the release path); seeds fix only public
    choices (documents, projections, neighbours).
    """

    corpus: str = "news-articles"
    mechanisms: tuple[str, ...] = MECHANISMS
    epsilons: tuple[float, ...] = (1.0, 3.0, 10.0)
    trials: int = 20000
    selection_trials: int | None = None
    mdp_trials: int = 2000
    pairs: int = 3
    documents: int = 8
    neighbours_per_document: int = 8
    confidence: float = 0.95
    n_projections: int = 50
    depth: str = "tukey-min"
    max_documents: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        bad = [m for m in self.mechanisms if m not in MECHANISMS]
        if bad or not self.mechanisms:
            raise InvalidParameterError(f"unknown mechanism(s) {bad or '(none)'}; use some of {', '.join(MECHANISMS)}")
        if not self.epsilons:
            raise InvalidParameterError("epsilons is empty; give e.g. (1, 3, 10)")
        for e in self.epsilons:
            check_real("epsilon", e, low=0.0, high=np.inf, low_open=True, high_open=True)
        for name in ("trials", "mdp_trials"):
            check_int(name, getattr(self, name), minimum=20)
        if self.selection_trials is not None:
            check_int("selection_trials", self.selection_trials, minimum=20)
        for name in ("pairs", "documents", "neighbours_per_document", "n_projections"):
            check_int(name, getattr(self, name), minimum=1)
        if self.max_documents is not None:
            check_int("max_documents", self.max_documents, minimum=1)
        check_real("confidence", self.confidence, low=0.0, high=1.0, low_open=True, high_open=True)
        check_int("seed", self.seed, minimum=0)

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


#: the command's default scale: minutes on a cold embedding cache (a seeded subsample per split, fewer runs)
QUICK: dict[str, Any] = {"max_documents": 60, "trials": 2000, "mdp_trials": 200}
#: ``--full``: the whole corpus and the paper's run counts (hours on a cold embedding cache on 2 cores)
FULL: dict[str, Any] = {"max_documents": None, "trials": EmpiricalAuditConfig.trials,
                        "mdp_trials": EmpiricalAuditConfig.mdp_trials}


def empirical_config(*, full: bool = False, **settings: Any) -> EmpiricalAuditConfig:
    """The config of ``veil audit empirical``: settings given as None take :data:`QUICK` (or :data:`FULL`).

    ``max_documents=0`` means the whole corpus (``max_documents=None`` in the config), as ``--full`` does.
    """
    if not isinstance(full, bool):
        raise InvalidTypeError(f"full must be True or False, not {type(full).__name__}")
    scale = FULL if full else QUICK
    for key, value in scale.items():
        if settings.get(key) is None:
            settings[key] = value
    if settings.get("max_documents") == 0:
        settings["max_documents"] = None
    return EmpiricalAuditConfig(**{k: v for k, v in settings.items() if v is not None or k == "max_documents"})


def mdp_encodes_per_cell(cfg: EmpiricalAuditConfig) -> int:
    """At most how many noisy sentences one metric-DP game encodes (its runs' outputs, both inputs, all pairs).

    Screening encodes each kept pair's two sentences; the selection runs (half of them fit the learned
    statistic, which reads words, not embeddings) and the scoring runs each encode their output.
    """
    n_choose = cfg.mdp_trials - int(round(0.5 * cfg.mdp_trials))
    return cfg.pairs * (2 + 2 * n_choose) + 2 * cfg.mdp_trials


def empirical_file_name(cfg: EmpiricalAuditConfig, mechanism: str, kind: str, epsilon: float) -> str:
    """``empirical-<corpus>-<mechanism>-<kind>-eps<e>-<trials, selection, pairs, [n,] seed>.json``."""
    from veil.outputs import tag

    trials = cfg.mdp_trials if mechanism == "metric-dp" else cfg.trials
    sel = cfg.mdp_trials if mechanism == "metric-dp" else (cfg.selection_trials or cfg.trials)
    # the other settings are named only where they differ from the defaults (the paper runs' names stay)
    d = EmpiricalAuditConfig
    other = {"docs": cfg.documents if cfg.documents != d.documents else None,
             "nb": cfg.neighbours_per_document if cfg.neighbours_per_document != d.neighbours_per_document else None,
             "conf": cfg.confidence if cfg.confidence != d.confidence else None,
             "p": cfg.n_projections if cfg.n_projections != d.n_projections else None,
             "depth": cfg.depth if cfg.depth != d.depth else None}
    return (f"empirical-{cfg.corpus}-{mechanism}-{kind}-eps{_eps_key(epsilon)}-"
            f"{tag(t=trials, sel=sel, pairs=cfg.pairs, n=cfg.max_documents, **other, seed=cfg.seed)}.json")


class _EmpiricalData:
    """The corpus, its sentence embeddings, the audited test documents and (lazily) each mechanism's public parts."""

    def __init__(self, cfg: EmpiricalAuditConfig, corpus: Corpus | None, encoder: TextEncoder | None,
                 progress: bool, log: Any = None) -> None:
        from veil.encoders import TextEncoder, encode_sentences

        self.cfg, self.progress, self.log = cfg, progress, log
        self.given = corpus  # None: loaded by name (then the release pipeline comes from the cache)
        corpus = _load_corpus(cfg.corpus if corpus is None else corpus)
        if corpus.name != cfg.corpus:
            raise InvalidParameterError(f"the corpus given is {corpus.name!r} but the config names {cfg.corpus!r}")
        counts = np.asarray([len(d) for d in corpus.documents])
        if cfg.max_documents is not None:
            rng = np.random.default_rng(cfg.seed)
            picks = [rng.permutation(idx[counts[idx] >= MIN_AUDIT_SENTENCES])[:cfg.max_documents]
                     for idx in (corpus.indices(s) for s in ("train", "dev", "test"))]
            if all(len(p) < cfg.max_documents for p in picks):
                _warn_capped(f"--max-documents {cfg.max_documents} is more than every split of {corpus.name} has "
                             f"({', '.join(str(len(p)) for p in picks)} train/dev/test documents with >= "
                             f"{MIN_AUDIT_SENTENCES} sentences); all of them are used")
            corpus = corpus.select(np.sort(np.concatenate(picks)))
            counts = np.asarray([len(d) for d in corpus.documents])
        self.corpus, self.counts = corpus, counts
        self.encoder = encoder or TextEncoder("minilm")
        scope = ("every document" if cfg.max_documents is None else
                 f"a seeded subsample of {cfg.max_documents} documents per split, {len(corpus.documents)} in all; "
                 "--full or --max-documents 0 audits the whole corpus")
        _announce_sentences(self.encoder, corpus, f"sentences of {corpus.name} ({scope})", log)
        self.S, self.offsets = encode_sentences(self.encoder, corpus, progress=progress)
        self.train = np.asarray([i for i in corpus.indices("train") if counts[i] >= MIN_AUDIT_SENTENCES])
        test = [int(i) for i in corpus.indices("test") if counts[i] >= MIN_AUDIT_SENTENCES]
        if not test or not len(self.train):
            raise DataFormatError(f"corpus {corpus.name!r} needs train and test documents with >= "
                                  f"{MIN_AUDIT_SENTENCES} sentences")
        gen = np.random.default_rng([cfg.seed, 1])
        if cfg.documents > len(test):
            _warn_capped(f"{cfg.documents} documents asked but {corpus.name} has only {len(test)} test documents "
                         f"with >= {MIN_AUDIT_SENTENCES} sentences; all {len(test)} offer neighbours (the record "
                         "lists them)")
        self.test = sorted(int(i) for i in gen.choice(test, size=min(cfg.documents, len(test)), replace=False))
        self._pipe = self._vectors = self.embedder = None

    def blocks(self, X: np.ndarray) -> list[np.ndarray]:
        return [X[self.offsets[i]:self.offsets[i + 1]] for i in self.test]

    def pipeline(self) -> SentDPPipeline:
        if self._pipe is None:  # the cached release pipeline for a whole registered corpus, else fitted here
            name = self.cfg.corpus if self.cfg.max_documents is None and self.given is None else self.corpus
            self._pipe = _pipeline(name, self.corpus, self.encoder, recoder=True, progress=self.progress)
        return self._pipe

    def word_vectors(self) -> Any:
        if self._vectors is None:
            from veil.attacks.audit.pairs import CachedEmbedder
            from veil.encoders.plan import announce_encoding
            from veil.encoders.word_vectors import WordVectors, build_vocabulary

            texts = [s for i in self.train for s in self.corpus.documents[i]]  # public: the vocabulary
            words = build_vocabulary(texts, max_size=10000)
            name = f"{self.corpus.name}-vocabulary"
            announce_encoding(self.encoder, words, what=f"vocabulary words of {self.corpus.name}'s train documents "
                              "(metric DP's word vectors, each word alone)", cache_as=(name, "words"), log=self.log)
            self._vectors = WordVectors.from_encoder(self.encoder, words, name=name)
            self.embedder = CachedEmbedder(self.encoder)
        return self._vectors

    def sentences(self) -> list[tuple[int, int, str]]:
        from veil.encoders.word_vectors import WORD_PATTERN

        return [(i, j, s) for i in self.test for j, s in enumerate(self.corpus.documents[i])
                if 8 <= len(WORD_PATTERN.findall(s)) <= 30]


def _game_pairs(data: _EmpiricalData, mechanism: str, epsilon: float, kind: str, trials: int, alpha: float
                ) -> tuple[Any, list[Any], dict[str, Any]]:
    """The mechanism (unseeded: the release path), the screened candidate pairs and what describes them."""
    from veil.attacks.audit import pairs as ep

    cfg = data.cfg
    rng = np.random.default_rng([cfg.seed, zlib.crc32(f"{mechanism}/{epsilon:g}/{kind}".encode())])
    if mechanism == "deepcandidate":
        pipe = data.pipeline()
        mech = pipe.mechanism(epsilon=epsilon, n_projections=cfg.n_projections, depth=cfg.depth)
        pairs = ep.deepcandidate_pairs(mech, [pipe.recode(b) for b in data.blocks(data.S)], kind=kind,
                                       neighbours_per_document=cfg.neighbours_per_document, keep=cfg.pairs,
                                       trials=trials, alpha=alpha, document_ids=data.test, rng=rng)
        return mech, pairs, {"n_projections": cfg.n_projections, "depth": cfg.depth, "m": mech.m,
                             "pipeline": pipe.config(), "space": "sentence embeddings recoded by the pipeline's H"}
    if mechanism == "truncation":
        from veil.defenses.sentdp.recoder import document_means
        from veil.defenses.truncation import Truncation

        mech = Truncation.fit(document_means(data.S, data.offsets)[data.train], epsilon=epsilon)
        pairs = ep.truncation_pairs(mech, data.blocks(data.S), kind=kind,
                                    neighbours_per_document=cfg.neighbours_per_document, keep=cfg.pairs,
                                    document_ids=data.test, rng=rng)
        return mech, pairs, {"coverage": mech.coverage, "space": "MiniLM sentence embeddings (no recoder)",
                             "box": "central 75% of the train documents' mean embeddings, per dimension"}
    from veil.defenses.metric_dp import WordMetricDP

    vectors = data.word_vectors()
    mech = WordMetricDP(vectors=vectors, epsilon=epsilon)
    pairs = ep.metric_dp_pairs(mech, data.sentences(), kind=kind, keep=cfg.pairs, embed=data.embedder)
    return mech, pairs, {"vocabulary": len(vectors), "word_vectors": "MiniLM static (each word encoded alone, raw)",
                         "guarantee": "epsilon-metric-DP per word; formal_epsilon is the changed sentence's bound"}


def _empirical_record(cfg: EmpiricalAuditConfig, data: _EmpiricalData, mechanism: str, epsilon: float, kind: str,
                      mech: Any, pairs: list[Any], setting: dict[str, Any], result: Any, start: float,
                      cache: dict[str, int] | None) -> ResultRecord:
    chosen = dict(result.info)
    formal = float(chosen["formal_epsilon"]) if mechanism == "metric-dp" else float(epsilon)
    lb, bound = result.epsilon_lower_bound, result.bound
    config: dict[str, Any] = {
        "corpus": data.corpus.name, "method": mechanism, "mechanism": mechanism, "epsilon": float(epsilon),
        "neighbours": kind, "trials": result.trials, "selection_trials": result.selection_trials,
        "fit_trials": result.fit_trials, "pairs": len(pairs), "confidence": cfg.confidence,
        "documents": data.test, "formal_epsilon": formal,
        "formal": ("epsilon-SentDP: the stated epsilon bounds any one-sentence change" if mechanism != "metric-dp"
                   else "epsilon * sum of ||phi(w) - phi(w')|| over the changed words (word-level metric DP)"),
        "bound": "eps_lb = max(0, log((1 - FNR_hi) / FPR_hi), log((1 - FPR_hi) / FNR_hi)) on the scoring runs; "
                 "FPR_hi, FNR_hi one-sided Clopper-Pearson upper limits at 1 - alpha/2 each (joint confidence >= "
                 "1 - alpha by the union bound); the pair, statistic and threshold chosen on separate selection "
                 "runs (learned statistics fitted on separate fit runs)",
        "randomness": "mechanism: OS CSPRNG (the release path, unseeded); documents, projections and neighbours: "
                      "seeded", "encoder": _encoder_text(data.encoder), "seed": cfg.seed,
        "max_documents": cfg.max_documents, "sampler": mech.config(), **setting,
        "audit": _identity(cfg, data.encoder)}
    alpha = bound.alpha
    metrics = {
        "epsilon_lower_bound": Metric(mean=lb, n=result.trials, ci_level=cfg.confidence),
        "formal_epsilon": Metric(mean=formal),
        "lower_bound_over_formal": Metric(mean=lb / formal),
        "fpr": Metric(mean=bound.fpr, n=bound.n_x, ci_high=bound.fpr_upper, ci_level=1 - alpha / 2),
        "fnr": Metric(mean=bound.fnr, n=bound.n_x2, ci_high=bound.fnr_upper, ci_level=1 - alpha / 2),
        "selection_bound": Metric(mean=result.selection_bound),
        "violation": Metric(mean=float(lb > formal)),
    }
    if bound.point_estimate is not None:
        metrics["point_estimate"] = Metric(mean=bound.point_estimate, n=result.trials)
    extra = {"game": result.to_dict(), "candidate_pairs": [dict(p.info, name=p.name) for p in pairs],
             "statistics": {s.name: s.description for p in pairs for s in p.statistics}}
    if cache is not None:
        extra["embedding_cache"] = cache
    return ResultRecord(method="sentdp", experiment=f"empirical-{data.corpus.name}-{mechanism}-{kind}-eps"
                                                    f"{_eps_key(epsilon)}", config=config, metrics=metrics,
                        wall_time_s=time.perf_counter() - start, extra=extra)


def run_empirical_audit(cfg: EmpiricalAuditConfig, *, results_dir: str | Path | None = None,
                        corpus: Corpus | None = None, encoder: TextEncoder | None = None, progress: bool = True,
                        force: bool = False, log: Any = print) -> list[ResultRecord]:
    """Empirical epsilon lower bounds for ``cfg``; one record per (mechanism, epsilon, neighbour kind).

    Resumable: a record whose file exists in ``results_dir`` (default ``./veil-results/sentdp``)
    is read back and skipped, unless ``force=True`` (then it is recomputed and replaced). Returns
    every record of the plan, in plan order. ``corpus``: the loaded corpus named ``cfg.corpus``
    (default: loaded by name; given, its DeepCandidate pipeline is fitted here, not taken from
    the cache of ``veil sentdp embed``).
    """
    from veil.attacks.audit.pairs import NEIGHBOUR_KINDS
    from veil.outputs import check_output_dir, default_results_dir, existing_record

    if not isinstance(cfg, EmpiricalAuditConfig):
        raise InvalidTypeError(f"cfg must be an EmpiricalAuditConfig, not {type(cfg).__name__}")
    results_dir = check_output_dir(results_dir if results_dir is not None else default_results_dir("sentdp"))
    plan = [(m, float(e), k) for m in cfg.mechanisms for e in cfg.epsilons for k in NEIGHBOUR_KINDS[m]]
    paths = {(m, e, k): results_dir / empirical_file_name(cfg, m, k, e) for m, e, k in plan}
    # a record is reused only if it was made under this configuration (the mechanism and epsilon lists aside:
    # each record is one of their cells); a damaged or stale one stops the run here, before any work
    requested = _identity(cfg, encoder)
    done = {key: rec for key, p in paths.items()
            if (rec := existing_record(p, requested, force=force, part="audit",
                                       ignore=("mechanisms", "epsilons"))) is not None}
    if done:
        log(f"{cfg.corpus}: {len(done)} of {len(plan)} empirical records exist and are kept (--force recomputes)")
    if len(done) == len(plan):
        return [done[key] for key in plan]
    data = _EmpiricalData(cfg, corpus, encoder, progress, log)
    mdp_cells = sum(1 for key in plan if key not in done and key[0] == "metric-dp")
    if mdp_cells:
        log(f"veil: metric DP then encodes the noisy sentences its games draw: at most "
            f"{mdp_encodes_per_cell(cfg):,} per game ({mdp_cells} games, --mdp-trials {cfg.mdp_trials}); the "
            f"line of each game gives its time")
    from functools import partial

    from veil.experiments._sweep import Sweep, run_records

    # sequential only: the games share the encoded corpus and the metric-DP embedding cache, whose hits and misses
    # each record counts
    sweep = Sweep(name="empirical audit", path=paths.__getitem__, cell_id=_cell_id,
                  finished=partial(_planned_done, done=frozenset(done)),
                  run=partial(_run_game, cfg=cfg, data=data), summary=partial(_game_summary, cfg=cfg))
    run_records(sweep, plan, results_dir, force=force, progress=False, log=log)
    return [done[key] if key in done else ResultRecord.read(paths[key]) for key in plan]


def _identity(cfg: EmpiricalAuditConfig, encoder: TextEncoder | None) -> dict[str, Any]:
    """A record's ``config["audit"]``, compared before it is kept: the settings, and the backend of the frozen MiniLM
    encodings when it is not torch (``encoder_backend``; absent from every torch record): the given encoder's, else
    what the run's ``TextEncoder("minilm")`` will resolve."""
    from veil.encoders.backends import backend_identity

    return {**cfg.to_dict(), **backend_identity(encoder)}


def _cell_id(key: tuple[str, float, str]) -> str:
    mechanism, epsilon, kind = key
    return f"{mechanism} eps={epsilon:g} {kind}"


def _planned_done(key: tuple[str, float, str], path: Path, *, done: frozenset[tuple[str, float, str]]) -> bool:
    return key in done


def _run_game(key: tuple[str, float, str], *, cfg: EmpiricalAuditConfig, data: _EmpiricalData) -> ResultRecord:
    """One distinguishing game: (mechanism, epsilon, neighbour kind)."""
    from veil.attacks.audit.empirical import DistinguishingGame

    mechanism, epsilon, kind = key
    alpha = 1.0 - cfg.confidence
    start = time.perf_counter()
    mdp = mechanism == "metric-dp"
    trials = cfg.mdp_trials if mdp else cfg.trials
    before = (data.embedder.hits, data.embedder.misses) if data.embedder is not None else (0, 0)
    mech, pairs, setting = _game_pairs(data, mechanism, epsilon, kind, trials, alpha)
    game = DistinguishingGame(pairs, trials=trials, selection_trials=cfg.mdp_trials if mdp else
                              cfg.selection_trials, alpha=alpha)
    result = game.run()
    cache = None if not mdp else {"hits": data.embedder.hits - before[0],
                                  "misses": data.embedder.misses - before[1]}
    return _empirical_record(cfg, data, mechanism, epsilon, kind, mech, pairs, setting, result, start, cache)


def _game_summary(rec: ResultRecord, *, cfg: EmpiricalAuditConfig) -> str:
    game = rec.extra["game"]
    lb, formal = rec.metrics["epsilon_lower_bound"].mean, rec.metrics["formal_epsilon"].mean
    return (f"epsilon_lb {lb:.3f} ({100 * cfg.confidence:g}% confidence, {game['trials']} runs per input, test "
            f"{game['statistic']}) vs formal {formal:.3g}{'  ** VIOLATION **' if lb > formal else ''}")
