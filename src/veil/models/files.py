"""Reading the model files veil writes (``.pt``): tensors and plain values only, and typed errors for the rest.

:func:`file_problem` checks a cached weights file against the size and sha256 its manifest recorded (a truncated
or altered file is named as damaged, never loaded). Every ``.pt`` file veil loads goes through :func:`load_tensors`:
``torch.load(..., weights_only=True)`` (so a foreign file cannot run code while it is read), and a missing, empty,
truncated or foreign file becomes one typed error that names the file and the fix, never a traceback. ``keys``
names what a veil file of this kind holds, so a valid torch file written by something else is refused too.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from veil.errors import DataFormatError, ResourceMissingError

__all__ = ["load_tensors", "file_problem"]


def load_tensors(source: str | os.PathLike | bytes, *, what: str, fix: str, keys: Iterable[str] = (),
                 name: str | os.PathLike | None = None) -> dict[str, Any]:
    """The dict saved in the ``.pt`` file ``source`` (a path, or its bytes with ``name`` naming the file).

    ``what`` names the kind of file in messages ("the biaffine parser"), ``fix`` says how to make a good one
    (a command that exists). Raises :class:`~veil.errors.ResourceMissingError` when the file is missing and
    :class:`~veil.errors.DataFormatError` when it is empty, damaged, or not a veil file of this kind.
    """
    import torch

    if isinstance(source, bytes):
        where, data = str(name or "(bytes)"), source
    else:
        path = Path(source)
        where = str(path)
        if not path.is_file():
            raise ResourceMissingError(what, fix, message=f"{what} {path} does not exist (or is not a file); {fix}")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise DataFormatError(f"cannot read {what} {path} ({exc.strerror or exc}); {fix}") from None
    if not data:
        raise DataFormatError(f"{what} {where} is empty (0 bytes); {fix}")
    try:
        blob = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001  truncated zip, pickle of foreign objects, not a torch file at all
        reason = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise DataFormatError(f"{what} {where} is damaged or not a file veil wrote ({type(exc).__name__}: "
                              f"{reason}); it was not used. {fix}") from None
    missing = [k for k in keys if not isinstance(blob, dict) or k not in blob]
    if missing:
        raise DataFormatError(f"{what} {where} is a torch file but not one veil wrote (no {', '.join(missing)}); "
                              f"it was not used. {fix}")
    return blob


def file_problem(path: str | os.PathLike, *, sha256: Any, size: Any = None) -> str | None:
    """None when the file ``path`` has the ``size`` (bytes; None: not recorded) and ``sha256`` its manifest
    recorded; otherwise what is wrong, in words (missing, its size, its digest)."""
    from veil._io import sha256_file

    path = Path(path)
    if not path.is_file():
        return f"{path.name} is missing"
    actual = path.stat().st_size
    if isinstance(size, int) and not isinstance(size, bool) and actual != size:
        return f"{path.name} has {actual:,} bytes, its manifest says {size:,} (truncated or replaced)"
    if not isinstance(sha256, str) or not sha256:
        return "its manifest names no sha256"
    try:
        digest = sha256_file(path)
    except OSError as exc:
        return f"{path.name} cannot be read ({exc.strerror or exc})"
    if digest != sha256:
        return (f"{path.name} ({actual:,} bytes) has sha256 {digest[:12]}..., its manifest says {sha256[:12]}... "
                "(truncated or altered)")
    return None
