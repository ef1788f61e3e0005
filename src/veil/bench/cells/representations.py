"""Representations (Coavoux et al. 2018): the attribute attackers on r(x), and the main task's utility.

(Being written: issue 28.)
"""

from __future__ import annotations

from typing import Any

__all__ = ["attribute_cell", "representations_utility"]


def attribute_cell(cell: Any, data: Any) -> Any:
    raise NotImplementedError("the representations bench cells are being written (issue 28)")


def representations_utility(cell: Any, data: Any) -> Any:
    raise NotImplementedError("the representations bench cells are being written (issue 28)")
