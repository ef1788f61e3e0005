"""The POS spectrum of Hu et al. 2020, Table 1: which Penn Treebank tags each obfuscation level hides.

Levels are cumulative: level ``Pj`` hides the tags of P1..Pj (P1 named entities NNP NNPS, P2 nouns NN NNS,
P3 adjectives JJ JJR JJS, P4 verbs VB VBD VBG VBN VBP VBZ, P5 adverbs RB RBR RBS; the authors' code,
utils/build_gan.py, has the same lists). A :class:`PosSpectrum` with other groups is configurable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from veil.errors import InvalidParameterError, InvalidTypeError

__all__ = ["PAPER_LEVELS", "LEVEL_NAMES", "PosSpectrum", "DEFAULT_SPECTRUM"]

#: group name -> (row label of the paper's Table 2, the Penn tags the group adds)
PAPER_LEVELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "P1": ("NE", ("NNP", "NNPS")),
    "P2": ("+Nouns", ("NN", "NNS")),
    "P3": ("+Adj", ("JJ", "JJR", "JJS")),
    "P4": ("+Verbs", ("VB", "VBD", "VBG", "VBN", "VBP", "VBZ")),
    "P5": ("+Adv", ("RB", "RBR", "RBS")),
}
LEVEL_NAMES = tuple(PAPER_LEVELS)


@dataclass(frozen=True)
class PosSpectrum:
    """Ordered groups of tags; level ``name`` hides its group and every group before it."""

    groups: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: {k: tags for k, (_, tags) in PAPER_LEVELS.items()})

    def __post_init__(self) -> None:
        if not isinstance(self.groups, Mapping) or not self.groups:
            raise InvalidTypeError("groups must be a non-empty mapping level name -> tags")
        seen: set[str] = set()
        for name, tags in self.groups.items():
            if isinstance(tags, str) or not isinstance(tags, Iterable) or not tags:
                raise InvalidTypeError(f"level {name!r} must list its tags, e.g. ('NN', 'NNS')")
            dup = seen & set(tags)
            if dup:
                raise InvalidParameterError(f"tags {sorted(dup)} appear in two levels; each tag belongs to one level")
            seen |= set(tags)
        object.__setattr__(self, "groups", {str(k): tuple(v) for k, v in self.groups.items()})

    @property
    def levels(self) -> tuple[str, ...]:
        return tuple(self.groups)

    def hidden_tags(self, level: str) -> frozenset[str]:
        """Every tag hidden at ``level`` (its group and the groups before it)."""
        if level not in self.groups:
            raise InvalidParameterError(f"unknown obfuscation level {level!r}; valid levels: "
                                        f"{', '.join(self.groups)}")
        out: set[str] = set()
        for name, tags in self.groups.items():
            out |= set(tags)
            if name == level:
                return frozenset(out)
        raise AssertionError("unreachable")  # pragma: no cover

    def share_hidden(self, tag_sequences: Sequence[Sequence[str]], level: str) -> float:
        """Fraction of tokens whose tag is hidden at ``level`` (Table 1's last column)."""
        hidden = self.hidden_tags(level)
        total = sum(len(s) for s in tag_sequences)
        return sum(t in hidden for s in tag_sequences for t in s) / total if total else 0.0


DEFAULT_SPECTRUM = PosSpectrum()
