"""Small I/O helpers: atomic writes, hashing, the cache location."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["veil_home", "writable_dir", "atomic_write", "atomic_write_text", "atomic_write_json", "sha256_file",
           "sha256_text"]


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
