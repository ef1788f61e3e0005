"""Load a user's own data file (CSV, JSON Lines, GLUE-style TSV, CoNLL-U) into a :class:`Corpus`.

The one entry point is :func:`load_file`. Formats live in the :data:`FORMATS`
registry (name -> :class:`FileFormat`); the format is chosen by ``format=`` or
from the file's suffix (:data:`SUFFIXES`). Nothing is dropped or changed
silently: rows are removed only with ``drop_empty=True`` or as exact duplicate
texts, and each removal is announced with a :class:`~veil.errors.DataWarning`
and counted in ``corpus.stats``.
"""

from __future__ import annotations

import difflib
import hashlib
import math
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veil.corpora._build import _is_number, assemble
from veil.corpora.base import SPLITS, Corpus, Provenance
from veil.corpora.files_conllu import TREE_ATTRIBUTES, read_conllu
from veil.corpora.files_formats import Table, decode, read_csv, read_jsonl, read_tsv
from veil.errors import (DataFormatError, DataWarning, InvalidParameterError, InvalidTypeError,
                         ResourceMissingError, UnknownNameError)

__all__ = ["FORMATS", "SUFFIXES", "SPLIT_ALIASES", "FileFormat", "load_file"]

Column = str | int


@dataclass(frozen=True)
class FileFormat:
    """A readable file format: its reader and what it supports.

    ``read(source, where, header=..., delimiter=...)`` returns a
    :class:`~veil.corpora.files_formats.Table`; ``tabular`` formats accept
    ``header=`` and ``delimiter=``; ``attributes`` are kept for every file of
    the format.
    """

    name: str
    read: Callable[..., Table]
    suffixes: tuple[str, ...]
    tabular: bool = False
    attributes: tuple[str, ...] = ()


FORMATS: dict[str, FileFormat] = {
    f.name: f for f in (
        FileFormat("csv", read_csv, (".csv",), tabular=True),
        FileFormat("jsonl", lambda src, where, **_: read_jsonl(src, where), (".jsonl", ".ndjson")),
        FileFormat("tsv", read_tsv, (".tsv",), tabular=True),
        FileFormat("conllu", lambda src, where, **_: read_conllu(src, where), (".conllu",),
                   attributes=TREE_ATTRIBUTES),
    )
}
SUFFIXES: dict[str, str] = {s: f.name for f in FORMATS.values() for s in f.suffixes}
SPLIT_ALIASES: dict[str, str] = {
    "train": "train", "training": "train", "dev": "dev", "development": "dev", "validation": "dev",
    "valid": "dev", "val": "dev", "test": "test", "testing": "test",
}


def load_file(
    path: str | os.PathLike[str],
    *,
    text: Column | Sequence[Column] = "text",
    label: Column | None = None,
    split: Column | None = None,
    attributes: Sequence[Column] = (),
    format: str | None = None,
    header: bool = True,
    delimiter: str | None = None,
    encoding: str = "utf-8",
    name: str | None = None,
    task: str | None = None,
    label_names: Sequence[str] | None = None,
    pair_separator: str = " ",
    drop_empty: bool = False,
) -> Corpus:
    """Load your own data file as a :class:`~veil.corpora.base.Corpus`.

    Formats (chosen from the suffix unless ``format=`` is given):

    - ``csv`` (``.csv``): a header row, then one row per example; fields with
      commas, quotes or line breaks in double quotes (standard CSV).
    - ``tsv`` (``.tsv``): GLUE-style tab-separated values, one row per line and
      no quoting (quote characters are part of the text), e.g. SST-2, QNLI.
    - ``jsonl`` (``.jsonl``, ``.ndjson``): one JSON object per line, e.g.
      ``{"text": "A fine film.", "label": "pos"}``; blank lines are ignored.
    - ``conllu`` (``.conllu``): one example per sentence. Its text is the
      ``# text = ...`` comment, or the word forms joined by spaces (none after a
      token marked ``SpaceAfter=No``; multiword tokens give their surface form).
      The tree is kept as attributes ``tokens``, ``upos``, ``xpos``, ``head``
      (ints, 0 = root) and ``deprel``, one list per sentence. Columns are the
      sentence comments: ``label="sentiment"`` reads ``# sentiment = pos``.

    Parameters
    ----------
    path: the file.
    text: the column (CSV/TSV), key (JSONL) or comment (CoNLL-U) holding the
        text, e.g. ``text="sentence"`` for GLUE. A pair of columns, e.g.
        ``text=("question", "sentence")``, joins the two with
        ``pair_separator`` and keeps the parts as ``corpus.documents``.
    label: the label column, or None for unlabelled data (e.g. GLUE test
        files). Numbers that look like class ids or any text give
        classification; other numbers give regression (override with ``task``).
    split: a column holding ``train``/``dev``/``test`` per row (``validation``,
        ``valid``, ``val``, ``training``, ``testing`` are accepted, any case), or
        exactly ``"train"``, ``"dev"`` or ``"test"`` to put the whole file in
        that split (e.g. a GLUE ``dev.tsv``; this wins over a column of that
        name). None (default): each text's split is :func:`hash_split` of the
        text, so it depends only on the text, never on row order.
    attributes: columns to keep as private attributes (``corpus.attributes``),
        values unchanged (strings for CSV/TSV; JSON values for JSONL, None where a
        line lacks the key).
    format: ``"csv"``, ``"tsv"``, ``"jsonl"`` or ``"conllu"``; None = from the suffix.
    header: CSV/TSV only. False for files without a header row (e.g. CoLA's
        ``train.tsv``); then name columns by 0-based position, e.g.
        ``text=3, label=1``; attribute names are ``column_<position>``.
        Positions also work with a header.
    delimiter: CSV/TSV only; the field separator (default ``,`` / tab).
    encoding: the file's text encoding. Undecodable bytes are an error, never replaced.
    name: the corpus name; default the file name without its suffix.
    task: ``"classification"`` or ``"regression"``; default inferred from the labels.
    label_names: class names in class-id order; default sorted.
    pair_separator: joins the parts of a ``text`` pair.
    drop_empty: drop rows whose text (or, with a ``label``, whose label) is
        empty or missing, with a :class:`~veil.errors.DataWarning`. Default:
        such rows are an error naming their lines.

    Exact duplicate texts are removed (the first copy is kept) with a
    :class:`~veil.errors.DataWarning`. ``corpus.stats`` counts the raw rows and
    every removal; ``corpus.provenance`` records the file's path and sha256.
    Texts are kept verbatim (no stripping); whitespace-only texts count as
    empty. Labels are stripped of surrounding whitespace.

    Raises
    ------
    ResourceMissingError: no file at ``path`` (it is a ``FileNotFoundError``).
    DataFormatError: unknown suffix, empty file, bad encoding, missing column,
        malformed row, empty text or label, mixed label types; the message names
        the line.
    UnknownNameError, InvalidParameterError, InvalidTypeError: bad arguments.
    """
    texts_spec = _check_args(text, label, split, attributes, header, delimiter, encoding, name, task,
                             label_names, pair_separator, drop_empty)
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidTypeError(f"path must be a file path (str or pathlib.Path), not {type(path).__name__}")
    path = Path(os.fspath(path)).expanduser()
    fmt = _format_for(path, format)
    if not fmt.tabular and (not header or delimiter is not None):
        raise InvalidParameterError(f"header= and delimiter= only apply to csv and tsv files, not {fmt.name}")
    where = str(path)
    data = _read_bytes(path)
    table = fmt.read(decode(data, encoding, where), where, header=header, delimiter=delimiter)
    if not table.rows:
        only = " (only a header row)" if table.header else ""
        raise DataFormatError(f"{where} has no data rows{only}; add examples to the file")

    text_keys = [_key(table, s, "text", where) for s in texts_spec]
    label_key = None if label is None else _key(table, label, "label", where)
    whole_split = split if isinstance(split, str) and split in SPLITS else None
    split_key = None if split is None or whole_split else _key(table, split, "split", where)
    attr_keys = {_attr_name(k): k for k in (*fmt.attributes, *(_key(table, a, "attributes", where)
                                                                       for a in attributes))}

    rows, stats = _drop_empty(table, text_keys, label_key, drop_empty, where)
    parts = [[_text_part(values, k, line, where) for k in text_keys] for line, values in rows]
    labels = None
    if label_key is not None:
        labels = [_label_value(values.get(label_key), line, where) for line, values in rows]
        _check_label_types(labels, [line for line, _ in rows], label_key, task, where)
    if whole_split is not None:
        splits = [whole_split] * len(rows)
    elif split_key is not None:
        splits = [_split_value(values.get(split_key), split_key, line, where) for line, values in rows]
    else:
        splits = None

    provenance = Provenance(package=path.name, version="", registry="file", file=str(path.resolve()),
                            sha256=hashlib.sha256(data).hexdigest(), license="user data")
    corpus_name = name or path.stem
    try:
        corpus = assemble(
            corpus_name, [pair_separator.join(p) for p in parts], labels=labels, task=task,  # type: ignore[arg-type]
            label_names=label_names, splits=splits,
            documents=parts if len(text_keys) > 1 else None,
            attributes={a: [values.get(k) for _, values in rows] for a, k in attr_keys.items()},
            provenance=[provenance], stats={"format": fmt.name, **stats},
        )
    except DataFormatError as exc:
        raise DataFormatError(f"{where}: {exc}") from None
    if label_names is not None and corpus.task == "regression":
        raise InvalidParameterError("label_names only apply to classification; these labels were read as "
                                    "regression values, pass task='classification' to treat them as classes")
    removed = corpus.stats["duplicates_removed"]
    if removed:
        conflicts = corpus.stats["duplicate_label_conflicts"]
        clash = f", {conflicts} of them with a different label than the kept copy" if conflicts else ""
        warnings.warn(f"{where}: removed {removed} exact duplicate text(s) (kept the first copy{clash})",
                      DataWarning, stacklevel=2)
    return corpus


# ------------------------------------------------------------------ arguments
def _check_args(text: Any, label: Any, split: Any, attributes: Any, header: Any, delimiter: Any, encoding: Any,
                name: Any, task: Any, label_names: Any, pair_separator: Any, drop_empty: Any) -> list[Column]:
    """Validate the keyword arguments; return ``text`` as a list of columns."""
    texts = list(text) if isinstance(text, (tuple, list)) else [text]
    if not texts or not all(_is_column(t) for t in texts):
        raise InvalidTypeError(f"text must be a column name or position, or a pair of them, not {text!r}; "
                               "e.g. text='sentence' or text=('sentence1', 'sentence2')")
    for what, value in (("label", label), ("split", split)):
        if value is not None and not _is_column(value):
            raise InvalidTypeError(f"{what} must be a column name, a column position or None, not {value!r}")
    if not isinstance(attributes, (list, tuple)) or not all(_is_column(a) for a in attributes):
        raise InvalidTypeError(f"attributes must be a list of column names, e.g. attributes=('age',), "
                               f"not {attributes!r}")
    for what, value, ok in (("header", header, isinstance(header, bool)),
                            ("drop_empty", drop_empty, isinstance(drop_empty, bool)),
                            ("encoding", encoding, isinstance(encoding, str)),
                            ("pair_separator", pair_separator, isinstance(pair_separator, str)),
                            ("name", name, name is None or (isinstance(name, str) and name != "")),
                            ("delimiter", delimiter, delimiter is None or isinstance(delimiter, str))):
        if not ok:
            raise InvalidTypeError(f"{what} has the wrong type or is empty: {value!r}")
    if delimiter is not None and len(delimiter) != 1:
        raise InvalidParameterError(f"delimiter must be a single character, not {delimiter!r}")
    if task not in (None, "classification", "regression"):
        raise InvalidParameterError(f"task must be 'classification', 'regression' or None (infer), not {task!r}")
    if label is None and (task is not None or label_names is not None):
        raise InvalidParameterError("task= and label_names= need a label column; pass label=<column>")
    if label_names is not None and (isinstance(label_names, str)
                                    or not all(isinstance(n, str) for n in label_names)):
        raise InvalidTypeError(f"label_names must be a list of class names, not {label_names!r}")
    return texts


def _is_column(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _format_for(path: Path, format: str | None) -> FileFormat:
    if format is not None:
        if not isinstance(format, str):
            raise InvalidTypeError(f"format must be a format name such as 'csv', not {format!r}")
        if format.lower() not in FORMATS:
            raise UnknownNameError("file format", format, FORMATS)
        return FORMATS[format.lower()]
    suffix = path.suffix.lower()
    if suffix in SUFFIXES:
        return FORMATS[SUFFIXES[suffix]]
    known = ", ".join(f"{f.name} ({', '.join(f.suffixes)})" for f in FORMATS.values())
    hint = "; for one JSON object per line use format='jsonl'" if suffix == ".json" else ""
    raise DataFormatError(f"cannot tell the format of {path.name!r} from its suffix {suffix or '(none)'!r}; "
                          f"pass format= one of: {known}{hint}")


def _read_bytes(path: Path) -> bytes:
    if path.is_dir():
        raise DataFormatError(f"{path} is a folder; pass the path of a data file")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ResourceMissingError(
            f"data file {path}", "", message=f"no data file at {path}; check the path (relative paths start at {Path.cwd()})"
        ) from None
    if not data:
        raise DataFormatError(f"{path} is empty (0 bytes); add a header row and examples")
    return data


# -------------------------------------------------------------------- columns
def _key(table: Table, spec: Column, role: str, where: str) -> Any:
    """The table column that ``spec`` (a name or a 0-based position) names."""
    if isinstance(spec, int):
        if not table.positional:
            raise InvalidParameterError(f"{role}={spec}: column positions only work for csv and tsv files; "
                                        "name the key instead")
        if not 0 <= spec < len(table.columns):
            raise DataFormatError(f"{where}: {role} column {spec} is out of range; the file has "
                                  f"{len(table.columns)} columns (positions 0 to {len(table.columns) - 1})")
        key = table.columns[spec]
    elif not table.named:
        raise InvalidParameterError(f"{role}={spec!r}: the file is read without a header row (header=False); "
                                    f"name columns by position, e.g. {role}=0")
    elif spec not in table.columns:
        close = difflib.get_close_matches(spec, [str(c) for c in table.columns], n=1)
        maybe = f"; did you mean {close[0]!r}?" if close else ""
        fix = {"label": " (pass label=None to load without labels)",
               "split": " (or pass split='train', 'dev' or 'test' to put the whole file in one split)"}
        raise DataFormatError(f"{where}: no column {spec!r} for {role}=; available {table.noun}: "
                              f"{', '.join(map(repr, table.columns))}{maybe}{fix.get(role, '')}")
    else:
        key = spec
    if key in table.duplicates:
        raise DataFormatError(f"{where}: column {key!r} appears more than once in the header; rename one copy")
    return key


def _attr_name(key: Any) -> str:
    return f"column_{key}" if isinstance(key, int) else key


def _lines(lines: Sequence[int]) -> str:
    shown = ", ".join(map(str, lines[:5]))
    return shown + (f" and {len(lines) - 5} more" if len(lines) > 5 else "")


# ----------------------------------------------------------------------- rows
def _is_missing(value: Any) -> bool:
    return (value is None or (isinstance(value, str) and not value.strip())
            or (isinstance(value, float) and math.isnan(value)))


def _drop_empty(table: Table, text_keys: list[Any], label_key: Any, drop: bool,
                where: str) -> tuple[list[tuple[int, dict[Any, Any]]], dict[str, int]]:
    """Rows with an empty text or label: an error, or dropped with a warning when ``drop``."""
    no_text = [line for line, values in table.rows if any(_is_missing(values.get(k)) for k in text_keys)]
    skip = set(no_text)
    no_label = [] if label_key is None else [
        line for line, values in table.rows if line not in skip and _is_missing(values.get(label_key))]
    stats = {"raw_rows": len(table.rows), "dropped_empty_text": len(no_text) if drop else 0,
             "dropped_missing_label": len(no_label) if drop else 0}
    if not drop:
        column = " / ".join(map(repr, text_keys))
        if no_text:
            raise DataFormatError(f"{where}: {len(no_text)} row(s) have an empty text in {column} (line "
                                  f"{_lines(no_text)}); fill or remove them, or pass drop_empty=True (CLI: --drop-empty) "
                                  "to drop them with a warning")
        if no_label:
            raise DataFormatError(f"{where}: {len(no_label)} row(s) have no value in label column {label_key!r} "
                                  f"(line {_lines(no_label)}); fill or remove them, pass drop_empty=True (CLI: "
                                  "--drop-empty) to drop them with a warning, or label=None (CLI: leave out --label) "
                                  "to load without labels")
        return table.rows, stats
    if no_text or no_label:
        warnings.warn(f"{where}: drop_empty=True dropped {len(no_text)} row(s) with an empty text and "
                      f"{len(no_label)} row(s) with a missing label", DataWarning, stacklevel=3)
    gone = set(no_text) | set(no_label)
    rows = [(line, values) for line, values in table.rows if line not in gone]
    if not rows:
        raise DataFormatError(f"{where}: no rows left after dropping empty texts and labels")
    return rows, stats


def _text_part(values: dict[Any, Any], key: Any, line: int, where: str) -> str:
    value = values.get(key)
    if not isinstance(value, str):
        raise DataFormatError(f"{where}: line {line}: text {key!r} is a {type(value).__name__} ({value!r}), "
                              "not a string")
    return value


def _label_value(value: Any, line: int, where: str) -> Any:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (bool, int, float)):
        return value
    raise DataFormatError(f"{where}: line {line}: label {value!r} is a {type(value).__name__}, "
                          "not a single class name or number")


def _check_label_types(labels: list[Any], lines: list[int], key: Any, task: str | None, where: str) -> None:
    """Mixed numbers and class names (or names under ``task='regression'``): an error naming lines."""
    numeric = [_is_number(v) for v in labels]
    nums = [i for i, ok in enumerate(numeric) if ok]
    names = [i for i, ok in enumerate(numeric) if not ok]
    if task == "regression" and names:
        raise DataFormatError(f"{where}: task='regression' needs numeric labels, but column {key!r} has "
                              f"{labels[names[0]]!r} (line {_lines([lines[i] for i in names])})")
    if task is None and nums and names:
        few, kind = (nums, "numeric") if len(nums) <= len(names) else (names, "text")
        raise DataFormatError(
            f"{where}: mixed label types in column {key!r}: numbers (e.g. {labels[nums[0]]!r}) and text "
            f"(e.g. {labels[names[0]]!r}); {kind} labels on line {_lines([lines[i] for i in few])}. Make the "
            "column all numbers or all class names, or pass task='classification' to treat every value as a "
            "class name")


def _split_value(value: Any, key: Any, line: int, where: str) -> str:
    split = SPLIT_ALIASES.get(value.strip().lower()) if isinstance(value, str) else None
    if split is None:
        raise DataFormatError(f"{where}: line {line}: split {value!r} in column {key!r} is not one of train, "
                              f"dev, test (also accepted: {', '.join(sorted(set(SPLIT_ALIASES) - set(SPLITS)))})")
    return split
