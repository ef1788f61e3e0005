"""Truncation: the clip-average-Laplace SentDP baseline (Meehan et al. 2022, Sec. 4 and App. A.3).

Li and Clifton (2021) bound the embedding space so that finite noise gives
differential privacy; Meehan, Mrini and Chaudhuri use it as the "Truncation"
baseline of their Fig. 4 (App. A.3):

1. a box ``[lower, upper]`` is fitted on PUBLIC training document embeddings:
   per dimension j the central 75% interval ``[q_12.5, q_87.5]`` (``coverage``),
   of width ``w_j``;
2. a document's k sentence embeddings are clipped into the box and averaged
   (the *truncated mean*; the non-private classifier C_trunc is trained on it);
3. Laplace noise of scale ``d * w_j / (k * epsilon)`` is added to dimension j.

Why this is epsilon-SentDP: replacing one sentence of a k-sentence document
moves the truncated mean by at most ``w_j / k`` in dimension j, so the privacy
loss of the product of Laplace densities is at most
``sum_j (w_j / k) / (d * w_j / (k * epsilon)) = epsilon``. This needs the box to
be computed from public data (never from the documents released) and treats k
as public (SentDP neighbours have the same number of sentences). Every release
spends epsilon. Dimensions of width 0 carry no information and get no noise.

Noise sampler (departure to note): rng=None draws Laplace noise by the
inverse CDF from 53-bit uniforms read from the OS CSPRNG
(:func:`veil.random.secure_uniform`); the uniforms are shifted by half a step so
that the lattice of probabilities is exactly symmetric and never 0 or 1 (the
noise is bounded by ``36.7`` scales; tail mass beyond it ``2**-53``). OpenDP's
vetted sampler (``opendp==0.16.0``, ``dp.m.make_laplace`` over
``vector_domain(atom_domain(T=float))`` with ``l1_distance``, per-dimension
scales by dividing by ``w_j`` and multiplying back) was checked and works
(correct distribution, privacy map ``d_in / scale``), but is not used because

* it draws 47k samples/s with the default granularity and ~130k/s with
  ``k=-40`` and a sized domain, i.e. 60-170 s for 20k documents of d=384 on one
  core, against well under a second here, and the experiments privatise tens of
  thousands of documents per (epsilon, k, trial);
* it cannot be seeded, so reproducible experiments need a second sampler anyway.

The price: like every textbook floating-point Laplace mechanism, this one is
exposed in principle to Mironov's (CCS 2012) attack on the low-order bits of
the output; OpenDP's discretised sampler is not. The guarantee stated is that
of the real-valued mechanism. Seeded rngs (an int or a numpy Generator) use
``Generator.random`` through the same transform and are for experiments only
(:class:`~veil.errors.PrivacyLeakWarning`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from veil.defenses.base import DocumentEmbeddingsDefense, Guarantee
from veil.validation import check_epsilon, check_documents, check_int, check_real, check_sentence_embeddings, seeded_rng
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.random import RngLike, uniform

__all__ = ["Truncation", "laplace_noise"]

def laplace_noise(rng: np.random.Generator | None, size: int) -> np.ndarray:
    """``size`` draws of Laplace(0, 1) by the inverse CDF (rng=None: OS CSPRNG uniforms).

    A uniform ``u = m * 2**-53`` becomes ``p = u + 2**-54``; ``F^-1(p)`` is
    ``log(2p)`` below 1/2 and ``-log(2 - 2p)`` above. Both arguments are the
    exactly representable odd multiples of ``2**-53`` in (0, 1), so the output
    distribution is exactly symmetric and always finite.
    """
    a = 2.0 * uniform(rng, size)  # m * 2**-52, exact
    low = a < 1.0
    out = np.empty_like(a)
    out[low] = np.log(a[low] + 2.0**-53)
    out[~low] = -np.log((2.0 - a[~low]) - 2.0**-53)
    return out


def _check_matrix(name: str, X: Any, *, what: str) -> np.ndarray:
    if not isinstance(X, np.ndarray):
        raise InvalidTypeError(f"{name} must be a numpy array {what}, not {type(X).__name__}")
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise DataFormatError(f"{name} must be a non-empty 2-D array {what}, got shape {X.shape}")
    if not np.issubdtype(X.dtype, np.number) or np.iscomplexobj(X) or not np.isfinite(X).all():
        raise DataFormatError(f"{name} contains NaN, infinite, complex or non-numeric values; re-encode or drop them")
    return X.astype(np.float64, copy=False)


def _check_bound(name: str, value: Any) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise InvalidTypeError(f"{name} must be a numpy array (d,), not {type(value).__name__}")
    if value.ndim != 1 or value.shape[0] < 1:
        raise InvalidParameterError(f"{name} must be a non-empty 1-D array (d,), got shape {value.shape}")
    if not np.issubdtype(value.dtype, np.number) or np.iscomplexobj(value) or not np.isfinite(value).all():
        raise InvalidParameterError(f"{name} must be finite real numbers; fit the box with Truncation.fit")
    out = value.astype(np.float64)  # a private copy: the box must not change under the mechanism
    out.setflags(write=False)
    return out


class Truncation(DocumentEmbeddingsDefense):
    """Clip sentence embeddings into a public box, average, add Laplace noise: epsilon-SentDP.

    Parameters (keyword-only)
    -------------------------
    lower, upper: (d,) the box, ``lower <= upper``, computed from PUBLIC data
        (usually with :meth:`fit` on the training documents' embeddings).
    epsilon: the SentDP parameter, finite and > 0.
    rng: None (OS CSPRNG, the default: use it for anything you release), or an
        int seed / numpy Generator for reproducible experiments only (warns).
    """

    name = "truncation"
    citation = "Meehan et al. 2022, Sec. 5 (the truncation baseline: clipped mean + Laplace noise)"
    guarantee = Guarantee("sentdp", "epsilon-SentDP for the epsilon it is built with (Laplace mechanism on the "
                          "truncated mean)")
    tasks = ("document-classification",)

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        return [{"epsilon": e} for e in ((3.0, 30.0) if quick else (1.0, 3.0, 10.0, 30.0))]

    @classmethod
    def bench_make(cls, setting: dict[str, Any], data: Any, rng: Any = None, **options: Any) -> "Truncation":
        """The box from the public (train) documents' mean embeddings, ``data.candidates``, as the paper."""
        return cls.fit(data.candidates, epsilon=float(setting["epsilon"]), rng=rng)

    @classmethod
    def bench_guarantee(cls, setting: dict[str, Any]) -> Guarantee:
        eps = float(setting["epsilon"])
        return Guarantee("sentdp", f"epsilon-SentDP, epsilon={eps:g} per released document (real arithmetic)",
                         epsilon=eps)

    def __init__(self, *, lower: np.ndarray, upper: np.ndarray, epsilon: float, rng: RngLike = None) -> None:
        self.lower = _check_bound("lower", lower)
        self.upper = _check_bound("upper", upper)
        if self.lower.shape != self.upper.shape:
            raise InvalidParameterError(f"lower has {self.lower.shape[0]} dimensions but upper has "
                                        f"{self.upper.shape[0]}; give both bounds of the same box")
        if (self.lower > self.upper).any():
            bad = int(np.argmax(self.lower > self.upper))
            raise InvalidParameterError(f"lower > upper in dimension {bad} ({self.lower[bad]!r} > {self.upper[bad]!r});"
                                        f" give lower <= upper in every dimension")
        self.width = self.upper - self.lower
        self.width.setflags(write=False)
        self.epsilon = check_epsilon(epsilon, what="SentDP")
        self._rng = seeded_rng(rng, "Truncation", "noise")
        self.coverage: float | None = None  # set by fit()
        self.guarantee = Guarantee(
            "sentdp", f"epsilon-SentDP with epsilon={self.epsilon:g}: replacing one sentence of a k-sentence document "
                      f"moves the truncated mean by at most w_j/k in dimension j, and Laplace noise of scale "
                      f"d*w_j/(k*epsilon) bounds the privacy loss by sum_j (w_j/k)/(d*w_j/(k*epsilon)) = epsilon; "
                      f"holds only if the box was computed from public data; the number of sentences k is public; "
                      f"each release spends epsilon; stated for real arithmetic (floating-point Laplace)",
            epsilon=self.epsilon)

    @classmethod
    def fit(cls, doc_embeddings: np.ndarray, *, epsilon: float, coverage: float = 0.75,
            rng: RngLike = None) -> Truncation:
        """The box of the central ``coverage`` interval per dimension of PUBLIC document embeddings (n, d).

        ``coverage=0.75`` (the paper) gives ``[q_12.5, q_87.5]``; ``1.0`` gives
        ``[min, max]``. Quantiles are numpy's linear interpolation.
        """
        coverage = check_real("coverage", coverage, low=0.0, high=1.0, low_open=True,
                              hint="; the box covers this central fraction of each dimension, e.g. 0.75")
        X = _check_matrix("doc_embeddings", doc_embeddings, what="(n, d) of public document embeddings")
        tail = (1.0 - coverage) / 2.0
        lower, upper = np.quantile(X, [tail, 1.0 - tail], axis=0)
        upper = np.maximum(upper, lower)  # interpolation round-off must not invert a degenerate dimension
        mech = cls(lower=lower, upper=upper, epsilon=epsilon, rng=rng)
        mech.coverage = coverage
        return mech

    def __repr__(self) -> str:
        return f"Truncation(d={self.dim}, epsilon={self.epsilon:g}, coverage={self.coverage})"

    @property
    def dim(self) -> int:
        return int(self.lower.shape[0])

    def config(self) -> dict[str, Any]:
        return {**super().config(), "dim": self.dim, "epsilon": self.epsilon, "coverage": self.coverage,
                "mean_width": float(self.width.mean()), "seeded": self._rng is not None}

    # ------------------------------------------------------------ deterministic parts
    def noise_scale(self, k: int) -> np.ndarray:
        """The per-dimension Laplace scale ``d * w_j / (k * epsilon)`` for a k-sentence document, (d,)."""
        k = check_int("k", k, minimum=1, hint=" (the number of sentences)")
        return self.dim * self.width / (k * self.epsilon)

    def clip(self, S: np.ndarray) -> np.ndarray:
        """The sentence embeddings (k, d) clipped into the box, float64."""
        return np.clip(self._check_document(S, None), self.lower, self.upper)

    def truncated_mean(self, S: np.ndarray) -> np.ndarray:
        """The non-private truncated mean (d,) of one document (what C_trunc is trained on)."""
        self._check_document(S, None)
        return self.truncated_means([S])[0]

    def truncated_means(self, documents: Sequence[np.ndarray]) -> np.ndarray:
        """Truncated means (n, d) float64 of many documents, each a (k_i, d) array."""
        return self._means(self._check_documents(documents))[0]

    # ------------------------------------------------------------ the mechanism
    def privatize(self, S: np.ndarray) -> np.ndarray:
        """One epsilon-SentDP release (d,) float64: truncated mean + Laplace(d * w / (k * epsilon)) noise."""
        self._check_document(S, None)
        return self.privatize_many([S])[0]

    def release_embeddings(self, documents: Sequence[np.ndarray]) -> np.ndarray:
        """The release verb of a document-embeddings defense: one private embedding per document, (n, d)."""
        return self.privatize_many(documents)

    def privatize_many(self, documents: Sequence[np.ndarray]) -> np.ndarray:
        """Releases (n, d) float64 of many documents (a list of (k_i, d) arrays), each spending epsilon."""
        docs = self._check_documents(documents)
        means, counts = self._means(docs)
        scales = (self.dim / self.epsilon) * self.width[None, :] / counts[:, None]
        noise = laplace_noise(self._rng, means.size).reshape(means.shape)
        return means + scales * noise

    def log_density(self, z: np.ndarray, S: np.ndarray) -> float:
        """The exact log density of :meth:`privatize` (S) at the output z (d,), in real arithmetic.

        Dimensions of width 0 are released exactly: they add 0 when z equals
        the truncated mean there and make the density 0 (``-inf``) otherwise.
        """
        mean = self.truncated_mean(S)
        if not isinstance(z, np.ndarray) or z.shape != (self.dim,):
            raise InvalidParameterError(f"z must be a numpy array of shape ({self.dim},)")
        scale = self.noise_scale(int(S.shape[0]))
        free = scale > 0
        if (z[~free] != mean[~free]).any():
            return float("-inf")
        b = scale[free]
        return float(-np.sum(np.log(2.0 * b)) - np.sum(np.abs(z[free] - mean[free]) / b))

    # ------------------------------------------------------------ helpers
    def _check_document(self, S: Any, index: int | None) -> np.ndarray:
        return check_sentence_embeddings(S, self.dim, against="the box has", index=index)

    def _check_documents(self, documents: Any) -> list[np.ndarray]:
        return check_documents(documents, self.dim, against="the box has")

    def _means(self, docs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Truncated means (n, d) and sentence counts (n,) float64 (a plain loop: faster than reduceat here)."""
        counts = np.fromiter((S.shape[0] for S in docs), dtype=np.int64, count=len(docs))
        means = np.empty((len(docs), self.dim), dtype=np.float64)
        for i, S in enumerate(docs):
            clipped = np.clip(S.astype(np.float64), self.lower, self.upper)
            means[i] = clipped.sum(axis=0) / S.shape[0]
        return means, counts.astype(np.float64)
