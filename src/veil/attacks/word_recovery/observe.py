"""What a word-recovery attacker sees, and how its guesses are scored.

Threat model (Hu et al. 2020, Sec. 5.2): the parsing service receives the obfuscated sentence and its POS tags
(the target parser takes POS input) and the attacker is TOLD which positions were obfuscated. It never sees the
original words or the client's key: :class:`ObfuscatedText` holds only the released side; the originals reach
:func:`score_attack` separately. Guesses are lower-cased words: recovering ``trump`` for ``Trump`` counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.errors import DataFormatError

__all__ = ["ObfuscatedText", "observe", "score_attack"]


@dataclass(frozen=True)
class ObfuscatedText:
    """Released sentences: words, tags and the obfuscated positions (0-based) of each."""

    words: tuple[tuple[str, ...], ...]
    tags: tuple[tuple[str, ...], ...]
    positions: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        if not (len(self.words) == len(self.tags) == len(self.positions)):
            raise DataFormatError("words, tags and positions must have one entry per sentence")
        for i, (w, t, p) in enumerate(zip(self.words, self.tags, self.positions)):
            if not w:
                raise DataFormatError(f"sentence {i} is empty")
            if len(w) != len(t):
                raise DataFormatError(f"sentence {i}: {len(t)} tags for {len(w)} words")
            if any(not 0 <= q < len(w) for q in p):
                raise DataFormatError(f"sentence {i}: an obfuscated position is outside the sentence")

    def __len__(self) -> int:
        return len(self.words)

    @property
    def n_positions(self) -> int:
        return sum(len(p) for p in self.positions)


def observe(obfuscated: Sequence[Any]) -> ObfuscatedText:
    """The attacker's view of :class:`veil.defenses.obfuscation.Obfuscated` sentences (no keys, no originals)."""
    return ObfuscatedText(tuple(o.words for o in obfuscated), tuple(o.tags for o in obfuscated),
                          tuple(o.key.positions for o in obfuscated))


def score_attack(attack: Any, text: ObfuscatedText, originals: Sequence[Sequence[str]], *,
                 n_boot: int = 1000, seed: int = 0, ranks: Any = None) -> dict[str, Any]:
    """Rank every original word under ``attack.rank(text, targets)``; MRR, prv, top-1 with CIs and the coverage.

    ``originals`` are the true words at the obfuscated positions, sentence by sentence (scorer only). ``ranks``:
    the attack's ranks already computed (one per obfuscated position, in order), instead of ranking again.
    """
    from veil.metrics.ranking import ranking_metrics
    from veil.results import Metric

    if len(originals) != len(text):
        raise DataFormatError(f"{len(originals)} sentences of originals for {len(text)} observed sentences")
    targets = [[w.lower() for w in o] for o in originals]
    for i, (o, p) in enumerate(zip(targets, text.positions)):
        if len(o) != len(p):
            raise DataFormatError(f"sentence {i}: {len(o)} originals for {len(p)} obfuscated positions")
    ranks = np.asarray(attack.rank(text, targets) if ranks is None else ranks, dtype=np.int64)
    if len(ranks) != text.n_positions:
        raise DataFormatError(f"{len(ranks)} ranks for {text.n_positions} obfuscated positions")
    groups = np.repeat(np.arange(len(text)), [len(p) for p in text.positions])
    out = ranking_metrics(ranks, groups, n_boot=n_boot, seed=seed)
    out["coverage"] = Metric(mean=100.0 * float((ranks > 0).mean()), n=int(len(ranks)))
    return out
