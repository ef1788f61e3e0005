"""Pooling of token states into one vector per text (imports torch).

Imported lazily by :mod:`veil.encoders.text`; ``import veil.encoders`` does not
load this module.

* ``mean``: attention-mask-weighted mean of the last hidden states, computed as
  sentence-transformers' ``Pooling(pooling_mode="mean")`` does (sum over
  unmasked tokens divided by the token count clamped at 1e-9).
* ``cls``: the first token's state (``[CLS]`` for BERT-style models).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["POOLERS", "mean_pool", "cls_pool", "pool"]


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``hidden`` (b, t, d) over the positions where ``attention_mask`` (b, t) is 1."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    summed = (hidden * mask).sum(dim=1)
    counts = mask.sum(dim=1).clamp(min=1e-9)
    return summed / counts


def cls_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The first position's state (b, d)."""
    return hidden[:, 0]


POOLERS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mean": mean_pool,
    "cls": cls_pool,
}


def pool(name: str, hidden: torch.Tensor, attention_mask: torch.Tensor, *, normalize: bool) -> torch.Tensor:
    """Pool with the registered pooler ``name``; L2-normalise rows when ``normalize``."""
    out = POOLERS[name](hidden, attention_mask)
    return torch.nn.functional.normalize(out, p=2, dim=1) if normalize else out
