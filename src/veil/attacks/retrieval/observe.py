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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from veil.attacks.base import Observation, as_vectors
from veil.defenses.base import check_int
from veil.errors import InvalidParameterError, InvalidTypeError
from veil.random import RngLike, as_generator

__all__ = ["observe", "observe_original", "protect", "protect_with_texthide", "sample_queries"]


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


def protect(vectors: Any, defense: Any, *, batch_size: int = 64) -> Observation:
    """Apply a veil defense to query vectors, batch by batch, and return what the attacker sees.

    ``defense``: an object with ``encrypt(e)`` (TextHide: mixing within each
    batch; its ``min_batch_size`` is respected) and ``config()``, or a plain
    callable mapping an (n, d) float32 array to protected vectors (recorded as
    ``{"defense": "callable"}``).
    """
    x = np.ascontiguousarray(as_vectors("vectors", vectors), dtype=np.float32)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    if hasattr(defense, "encrypt"):
        import torch

        minimum = int(getattr(defense, "min_batch_size", 1))
        parts = []
        with torch.no_grad():
            for idx in _batches(len(x), batch_size, minimum):
                out = defense.encrypt(torch.from_numpy(x[idx]))
                e = out[0] if isinstance(out, tuple) else out
                parts.append(e.detach().cpu().numpy())
        config = defense.config() if hasattr(defense, "config") else {"defense": type(defense).__name__}
        return Observation(vectors=np.concatenate(parts), defense={**config, "query_batch_size": batch_size},
                           source="defense")
    if callable(defense):
        out = as_vectors("defense(vectors)", np.asarray(defense(x)))
        if out.shape[0] != x.shape[0]:
            raise InvalidParameterError(f"the defense returned {out.shape[0]} vectors for {x.shape[0]} inputs")
        return Observation(vectors=out, defense={"defense": "callable"}, source="defense")
    raise InvalidTypeError(f"defense must have an encrypt() method (e.g. veil TextHide) or be a callable on arrays, "
                           f"not {type(defense).__name__}")


def experiment_texthide(k: int, pool: Any, rng: RngLike) -> Any:
    """A TextHide whose MIXING follows the experiment's ``rng`` (the pool stays OS-CSPRNG secret).

    Attack experiments seed the defense's mixing on purpose, so tables are
    reproducible; the record says so (``mixing_rng: seeded``). The
    PrivacyLeakWarning a seeded TextHide gives is meant for releases and is
    silenced here only.
    """
    import warnings

    from veil.defenses.texthide import TextHide
    from veil.errors import PrivacyLeakWarning

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="TextHide with a seeded rng", category=PrivacyLeakWarning)
        return TextHide(k=k, pool=pool, rng=rng)


def protect_with_texthide(vectors: Any, m: int | None, k: int, *, rng: RngLike = None, batch_size: int = 64,
                          texthide: Any = None) -> Observation:
    """Query vectors encrypted with (m, k)-TextHide (intra), each mixed with k-1 others of its batch.

    A fresh secret :class:`~veil.defenses.texthide.MaskPool` (OS CSPRNG) is
    drawn unless ``texthide`` (a built ``TextHide``) is passed, e.g. to reuse one
    client's pool for RepRecon's training pairs and its queries. ``rng`` seeds
    only the mixing (permutations, coefficients, mask choice), never the masks.
    """
    from veil.defenses.texthide import MaskPool, TextHide

    if texthide is None:
        x = as_vectors("vectors", vectors)
        texthide = experiment_texthide(k, MaskPool(m, x.shape[1]), rng)
    elif not isinstance(texthide, TextHide):
        raise InvalidTypeError(f"texthide must be a veil TextHide, not {type(texthide).__name__}")
    elif texthide.k != k or texthide.pool.m != m:
        raise InvalidParameterError(f"texthide has (m, k) = ({texthide.pool.m}, {texthide.k}) but ({m}, {k}) "
                                    "was asked for")
    return protect(vectors, texthide, batch_size=batch_size)


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
