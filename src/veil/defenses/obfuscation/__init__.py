"""Obfuscation for privacy-preserving parsing (Hu et al. 2020): the POS spectrum and the random same-POS
substitution (part 1). The neural obfuscator (part 2) will live here too.

>>> from veil.defenses.obfuscation import RandomSubstitution, TagVocabulary
>>> vocab = TagVocabulary.from_sentences((t.words, t.tags) for t in train_trees)
>>> ob = RandomSubstitution(vocabulary=vocab, level="P3")       # secret draws from the OS CSPRNG
>>> out = ob.obfuscate(words, tags); out.words; out.key.restore(out.words) == list(words)
"""

from __future__ import annotations

from veil.defenses.obfuscation.random_substitution import (ObfuscationKey, Obfuscated, RandomSubstitution,
                                                           TagVocabulary)
from veil.defenses.obfuscation.spectrum import DEFAULT_SPECTRUM, LEVEL_NAMES, PAPER_LEVELS, PosSpectrum

__all__ = ["RandomSubstitution", "TagVocabulary", "ObfuscationKey", "Obfuscated", "PosSpectrum", "PAPER_LEVELS",
           "LEVEL_NAMES", "DEFAULT_SPECTRUM"]
