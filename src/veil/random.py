"""Randomness handling: turn ``rng`` arguments into numpy and torch generators.

Convention (STYLE.md, practice 2):

* ``None`` -> a generator seeded from the operating system's CSPRNG
  (``secrets``/``os.urandom``). This is the default wherever privacy depends on
  the randomness (mask pools, DP noise, sampling).
* ``int`` -> a reproducible generator, for experiments and tests only.
* ``numpy.random.Generator`` -> used as is (shared state).

Nothing in veil seeds a global generator.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Union

import numpy as np

from veil.errors import InvalidParameterError, InvalidTypeError

if TYPE_CHECKING:  # pragma: no cover
    import torch

RngLike = Union[None, int, np.random.Generator]

__all__ = ["RngLike", "as_generator", "torch_generator", "os_entropy_seed", "is_seeded", "secure_uniform", "uniform",
           "standard_normals"]


def os_entropy_seed(bits: int = 128) -> int:
    """Return a fresh integer seed drawn from the OS CSPRNG."""
    return secrets.randbits(bits)


def secure_uniform(size: int) -> np.ndarray:
    """``size`` floats uniform on [0, 1), each from 53 bits read from the OS CSPRNG (``os.urandom``).

    Used for DP sampling when no seed is given: unlike a PCG64 stream, the
    outputs reveal nothing about each other.
    """
    import os

    size = int(size)
    if size < 0:
        raise InvalidParameterError(f"size must be >= 0, got {size}")
    words = np.frombuffer(os.urandom(8 * size), dtype=np.uint64) >> np.uint64(11)
    return words.astype(np.float64) * (1.0 / 2.0**53)


def uniform(rng: RngLike, size: int) -> np.ndarray:
    """Uniform [0, 1) floats: :func:`secure_uniform` when ``rng`` is None, else ``as_generator(rng).random``."""
    if rng is None:
        return secure_uniform(size)
    return as_generator(rng).random(int(size))


def standard_normals(rng: RngLike, size: int) -> np.ndarray:
    """``size`` N(0, 1) draws (float64) by Box-Muller on 53-bit uniforms (:func:`uniform`: ``rng`` None = the OS
    CSPRNG), for DP noise (word-level metric DP, DP-SGD)."""
    pairs = (int(size) + 1) // 2
    u = uniform(rng, 2 * pairs)
    radius = np.sqrt(-2.0 * np.log1p(-u[:pairs]))  # 1 - u in (0, 1]: finite
    angle = 2.0 * np.pi * u[pairs:]
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:size]


def is_seeded(rng: RngLike) -> bool:
    """True when ``rng`` makes the randomness reproducible (an int or a Generator)."""
    return rng is not None


def as_generator(rng: RngLike = None) -> np.random.Generator:
    """Return a ``numpy.random.Generator`` for ``rng``.

    ``None`` seeds a PCG64 generator with 128 bits from the OS CSPRNG.
    """
    if rng is None:
        return np.random.default_rng(os_entropy_seed())
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (bool, np.bool_)):
        raise InvalidTypeError("rng must be None, an int seed or a numpy.random.Generator, not a bool")
    if isinstance(rng, (int, np.integer)):
        if rng < 0:
            raise InvalidParameterError(f"rng seed must be >= 0, got {rng}")
        return np.random.default_rng(int(rng))
    raise InvalidTypeError(
        f"rng must be None (OS entropy), an int seed or a numpy.random.Generator, got {type(rng).__name__}"
    )


def torch_generator(rng: RngLike = None, device: str = "cpu") -> "torch.Generator":
    """Return a ``torch.Generator`` derived from ``rng``.

    ``None`` seeds it from the OS CSPRNG; an int or a numpy Generator gives a
    reproducible torch generator (a numpy Generator is advanced by one draw).
    """
    import torch

    if rng is None:
        seed = os_entropy_seed(63)
    else:
        seed = int(as_generator(rng).integers(0, 2**63 - 1))
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen
