"""Random same-POS substitution, the random baseline of Hu et al. 2020 (Sec. 5.1, "Random").

Each word whose Penn tag is hidden at the chosen level (:mod:`.spectrum`) is replaced by a word drawn
uniformly from the word types seen with that tag in the training treebank (:class:`TagVocabulary`), never by
the word itself (compared case-insensitively): the paper says so, the authors' code (TagSpecRandomGenerator)
does not mask it. Words of other tags are kept. The obfuscated sentence keeps length and the tag of every
position, so a parse of it is a parse of the original by position.

The draws are the secret: with ``rng=None`` (the default) every draw reads the OS CSPRNG
(:func:`veil.random.secure_uniform`); an int seed makes them reproducible, for experiments only (a
:class:`~veil.errors.PrivacyLeakWarning` says so). The client keeps an :class:`ObfuscationKey` (which positions
were replaced and their original words) to map the returned tree back; it never leaves the client.

Guarantee: none (heuristic). The strongest attacks veil knows for it are the word-recovery attackers
(:mod:`veil.attacks.word_recovery`), told which positions were replaced.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.defenses.base import Guarantee, ObfuscatedTextDefense
from veil.validation import check_choice, seeded_rng
from veil.defenses.obfuscation.spectrum import DEFAULT_SPECTRUM, PosSpectrum
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

__all__ = ["TagVocabulary", "ObfuscationKey", "Obfuscated", "RandomSubstitution", "check_tagged_sentence"]


def check_tagged_sentence(words: Sequence[str], tags: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(words, tags)`` as lists, or a typed error that says what to fix (a string, empty, untagged, lengths)."""
    if isinstance(words, str) or isinstance(tags, str):
        raise InvalidTypeError("words and tags must be sequences of strings (one per token), not a string")
    words, tags = list(words), list(tags)
    if not words:
        raise DataFormatError("the sentence is empty; obfuscate sentences with at least one word")
    if len(words) != len(tags):
        raise DataFormatError(f"{len(tags)} tags for {len(words)} words; give one Penn tag per word")
    for i, t in enumerate(tags):
        if not isinstance(t, str) or not t or t == "_":
            raise DataFormatError(f"word {i + 1} ({words[i]!r}) has no tag; tag the sentence first (Penn tags, e.g. "
                                  "spaCy's token.tag_)")
    return words, tags


@dataclass(frozen=True)
class TagVocabulary:
    """Tag -> the word types seen with it (sorted; the first spelling seen of each lower-cased type)."""

    words: Mapping[str, tuple[str, ...]]

    @classmethod
    def from_sentences(cls, sentences: Iterable[tuple[Sequence[str], Sequence[str]]], *,
                       min_count: int = 1) -> "TagVocabulary":
        """From ``(words, tags)`` pairs (e.g. the training trees); types seen fewer than ``min_count`` times dropped."""
        counts: dict[str, Counter[str]] = {}
        spelling: dict[tuple[str, str], str] = {}
        for words, tags in sentences:
            if len(words) != len(tags):
                raise DataFormatError(f"{len(tags)} tags for {len(words)} words; give one tag per word")
            for w, t in zip(words, tags):
                counts.setdefault(t, Counter())[w.lower()] += 1
                spelling.setdefault((t, w.lower()), w)
        return cls({t: tuple(sorted(spelling[(t, w)] for w, n in c.items() if n >= min_count))
                    for t, c in counts.items()})

    def candidates(self, tag: str) -> tuple[str, ...]:
        return self.words.get(tag, ())

    def sizes(self) -> dict[str, int]:
        return {t: len(v) for t, v in sorted(self.words.items())}


@dataclass(frozen=True)
class ObfuscationKey:
    """The client's secret: the replaced positions (0-based) and their original words. Never send it."""

    positions: tuple[int, ...]
    originals: tuple[str, ...]

    def restore(self, words: Sequence[str]) -> list[str]:
        """The original sentence from the obfuscated one (position by position)."""
        out = list(words)
        for p, w in zip(self.positions, self.originals):
            if p >= len(out):
                raise DataFormatError(f"the key replaces position {p} but the sentence has {len(out)} words; it "
                                      "belongs to another sentence")
            out[p] = w
        return out

    def save(self, path: str | os.PathLike) -> None:
        """Write the key as JSON readable by its owner only (mode 0600)."""
        import json

        from veil._io import atomic_write

        with atomic_write(path, "w", perms=0o600) as fh:
            json.dump({"positions": list(self.positions), "originals": list(self.originals)}, fh)


@dataclass(frozen=True)
class Obfuscated:
    """An obfuscated sentence and the key that maps it back."""

    words: tuple[str, ...]
    tags: tuple[str, ...]
    key: ObfuscationKey

    @property
    def mask(self) -> np.ndarray:
        m = np.zeros(len(self.words), dtype=bool)
        m[list(self.key.positions)] = True
        return m


class RandomSubstitution(ObfuscatedTextDefense):
    """Replace every word of a hidden tag by a uniformly drawn other word of that tag (see the module docstring).

    ``vocabulary``: a :class:`TagVocabulary` from public (training) text; every hidden tag it knows must have at
    least two word types. ``level``: a level of ``spectrum`` (P1..P5 by default, cumulative).
    """

    name = "obfuscation-random"
    guarantee: Guarantee = Guarantee("none", "heuristic (no formal guarantee): replaced words are drawn "
                                             "uniformly from public same-tag words; the context still leaks")
    citation = "Hu et al. 2020, privacy-preserving parsing: random same-POS substitution"
    tasks = ("dependency-parsing",)
    paper_attack = "word-recovery-trained"  # Hu et al. 2020, Sec. 5.2: an attacker trained on its own obfuscations

    @classmethod
    def bench_settings(cls, quick: bool) -> list[dict[str, Any]]:
        """Two levels of the POS spectrum (Hu et al. 2020, Table 1): P3 and P5."""
        return [{"level": "P3"}, {"level": "P5"}]

    @classmethod
    def bench_make(cls, setting: dict[str, Any], data: Any, rng: Any = None, **options: Any) -> "RandomSubstitution":
        """Substitution at ``setting["level"]`` drawing from the bench treebank's public (train) vocabulary."""
        return cls(vocabulary=data.vocab, level=setting["level"], rng=rng)

    def __init__(self, *, vocabulary: TagVocabulary, level: str = "P3", spectrum: PosSpectrum = DEFAULT_SPECTRUM,
                 rng: Any = None) -> None:
        if not isinstance(vocabulary, TagVocabulary):
            raise InvalidTypeError("vocabulary must be a TagVocabulary (TagVocabulary.from_sentences(train))")
        if not isinstance(spectrum, PosSpectrum):
            raise InvalidTypeError("spectrum must be a PosSpectrum")
        self.level = check_choice("level", level, spectrum.levels)
        self.spectrum, self.vocabulary = spectrum, vocabulary
        self.hidden = spectrum.hidden_tags(level)
        for tag in sorted(self.hidden):
            n = len({w.lower() for w in vocabulary.candidates(tag)})
            if n == 1:
                raise InvalidParameterError(
                    f"the vocabulary has only one word for tag {tag!r}, so a substitute that differs from it cannot "
                    "be drawn; build the vocabulary from more text (or a lower min_count)")
        self._rng = seeded_rng(rng, "RandomSubstitution", "substitutions")
        self._index = {t: {w.lower(): i for i, w in enumerate(vocabulary.candidates(t))} for t in self.hidden}

    def config(self) -> dict[str, Any]:
        return {**super().config(), "level": self.level, "hidden_tags": sorted(self.hidden),
                "vocabulary_sizes": {t: len(self.vocabulary.candidates(t)) for t in sorted(self.hidden)}}

    def _uniform(self, n: int) -> np.ndarray:
        from veil.random import secure_uniform

        return secure_uniform(n) if self._rng is None else self._rng.random(n)

    def obfuscate(self, words: Sequence[str], tags: Sequence[str]) -> Obfuscated:
        """The obfuscated sentence: same length, same tags; hidden-tag words replaced (never by themselves)."""
        words, tags = check_tagged_sentence(words, tags)
        positions = [i for i, t in enumerate(tags) if t in self.hidden and len(self.vocabulary.candidates(t))]
        u = self._uniform(len(positions))
        out, originals = list(words), []
        for p, r in zip(positions, u):
            cands = self.vocabulary.candidates(tags[p])
            same = self._index[tags[p]].get(words[p].lower())  # the original's index (types are lower-cased)
            k = len(cands) - (same is not None)
            j = min(int(r * k), k - 1)
            if same is not None and j >= same:  # skip it: uniform over the other k words
                j += 1
            out[p] = cands[j]
            originals.append(words[p])
        return Obfuscated(tuple(out), tuple(tags), ObfuscationKey(tuple(positions), tuple(originals)))

    def transform(self, sentences: Iterable[tuple[Sequence[str], Sequence[str]]]) -> list[Obfuscated]:
        """:meth:`obfuscate` for each ``(words, tags)`` pair."""
        return [self.obfuscate(w, t) for w, t in sentences]
