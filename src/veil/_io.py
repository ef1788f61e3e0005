"""Small I/O helpers: atomic writes, hashing, the cache location."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["veil_home", "atomic_write", "atomic_write_text", "atomic_write_json", "sha256_file", "sha256_text"]


def veil_home() -> Path:
    """The cache root: ``$VEIL_HOME`` or ``~/.cache/veil``."""
    env = os.environ.get("VEIL_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "veil"


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
    with atomic_write(path, "w") as fh:
        json.dump(obj, fh, indent=2, sort_keys=False, ensure_ascii=False)
        fh.write("\n")


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
