"""Obfuscation for privacy-preserving parsing (Hu et al. 2020): the POS spectrum, the random same-POS
substitution (part 1) and the neural obfuscator (part 2, :mod:`.neural`; imported on first use, with torch).

>>> from veil.defenses.obfuscation import RandomSubstitution, TagVocabulary
>>> vocab = TagVocabulary.from_sentences((t.words, t.tags) for t in train_trees)
>>> ob = RandomSubstitution(vocabulary=vocab, level="P3")       # secret draws from the OS CSPRNG
>>> out = ob.obfuscate(words, tags); out.words; out.key.restore(out.words) == list(words)
>>> from veil.defenses.obfuscation import NeuralObfuscator      # same interface, a trained network
>>> ob = NeuralObfuscator.load(path)                             # secret draws from the OS CSPRNG
"""

from __future__ import annotations

import importlib
from typing import Any

from veil.defenses.obfuscation.random_substitution import (ObfuscationKey, Obfuscated, RandomSubstitution,
                                                           TagVocabulary)
from veil.defenses.obfuscation.spectrum import DEFAULT_SPECTRUM, LEVEL_NAMES, PAPER_LEVELS, PosSpectrum

_LAZY = {name: "veil.defenses.obfuscation.neural" for name in
         ("NeuralObfuscator", "ObfuscatorConfig", "NeuralTraining", "ObfuscatorNet", "train_obfuscator",
          "frequent_candidates")}


def method_names() -> list[str]:
    """The obfuscation methods (``random``, ``neural``): the registered obfuscated-text defenses, named without
    their ``obfuscation-`` prefix (``veil defenses list`` shows the full names)."""
    from veil.defenses.base import defense_names

    return [n.removeprefix("obfuscation-") for n in defense_names("obfuscated-text")]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'veil.defenses.obfuscation' has no attribute {name!r}")


__all__ = ["method_names", "RandomSubstitution", "TagVocabulary", "ObfuscationKey", "Obfuscated", "PosSpectrum", "PAPER_LEVELS",
           "LEVEL_NAMES", "DEFAULT_SPECTRUM", *sorted(_LAZY)]
