"""veil: privacy-preserving NLP defenses and the attacks that measure them.

Heavy libraries (torch, transformers, spaCy, faiss) are imported lazily by the
functions that need them, so ``import veil`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_SUBMODULES = {"corpora", "defenses", "encoders", "errors", "experiments", "metrics", "models", "random", "report",
               "training"}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"veil.{name}")
    raise AttributeError(f"module 'veil' has no attribute {name!r}")


__all__ = ["__version__", *sorted(_SUBMODULES)]
