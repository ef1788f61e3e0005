"""Re-identification of released text: which of N known candidates is each released document's source?

Closed-world authorship attribution, the standard re-identification test of a text release (e.g. Narayanan et
al. 2012, "On the Feasibility of Internet-Scale Author Identification"; Stamatatos 2009, "A Survey of Modern
Authorship Attribution Methods", Sec. 3: character n-grams are the most robust style features). The owner
releases documents rewritten by a defense (PII redaction: names, e-mail addresses, places replaced); the
attacker holds public texts of each of N candidates (the speakers of a parliament, the senders of a mailing list)
and links each released document to a candidate.

Parts (STYLE.md, practice 4):

* threat model: the attacker observes the released texts (:class:`~veil.attacks.text.observe.ReleasedText`: texts
  and the defense's public configuration), holds :class:`PublicTexts` (disjoint texts of every candidate) and
  knows the mechanism (Kerckhoffs), never the owner's secret (hash key, pseudonym draws);
* features: TF-IDF of character n-grams inside word boundaries (``char_wb``, 2-5 by default: style, morphology,
  punctuation; they survive the removal of a few spans) and of word unigrams and bigrams (topic and phrasing),
  sublinear term frequency, fitted on the attacker's training texts only;
* training: a linear SVM over the candidates (scikit-learn ``LinearSVC``, one-vs-rest), on the public texts either
  as they are (``variant="plain"``) or after the attacker runs the same redactor over them (``"kerckhoffs"``:
  same public configuration, its own randomness, so that ``<PERSON>`` tags, masks, hash-shaped strings and
  surrogate names appear in training as in the release);
* the verb :meth:`Reidentification.run` returns a :class:`Ranking` (a score per document and candidate; no
  truth); scoring is separate (:func:`score_reidentification`): top-1 and top-5 accuracy with Wilson intervals,
  the mean reciprocal rank with a normal interval, and one-sided exact binomial tests against the floors.

Floors: random guessing (1/N for top-1, 5/N for top-5) and the most-frequent-candidate guess (the candidate, or
the five, with the most texts in the attacker's training data; their share of the released documents). The
stronger of the two is the floor an attack must beat.
"""

from __future__ import annotations

import time
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from veil.attacks.base import Attack, AttackResult, ThreatModel, rng_description
from veil.attacks.text.observe import ReleasedText
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.results import Metric

__all__ = ["PublicTexts", "Ranking", "Reidentification", "VARIANTS", "mechanism_for", "score_reidentification",
           "reidentification_floors"]

#: ``plain``: train on the public texts as they are; ``kerckhoffs``: run the observed mechanism over them first
VARIANTS = ("plain", "kerckhoffs")


def _strings(name: str, values: Any) -> tuple[str, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise InvalidTypeError(f"{name} must be a list of strings")
    out = tuple(values)
    for i, v in enumerate(out):
        if not isinstance(v, str):
            raise DataFormatError(f"{name}[{i}] is a {type(v).__name__}, not a str")
    return out


@dataclass(frozen=True)
class PublicTexts:
    """The attacker's own texts, each with the candidate who wrote it (at least two candidates)."""

    texts: tuple[str, ...]
    candidates: tuple[str, ...]

    def __post_init__(self) -> None:
        texts, candidates = _strings("texts", self.texts), _strings("candidates", self.candidates)
        if len(texts) != len(candidates):
            raise DataFormatError(f"{len(texts)} public texts but {len(candidates)} candidates; give one candidate "
                                  "per text")
        if len(set(candidates)) < 2:
            raise DataFormatError("the public texts come from fewer than two candidates; re-identification needs "
                                  "at least two to choose between")
        object.__setattr__(self, "texts", texts)
        object.__setattr__(self, "candidates", candidates)

    def __len__(self) -> int:
        return len(self.texts)

    def counts(self) -> dict[str, int]:
        """Texts per candidate."""
        return dict(Counter(self.candidates))


@dataclass(frozen=True)
class Ranking:
    """What the attack outputs: ``scores[i, j]``, how strongly released document i points to ``candidates[j]``
    (higher: more likely). Also the attacker's own facts: its training counts per candidate, its configuration,
    the observed defense. No truth."""

    candidates: tuple[str, ...]
    scores: np.ndarray
    train_counts: Mapping[str, int]
    defense: Mapping[str, Any] = field(default_factory=lambda: {"defense": "none"})
    config: Mapping[str, Any] = field(default_factory=dict)
    wall_time_s: float = 0.0

    def __post_init__(self) -> None:
        s = np.array(self.scores, dtype=np.float64, copy=True)
        if s.ndim != 2 or s.shape[1] != len(self.candidates):
            raise DataFormatError(f"scores must be (documents, {len(self.candidates)} candidates), got {s.shape}")
        if not np.isfinite(s).all():
            raise DataFormatError("scores must be finite")
        s.flags.writeable = False
        object.__setattr__(self, "scores", s)
        object.__setattr__(self, "candidates", tuple(self.candidates))
        for name in ("train_counts", "defense", "config"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    def order(self) -> np.ndarray:
        """Candidate columns per document, best first (ties: the candidate listed first)."""
        return np.argsort(-self.scores, axis=1, kind="stable")

    def top(self, k: int = 1) -> list[tuple[str, ...]]:
        """The ``k`` best candidates of each document."""
        return [tuple(self.candidates[j] for j in row[:k]) for row in self.order()]

    def ranks(self, truth: Sequence[str]) -> np.ndarray:
        """The 1-based rank of each document's true candidate; ties are counted against the attack (the true
        candidate ranks below every candidate scoring at least as high). Truth outside the candidates raises."""
        truth = _strings("truth", truth)
        if len(truth) != len(self):
            raise DataFormatError(f"{len(truth)} true candidates for {len(self)} ranked documents")
        col = {c: j for j, c in enumerate(self.candidates)}
        missing = sorted({t for t in truth if t not in col})
        if missing:
            raise DataFormatError(f"{len(missing)} true candidates are not among the attacker's candidates (e.g. "
                                  f"{missing[0]!r}); re-identification is closed-world: give public texts of every "
                                  "candidate")
        idx = np.array([col[t] for t in truth])
        own = self.scores[np.arange(len(self)), idx]
        return (self.scores >= own[:, None]).sum(axis=1)  # its own column included: rank >= 1


def mechanism_for(defense: Mapping[str, Any], rng: Any = None) -> Any:
    """The attacker's own copy of the observed mechanism, from its public configuration (Kerckhoffs): an object
    with ``transform(texts) -> texts``, or None when nothing was applied (``defense == "none"``).

    For ``redaction`` it is a :class:`~veil.defenses.redaction.PresidioRedaction` with the same operator, entity
    types, spaCy model, threshold and pseudonym scope, and the attacker's own randomness ``rng`` (its hash key
    and surrogate draws: the owner's key is secret, so the attacker's hashes of a name differ from the owner's).
    """
    name = defense.get("defense", "none")
    if name == "none":
        return None
    if name != "redaction":
        raise InvalidParameterError(f"the Kerckhoffs re-identifier rebuilds only 'redaction' from its public "
                                    f"configuration, not {name!r}; pass redactor= (an object with transform(texts)) "
                                    "or use variant='plain'")
    from veil.defenses.redaction import PresidioRedaction
    from veil.errors import PrivacyLeakWarning

    entities = defense.get("entities", "all supported")
    params = {"operator": defense["operator"], "model": defense.get("model", "sm"),
              "entities": None if entities == "all supported" else list(entities),
              "threshold": float(defense.get("threshold", 0.0)), "scope": defense.get("scope", "document")}
    with warnings.catch_warnings():  # the attacker's own randomness is no one's secret: a seed is fine here
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return PresidioRedaction(**params, rng=rng)


class Reidentification(Attack):
    """Link each released text to one of the candidates of the attacker's public texts (module docstring).

    Parameters (keyword-only)
    -------------------------
    public: :class:`PublicTexts`, the attacker's texts of each candidate.
    variant: ``kerckhoffs`` (default: run the observed mechanism over the public texts before training) or
        ``plain`` (train on them as they are).
    redactor: the attacker's copy of the mechanism (an object with ``transform(texts)``); None builds it from the
        observation's public configuration (:func:`mechanism_for`). Only used by ``kerckhoffs``.
    char_ngrams, word_ngrams: n-gram ranges of the two TF-IDF feature blocks.
    min_df: a feature must occur in this many training texts.
    C: the SVM's inverse regularisation.
    rng: the attacker's own randomness (its redactor's key and surrogates, the SVM's coordinate order): an int
        seed (experiments, tests), a Generator, or None (OS entropy).
    """

    name: ClassVar[str] = "reidentify"
    citation: ClassVar[str] = ("closed-world authorship attribution on character and word n-grams (Stamatatos 2009, "
                               "Sec. 3; Narayanan et al. 2012, linear classifiers over stylometric features)")
    threat: ClassVar[ThreatModel] = ThreatModel(
        observes="the released (redacted) texts and the defense's public configuration",
        needs=("the attacker's public texts of each candidate",
               "the mechanism (Kerckhoffs: it re-runs the redactor with its own randomness)"),
        knows_key=False, trains=True)
    observes: ClassVar[str] = "text"

    @classmethod
    def bench_applies(cls, defense: str, setting: Any) -> bool:
        """Never planned by the bench: it needs each document's author, which the bench corpora lack; `veil
        redaction reidentify` runs it on corpora that have them (spam-assassin senders, hoc-speeches speakers)."""
        return False

    def __init__(self, *, public: PublicTexts, variant: str = "kerckhoffs", redactor: Any = None,
                 char_ngrams: tuple[int, int] = (2, 5), word_ngrams: tuple[int, int] = (1, 2), min_df: int = 1,
                 C: float = 1.0, rng: Any = None) -> None:
        from veil.validation import check_choice, check_int, check_real, check_rng

        if not isinstance(public, PublicTexts):
            raise InvalidTypeError(f"public must be PublicTexts(texts, candidates), not {type(public).__name__}")
        self.public = public
        self.variant = check_choice("variant", variant, VARIANTS)
        if redactor is not None and not callable(getattr(redactor, "transform", None)):
            raise InvalidTypeError("redactor must have transform(texts) -> texts (e.g. a PresidioRedaction)")
        self.redactor = redactor
        for name, rng_ in (("char_ngrams", char_ngrams), ("word_ngrams", word_ngrams)):
            if not (isinstance(rng_, (tuple, list)) and len(rng_) == 2):
                raise InvalidTypeError(f"{name} must be a (low, high) pair of n-gram sizes, got {rng_!r}")
            lo = check_int(f"{name}[0]", rng_[0], minimum=1)
            check_int(f"{name}[1]", rng_[1], minimum=lo)
        self.char_ngrams, self.word_ngrams = tuple(char_ngrams), tuple(word_ngrams)
        self.min_df = check_int("min_df", min_df, minimum=1)
        self.C = check_real("C", C, low=0.0, high=np.inf, low_open=True, high_open=True)
        check_rng(rng)
        self.rng = rng

    def config(self) -> dict[str, Any]:
        return {**super().config(), "variant": self.variant, "features": {
            "char_wb": list(self.char_ngrams), "word": list(self.word_ngrams), "tf": "sublinear",
            "min_df": self.min_df}, "classifier": f"LinearSVC(C={self.C:g}), one-vs-rest",
            "candidates": len(self.public.counts()), "public_texts": len(self.public), "rng": rng_description(self.rng)}

    def training_texts(self, observation: ReleasedText) -> list[str]:
        """The texts the classifier learns from: the public texts, redacted by the attacker's own copy of the
        mechanism under ``kerckhoffs`` (as they are when the observation says no defense was applied)."""
        texts = list(self.public.texts)
        if self.variant == "plain":
            return texts
        redactor = self.redactor
        if redactor is None:
            redactor = mechanism_for(observation.defense, self._seeds()[0])
        return texts if redactor is None else list(redactor.transform(texts))

    def _seeds(self) -> tuple[Any, int]:
        """(the redactor's rng, the SVM's random_state), both from ``rng`` (None: OS entropy)."""
        from veil.random import as_generator

        g = as_generator(self.rng)
        return (None if self.rng is None else int(g.integers(0, 2**62))), int(g.integers(0, 2**31 - 1))

    def run(self, observation: ReleasedText) -> Ranking:
        """Score every released text against every candidate (:class:`Ranking`); sees no truth."""
        from scipy.sparse import hstack
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.svm import LinearSVC

        if not isinstance(observation, ReleasedText):
            raise InvalidTypeError(f"run takes a ReleasedText (veil.attacks.text.observe_text), not "
                                   f"{type(observation).__name__}")
        if len(observation) == 0:
            raise DataFormatError("the observation holds no released texts")
        start = time.perf_counter()
        train = self.training_texts(observation)
        vectorizers = [TfidfVectorizer(analyzer="char_wb", ngram_range=self.char_ngrams, sublinear_tf=True,
                                       min_df=self.min_df, lowercase=False, dtype=np.float32),
                       TfidfVectorizer(analyzer="word", ngram_range=self.word_ngrams, sublinear_tf=True,
                                       min_df=self.min_df, lowercase=True, token_pattern=r"(?u)\b\w+\b",
                                       dtype=np.float32)]
        try:
            X = hstack([v.fit_transform(train) for v in vectorizers]).tocsr()
        except ValueError as exc:  # sklearn: "empty vocabulary" (no n-gram occurs min_df times)
            raise DataFormatError(f"the attacker's training texts yield no features ({exc}); give it more text or "
                                  "lower min_df") from None
        Q = hstack([v.transform(list(observation.texts)) for v in vectorizers]).tocsr()
        model = LinearSVC(C=self.C, random_state=self._seeds()[1])
        with warnings.catch_warnings():  # many candidates with one or two texts each is the task, not a mistake
            warnings.filterwarnings("ignore", "The number of unique classes is greater than 50%", UserWarning)
            model.fit(X, np.asarray(self.public.candidates))
        scores = model.decision_function(Q)
        if scores.ndim == 1:  # two candidates: sklearn returns the second class's margin only
            scores = np.stack([-scores, scores], axis=1)
        return Ranking(tuple(str(c) for c in model.classes_), scores, self.public.counts(),
                       defense=dict(observation.defense),
                       config={**self.config(), "features_dim": int(X.shape[1])},
                       wall_time_s=time.perf_counter() - start)


# ---------------------------------------------------------------- scoring
def reidentification_floors(train_counts: Mapping[str, int], truth: Sequence[str], k: int = 1) -> dict[str, float]:
    """The floors of top-``k`` accuracy: ``chance`` = k / N (a uniformly random ranking) and ``majority`` = the
    share of the documents written by the ``k`` candidates with the most training texts (ties: by name)."""
    return {"chance": min(1.0, k / len(train_counts)), "majority": _majority_hits(train_counts, truth, k) / len(truth)}


def _majority_hits(train_counts: Mapping[str, int], truth: Sequence[str], k: int) -> int:
    top = set(sorted(train_counts, key=lambda c: (-train_counts[c], c))[:k])
    return sum(t in top for t in truth)


def _rate(hits: int, n: int) -> Metric:
    from veil.metrics.leakage import wilson_interval

    lo, hi = wilson_interval(hits, n)
    return Metric(mean=hits / n, n=n, ci_low=lo, ci_high=hi, ci_level=0.95)


def score_reidentification(ranking: Ranking, truth: Sequence[str], *, alpha: float = 0.05,
                           tests: int = 1, examples: int = 5) -> AttackResult:
    """Score a :class:`Ranking` against the true candidate of each released document.

    Metrics (``n`` = documents): ``top1``, ``top5`` (Wilson 95% intervals), ``mrr`` (normal 95% interval), the
    floors ``floor_chance`` (1/N), ``floor_majority`` (Wilson interval) and ``floor`` (the larger; likewise
    ``floor5_*`` for top-5), ``candidates`` (N), and ``p_top1`` / ``p_top5``: the exact one-sided binomial test of
    the hits against the floor's rate (H0: hit rate <= floor), multiplied by ``tests`` (Bonferroni, when the
    reported attack is the best of ``tests`` attackers scored on the same documents), with ``beats_floor`` /
    ``beats_floor5`` (1 when p <= ``alpha``).
    """
    from veil.metrics.leakage import normal_interval
    from veil.metrics.stats import binomial_test, check_alpha

    if not isinstance(ranking, Ranking):
        raise InvalidTypeError(f"score_reidentification takes a Ranking, not {type(ranking).__name__}")
    alpha = check_alpha(alpha)
    truth = _strings("truth", truth)
    ranks = ranking.ranks(truth)
    n, n_cand = len(ranks), len(ranking.candidates)
    metrics: dict[str, Metric] = {}
    for k, key, fkey in ((1, "top1", "floor"), (5, "top5", "floor5")):
        hits = int((ranks <= k).sum())
        metrics[key] = _rate(hits, n)
        floors = reidentification_floors(ranking.train_counts, truth, k)
        metrics[f"{fkey}_chance"] = Metric(mean=floors["chance"], n=n)
        metrics[f"{fkey}_majority"] = _rate(_majority_hits(ranking.train_counts, truth, k), n)
        p0 = max(floors.values())
        metrics[fkey] = Metric(mean=p0, n=n)
        p = min(1.0, tests * binomial_test(hits, n, p0, alpha=alpha).p_value) if p0 < 1 else 1.0
        metrics[f"p_{key}"] = Metric(mean=p, n=n)
        metrics[f"beats_{fkey}"] = Metric(mean=float(p <= alpha), n=n)
    rr = 1.0 / ranks
    lo_hi = normal_interval(rr, bounds=(0.0, 1.0))
    metrics["mrr"] = Metric(mean=float(rr.mean()), n=n, ci_low=None if lo_hi is None else lo_hi[0],
                            ci_high=None if lo_hi is None else lo_hi[1], ci_level=None if lo_hi is None else 0.95)
    metrics["candidates"] = Metric(mean=float(n_cand), n=n)
    best = ranking.top(5)
    rows = tuple({"document": i, "truth": truth[i], "rank": int(ranks[i]), "top5": list(best[i])}
                 for i in range(min(examples, n)))
    return AttackResult(attack=str(ranking.config.get("attack", Reidentification.name)),
                        defense=dict(ranking.defense), n_queries=n, metrics=metrics,
                        config={**dict(ranking.config), "alpha": alpha, "tests": tests},
                        wall_time_s=ranking.wall_time_s, examples=rows)
