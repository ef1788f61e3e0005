"""Corpora with private attributes, for the eavesdropper attack of Coavoux et al. (2018).

Each example is a triple (x, y, z) (paper, Sec. 2): a text ``x``, a main-task label ``y`` and a vector ``z`` of
binary private variables. :class:`PrivateVariables` holds ``z`` for a whole corpus as an ``(n, K)`` 0/1 matrix plus
how its columns group into variables:

* ``kind="entities"``: every column is one binary variable "entity j occurs in x" (the paper's news corpora);
  privacy is 1 - micro-F over the set of entities present (Sec. 4.2).
* ``kind="attributes"``: each variable is binary (one column) or multi-class (one-hot over its columns, "other"
  included so that exactly one column is on); privacy is 1 - the mean per-variable accuracy (Sec. 4.2).

Built-in attribute corpora (:func:`attribute_names`) are derived from veil's own corpora (pull them first with
``veil corpora pull NAME``); derived data is cached under ``VEIL_HOME/attributes/`` (never in git):

* ``news-articles``: the 3,781 news articles cut into passages of 3 consecutive sentences (a passage keeps its
  article's split); ``z`` = which of the ``top_k`` most frequent PERSON entities (spaCy en_core_web_sm NER) the
  passage names; only passages naming at least one are kept (as the paper keeps AG/DW articles); ``y`` = publisher.
  See :mod:`veil.corpora.attributes_ner` for how non-person false positives are filtered.
* ``spam-assassin``: ``z`` = the sender's mail domain and the recipient address (each: top 5 values + other,
  one-hot); ``y`` = ham/spam (the paper's motivating example: a spam filter that must not learn correspondents).
* ``drug-reviews``: ``z`` = the condition treated (top 4 + other, a health attribute); ``y`` = rating bucket.
* ``debates-2016``: ``z`` = the speaker (9, one-hot); ``y`` = party (z nearly determines y: the correlated case).

Readers for the paper's own formats (Trustpilot JSON lines, blog-authorship XML) are in
:mod:`veil.corpora.attributes_files`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, UnknownNameError

__all__ = ["PrivateVariables", "AttributeCorpus", "attribute_names", "load_attributes", "one_hot_variables",
           "entity_variables", "KINDS"]

KINDS = ("entities", "attributes")
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class PrivateVariables:
    """``Z`` (n, K) in {0, 1}, column ``names`` and the variables they form.

    ``groups``: one ``(variable name, column indices)`` per private variable; a one-column group is binary, a
    longer one is a one-hot multi-class variable. ``kind`` picks the privacy measure (module docstring).
    """

    Z: np.ndarray
    names: tuple[str, ...]
    groups: tuple[tuple[str, tuple[int, ...]], ...]
    kind: str = "attributes"

    def __post_init__(self) -> None:
        Z = np.asarray(self.Z)
        if Z.ndim != 2:
            raise DataFormatError(f"private variables Z must be a matrix (n, K), got shape {Z.shape}")
        if Z.shape[1] == 0:
            raise DataFormatError("no private attributes: Z has no columns; give at least one private variable "
                                  "(e.g. an entity set or a demographic attribute)")
        if not np.isin(Z, (0, 1)).all():
            raise DataFormatError("private variables Z must hold only 0 and 1 (one-hot multi-class variables)")
        object.__setattr__(self, "Z", Z.astype(np.float32))
        if self.kind not in KINDS:
            raise InvalidParameterError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if len(self.names) != Z.shape[1]:
            raise DataFormatError(f"{len(self.names)} column names for {Z.shape[1]} columns of Z")
        cols = sorted(c for _, g in self.groups for c in g)
        if cols != list(range(Z.shape[1])):
            raise DataFormatError("groups must cover every column of Z exactly once")
        for name, g in self.groups:
            if len(g) > 1 and len(Z) and not np.all(Z[:, list(g)].sum(axis=1) == 1):
                raise DataFormatError(f"multi-class variable {name!r} must be one-hot (exactly one column on per "
                                      "example); add an 'other' column")
        if self.kind == "entities" and any(len(g) != 1 for _, g in self.groups):
            raise DataFormatError("kind='entities' needs one binary column per entity")
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "groups", tuple((n, tuple(int(c) for c in g)) for n, g in self.groups))

    def __len__(self) -> int:
        return int(self.Z.shape[0])

    @property
    def n_variables(self) -> int:
        return len(self.groups)

    def select(self, idx: np.ndarray) -> "PrivateVariables":
        return PrivateVariables(self.Z[np.asarray(idx, dtype=np.int64)], self.names, self.groups, self.kind)

    def values(self) -> np.ndarray:
        """(n, n_variables) int: the class index of each variable (0/1 for binary ones)."""
        out = np.empty((len(self), self.n_variables), dtype=np.int64)
        for v, (_, g) in enumerate(self.groups):
            out[:, v] = self.Z[:, g[0]] if len(g) == 1 else self.Z[:, list(g)].argmax(axis=1)
        return out

    def agreement(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Per pair (i, j): the fraction of private variables on which examples i and j agree (declustering's s)."""
        vals = self.values()
        return (vals[np.asarray(i)] == vals[np.asarray(j)]).mean(axis=1)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "columns": list(self.names), "variables": [n for n, _ in self.groups],
                "positives": {n: int(c) for n, c in zip(self.names, self.Z.sum(axis=0))}}


def one_hot_variables(columns: dict[str, Sequence[str]], *, top: int | None = None,
                      other: str = "other") -> PrivateVariables:
    """Multi-class attributes (name -> one value per example) as one-hot variables, ``kind="attributes"``.

    ``top`` keeps the ``top`` most frequent values of each attribute and maps the rest to ``other``. An attribute
    with a single value, or attributes of different lengths, raise :class:`~veil.errors.DataFormatError`.
    """
    if not isinstance(columns, dict):
        raise InvalidTypeError(f"columns must be a dict name -> values, not {type(columns).__name__}")
    if not columns:
        raise DataFormatError("no private attributes given; name at least one attribute column")
    lengths = {k: len(v) for k, v in columns.items()}
    if len(set(lengths.values())) > 1:
        raise DataFormatError(f"private attributes have mismatched lengths {lengths}; give one value per example")
    blocks, names, groups = [], [], []
    for attr, raw in columns.items():
        values = [str(v) for v in raw]
        counts = Counter(values)
        keep = [v for v, _ in counts.most_common(top)] if top else sorted(counts)
        if top and len(counts) > top:
            values = [v if v in keep else other for v in values]
            keep = keep + [other]
        if len(set(values)) < 2:
            raise DataFormatError(f"private attribute {attr!r} takes one value only ({values[0] if values else '-'}"
                                  "); an attacker has nothing to predict: drop it or choose another attribute")
        if len(keep) == 2:  # binary: one column, 1 = the less frequent value
            pos = min(keep, key=lambda v: (Counter(values)[v], v))
            blocks.append(np.array([[v == pos] for v in values], dtype=np.float32))
            groups.append((attr, (len(names),)))
            names.append(f"{attr}={pos}")
            continue
        index = {v: i for i, v in enumerate(keep)}
        block = np.zeros((len(values), len(keep)), dtype=np.float32)
        block[np.arange(len(values)), [index[v] for v in values]] = 1.0
        blocks.append(block)
        groups.append((attr, tuple(range(len(names), len(names) + len(keep)))))
        names += [f"{attr}={v}" for v in keep]
    return PrivateVariables(np.concatenate(blocks, axis=1), tuple(names), tuple(groups), "attributes")


def entity_variables(entity_sets: Sequence[Sequence[str]], entities: Sequence[str]) -> PrivateVariables:
    """Binary "entity occurs" variables for the given ``entities`` (``kind="entities"``)."""
    if not entities:
        raise DataFormatError("no private attributes: the entity list is empty")
    index = {e: j for j, e in enumerate(entities)}
    Z = np.zeros((len(entity_sets), len(entities)), dtype=np.float32)
    for i, found in enumerate(entity_sets):
        for e in found:
            if e in index:
                Z[i, index[e]] = 1.0
    return PrivateVariables(Z, tuple(entities), tuple((e, (j,)) for j, e in enumerate(entities)), "entities")


@dataclass
class AttributeCorpus:
    """Texts, main-task labels, splits and private variables, aligned by row."""

    name: str
    texts: list[str]
    labels: np.ndarray
    label_names: tuple[str, ...]
    splits: np.ndarray
    private: PrivateVariables
    notes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.texts)
        self.labels = np.asarray(self.labels, dtype=np.int64)
        self.splits = np.asarray(self.splits, dtype=object)
        lengths = {"labels": len(self.labels), "splits": len(self.splits), "private variables": len(self.private)}
        bad = {k: v for k, v in lengths.items() if v != n}
        if bad:
            raise DataFormatError(f"attribute corpus {self.name!r}: {n} texts but {bad}; give one per text")
        if set(self.splits.tolist()) - set(SPLITS):
            raise DataFormatError(f"splits must be among {SPLITS}")
        if n and (self.labels.min() < 0 or self.labels.max() >= len(self.label_names)):
            raise DataFormatError(f"labels must be class ids in [0, {len(self.label_names)})")

    def __len__(self) -> int:
        return len(self.texts)

    def indices(self, split: str) -> np.ndarray:
        if split not in SPLITS:
            raise InvalidParameterError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
        return np.flatnonzero(self.splits == split)

    def select(self, idx: np.ndarray) -> "AttributeCorpus":
        idx = np.asarray(idx, dtype=np.int64)
        return AttributeCorpus(self.name, [self.texts[i] for i in idx], self.labels[idx], self.label_names,
                               self.splits[idx], self.private.select(idx), dict(self.notes))

    def limit(self, max_train: int | None, rng: Any = 0) -> "AttributeCorpus":
        """At most ``max_train`` training examples (a seeded random subset); dev and test unchanged."""
        if max_train is None or len(self.indices("train")) <= max_train:
            return self
        from veil.random import as_generator

        train = np.sort(as_generator(rng).choice(self.indices("train"), size=max_train, replace=False))
        keep = np.sort(np.concatenate([train, self.indices("dev"), self.indices("test")]))
        return self.select(keep)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "size": {s: int(len(self.indices(s))) for s in SPLITS},
                "labels": list(self.label_names), "private": self.private.describe(), "notes": self.notes}


# ---------------------------------------------------------------- built-in derived corpora
_ADDRESS = re.compile(r"[\w.+-]+@([\w-]+(?:\.[\w-]+)+)")


def _address(field_value: str) -> tuple[str, str]:
    """(address, domain) of the first mail address in a header value; ("none", "none") when absent."""
    m = _ADDRESS.search(field_value or "")
    if not m:
        return "none", "none"
    return m.group(0).lower(), m.group(1).lower()


def _from_corpus(name: str, columns: Callable[[Any], dict[str, list[str]]], top: int | None,
                 note: str) -> AttributeCorpus:
    import veil.corpora as vc

    base = vc.load(name)
    private = one_hot_variables(columns(base), top=top)
    return AttributeCorpus(name, list(base.texts), base.labels, base.label_names, base.splits, private,
                           {"derived_from": name, "private": note})


def _spam(top_k: int) -> AttributeCorpus:
    def columns(c: Any) -> dict[str, list[str]]:
        return {"sender_domain": [_address(v)[1] for v in c.attributes["from"]],
                "recipient": [_address(v)[0] for v in c.attributes["to"]]}

    return _from_corpus("spam-assassin", columns, top_k,
                        f"sender mail domain and recipient address (first address of From/To), top {top_k} + other")


def _drugs(top_k: int) -> AttributeCorpus:
    return _from_corpus("drug-reviews", lambda c: {"condition": list(map(str, c.attributes["condition"]))}, top_k,
                        f"condition treated, top {top_k} + other")


def _debates(top_k: int) -> AttributeCorpus:
    return _from_corpus("debates-2016", lambda c: {"speaker": list(map(str, c.attributes["speaker"]))}, None,
                        "speaker (all 9, one-hot)")


def _news(top_k: int) -> AttributeCorpus:
    from veil.corpora.attributes_ner import news_passages

    return news_passages(top_k=top_k)


_BUILDERS: dict[str, tuple[Callable[[int], AttributeCorpus], int]] = {
    "news-articles": (_news, 5),
    "spam-assassin": (_spam, 5),
    "drug-reviews": (_drugs, 4),
    "debates-2016": (_debates, 9),
}


def attribute_names() -> list[str]:
    """The built-in corpora that have private attributes."""
    return sorted(_BUILDERS)


def load_attributes(name: str, *, top_k: int | None = None) -> AttributeCorpus:
    """A built-in attribute corpus by name (its base corpus must be pulled: ``veil corpora pull NAME``)."""
    if not isinstance(name, str):
        raise InvalidTypeError(f"corpus name must be a str, not {type(name).__name__}")
    if name not in _BUILDERS:
        raise UnknownNameError("attribute corpus", name, _BUILDERS)
    build, default_k = _BUILDERS[name]
    k = default_k if top_k is None else top_k
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise InvalidParameterError(f"top_k must be an int >= 1, got {top_k!r}")
    return build(k)
