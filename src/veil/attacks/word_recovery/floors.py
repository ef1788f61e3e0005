"""Reference attackers that learn nothing from context: the floors every word-recovery attack must beat.

* :class:`KeepWord` guesses the word it sees. Random substitution never keeps the original, so the true word
  always ties with every other unseen word at score 0: its pessimistic rank is the vocabulary size.
* :class:`TagFrequency` ranks the words of the public text by how often they carry the position's tag (the
  tag is released with the sentence); ties are pessimistic.

Both share the neural attackers' vocabulary (:class:`AttackVocabulary`): a true word outside it has rank 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from veil.attacks.base import Attack, ThreatModel
from veil.attacks.word_recovery.observe import ObfuscatedText
from veil.errors import DataFormatError

__all__ = ["AttackVocabulary", "KeepWord", "TagFrequency", "THREAT"]

THREAT = ThreatModel("obfuscated sentences with their POS tags, told which positions were replaced",
                     needs=("public tagged text (the training split)",))


@dataclass(frozen=True)
class AttackVocabulary:
    """Lower-cased words of public text, most frequent first (index 0 pad, 1 unknown, 2 mask)."""

    words: tuple[str, ...]

    SPECIAL: ClassVar[tuple[str, ...]] = ("<pad>", "<unk>", "<mask>")

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], *, max_size: int = 20000,
              min_count: int = 2) -> "AttackVocabulary":
        counts: Counter[str] = Counter()
        for words in sentences:
            counts.update(w.lower() for w in words)
        ranked = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        if not ranked:
            raise DataFormatError(f"no word occurs {min_count} times in the public text; give the attacker more text")
        return cls((*cls.SPECIAL, *ranked[:max_size]))

    def index(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(self.words)}

    def ids(self, words: Sequence[str], lookup: dict[str, int] | None = None) -> list[int]:
        lookup = lookup if lookup is not None else self.index()
        return [lookup.get(w.lower(), 1) for w in words]

    def targets(self, words: Sequence[str], lookup: dict[str, int]) -> list[int]:
        """Indices of true words (-1 outside the vocabulary; special entries are never targets)."""
        return [lookup.get(w, -1) if lookup.get(w, -1) >= len(self.SPECIAL) else -1 for w in words]

    def __len__(self) -> int:
        return len(self.words)


class KeepWord(Attack):
    """Guess the obfuscated word itself (a floor)."""

    name = "keep-word"
    citation = "floor (Hu et al. 2020 report none)"
    threat = THREAT
    observes = "obfuscated-text"
    bench_cell = "veil.bench.cells.obfuscated_text:word_recovery_cell"
    floor = True

    def __init__(self, vocabulary: AttackVocabulary) -> None:
        self.vocabulary = vocabulary

    def run(self, observation: ObfuscatedText) -> list[list[str]]:
        """The attack's one verb: the top guess at every obfuscated position (the released word itself)."""
        return [[words[p].lower() for p in pos] for words, pos in zip(observation.words, observation.positions)]

    def rank(self, text: ObfuscatedText, targets: Sequence[Sequence[str]]) -> np.ndarray:
        lookup = self.vocabulary.index()
        v = len(self.vocabulary) - len(AttackVocabulary.SPECIAL)
        out = []
        for words, pos, tgt in zip(text.words, text.positions, targets):
            for p, t in zip(pos, tgt):
                seen = words[p].lower()
                inside = self.vocabulary.targets([t], lookup)[0] >= 0
                out.append(0 if not inside else (1 if t == seen else v))  # every unseen word ties at 0
        return np.asarray(out, dtype=np.int64)


class TagFrequency(Attack):
    """Rank words by their frequency with the position's tag in public text (a floor)."""

    name = "tag-frequency"
    citation = "floor (Hu et al. 2020 report none)"
    threat = THREAT
    observes = "obfuscated-text"
    bench_cell = "veil.bench.cells.obfuscated_text:word_recovery_cell"
    floor = True

    def __init__(self, vocabulary: AttackVocabulary, public: Iterable[tuple[Sequence[str], Sequence[str]]]) -> None:
        self.vocabulary = vocabulary
        lookup = vocabulary.index()
        self._counts: dict[str, Counter[str]] = {}
        for words, tags in public:
            for w, t in zip(words, tags):
                if lookup.get(w.lower(), -1) >= len(AttackVocabulary.SPECIAL):
                    self._counts.setdefault(t, Counter())[w.lower()] += 1
        self._sorted = {t: np.sort(np.fromiter(c.values(), dtype=np.int64)) for t, c in self._counts.items()}

    def run(self, observation: ObfuscatedText) -> list[list[str | None]]:
        """The attack's one verb: the top guess at every obfuscated position (the public word most often seen with
        the position's tag; None for a tag the public text never shows)."""
        top = {t: c.most_common(1)[0][0] for t, c in self._counts.items() if c}
        return [[top.get(tags[p]) for p in pos] for tags, pos in zip(observation.tags, observation.positions)]

    def rank(self, text: ObfuscatedText, targets: Sequence[Sequence[str]]) -> np.ndarray:
        lookup = self.vocabulary.index()
        v = len(self.vocabulary) - len(AttackVocabulary.SPECIAL)
        out = []
        for tags, pos, tgt in zip(text.tags, text.positions, targets):
            for p, t in zip(pos, tgt):
                if self.vocabulary.targets([t], lookup)[0] < 0:
                    out.append(0)
                    continue
                c = self._counts.get(tags[p], Counter()).get(t, 0)
                counts = self._sorted.get(tags[p], np.zeros(0, dtype=np.int64))
                out.append(v if c == 0 else int(len(counts) - np.searchsorted(counts, c, side="left")))
        return np.asarray(out, dtype=np.int64)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "vocabulary": len(self.vocabulary)}
