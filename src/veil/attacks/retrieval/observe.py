"""What the retrieval attacker sees: query vectors, undefended or protected by a veil defense.

Three ways to build an :class:`~veil.attacks.base.Observation`:

* :func:`observe_original`: the original representations (the paper's
  "Baseline", (m, k) = (0, 1): the upper bound of leakage);
* :func:`protect` / :func:`protect_with_texthide`: a defense applied to the
  query vectors. TextHide mixes each query with k-1 other private examples of
  the SAME batch (the paper's RSS query is "the TextHide representation of an
  input x in the corpus", produced as in training, Alg. 1). Queries are cut
  into batches of about ``batch_size`` in the given order (a short remainder is
  spread over the batches, never dropped), and row i of the output is the
  mixture whose first slot (pi_1 = identity) holds query i. Mix-only is
  ``m=0, k=4``; TextHide ``m=256, k=4``;
* :func:`observe`: any precomputed array (another defense, another tool).

:func:`sample_queries` draws the queries' index positions (the ground truth
kept by the evaluator, not shown to the attacker) without replacement.

Ground truth is kept apart from what the attacker sees.
:func:`protect_with_truth` and :func:`protect_with_texthide_truth` return a
:class:`Protected` pair ``(observation, truth)``: the
:class:`~veil.attacks.base.Observation` (vectors and public configuration,
the only thing an attack's ``retrieve``/``attack`` takes) and a
:class:`MixTruth` (which private examples, coefficients and pool masks made
each encoding), which only scoring (:func:`~veil.attacks.retrieval.rss.evaluate_retrieval`)
reads. An Observation has no field that could carry a MixTruth or the
defense's :class:`~veil.defenses.texthide.TextHideDetails`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from veil.attacks.base import Observation
from veil.validation import as_vectors
from veil.validation import check_int
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.random import RngLike, as_generator

__all__ = ["observe", "observe_original", "protect", "protect_with_texthide", "sample_queries", "MixTruth",
           "Protected", "protect_with_truth", "protect_with_texthide_truth"]


def _frozen(name: str, x: Any, dtype: Any, ndim: int) -> np.ndarray:
    a = np.array(x, dtype=dtype, copy=True)
    if a.ndim != ndim:
        raise DataFormatError(f"{name} must have {ndim} dimension(s), got shape {a.shape}")
    a.flags.writeable = False
    return a


@dataclass(frozen=True, repr=False)
class MixTruth:
    """Ground truth of a protected batch of queries: which private examples made each encoding. SCORING ONLY.

    Attributes (read-only arrays; n = number of encodings = number of queries)
    ----------------------------------------------------------------------------
    sources: int64 (n, kp): the QUERY POSITIONS (rows of the vectors that were
        protected) of every private source of each encoding; slot 0 is the
        query itself (``sources[:, 0] == arange(n)``), slots 1.. its mixing
        partners (TextHide's pi_2..pi_k). Map them to index ids with
        ``query_ids[sources]`` (:meth:`index_ids`).
    coefficients: float64 (n, k): the mixing coefficients, private slots first,
        then public slots (inter mode); each row sums to 1.
    mask_ids: int64 (n,): which pool mask each encoding got, or None (m=0: no
        mask; m=None: a fresh mask per encoding).
    public_rows: int64 (n, k - kp): rows of the public set (inter mode), or None.

    Part of the defense's secret key; never give it to an attack, never log it
    (``repr`` shows shapes only).
    """

    sources: np.ndarray
    coefficients: np.ndarray
    mask_ids: np.ndarray | None = None
    public_rows: np.ndarray | None = None

    def __post_init__(self) -> None:
        src = _frozen("sources", self.sources, np.int64, 2)
        n = src.shape[0]
        if src.shape[1] < 1:
            raise DataFormatError("sources needs at least one slot (slot 0 = the query itself)")
        if n and (src.min() < 0 or src.max() >= n):
            raise DataFormatError(f"sources must be query positions in [0, {n - 1}]")
        if not np.array_equal(src[:, 0], np.arange(n)):
            raise DataFormatError("sources[:, 0] must be arange(n): slot 0 of encoding i is query i itself")
        coef = _frozen("coefficients", self.coefficients, np.float64, 2)
        if coef.shape[0] != n or coef.shape[1] < src.shape[1]:
            raise DataFormatError(f"coefficients must have shape ({n}, k >= {src.shape[1]}), got {coef.shape}")
        object.__setattr__(self, "sources", src)
        object.__setattr__(self, "coefficients", coef)
        if self.mask_ids is not None:
            ids = _frozen("mask_ids", self.mask_ids, np.int64, 1)
            if len(ids) != n:
                raise DataFormatError(f"mask_ids must have one entry per encoding ({n}), got {len(ids)}")
            object.__setattr__(self, "mask_ids", ids)
        if self.public_rows is not None:
            rows = _frozen("public_rows", self.public_rows, np.int64, 2)
            if rows.shape != (n, coef.shape[1] - src.shape[1]):
                raise DataFormatError(f"public_rows must have shape ({n}, {coef.shape[1] - src.shape[1]}), "
                                      f"got {rows.shape}")
            object.__setattr__(self, "public_rows", rows)

    @classmethod
    def unmixed(cls, n: int) -> MixTruth:
        """The truth of ``n`` undefended (or masked-only, unrecorded) encodings: each is its own only source."""
        n = check_int("n", n, minimum=0)
        return cls(sources=np.arange(n, dtype=np.int64)[:, None], coefficients=np.ones((n, 1)))

    def __len__(self) -> int:
        return int(self.sources.shape[0])

    @property
    def private_slots(self) -> int:
        return int(self.sources.shape[1])

    @property
    def k(self) -> int:
        return int(self.coefficients.shape[1])

    def index_ids(self, query_ids: Any) -> np.ndarray:
        """(n, kp) index ids of every private source, given the index id of each query (``query_ids[sources]``)."""
        q = np.asarray(query_ids)
        if q.ndim != 1 or q.dtype.kind not in "iu" or len(q) != len(self):
            raise DataFormatError(f"query_ids must be a 1-D integer array with one id per encoding ({len(self)}), "
                                  f"got {q.dtype} {q.shape}")
        return q.astype(np.int64)[self.sources]

    def __repr__(self) -> str:  # shapes only: the values are part of a secret key
        return (f"MixTruth(n={len(self)}, k={self.k}, private_slots={self.private_slots}, "
                f"masked={self.mask_ids is not None}, inter={self.public_rows is not None})")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("MixTruth is ground truth for scoring (part of the defense's key) and is not pickled")


class Protected(NamedTuple):
    """What :func:`protect_with_truth` returns: the attacker's view and, apart, the scorer's ground truth."""

    observation: Observation
    truth: MixTruth


def observe(vectors: Any, *, defense: Mapping[str, Any] | None = None) -> Observation:
    """An observation of precomputed vectors; ``defense`` describes (publicly) how they were made."""
    return Observation(vectors=vectors, defense=dict(defense or {"defense": "unknown"}), source="precomputed")


def observe_original(vectors: Any) -> Observation:
    """The undefended baseline: the attacker sees the original representations."""
    return Observation(vectors=vectors, defense={"defense": "none", "m": 0, "k": 1}, source="original")


def _batches(n: int, batch_size: int, minimum: int) -> list[np.ndarray]:
    if n < minimum:
        raise InvalidParameterError(f"{n} query vectors but the defense mixes {minimum} examples per encryption; "
                                    f"pass at least {minimum} queries")
    count = max(1, min(-(-n // batch_size), n // max(minimum, 1)))
    return np.array_split(np.arange(n), count)


def _encrypt_batches(x: np.ndarray, defense: Any, batch_size: int,
                     record: bool) -> tuple[np.ndarray, list[tuple[np.ndarray, Any]]]:
    """Encrypt ``x`` batch by batch; with ``record``, also each batch's (positions, defense.last_details)."""
    import torch

    minimum = int(getattr(defense, "min_batch_size", 1))
    parts, details = [], []
    with torch.no_grad():
        for idx in _batches(len(x), batch_size, minimum):
            if record:
                defense.last_details = None  # so a stale key from an earlier call can never be read as this one's
            out = defense.encrypt(torch.from_numpy(x[idx]))
            e = out[0] if isinstance(out, tuple) else out
            parts.append(e.detach().cpu().numpy())
            if record:
                d = getattr(defense, "last_details", None)
                if d is None or int(d.private_index.shape[0]) != len(idx):
                    raise InvalidParameterError(
                        "the defense did not record its mixing key; build it with TextHide(..., "
                        "record_details=True) or use protect_with_texthide_truth")
                details.append((idx, d))
    return np.concatenate(parts), details


def _truth_from_details(n: int, details: list[tuple[np.ndarray, Any]]) -> MixTruth:
    first = details[0][1]
    kp, k = int(first.private_index.shape[1]), int(first.coefficients.shape[1])
    sources = np.empty((n, kp), dtype=np.int64)
    coefficients = np.empty((n, k), dtype=np.float64)
    masked = first.mask_index is not None
    inter = first.public_index is not None
    mask_ids = np.empty(n, dtype=np.int64) if masked else None
    public_rows = np.empty((n, k - kp), dtype=np.int64) if inter else None
    for idx, d in details:
        sources[idx] = idx[d.private_index.cpu().numpy()]
        coefficients[idx] = d.coefficients.detach().cpu().double().numpy()
        if masked:
            mask_ids[idx] = d.mask_index.cpu().numpy()
        if inter:
            public_rows[idx] = d.public_index.cpu().numpy()
    return MixTruth(sources=sources, coefficients=coefficients, mask_ids=mask_ids, public_rows=public_rows)


def protect(vectors: Any, defense: Any, *, batch_size: int = 64) -> Observation:
    """Apply a veil defense to query vectors, batch by batch, and return what the attacker sees.

    ``defense``: an object with ``encrypt(e)`` (TextHide: mixing within each
    batch; its ``min_batch_size`` is respected) and ``config()``, or a plain
    callable mapping an (n, d) float32 array to protected vectors (recorded as
    ``{"defense": "callable"}``). :func:`protect_with_truth` also returns the
    ground truth, apart.
    """
    x = np.ascontiguousarray(as_vectors("vectors", vectors), dtype=np.float32)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    if hasattr(defense, "encrypt"):
        protected, _ = _encrypt_batches(x, defense, batch_size, record=False)
        return _defense_observation(protected, defense, batch_size)
    if callable(defense):
        out = as_vectors("defense(vectors)", np.asarray(defense(x)))
        if out.shape[0] != x.shape[0]:
            raise InvalidParameterError(f"the defense returned {out.shape[0]} vectors for {x.shape[0]} inputs")
        return Observation(vectors=out, defense={"defense": "callable"}, source="defense")
    raise InvalidTypeError(f"defense must have an encrypt() method (e.g. veil TextHide) or be a callable on arrays, "
                           f"not {type(defense).__name__}")


def _defense_observation(protected: np.ndarray, defense: Any, batch_size: int) -> Observation:
    config = defense.config() if hasattr(defense, "config") else {"defense": type(defense).__name__}
    return Observation(vectors=protected, defense={**config, "query_batch_size": batch_size}, source="defense")


def protect_with_truth(vectors: Any, defense: Any, *, batch_size: int = 64) -> Protected:
    """:func:`protect`, plus the ground truth kept apart: ``Protected(observation, truth)``.

    ``defense`` must record its one-time key (a veil ``TextHide`` built with
    ``record_details=True``). The :class:`MixTruth` maps every encoding to the
    query positions of its private sources (slot 0 = the query), its
    coefficients and its pool mask id. Give ``observation`` to the attack and
    ``truth`` to :func:`~veil.attacks.retrieval.rss.evaluate_retrieval` only.
    """
    x = np.ascontiguousarray(as_vectors("vectors", vectors), dtype=np.float32)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    if not hasattr(defense, "encrypt") or not hasattr(defense, "last_details"):
        raise InvalidTypeError("protect_with_truth needs a defense that records its mixing key (a veil TextHide "
                               f"with record_details=True), not {type(defense).__name__}; use protect() otherwise")
    protected, details = _encrypt_batches(x, defense, batch_size, record=True)
    return Protected(_defense_observation(protected, defense, batch_size), _truth_from_details(len(x), details))


def experiment_texthide(k: int, pool: Any, rng: RngLike, *, record_details: bool = False) -> Any:
    """A TextHide whose MIXING follows the experiment's ``rng`` (the pool stays OS-CSPRNG secret).

    Attack experiments seed the defense's mixing on purpose, so tables are
    reproducible; the record says so (``mixing_rng: seeded``). The
    PrivacyLeakWarning a seeded TextHide gives is meant for releases and is
    silenced here only. ``record_details`` keeps each call's key for scoring
    (:func:`protect_with_texthide_truth`).
    """
    import warnings

    from veil.defenses.texthide import TextHide
    from veil.errors import PrivacyLeakWarning

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="TextHide with a seeded rng", category=PrivacyLeakWarning)
        return TextHide(k=k, pool=pool, rng=rng, record_details=record_details)


def _texthide_for(vectors: Any, m: int | None, k: int, rng: RngLike, texthide: Any, record: bool) -> Any:
    from veil.defenses.texthide import TextHide

    if texthide is None:
        x = as_vectors("vectors", vectors)
        from veil.defenses.defaults import mask_pool

        return experiment_texthide(k, mask_pool(m, x.shape[1]), rng, record_details=record)
    if not isinstance(texthide, TextHide):
        raise InvalidTypeError(f"texthide must be a veil TextHide, not {type(texthide).__name__}")
    if texthide.k != k or texthide.pool.m != m:
        raise InvalidParameterError(f"texthide has (m, k) = ({texthide.pool.m}, {texthide.k}) but ({m}, {k}) "
                                    "was asked for")
    return texthide


def protect_with_texthide(vectors: Any, m: int | None, k: int, *, rng: RngLike = None, batch_size: int = 64,
                          texthide: Any = None) -> Observation:
    """Query vectors encrypted with (m, k)-TextHide (intra), each mixed with k-1 others of its batch.

    A fresh secret :class:`~veil.defenses.texthide.MaskPool` (OS CSPRNG) is
    drawn unless ``texthide`` (a built ``TextHide``) is passed, e.g. to reuse one
    client's pool for RepRecon's training pairs and its queries. ``rng`` seeds
    only the mixing (permutations, coefficients, mask choice), never the masks.
    ``k=1`` is inference-time TextHide (one pool mask per vector, no mixing).
    """
    return protect(vectors, _texthide_for(vectors, m, k, rng, texthide, False), batch_size=batch_size)


def protect_with_texthide_truth(vectors: Any, m: int | None, k: int, *, rng: RngLike = None, batch_size: int = 64,
                                texthide: Any = None) -> Protected:
    """:func:`protect_with_texthide` plus its ground truth, apart: ``Protected(observation, truth)``.

    A passed ``texthide`` must have been built with ``record_details=True``.
    """
    return protect_with_truth(vectors, _texthide_for(vectors, m, k, rng, texthide, True), batch_size=batch_size)


def sample_queries(n_index: int, n_queries: int, *, rng: RngLike = None, candidates: Any = None) -> np.ndarray:
    """``n_queries`` distinct index positions drawn uniformly (from ``candidates`` if given, e.g. the dev split).

    ``rng`` None = OS entropy; an int seed makes the sample reproducible
    (experiments). Asking for more queries than candidates is an error.
    """
    n_index = check_int("n_index", n_index, minimum=1)
    n_queries = check_int("n_queries", n_queries, minimum=1)
    pool = np.arange(n_index) if candidates is None else np.unique(np.asarray(candidates, dtype=np.int64))
    if len(pool) and (pool.min() < 0 or pool.max() >= n_index):
        raise InvalidParameterError(f"candidates must be index positions in [0, {n_index - 1}]")
    if n_queries > len(pool):
        raise InvalidParameterError(f"{n_queries} queries asked but only {len(pool)} candidate examples; queries "
                                    "are drawn without replacement, so ask for at most that many")
    # random order (not sorted): TextHide mixes each query with its batch neighbours
    return as_generator(rng).choice(pool, size=n_queries, replace=False).astype(np.int64)
