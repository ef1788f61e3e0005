"""MLP heads on top of (protected) representations."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from veil.errors import InvalidParameterError

__all__ = ["MLPHead"]


class MLPHead(nn.Module):
    """``in_dim -> hidden... -> out_dim`` with ReLU and dropout between layers.

    TextHide (Huang et al. 2020, Sec. 4.1) trains an MLP with three hidden
    layers of the encoder's width on the encrypted representations:
    ``MLPHead(384, 2, hidden=(384, 384, 384))``.
    """

    def __init__(self, in_dim: int, out_dim: int, *, hidden: Sequence[int] = (), dropout: float = 0.1) -> None:
        super().__init__()
        if in_dim < 1 or out_dim < 1 or any(h < 1 for h in hidden):
            raise InvalidParameterError(f"layer sizes must be >= 1, got in={in_dim}, hidden={list(hidden)}, out={out_dim}")
        if not 0.0 <= dropout < 1.0:
            raise InvalidParameterError(f"dropout must be in [0, 1), got {dropout}")
        layers: list[nn.Module] = []
        prev = in_dim
        for h in hidden:
            layers += [nn.Linear(prev, h), nn.ReLU(), nn.Dropout(dropout)]
            prev = h
        layers.append(nn.Linear(prev, out_dim))
        self.net = nn.Sequential(*layers)
        self.in_dim, self.out_dim = in_dim, out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
