"""Dependency parsing for privacy-preserving parsing (Hu et al. 2020): silver trees, spaCy parsers, evaluation.

>>> from veil.parsing import build_silver, load_treebank
>>> build_silver()                                   # spaCy sm parses of news-articles + brown (cached)
>>> test = load_treebank("test")                     # list of veil.parsing.trees.Tree

Importing this package imports neither spaCy nor torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Tree": "veil.parsing.trees",
    "read_conllu_trees": "veil.parsing.trees",
    "write_conllu": "veil.parsing.trees",
    "build_silver": "veil.parsing.treebank",
    "load_treebank": "veil.parsing.treebank",
    "silver_dir": "veil.parsing.treebank",
    "load_spacy": "veil.models.spacy_pipelines",
    "md_model_dir": "veil.models.spacy_pipelines",
    "attachment_scores": "veil.parsing.evaluate",
    "parse_with": "veil.parsing.evaluate",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'veil.parsing' has no attribute {name!r}")


__all__ = sorted(_LAZY)
