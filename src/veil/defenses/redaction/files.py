"""``veil redact``: a file of texts redacted on this machine, written atomically in the same format.

Formats (from the suffix, or ``format=``):

* ``.txt``: one text per line; every line is redacted on its own and the file keeps its line count (blank lines
  stay blank, the final newline is kept or not as in the input);
* ``.jsonl``: one JSON object per line; the ``text`` field (``text=``) is redacted, every other field is kept;
* ``.csv``: a header row; the ``text`` column is redacted, every other column kept.

The output is written in the input's format: an ``out`` whose suffix names another of these formats
(``notes.txt`` to ``notes.jsonl``) is refused before any work (:func:`check_output_format`) rather than converted,
as a ``.jsonl`` file holding plain lines would be a broken file for whatever reads it next. Only the ``text``
field or column is redacted: every other field of a ``.jsonl`` row and every other column of a ``.csv`` is copied
verbatim, and the report names them (:attr:`RedactionReport.verbatim`; ``log`` says so before the work).

The owner may also keep the spans (``spans=``: JSON Lines, one object per text with its spans' positions and
original values; private: written readable by its owner only).
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veil.errors import DataFormatError, InvalidParameterError

__all__ = ["FORMATS", "RedactionReport", "redact_file", "read_texts", "check_output_format", "verbatim_fields"]

FORMATS = ("txt", "jsonl", "csv")


@dataclass
class RedactionReport:
    """What ``veil redact`` did: where it wrote, how many texts and spans, per entity type, and which fields or
    columns it copied verbatim (not redacted)."""

    source: str
    out: str
    format: str
    texts: int
    spans: int
    per_entity: dict[str, int] = field(default_factory=dict)
    defense: dict[str, Any] = field(default_factory=dict)
    spans_file: str | None = None
    verbatim: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "out": self.out, "format": self.format, "texts": self.texts,
                "spans": self.spans, "per_entity": self.per_entity, "spans_file": self.spans_file,
                "verbatim": self.verbatim, "defense": self.defense}


def _format(path: Path, format: str | None) -> str:
    fmt = (format or path.suffix.lstrip(".")).lower()
    if fmt not in FORMATS:
        raise InvalidParameterError(f"{path}: cannot tell the format from the suffix {path.suffix!r}; name the file "
                                    f".txt, .jsonl or .csv, or pass --format txt|jsonl|csv")
    return fmt


def check_output_format(path: str | os.PathLike, out: str | os.PathLike, *, format: str | None = None) -> str:
    """The format ``out`` is written in (the input's); a typed error, before any work, when ``out``'s suffix names
    another of :data:`FORMATS` (the redacted copy keeps the input's format; it is never converted)."""
    fmt = _format(Path(path), format)
    out = Path(out)
    named = out.suffix.lstrip(".").lower()
    if named in FORMATS and named != fmt:
        raise InvalidParameterError(
            f"--out {out} names a .{named} file, but the input is read as {fmt} and veil redact writes the input's "
            f"format; name the output {out.with_suffix('.' + fmt)}" + (
                "" if format else f", or pass --format {named} if {Path(path).name} really is {named}"))
    return fmt


def verbatim_fields(fmt: str, layout: Any, text: str) -> list[str]:
    """The fields (.jsonl) or columns (.csv) other than ``text``, which are copied verbatim, in file order."""
    if fmt == "csv":
        return [f for f in layout[0] if f != text]
    if fmt == "jsonl":
        return [k for k in dict.fromkeys(str(k) for row in layout for k in row) if k != text]
    return []


def _decoded(path: Path, encoding: str) -> str:
    from veil.corpora.files_formats import decode

    data = path.read_bytes()
    if not data.strip():
        raise DataFormatError(f"{path} is empty: there is nothing to redact (give a file with one text per line)")
    if b"\x00" in data[:8192]:
        raise DataFormatError(f"{path} looks like a binary file (it holds NUL bytes); veil redact reads text: .txt "
                              "(one text per line), .jsonl or .csv")
    return decode(data, encoding, str(path))


def read_texts(path: str | os.PathLike, *, format: str | None = None, text: str = "text",
               encoding: str = "utf-8") -> tuple[str, list[str], Any]:
    """``(format, texts, layout)``: the texts of a file and what is needed to write it back around new texts."""
    from veil.corpora.files_formats import read_jsonl

    path = Path(path)
    fmt = _format(path, format)
    source = _decoded(path, encoding)
    if fmt == "txt":
        ends = source.endswith("\n")
        lines = (source[:-1] if ends else source).split("\n")
        lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
        return fmt, lines, ends
    if fmt == "jsonl":
        table = read_jsonl(source, str(path))
        rows = [values for _, values in table.rows]
        for line, values in table.rows:
            if not isinstance(values.get(text), str):
                raise DataFormatError(f"{path}: line {line} has no string field {text!r} (its keys: "
                                      f"{', '.join(map(str, values)) or 'none'}); pass --text KEY")
        return fmt, [r[text] for r in rows], rows
    reader = csv.DictReader(io.StringIO(source, newline=""))
    if reader.fieldnames is None or text not in reader.fieldnames:
        raise DataFormatError(f"{path}: no column {text!r} in the header ({', '.join(reader.fieldnames or [])}); "
                              "pass --text COLUMN")
    rows = list(reader)
    return fmt, [r[text] or "" for r in rows], (reader.fieldnames, rows)


def _written(fmt: str, texts: list[str], layout: Any, text: str) -> str:
    if fmt == "txt":
        return "\n".join(texts) + ("\n" if layout else "")
    if fmt == "jsonl":
        return "".join(json.dumps({**row, text: t}, ensure_ascii=False) + "\n" for row, t in zip(layout, texts))
    fields, rows = layout
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row, t in zip(rows, texts):
        writer.writerow({**row, text: t})
    return buf.getvalue()


def redact_file(path: str | os.PathLike, out: str | os.PathLike, defense: Any, *, format: str | None = None,
                text: str = "text", encoding: str = "utf-8", spans: str | os.PathLike | None = None,
                log: Any = None) -> RedactionReport:
    """Redact every text of ``path`` with ``defense`` (a :class:`PresidioRedaction`) and write ``out`` atomically
    (and the owner's ``spans`` file, mode 0600)."""
    from veil._io import atomic_write, atomic_write_text
    from veil.outputs import check_distinct_outputs

    check_output_format(path, out, format=format)
    check_distinct_outputs({"out": out, "spans": spans}, {"path": path})
    fmt, texts, layout = read_texts(path, format=format, text=text, encoding=encoding)
    verbatim = verbatim_fields(fmt, layout, text)
    if log:
        log(f"redacting {len(texts)} texts of {path} with Presidio ({defense.detector.model}, operator "
            f"{defense.operator})")
        if verbatim:
            log(_verbatim_line(fmt, verbatim, text))
    done = defense.redact(texts, progress=len(texts) > 200)
    atomic_write_text(out, _written(fmt, [r.text for r in done], layout, text))
    counts = Counter(s.entity for r in done for s in r.spans)
    if spans is not None:
        body = "".join(json.dumps({"index": i, "spans": [s.to_dict() for s in r.spans]}, ensure_ascii=False) + "\n"
                       for i, r in enumerate(done))
        with atomic_write(spans, perms=0o600) as fh:  # never exists with looser permissions
            fh.write(body)
    return RedactionReport(str(path), str(out), fmt, len(texts), sum(counts.values()), dict(sorted(counts.items())),
                           defense.config(), None if spans is None else str(spans), verbatim)


def _verbatim_line(fmt: str, names: list[str], text: str) -> str:
    what = "columns" if fmt == "csv" else "fields"
    return (f"not redacted: the {what} {', '.join(names)} are copied verbatim (only {text!r} is redacted; to redact "
            f"one of them too, run veil redact on the output with --text COLUMN, e.g. --text {names[-1]})")
