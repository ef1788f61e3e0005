"""DP-SGD's secret randomness: Poisson lots and Gaussian noise, from the OS CSPRNG unless a seed is given.

Opacus draws both from torch's Mersenne Twister, or from ``torchcsprng`` in its ``secure_mode``; torchcsprng has no
release for torch 2.x (opacus#504), so veil draws them itself, from 53-bit uniforms read from ``os.urandom``
(:func:`veil.random.uniform` with ``rng=None``), or, for experiments and tests only, from a seeded
``numpy.random.Generator`` (the same 53-bit construction: ``Generator.random``).

* :func:`poisson_lot`: each of ``n`` examples joins the lot independently with probability
  :func:`sampling_rate` ``(q)``. A uniform ``u`` on the 53-bit grid ``{0, 2^-53, ..., 1 - 2^-53}`` is below ``q``
  with probability exactly ``ceil(q * 2^53) / 2^53`` (an exact float64), which is the rate veil accounts for.
* :func:`gaussian`: N(0, std^2) noise, Box-Muller in float64 on those uniforms, and Opacus' secure-mode recipe
  against floating-point attacks (Holohan and Braghin 2021, arXiv 2107.10138, Sec. 5.1, n = 2): each coordinate
  is (the sum of 4 independent N(0, std^2) draws) / 2, which is N(0, std^2) in real arithmetic. Opacus also draws
  and discards one sample first, to move torch's generator; a CSPRNG needs no such step.
"""

from __future__ import annotations

import math

import numpy as np

from veil.random import standard_normals, uniform

__all__ = ["sampling_rate", "poisson_lot", "gaussian", "standard_normals"]

_GRID = 2.0 ** 53


def sampling_rate(q: float) -> float:
    """The exact probability that a 53-bit uniform is below ``q``: ``ceil(q * 2^53) / 2^53`` (>= q, by < 2^-53)."""
    return math.ceil(float(q) * _GRID) / _GRID


def poisson_lot(rng: np.random.Generator | None, n: int, q: float) -> np.ndarray:
    """The indices of one Poisson lot over ``n`` examples: each in independently with probability
    ``sampling_rate(q)`` (``rng`` None: the OS CSPRNG). May be empty."""
    return np.flatnonzero(uniform(rng, n) < q)


def gaussian(rng: np.random.Generator | None, size: int, std: float) -> np.ndarray:
    """``size`` N(0, std^2) draws (float64): (sum of 4 standard normals) / 2 * std (module docstring)."""
    z = standard_normals(rng, 4 * int(size)).reshape(4, int(size)).sum(axis=0) / 2.0
    return z * float(std)
