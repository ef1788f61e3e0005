"""What an attacker of released text sees: the texts, and the defense's public description.

Threat model of every attack on the ``text`` release kind: the attacker holds the released (rewritten) texts and
knows the mechanism (Kerckhoffs: which redactor, which operator, which entity types), never the owner's secret
(hash key, pseudonym mapping, DP noise) nor the original values. :class:`ReleasedText` holds only that; the
originals reach each attack's scorer separately.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from veil.errors import DataFormatError, InvalidTypeError

__all__ = ["ReleasedText", "observe_text"]


@dataclass(frozen=True)
class ReleasedText:
    """Released texts (one per document of the release) and the defense's public configuration."""

    texts: tuple[str, ...]
    defense: Mapping[str, Any] = field(default_factory=lambda: {"defense": "none"})

    def __post_init__(self) -> None:
        if isinstance(self.texts, str) or not isinstance(self.texts, Sequence):
            raise InvalidTypeError("texts must be a sequence of strings")
        texts = tuple(self.texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise DataFormatError(f"texts[{i}] is a {type(t).__name__}, not a str")
        object.__setattr__(self, "texts", texts)
        from veil.attacks.base import _not_plain

        if not isinstance(self.defense, Mapping):
            raise InvalidTypeError(f"defense must be a mapping of public configuration, not "
                                   f"{type(self.defense).__name__}")
        bad = _not_plain(self.defense, "defense")
        if bad is not None:  # keeps keys and mappings out of the attacker's view
            raise InvalidTypeError(f"{bad}: a ReleasedText's defense description holds public configuration only")
        object.__setattr__(self, "defense", MappingProxyType(dict(self.defense)))

    def __len__(self) -> int:
        return len(self.texts)


def observe_text(texts: Sequence[str], defense: Any = None) -> ReleasedText:
    """The attacker's view of a text release: the texts and ``defense.config()`` (None: no defense)."""
    return ReleasedText(tuple(texts), {"defense": "none"} if defense is None else defense.config())
