"""The ``veil`` console entry point, :func:`main`: the exit codes listed in :mod:`veil.cli` (0, 1, 2, 130), one
line per error unless ``--debug``, and Ctrl-C that leaves no half-written file.
"""

from __future__ import annotations

import sys

import typer

from veil.cli.root import app
from veil.errors import VeilError

__all__ = ["main", "INTERRUPTED"]


def _one_line_usage_error(exc: Exception) -> str:
    ctx = getattr(exc, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    fmt = getattr(exc, "format_message", None)
    return f"veil: error: {fmt() if fmt else exc}{where}"


INTERRUPTED = ("veil: interrupted; no half-written file was kept (finished result files stay); "
               "re-run the same command to start again")


def _interruptible() -> None:
    """Make Ctrl-C (SIGINT) raise KeyboardInterrupt even where the parent ignores it (shell background jobs)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code (0 ok, 1 failed check or OS error, 2 user error, 130 interrupted)."""
    import warnings

    from click.exceptions import ClickException, NoArgsIsHelpError

    from veil.cli.common import warn_line

    args = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in args
    _interruptible()
    previous = warnings.showwarning
    if not debug:
        warnings.showwarning = warn_line
    try:
        rc = app(args=args, prog_name="veil", standalone_mode=False)
    except typer.Exit as exc:
        rc = exc.exit_code
    except NoArgsIsHelpError as exc:
        exc.show()
        return 2
    except ClickException as exc:  # usage errors, bad parameters: one line, no traceback
        if debug:
            raise
        typer.echo(_one_line_usage_error(exc), err=True)
        return int(getattr(exc, "exit_code", 2) or 2)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo(INTERRUPTED, err=True)
        return _interrupted(argv)
    except VeilError as exc:
        if debug:
            raise
        typer.echo(f"veil: error: {exc}", err=True)
        return 2
    except OSError as exc:  # disk full, permission denied, ...: not a bug in veil, but not the user's typo either
        if debug:
            raise
        typer.echo(f"veil: error: {exc}; re-run with --debug for the traceback", err=True)
        return 1
    finally:
        warnings.showwarning = previous
    rc = rc if isinstance(rc, int) and not isinstance(rc, bool) else 0
    if rc == 130:  # typer turns Ctrl-C inside a command into Exit(130)
        typer.echo(INTERRUPTED, err=True)
        return _interrupted(argv)
    return rc


def _interrupted(argv: list[str] | None) -> int:
    """130; run as the ``veil`` program after Ray was loaded, the process ends here (``os._exit``).

    Ray's threads can crash the interpreter's shutdown (SIGSEGV, a core dump instead of 130) after a Ctrl-C that
    came while a cluster was starting; every file is already complete or removed at this point (atomic writes),
    so nothing is lost by skipping that shutdown. Called in-process (``main([...])``, the tests), it only returns.
    """
    if argv is None and "ray" in sys.modules:
        import os

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(130)
    return 130
