"""Validation of encoder inputs (no heavy imports); ``progress_bar`` lives in :mod:`veil.progress`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.progress import progress_bar

__all__ = ["check_texts", "check_int", "check_bool", "progress_bar"]


def check_texts(texts: Any) -> list[str]:
    """``texts`` as a list of non-empty strings, or a typed error naming the bad index."""
    if isinstance(texts, (str, bytes)):
        raise InvalidTypeError("texts must be a list of strings, not a single string; pass [text] to encode one")
    if not isinstance(texts, Iterable):
        raise InvalidTypeError(f"texts must be a list of strings, not {type(texts).__name__}")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise DataFormatError(f"texts[{i}] is a {type(text).__name__}, not a str; convert or drop it")
        if not text.strip():
            raise DataFormatError(f"texts[{i}] is empty or whitespace only; drop empty texts before encoding")
        if "\x00" in text:
            raise DataFormatError(f"texts[{i}] contains a NUL byte (\\x00) at position {text.index(chr(0))}: "
                                  "the file is probably binary or UTF-16; remove NUL bytes or load it with the "
                                  "right encoding")
    return out


def check_int(name: str, value: Any, *, low: int, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]``, or a typed error."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise InvalidParameterError(f"{name} must be {bound}, got {value}")
    return int(value)


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidTypeError(f"{name} must be True or False, not {type(value).__name__}")
    return value
