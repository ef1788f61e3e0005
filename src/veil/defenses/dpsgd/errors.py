"""The typed error of DP-SGD (light: importing it imports no torch)."""

from __future__ import annotations

from veil.errors import InvalidParameterError

__all__ = ["UnsupportedModelError"]


class UnsupportedModelError(InvalidParameterError):
    """A model DP-SGD (Opacus) cannot train with per-example clipping: BatchNorm (it mixes the examples of a lot),
    plain LSTMs, modules with buffers, ... The message lists Opacus' reasons and what to use instead."""
