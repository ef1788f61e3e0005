"""Silence Flower and Ray while an interrupted run winds down (Ctrl-C: exit 130 with one line, no stack).

Once the user has pressed Ctrl-C, the simulation is stopped on purpose: Ray's actors die under Flower's workers,
which then log each ``ActorDiedError`` with its traceback (``flwr`` logger, ERROR), Ray logs its own shutdown, and
threads may print their exceptions. None of that is news to the user, who asked for the stop. :class:`Quiet`
drops those records at every handler that could print them (the handlers of the ``flwr`` and ``ray`` loggers, of
their children and of the root logger, and logging's last resort), and while the stop runs also sends
``sys.stderr`` and the exceptions of other threads nowhere. It never touches a record of another logger, and is
undone as soon as the simulation's thread has ended.
"""

from __future__ import annotations

import io
import logging
import sys
import threading
from typing import Any

__all__ = ["Quiet"]

_ENGINES = ("flwr", "ray")


class Quiet(logging.Filter):
    """``start()`` silences Flower and Ray (see the module docstring); ``end_streams()`` gives ``sys.stderr`` and
    the thread excepthook back; ``end()`` also stops dropping their log records."""

    def __init__(self) -> None:
        super().__init__()
        self._handlers: list[logging.Handler] = []
        self._stderr: Any = None
        self._hook: Any = None

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.split(".")[0] not in _ENGINES

    def start(self) -> "Quiet":
        loggers = [logging.getLogger(), *(logging.getLogger(n) for n in list(logging.root.manager.loggerDict)
                                           if n.split(".")[0] in _ENGINES)]
        handlers = {id(h): h for lg in loggers for h in lg.handlers}
        if logging.lastResort is not None:
            handlers[id(logging.lastResort)] = logging.lastResort
        for handler in handlers.values():
            handler.addFilter(self)
            self._handlers.append(handler)
        self._stderr, sys.stderr = sys.stderr, io.StringIO()
        self._hook, threading.excepthook = threading.excepthook, _swallow
        return self

    def end_streams(self) -> None:
        if self._stderr is not None:
            sys.stderr, self._stderr = self._stderr, None
        if self._hook is not None:
            threading.excepthook, self._hook = self._hook, None

    def end(self) -> None:
        self.end_streams()
        for handler in self._handlers:
            handler.removeFilter(self)
        self._handlers = []


def _swallow(args: Any) -> None:
    """A thread's exception while the interrupted run stops: dropped (the interrupt is what propagates)."""
