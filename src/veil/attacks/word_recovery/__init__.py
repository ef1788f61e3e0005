"""Word-recovery attacks on obfuscated text (Hu et al. 2020, Sec. 5.2): contextual (frozen MiniLM), trained and
masked-LM attackers, attackers on veil's own masked LM (zero-shot and fine-tuned), floors.

>>> from veil.attacks.word_recovery import observe, score_attack, TrainedAttacker, AttackVocabulary
>>> text = observe(obfuscated)                  # what the service sees: words, tags, obfuscated positions
>>> score_attack(attacker, text, originals)     # MRR (pessimistic ties), prv = 100 - 100 MRR, top-1, CIs

Importing this package does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from veil.attacks.word_recovery.floors import AttackVocabulary, KeepWord, TagFrequency
from veil.attacks.word_recovery.observe import ObfuscatedText, observe, score_attack

_LAZY = {"ContextualAttacker": "veil.attacks.word_recovery.contextual",
         "TrainedAttacker": "veil.attacks.word_recovery.neural",
         "MaskedLMAttacker": "veil.attacks.word_recovery.neural",
         "ZeroShotMLMAttacker": "veil.attacks.word_recovery.veil_mlm",
         "TunedMLMAttacker": "veil.attacks.word_recovery.veil_mlm",
         "CandidateWords": "veil.attacks.word_recovery.veil_mlm"}


def attacker_names() -> list[str]:
    """The word-recovery attackers of the parsing experiments: the registered obfuscated-text attacks, named
    without their ``word-recovery-`` prefix (``minilm``, ``trained``, ``mlm``, and the floors ``keep-word``,
    ``tag-frequency``)."""
    from veil.attacks.base import attack_names

    return [n.removeprefix("word-recovery-") for n in attack_names("obfuscated-text")]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'veil.attacks.word_recovery' has no attribute {name!r}")


__all__ = ["attacker_names", "AttackVocabulary", "KeepWord", "TagFrequency", "ObfuscatedText", "observe", "score_attack",
           *sorted(_LAZY)]
