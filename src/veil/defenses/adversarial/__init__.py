"""Adversarial defenses of private attributes in hidden representations (Coavoux, Narayan & Cohen, EMNLP 2018).

>>> from veil.defenses.adversarial import make_objective, DEFENSES
>>> obj = make_objective("multidetask", alpha=1.0, beta=1.0)    # Sec. 3.1.1 (complement-label targets)
>>> make_objective("grl")                                         # gradient reversal variant (not in the paper)
>>> make_objective("generation", reduction="sum", max_chars=300)  # Sec. 3.1.2 (character LM adversary)
>>> make_objective("decluster", alpha=0.1)                        # Sec. 3.2 (sign as in the authors' code)
>>> from veil.defenses.adversarial.leace import LeaceErasure      # LEACE baseline (concept-erasure)

Modules: :mod:`~veil.defenses.adversarial.objectives` (the training objectives, with the paper's equations),
:mod:`~veil.defenses.adversarial.leace` (linear erasure), :mod:`~veil.defenses.adversarial.train` (the main-model
trainer with the adversary step). None of these defenses has a formal guarantee (LEACE's holds against linear
probes only); measure them with :mod:`veil.attacks.attribute`.
"""

from __future__ import annotations

import importlib
from typing import Any

from veil.errors import UnknownNameError

__all__ = ["DEFENSES", "make_objective", "defense_class"]

#: name -> "module:Class" (imported on first use; ``import veil.defenses.adversarial`` does not import torch)
DEFENSES = {
    "none": "veil.defenses.adversarial.objectives:NoObjective",
    "multidetask": "veil.defenses.adversarial.objectives:MultiDetasking",
    "grl": "veil.defenses.adversarial.objectives:GradientReversal",
    "generation": "veil.defenses.adversarial.objectives:AdversarialGeneration",
    "decluster": "veil.defenses.adversarial.objectives:Declustering",
    "leace": "veil.defenses.adversarial.leace:LeaceErasure",
}


def defense_class(name: str) -> Any:
    """The class registered as ``name`` (UnknownNameError lists the valid names)."""
    if name not in DEFENSES:
        raise UnknownNameError("adversarial defense", str(name), DEFENSES)
    module, _, attr = DEFENSES[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def make_objective(name: str, **params: Any) -> Any:
    """The training objective for ``name`` (``leace`` trains with no objective and erases afterwards)."""
    if name == "leace":
        return defense_class("none")()
    return defense_class(name)(**params)
