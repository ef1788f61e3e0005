"""What every bench cell shares: defense keys, the defense itself, the attack's resources, query counts, the record.

Keys: every defense key (TextHide's pool and mixing, DP noise and sampling) comes from the OS CSPRNG unless the
bench was given ``key_seed`` (checks that two runs agree); the experiment seed selects queries and the attacker's
own choices only.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from veil.results import ResultRecord

__all__ = ["ALPHA", "AttackResources", "key_rng", "make_defense", "release_kind", "cell_queries", "bench_block",
           "finish"]

#: the false-positive rate of every test against the random rate in a bench cell
ALPHA = 0.05


def key_rng(cell: Any, purpose: str) -> int | None:
    """None (OS CSPRNG: the default) or, with the bench's ``key_seed``, an int derived from it and the cell."""
    if cell.config.key_seed is None:
        return None
    digest = hashlib.sha256(f"{cell.config.key_seed}|{cell.id}|{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def make_defense(cell: Any, data: Any, **options: Any) -> Any:
    """The cell's defense, built by the defense itself from the corpus' public data and a key source."""
    import warnings

    from veil.defenses.base import get_defense
    from veil.errors import PrivacyLeakWarning

    with warnings.catch_warnings():
        if cell.config.key_seed is not None:  # asked for; recorded in every record as "secret_randomness"
            warnings.simplefilter("ignore", PrivacyLeakWarning)
        return get_defense(cell.defense).bench_make(cell.setting, data, rng=key_rng(cell, "defense"), **options)


def release_kind(cell: Any) -> str:
    """The release kind of the cell's defense (:data:`veil.kinds.RELEASE_KINDS`), from its registry declaration."""
    from veil.defenses.base import get_defense

    return get_defense(cell.defense).releases


def cell_queries(cell: Any, available: int, what: str) -> int:
    """The cell's queries, or all ``available`` with a one-line warning (kept in the record and the outcome)."""
    n = cell.config.n_queries
    if n <= available:
        return n
    import warnings

    from veil.errors import DataWarning

    warnings.warn(f"{n} queries asked but only {available} {what}; all {available} attacked (queries are drawn "
                  f"without replacement)", DataWarning, stacklevel=3)
    return available


@dataclass
class AttackResources:
    """What an attack in one bench cell may use: its threat model picks from these."""

    index: Any
    seed: int
    data: Any
    cell: Any
    train_epochs: int = 5
    k: int | None = None
    _lazy: dict[str, Callable[[], Any]] = field(default_factory=dict, repr=False)

    @property
    def stats(self) -> Any:
        """Public statistics: a held-out in-domain sample (the corpus' dev + test split, never encrypted)."""
        from veil.attacks.texthide.observe import PublicStats

        d = self.data
        held = np.concatenate([d.splits["dev"], d.splits["test"]])
        return PublicStats.from_vectors(d.X[held], source=f"{d.name} dev+test ({len(held)} held-out texts)")

    def known_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(protected, original) pairs of texts the attacker owns, protected with the same key (RepRecon's
        known-plaintext threat model): public sentences, or the public train documents."""
        return self._lazy["known_pairs"]()

    def recovered_masks(self) -> np.ndarray:
        return self._lazy["recovered_masks"]()


def bench_block(**kw: Any) -> dict[str, Any]:
    """The record's ``extra["bench"]`` block: the given entries that are not None."""
    return {k: v for k, v in kw.items() if v is not None}


def _secret_note(cell: Any) -> str:
    if cell.config.key_seed is None:
        return "OS CSPRNG per cell (keys, mixing, DP noise); the seed selects queries and attacker choices only"
    return (f"SEEDED from key_seed={cell.config.key_seed} (reproducible, for checks; not private); the seed "
            "selects queries and attacker choices")


def finish(rec: ResultRecord, cell: Any, data: Any, start: float, bench: dict[str, Any]) -> ResultRecord:
    """Stamp a cell's record: bench method and cell id, the cell, the corpus, the key source, the bench block."""
    from veil.bench.data import encoder_backend

    rec.method, rec.experiment = "bench", cell.id
    # a defense without a secret key (a training objective) says so in its record's "randomness"
    rec.config.update({"cell": cell.to_dict(), "corpus": data.describe(), **encoder_backend(cell.corpus),
                       "secret_randomness": rec.config.get("randomness") or _secret_note(cell)})
    rec.extra["bench"] = bench
    rec.wall_time_s = time.perf_counter() - start
    return rec
