"""Parameter and input validation shared by every layer (ground: imports nothing of veil but errors and random).

Every ``check_*`` helper returns the validated value or raises a typed :mod:`veil.errors` exception whose message
says what to do: wrong type -> :class:`~veil.errors.InvalidTypeError`, value out of range ->
:class:`~veil.errors.InvalidParameterError`, malformed data -> :class:`~veil.errors.DataFormatError`.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

__all__ = ["check_int", "check_real", "check_epsilon", "check_choice", "check_rng", "seeded_rng",
           "check_sentence_embeddings", "check_documents", "as_vectors", "MEANINGFUL_EPSILON"]


def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None,
              hint: str = "") -> int:
    """``value`` as an int (bools refused), within [minimum, maximum]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"{name} must be an int, got {type(value).__name__} {value!r}{hint}")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        lo = "-inf" if minimum is None else minimum
        hi = "inf" if maximum is None else maximum
        raise InvalidParameterError(f"{name} must be in [{lo}, {hi}], got {value}{hint}")
    return value


def check_real(name: str, value: Any, *, low: float, high: float, low_open: bool = False, high_open: bool = False,
               hint: str = "") -> float:
    """``value`` as a finite float within the interval (bools refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise InvalidTypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}{hint}")
    value = float(value)
    ok = np.isfinite(value) and (value > low if low_open else value >= low) and \
        (value < high if high_open else value <= high)
    if not ok:
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise InvalidParameterError(f"{name} must be in {interval}, got {value!r}{hint}")
    return value


#: Above this epsilon a DP guarantee bounds likelihood ratios by more than e^50 (~5e21): it constrains nothing an
#: attacker could measure. The SentDP paper's experiments stop at epsilon = 35 (Fig. 4); docs/sentdp.md says so.
MEANINGFUL_EPSILON = 50.0


def check_epsilon(epsilon: Any, *, what: str = "SentDP") -> float:
    """A finite epsilon > 0; warns (:class:`PrivacyLeakWarning`) above :data:`MEANINGFUL_EPSILON`."""
    value = check_real("epsilon", epsilon, low=0.0, high=np.inf, low_open=True, high_open=True,
                       hint=f"; {what} needs a finite epsilon > 0")
    if value > MEANINGFUL_EPSILON:
        import warnings

        from veil.errors import PrivacyLeakWarning

        warnings.warn(f"epsilon={value:g} is above {MEANINGFUL_EPSILON:g}: the {what} guarantee bounds likelihood "
                      f"ratios only by e^{value:g}, which protects nothing measurable; use epsilon <= "
                      f"{MEANINGFUL_EPSILON:g} for a meaningful guarantee", PrivacyLeakWarning, stacklevel=3)
    return value


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """``value`` must be one of ``choices`` (strings)."""
    choices = list(choices)
    if not isinstance(value, str):
        raise InvalidTypeError(f"{name} must be one of {', '.join(map(repr, choices))}, got {type(value).__name__}")
    if value not in choices:
        raise InvalidParameterError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def check_rng(rng: Any) -> None:
    """``rng`` must be None (OS entropy), a non-negative int seed or a numpy Generator."""
    if rng is None or isinstance(rng, np.random.Generator):
        return
    if isinstance(rng, (bool, np.bool_)) or not isinstance(rng, numbers.Integral):
        raise InvalidTypeError("rng must be None (OS entropy), an int seed or a numpy.random.Generator, "
                               f"got {type(rng).__name__}")
    if rng < 0:
        raise InvalidParameterError(f"rng seed must be >= 0, got {rng}")


def seeded_rng(rng: Any, owner: str, what: str) -> np.random.Generator | None:
    """Validate ``rng``; None stays None (the caller draws from the OS CSPRNG), a seed warns and becomes a Generator.

    ``owner`` names the mechanism and ``what`` its randomness in the
    :class:`~veil.errors.PrivacyLeakWarning` (e.g. ``"Truncation"``, ``"noise"``).
    """
    import warnings

    from veil.errors import PrivacyLeakWarning
    from veil.random import as_generator

    check_rng(rng)
    if rng is None:
        return None
    warnings.warn(f"{owner} with a seeded rng: its {what} is reproducible by anyone who knows the seed; "
                  f"use rng=None for releases", PrivacyLeakWarning, stacklevel=3)
    return as_generator(rng)


def check_sentence_embeddings(S: Any, dim: int, *, against: str, index: int | None = None) -> np.ndarray:
    """One document's sentence embeddings: a finite real array (k >= 1, dim).

    ``against`` names what fixes ``dim`` in the mismatch message (e.g.
    ``"the candidates have"``); ``index`` prefixes messages with
    ``documents[index]``.
    """
    where = "" if index is None else f"documents[{index}]: "
    if not isinstance(S, np.ndarray):
        raise InvalidTypeError(f"{where}a document's sentence embeddings must be a numpy array (k, d), "
                               f"not {type(S).__name__}")
    if S.ndim != 2:
        raise DataFormatError(f"{where}sentence embeddings must be 2-D (k, d), got shape {S.shape}")
    if S.shape[0] < 1:
        raise DataFormatError(f"{where}the document has no sentences; SentDP needs at least one sentence embedding")
    if S.shape[1] != dim:
        raise DataFormatError(f"{where}sentence embeddings have dimension {S.shape[1]} but {against} {dim}; "
                              f"encode the documents and the public data with the same encoder (and recoder)")
    real = (np.issubdtype(S.dtype, np.floating) or np.issubdtype(S.dtype, np.integer)) and S.dtype != np.bool_
    if not real or not np.isfinite(S).all():
        raise DataFormatError(f"{where}sentence embeddings contain NaN, infinite or non-real values; re-encode "
                              f"the document")
    return S


def check_documents(documents: Any, dim: int, *, against: str) -> list[np.ndarray]:
    """A sequence of documents' sentence embeddings, each checked with :func:`check_sentence_embeddings`."""
    if isinstance(documents, np.ndarray) or not isinstance(documents, Sequence):
        raise InvalidTypeError("documents must be a sequence (list) of (k, d) arrays, one per document")
    return [check_sentence_embeddings(S, dim, against=against, index=i) for i, S in enumerate(documents)]


def as_vectors(name: str, x: Any, *, dim: int | None = None, allow_empty: bool = False) -> np.ndarray:
    """``x`` as a finite 2-D float array (torch tensors are detached to numpy), or a typed error."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch tensor, without importing torch
        x = x.detach().cpu().numpy()
    if not isinstance(x, np.ndarray):
        raise InvalidTypeError(f"{name} must be a numpy array (or torch tensor) of shape (n, d), "
                               f"not {type(x).__name__}")
    if x.dtype.kind not in "iuf":
        raise InvalidTypeError(f"{name} must hold real numbers, got dtype {x.dtype}")
    if x.ndim != 2:
        raise DataFormatError(f"{name} must have shape (n, d), got {x.shape}; reshape one vector with x[None, :]")
    if x.shape[0] == 0 and not allow_empty:
        raise DataFormatError(f"{name} is empty; pass at least one vector")
    if x.shape[1] == 0:
        raise DataFormatError(f"{name} has dimension 0")
    if dim is not None and x.shape[1] != dim:
        raise DataFormatError(f"{name} has dimension {x.shape[1]} but {dim} is expected; encode both sides with "
                              "the same encoder")
    if not np.isfinite(x).all():
        bad = int((~np.isfinite(x)).any(axis=1).sum())
        raise DataFormatError(f"{name} contains NaN or inf in {bad} row(s); drop or recompute those vectors")
    return x
