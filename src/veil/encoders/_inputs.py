"""Validation of encoder inputs and a quiet-by-default progress bar (no heavy imports)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

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


@contextlib.contextmanager
def progress_bar(total: int, description: str, enabled: bool) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(k)``; draws a rich bar on stderr when ``enabled`` and stderr is a terminal."""
    if not enabled:
        yield lambda k: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    if not (console.is_terminal or console.is_jupyter):  # a log file gets no bar (rich would only add a blank line)
        yield lambda k: None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda k: bar.advance(task, k)
