"""Named offline corpora and loaders for your own files.

>>> import veil.corpora as vc
>>> vc.names()                       # built-in corpora
>>> vc.pull("rt-polarity")           # fetch + verify + cache (once)
>>> corpus = vc.load("rt-polarity")  # -> Corpus
>>> mine = vc.load("reviews.csv", text="review", label="stars")
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from veil._io import writable_dir
from veil.corpora.base import SPLITS, Corpus, Provenance, hash_split
from veil.corpora.fetch import corpus_dir, is_pulled, load_cached, pull
from veil.corpora.registry import get_spec, names
from veil.errors import InvalidParameterError, ResourceMissingError, UnknownNameError

__all__ = ["Corpus", "Provenance", "SPLITS", "hash_split", "names", "pull", "load", "is_pulled", "info",
           "corpus_dir"]

_VIEWS = ("binary",)


def load(name_or_path: str | os.PathLike, *, view: str | None = None, pull_missing: bool = False,
         **file_options: Any) -> Corpus:
    """Load a built-in corpus by name, or a file of your own.

    Built-in corpora must be pulled first (``veil corpora pull NAME``), or pass
    ``pull_missing=True``. A cached corpus whose ``corpus.jsonl`` disagrees with
    the row count or sha256 in its ``meta.json``, or whose ``meta.json`` is
    missing or broken, raises :class:`~veil.errors.CacheCorruptError` naming
    ``veil corpora pull NAME --force`` (also with ``pull_missing=True``).
    ``view="binary"`` turns a regression corpus (the hutto-* corpora) into
    positive/negative classification. Any other keyword arguments go to
    :func:`veil.corpora.files.load_file` and apply to paths only (``text=``,
    ``label=``, ``split=``, ``attributes=``, ``format=``, ...).
    """
    if view is not None and view not in _VIEWS:
        raise InvalidParameterError(f"unknown view {view!r}; valid views: {', '.join(_VIEWS)}")
    key = os.fspath(name_or_path)
    if key in names():
        if file_options:
            raise InvalidParameterError(
                f"{sorted(file_options)} apply to your own files only, not to the built-in corpus {key!r}")
        try:
            corpus = load_cached(key)
        except ResourceMissingError:  # not pulled, or built by an older veil (damage is never auto-repaired)
            if not pull_missing:
                writable_dir(corpus_dir(key).parent, create=False)  # `veil corpora pull` could not write either
                raise
            pull(key)
            corpus = load_cached(key)
    elif Path(key).exists() or os.sep in key or "." in Path(key).name:
        from veil.corpora.files import load_file

        corpus = load_file(key, **file_options)  # a missing path gets load_file's own message
    else:
        raise UnknownNameError("corpus", key, names())
    return corpus.binary_view() if view == "binary" else corpus


def info(name: str) -> dict[str, Any]:
    """Registry facts about a built-in corpus (no loading)."""
    spec = get_spec(name)
    pkg = spec.source
    return {
        "name": name, "task": spec.task, "description": spec.description, "documents": spec.documents,
        "package": pkg.requirement, "registry": pkg.registry, "license": pkg.license,
        "files": list(spec.members), "cleaning": spec.data_note, "pulled": is_pulled(name),
        "expected": dict(spec.expected),
    }
