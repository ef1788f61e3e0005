"""Defenses (privacy mechanisms) behind one contract and one registry (see :mod:`veil.defenses.base`).

>>> from veil.defenses import defense_names, get_defense
>>> "texthide" in defense_names()                      # every defense; `veil defenses list` shows kinds
True
>>> defense_names("document-embeddings")              # those releasing one kind (imports their modules)
['deepcandidate', 'truncation']
>>> from veil.defenses.texthide import MaskPool, TextHide
>>> th = TextHide(k=4, pool=MaskPool(256, 384))      # secret masks from the OS CSPRNG
>>> e_t, y_t = th.encrypt(e, y, num_classes=2)        # e: (b, 384) encoder output with grad
>>> str(th.guarantee)
'none: heuristic (no formal guarantee): ...'

Importing this package does not import torch; the implementing modules are
loaded on first use (``get_defense`` or attribute access).
"""

from __future__ import annotations

import importlib
from typing import Any

from veil.defenses.base import (NO_GUARANTEE, Defense, Guarantee, InsecureKeyFileError, defense_names, defense_table,
                                get_defense, make_defense, register_defense)

_LAZY = {
    "TextHide": "veil.defenses.texthide",
    "Encrypted": "veil.defenses.texthide",
    "MaskPool": "veil.defenses.texthide.masks",
    "TextHideDetails": "veil.defenses.texthide.mix",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'veil.defenses' has no attribute {name!r}")


__all__ = ["Defense", "Guarantee", "NO_GUARANTEE", "InsecureKeyFileError", "defense_names", "defense_table",
           "get_defense", "make_defense", "register_defense", *sorted(_LAZY)]
