"""The ``veil`` command line: a thin layer over the Python API.

Exit codes: 0 success; 1 a check failed (e.g. a privacy audit) or an
operating-system error (disk full, permission denied); 2 a user error (any
:class:`veil.errors.VeilError`, a bad option) with one line saying what to do;
130 interrupted (Ctrl-C), after which no half-written file exists. ``--debug``
shows tracebacks instead. Every argument and output location is checked before
any heavy work starts.

Layout: :mod:`veil.cli.root` holds the root app and registers one module per command group (each exposes
``register(app)``); :mod:`veil.cli.entry` holds :func:`main`, the console entry point (pyproject.toml names
``veil.cli:main``); :mod:`veil.cli.common` holds the option types and checks the commands share.
"""

from __future__ import annotations

from veil.cli.entry import main
from veil.cli.root import app

__all__ = ["app", "main"]
