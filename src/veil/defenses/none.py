"""The undefended baseline: the representation is released as it is.

Every benchmark compares a defense with what an attacker gets without one, on the same corpus, queries and
attacks; :class:`NoDefense` is that baseline. It is a representation transform (the identity) that serves every
task, so the bench runs every vector attack against it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from veil.defenses.base import Defense, Guarantee

__all__ = ["NoDefense"]


class NoDefense(Defense):
    """The identity: ``protect(X)`` returns ``X`` unchanged. No guarantee of any kind."""

    name = "none"
    guarantee = Guarantee("none", "no defense: the representation is released as it is")
    kind = "representation"
    releases = ("vectors",)
    tasks = ("sentence-classification", "document-classification")

    def protect(self, X: Any) -> np.ndarray:
        """``X`` as a float32 array, unchanged."""
        return np.asarray(X, dtype=np.float32)

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        return [{}]

    @classmethod
    def bench_make(cls, setting: dict[str, Any], data: Any, rng: Any = None, **options: Any) -> "NoDefense":
        return cls()
