"""Shared pieces of the ``veil`` command line: option types, checks made before any work, JSON output.

Every check here runs while the arguments are parsed, so a bad value costs a
second and writes nothing. Bad values raise ``typer.BadParameter``: exit code 2
and one line naming the option and what to give instead.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from pathlib import Path
from collections.abc import Iterator
from typing import Annotated, Any, Optional

import typer

__all__ = ["JsonOpt", "ForceOpt", "console", "echo_json", "finite", "positive", "parse_m", "parse_seeds",
           "parse_ints", "parse_floats", "parse_names", "split_names", "check_encoding", "file_options", "warn_line",
           "usage_errors", "EncodingOpt", "LabelOpt", "FormatOpt", "DropEmptyOpt", "TextOpt", "WorkersOpt", "RayOpt"]

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout (messages go to stderr).")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace result files that already exist.")]
WorkersOpt = Annotated[int, typer.Option(min=1, help="Run cells in parallel on a local Ray cluster of this many CPUs "
                                                     "(1: sequential, in this process).")]
RayOpt = Annotated[Optional[str], typer.Option("--ray", help="Address of an existing Ray cluster to run the cells on "
                                                            "(e.g. ray://host:10001).")]
TextOpt = Annotated[str, typer.Option(help="Text column (files only).")]
LabelOpt = Annotated[Optional[str], typer.Option(help="Label column (files only).")]
EncodingOpt = Annotated[Optional[str], typer.Option(help="File encoding, e.g. latin-1 or cp1252 (files only; default "
                                                         "utf-8).")]
FormatOpt = Annotated[Optional[str], typer.Option("--format", help="csv, tsv, jsonl or conllu (files only; default: "
                                                                   "from the suffix).")]
DropEmptyOpt = Annotated[bool, typer.Option("--drop-empty", help="Drop rows with an empty text or label, with a "
                                                                 "warning (files only).")]


def console(as_json: bool = False):
    """A rich console; on stderr when stdout carries JSON."""
    from rich.console import Console

    return Console(stderr=as_json)


def echo_json(obj: Any) -> None:
    """Strict JSON on stdout (NaN refused: it is not JSON)."""
    typer.echo(json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False))


def finite(option: str, value: float, *, low: float | None = None, low_open: bool = True) -> float:
    """``value`` finite (and above ``low``), or a BadParameter naming ``option``."""
    if not math.isfinite(value):
        raise typer.BadParameter(f"{option} must be a finite number, got {value}")
    if low is not None and (value <= low if low_open else value < low):
        raise typer.BadParameter(f"{option} must be {'>' if low_open else '>='} {low:g}, got {value:g}")
    return value


def positive(option: str, value: int | None, minimum: int = 1) -> int | None:
    if value is not None and value < minimum:
        raise typer.BadParameter(f"{option} must be >= {minimum}, got {value}")
    return value


def parse_m(value: str) -> int | None:
    """``--m``: an integer >= 0, or inf for an infinite pool."""
    if value.strip().lower() in ("inf", "infinite"):
        return None
    try:
        m = int(value)
    except ValueError:
        raise typer.BadParameter(f"--m must be an integer >= 0 or 'inf', got {value!r}") from None
    if m < 0:
        raise typer.BadParameter(f"--m must be an integer >= 0 or 'inf', got {m}")
    return m


def parse_seeds(value: str) -> tuple[int, ...]:
    """``--seeds``: comma-separated distinct integers >= 0."""
    try:
        seeds = tuple(int(s) for s in value.split(",") if s.strip())
    except ValueError:
        raise typer.BadParameter(f"--seeds must be comma-separated integers >= 0, e.g. 0,1,2; got {value!r}") from None
    if not seeds:
        raise typer.BadParameter("--seeds needs at least one seed, e.g. 0,1,2")
    if any(s < 0 for s in seeds):
        raise typer.BadParameter(f"--seeds must be integers >= 0, got {value!r}")
    if len(set(seeds)) != len(seeds):
        raise typer.BadParameter(f"--seeds repeats a seed ({value!r}); each seed is one run")
    return seeds


def parse_ints(value: str, option: str, *, minimum: int) -> tuple[int, ...]:
    """Comma-separated integers >= ``minimum``, at least one, no repeats; ``2.7`` is refused, never truncated."""
    try:
        values = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise typer.BadParameter(f"{option} must be comma-separated integers, got {value!r}") from None
    if not values:
        raise typer.BadParameter(f"{option} needs at least one value, got {value!r}")
    if min(values) < minimum:
        raise typer.BadParameter(f"{option} values must be integers >= {minimum}, got {value!r}")
    if len(set(values)) != len(values):
        raise typer.BadParameter(f"{option} repeats a value ({value!r})")
    return values


def parse_floats(value: str, option: str, *, low: float = 0.0, low_open: bool = True,
                 distinct: bool = True) -> tuple[float, ...]:
    """Comma-separated finite numbers > ``low`` (>= with ``low_open=False``), e.g. ``--epsilons 1,3,10``; a
    repeated value (``1,1``, ``1,1.0``) is refused, as by every list option here (each value is one run), unless
    ``distinct=False``."""
    try:
        values = tuple(float(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise typer.BadParameter(f"{option} must be comma-separated numbers, got {value!r}") from None
    if not values:
        raise typer.BadParameter(f"give at least one value for {option}")
    values = tuple(finite(option, v, low=low, low_open=low_open) for v in values)
    if distinct and len(set(values)) != len(values):
        raise typer.BadParameter(f"{option} repeats a value ({value!r}); give each value once (each is one run)")
    return values


def split_names(value: str, option: str) -> list[str]:
    """The names of a comma-separated list option (``--corpora a,b``), stripped, empty entries dropped; a name given
    twice is refused (each name is run once), as :func:`parse_ints`, :func:`parse_floats` and :func:`parse_seeds`
    refuse a repeated number. Every list-of-names option splits through here; whether no name or an unknown one
    will do is the caller's to say (:func:`parse_names` refuses both)."""
    names = [v.strip() for v in value.split(",") if v.strip()]
    repeated = list(dict.fromkeys(n for n in names if names.count(n) > 1))
    if repeated:
        raise typer.BadParameter(f"{option} names one twice ({', '.join(map(repr, repeated))} in {value!r}); give "
                                 "each once")
    return names


def parse_names(value: str, option: str, *, valid: Any = None, what: str = "name") -> list[str]:
    """:func:`split_names`, and at least one name, each among ``valid`` when given (the message lists them)."""
    names = split_names(value, option)
    choices = None if valid is None else list(valid)
    listed = "" if choices is None else f" ({', '.join(choices)})"
    if not names:
        raise typer.BadParameter(f"{option} {value!r} names nothing; give at least one {what}{listed}, "
                                 f"comma-separated, or leave {option} out")
    if choices is not None:
        unknown = [n for n in names if n not in choices]
        if unknown:
            raise typer.BadParameter(f"{option}: unknown {what} {', '.join(map(repr, unknown))}; valid: "
                                     f"{', '.join(choices)}")
    return names


@contextlib.contextmanager
def usage_errors() -> Iterator[None]:
    """Show the library's :class:`~veil.errors.OptionError` (arguments that cannot go together) as this command's
    usage error (``typer.BadParameter``: exit code 2, ``Invalid value: ...``, the command's --help named)."""
    from veil.errors import OptionError

    try:
        yield
    except OptionError as exc:
        raise typer.BadParameter(str(exc)) from None


def check_encoding(encoding: str) -> str:
    """``--encoding``: a codec Python knows (``utf-8``, ``latin-1``, ``cp1252``, ``utf-16``, ...)."""
    import codecs

    try:
        codecs.lookup(encoding)
    except LookupError:
        raise typer.BadParameter(f"--encoding {encoding!r} is not a known encoding; try utf-8, latin-1, "
                                 f"cp1252 or utf-16") from None
    return encoding


def file_options(source: str, *, text: str = "text", label: str | None = None, encoding: str | None = None,
                 format: str | None = None, drop_empty: bool = False) -> dict[str, Any]:
    """Loader keyword arguments for a user file; a built-in corpus name with file options is refused."""
    import veil.corpora as vc

    given = {"--label": label, "--encoding": encoding, "--format": format,
             "--drop-empty": drop_empty or None, "--text": None if text == "text" else text}
    if source in vc.names():
        used = [k for k, v in given.items() if v is not None]
        if used:
            raise typer.BadParameter(f"{', '.join(used)} apply to your own files only, not to the built-in corpus "
                                     f"{source!r}; leave them out")
        return {}
    if not Path(source).exists():
        raise typer.BadParameter(f"{source!r} is neither a built-in corpus ({', '.join(vc.names())}) nor an "
                                 f"existing file")
    opts: dict[str, Any] = {"text": text, "drop_empty": drop_empty}
    if label is not None:
        opts["label"] = label
    if encoding is not None:
        opts["encoding"] = check_encoding(encoding)
    if format is not None:
        opts["format"] = format
    return opts


def warn_line(message: Any, category: type, *_: Any, **__: Any) -> None:
    """``warnings.showwarning`` for the CLI: ``veil: warning: ...`` on one line, no source line."""
    print(f"veil: {category.__name__}: {message}", file=sys.stderr)

