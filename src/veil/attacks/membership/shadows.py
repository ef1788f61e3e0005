"""What the membership attacks share: the base class, per-example statistics of logits, shadow models.

Shadow (and reference) models are trained by the attacker with the target's public recipe
(:func:`~veil.defenses.dpsgd.from_recipe`): the same defense (plain or DP-SGD at the same epsilon), the same
hyperparameters and initial weights, on data the attacker chooses (its population sample, and for online attacks
a random half of the candidates). Their lots and noise come from the attacker's own seed: a shadow protects
nothing, so the seeded-DP-SGD warning is silenced there and only there.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np

from veil.attacks.base import Attack, ThreatModel
from veil.errors import InvalidParameterError, InvalidTypeError

__all__ = ["MembershipAttack", "log_true_prob", "logit_confidence", "train_shadow", "BLACK_BOX"]

BLACK_BOX = ThreatModel(
    observes="black-box queries of the released model (logits on the candidates and on inputs of the attacker's "
             "choosing), the candidates with their labels, the public training recipe and training-set size",
    needs=("a public population sample from the same distribution, disjoint from the candidates",),
    trains=True)


def log_true_prob(logits: np.ndarray, y: np.ndarray) -> np.ndarray:
    """log softmax(logits)[y], per row (stable)."""
    z = np.asarray(logits, dtype=np.float64)
    top = z.max(axis=1, keepdims=True)
    lse = (top + np.log(np.exp(z - top).sum(axis=1, keepdims=True)))[:, 0]
    return z[np.arange(len(z)), y] - lse


def logit_confidence(logits: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The logit-scaled confidence log(p_y / (1 - p_y)) = z_y - logsumexp_{j != y} z_j (Carlini et al. 2022,
    Sec. IV-C), computed without forming p_y (no overflow when the model is confident)."""
    z = np.asarray(logits, dtype=np.float64)
    rows = np.arange(len(z))
    other = z.copy()
    other[rows, y] = -np.inf
    top = other.max(axis=1, keepdims=True)
    lse = (top + np.log(np.exp(other - top).sum(axis=1, keepdims=True)))[:, 0]
    return z[rows, y] - lse


def train_shadow(recipe: Any, X: np.ndarray, y: np.ndarray, seed: int) -> Any:
    """A model trained with the target's public ``recipe`` on ``(X, y)``; its lots and noise from ``seed`` (the
    attacker's own model: nothing private depends on that randomness)."""
    from veil.defenses.dpsgd import from_recipe
    from veil.errors import PrivacyLeakWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # a seeded shadow: reproducible, protects nothing
        defense = from_recipe(recipe, rng=int(seed))
        return defense.train((X, y))  # (TextHide draws its seeded pool here)


def check_population(population: Any) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(population, tuple) or len(population) != 2:
        raise InvalidTypeError("population must be a pair (X, y): public embeddings (n, d) and their labels (n,)")
    X = np.ascontiguousarray(population[0], dtype=np.float32)
    y = np.asarray(population[1])
    if X.ndim != 2 or y.shape != (len(X),) or y.dtype.kind not in "iu":
        raise InvalidTypeError(f"population must be embeddings (n, d) and integer labels (n,), got {X.shape} and "
                               f"{y.shape} ({y.dtype})")
    return X, y.astype(np.int64)


class MembershipAttack(Attack):
    """Base of the attacks that observe a released ``model``: ``run(ModelAccess) -> MembershipScores``."""

    abstract: ClassVar[bool] = True
    observes: ClassVar[str] = "model"
    threat: ClassVar[ThreatModel] = BLACK_BOX
    bench_cell: ClassVar[str] = "veil.bench.cells.model:membership_cell"

    #: how many times each input is queried, logits averaged: 1 for a deterministic model; more for a model that
    #: answers with fresh randomness every time (a TextHide-trained head masks each query with a random pool mask),
    #: whose noise an attacker averages away by asking again. Shadow and reference models are queried alike.
    queries: int = 1

    def _set_queries(self, queries: Any) -> None:
        from veil.validation import check_int

        self.queries = check_int("queries", queries, minimum=1, hint="; 1 queries each input once")

    def _ask(self, query: Any, X: Any = None) -> np.ndarray:
        """``query(X)`` (``query()`` when X is None), averaged over :attr:`queries` calls."""
        calls = [query() if X is None else query(X) for _ in range(self.queries)]
        return np.mean(calls, axis=0) if self.queries > 1 else calls[0]

    def config(self) -> dict[str, Any]:
        return {**super().config(), **({"queries": self.queries} if self.queries != 1 else {})}

    def _access(self, observation: Any) -> Any:
        from veil.attacks.membership.observe import ModelAccess

        if not isinstance(observation, ModelAccess):
            raise InvalidTypeError(f"a membership attack observes a ModelAccess (black-box queries of the released "
                                   f"model), not {type(observation).__name__}")
        return observation

    @staticmethod
    def _subset(gen: np.random.Generator, n: int, size: int, what: str) -> np.ndarray:
        if size > n:
            raise InvalidParameterError(f"a shadow model trains on {size} examples (the target's training-set size) "
                                        f"but the {what} holds {n}; give a larger population")
        return np.sort(gen.choice(n, size=size, replace=False))
