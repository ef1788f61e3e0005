"""Obfuscated text (Hu et al. 2020): word recovery on obfuscated sentences, and the parsers' utility.

(Being written: issue 28.)
"""

from __future__ import annotations

from typing import Any

__all__ = ["word_recovery_cell", "parsing_utility"]


def word_recovery_cell(cell: Any, data: Any) -> Any:
    raise NotImplementedError("the obfuscated-text bench cells are being written (issue 28)")


def parsing_utility(cell: Any, data: Any) -> Any:
    raise NotImplementedError("the obfuscated-text bench cells are being written (issue 28)")
