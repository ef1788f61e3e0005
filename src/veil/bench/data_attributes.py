"""The bench's private-attribute corpora: a main task ``y`` and private variables ``z`` per text (Coavoux et al.
2018), for the cells of defenses that release ``representations``.

* ``news-articles-people``: news passages (3 sentences; ``y`` = publisher), ``z`` = which of the 5 most frequent
  PERSON entities the passage names (entity sets, scored by micro-F); built from ``news-articles``.
* ``debates-2016-speaker``: debate turns (``y`` = party), ``z`` = the speaker (one of 9, one-hot; nearly determines
  ``y``); built from ``debates-2016``.

Both are small (2,787 and 833 training texts), so a quick bench and a full one use the same data, whole: quick
and full differ in which defense settings run (:meth:`~veil.defenses.base.Defense.bench_settings`), not in the
data. ``limit`` (smoke runs and tests) keeps at most ``limit`` examples of every split, every k-th one in corpus
order (seed-free, so every cell and every run sees the same examples).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError

__all__ = ["AttributeBenchData", "attribute_data", "attribute_corpus_from_file", "attribute_data_from",
           "ATTRIBUTE_CORPORA", "FILE_TOP"]

#: a private column of your own keeps its most frequent values and maps the rest to "other" (a column of
#: thousands of user ids would otherwise become thousands of one-hot variables with a handful of examples each)
FILE_TOP = 10

#: bench corpus name -> the built-in attribute corpus it is (:func:`veil.corpora.attributes.load_attributes`)
ATTRIBUTE_CORPORA = {"news-articles-people": "news-articles", "debates-2016-speaker": "debates-2016"}
SPLITS = ("train", "dev", "test")


@dataclass
class AttributeBenchData:
    """Everything the representations cells of one corpus share (built once per process by
    :func:`veil.bench.data.bench_data`); ``_cache`` holds the training runs the cells share."""

    name: str
    base: str  # the attribute corpus' name (veil.corpora.attributes)
    task: str
    quick: bool
    corpus: Any  # AttributeCorpus
    limit: int | None = None
    provenance: list[dict[str, Any]] = field(default_factory=list)
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def splits(self) -> dict[str, np.ndarray]:
        return {s: self.corpus.indices(s) for s in SPLITS}

    @property
    def num_classes(self) -> int:
        return len(self.corpus.label_names)

    @property
    def kind(self) -> str:
        """``"entities"`` (scored by micro-F) or ``"attributes"`` (mean per-variable accuracy)."""
        return self.corpus.private.kind

    def describe(self) -> dict[str, Any]:
        return {"corpus": self.name, "task": self.task, "slice": "quick" if self.quick else "full",
                "n": len(self.corpus), "splits": {k: int(len(v)) for k, v in self.splits.items()},
                "num_classes": self.num_classes, "provenance": self.provenance,
                "attribute_corpus": self.base, "private": {"kind": self.kind,
                                                           "variables": [n for n, _ in self.corpus.private.groups]},
                "limit": self.limit}


def attribute_data(name: str, quick: bool, limit: int | None = None) -> AttributeBenchData:
    """The attribute corpus behind the bench corpus ``name`` (:data:`ATTRIBUTE_CORPORA`), every split capped at
    ``limit`` examples (None: whole). Its base corpus must be pulled (``veil corpora pull debates-2016``)."""
    import veil.corpora as vc
    from veil.bench.data import provenance_of
    from veil.corpora.attributes import load_attributes

    if name not in ATTRIBUTE_CORPORA:
        raise InvalidParameterError(f"{name!r} is not a private-attribute bench corpus; choose from "
                                    f"{', '.join(ATTRIBUTE_CORPORA)}")
    base = ATTRIBUTE_CORPORA[name]
    return attribute_data_from(name, load_attributes(base), quick, limit, provenance_of(vc.load(base)), base=base)


def attribute_corpus_from_file(corpus: Any, column: str, *, top: int = FILE_TOP) -> Any:
    """An :class:`~veil.corpora.attributes.AttributeCorpus` from a labelled file corpus that kept ``column``
    (``load_file(..., attributes=[column])``): the main task is its label, the private variable the column's value
    (one-hot, the ``top`` most frequent values kept and the rest mapped to ``other``). A column with one value,
    or with an empty cell, is a :class:`~veil.errors.DataFormatError` naming the column (and the row's line)."""
    from veil.corpora.attributes import AttributeCorpus, one_hot_variables
    from veil.errors import DataFormatError

    values = (corpus.attributes or {}).get(column)
    if values is None:
        raise DataFormatError(f"private column {column!r} was not read from {corpus.name}; the file has no such "
                              "column (check --private-column)")
    empty = [i for i, v in enumerate(values) if v is None or not str(v).strip()]
    if empty:
        raise DataFormatError(f"private column {column!r} is empty in {len(empty)} row(s) of {corpus.name} (row "
                              f"{empty[0] + 1} first); fill it, or remove those rows")
    private = one_hot_variables({column: [str(v).strip() for v in values]}, top=top)
    return AttributeCorpus(corpus.name, list(corpus.texts), corpus.labels, tuple(corpus.label_names),
                           np.asarray(corpus.splits, dtype=object), private,
                           {"derived_from": corpus.name, "private": f"column {column!r}, top {top} values + other"})


def attribute_data_from(name: str, corpus: Any, quick: bool, limit: int | None = None,
                        provenance: list[dict[str, Any]] | None = None, *, base: str | None = None
                        ) -> AttributeBenchData:
    """:class:`AttributeBenchData` over an attribute corpus already loaded (a built-in one, or a file of your own),
    every split capped at ``limit`` examples, every k-th one in corpus order; ``base`` names the attribute corpus
    (default: ``name``)."""
    from veil.bench.data import every_kth

    if limit is not None:
        from veil.validation import check_int

        limit = check_int("limit", limit, minimum=2)
        keep = np.sort(np.concatenate([every_kth(corpus.indices(s), limit) for s in SPLITS]))
        corpus = corpus.select(keep)
    missing = [s for s in SPLITS if len(corpus.indices(s)) == 0]
    if missing:
        raise InvalidParameterError(f"{name} has no {', '.join(missing)} examples; the representations cells train "
                                    "on train, select on dev and attack on test (give a split column, or more rows)")
    return AttributeBenchData(name=name, base=base or name, task="private-attributes", quick=bool(quick), corpus=corpus,
                              limit=limit, provenance=list(provenance or []))
