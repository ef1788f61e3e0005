"""Adversarial defenses of private attributes in hidden representations (Coavoux, Narayan & Cohen, EMNLP 2018).

Every defense here releases ``representations`` (a trained encoder's r(x)) and is in veil's one defense registry
(``veil defenses list``); its release verb ``objective()`` gives the training objective the main model trains
with (the adversary step is in :mod:`veil.training.adversarial`).

>>> import veil
>>> obj = veil.make_defense("multidetask", alpha=1.0, beta=1.0).objective()   # Sec. 3.1.1 (complement targets)
>>> veil.make_defense("grl")                                                   # gradient reversal (not in the paper)
>>> veil.make_defense("generation", reduction="sum", max_chars=300)           # Sec. 3.1.2 (character LM adversary)
>>> veil.make_defense("decluster", alpha=0.1)                                 # Sec. 3.2 (sign as in the authors' code)
>>> veil.make_defense("leace")                                                # LEACE baseline (concept-erasure)

Modules: :mod:`~veil.defenses.adversarial.objectives` (the training objectives, with the paper's equations),
:mod:`~veil.defenses.adversarial.leace` (linear erasure). None of these defenses has a formal guarantee (LEACE's
holds against linear probes only); measure them with :mod:`veil.attacks.attribute`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["make_objective", "defense_names"]


def defense_names() -> list[str]:
    """The choices of an adversarial run: ``none`` (plain training) and every registered representations defense."""
    from veil.defenses.base import defense_names as registered

    return ["none", *registered("representations")]


def make_objective(name: str, **params: Any) -> Any:
    """The training objective for ``name``: None for ``none`` (plain training) and for ``leace`` (which trains
    plainly and erases afterwards), else the registered defense's ``objective()``."""
    if name == "none":
        return None
    from veil.defenses.base import get_defense, defense_names as registered

    if name not in registered("representations"):
        from veil.errors import UnknownNameError

        raise UnknownNameError("adversarial defense", str(name), defense_names())
    return get_defense(name)(**params).objective()
