"""Rows of a file grouped into documents: one row per sentence, a column naming the document each belongs to.

SentDP (Meehan et al. 2022) protects a document, a set of sentences; a user's export often has one row per sentence
(or message) and a column saying which document (patient note, email thread) it comes from.
:func:`group_documents` turns such a labelled corpus into a document corpus: a document's sentences are its rows in
file order, its text their concatenation, its label (and every other kept column) the one its rows share, and its
split a hash of the document's id (:func:`~veil.corpora.base.hash_split`), so a document never straddles two
splits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from veil.errors import DataFormatError

__all__ = ["group_documents"]


def group_documents(corpus: Any, column: str) -> Any:
    """A document corpus from ``corpus``'s rows grouped by the value of its attribute ``column`` (loaded with
    ``load_file(..., attributes=[column])``). Rows of one document must agree on the label and on every other kept
    attribute; a row without a document id is refused. Raises :class:`~veil.errors.DataFormatError` naming the
    column, the document and the fix."""
    from veil.corpora.base import Corpus, hash_split

    ids = (corpus.attributes or {}).get(column)
    if ids is None:
        raise DataFormatError(f"documents column {column!r} was not read from {corpus.name}; the file has no such "
                              "column (check --documents-column)")
    order: dict[str, list[int]] = {}
    for row, value in enumerate(ids):
        if value is None or not str(value).strip():
            raise DataFormatError(f"documents column {column!r} is empty in row {row + 1} of {corpus.name}; every "
                                  "row needs the id of its document")
        order.setdefault(str(value).strip(), []).append(row)
    labels = None if corpus.labels is None else np.asarray(corpus.labels)
    others = {k: v for k, v in (corpus.attributes or {}).items() if k != column}
    texts, documents, doc_labels, splits = [], [], [], []
    attributes: dict[str, list[Any]] = {k: [] for k in others}
    for doc, rows in order.items():
        if labels is not None:
            seen = {labels[r].item() for r in rows}
            if len(seen) > 1:
                names = sorted(str(corpus.label_names[i]) if corpus.label_names else str(i) for i in seen)
                raise DataFormatError(f"document {doc!r} (column {column!r}) has rows with labels {', '.join(names)}; "
                                      "a document has one label: fix those rows, or group by another column")
            doc_labels.append(labels[rows[0]])
        for key, values in others.items():
            seen_values = {str(values[r]) for r in rows}
            if len(seen_values) > 1:
                raise DataFormatError(f"document {doc!r} (column {column!r}) has rows with {key} "
                                      f"{', '.join(sorted(seen_values))}; its rows must agree")
            attributes[key].append(values[rows[0]])
        sentences = [corpus.texts[r] for r in rows]
        documents.append(sentences)
        texts.append(" ".join(sentences))
        splits.append(hash_split(doc))
    return Corpus(name=corpus.name, texts=texts, labels=None if labels is None else np.asarray(doc_labels),
                  task=corpus.task, label_names=corpus.label_names, splits=np.asarray(splits, dtype=object),
                  documents=documents, attributes=attributes, provenance=corpus.provenance,
                  stats={**dict(corpus.stats or {}), "grouped_by": column, "rows": len(ids),
                         "documents": len(order)})
