"""Static word vectors derived from the sentence encoder (a stand-in for GloVe).

Feyisetan et al. (2019) perturb GloVe vectors; no GloVe file is available
offline here, so veil derives a static vector for every word from the sentence
encoder: ``phi(w)`` is the encoder's mean-pooled, UNnormalised embedding of
the word alone (``encoder.encode([w], normalize=False)``; for MiniLM the mean
over ``[CLS] w [SEP]``'s word pieces, 384 dimensions, norms around 6-8).

The choice matters for privacy: word metric-DP is ``epsilon * ||phi(w) -
phi(w')||``, so the scale of these vectors sets what a given epsilon means, and
epsilons are NOT comparable with GloVe-based numbers in the literature (GloVe
300d has other distances between words).

* :func:`build_vocabulary` -- the output word set: lowercased alphabetic
  tokens of (PUBLIC) texts by frequency. Building it from private texts would
  release which words occur in them.
* :class:`WordVectors` -- the vocabulary's vectors (cached on disk through
  :func:`~veil.encoders.cache.encode_cached`), on-demand vectors for words
  outside it (memoised in memory only: they are words of private texts and are
  never written to disk), and an exact batched nearest-neighbour search.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, VeilError

if TYPE_CHECKING:  # pragma: no cover
    from veil.encoders.cache import EmbeddingCache
    from veil.encoders.text import TextEncoder

__all__ = ["WORD_PATTERN", "UnknownWordError", "WordVectors", "build_vocabulary", "split_words"]

WORD_PATTERN = re.compile(r"[^\W\d_]+")  # a run of letters (any script); digits, '_' and the rest are not words
_SPLIT = re.compile(r"([^\W\d_]+)")
_TOPK = 8  # float32 candidates re-ranked exactly per query


class UnknownWordError(VeilError, KeyError):
    """A word has no vector: it is not in the vocabulary and there is no encoder to embed it."""

    def __str__(self) -> str:
        return self.args[0]


def split_words(text: str) -> list[str]:
    """``text`` cut into alternating non-word and word runs: the words are at the odd positions.

    ``"".join(split_words(t)) == t`` always; the first and last entries may be ``""``.
    """
    if not isinstance(text, str):
        raise InvalidTypeError(f"text must be a str, not {type(text).__name__}")
    return _SPLIT.split(text)


def build_vocabulary(texts: Iterable[str], *, max_size: int = 20000, min_count: int = 1) -> list[str]:
    """The ``max_size`` most frequent lowercased alphabetic words occurring ``>= min_count`` times.

    Order: count descending, then alphabetical (deterministic). Use PUBLIC texts.
    """
    from veil.validation import check_int

    max_size = check_int("max_size", max_size, minimum=1)
    min_count = check_int("min_count", min_count, minimum=1)
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Iterable):
        raise InvalidTypeError("texts must be a list of strings (pass [text] for one text)")
    counts: Counter[str] = Counter()
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise DataFormatError(f"texts[{i}] is a {type(text).__name__}, not a str")
        counts.update(WORD_PATTERN.findall(text.lower()))
    ranked = sorted((item for item in counts.items() if item[1] >= min_count), key=lambda wc: (-wc[1], wc[0]))
    if not ranked:
        raise DataFormatError(f"no alphabetic word occurs at least min_count={min_count} times in these texts; "
                              f"give more (public) texts or lower min_count")
    return [w for w, _ in ranked[:max_size]]


def _dot_unit_roundoff() -> float:
    """Unit roundoff of the matmul inputs under torch's float32 matmul precision (TF32 / bf16 round inputs)."""
    import torch

    return {"highest": 2.0**-24, "high": 2.0**-11}.get(torch.get_float32_matmul_precision(), 2.0**-8)


class WordVectors:
    """A vocabulary of words with float32 vectors (V, d), on-demand vectors for other words, exact search.

    Parameters (keyword-only)
    -------------------------
    words: the vocabulary, distinct non-empty strings (the output set of word metric-DP).
    matrix: (V, d) their vectors, finite.
    encoder: a :class:`~veil.encoders.TextEncoder` to embed words outside the
        vocabulary on demand (unnormalised, like :meth:`from_encoder`), or None.
    """

    def __init__(self, *, words: Sequence[str], matrix: np.ndarray, encoder: TextEncoder | None = None) -> None:
        if isinstance(words, (str, bytes)) or not isinstance(words, Sequence):
            raise InvalidTypeError("words must be a list of strings")
        words = tuple(words)
        if not words:
            raise InvalidParameterError("the vocabulary is empty; build it with build_vocabulary(public_texts)")
        for i, w in enumerate(words):
            if not isinstance(w, str) or not w:
                raise DataFormatError(f"words[{i}] must be a non-empty str, got {w!r}")
        self._index = {w: i for i, w in enumerate(words)}
        if len(self._index) != len(words):
            dup = next(w for w, c in Counter(words).items() if c > 1)
            raise DataFormatError(f"words contains {dup!r} more than once; give each word once")
        if not isinstance(matrix, np.ndarray):
            raise InvalidTypeError(f"matrix must be a numpy array (V, d), not {type(matrix).__name__}")
        if matrix.ndim != 2 or matrix.shape[0] != len(words) or matrix.shape[1] < 1:
            raise DataFormatError(f"matrix must have shape ({len(words)}, d) for {len(words)} words, "
                                  f"got {matrix.shape}")
        if not np.issubdtype(matrix.dtype, np.number) or np.iscomplexobj(matrix) or not np.isfinite(matrix).all():
            raise DataFormatError("matrix contains NaN, infinite or non-numeric values; re-encode the words")
        if encoder is not None:
            from veil.encoders.text import TextEncoder

            if not isinstance(encoder, TextEncoder):
                raise InvalidTypeError(f"encoder must be a veil TextEncoder or None, not {type(encoder).__name__}")
            if encoder.dim != matrix.shape[1]:
                raise DataFormatError(f"the encoder embeds into {encoder.dim} dimensions but the matrix has "
                                      f"{matrix.shape[1]}; build both with the same encoder")
        self.words = words
        self.matrix = np.array(matrix, dtype=np.float32)  # a private read-only copy
        self.matrix.setflags(write=False)
        self.encoder = encoder
        self._memo: dict[str, np.ndarray] = {}  # vectors of words outside the vocabulary (memory only)
        self._search: dict[str, Any] = {}  # per-device tensors for nearest(), built on first use

    @classmethod
    def from_encoder(cls, encoder: TextEncoder, words: Sequence[str], *, cache: bool | EmbeddingCache = True,
                     name: str = "vocabulary", batch_size: int = 256, progress: bool = False) -> WordVectors:
        """Embed the vocabulary ``words`` alone, unnormalised, through the on-disk cache (``name``/``"words"``)."""
        from veil.encoders.cache import encode_cached

        words = list(words) if isinstance(words, Sequence) and not isinstance(words, (str, bytes)) else words
        if not isinstance(words, list):
            raise InvalidTypeError("words must be a list of strings")
        if not words:
            raise InvalidParameterError("the vocabulary is empty; build it with build_vocabulary(public_texts)")
        matrix = encode_cached(encoder, words, name, "words", cache=cache, batch_size=batch_size,
                               normalize=False, progress=progress)
        return cls(words=words, matrix=matrix, encoder=encoder)

    def __repr__(self) -> str:
        return f"WordVectors(size={len(self)}, dim={self.dim}, encoder={self.encoder is not None})"

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self._index

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def index(self, word: str) -> int:
        """The row of ``word`` in :attr:`matrix` (raises :class:`UnknownWordError` when absent)."""
        if word not in self._index:
            raise UnknownWordError(f"{word!r} is not in the vocabulary")
        return self._index[word]

    # ------------------------------------------------------------ lookup
    def vector(self, word: str) -> np.ndarray:
        """The vector (d,) float32 of one word (embedded on demand when outside the vocabulary)."""
        if not isinstance(word, str):
            raise InvalidTypeError(f"word must be a str, not {type(word).__name__}")
        return self.vectors([word])[0]

    def vectors(self, words: Sequence[str]) -> np.ndarray:
        """Vectors (n, d) float32 of ``words`` (exact strings, case included).

        Words outside the vocabulary are embedded by the encoder, alone and
        unnormalised, in one batch, and memoised in memory for later calls.
        """
        if isinstance(words, (str, bytes)) or not isinstance(words, Sequence):
            raise InvalidTypeError("words must be a list of strings (pass [word] for one word)")
        missing = []
        for i, w in enumerate(words):
            if not isinstance(w, str) or not w.strip():
                raise DataFormatError(f"words[{i}] must be a non-empty str, got {w!r}")
            if w not in self._index and w not in self._memo:
                missing.append(w)
        if missing:
            if self.encoder is None:
                raise UnknownWordError(f"{missing[0]!r} (and {len(missing) - 1} other words) are not in the "
                                       f"vocabulary and these WordVectors have no encoder; build them with "
                                       f"WordVectors.from_encoder(...) or pass encoder=")
            missing = list(dict.fromkeys(missing))
            fresh = self.encoder.encode(missing, normalize=False, progress=False)
            self._memo.update(zip(missing, fresh))
        out = np.empty((len(words), self.dim), dtype=np.float32)
        for i, w in enumerate(words):
            j = self._index.get(w)
            out[i] = self.matrix[j] if j is not None else self._memo[w]
        return out

    # ------------------------------------------------------------ exact nearest neighbour
    def nearest(self, queries: np.ndarray, *, batch_size: int = 1024, device: str = "cpu") -> np.ndarray:
        """Index (n,) int64 of the vocabulary word nearest to each query row (Euclidean), exactly.

        "Exactly" means: the argmin of the float64 squared distance
        ``sum_i (q_i - v_i)**2``, ties to the smallest index. Scores
        ``||v||^2 - 2 q.v`` are computed by a float32 torch matmul in batches
        of ``batch_size`` queries; a rigorous bound on their rounding error
        (accumulation over d terms and rounding of the inputs, TF32/bf16 included
        when torch's float32 matmul precision allows them) selects every word
        that could be the nearest, and those are re-ranked in float64 (at most
        8 per query; a query with more goes through a full float64 scan).
        """
        import torch

        from veil.validation import check_int

        batch_size = check_int("batch_size", batch_size, minimum=1)
        if not isinstance(queries, np.ndarray):
            raise InvalidTypeError(f"queries must be a numpy array (n, d), not {type(queries).__name__}")
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise DataFormatError(f"queries must have shape (n, {self.dim}), got {queries.shape}")
        if not np.issubdtype(queries.dtype, np.number) or np.iscomplexobj(queries) or not np.isfinite(queries).all():
            raise DataFormatError("queries contain NaN, infinite or non-numeric values")
        Q = queries.astype(np.float64, copy=False)
        table = self._search_table(device)
        V64, R = table["V64"], table["max_norm"]
        d, u, u_in = self.dim, 2.0**-24, max(_dot_unit_roundoff(), 2.0**-24)
        gamma = d * u / (1.0 - d * u)
        k = min(_TOPK, len(self))
        out = np.empty(len(Q), dtype=np.int64)
        for start in range(0, len(Q), batch_size):
            q = Q[start:start + batch_size]
            qn = np.sqrt(np.einsum("ij,ij->i", q, q))
            with torch.inference_mode(), np.errstate(over="ignore"):  # beyond float32: handled below
                qt = torch.from_numpy(q.astype(np.float32)).to(device)
                scores = table["norm2"][None, :] - 2.0 * (qt @ table["V32"].T)
                values, idx = torch.topk(scores, k, dim=1, largest=False, sorted=True)
            values, idx = values.cpu().numpy().astype(np.float64), idx.cpu().numpy()
            # |float32 score - exact score| <= bound (dot: 4 u_in + 2 gamma of |q||v|; norm and subtraction: u)
            bound = 2.0 * (4.0 * u_in + 2.0 * gamma) * qn * R + 4.0 * u * (R * R + qn * R)
            keep = values <= values[:, :1] + 3.0 * bound[:, None]
            chosen = idx[:, 0].copy()  # a lone candidate is the nearest word
            tied = np.flatnonzero(keep[:, 1]) if k > 1 else np.empty(0, dtype=np.int64)
            if tied.size:  # re-rank the candidates in float64, ties to the smallest index
                diff = V64[idx[tied]] - q[tied, None, :]
                dist = np.where(keep[tied], np.einsum("nkd,nkd->nk", diff, diff), np.inf)
                best = dist.min(axis=1, keepdims=True)
                chosen[tied] = np.where(dist == best, idx[tied], len(self)).min(axis=1)
            # the k-th candidate still within the bound (there may be more), or float32 overflow: scan all in float64
            overflow = np.flatnonzero((keep[:, -1] & (k < len(self))) | ~np.isfinite(values[:, 0]))
            for row in overflow:
                diff_all = V64 - q[row]
                chosen[row] = int(np.argmin(np.einsum("vd,vd->v", diff_all, diff_all)))
            out[start:start + len(q)] = chosen
        return out

    def _search_table(self, device: str) -> dict[str, Any]:
        if device not in self._search:
            import torch

            V64 = self.matrix.astype(np.float64)
            norm2 = np.einsum("vd,vd->v", V64, V64)
            self._search[device] = {
                "V64": V64, "max_norm": float(np.sqrt(norm2.max())),
                "V32": torch.from_numpy(self.matrix.copy()).to(device),
                "norm2": torch.from_numpy(norm2.astype(np.float32)).to(device),
            }
        return self._search[device]
