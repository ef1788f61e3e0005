"""Where experiment results go, and the checks made on output locations before any work starts.

Experiment commands write to a user folder by default: ``$VEIL_RESULTS`` or
``./veil-results/<method>/``, never into a repository's tracked ``results/`` or
``docs/`` unless that folder is named explicitly (``--results results/texthide``,
as the paper runs do). File names carry what tells runs apart (budget, sizes,
seeds), so a small trial never replaces a paper run, and replacing an existing
result needs ``--force``.

Every check here runs before the heavy work and writes nothing: a typo in an
output path costs a second, not an hour of compute.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veil.errors import InvalidParameterError

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Mapping

    from veil.results import ResultRecord

__all__ = ["RESULTS_ENV", "results_root", "default_results_dir", "check_output_file", "check_output_dir",
           "check_distinct_outputs", "refuse_existing", "existing_record", "tag"]

RESULTS_ENV = "VEIL_RESULTS"


def results_root() -> Path:
    """``$VEIL_RESULTS`` or ``./veil-results``: the default root of every experiment's result folder."""
    env = os.environ.get(RESULTS_ENV)
    return Path(env).expanduser() if env else Path("veil-results")


def default_results_dir(method: str) -> Path:
    return results_root() / method


def _nearest_existing(path: Path) -> Path:
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def _check_creatable(path: Path, option: str) -> None:
    """``path`` (a folder to be created if missing) can be created and written, or a typed error."""
    base = _nearest_existing(path)
    if not base.is_dir():
        raise InvalidParameterError(
            f"{option} {path}: {base} is a file, so no folder can be created under it; choose another {option}")
    if not os.access(base, os.W_OK | os.X_OK):
        raise InvalidParameterError(f"{option} {path}: {base} is not writable; choose a folder you can write to")


def check_output_dir(path: str | os.PathLike, *, option: str = "--results") -> Path:
    """Check that ``path`` is (or can become) a writable folder. Creates nothing."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InvalidParameterError(f"{option} {path} is a file, not a folder; give a folder for the results")
    _check_creatable(path, option)
    return path


def check_output_file(path: str | os.PathLike, *, force: bool = False, option: str = "--out",
                      suffixes: Iterable[str] = ()) -> Path:
    """Check an output file before work: suffix, not a folder, writable parent, no silent replacement."""
    path = Path(path)
    suffixes = tuple(suffixes)
    if suffixes and path.suffix not in suffixes:
        raise InvalidParameterError(f"{option} must end in {' or '.join(suffixes)}, got {path}")
    if path.is_dir():
        raise InvalidParameterError(f"{option} {path} is a folder; give a file name inside it, e.g. {path / 'out'}"
                                    f"{suffixes[0] if suffixes else ''}")
    _check_creatable(path.parent, option)
    refuse_existing(path, force)
    return path


def _same_path(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same resolved path (symbolic links, ``..``, relative), or, when
    both exist, the same file (``os.path.samefile``: hard links, case-insensitive file systems)."""
    try:
        if a.resolve() == b.resolve():
            return True
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except (OSError, RuntimeError):  # unreadable, or a loop of symbolic links: not provably the same
        return False


def check_distinct_outputs(outputs: Mapping[str, str | os.PathLike | None],
                           inputs: Mapping[str, str | os.PathLike | None] | None = None) -> None:
    """Refuse, before any work, a command whose outputs name the same file or folder, or name one of its inputs.

    ``outputs`` and ``inputs`` map an option as the user typed it (``"--out"``, ``"FILE"``) to its path (None: not
    given, skipped). Paths are compared resolved (:func:`_same_path`); the first clash raises
    :class:`~veil.errors.InvalidParameterError` naming both options, and writes nothing.
    """
    given = [(o, Path(p)) for o, p in outputs.items() if p is not None]
    sources = [(o, Path(p)) for o, p in (inputs or {}).items() if p is not None]
    for i, (option, path) in enumerate(given):
        for other, path2 in given[:i]:
            if _same_path(path, path2):
                raise InvalidParameterError(
                    f"{other} and {option} both name {path}: one output would overwrite the other; give {option} "
                    f"its own path, e.g. {option} {_sibling(path, option)}")
        for source, path2 in sources:
            if _same_path(path, path2):
                raise InvalidParameterError(
                    f"{option} {path} is the input {source}: veil never writes over its input; give {option} "
                    f"another path, e.g. {option} {_sibling(path, option)}")


def _sibling(path: Path, option: str) -> Path:
    """A path beside ``path`` named after ``option`` (``notes.txt``, ``--spans`` -> ``notes.spans.txt``)."""
    tag = option.lstrip("-").replace("-", "_").lower() or "out"
    return path.with_name(f"{path.stem}.{tag}{path.suffix}" if path.suffix else f"{path.name}-{tag}")


def refuse_existing(path: str | os.PathLike, force: bool, *, option: str = "--force") -> None:
    """A typed error when ``path`` exists and ``force`` is not set."""
    path = Path(path)
    if path.exists() and not force:
        raise InvalidParameterError(f"{path} exists; pass {option} to replace it, or choose another output")


def existing_record(path: str | os.PathLike, requested: Mapping[str, Any], *, force: bool = False,
                    part: str | None = None, ignore: Iterable[str] = (), keep: bool = True,
                    view: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
                    option: str = "--force") -> ResultRecord | None:
    """The one check of every writer whose output may already exist: this configuration's record, or an error.

    None when ``path`` is absent or ``force``. Otherwise the record is read (a damaged, empty or non-UTF-8 file is a
    :class:`~veil.errors.DataFormatError` naming it and the fix) and its configuration compared with
    ``requested`` (:func:`veil.results.check_same_config`: another configuration is a
    :class:`~veil.errors.StaleResultError` naming the differing keys and ``option``). ``part``: the key of
    ``record.config`` that holds the run's configuration (e.g. ``"cell"``); None compares the record's top-level
    config on the keys of ``requested`` only (the record adds derived keys of its own). ``view``: instead, a
    function from the stored config to the settings compared (e.g. effective values a record stores elsewhere).
    ``keep``: True for
    resumable writers (the record is returned, to be reused); False for single-run commands, where a record of
    this same configuration is refused too (``exists; pass --force``), as it always was.
    """
    from collections.abc import Mapping as _Mapping

    from veil.errors import DataFormatError
    from veil.results import ResultRecord, check_same_config

    path = Path(path)
    if force or not path.exists():
        return None
    if path.is_dir():
        raise InvalidParameterError(f"{path} is a folder where a result file belongs; move it away or choose "
                                    "another output")
    try:
        record = ResultRecord.read(path)
    except DataFormatError as exc:
        if keep:
            raise
        raise DataFormatError(f"{path} exists; pass {option} to replace it, or choose another output ({exc})") \
            from None
    stored: Any = record.config.get(part) if part is not None else record.config
    stored = dict(stored) if isinstance(stored, _Mapping) else {}
    if view is not None:
        stored = dict(view(stored))
    elif part is None:
        stored = {k: stored[k] for k in requested if k in stored}
    check_same_config(stored, requested, path, ignore=ignore, force_option=option)
    if not keep:
        raise InvalidParameterError(f"{path} exists; pass {option} to replace it, or choose another output (it holds "
                                    "a result of this same configuration)")
    return record


def tag(**parts: object) -> str:
    """A file-name fragment from run parameters: ``tag(ep=300, bs=64, n=None)`` -> ``ep300-bs64``.

    None values are left out; sequences are joined with ``_``; the characters kept
    are letters, digits, ``.`` and ``_``.
    """
    out = []
    for key, value in parts.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            value = "_".join(str(v) for v in value)
        text = "".join(ch for ch in f"{key}{value}" if ch.isalnum() or ch in "._")
        out.append(text)
    return "-".join(out)
