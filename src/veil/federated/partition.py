"""Split a labelled training set among federated clients: IID, or per-class Dirichlet(alpha) non-IID.

The non-IID split is the standard label-skew partition (Hsu, Qi and Brown
2019, "Measuring the effects of non-identical data distribution for federated
visual classification"; the same semantics as flwr-datasets'
``DirichletPartitioner``): for every class, proportions over the clients are
drawn from Dirichlet(alpha, ..., alpha) and that class's examples are split by
them. Small alpha gives clients dominated by one class; large alpha tends to
IID. A draw where some client gets fewer than ``min_size`` examples is redrawn,
up to ``tries`` times (100), then :class:`~veil.errors.InvalidParameterError` says
what to change. TextHide needs ``min_size >= batch_size >= k``: it mixes k
examples within one batch of one client.

The split is seeded (an experiment seed, not a secret: which client holds
which example is the data owners' business, not a key).
"""

from __future__ import annotations

import numpy as np

from veil.errors import InvalidParameterError

__all__ = ["partition_indices"]


def partition_indices(labels: np.ndarray, num_partitions: int, *, alpha: float = 0.0, seed: int = 0,
                      min_size: int = 1, tries: int = 100) -> list[np.ndarray]:
    """Indices into ``labels`` for each of ``num_partitions`` clients (sorted; disjoint; together all of them).

    ``alpha == 0``: IID (a seeded shuffle cut into near-equal parts). ``alpha > 0``: per-class Dirichlet.
    """
    labels = np.asarray(labels)
    n = len(labels)
    if num_partitions < 1:
        raise InvalidParameterError(f"num_partitions must be >= 1, got {num_partitions}")
    if n < num_partitions * min_size:
        raise InvalidParameterError(f"{n} examples cannot give {num_partitions} clients at least {min_size} each; "
                                    "use fewer clients, a smaller batch size, or more training data")
    rng = np.random.default_rng(seed)
    if alpha == 0:
        order = rng.permutation(n)
        return [np.sort(part) for part in np.array_split(order, num_partitions)]
    if alpha < 0:
        raise InvalidParameterError(f"alpha must be > 0 (0 = IID), got {alpha}")
    classes = np.unique(labels)
    sizes: list[int] = []
    for _ in range(tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(num_partitions)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(labels == c))
            proportions = rng.dirichlet(np.full(num_partitions, float(alpha)))
            cuts = (np.cumsum(proportions)[:-1] * len(idx)).round().astype(int)
            for client, chunk in enumerate(np.split(idx, cuts)):
                parts[client].append(chunk)
        out = [np.sort(np.concatenate(p)) for p in parts]
        sizes = [len(p) for p in out]
        if min(sizes) >= min_size:
            return out
    raise InvalidParameterError(f"Dirichlet(alpha={alpha}) gave a client fewer than {min_size} examples in {tries} "
                                f"draws (last sizes {sizes}); raise alpha, use fewer clients or a smaller batch size")
