"""CoNLL-U reader behind :func:`veil.corpora.files.load_file`.

Format (https://universaldependencies.org/format.html): sentences separated by
blank lines; comment lines ``# key = value`` before the tokens; token lines
with 10 tab-separated fields ``ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS
MISC``. Multiword token ranges (``1-2``) are not part of the tree but give the
surface form; empty nodes (``1.1``) are skipped.

Each sentence becomes one row whose values are its comments (key -> value,
``# newpar``-style flags -> ``""``) plus the tree: ``tokens``, ``upos``,
``xpos``, ``head`` (ints, 0 = root) and ``deprel``, one entry per syntactic
word. ``text`` is the ``# text`` comment or, when absent, the surface forms
joined by single spaces except after a token whose MISC has ``SpaceAfter=No``.
"""

from __future__ import annotations

from typing import Any

from veil.corpora.files_formats import Table
from veil.errors import DataFormatError

__all__ = ["TREE_ATTRIBUTES", "read_conllu"]

TREE_ATTRIBUTES = ("tokens", "upos", "xpos", "head", "deprel")
_FIELDS = 10


class _Sentence:
    def __init__(self, start: int):
        self.start = start
        self.comments: dict[str, str] = {}
        self.words: list[list[str]] = []  # the 10 fields of each syntactic word
        self.heads: list[int] = []
        self.lines: list[int] = []
        self.ranges: dict[int, tuple[int, str, str]] = {}  # first id -> (last id, form, misc)

    def surface(self, where: str) -> str:
        out: list[str] = []
        i, n = 1, len(self.words)
        while i <= n:
            if i in self.ranges:
                last, form, misc = self.ranges[i]
                if last > n:
                    raise DataFormatError(
                        f"{where}: the sentence starting on line {self.start} has a multiword token "
                        f"{i}-{last} beyond its last word {n}"
                    )
                i = last + 1
            else:
                form, misc = self.words[i - 1][1], self.words[i - 1][9]
                i += 1
            out.append(form)
            if i <= n and "SpaceAfter=No" not in misc.split("|"):
                out.append(" ")
        return "".join(out)

    def row(self, where: str) -> dict[str, Any]:
        if not self.words:
            raise DataFormatError(f"{where}: the sentence starting on line {self.start} has no token lines")
        n = len(self.words)
        for line, head in zip(self.lines, self.heads):
            if head > n:
                raise DataFormatError(f"{where}: line {line}: HEAD {head} points past the sentence's {n} words")
        values: dict[str, Any] = dict(self.comments)
        values["text"] = self.comments["text"] if "text" in self.comments else self.surface(where)
        values.update(
            tokens=[w[1] for w in self.words], upos=[w[3] for w in self.words], xpos=[w[4] for w in self.words],
            head=list(self.heads), deprel=[w[7] for w in self.words],
        )
        return values


def read_conllu(source: str, where: str) -> Table:
    """Read a CoNLL-U file: one row per sentence (see the module docstring)."""
    rows: list[tuple[int, dict[Any, Any]]] = []
    columns: dict[str, None] = dict.fromkeys(("text", *TREE_ATTRIBUTES))
    sentence: _Sentence | None = None
    for number, raw in enumerate(source.split("\n"), 1):
        line = raw.rstrip("\r")
        if not line.strip():
            if sentence is not None:
                rows.append((sentence.start, sentence.row(where)))
                sentence = None
            continue
        if sentence is None:
            sentence = _Sentence(number)
        if line.startswith("#"):
            if sentence.words:
                raise DataFormatError(
                    f"{where}: line {number}: comment inside a sentence's token lines; comments must come "
                    "before the tokens, and sentences must be separated by a blank line"
                )
            key, _, value = line[1:].partition("=")
            sentence.comments[key.strip()] = value.strip()
            columns[key.strip()] = None
            continue
        _token(sentence, line.split("\t"), number, where)
    if sentence is not None:
        rows.append((sentence.start, sentence.row(where)))
    return Table(columns=list(columns), rows=rows, positional=False, named=True,
                 noun="sentence comment keys (# key = value) and tree attributes")


def _token(sentence: _Sentence, fields: list[str], number: int, where: str) -> None:
    if len(fields) != _FIELDS:
        raise DataFormatError(
            f"{where}: line {number} has {len(fields)} tab-separated fields, CoNLL-U token lines need "
            f"{_FIELDS} (ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC; use '_' for empty fields)"
        )
    ident = fields[0]
    if "." in ident:  # empty node of the enhanced graph: not part of the basic tree or the text
        return
    if "-" in ident:
        first, _, last = ident.partition("-")
        if not (_is_int(first) and _is_int(last) and int(first) <= int(last)):
            raise DataFormatError(f"{where}: line {number}: bad multiword token range {ident!r}; expected e.g. 3-4")
        sentence.ranges[int(first)] = (int(last), fields[1], fields[9])
        return
    if not _is_int(ident) or int(ident) != len(sentence.words) + 1:
        raise DataFormatError(
            f"{where}: line {number}: token ID {ident!r} should be {len(sentence.words) + 1} "
            "(IDs count 1, 2, 3, ... within each sentence; is a blank line missing between sentences?)"
        )
    head = fields[6]
    if not _is_int(head):
        raise DataFormatError(f"{where}: line {number}: HEAD {head!r} is not an integer (0 for the root)")
    sentence.words.append(fields)
    sentence.heads.append(int(head))
    sentence.lines.append(number)


def _is_int(field: str) -> bool:
    return field.isascii() and field.isdigit()
