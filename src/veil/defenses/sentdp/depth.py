"""Approximate Tukey depth of candidate points among a document's sentence embeddings.

Meehan et al. 2022 (SentDP), Sec. 4.4 and App. A.1. Given sentence embeddings
``S`` (k x d), candidates ``F`` (m x d) and p unit projection vectors
``v_1..v_p``, the one-dimensional counts on projection j are

    ge_j(f) = #{l : s_l . v_j >= f . v_j}      le_j(f) = #{l : s_l . v_j <= f . v_j}

and the two depths veil offers are

* ``"tukey-min"`` (default, Sec. 4.4 and Tukey's definition): the lowest
  one-dimensional depth, ``min_j min(ge_j, le_j)``, an integer in [0, k];
* ``"appendix"`` (App. A.1 pseudo-code, for faithful reproduction):
  ``max_j -|ge_j - k/2|``, in [-k/2, 0].

Changing one sentence changes every ``ge_j`` and ``le_j`` by at most one, so
both have sensitivity 1 (App. A.2).

The fast path (:mod:`veil.defenses.sentdp.levels`) never compares every
sentence with every candidate: the candidates' projections are sorted once
per projection set (:class:`ProjectionSet`), the sentences of many documents
are projected together and located among them by binary search, and the
Tukey depth is found level by level (see that module). The histogram path
(:func:`depth_histogram`: counts for all m candidates from cumulative sums,
O(p*m) per document) computes the appendix depth and the deep documents.
Ties between the computed projection values count on both sides, as in the
definitions (candidates are projected with a matrix product, so a sentence
equal to a candidate may differ from it in the last bits; privacy does not
depend on ties). Sentence projections are computed in float64 row by row (an
elementwise product summed over the last axis), so a sentence's projection
never depends on the other sentences of its document, nor on the other
documents projected with it (tested bit for bit).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError

__all__ = ["DEPTHS", "ProjectionSet", "draw_projections", "project_sentences", "depth_fast", "depth_histogram",
           "depth_reference"]

DEPTHS = ("tukey-min", "appendix")


@dataclass(frozen=True)
class ProjectionSet:
    """p unit vectors and the candidates' sorted projections on them.

    ``vectors`` is float64 (p, d); ``sorted_values`` (p, m) holds each
    projection's candidate values in ascending order, ``order`` (p, m) the
    candidate index at each sorted position, ``rank`` (p, m) its inverse (the
    sorted position of each candidate) and ``flat_rank`` (p * m,) the same as
    positions in the flattened (p, m) array, for one fast gather. Derived for
    the level-by-level depth: ``rank_small`` (``rank`` in int16 when m < 2^15,
    else int32) and ``order_flat`` (``order`` flattened: the candidate at flat
    sorted position ``j * m + r``).
    """

    vectors: np.ndarray
    sorted_values: np.ndarray
    order: np.ndarray
    rank: np.ndarray
    flat_rank: np.ndarray
    candidates_digest: str = ""
    rank_small: np.ndarray = field(init=False, repr=False, compare=False)
    order_flat: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        small = np.int16 if self.order.shape[1] < np.iinfo(np.int16).max else np.int32
        object.__setattr__(self, "rank_small", np.ascontiguousarray(self.rank, dtype=small))
        object.__setattr__(self, "order_flat", np.ascontiguousarray(self.order).ravel())

    @property
    def p(self) -> int:
        return int(self.vectors.shape[0])

    @classmethod
    def build(cls, vectors: np.ndarray, candidates: np.ndarray) -> ProjectionSet:
        vectors = np.asarray(vectors, dtype=np.float64)
        if vectors.ndim != 2 or vectors.shape[1] != candidates.shape[1] or vectors.shape[0] < 1:
            raise InvalidParameterError(f"projections must be (p >= 1, d={candidates.shape[1]}), "
                                        f"got {vectors.shape}")
        if not np.isfinite(vectors).all():
            raise InvalidParameterError("projections contain NaN or infinite values")
        values = (candidates.astype(np.float64) @ vectors.T).T  # (p, m): candidates are public
        order = np.argsort(values, axis=1, kind="stable")
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.broadcast_to(np.arange(order.shape[1]), order.shape), axis=1)
        flat_rank = (rank + (np.arange(order.shape[0]) * order.shape[1])[:, None]).ravel()  # one fast gather
        return cls(vectors=vectors, sorted_values=np.ascontiguousarray(np.take_along_axis(values, order, axis=1)),
                   order=order, rank=rank, flat_rank=flat_rank,
                   candidates_digest=candidates_digest(candidates))


def candidates_digest(candidates: np.ndarray) -> str:
    """sha256 of the candidates as float64 (ties a projection set to the candidates it was built for)."""
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(candidates, dtype=np.float64).tobytes()).hexdigest()


def draw_projections(p: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """``p`` vectors uniform on the unit sphere of R^d (normalised Gaussians), float64 (p, d)."""
    v = rng.standard_normal((p, d))
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    while (norms == 0).any():  # probability zero, but never divide by it
        bad = (norms == 0)[:, 0]
        v[bad] = rng.standard_normal((int(bad.sum()), d))
        norms = np.linalg.norm(v, axis=1, keepdims=True)
    return v / norms


def project_sentences(S: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """(k, p) float64 projections, each row computed from its own sentence only."""
    # einsum without BLAS sums each output over d in a fixed order, independent of the other rows
    return np.einsum("kd,pd->kp", S.astype(np.float64, copy=False), vectors, optimize=False)


def depth_fast(S: np.ndarray, projections: ProjectionSet, depth: str) -> np.ndarray:
    """Depth of every candidate (float64, (m,)) among sentence embeddings ``S`` (k, d).

    The same computation as for a batch of documents
    (:func:`veil.defenses.sentdp.levels.depth_batch`), so a document's
    utilities are identical whether it is released alone or with others.
    """
    from veil.defenses.sentdp.levels import depth_batch

    return depth_batch([S], projections, depth)[0]


def depth_histogram(S: np.ndarray, projections: ProjectionSet, depth: str, *,
                    sentence_values: np.ndarray | None = None) -> np.ndarray:
    """Depth of every candidate (float64, (m,)) from per-projection counts: O(p*m) work per document.

    Sentence values are located among the sorted candidates by binary search
    and the counts for all m candidates follow from cumulative sums.
    ``sentence_values``: ``project_sentences(S, projections.vectors)`` when
    already computed.
    """
    if depth not in DEPTHS:
        raise InvalidParameterError(f"depth must be one of {', '.join(map(repr, DEPTHS))}, got {depth!r}")
    k = S.shape[0]
    if k < 1:
        raise DataFormatError("a document needs at least one sentence embedding")
    sv = projections.sorted_values
    p, m = sv.shape
    sp = project_sentences(S, projections.vectors) if sentence_values is None else sentence_values  # (k, p)
    # s >= c_r  <=>  r < right(s);  s <= c_r  <=>  r >= left(s)   (exact binary search per projection)
    left = np.empty((p, k), dtype=np.int64)
    for j in range(p):
        left[j] = np.searchsorted(sv[j], sp[:, j], side="left")
    rows = np.arange(p)[:, None]
    tied = (left < m) & (sv[rows, np.minimum(left, m - 1)] == sp.T)  # a sentence value equal to a candidate's
    if tied.any():
        right = np.empty((p, k), dtype=np.int64)
        for j in range(p):
            right[j] = np.searchsorted(sv[j], sp[:, j], side="right")
    else:
        right = left
    base = (np.arange(p, dtype=np.int64) * (m + 1))[:, None]
    # the smallest integer type that holds 0..k keeps the p x m passes cheap
    counts = np.int8 if k <= np.iinfo(np.int8).max else (np.int16 if k <= np.iinfo(np.int16).max else np.int32)
    hist_l = np.bincount((base + left).ravel(), minlength=p * (m + 1)).reshape(p, m + 1)[:, :m].astype(counts)
    le_sorted = np.cumsum(hist_l, axis=1, dtype=counts)  # #{s: left(s) <= r}
    if right is left:  # no ties: #{s >= c_r} = k - #{s <= c_r}
        ge_sorted = counts(k) - le_sorted
    else:
        hist_r = np.bincount((base + right).ravel(), minlength=p * (m + 1)).reshape(p, m + 1)[:, :m].astype(counts)
        ge_sorted = counts(k) - np.cumsum(hist_r, axis=1, dtype=counts)  # #{s: right(s) > r}
    if depth == "tukey-min":
        per_projection = np.minimum(ge_sorted, le_sorted)
        return per_projection.ravel()[projections.flat_rank].reshape(p, m).min(axis=0).astype(np.float64)
    if depth == "appendix":
        # -|ge - k/2| is largest where |2 ge - k| is smallest; halve at the end (exact in float64)
        per_projection = np.abs(2 * ge_sorted.astype(np.int32) - k)
        return -per_projection.ravel()[projections.flat_rank].reshape(p, m).min(axis=0) / 2.0
    raise InvalidParameterError(f"depth must be one of {', '.join(map(repr, DEPTHS))}, got {depth!r}")


def depth_reference(S: np.ndarray, F: np.ndarray, vectors: np.ndarray, depth: str) -> np.ndarray:
    """The slow loop, line by line from App. A.1 (``"appendix"``) and Sec. 4.4 (``"tukey-min"``).

    For tests and the benchmark's reference only: O(m * p * k) Python steps.
    Sentence projections use the same row-wise float64 product as the fast
    path so both see identical numbers.
    """
    k, m, p = len(S), len(F), len(vectors)
    s_proj = project_sentences(S, vectors)  # lines 4-8: s_i^j = s_i . v_j
    f_all = (F.astype(np.float64) @ vectors.T)
    out = np.empty(m)
    for i in range(m):
        per_projection = []
        for j in range(p):
            f_ij = f_all[i, j]  # line 11
            h = 0
            low = 0
            for l_ in range(k):
                if s_proj[l_, j] >= f_ij:
                    h += 1
                if s_proj[l_, j] <= f_ij:
                    low += 1
            if depth == "appendix":
                per_projection.append(-abs(h - k / 2.0))  # line 13
            else:
                per_projection.append(min(h, low))
        out[i] = max(per_projection) if depth == "appendix" else min(per_projection)  # line 15 / Sec. 4.4
    return out
