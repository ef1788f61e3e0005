"""Readers behind :func:`veil.corpora.files.load_file`: decoding, CSV, GLUE-style TSV, JSON Lines.

Each reader turns the decoded file into a :class:`Table`: the available columns
and, per data row, its 1-based line number in the file and its values
(column -> value). Readers never change a value; they only split the file into
rows and report malformed input as :class:`~veil.errors.DataFormatError` with
the line number.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import io
from collections.abc import Iterator
import json
from dataclasses import dataclass, field
from typing import Any

from veil.errors import DataFormatError, InvalidParameterError

__all__ = ["Table", "decode", "read_csv", "read_tsv", "read_jsonl"]


@dataclass
class Table:
    """A file split into rows.

    ``columns``: the column names (or positions when the file has no header), in
    file order. ``rows``: ``(line, values)`` per data row. ``positional``:
    whether columns may be chosen by integer position. ``named``: whether
    columns may be chosen by name. ``noun``: what a column is called in
    messages. ``header``: whether a header row was read.
    """

    columns: list[Any]
    rows: list[tuple[int, dict[Any, Any]]]
    positional: bool
    named: bool
    noun: str = "columns"
    header: bool = False
    duplicates: frozenset[Any] = field(default_factory=frozenset)


def decode(data: bytes, encoding: str, where: str) -> str:
    """Decode ``data`` strictly (never replacing characters); a UTF-8 byte-order mark is dropped."""
    try:
        codec = codecs.lookup(encoding)
    except LookupError:
        raise InvalidParameterError(
            f"unknown encoding {encoding!r}; pass a Python codec name such as 'utf-8', 'cp1252' or 'latin-1'"
        ) from None
    try:
        return data.decode("utf-8-sig" if codec.name == "utf-8" else codec.name)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            hint = 'the file starts with a UTF-16 byte-order mark: pass encoding="utf-16" (CLI: --encoding utf-16)'
        elif codec.name == "utf-8" and _decodes(data, "cp1252"):
            hint = ('pass the file\'s encoding, e.g. encoding="cp1252" (Windows files) or encoding="latin-1" '
                    '(CLI: --encoding cp1252)')
        else:
            hint = 'pass the file\'s encoding, e.g. encoding="latin-1" (CLI: --encoding latin-1)'
        raise DataFormatError(
            f"{where}: byte 0x{data[exc.start]:02x} at byte offset {exc.start} (line {line}) is not valid "
            f"{codec.name}; {hint} (veil never replaces undecodable characters)"
        ) from None


def _decodes(data: bytes, encoding: str) -> bool:
    try:
        data.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True


def read_csv(source: str, where: str, *, header: bool = True, delimiter: str | None = None) -> Table:
    """Comma-separated values with standard quoting (quoted fields may span lines)."""
    return _read_delimited(source, where, header=header, delimiter=delimiter or ",",
                           quoting=csv.QUOTE_MINIMAL,
                           hint="a text containing the delimiter must be in double quotes")


def read_tsv(source: str, where: str, *, header: bool = True, delimiter: str | None = None) -> Table:
    """GLUE-style tab-separated values: one row per line, no quoting (quotes are kept as text)."""
    return _read_delimited(source, where, header=header, delimiter=delimiter or "\t",
                           quoting=csv.QUOTE_NONE,
                           hint="a text contains a tab, or a field is missing")


_FIELD_LIMIT = 1 << 30
#: a TSV row cut short by a quoted text that holds a line break or a tab (read GLUE-style, quotes are text)
_QUOTED_HINT = ("a text in double quotes holds a line break or a tab: TSV is read GLUE-style, one row per line "
                "with quotes kept as text, so that text splits its row; save the file as CSV, where a quoted "
                "text may hold both, or remove the line breaks and tabs from the texts")


def _opens_quote(fields: list[str]) -> bool:
    """Whether a field opens a double quote that it does not close (a quoted text that went on past the field)."""
    return any(f.startswith('"') and (len(f) == 1 or not f.endswith('"')) for f in fields)


@contextlib.contextmanager
def csv_field_limit() -> Iterator[None]:
    """Raise csv's per-field size limit while reading, then restore the caller's setting."""
    old = csv.field_size_limit(_FIELD_LIMIT)
    try:
        yield
    finally:
        csv.field_size_limit(old)


def _read_delimited(source: str, where: str, *, header: bool, delimiter: str, quoting: int, hint: str) -> Table:
    reader = csv.reader(io.StringIO(source, newline=""), delimiter=delimiter, quoting=quoting, strict=True)
    columns: list[Any] | None = None
    duplicates: frozenset[Any] = frozenset()
    rows: list[tuple[int, dict[Any, Any]]] = []
    previous = 0
    with csv_field_limit():  # user texts may be whole documents, longer than csv's 128 KiB default
        try:
            for fields in reader:
                start, previous = previous + 1, reader.line_num
                if not fields:  # a blank line
                    continue
                if columns is None:
                    if header:
                        columns = list(fields)
                        duplicates = frozenset(c for c in columns if columns.count(c) > 1)
                        continue
                    columns = list(range(len(fields)))
                if len(fields) != len(columns):
                    first = "the header has" if header else "the first row has"
                    raise DataFormatError(
                        f"{where}: line {start} has {len(fields)} fields but {first} {len(columns)} "
                        f"({_QUOTED_HINT if quoting == csv.QUOTE_NONE and _opens_quote(fields) else hint})"
                    )
                rows.append((start, dict(zip(columns, fields))))
        except csv.Error as exc:
            raise DataFormatError(f"{where}: line {reader.line_num}: cannot parse the row ({exc})") from None
    return Table(columns=columns or [], rows=rows, positional=True, named=header,
                 header=header and columns is not None, duplicates=duplicates)


def read_jsonl(source: str, where: str) -> Table:
    """JSON Lines: one JSON object per line; blank lines are ignored."""
    columns: dict[str, None] = {}
    rows: list[tuple[int, dict[Any, Any]]] = []
    for number, raw in enumerate(source.split("\n"), 1):
        line = raw.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFormatError(
                f"{where}: line {number} is not valid JSON ({exc.msg} at column {exc.colno}); "
                "each line must hold one JSON object"
            ) from None
        if not isinstance(obj, dict):
            raise DataFormatError(
                f"{where}: line {number} holds a JSON {type(obj).__name__}, not an object; each line must be "
                'one object such as {"text": "...", "label": "..."}'
            )
        columns.update(dict.fromkeys(obj))
        rows.append((number, obj))
    return Table(columns=list(columns), rows=rows, positional=False, named=True, noun="keys")
