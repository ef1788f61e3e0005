"""Retrieval attacks on protected representations: RSS, RepRecon and a random-guess floor.

TextHide (Huang, Song, Chen, Li, Arora; Findings of EMNLP 2020):

* RSS, Representation-based Similarity Search (Sec. 4.4, Tables 3-4, App. C.2):
  the attacker holds an index of (sentence, original representation) pairs of
  the corpus and answers a protected query e~ with the sentence whose
  representation is MOST cosine-similar to e~ (the paper's ``argmin`` is an
  erratum). :class:`RSS`.
* RepRecon (App. C.3, Tables 7-8): an MLP (1024, 1024) trained for 20 epochs
  on (protected, original) pairs of the train split reconstructs e from e~,
  then RSS maps the reconstruction to a sentence. :class:`RepRecon`.
* Rand: each query answered with a uniformly random index entry, so every
  table has its floor. :class:`RandomGuess`.
* abs-RSS (:class:`~veil.attacks.retrieval.abs_rss.AbsRSS`, Carlini et al.
  2020's absolute-value step): RSS on centred absolute values, which removes
  TextHide's sign masks.

Scoring (:func:`evaluate_retrieval`) uses the five leakage metrics of
:mod:`veil.metrics.leakage` with confidence intervals and returns a frozen
:class:`RetrievalResult`. Given the mixing ground truth (a
:class:`~veil.attacks.retrieval.observe.MixTruth`, kept apart from the
attacker's Observation) it also scores ``identity_any``: the answer is ANY of
the encoding's private sources, next to ``identity`` (slot 0, the query itself,
as the paper). Verdicts against random guessing are tests at a stated alpha
(:mod:`veil.metrics.stats`): Identity, identity_any and Label by exact
binomial / Poisson-binomial tests against their known random rates, the other
metrics (in :func:`rss_table`) by a permutation test against Rand's
per-query scores. :func:`rss_table` (RSS or abs-RSS) and
:func:`reprecon_table` run the paper's settings (baseline (0, 1), mix-only
(0, 4), TextHide (256, 4), Rand).

Departures from the paper:

* the index holds MiniLM (all-MiniLM-L6-v2, mean pooled, L2-normalised)
  sentence embeddings, not BERT [CLS] vectors, and corpora are the offline
  ones (no CoLA/SST-2 here); search is exact (torch or faiss, identical
  answers, ties to the lowest index; see :mod:`veil.attacks.retrieval.index`);
* SBERT similarity is scored with MiniLM too (see :mod:`veil.metrics.leakage`);
* TextHide masks come from the OS CSPRNG (fresh pool per setting); the query
  of RSS is the training-time encryption (mixed with k-1 other queries of its
  batch of 64);
* RepRecon training details the paper leaves open are listed in
  :mod:`veil.attacks.retrieval.reprecon`.

>>> from veil.attacks.retrieval import SimilaritySearch, RSS, evaluate_retrieval, sample_queries
>>> from veil.attacks.retrieval import protect_with_texthide
>>> index = SimilaritySearch(corpus.texts, X, labels=corpus.labels)      # X: MiniLM embeddings
>>> q = sample_queries(len(index), 1000, rng=0)
>>> obs = protect_with_texthide(X[q], m=256, k=4)
>>> res = evaluate_retrieval(RSS(index), obs, q, text_embeddings=index.vectors)
>>> res.metrics["identity"], res.to_rows()

Importing this module does not import torch, faiss or sklearn.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from veil.attacks.base import Attack, AttackResult, Observation, ThreatModel, get_attack, rng_description
from veil.validation import as_vectors
from veil.attacks.retrieval.abs_rss import AbsRSS
from veil.attacks.retrieval.index import Retrieved, SimilaritySearch
from veil.attacks.retrieval.observe import (MixTruth, Protected, observe, observe_original, protect,
                                            protect_with_texthide, protect_with_texthide_truth, protect_with_truth,
                                            sample_queries)
from veil.attacks.retrieval.reprecon import RepRecon
from veil.validation import check_choice, check_int, check_rng
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.random import RngLike, as_generator

__all__ = ["RSS", "AbsRSS", "RepRecon", "RandomGuess", "RetrievalResult", "SimilaritySearch", "Retrieved",
           "evaluate_retrieval", "rss_table", "reprecon_table", "PAPER_SETTINGS", "TABLE_ATTACKS", "observe",
           "observe_original", "protect", "protect_with_texthide", "protect_with_truth", "protect_with_texthide_truth",
           "MixTruth", "Protected", "sample_queries", "compare_to_random"]

# (label, m, k) of the paper's Tables 3 and 8; (0, 1) is the undefended baseline
PAPER_SETTINGS: tuple[tuple[str, int, int], ...] = (("baseline", 0, 1), ("mix-only", 0, 4), ("texthide", 256, 4))
# attacks rss_table can run: registry names whose class is built from the index alone
TABLE_ATTACKS = ("rss", "abs-rss")
# metrics tested against their known random rate (exact tests); the others are tested against Rand's scores
_RATE_TESTED = ("identity", "identity_any", "label")


def _check_index(index: Any) -> SimilaritySearch:
    if not isinstance(index, SimilaritySearch):
        raise InvalidTypeError(f"index must be a SimilaritySearch, not {type(index).__name__}")
    return index


def _check_observation(observation: Any) -> Observation:
    if not isinstance(observation, Observation):
        raise InvalidTypeError(f"observation must be an Observation (observe_original, protect_with_texthide, "
                               f"observe), not {type(observation).__name__}")
    return observation


class RSS(Attack):
    """Representation-based Similarity Search: answer each protected query with the most similar index entry.

    Deterministic (exact search, ties to the lowest index), so it takes no rng.

    >>> RSS(index).retrieve(observation, top_k=1).top1     # (n,) index positions
    """

    name = "rss"
    citation = "Huang et al. 2020, TextHide, Sec. 4.4 (RSS, Tables 3-4), App. C.2"
    threat = ThreatModel(observes="protected query representations",
                         needs=("a search index of (text, original representation) pairs of the corpus",))
    observes = "vectors"
    bench_cell = "veil.bench.cells.vectors:retrieval_cell"

    def run(self, observation: Observation) -> Any:
        """The attack's one verb: :meth:`retrieve` (top-1) on the observation."""
        return self.retrieve(observation)

    @classmethod
    def for_bench(cls, resources: Any) -> "RSS":
        return cls(resources.index)

    def __init__(self, index: SimilaritySearch) -> None:
        self.index = _check_index(index)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "index": self.index.config()}

    def retrieve(self, observation: Observation, top_k: int = 1) -> Retrieved:
        return Retrieved(*self.index.query(_check_observation(observation).vectors, top_k=top_k))


class RandomGuess(Attack):
    """The floor: every query gets uniformly random index entries (distinct within a query when top_k > 1).

    Queries are answered independently (with replacement across queries).
    ``rng``: None = OS entropy; an int seed or numpy Generator makes the
    guesses reproducible (experiments and tests). Scores are NaN.
    """

    name = "random-guess"
    citation = "Huang et al. 2020, TextHide, Sec. 4.4 ('Rand' column of Tables 3 and 8)"
    threat = ThreatModel(observes="nothing but the number of queries", needs=("the index's entries",))
    observes = "vectors"
    bench_cell = "veil.bench.cells.vectors:retrieval_cell"
    floor = True

    def run(self, observation: Observation) -> Any:
        """The attack's one verb: :meth:`retrieve` (top-1) on the observation."""
        return self.retrieve(observation)

    @classmethod
    def for_bench(cls, resources: Any) -> "RandomGuess":
        return cls(resources.index, rng=resources.seed)

    def __init__(self, index: SimilaritySearch, *, rng: RngLike = None) -> None:
        self.index = _check_index(index)
        check_rng(rng)
        self._rng_desc = rng_description(rng)
        self._gen = as_generator(rng)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "index": self.index.config(), "rng": self._rng_desc}

    def retrieve(self, observation: Observation, top_k: int = 1) -> Retrieved:
        m, n = len(_check_observation(observation)), len(self.index)
        top_k = check_int("top_k", top_k, minimum=1, maximum=n)
        if top_k == 1:
            idx = self._gen.integers(0, n, size=(m, 1), dtype=np.int64)
        else:
            idx = np.stack([self._gen.choice(n, size=top_k, replace=False) for _ in range(m)]).astype(np.int64)
        return Retrieved(idx.reshape(m, top_k), np.full((m, top_k), np.nan))


@dataclass(frozen=True)
class RetrievalResult(AttackResult):
    """A retrieval attack's result; ``setting`` names the paper column (baseline, mix-only, texthide, random).

    ``significance``: metric name -> :class:`~veil.metrics.stats.Verdict` of a
    one-sided test that the attack beats random guessing on that metric (see
    :func:`evaluate_retrieval` and :func:`compare_to_random`). ``scores``:
    per-query scores of each metric (read-only arrays, kept in memory for
    tests against Rand; not exported to JSON).
    """

    setting: str = ""
    index: Mapping[str, Any] = field(default_factory=dict)
    significance: Mapping[str, Any] = field(default_factory=dict)
    scores: Mapping[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "index", MappingProxyType(dict(self.index)))
        object.__setattr__(self, "significance", MappingProxyType(dict(self.significance)))
        frozen = {}
        for name, vals in self.scores.items():
            a = np.array(vals, dtype=np.float64, copy=True)
            a.flags.writeable = False
            frozen[name] = a
        object.__setattr__(self, "scores", MappingProxyType(frozen))

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "setting": self.setting, "index": dict(self.index),
                "significance": {k: v.to_dict() for k, v in self.significance.items()}}

    def to_rows(self) -> list[dict[str, Any]]:
        rows = []
        for row in super().to_rows():
            v = self.significance.get(row["metric"])
            rows.append({"setting": self.setting, **row, "p_value": None if v is None else v.p_value,
                         "beats_random": None if v is None else v.reject,
                         "alpha": None if v is None else v.alpha})
        return rows

    def to_record(self, method: str, experiment: str) -> Any:
        """The record of :meth:`AttackResult.to_record`, plus the verdicts: ``config["significance"]`` (every
        test) and ``config["identity_p_value"]`` / ``config["identity_beats_random"]`` when Identity was tested."""
        rec = super().to_record(method, experiment)
        if self.significance:
            rec.config["significance"] = {k: v.to_dict() for k, v in self.significance.items()}
            ident = self.significance.get("identity")
            if ident is not None:
                rec.config.update(identity_p_value=ident.p_value, identity_beats_random=ident.reject,
                                  significance_alpha=ident.alpha)
        return rec


def _random_rates(index: SimilaritySearch, truth_ids: np.ndarray) -> np.ndarray:
    """Per-query probability that ONE uniformly random index entry has the text of any id in ``truth_ids[i]``
    (identity compares texts, so duplicated texts raise the rate)."""
    counts = Counter(index.texts)
    texts = index.texts
    rates = np.empty(len(truth_ids), dtype=np.float64)
    for i, row in enumerate(truth_ids):
        rates[i] = sum(counts[t] for t in {texts[int(j)] for j in row}) / len(index)
    return rates


def _label_rates(labels: np.ndarray, query_labels: np.ndarray) -> np.ndarray:
    values, counts = np.unique(labels, return_counts=True)
    freq = dict(zip(values.tolist(), (counts / len(labels)).tolist()))
    return np.array([freq[v] for v in query_labels.tolist()], dtype=np.float64)


def evaluate_retrieval(attack: Any, observation: Observation, query_ids: Any, *, truth: MixTruth | None = None,
                       tfidf: Any = None, text_embeddings: Any = None, n_examples: int = 5, ci_level: float = 0.95,
                       setting: str = "", alpha: float = 0.05) -> RetrievalResult:
    """Run ``attack.retrieve(observation)`` and score its top answer against the true query examples.

    ``query_ids``: the index position of the example behind each observed
    vector (ground truth, never shown to the attacker). ``truth``: the mixing
    ground truth (:class:`MixTruth` from :func:`protect_with_truth`), also
    never shown to the attacker; when given, ``identity_any`` is scored too:
    the returned text equals the text of ANY private source of the encoding
    (source positions map to index ids through ``query_ids``), next to
    ``identity`` (slot 0: the query itself). ``tfidf``: a fitted
    :class:`~veil.metrics.leakage.TfidfScorer` (default: fit on the index's
    texts, as the paper). ``text_embeddings``: (len(index), d) sentence
    embeddings of the index texts for the SBERT metric (pass ``index.vectors``
    when the index holds MiniLM embeddings); None leaves the metric out. The
    Label metric is included when the index has labels.

    ``significance`` gets exact one-sided tests at ``alpha`` against the
    known random rates (:mod:`veil.metrics.stats`): Identity and identity_any
    (rate = share of index entries holding the query's / a source's text;
    1/len(index) for a distinct text) and Label (share of index entries with
    the query's label).
    """
    from veil.metrics.leakage import TfidfScorer, leakage_scores, summarize_scores
    from veil.metrics.stats import check_alpha, hit_rate_test

    observation = _check_observation(observation)
    index = _check_index(getattr(attack, "index", None))
    q = np.asarray(query_ids)
    if q.ndim != 1 or q.dtype.kind not in "iu":
        raise InvalidTypeError(f"query_ids must be a 1-D integer array of index positions, got {q.dtype} {q.shape}")
    if len(q) != len(observation):
        raise DataFormatError(f"{len(q)} query ids for {len(observation)} observed vectors; pass one id per vector")
    if len(q) and (q.min() < 0 or q.max() >= len(index)):
        raise InvalidParameterError(f"query ids must be index positions in [0, {len(index) - 1}]")
    if truth is not None and not isinstance(truth, MixTruth):
        raise InvalidTypeError(f"truth must be a MixTruth (from protect_with_truth), not {type(truth).__name__}")
    if truth is not None and len(truth) != len(q):
        raise DataFormatError(f"truth describes {len(truth)} encodings but there are {len(q)} queries; pass the "
                              "truth returned with this observation")
    n_examples = check_int("n_examples", n_examples, minimum=0)
    alpha = check_alpha(alpha)
    start = time.perf_counter()
    answers = attack.retrieve(observation, top_k=1)
    attack_seconds = time.perf_counter() - start
    returned = answers.top1
    q_texts, r_texts = index.texts_at(q), index.texts_at(returned)
    if tfidf is None:
        tfidf = TfidfScorer(index.texts)
    kwargs: dict[str, Any] = {}
    if index.labels is not None:
        kwargs.update(query_labels=index.labels[q], returned_labels=index.labels[returned])
    if text_embeddings is not None:
        emb = as_vectors("text_embeddings", text_embeddings)
        if emb.shape[0] != len(index):
            raise DataFormatError(f"text_embeddings has {emb.shape[0]} rows but the index has {len(index)} entries; "
                                  "pass one embedding per index text, in index order")
        kwargs.update(query_emb=emb[q], returned_emb=emb[returned])
    scores = leakage_scores(q_texts, r_texts, tfidf=tfidf, **kwargs)
    metrics = summarize_scores(scores, ci_level=ci_level)
    significance = {"identity": hit_rate_test(scores["identity"], _random_rates(index, q[:, None]), alpha=alpha)}
    source_ids = None
    if truth is not None:
        source_ids = truth.index_ids(q)
        any_hit = np.array([r_texts[i] in {index.texts[int(j)] for j in source_ids[i]} for i in range(len(q))],
                           dtype=np.float64)
        scores["identity_any"] = any_hit
        # summarised under the name "identity" so it gets the same (Wilson) interval as a 0/1 proportion
        metrics["identity_any"] = summarize_scores({"identity": any_hit}, ci_level=ci_level)["identity"]
        significance["identity_any"] = hit_rate_test(any_hit, _random_rates(index, source_ids), alpha=alpha)
    if "label" in scores:
        significance["label"] = hit_rate_test(scores["label"], _label_rates(index.labels, index.labels[q]),
                                              alpha=alpha)
    examples = []
    for i in range(min(n_examples, len(q))):
        row = {"query_id": int(q[i]), "query": q_texts[i], "returned_id": int(returned[i]), "returned": r_texts[i],
               "score": float(answers.scores[i, 0])}
        if index.labels is not None:
            row.update(query_label=index.labels[q[i]].item(), returned_label=index.labels[returned[i]].item())
        if source_ids is not None:
            row["source_ids"] = [int(j) for j in source_ids[i]]
        examples.append(row)
    config = {**attack.config(), "observation": {k: v for k, v in observation.describe().items() if k != "defense"},
              "sbert_embeddings": "given" if text_embeddings is not None else "not scored",
              "tfidf": f"fit on {tfidf.n_documents} texts", "attack_seconds": attack_seconds, "ci_level": ci_level,
              "any_source": "scored (identity_any)" if truth is not None else "not scored", "alpha": alpha}
    config.pop("index", None)
    return RetrievalResult(attack=attack.name, defense=dict(observation.defense), n_queries=int(len(q)),
                           metrics=metrics, config=config, wall_time_s=time.perf_counter() - start,
                           examples=tuple(examples), setting=setting, index=index.config(),
                           significance=significance, scores=scores)


def compare_to_random(result: RetrievalResult, random_result: RetrievalResult, *, alpha: float | None = None,
                      n_resamples: int = 9999, rng: RngLike = None) -> RetrievalResult:
    """``result`` with one-sided permutation tests (:func:`veil.metrics.stats.two_sample_test`) of its
    per-query scores against Rand's for every metric without a known random rate (Jaccard, TF-IDF, SBERT).

    ``alpha`` defaults to the one ``result`` was evaluated at; ``rng`` draws the
    permutations (None = OS entropy).
    """
    from veil.metrics.stats import two_sample_test

    for name, r in (("result", result), ("random_result", random_result)):
        if not isinstance(r, RetrievalResult):
            raise InvalidTypeError(f"{name} must be a RetrievalResult, not {type(r).__name__}")
    alpha = float(result.config.get("alpha", 0.05)) if alpha is None else alpha
    gen = as_generator(rng)
    tests = dict(result.significance)
    for name, vals in result.scores.items():
        if name in _RATE_TESTED or name not in random_result.scores:
            continue
        tests[name] = two_sample_test(vals, random_result.scores[name], alpha=alpha, n_resamples=n_resamples,
                                      rng=gen)
    return replace(result, significance=tests)


def _setting_observation(vectors: np.ndarray, m: int, k: int, rng: np.random.Generator, batch_size: int,
                         texthide: Any = None) -> Observation:
    if m == 0 and k == 1:
        return observe_original(vectors)
    return protect_with_texthide(vectors, m, k, rng=rng, batch_size=batch_size, texthide=texthide)


def _setting_protected(vectors: np.ndarray, m: int, k: int, rng: np.random.Generator, batch_size: int) -> Protected:
    if m == 0 and k == 1:
        return Protected(observe_original(vectors), MixTruth.unmixed(len(vectors)))
    return protect_with_texthide_truth(vectors, m, k, rng=rng, batch_size=batch_size)


def rss_table(index: SimilaritySearch, query_ids: Any, *, settings: Sequence[tuple[str, int, int]] = PAPER_SETTINGS,
              rng: RngLike = None, text_embeddings: Any = None, batch_size: int = 64, random_guess: bool = True,
              n_examples: int = 5, attack: str = "rss", any_source: bool = False,
              alpha: float = 0.05) -> list[RetrievalResult]:
    """The paper's Table 3 on one corpus: ``attack`` per (label, m, k) setting, plus the random-guess floor.

    ``attack``: ``"rss"`` (the paper's) or ``"abs-rss"`` (:class:`AbsRSS`,
    sign-invariant), resolved through the attack registry. The queries are the
    index's own vectors at ``query_ids`` (the original representations),
    protected per setting; ``rng`` seeds the mixing and the random guesses
    (masks always come from the OS CSPRNG) and, after them, the permutation
    tests. ``any_source=True`` keeps each setting's mixing ground truth apart
    from the observation and scores ``identity_any`` too. With
    ``random_guess``, every other row also gets permutation tests of its
    per-query scores against Rand's (:func:`compare_to_random`) at ``alpha``.
    """
    index = _check_index(index)
    check_choice("attack", attack, TABLE_ATTACKS)
    if not isinstance(any_source, bool):
        raise InvalidTypeError(f"any_source must be a bool, not {type(any_source).__name__}")
    attacker = get_attack(attack)(index)
    gen = as_generator(rng)
    q = np.asarray(query_ids, dtype=np.int64)
    tfidf = _tfidf(index)
    out: list[RetrievalResult] = []
    for label, m, k in settings:
        if any_source:
            obs, truth = _setting_protected(index.vectors[q], m, k, gen, batch_size)
        else:
            obs, truth = _setting_observation(index.vectors[q], m, k, gen, batch_size), None
        out.append(evaluate_retrieval(attacker, obs, q, truth=truth, tfidf=tfidf, text_embeddings=text_embeddings,
                                      n_examples=n_examples, setting=label, alpha=alpha))
    if random_guess:
        rand = evaluate_retrieval(RandomGuess(index, rng=gen), _no_view(index.vectors[q]), q, tfidf=tfidf,
                                  text_embeddings=text_embeddings, n_examples=n_examples, setting="random",
                                  alpha=alpha)
        out = [compare_to_random(r, rand, rng=gen) for r in out] + [rand]
    return _with_table_rng(out, rng)


def reprecon_table(index: SimilaritySearch, train_ids: Any, query_ids: Any, *,
                   settings: Sequence[tuple[str, int, int]] = PAPER_SETTINGS, rng: RngLike = None,
                   text_embeddings: Any = None, batch_size: int = 64, random_guess: bool = True,
                   n_examples: int = 5, progress: bool = False, **reprecon_kwargs: Any) -> list[RetrievalResult]:
    """The paper's Table 8 on one corpus: RepRecon per setting (train pairs from ``train_ids``, queries from
    ``query_ids``, e.g. the dev split), plus the random-guess floor.

    Each setting draws one secret TextHide pool (OS CSPRNG) shared by its
    training pairs and its queries (one client's key); ``rng`` seeds the
    mixing, the MLP's initialisation and shuffling, and the random guesses.
    """
    from veil.attacks.retrieval.observe import experiment_texthide
    from veil.defenses.texthide import MaskPool

    index = _check_index(index)
    gen = as_generator(rng)
    tr, q = np.asarray(train_ids, dtype=np.int64), np.asarray(query_ids, dtype=np.int64)
    tfidf = _tfidf(index)
    out: list[RetrievalResult] = []
    for label, m, k in settings:
        th = None if (m == 0 and k == 1) else experiment_texthide(k, MaskPool(m, index.dim), gen)
        train_obs = _setting_observation(index.vectors[tr], m, k, gen, batch_size, th)
        attack = RepRecon(index, rng=gen, progress=progress, **reprecon_kwargs).fit(train_obs.vectors,
                                                                                   index.vectors[tr])
        obs = _setting_observation(index.vectors[q], m, k, gen, batch_size, th)
        out.append(evaluate_retrieval(attack, obs, q, tfidf=tfidf, text_embeddings=text_embeddings,
                                      n_examples=n_examples, setting=label))
    if random_guess:
        out.append(evaluate_retrieval(RandomGuess(index, rng=gen), _no_view(index.vectors[q]), q, tfidf=tfidf,
                                      text_embeddings=text_embeddings, n_examples=n_examples, setting="random"))
    return _with_table_rng(out, rng)


def _with_table_rng(results: list[RetrievalResult], rng: RngLike) -> list[RetrievalResult]:
    """Record the table's rng (the one experiment seed behind mixing, training and guesses) in each config."""
    desc = rng_description(rng)
    return [replace(r, config={**r.config, "table_rng": desc}) for r in results]


def _no_view(vectors: np.ndarray) -> Observation:
    return observe(vectors, defense={"defense": "n/a (random guess ignores the queries)"})


def _tfidf(index: SimilaritySearch) -> Any:
    from veil.metrics.leakage import TfidfScorer

    return TfidfScorer(index.texts)
