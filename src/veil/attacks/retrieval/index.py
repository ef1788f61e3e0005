"""Exact cosine-similarity search over (text, original representation) pairs: the index of RSS.

TextHide (Huang et al. 2020), Sec. 4.4: the attacker holds a search index
{(x_i, e_i)} of a corpus's sentences and their original (undefended)
representations and answers a query vector e~ with the entry of HIGHEST
cosine similarity (the paper's ``argmin`` is an erratum, see
``papers/README.md``). The paper uses faiss; veil offers two exact backends:

* ``"torch"``: chunked float32 matmul (queries x index) + ``torch.topk``;
* ``"faiss"``: ``faiss.IndexFlatIP`` (exact inner product; faiss imported lazily).

``backend="auto"`` follows a fixed rule (no timing probe): faiss when it is
importable, else torch. Measured through this class on the 2-core CPU veil
targets (``benchmarks/retrieval.py``, quiet machine, 1,000 queries over 10k and
60k x 384 vectors, random and real MiniLM): faiss answered 1.4-1.5x more
queries per second than the chunked torch matmul at both 1 and 2 threads.
(RESOURCES.md's "torch ~3x faster" compared raw matmul + topk with raw faiss;
an earlier run here under heavy background load favoured torch at 2 threads.)
Both backends give identical answers (below), so the rule only affects speed.
``benchmarks/retrieval.py`` re-measures it (``benchmarks/RESULTS.md``).

Exactness and ties (both backends give identical answers)
-----------------------------------------------------------
A backend only proposes ``top_k + margin`` candidates from its float32
scores. The candidates are then re-scored in float64 from the stored float32
vectors (one routine, shared by both backends) and sorted by
(-score, index): equal scores (e.g. duplicate vectors) go to the LOWEST index.
A float32 dot product of length d is within gamma_d * |q| * |x| of the exact
value (gamma_d = d u / (1 - d u), u = 2^-24). Whenever the weakest candidate
is within twice that bound of the k-th best re-scored candidate (so an entry
left out by the backend could tie or beat it), or a backend's score is off by
more than the bound, that query is recomputed exactly over the whole index.
So the answer is always the exact top-k of the float64 scores with
lowest-index tie-breaking, whatever order a backend returns ties in; the
returned scores are those float64 values.

Duplicate texts in the index are allowed: identity metrics compare texts, so
returning either copy of a duplicated sentence counts as a hit.

``normalize=True`` (default) L2-normalises index and query vectors, so scores
are cosine similarities; with ``normalize=False`` they are inner products.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from veil.validation import as_vectors
from veil.validation import check_choice, check_int
from veil.errors import DataFormatError, InvalidTypeError, ResourceMissingError

__all__ = ["SimilaritySearch", "Retrieved", "BACKENDS", "resolve_backend", "float32_dot_error"]

BACKENDS = ("auto", "torch", "faiss")
_U32 = 2.0 ** -24
_CHUNK_BYTES = 64 << 20  # float32 score block per torch matmul chunk
_EXACT_ROWS = 4096  # rows per block when a query is recomputed over the whole index


class Retrieved(NamedTuple):
    """An attacker's answers: index positions (m, top_k) int64 and their scores (m, top_k) float64, best first.

    Scores are NaN for attackers that do not score (random guessing).
    """

    indices: np.ndarray
    scores: np.ndarray

    @property
    def top1(self) -> np.ndarray:
        """The best answer per query, (m,)."""
        return self.indices[:, 0]


def resolve_backend(backend: str) -> str:
    """``"torch"`` or ``"faiss"`` for a backend name; ``"auto"``: faiss if importable, else torch."""
    check_choice("backend", backend, BACKENDS)
    if backend != "auto":
        return backend
    has_torch = importlib.util.find_spec("torch") is not None
    has_faiss = importlib.util.find_spec("faiss") is not None
    if has_faiss:
        return "faiss"
    if has_torch:
        return "torch"
    raise ResourceMissingError("a search backend (torch or faiss-cpu)", "pip install faiss-cpu")


def float32_dot_error(dim: int) -> float:
    """gamma_d: relative bound on the rounding error of a float32 dot product of length ``dim``."""
    du = dim * _U32
    return du / (1.0 - du)


def _check_texts(texts: Any) -> tuple[str, ...]:
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise InvalidTypeError(f"texts must be a list of strings, not {type(texts).__name__}")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidTypeError(f"texts[{i}] is a {type(t).__name__}, not a str")
    return tuple(texts)


def _unit_rows(x64: np.ndarray, what: str) -> np.ndarray:
    norms = np.linalg.norm(x64, axis=1)
    zero = np.flatnonzero(norms == 0)
    if len(zero):
        raise DataFormatError(f"{what} has {len(zero)} all-zero row(s) (first: {int(zero[0])}); cosine similarity "
                              "is undefined for them; drop them or pass normalize=False for inner products")
    return x64 / norms[:, None]


def _exact_scores(x32: np.ndarray, idx: np.ndarray, q32: np.ndarray) -> np.ndarray:
    """float64 scores of q32[i] against x32[idx[i, j]]: (m, c). One routine for every path (same rounding)."""
    rows = x32[idx].astype(np.float64)  # (m, c, d)
    return (rows * q32.astype(np.float64)[:, None, :]).sum(axis=-1)


class SimilaritySearch:
    """An exact cosine index of (text, representation) pairs; :meth:`query` returns the most similar entries.

    Parameters
    ----------
    texts: the index's texts (duplicates allowed), one per vector.
    vectors: (n, d) real array or torch tensor of the original representations.
    backend: ``"auto"`` (faiss when importable, else torch; see the module docstring), ``"torch"``
        or ``"faiss"``. Answers are identical either way.
    normalize: L2-normalise index and queries (cosine similarity); False = inner product.
    labels: optional (n,) labels of the entries (for the Label metric).

    >>> index = SimilaritySearch(texts, X, labels=y)
    >>> idx, scores = index.query(Q, top_k=5)      # (m, 5) int64, (m, 5) float64, best first
    >>> index.texts_at(idx[:, 0])
    """

    margin = 8  # extra candidates per query before the exact re-scoring

    def __init__(self, texts: Sequence[str], vectors: Any, *, backend: str = "auto", normalize: bool = True,
                 labels: Any = None) -> None:
        start = time.perf_counter()
        self._texts = _check_texts(texts)
        x = as_vectors("vectors", vectors, allow_empty=True)
        if x.shape[0] == 0 or not self._texts:
            raise DataFormatError("the index is empty; pass at least one (text, vector) pair")
        if len(self._texts) != x.shape[0]:
            raise DataFormatError(f"{len(self._texts)} texts but {x.shape[0]} vectors; pass one vector per text")
        if not isinstance(normalize, bool):
            raise InvalidTypeError(f"normalize must be a bool, not {type(normalize).__name__}")
        self._normalize = normalize
        x64 = x.astype(np.float64)
        self._x = np.ascontiguousarray(_unit_rows(x64, "vectors") if normalize else x64, dtype=np.float32)
        self._max_norm = float(np.linalg.norm(self._x.astype(np.float64), axis=1).max())
        self._labels = None
        if labels is not None:
            lab = np.array(labels, copy=True)
            if lab.ndim != 1 or len(lab) != len(self._texts):
                raise DataFormatError(f"labels must be 1-D with one label per text ({len(self._texts)}), "
                                      f"got shape {lab.shape}")
            lab.flags.writeable = False
            self._labels = lab
        self._backend = resolve_backend(backend)
        self._index: Any = None
        if self._backend == "faiss":
            import faiss

            self._index = faiss.IndexFlatIP(self.dim)
            self._index.add(self._x)
        else:
            import torch

            self._index = torch.from_numpy(self._x)
        self.build_seconds = time.perf_counter() - start

    # ------------------------------------------------------------ properties
    def __len__(self) -> int:
        return len(self._texts)

    def __repr__(self) -> str:
        return (f"SimilaritySearch(n={len(self)}, dim={self.dim}, backend={self._backend!r}, "
                f"normalize={self._normalize}, labels={self._labels is not None})")

    @property
    def dim(self) -> int:
        return int(self._x.shape[1])

    @property
    def backend(self) -> str:
        return self._backend

    @property
    def normalize(self) -> bool:
        return self._normalize

    @property
    def texts(self) -> tuple[str, ...]:
        return self._texts

    @property
    def labels(self) -> np.ndarray | None:
        return self._labels

    @property
    def vectors(self) -> np.ndarray:
        """The stored float32 vectors (unit rows when ``normalize``), read-only."""
        view = self._x.view()
        view.flags.writeable = False
        return view

    def texts_at(self, indices: Any) -> list[str]:
        return [self._texts[int(i)] for i in np.asarray(indices).ravel()]

    def labels_at(self, indices: Any) -> np.ndarray:
        if self._labels is None:
            raise DataFormatError("this index has no labels; build it with labels=...")
        return self._labels[np.asarray(indices, dtype=np.int64)]

    def config(self) -> dict[str, Any]:
        return {"size": len(self), "dim": self.dim, "backend": self._backend, "normalize": self._normalize,
                "similarity": "cosine" if self._normalize else "inner product",
                "ties": "lowest index", "labels": self._labels is not None}

    # ------------------------------------------------------------ search
    def prepare_queries(self, queries: Any) -> np.ndarray:
        """Validated (m, d) float32 queries (normalised when the index is)."""
        if isinstance(queries, np.ndarray) and queries.ndim == 1:
            queries = queries[None, :]
        q = as_vectors("queries", queries, dim=self.dim, allow_empty=True)
        q64 = q.astype(np.float64)
        if self._normalize and len(q64):
            q64 = _unit_rows(q64, "queries")
        return np.ascontiguousarray(q64, dtype=np.float32)

    def query(self, queries: Any, top_k: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """The ``top_k`` most similar entries per query: ``(indices (m, top_k) int64, scores (m, top_k) float64)``.

        Rows are sorted best first; equal scores go to the lower index. A 1-D
        query is treated as one row. ``top_k`` must be in [1, len(index)].
        """
        n = len(self)
        top_k = check_int("top_k", top_k, minimum=1, maximum=n,
                          hint=f" (the index has {n} entries; top_k cannot exceed that)")
        q = self.prepare_queries(queries)
        if q.shape[0] == 0:
            return np.empty((0, top_k), dtype=np.int64), np.empty((0, top_k), dtype=np.float64)
        c = min(len(self), top_k + self.margin)
        block = max(1, _CHUNK_BYTES // (8 * c * self.dim))  # bounds the float64 re-scoring buffer
        parts = [self._query_block(q[s:s + block], top_k, c) for s in range(0, q.shape[0], block)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def _query_block(self, q: np.ndarray, top_k: int, c: int) -> tuple[np.ndarray, np.ndarray]:
        approx, cand = self._candidates(q, c)
        exact = _exact_scores(self._x, cand, q)
        order = np.lexsort((cand, -exact), axis=1)
        cand = np.take_along_axis(cand, order, axis=1)
        exact = np.take_along_axis(exact, order, axis=1)
        approx = np.take_along_axis(approx, order, axis=1)
        tol = 2.0 * float32_dot_error(self.dim) * np.linalg.norm(q.astype(np.float64), axis=1) * self._max_norm
        tol = tol + 1e-12
        off = (np.abs(approx - exact) > tol[:, None]).any(axis=1)
        if c < len(self):
            boundary = approx.min(axis=1) >= exact[:, top_k - 1] - tol
        else:
            boundary = np.zeros(len(q), dtype=bool)
        idx, scores = cand[:, :top_k].copy(), exact[:, :top_k].copy()
        for i in np.flatnonzero(off | boundary):
            idx[i], scores[i] = self._exact_top(q[i], top_k)
        return idx, scores

    def _candidates(self, q: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
        """(approx float64 scores, indices) of ``c`` candidates per query, in any order."""
        if self._backend == "faiss":
            scores, idx = self._index.search(q, c)
            return scores.astype(np.float64), idx.astype(np.int64)
        import torch

        n = len(self)
        rows = max(1, _CHUNK_BYTES // (4 * n))
        out_s = np.empty((q.shape[0], c), dtype=np.float64)
        out_i = np.empty((q.shape[0], c), dtype=np.int64)
        xt = self._index
        with torch.inference_mode():
            for start in range(0, q.shape[0], rows):
                block = torch.from_numpy(q[start:start + rows]) @ xt.T
                vals, ind = torch.topk(block, c, dim=1, largest=True, sorted=False)
                out_s[start:start + rows] = vals.double().numpy()
                out_i[start:start + rows] = ind.numpy()
        return out_s, out_i

    def _exact_top(self, q: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact top_k of one query over the whole index (same float64 routine as the re-scoring)."""
        n = len(self)
        scores = np.concatenate([_exact_scores(self._x, np.arange(s, min(n, s + _EXACT_ROWS))[None, :], q[None, :])[0]
                                 for s in range(0, n, _EXACT_ROWS)])
        kth = np.partition(-scores, top_k - 1)[top_k - 1]
        cand = np.flatnonzero(-scores <= kth)  # every entry tying the k-th best is kept
        order = np.lexsort((cand, -scores[cand]))[:top_k]
        return cand[order], scores[cand[order]]
