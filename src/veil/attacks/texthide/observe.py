"""What an eavesdropper on TextHide collects, and (separately) the ground truth used only to score attacks.

Two ways to watch a TextHide client:

* :func:`observe_training_run`: every training encoding of a run of
  ``epochs`` epochs. Each epoch the rows of ``X`` are shuffled (with ``rng``,
  the experiment's randomness) and cut into batches; each batch is encrypted
  with :meth:`TextHide.encrypt <veil.defenses.texthide.TextHide.encrypt>`, so
  every example is re-encrypted each epoch with fresh mixing and a fresh pool
  mask (the mixing randomness comes from the TextHide itself: OS CSPRNG unless
  it was built with a seed). This is what a server or eavesdropper sees in
  Alg. 2 when the head's input is recovered from the gradients (see
  PRIOR-ART B.2), or when encodings are uploaded as in the paper's threat model.
* :func:`observe_inference`: inference encodings (k = 1, one pool mask per
  example, no mixing), ``repeats`` times over the same rows.

Both return ``(Observation, TextHideTruth)``. The :class:`~veil.attacks.base.Observation`
holds only the encodings and the defense's PUBLIC configuration; the
:class:`TextHideTruth` holds the secret (sources, coefficients, mask choice,
the pool) and is for scoring only: attacks take an ``Observation`` and refuse
anything else.

The TextHide must be built with ``record_details=True`` (it keeps each call's
one-time key, which is how the truth is collected).

:class:`PublicStats` is what the attacker computes from PUBLIC data (mean and
covariance of original representations of a corpus it owns), besides the
encodings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.attacks.base import Observation
from veil.validation import as_vectors
from veil.validation import check_int
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.random import RngLike, as_generator

__all__ = ["TextHideTruth", "PublicStats", "observe_training_run", "encrypt_training_run", "observe_inference"]


def _frozen(a: Any, dtype: Any) -> np.ndarray:
    out = np.array(a, dtype=dtype, copy=True)
    out.flags.writeable = False
    return out


@dataclass(frozen=True, repr=False)
class TextHideTruth:
    """The secret behind each observed encoding. SCORING ONLY: never pass it to an attack, never log it.

    Row ``i`` describes encoding ``i`` of the matching observation.

    Attributes
    ----------
    sources: int64 (n, kp): row ids (in ``X``) of the private examples mixed, slot 0 first
        (slot 0 is the example the encoding was made for; kp = k in intra mode, ceil(k/2) in inter mode).
    coefficients: float64 (n, k): the mixing coefficients, private slots first, then public slots.
    mask_index: int64 (n,): which row of ``masks`` each encoding was masked with.
    masks: int8 (m_eff, d): the pool (``m_eff = m``). For m=0 (no mask) one all-ones row; for an
        infinite pool (m=None) the fresh mask of every encoding (``m_eff = n``, ``mask_index = arange(n)``).
    public_index: int64 (n, k - kp) rows of the public set (inter mode), or None (intra mode).
    epoch: int64 (n,): the epoch (training run) or repeat (inference) that produced each encoding.
    pool_size: the pool's ``m`` (None = infinite pool).
    n_examples: number of rows of ``X``.
    """

    sources: np.ndarray
    coefficients: np.ndarray
    mask_index: np.ndarray
    masks: np.ndarray
    public_index: np.ndarray | None
    epoch: np.ndarray
    pool_size: int | None
    n_examples: int

    def __post_init__(self) -> None:
        for name, dtype in (("sources", np.int64), ("coefficients", np.float64), ("mask_index", np.int64),
                            ("masks", np.int8), ("epoch", np.int64)):
            object.__setattr__(self, name, _frozen(getattr(self, name), dtype))
        if self.public_index is not None:
            object.__setattr__(self, "public_index", _frozen(self.public_index, np.int64))
        n = self.sources.shape[0]
        if (self.sources.ndim != 2 or self.coefficients.shape[0] != n or self.mask_index.shape != (n,)
                or self.epoch.shape != (n,) or self.masks.ndim != 2):
            raise InvalidParameterError("inconsistent TextHideTruth shapes: one row per encoding is expected")
        if n and (self.mask_index.min() < 0 or self.mask_index.max() >= self.masks.shape[0]):
            raise InvalidParameterError("mask_index points outside masks")

    @property
    def n_encodings(self) -> int:
        return int(self.sources.shape[0])

    @property
    def dim(self) -> int:
        return int(self.masks.shape[1])

    def encoding_masks(self) -> np.ndarray:
        """int8 (n, d): the mask applied to each encoding."""
        return self.masks[self.mask_index]

    def __repr__(self) -> str:  # shapes only: the values are the secret key
        return (f"TextHideTruth(n_encodings={self.n_encodings}, k={self.coefficients.shape[1]}, "
                f"private_slots={self.sources.shape[1]}, masks={self.masks.shape[0]}, dim={self.dim})")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("TextHideTruth holds the secret mask pool and cannot be pickled; keep it in the process "
                        "that scores the attack")


@dataclass(frozen=True, repr=False)
class PublicStats:
    """Mean (d,) and optional covariance (d, d) of original representations of a PUBLIC corpus."""

    mean: np.ndarray
    cov: np.ndarray | None = None
    n: int = 0
    source: str = "public vectors"

    def __post_init__(self) -> None:
        if np.ndim(self.mean) != 1:
            raise DataFormatError(f"mean must be one vector of shape (d,), got shape {np.shape(self.mean)}")
        mean = as_vectors("mean", np.asarray(self.mean)[None, :])[0]
        object.__setattr__(self, "mean", _frozen(mean, np.float64))
        if self.cov is not None:
            cov = as_vectors("cov", self.cov, dim=self.dim).astype(np.float64)
            if cov.shape != (self.dim, self.dim) or not np.allclose(cov, cov.T, atol=1e-8):
                raise DataFormatError(f"cov must be a symmetric ({self.dim}, {self.dim}) matrix, got {cov.shape}")
            object.__setattr__(self, "cov", _frozen(cov, np.float64))
        if not isinstance(self.source, str):
            raise InvalidTypeError(f"source must be a string naming the public data, not {type(self.source).__name__}")

    @classmethod
    def from_vectors(cls, vectors: Any, *, source: str = "public vectors", covariance: bool = True) -> PublicStats:
        """Mean and (unless ``covariance=False``) covariance of (N, d) public representations (N >= 2)."""
        x = as_vectors("public vectors", vectors).astype(np.float64)
        if x.shape[0] < 2:
            raise DataFormatError("public statistics need at least 2 public vectors (more than d for a covariance)")
        cov = np.cov(x, rowvar=False).reshape(x.shape[1], x.shape[1]) if covariance else None
        return cls(mean=x.mean(0), cov=cov, n=int(x.shape[0]), source=source)

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "n": self.n, "dim": self.dim, "covariance": self.cov is not None,
                "mean_norm": float(np.linalg.norm(self.mean))}

    def __repr__(self) -> str:
        return f"PublicStats(source={self.source!r}, n={self.n}, dim={self.dim}, covariance={self.cov is not None})"


def _check_texthide(texthide: Any, dim: int) -> Any:
    from veil.defenses.texthide import TextHide

    if not isinstance(texthide, TextHide):
        raise InvalidTypeError(f"texthide must be a veil TextHide, not {type(texthide).__name__}")
    if texthide.pool.dim != dim:
        raise InvalidParameterError(f"X has dimension {dim} but the TextHide mask pool has dimension "
                                    f"{texthide.pool.dim}; encode X with the encoder the pool was built for")
    return texthide


def _details(texthide: Any) -> Any:
    details = texthide.last_details
    if details is None:
        raise InvalidParameterError("the TextHide keeps no details of its calls, so the ground truth for scoring "
                                    "cannot be collected; build it with TextHide(..., record_details=True)")
    texthide.last_details = None  # never let a stale key stand in for the next call's
    return details


def _mask_truth(pool: Any, details: Any, b: int, offset: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Per-batch (mask_index, fresh masks or None) in the layout of :class:`TextHideTruth`."""
    if pool.m == 0:
        return np.zeros(b, dtype=np.int64), None
    if pool.m is None:  # every encoding gets its own fresh mask
        return np.arange(offset, offset + b, dtype=np.int64), details.masks.detach().cpu().numpy().astype(np.int8)
    return details.mask_index.detach().cpu().numpy().astype(np.int64), None


def _pool_masks(pool: Any, fresh: list[np.ndarray]) -> np.ndarray:
    if pool.m == 0:
        return np.ones((1, pool.dim), dtype=np.int8)
    if pool.m is None:
        return np.concatenate(fresh) if fresh else np.zeros((0, pool.dim), dtype=np.int8)
    return pool.masks.numpy().astype(np.int8)


def _batches(order: np.ndarray, batch_size: int, minimum: int) -> list[np.ndarray]:
    """``order`` cut into about ``batch_size``-sized batches, none smaller than ``minimum`` (nothing dropped)."""
    count = max(1, min(-(-len(order) // batch_size), len(order) // minimum))
    return np.array_split(order, count)


def observe_training_run(X: Any, texthide: Any, *, epochs: int, batch_size: int = 64,
                         rng: RngLike = None) -> tuple[Observation, TextHideTruth]:
    """Encrypt the rows of ``X`` for ``epochs`` epochs in shuffled batches: (what is seen, the secret truth).

    ``X``: float (n, d) original representations (one per private example).
    ``texthide``: a :class:`~veil.defenses.texthide.TextHide` built with
    ``record_details=True``. Each epoch draws a fresh order of the rows from
    ``rng`` (None = OS entropy, an int seed for experiments) and encrypts it
    in batches of about ``batch_size`` (a short remainder is spread over the
    batches, never dropped; no batch is smaller than the TextHide's
    ``min_batch_size``). Encodings are returned in the order they were made
    (epoch by epoch, batch by batch). :func:`encrypt_training_run` makes them.
    """
    release, truth, config = encrypt_training_run(X, texthide, epochs=epochs, batch_size=batch_size, rng=rng)
    return Observation(vectors=release.e.numpy(), defense=config, source="defense"), truth


def encrypt_training_run(X: Any, texthide: Any, *, epochs: int, batch_size: int = 64, y: Any = None,
                         num_classes: int | None = None, rng: RngLike = None) -> tuple[Any, TextHideTruth,
                                                                                       dict[str, Any]]:
    """A training run's release, as :func:`observe_training_run` describes it: (every encoding in order as an
    ``Encrypted``, with the mixed soft labels of ``y`` when labels are given, else None; the secret truth; the run's
    public configuration). ``veil.protect`` releases TextHide's training encodings through this, and the bench's
    cells observe them through it."""
    import torch

    from veil.defenses.texthide.mechanism import Encrypted

    x = np.ascontiguousarray(as_vectors("X", X), dtype=np.float32)
    th = _check_texthide(texthide, x.shape[1])
    epochs = check_int("epochs", epochs, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    n, minimum = x.shape[0], th.min_batch_size
    if n < minimum:
        raise InvalidParameterError(f"X has {n} rows but this TextHide mixes {minimum} private examples per "
                                    f"encoding; pass at least {minimum} rows")
    labels = None if y is None else torch.as_tensor(np.asarray(y))
    if labels is not None and len(labels) != n:
        raise DataFormatError(f"{len(labels)} labels for {n} rows of X; give one label per row")
    gen = as_generator(rng)
    parts, mixed, sources, coefs, mask_idx, fresh, public, epoch_of = [], [], [], [], [], [], [], []
    offset = 0
    th.last_details = None
    with torch.no_grad():
        for epoch in range(epochs):
            for rows in _batches(gen.permutation(n), batch_size, minimum):
                if labels is None:
                    out = th.encrypt(torch.from_numpy(x[rows]))
                else:
                    out = th.encrypt(torch.from_numpy(x[rows]), labels[torch.from_numpy(rows)], num_classes=num_classes)
                    mixed.append(out[1].detach().cpu())
                d = _details(th)
                parts.append(out[0].detach().cpu())
                sources.append(rows[d.private_index.cpu().numpy()])
                coefs.append(d.coefficients.detach().cpu().numpy().astype(np.float64))
                idx, masks = _mask_truth(th.pool, d, len(rows), offset)
                mask_idx.append(idx)
                if masks is not None:
                    fresh.append(masks)
                if d.public_index is not None:
                    public.append(d.public_index.cpu().numpy())
                epoch_of.append(np.full(len(rows), epoch, dtype=np.int64))
                offset += len(rows)
    config = {**th.config(), "observed": "training run", "epochs": epochs, "batch_size": batch_size,
              "n_examples": n}
    release = Encrypted(torch.cat(parts), torch.cat(mixed) if mixed else None)
    truth = TextHideTruth(sources=np.concatenate(sources), coefficients=np.concatenate(coefs),
                          mask_index=np.concatenate(mask_idx), masks=_pool_masks(th.pool, fresh),
                          public_index=np.concatenate(public) if public else None, epoch=np.concatenate(epoch_of),
                          pool_size=th.pool.m, n_examples=n)
    return release, truth, config


def observe_inference(X: Any, texthide: Any, *, repeats: int = 1) -> tuple[Observation, TextHideTruth]:
    """Inference encodings (k = 1: one pool mask per example, no mixing) of every row of ``X``, ``repeats`` times.

    Row ``r * n + i`` of the observation is repeat ``r`` of example ``i``
    (each repeat draws fresh mask choices). ``texthide`` must be built with
    ``record_details=True``.
    """
    import torch

    x = np.ascontiguousarray(as_vectors("X", X), dtype=np.float32)
    th = _check_texthide(texthide, x.shape[1])
    repeats = check_int("repeats", repeats, minimum=1)
    n = x.shape[0]
    parts, mask_idx, fresh = [], [], []
    th.last_details = None
    with torch.no_grad():
        for r in range(repeats):
            out = th.encrypt_inference(torch.from_numpy(x))
            d = _details(th)
            parts.append(out.detach().cpu().numpy())
            idx, masks = _mask_truth(th.pool, d, n, r * n)
            mask_idx.append(idx)
            if masks is not None:
                fresh.append(masks)
    config = {**th.config(), "observed": "inference (k=1: no mixing)", "repeats": repeats, "n_examples": n}
    obs = Observation(vectors=np.concatenate(parts), defense=config, source="defense")
    rows = np.tile(np.arange(n, dtype=np.int64), repeats)
    truth = TextHideTruth(sources=rows[:, None], coefficients=np.ones((n * repeats, 1)),
                          mask_index=np.concatenate(mask_idx), masks=_pool_masks(th.pool, fresh), public_index=None,
                          epoch=np.repeat(np.arange(repeats, dtype=np.int64), n), pool_size=th.pool.m, n_examples=n)
    return obs, truth
