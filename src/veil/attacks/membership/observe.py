"""What a membership attacker observes of a released model (release kind ``model``), and the game it plays.

:class:`ModelAccess` is the observation: black-box queries of the released model (logits for any embeddings the
attacker chooses: the candidates, population samples), the candidate examples themselves (embeddings and labels),
the target's public training recipe (registry name and hyperparameters, :meth:`~veil.defenses.dpsgd.mechanism.
_Trainer.recipe`) and its training-set size. It never holds the weights, the training set or which candidates
were trained on.

:class:`MembershipTruth` is what only the scorer gets: which candidates are members. :func:`membership_game` draws
a game from a pool of examples with the experiment's seed: the target's training set (the members), as many
non-members from the same pool, and a disjoint public population the attacker may use; the defense's own
randomness (lots, noise) is never drawn from that seed.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

__all__ = ["ModelAccess", "MembershipTruth", "MembershipGame", "membership_game"]


def _frozen(a: Any, dtype: Any) -> np.ndarray:
    out = np.array(a, dtype=dtype, copy=True)
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class ModelAccess:
    """Black-box access to a released classifier, the candidates and the public recipe (module docstring).

    ``query``: embeddings (n, d) -> logits (n, classes) of the released model; ``X`` (m, d) / ``y`` (m,): the
    candidate examples; ``recipe``: ``{"defense": name, "params": {...}}`` (JSON-ready, public); ``n_train``: the
    size of the target's training set (public: DP-SGD's sampling rate is set by it).
    """

    query: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    X: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    recipe: Mapping[str, Any] = field(default_factory=dict)
    n_train: int = 0

    def __post_init__(self) -> None:
        if not callable(self.query):
            raise InvalidTypeError("query must be a callable embeddings (n, d) -> logits (n, classes)")
        X = np.asarray(self.X)
        y = np.asarray(self.y)
        if X.ndim != 2 or y.shape != (len(X),):
            raise DataFormatError(f"candidates must be embeddings (m, d) and labels (m,), got {X.shape} and {y.shape}")
        if y.dtype.kind not in "iu":
            raise InvalidTypeError(f"candidate labels must be integer class ids, got dtype {y.dtype}")
        object.__setattr__(self, "X", _frozen(X, np.float32))
        object.__setattr__(self, "y", _frozen(y, np.int64))
        if not isinstance(self.recipe, Mapping) or not isinstance(self.recipe.get("params"), Mapping):
            raise InvalidTypeError("recipe must be {'defense': name, 'params': {...}}, the target's public recipe")
        from veil.attacks.base import _not_plain

        bad = _not_plain(dict(self.recipe), "recipe")
        if bad is not None:
            raise InvalidTypeError(f"{bad}: a recipe is public configuration only (strings, numbers, lists)")
        object.__setattr__(self, "recipe", MappingProxyType(dict(self.recipe)))
        if isinstance(self.n_train, bool) or not isinstance(self.n_train, numbers.Integral) or self.n_train < 1:
            raise InvalidParameterError(f"n_train must be the target's training-set size (an int >= 1), got "
                                        f"{self.n_train!r}")

    @classmethod
    def of(cls, model: Any, defense: Any, X: Any, y: Any) -> "ModelAccess":
        """The access an attacker gets to ``model`` (a :class:`~veil.defenses.dpsgd.TrainedModel`) released by
        ``defense``: its logits only (the closure hides the weights), with the candidates ``(X, y)``."""
        return cls(query=model.logits, X=X, y=y, recipe=defense.recipe(), n_train=int(model.n_train))

    def __len__(self) -> int:
        return int(len(self.X))

    def logits(self, X: np.ndarray | None = None) -> np.ndarray:
        """The target's logits on ``X`` (default: the candidates)."""
        out = np.asarray(self.query(self.X if X is None else X), dtype=np.float64)
        n = len(self.X) if X is None else len(X)
        if out.ndim != 2 or len(out) != n:
            raise DataFormatError(f"the model's query returned shape {out.shape}, not ({n}, classes)")
        return out

    def describe(self) -> dict[str, Any]:
        """JSON-ready description (no arrays)."""
        from veil.attacks.base import _jsonable

        return {"candidates": len(self), "n_train": int(self.n_train), "recipe": _jsonable(dict(self.recipe))}


@dataclass(frozen=True)
class MembershipTruth:
    """What only the scorer sees: ``members[i]`` is True when candidate i was in the target's training set."""

    members: np.ndarray

    def __post_init__(self) -> None:
        m = np.asarray(self.members)
        if m.ndim != 1 or m.dtype != np.bool_:
            raise InvalidTypeError(f"members must be a 1-d boolean array, got dtype {m.dtype}, shape {m.shape}")
        if m.all() or not m.any():
            raise InvalidParameterError("the candidates must hold both members and non-members to score an attack")
        object.__setattr__(self, "members", _frozen(m, np.bool_))


@dataclass(frozen=True)
class MembershipGame:
    """One draw of the game, as indices into the pool's array: ``train`` (the target's training set = the members),
    ``candidates`` (members and non-members, shuffled), ``truth`` (which candidates are members) and ``population``
    (public examples, disjoint from both, for the attacker's shadow and reference models)."""

    train: np.ndarray
    candidates: np.ndarray
    truth: MembershipTruth
    population: np.ndarray


def membership_game(pool: Any, *, members: int, population: int | None = None, rng: Any = 0,
                    exclude_members: bool = False) -> MembershipGame:
    """Draw a game from ``pool`` (indices) with the experiment's ``rng`` (an int seed: games are reproducible).

    ``members`` examples are the target's training set and as many others the non-members; ``population`` (None:
    all the rest) go to the attacker. ``exclude_members=True`` draws the calibration game: the target trains on
    ``members`` examples outside the candidates (it saw none of them), the candidates' "member" half is a random
    label, and any attack must score AUC 0.5 in expectation.
    """
    from veil.random import as_generator
    from veil.validation import check_int

    pool = np.asarray(pool)
    if pool.ndim != 1 or pool.dtype.kind not in "iu":
        raise InvalidTypeError("pool must be a 1-d array of integer indices")
    members = check_int("members", members, minimum=1)
    need = (3 if exclude_members else 2) * members
    rest = len(pool) - need
    if population is not None:
        population = check_int("population", population, minimum=1)
    if rest < (population or 1):
        raise InvalidParameterError(f"a pool of {len(pool)} examples cannot hold {need} for the game and "
                                    f"{population or 1} for the population; lower members (now {members})")
    gen = as_generator(rng)
    perm = pool[gen.permutation(len(pool))]
    cand = perm[:2 * members]
    is_member = np.zeros(2 * members, dtype=bool)
    is_member[:members] = True
    train = perm[2 * members:3 * members] if exclude_members else cand[:members]
    start = need
    pop = perm[start:] if population is None else perm[start:start + population]
    order = gen.permutation(2 * members)
    return MembershipGame(train=np.sort(train), candidates=cand[order], truth=MembershipTruth(is_member[order]),
                          population=np.sort(pop))
