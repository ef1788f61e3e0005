"""MLP heads on top of (protected) representations.

Randomness (STYLE.md practice 2): an :class:`MLPHead` draws its initial
weights and its dropout masks from its own ``torch.Generator`` (from ``rng``),
never from torch's global generator, so building or training a head neither
depends on nor changes what a user draws from ``torch.rand`` & co.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from veil.errors import InvalidParameterError, InvalidTypeError

__all__ = ["MLPHead", "GeneratorDropout"]


def _as_torch_generator(rng: Any) -> torch.Generator:
    """A CPU ``torch.Generator``: ``rng`` itself if it is one (shared), else :func:`veil.random.torch_generator`'s."""
    if isinstance(rng, torch.Generator):
        if rng.device.type != "cpu":
            raise InvalidParameterError(f"rng must be a CPU torch.Generator, got one on {rng.device}")
        return rng
    from veil.random import torch_generator

    return torch_generator(rng)


class GeneratorDropout(nn.Module):
    """Inverted dropout (as :class:`torch.nn.Dropout`) whose masks come from ``generator``, not the global RNG.

    Masks are drawn on the generator's device (CPU) and moved to the input's device.
    """

    def __init__(self, p: float, generator: torch.Generator) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise InvalidParameterError(f"dropout must be in [0, 1), got {p}")
        self.p, self.generator = float(p), generator

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = torch.empty(x.shape, dtype=x.dtype, device=self.generator.device)
        keep.bernoulli_(1.0 - self.p, generator=self.generator)
        return x * keep.to(x.device) / (1.0 - self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def _init_linear(layer: nn.Linear, generator: torch.Generator) -> None:
    """``nn.Linear.reset_parameters`` (Kaiming-uniform weight, U(+-1/sqrt(fan_in)) bias) drawn from ``generator``."""
    nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
    bound = 1.0 / math.sqrt(layer.in_features)
    nn.init.uniform_(layer.bias, -bound, bound, generator=generator)


class MLPHead(nn.Module):
    """``in_dim -> hidden... -> out_dim`` with ReLU and dropout between layers.

    TextHide (Huang et al. 2020, Sec. 4.1) trains an MLP with three hidden
    layers of the encoder's width on the encrypted representations:
    ``MLPHead(384, 2, hidden=(384, 384, 384))``.

    ``rng``: None (default, OS entropy), an int seed / ``numpy.random.Generator``
    (reproducible: experiments and tests), or a CPU ``torch.Generator`` (used as
    is, shared). It draws the initial weights (torch's default ``nn.Linear``
    initialisation) and then the dropout masks; torch's global generator is
    neither read nor advanced.
    """

    def __init__(self, in_dim: int, out_dim: int, *, hidden: Sequence[int] = (), dropout: float = 0.1,
                 rng: Any = None) -> None:
        super().__init__()
        if in_dim < 1 or out_dim < 1 or any(h < 1 for h in hidden):
            raise InvalidParameterError(f"layer sizes must be >= 1, got in={in_dim}, hidden={list(hidden)}, out={out_dim}")
        if not 0.0 <= dropout < 1.0:
            raise InvalidParameterError(f"dropout must be in [0, 1), got {dropout}")
        if rng is not None and not isinstance(rng, torch.Generator):
            from veil.validation import check_rng

            try:
                check_rng(rng)
            except InvalidTypeError:
                raise InvalidTypeError("rng must be None (OS entropy), an int seed, a numpy.random.Generator or a "
                                       f"CPU torch.Generator, got {type(rng).__name__}") from None
        generator = _as_torch_generator(rng)
        layers: list[nn.Module] = []
        prev = in_dim
        sizes = [*hidden, out_dim]
        for i, h in enumerate(sizes):
            layer = nn.utils.skip_init(nn.Linear, prev, h)  # allocated without drawing from the global generator
            _init_linear(layer, generator)
            layers.append(layer)
            if i < len(hidden):
                layers += [nn.ReLU(), GeneratorDropout(dropout, generator)]
            prev = h
        self.net = nn.Sequential(*layers)
        self.in_dim, self.out_dim = in_dim, out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
