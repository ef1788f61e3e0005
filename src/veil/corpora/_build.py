"""Assemble a :class:`Corpus` from raw rows: label coding, deduplication, splits."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from veil.corpora.base import SPLITS, Corpus, Provenance, Task, hash_split
from veil.errors import DataFormatError

__all__ = ["assemble", "infer_task"]


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float, np.integer, np.floating)):
        return True
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return False
        return True
    return False


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, (float, np.floating)) and math.isnan(value):
        return True
    return isinstance(value, str) and value.strip().lower() in ("", "nan")


def _class_key(value: Any) -> str:
    """One string per class: integer-valued numbers written as 1, "1", 1.0 or "1.0" are one class."""
    if _is_number(value):
        number = float(value)
        if number.is_integer():
            return str(int(number))
    return str(value)


def infer_task(labels: Sequence[Any]) -> Task:
    """``regression`` when every label is a non-integer-looking number, else ``classification``.

    Labels mixing numbers and non-numeric strings are an error (they usually
    mean a broken column), as are missing labels.
    """
    if any(_is_missing(v) for v in labels):
        raise DataFormatError("some labels are missing (empty, None or NaN); fill or remove those rows")
    kinds = {"num" if _is_number(v) else "str" for v in labels}
    if kinds == {"num", "str"}:
        bad = next(v for v in labels if not _is_number(v))
        good = next(v for v in labels if _is_number(v))
        raise DataFormatError(
            f"mixed label types: numeric labels (e.g. {good!r}) and text labels (e.g. {bad!r}); "
            "make the label column all numbers (regression or class ids) or all class names"
        )
    if kinds == {"num"}:
        values = [float(v) for v in labels]
        if all(v.is_integer() for v in values) and len(set(values)) <= max(20, int(0.05 * len(values))):
            return "classification"
        return "regression"
    return "classification"


def assemble(
    name: str,
    texts: Sequence[str],
    *,
    labels: Sequence[Any] | None = None,
    task: Task | None = None,
    label_names: Sequence[str] | None = None,
    splits: Sequence[str] | None = None,
    documents: Sequence[Sequence[str]] | None = None,
    attributes: dict[str, Sequence[Any]] | None = None,
    provenance: Sequence[Provenance] = (),
    stats: dict[str, Any] | None = None,
    dedup: bool = True,
) -> Corpus:
    """Build a corpus: code labels, drop exact duplicate texts (keep the first), assign splits.

    ``labels`` may be class names, class ids or real values. With
    ``task=None`` the task is inferred (see :func:`infer_task`). Class names are
    ordered as ``label_names`` when given, otherwise sorted. Splits default to
    :func:`hash_split` of the text. Duplicates are counted in ``stats``:
    ``duplicates_removed`` and ``duplicate_label_conflicts`` (duplicates whose
    label differed from the kept copy's).
    """
    n = len(texts)
    stats = dict(stats or {})
    attributes = {k: list(v) for k, v in (attributes or {}).items()}
    for key, values in attributes.items():
        if len(values) != n:
            raise DataFormatError(f"{name}: attribute {key!r} has {len(values)} values for {n} texts")
    if labels is not None and len(labels) != n:
        raise DataFormatError(f"{name}: {len(labels)} labels for {n} texts")

    keep: list[int] = []
    conflicts = 0
    if dedup:
        first: dict[str, int] = {}
        for i, text in enumerate(texts):
            j = first.get(text)
            if j is None:
                first[text] = i
                keep.append(i)
            elif labels is not None and _class_key(labels[j]) != _class_key(labels[i]):
                conflicts += 1
    else:
        keep = list(range(n))
    stats["duplicates_removed"] = n - len(keep)
    stats["duplicate_label_conflicts"] = conflicts

    texts_k = [texts[i] for i in keep]
    coded: np.ndarray | None = None
    names: tuple[str, ...] | None = None
    if labels is not None:
        raw = [labels[i] for i in keep]
        missing = [i for i, v in zip(keep, raw) if _is_missing(v)]
        if missing:
            raise DataFormatError(f"{name}: {len(missing)} labels are missing (empty, None or NaN), first at row "
                                  f"{missing[0]}; fill or remove those rows")
        if task is None:
            task = infer_task(raw)
        if task == "regression":
            try:
                coded = np.asarray([float(v) for v in raw], dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise DataFormatError(f"{name}: regression labels must be numbers ({exc})") from None
            if not np.all(np.isfinite(coded)):
                raise DataFormatError(f"{name}: regression labels contain NaN or infinity")
        else:
            as_str = [_class_key(v) for v in raw]
            if label_names is None:
                uniq = sorted(set(as_str), key=lambda s: (not _is_number(s), float(s) if _is_number(s) else 0, s))
                names = tuple(uniq)
            else:
                names = tuple(_class_key(x) for x in label_names)
                unknown = sorted(set(as_str) - set(names))
                if unknown:
                    raise DataFormatError(f"{name}: labels {unknown[:5]} are not among label_names {list(names)}")
            index = {s: c for c, s in enumerate(names)}
            coded = np.asarray([index[s] for s in as_str], dtype=np.int64)
    if splits is None:
        split_k = [hash_split(t) for t in texts_k]
    else:
        split_k = [splits[i] for i in keep]
        bad = sorted(set(split_k) - set(SPLITS))
        if bad:
            raise DataFormatError(f"{name}: unknown split names {bad}; use train, dev, test")
    return Corpus(
        name=name,
        texts=texts_k,
        labels=coded,
        task=task if labels is not None else None,
        label_names=names,
        splits=np.asarray(split_k, dtype=object),
        documents=None if documents is None else [list(documents[i]) for i in keep],
        attributes={k: [v[i] for i in keep] for k, v in attributes.items()},
        provenance=tuple(provenance),
        stats=stats,
    )
