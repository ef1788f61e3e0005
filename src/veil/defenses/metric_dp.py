"""Word-level metric DP (Feyisetan, Balle, Drake and Diethe 2019): Meehan et al.'s "Word Metric-DP" baseline.

Feyisetan et al., "Privacy- and Utility-Preserving Textual Analysis via
Calibrated Multivariate Perturbations" (arXiv 2019, WSDM 2020): every word w of a text
is replaced, independently, by the vocabulary word nearest to ``phi(w) + z``,
where z has density proportional to ``exp(-epsilon * ||z||)`` in R^d; z is
sampled as a uniform direction (a normalised Gaussian vector) times a radius
drawn from Gamma(shape=d, scale=1/epsilon). Meehan et al. (App. A.3) rewrite a
document this way and embed the result with SBERT.

What holds (:attr:`WordMetricDP.guarantee`, kind ``"metric-dp"``): for any two
words w, w' and every output word y,
``P[y | w] <= exp(epsilon * ||phi(w) - phi(w')||) * P[y | w']``, with phi the
static word vectors (:mod:`veil.encoders.word_vectors`, a MiniLM-derived
substitute for GloVe: their scale sets what epsilon means). Texts of the same
layout differing in several words are protected by epsilon times the SUM of
those distances. This is NOT SentDP: replacing a whole sentence costs epsilon
times the summed distance of all its words, which grows with its length and is
not bounded by epsilon, and a sentence with another number of words is told
apart outright (the number and positions of words are released).

Kept as is (not protected): everything that is not a run of letters --
whitespace, punctuation, digits, underscores and other symbols -- and so the
text's length in words and its layout. Words are lowercased before they are
perturbed; the output words are vocabulary words (lowercase when the
vocabulary comes from :func:`~veil.encoders.word_vectors.build_vocabulary`).

Departures from the paper: phi is MiniLM-derived (no GloVe offline); words
outside the vocabulary get phi from the encoder on demand (the guarantee holds
for any word phi is defined on; the output is always a vocabulary word);
noise comes from 53-bit uniforms read from the OS CSPRNG (rng=None) by
Box-Muller (direction) and the Gamma inverse CDF (``scipy.special.gammaincinv``,
radius), not from a PRNG; like any floating-point mechanism the guarantee is
stated for real arithmetic (the float64 noise is exposed in principle to
Mironov's CCS 2012 attack on low-order bits; the output here is a vocabulary
word, not the noisy vector, which hides most of those bits, but veil does not
prove that it hides all of them). Seeds are for experiments only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from veil.defenses.base import Guarantee, TextDefense
from veil.validation import check_epsilon, check_int, seeded_rng
from veil.encoders.word_vectors import WordVectors, split_words
from veil.errors import DataFormatError, InvalidTypeError
from veil.random import RngLike, standard_normals, uniform

__all__ = ["WordMetricDP", "standard_normals", "metric_noise"]


def metric_noise(rng: np.random.Generator | None, n: int, dim: int, epsilon: float) -> np.ndarray:
    """``n`` draws (n, dim) from the density proportional to ``exp(-epsilon * ||z||)`` on R^dim.

    Direction: a standard normal vector normalised (uniform on the sphere);
    radius: Gamma(dim, 1/epsilon) by its inverse CDF. Directions of norm 0
    (probability 0 in theory) are redrawn.
    """
    from scipy.special import gammaincinv

    direction = standard_normals(rng, n * dim).reshape(n, dim)
    norms = np.sqrt(np.einsum("nd,nd->n", direction, direction))
    while (bad := np.flatnonzero(norms == 0.0)).size:
        direction[bad] = standard_normals(rng, bad.size * dim).reshape(bad.size, dim)
        norms[bad] = np.sqrt(np.einsum("nd,nd->n", direction[bad], direction[bad]))
    radius = gammaincinv(float(dim), uniform(rng, n)) / epsilon
    return direction * (radius / norms)[:, None]


class WordMetricDP(TextDefense):
    """Rewrite texts word by word with epsilon * Euclidean-distance metric DP.

    Parameters (keyword-only)
    -------------------------
    vectors: the :class:`~veil.encoders.word_vectors.WordVectors` (vocabulary =
        output words, built from public text; phi for any input word).
    epsilon: finite and > 0; the mean noise norm is ``d / epsilon``.
    rng: None (OS CSPRNG, the default: use it for anything you release), or an
        int seed / numpy Generator for reproducible experiments only (warns).
    """

    name = "metric-dp"
    citation = "Feyisetan et al. 2020 (word-level metric DP), the text baseline of Meehan et al. 2022"
    guarantee = Guarantee("metric-dp", "epsilon * Euclidean-distance metric DP per word, for the epsilon it is "
                          "built with; NOT SentDP (a sentence change costs epsilon times the sum of its word distances)")
    tasks = ("document-classification",)

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """The SentDP paper's comparison points (Meehan et al. 2022, Fig. 4): epsilon per word."""
        return [{"epsilon": 10.0}] if quick else [{"epsilon": e} for e in (1.0, 3.0, 10.0, 30.0)]

    @classmethod
    def bench_guarantee(cls, setting: dict[str, Any]) -> Guarantee:
        eps = float(setting["epsilon"])
        return Guarantee("metric-dp", f"word-level metric DP, epsilon={eps:g} per unit of word-vector distance, per "
                         "word (NOT SentDP: a sentence change costs epsilon times the sum of its word distances)",
                         epsilon=eps)

    @classmethod
    def bench_make(cls, setting: dict[str, Any], data: Any, rng: Any = None, **options: Any) -> "WordMetricDP":
        """Word vectors from the corpus' public (train) texts (MiniLM, each word encoded alone, cached), as the
        SentDP evaluation builds them; ``rng`` None: OS CSPRNG noise."""
        from veil.defenses.defaults import METRIC_DP_VOCABULARY, word_vectors

        public = [s for i in data.splits["train"] for s in data.sentences[i]]
        vectors = word_vectors(public, vocabulary=int(options.get("vocabulary", METRIC_DP_VOCABULARY)),
                               name=f"{data.name}-bench-vocabulary")
        return cls(vectors=vectors, epsilon=float(setting["epsilon"]), rng=rng)

    def __init__(self, *, vectors: WordVectors, epsilon: float, rng: RngLike = None) -> None:
        if not isinstance(vectors, WordVectors):
            raise InvalidTypeError(f"vectors must be veil WordVectors (WordVectors.from_encoder(...)), "
                                   f"not {type(vectors).__name__}")
        self.vectors = vectors
        self.epsilon = check_epsilon(epsilon, what="metric DP")
        self._rng = seeded_rng(rng, "WordMetricDP", "noise")
        self.guarantee = Guarantee(
            "metric-dp", f"word-level metric DP with epsilon={self.epsilon:g}: for any two words w, w' and every "
                         f"output word, P[out | w] <= exp(epsilon * ||phi(w) - phi(w')||_2) * P[out | w'], phi the "
                         f"static (MiniLM-derived, unnormalised) word vectors, each word perturbed independently; "
                         f"texts differing in several words: epsilon times the sum of the distances. NOT SentDP: "
                         f"a whole sentence change is not bounded by epsilon; non-word characters, word count and "
                         f"positions are released unchanged", epsilon=self.epsilon)

    def __repr__(self) -> str:
        return f"WordMetricDP(vocabulary={len(self.vectors)}, d={self.dim}, epsilon={self.epsilon:g})"

    @property
    def dim(self) -> int:
        return self.vectors.dim

    @property
    def mean_noise_norm(self) -> float:
        """E||z|| = d / epsilon, to compare with the distances between word vectors."""
        return self.dim / self.epsilon

    def config(self) -> dict[str, Any]:
        return {**super().config(), "epsilon": self.epsilon, "vocabulary_size": len(self.vectors), "dim": self.dim,
                "mean_noise_norm": self.mean_noise_norm, "seeded": self._rng is not None}

    # ------------------------------------------------------------ the mechanism
    def noise(self, n: int) -> np.ndarray:
        """``n`` fresh noise vectors (n, d) float64 from this mechanism's randomness."""
        n = check_int("n", n, minimum=0)
        return metric_noise(self._rng, n, self.dim, self.epsilon)

    def perturb(self, words: Sequence[str], *, chunk_size: int = 8192) -> list[str]:
        """Each word replaced by the vocabulary word nearest to ``phi(word) + z`` (exact strings, no lowercasing).

        One noise draw per entry (repeated words get independent noise); the
        vectors of distinct words are looked up once, and noise and search run
        ``chunk_size`` words at a time.
        """
        if isinstance(words, (str, bytes)) or not isinstance(words, Sequence):
            raise InvalidTypeError("words must be a list of strings (pass [word] for one word)")
        chunk_size = check_int("chunk_size", chunk_size, minimum=1)
        if not words:
            return []
        distinct = list(dict.fromkeys(words))
        phi = self.vectors.vectors(distinct).astype(np.float64)
        row = {w: i for i, w in enumerate(distinct)}
        ids = np.fromiter((row[w] for w in words), dtype=np.int64, count=len(words))
        out = np.empty(len(words), dtype=np.int64)
        for start in range(0, len(words), chunk_size):
            block = ids[start:start + chunk_size]
            out[start:start + len(block)] = self.vectors.nearest(phi[block] + self.noise(len(block)))
        vocab = self.vectors.words
        return [vocab[i] for i in out]

    def rewrite(self, text: str) -> str:
        """One text with every run of letters, lowercased, replaced by a private vocabulary word."""
        if not isinstance(text, str):
            raise InvalidTypeError(f"text must be a str, not {type(text).__name__}")
        return self.rewrite_many([text])[0]

    def transform(self, texts: Sequence[str]) -> list[str]:
        """The release verb of a text defense: :meth:`rewrite_many`."""
        return self.rewrite_many(texts)

    def rewrite_many(self, texts: Sequence[str], *, chunk_size: int = 8192) -> list[str]:
        """Rewrite many texts at once: one noise draw per word occurrence, batched over all words of all texts."""
        if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
            raise InvalidTypeError("texts must be a list of strings (pass [text] for one text)")
        pieces = []
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise DataFormatError(f"texts[{i}] is a {type(text).__name__}, not a str")
            pieces.append(split_words(text))
        flat = [p.lower() for parts in pieces for p in parts[1::2]]
        new = iter(self.perturb(flat, chunk_size=chunk_size))
        out = []
        for parts in pieces:
            parts[1::2] = [next(new) for _ in range(len(parts) // 2)]
            out.append("".join(parts))
        return out
