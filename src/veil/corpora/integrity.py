"""Integrity of a saved corpus folder: ``meta.json`` records the row count and sha256 of ``corpus.jsonl``.

:meth:`Corpus.save <veil.corpora.base.Corpus.save>` records ``size`` (rows)
and ``corpus_sha256``; reading checks both before a row is parsed, so a
truncated, edited or half-copied ``corpus.jsonl`` and a missing or
unparseable ``meta.json`` are refused with
:class:`~veil.errors.CacheCorruptError` naming the command that rebuilds
them. Folders saved by veil versions before the hash existed have ``size``
only: their row count is checked and, for pulled corpora, the hash of the
file as found is recorded on first load (:func:`veil.corpora.fetch.load_cached`).

Hashing is cheap next to parsing: sha256 runs at several hundred MB/s, so the
largest built-in corpus (brown, 12 MB) costs a few tens of milliseconds.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from veil.errors import CacheCorruptError, CacheLocationError

__all__ = ["META_SHA", "META_KEYS", "read_meta", "read_rows", "count_rows"]

META_SHA = "corpus_sha256"
META_KEYS = ("name", "task", "label_names", "attributes", "documents", "provenance", "stats", "size")


def count_rows(data: bytes) -> int:
    """Rows of a JSON-lines file (a last line without its newline still counts)."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _unreadable(path: Path, exc: OSError) -> CacheLocationError:
    return CacheLocationError(f"cannot read {path} ({type(exc).__name__}: {exc.strerror or exc}); "
                              "check the permissions of the folder, or set VEIL_HOME to a readable folder")


def read_meta(folder: Path, *, what: str, fix: str) -> dict[str, Any]:
    """``meta.json`` of ``folder`` as a dict with every key a corpus needs, or :class:`CacheCorruptError`."""
    path = folder / "meta.json"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CacheCorruptError(what, "meta.json is missing", fix) from None
    except UnicodeDecodeError:
        raise CacheCorruptError(what, "meta.json is not UTF-8 text", fix) from None
    except OSError as exc:
        raise _unreadable(path, exc) from None
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CacheCorruptError(what, f"meta.json is not valid JSON ({exc.msg}; line {exc.lineno})", fix) from None
    if not isinstance(meta, dict):
        raise CacheCorruptError(what, f"meta.json holds a {type(meta).__name__}, not an object", fix)
    missing = [k for k in META_KEYS if k not in meta]
    if missing:
        raise CacheCorruptError(what, f"meta.json lacks {', '.join(missing)}", fix)
    if not isinstance(meta["size"], int) or isinstance(meta["size"], bool) or meta["size"] < 0:
        raise CacheCorruptError(what, f"meta.json records a size of {meta['size']!r}, not a row count", fix)
    return meta


def read_rows(folder: Path, meta: dict[str, Any], *, what: str, fix: str) -> tuple[bytes, str]:
    """``corpus.jsonl``'s bytes and sha256, checked against the row count and hash in ``meta``."""
    path = folder / "corpus.jsonl"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CacheCorruptError(what, "corpus.jsonl is missing (meta.json is there)", fix) from None
    except OSError as exc:
        raise _unreadable(path, exc) from None
    rows = count_rows(data)
    if rows != meta["size"]:
        raise CacheCorruptError(what, f"corpus.jsonl has {rows} rows, meta.json records {meta['size']}", fix)
    digest = hashlib.sha256(data).hexdigest()
    recorded = meta.get(META_SHA)
    if recorded is not None and digest != recorded:
        raise CacheCorruptError(
            what, f"corpus.jsonl has sha256 {digest[:12]}..., meta.json records {str(recorded)[:12]}...", fix)
    return data, digest
