"""Attacks that measure what leaks from protected text representations (see :mod:`veil.attacks.base`).

>>> from veil.attacks import attack_names, get_attack
>>> "rss" in attack_names()                            # every attack; `veil attacks list` shows kinds
True
>>> attack_names("training-encodings")                 # those observing one kind (imports their modules)
['mask-recovery', 'unmix']
>>> from veil.attacks.retrieval import SimilaritySearch, RSS, evaluate_retrieval, protect_with_texthide
>>> index = SimilaritySearch(texts, X, labels=y)             # exact cosine index (torch or faiss)
>>> obs = protect_with_texthide(X[q], m=256, k=4)            # what the attacker sees
>>> evaluate_retrieval(RSS(index), obs, q).metrics["identity"]

Importing this package does not import torch, faiss or sklearn; the
implementing modules are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from veil.attacks.base import (Attack, AttackResult, Observation, ThreatModel, attack_names, attack_table, get_attack,
                               register_attack, run_attack)

_LAZY = {
    "SimilaritySearch": "veil.attacks.retrieval.index",
    "Retrieved": "veil.attacks.retrieval.index",
    "RSS": "veil.attacks.retrieval",
    "AbsRSS": "veil.attacks.retrieval.abs_rss",
    "MixTruth": "veil.attacks.retrieval.observe",
    "Protected": "veil.attacks.retrieval.observe",
    "protect_with_truth": "veil.attacks.retrieval.observe",
    "protect_with_texthide_truth": "veil.attacks.retrieval.observe",
    "compare_to_random": "veil.attacks.retrieval",
    "RepRecon": "veil.attacks.retrieval.reprecon",
    "RandomGuess": "veil.attacks.retrieval",
    "RetrievalResult": "veil.attacks.retrieval",
    "evaluate_retrieval": "veil.attacks.retrieval",
    "rss_table": "veil.attacks.retrieval",
    "reprecon_table": "veil.attacks.retrieval",
    "observe": "veil.attacks.retrieval.observe",
    "observe_original": "veil.attacks.retrieval.observe",
    "protect": "veil.attacks.retrieval.observe",
    "protect_with_texthide": "veil.attacks.retrieval.observe",
    "sample_queries": "veil.attacks.retrieval.observe",
    "MaskRecovery": "veil.attacks.texthide.mask_recovery",
    "Unmix": "veil.attacks.texthide.unmix",
    "observe_training_run": "veil.attacks.texthide.observe",
    "observe_inference": "veil.attacks.texthide.observe",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'veil.attacks' has no attribute {name!r}")


__all__ = ["Attack", "AttackResult", "Observation", "ThreatModel", "attack_names", "attack_table", "get_attack",
           "register_attack", "run_attack",
           *sorted(_LAZY)]
