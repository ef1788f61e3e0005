"""Leakage metrics for retrieval attacks: TextHide (Huang et al. 2020), Sec. 4.4 "Metrics" and Table 3.

Each metric compares a query sentence ``x`` (the private example hidden in the
attacker's query vector) with the sentence ``x*`` the attacker returns. Larger
means more similar, i.e. worse hiding, for all five:

explicit leakage
    ``identity``      1 if ``x* == x`` (exact string equality, no normalisation), else 0.
    ``jaccard``       |W(x) & W(x*)| / |W(x) | W(x*)| over word sets W (the paper's
                      "JCdist", which its formula defines as this similarity).
    ``tfidf_cosine``  cosine of the TF-IDF vectors of ``x`` and ``x*``, the
                      vectorizer fitted on the corpus (:class:`TfidfScorer`).
implicit (semantic) leakage
    ``label``         1 if ``x*`` has the same label as ``x``, else 0.
    ``sbert_cosine``  cosine between sentence embeddings of ``x`` and ``x*``.

Definitions where the paper is silent (departures):

* Words: ``W(t)`` is the set of ``\\w+`` matches (Unicode) in ``t.lower()``.
  J(empty, empty) = 1.0 (two word-less texts have equal word sets); one empty
  and one not gives 0.0.
* TF-IDF uses sklearn's ``TfidfVectorizer`` with the same ``\\w+`` lowercase
  tokenisation as Jaccard (sklearn's default pattern would drop one-letter
  words), l2-normalised rows, smooth idf. If either text has no word in the
  fitted vocabulary, the score is 1.0 when the two strings are identical, else
  0.0. Identical strings always score exactly 1.0.
* SBERT: the paper scores with an NLI-STS SBERT model; veil uses MiniLM
  (all-MiniLM-L6-v2, a sentence-transformers model; ``TextEncoder("minilm")``).
  When the search index itself holds MiniLM embeddings, its vectors can be
  passed as the embeddings (no re-encoding); the metric is then measured in
  the attack's own search space, which the paper's separate scorer avoided.

Confidence intervals (``ci_level``, default 95%) over queries:

* proportions (``identity``, ``label``): Wilson score interval, which stays
  inside [0, 1] and is not degenerate at 0 or 1 successes;
* means (``jaccard``, ``tfidf_cosine``, ``sbert_cosine``): normal
  approximation, mean +- z * sd / sqrt(n) with the sample sd (ddof=1), clipped
  to the metric's range. With n = 1 there is no sd and no interval.

Heavy imports (sklearn, torch) happen inside the functions that need them.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.results import Metric

__all__ = ["LEAKAGE_METRICS", "PAPER_NAMES", "PROPORTIONS", "TfidfScorer", "word_set", "identity_scores",
           "jaccard_scores", "label_scores", "cosine_scores", "sbert_scores", "leakage_scores",
           "leakage_metrics", "summarize_scores", "wilson_interval", "normal_interval"]

LEAKAGE_METRICS = ("identity", "jaccard", "tfidf_cosine", "label", "sbert_cosine")
PAPER_NAMES = {"identity": "Identity", "jaccard": "JCdist", "tfidf_cosine": "TF-IDFsim", "label": "Label",
               "sbert_cosine": "SBERTsim"}
PROPORTIONS = frozenset({"identity", "label"})
_RANGES = {"identity": (0.0, 1.0), "jaccard": (0.0, 1.0), "tfidf_cosine": (0.0, 1.0), "label": (0.0, 1.0),
           "sbert_cosine": (-1.0, 1.0)}
_WORD = re.compile(r"\w+")
TOKEN_PATTERN = r"(?u)\w+"


# ------------------------------------------------------------------ validation
def _texts(name: str, texts: Any) -> list[str]:
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise InvalidTypeError(f"{name} must be a list of strings, not {type(texts).__name__}")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise InvalidTypeError(f"{name}[{i}] is a {type(t).__name__}, not a str")
    return out


def _pair(query_texts: Any, returned_texts: Any) -> tuple[list[str], list[str]]:
    q, r = _texts("query_texts", query_texts), _texts("returned_texts", returned_texts)
    if len(q) != len(r):
        raise DataFormatError(f"{len(q)} query texts but {len(r)} returned texts; pass one answer per query")
    return q, r


# ------------------------------------------------------------------ per-query scores
def word_set(text: str) -> frozenset[str]:
    """The set of lowercase ``\\w+`` words of ``text``."""
    return frozenset(_WORD.findall(text.lower()))


def identity_scores(query_texts: Sequence[str], returned_texts: Sequence[str]) -> np.ndarray:
    """1.0 where the returned text equals the query text exactly, else 0.0."""
    q, r = _pair(query_texts, returned_texts)
    return np.fromiter((a == b for a, b in zip(q, r)), dtype=np.float64, count=len(q))


def jaccard_scores(query_texts: Sequence[str], returned_texts: Sequence[str]) -> np.ndarray:
    """Jaccard similarity of the lowercase word sets (empty vs empty = 1.0)."""
    q, r = _pair(query_texts, returned_texts)
    out = np.empty(len(q), dtype=np.float64)
    for i, (a, b) in enumerate(zip(q, r)):
        wa, wb = word_set(a), word_set(b)
        union = len(wa | wb)
        out[i] = 1.0 if union == 0 else len(wa & wb) / union
    return out


class TfidfScorer:
    """TF-IDF cosine similarity with the vectorizer fitted on a corpus (the search index's texts).

    >>> scorer = TfidfScorer(index_texts)
    >>> scorer.scores(query_texts, returned_texts)   # (n,) floats in [0, 1]
    """

    def __init__(self, corpus_texts: Sequence[str]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        texts = _texts("corpus_texts", corpus_texts)
        if not any(_WORD.search(t) for t in texts):
            raise DataFormatError("corpus_texts has no words; TF-IDF needs a corpus with at least one \\w+ word")
        self._vectorizer = TfidfVectorizer(lowercase=True, token_pattern=TOKEN_PATTERN, norm="l2", smooth_idf=True)
        self._vectorizer.fit(texts)
        self.n_documents = len(texts)

    @property
    def vocabulary_size(self) -> int:
        return len(self._vectorizer.vocabulary_)

    def scores(self, query_texts: Sequence[str], returned_texts: Sequence[str]) -> np.ndarray:
        q, r = _pair(query_texts, returned_texts)
        if not q:
            return np.empty(0, dtype=np.float64)
        a, b = self._vectorizer.transform(q), self._vectorizer.transform(r)
        dots = np.asarray(a.multiply(b).sum(axis=1), dtype=np.float64).ravel()
        out = np.clip(dots, 0.0, 1.0)
        empty = (a.getnnz(axis=1) == 0) | (b.getnnz(axis=1) == 0)
        same = np.fromiter((x == y for x, y in zip(q, r)), dtype=bool, count=len(q))
        out[empty] = 0.0
        out[same] = 1.0
        return out

    def __repr__(self) -> str:
        return f"TfidfScorer(n_documents={self.n_documents}, vocabulary_size={self.vocabulary_size})"


def label_scores(query_labels: Any, returned_labels: Any) -> np.ndarray:
    """1.0 where the returned example's label equals the query's label, else 0.0."""
    a, b = np.asarray(query_labels), np.asarray(returned_labels)
    if a.ndim != 1 or b.ndim != 1 or len(a) != len(b):
        raise DataFormatError(f"labels must be two 1-D arrays of equal length, got shapes {a.shape} and {b.shape}")
    return (a == b).astype(np.float64)


def cosine_scores(a: Any, b: Any) -> np.ndarray:
    """Row-wise cosine similarity of two (n, d) arrays (computed in float64)."""
    a, b = _matrix("query_emb", a), _matrix("returned_emb", b)
    if a.shape != b.shape:
        raise DataFormatError(f"embeddings have shapes {a.shape} and {b.shape}; pass one row per query for both")
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    if np.any(na == 0) or np.any(nb == 0):
        raise DataFormatError("an embedding row is all zeros; cosine similarity is undefined for it")
    return np.clip(np.einsum("ij,ij->i", a, b) / (na * nb), -1.0, 1.0)


def _matrix(name: str, x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach().cpu().numpy()
    if not isinstance(x, np.ndarray):
        raise InvalidTypeError(f"{name} must be a numpy array of shape (n, d), not {type(x).__name__}")
    if x.dtype.kind not in "iuf":
        raise InvalidTypeError(f"{name} must hold real numbers, got dtype {x.dtype}")
    if x.ndim != 2:
        raise DataFormatError(f"{name} must have shape (n, d), got {x.shape}")
    x = x.astype(np.float64)
    if not np.isfinite(x).all():
        raise DataFormatError(f"{name} contains NaN or inf")
    return x


def sbert_scores(query_texts: Sequence[str] | None = None, returned_texts: Sequence[str] | None = None, *,
                 query_emb: Any = None, returned_emb: Any = None, encoder: Any = None,
                 batch_size: int = 64) -> np.ndarray:
    """Cosine similarity of sentence embeddings of query and returned texts.

    Pass precomputed ``query_emb`` and ``returned_emb`` (n, d), or an
    ``encoder`` (a :class:`veil.encoders.TextEncoder`, e.g. ``TextEncoder("minilm")``)
    to embed the texts. Embeddings win when both are given.
    """
    if query_emb is None or returned_emb is None:
        if encoder is None:
            raise InvalidParameterError("sbert_scores needs query_emb and returned_emb, or an encoder "
                                        "(e.g. veil.encoders.TextEncoder('minilm')) to embed the texts")
        q, r = _pair(query_texts, returned_texts)
        if query_emb is None:
            query_emb = encoder.encode(q, batch_size=batch_size, progress=False)
        if returned_emb is None:
            returned_emb = encoder.encode(r, batch_size=batch_size, progress=False)
    return cosine_scores(query_emb, returned_emb)


def leakage_scores(query_texts: Sequence[str], returned_texts: Sequence[str], *, query_labels: Any = None,
                   returned_labels: Any = None, tfidf: TfidfScorer | Sequence[str] | None = None,
                   query_emb: Any = None, returned_emb: Any = None, encoder: Any = None) -> dict[str, np.ndarray]:
    """Per-query scores of every metric the inputs allow, keyed as in :data:`LEAKAGE_METRICS`.

    ``identity``, ``jaccard`` and ``tfidf_cosine`` are always computed.
    ``tfidf``: a fitted :class:`TfidfScorer` (reuse it across attacks), the
    corpus texts to fit one on (the paper: the search index's corpus), or None
    to fit on the distinct query and returned texts. ``label`` needs both label
    arrays; ``sbert_cosine`` needs both embedding arrays or an ``encoder``.
    """
    q, r = _pair(query_texts, returned_texts)
    if (query_labels is None) != (returned_labels is None):
        raise InvalidParameterError("pass both query_labels and returned_labels, or neither")
    if (query_emb is None) != (returned_emb is None) and encoder is None:
        raise InvalidParameterError("pass both query_emb and returned_emb (or an encoder), or neither")
    if not isinstance(tfidf, TfidfScorer):
        tfidf = TfidfScorer(sorted(set(q) | set(r)) if tfidf is None else tfidf)
    out = {"identity": identity_scores(q, r), "jaccard": jaccard_scores(q, r), "tfidf_cosine": tfidf.scores(q, r)}
    if query_labels is not None:
        out["label"] = label_scores(query_labels, returned_labels)
        if len(out["label"]) != len(q):
            raise DataFormatError(f"{len(out['label'])} labels for {len(q)} queries")
    if query_emb is not None or encoder is not None:
        out["sbert_cosine"] = sbert_scores(q, r, query_emb=query_emb, returned_emb=returned_emb, encoder=encoder)
        if len(out["sbert_cosine"]) != len(q):
            raise DataFormatError(f"{len(out['sbert_cosine'])} embedding rows for {len(q)} queries")
    return out


# ------------------------------------------------------------------ intervals and summaries
def _z(level: float) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < float(level) < 1.0:
        raise InvalidParameterError(f"ci_level must be in (0, 1), e.g. 0.95, got {level!r}")
    return statistics.NormalDist().inv_cdf(0.5 + float(level) / 2.0)


def wilson_interval(successes: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion ``successes / n``."""
    if n < 1:
        raise InvalidParameterError(f"n must be >= 1, got {n}")
    if not 0 <= successes <= n:
        raise InvalidParameterError(f"successes must be in [0, n={n}], got {successes}")
    z = _z(level)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes == 0 else max(0.0, centre - half)  # exact bounds at the extremes (no rounding residue)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def normal_interval(values: Sequence[float], level: float = 0.95,
                    bounds: tuple[float, float] = (-math.inf, math.inf)) -> tuple[float, float] | None:
    """mean +- z * sd / sqrt(n) (sample sd), clipped to ``bounds``; None when n < 2."""
    x = np.asarray(values, dtype=np.float64)
    z = _z(level)
    if len(x) < 2:
        return None
    mean, half = float(x.mean()), z * float(x.std(ddof=1)) / math.sqrt(len(x))
    return max(bounds[0], mean - half), min(bounds[1], mean + half)


def summarize_scores(scores: Mapping[str, Any], *, ci_level: float = 0.95,
                     keep_values: bool = False) -> dict[str, Metric]:
    """One :class:`~veil.results.Metric` per metric: mean, sample sd, n and a CI over queries.

    Metrics in :data:`PROPORTIONS` get a Wilson interval, the others a normal
    approximation (see the module docstring). ``keep_values`` stores the
    per-query scores in the Metric (large in JSON; off by default).
    """
    _z(ci_level)
    out: dict[str, Metric] = {}
    for name, vals in scores.items():
        x = np.asarray(vals, dtype=np.float64)
        if x.ndim != 1 or len(x) == 0:
            raise DataFormatError(f"scores[{name!r}] must be a non-empty 1-D array, got shape {x.shape}")
        if not np.isfinite(x).all():
            raise DataFormatError(f"scores[{name!r}] contains NaN or inf")
        n, mean = len(x), float(x.mean())
        std = float(x.std(ddof=1)) if n > 1 else None
        if name in PROPORTIONS:
            if not np.isin(x, (0.0, 1.0)).all():
                raise DataFormatError(f"scores[{name!r}] must be 0/1 per query")
            ci: tuple[float, float] | None = wilson_interval(float(x.sum()), n, ci_level)
        else:
            ci = normal_interval(x, ci_level, _RANGES.get(name, (-math.inf, math.inf)))
        out[name] = Metric(mean=mean, std=std, n=n, ci_low=None if ci is None else ci[0],
                           ci_high=None if ci is None else ci[1], ci_level=None if ci is None else float(ci_level),
                           values=tuple(x.tolist()) if keep_values else ())
    return out


def leakage_metrics(query_texts: Sequence[str], returned_texts: Sequence[str], *, query_labels: Any = None,
                    returned_labels: Any = None, tfidf: TfidfScorer | Sequence[str] | None = None,
                    query_emb: Any = None, returned_emb: Any = None, encoder: Any = None,
                    ci_level: float = 0.95, keep_values: bool = False) -> dict[str, Metric]:
    """The paper's five leakage metrics (those the inputs allow) as Metrics with confidence intervals.

    >>> m = leakage_metrics(queries, answers, query_labels=yq, returned_labels=ya,
    ...                     tfidf=TfidfScorer(index_texts), query_emb=Eq, returned_emb=Ea)
    >>> m["identity"].mean, m["identity"].ci_low, m["identity"].ci_high
    """
    return summarize_scores(leakage_scores(query_texts, returned_texts, query_labels=query_labels,
                                           returned_labels=returned_labels, tfidf=tfidf, query_emb=query_emb,
                                           returned_emb=returned_emb, encoder=encoder),
                            ci_level=ci_level, keep_values=keep_values)
