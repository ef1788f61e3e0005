"""Progress for long work: a rich bar in a terminal, periodic log lines anywhere else.

Outside a terminal (CI, log files, ``nohup``) a bar would print nothing useful, and
a silent command looks hung. So :func:`progress_bar` writes one line to stderr
at the start, then at least every ``interval`` seconds or every ``step`` of the
work (10% by default), whichever comes first, each with the count, the rate and an
estimate of the time left; and one line at the end. No heavy imports.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO

__all__ = ["progress_bar", "LogProgress", "format_seconds"]

#: seconds between two log lines outside a terminal (``VEIL_PROGRESS_INTERVAL`` overrides it)
DEFAULT_INTERVAL = 30.0


def format_seconds(seconds: float) -> str:
    """``75`` -> ``1m15s``; ``3725`` -> ``1h02m``; under a minute -> ``42s``."""
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, sec = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class LogProgress:
    """Plain-text progress: ``veil: <description> 40/100 (40%), 2.1/s, ~29s left``.

    ``clock`` is injectable for tests; ``stream`` defaults to stderr.
    """

    def __init__(self, total: int, description: str, *, interval: float | None = None, fraction: float = 0.1,
                 stream: IO[str] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = max(0, int(total))
        self.description = description
        if interval is None:
            try:
                interval = float(os.environ.get("VEIL_PROGRESS_INTERVAL", DEFAULT_INTERVAL))
            except ValueError:
                interval = DEFAULT_INTERVAL
        self.interval = interval
        self.step = max(1, int(self.total * fraction)) if self.total else 1
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.done = 0
        self.start = clock()
        self._last_time = self.start
        self._last_done = 0
        self._emit(f"veil: {description}: started ({self.total} steps)")

    def _emit(self, line: str) -> None:
        try:
            print(line, file=self.stream, flush=True)
        except (OSError, ValueError):  # a closed stream must never break the work
            pass

    def line(self) -> str:
        elapsed = self.clock() - self.start
        pct = f" ({100.0 * self.done / self.total:.0f}%)" if self.total else ""
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = f", ~{format_seconds((self.total - self.done) / rate)} left" if rate > 0 and self.total else ""
        return f"veil: {self.description}: {self.done}/{self.total}{pct}, {format_seconds(elapsed)} elapsed{eta}"

    def advance(self, k: int = 1) -> None:
        self.done += int(k)
        now = self.clock()
        if (self.done - self._last_done >= self.step or now - self._last_time >= self.interval) \
                and self.done < self.total:
            self._last_time, self._last_done = now, self.done
            self._emit(self.line())

    def close(self) -> None:
        elapsed = self.clock() - self.start
        self._emit(f"veil: {self.description}: done {self.done}/{self.total} in {format_seconds(elapsed)}")


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def progress_bar(total: int, description: str, enabled: bool) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(k)``.

    Disabled: does nothing. In a terminal: a transient rich bar on stderr with the
    time left. Elsewhere: :class:`LogProgress` lines on stderr (start, every ~30 s or
    10%, end), so logs show that long work is alive and when it will finish.
    """
    if not enabled:
        yield lambda k=1: None
        return
    from rich.console import Console

    console = Console(stderr=True)
    if console.is_terminal or console.is_jupyter:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task(description, total=total)
            yield lambda k=1: bar.advance(task, k)
        return
    log = LogProgress(total, description)
    completed = False
    try:
        yield log.advance
        completed = True
    finally:
        if completed:
            log.close()
