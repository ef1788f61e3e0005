"""The undefended baseline: the representation is released as it is.

Every benchmark compares a defense with what an attacker gets without one, on the same corpus, queries and
attacks; :class:`NoDefense` is that baseline. It is a representation transform (the identity) that serves every
task, so the bench runs every vector attack against it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from veil.defenses.base import Guarantee, VectorsDefense

__all__ = ["NoDefense", "is_no_defense"]


def is_no_defense(setting: Any) -> bool:
    """Whether a defense setting is the identity: TextHide with no masks and no mixing, (m, k) = (0, 1), is no
    defense (Huang et al. 2020's baseline rows). The one place this rule is stated; ``setting`` is a mapping
    with ``m`` and ``k`` (or a (m, k) pair)."""
    m, k = (setting.get("m"), setting.get("k")) if hasattr(setting, "get") else tuple(setting)
    return not isinstance(m, (str, bool)) and not isinstance(k, (str, bool)) and m == 0 and k == 1


class NoDefense(VectorsDefense):
    """The identity: ``protect(X)`` returns ``X`` unchanged. No guarantee of any kind.

    It is the baseline of every release kind: the bench pairs it with the attacks of every corpus it serves."""

    name = "none"
    undefended = True
    guarantee = Guarantee("none", "no defense: the representation is released as it is")
    tasks = ("sentence-classification", "document-classification")
    paper_attack = "rss"  # the baseline row of Huang et al. 2020, Tables 3-4

    def protect(self, X: Any) -> np.ndarray:
        """``X`` as a float32 array, unchanged."""
        return np.asarray(X, dtype=np.float32)

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        return [{}]

    @classmethod
    def bench_make(cls, setting: dict[str, Any], data: Any, rng: Any = None, **options: Any) -> "NoDefense":
        return cls()
