"""Small I/O helpers: atomic writes, hashing, the cache location."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["veil_home", "writable_dir", "atomic_write", "atomic_write_text", "atomic_write_json", "sha256_file",
           "sha256_text", "OWNED_MARKER", "mark_owned", "is_owned", "remove_owned_dir", "publish_owned_dir",
           "read_json"]


def _home_path() -> tuple[Path, str]:
    """The cache root and how to name it in messages (no checks)."""
    env = os.environ.get("VEIL_HOME")
    if env:
        return Path(env).expanduser(), f"VEIL_HOME={env}"
    return Path.home() / ".cache" / "veil", f"the cache folder {Path.home() / '.cache' / 'veil'} (VEIL_HOME is unset)"


def _blocking_file(path: Path) -> Path | None:
    """``path`` or its nearest existing ancestor when that is not a folder, else None (a few ``stat`` calls)."""
    for candidate in (path, *path.parents):
        try:
            mode = candidate.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue  # does not exist (yet), or an ancestor is a file: look further up
        except OSError:
            return None  # unreadable: the write check reports it where veil writes
        return None if stat.S_ISDIR(mode) else candidate
    return None


_FIX_HOME = "set VEIL_HOME to a writable folder"


def veil_home() -> Path:
    """The cache root: ``$VEIL_HOME`` or ``~/.cache/veil``.

    Raises :class:`~veil.errors.CacheLocationError` when that path is a file or
    lies under a file (a few ``stat`` calls, nothing is created). Whether it
    can be written is checked only where veil writes (:func:`writable_dir`),
    so a populated read-only cache still loads.
    """
    home, named = _home_path()
    blocker = _blocking_file(home)
    if blocker is not None:
        from veil.errors import CacheLocationError

        where = "is a file, not a folder" if blocker == home else f"lies under {blocker}, which is a file"
        raise CacheLocationError(f"{named} {where}; {_FIX_HOME}")
    return home


def writable_dir(path: str | os.PathLike, *, create: bool = True) -> Path:
    """Check that files can be written in the folder ``path`` (creating it when ``create``); return it.

    The check really writes (and removes) an empty temporary file, so it also
    catches read-only mounts, which ``os.access`` misses when running as root.
    With ``create=False`` a missing folder is checked through its nearest
    existing ancestor and nothing is created. Failures raise
    :class:`~veil.errors.CacheLocationError`; for folders inside the cache the
    message names ``VEIL_HOME``.
    """
    path = Path(path)
    probe = path
    try:
        if create:
            path.mkdir(parents=True, exist_ok=True)
        else:
            while not probe.is_dir() and probe != probe.parent:
                if probe.exists():
                    raise NotADirectoryError(f"{probe} is not a folder")
                probe = probe.parent
        fd, tmp = tempfile.mkstemp(prefix=".veil-write-check-", dir=probe)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        from veil.errors import CacheLocationError

        home, named = _home_path()
        inside = path == home or home in path.parents
        reason = f"cannot write in {path} ({type(exc).__name__}: {exc.strerror or exc})"
        message = f"{named}: {reason}; {_FIX_HOME}" if inside else f"{reason}; choose a writable folder"
        raise CacheLocationError(message) from None
    return path


def _default_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8",
                 perms: int | None = None) -> Iterator[IO[Any]]:
    """Write ``path`` through a temporary file in the same folder, then rename.

    A crash inside the block leaves ``path`` untouched and removes the temporary
    file. ``perms`` sets the file mode (e.g. ``0o600`` for secrets) before the
    rename, so the file never exists with looser permissions.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates 0o600 files; ordinary outputs get the usual umask-based mode
        os.fchmod(fd, _default_mode() if perms is None else perms)
        binary = "b" in mode
        with os.fdopen(fd, mode, encoding=None if binary else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_write(path, "w") as fh:
        fh.write(text)


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as strict JSON: NaN and infinities are refused (bare ``NaN`` is not JSON).

    The object is serialised before the file is opened, so a refusal writes nothing.
    """
    try:
        text = json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:
        from veil.errors import InvalidParameterError

        raise InvalidParameterError(
            f"refusing to write {path}: a value is NaN or infinite ({exc}); JSON has no such numbers. "
            "Check the run's inputs (a NaN learning rate, a diverged loss) and re-run") from None
    with atomic_write(path, "w") as fh:
        fh.write(text + "\n")


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- folders veil made (and may remove)
OWNED_MARKER = ".veil-owned"


def mark_owned(folder: str | os.PathLike, what: str) -> Path:
    """Mark ``folder`` (created if missing) as written by veil, so that ``--force`` may later replace it.

    The marker is a small JSON file (``.veil-owned``: what veil wrote there, and when). Only folders that carry
    it are ever removed by :func:`remove_owned_dir`: a user's folder given to ``--record ... --force`` by
    mistake is refused, never deleted.
    """
    import datetime

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(folder / OWNED_MARKER, {"by": "veil", "what": what,
                                              "created": datetime.datetime.now(datetime.timezone.utc).isoformat()})
    return folder


def is_owned(folder: str | os.PathLike) -> bool:
    """True when ``folder`` is a folder that carries veil's marker (see :func:`mark_owned`)."""
    marker = Path(folder) / OWNED_MARKER
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text(encoding="utf-8")).get("by") == "veil"
    except (OSError, ValueError, AttributeError):
        return False


def remove_owned_dir(folder: str | os.PathLike, *, option: str = "--force", ignore_missing: bool = True) -> None:
    """Remove ``folder`` only if veil wrote it (it carries :data:`OWNED_MARKER`); otherwise a typed error.

    The error (:class:`~veil.errors.NotOwnedError`, exit 2 in the CLI) names the folder and says to choose
    another path: veil never deletes a folder it cannot tell is its own, ``option`` or not.
    """
    import shutil

    folder = Path(folder)
    if not folder.exists() and not folder.is_symlink():
        if ignore_missing:
            return
        raise FileNotFoundError(folder)
    if folder.is_symlink() or not folder.is_dir() or not is_owned(folder):
        from veil.errors import NotOwnedError

        kind = "a link" if folder.is_symlink() else ("a folder" if folder.is_dir() else "a file")
        raise NotOwnedError(
            f"{folder} exists and is {kind} veil did not write (no {OWNED_MARKER} marker in it), so {option} will "
            f"not remove it; choose another path for veil's output, or move that folder away yourself")
    shutil.rmtree(folder)


def publish_owned_dir(folder: str | os.PathLike, fill: Callable[[Path], None], what: str) -> Path:
    """Write a folder veil owns as one step: ``fill(tmp)`` writes the files into a new private sibling folder,
    which is marked as veil's (``what`` in its marker), given the permissions any other veil output gets, and
    swapped in for ``folder``; an existing ``folder`` is removed first only if veil wrote it
    (:func:`remove_owned_dir`). A reader never sees a half-written folder, and the sibling is removed on any
    failure (Ctrl-C included)."""
    import shutil

    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        fill(tmp)
        mark_owned(tmp, what)
        os.chmod(tmp, 0o777 & ~_current_umask())  # mkdtemp makes it private; the folder is as any veil output
        remove_owned_dir(folder)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def _current_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def read_json(path: str | os.PathLike, *, what: str = "result file", fix: str | None = None) -> Any:
    """Read a JSON file veil wrote; a damaged one (empty, truncated, not UTF-8, not JSON) is a typed error.

    The error (:class:`~veil.errors.DataFormatError`) names the file and the fix (``fix``, or: delete the file
    or re-run with ``--force``), so a damaged record is never taken as done nor crashes with a traceback.
    """
    from veil.errors import DataFormatError

    path = Path(path)
    fix = fix or f"delete {path} (or re-run with --force) so that it is made again"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataFormatError(f"damaged {what} {path}: not UTF-8 text; {fix}") from None
    if not text.strip():
        raise DataFormatError(f"damaged {what} {path}: the file is empty; {fix}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"damaged {what} {path}: not valid JSON ({exc.msg} at line {exc.lineno}); {fix}") \
            from None
