"""veil.corpora.grouping: one row per sentence, grouped into documents by a column."""

from __future__ import annotations

import numpy as np
import pytest

from veil.corpora.base import Corpus, hash_split
from veil.corpora.grouping import group_documents
from veil.errors import DataFormatError


def _rows(doc_ids, labels, extra=None):
    n = len(doc_ids)
    attributes = {"doc": list(doc_ids), **(extra or {})}
    return Corpus("file-notes", [f"sentence {i}." for i in range(n)], np.asarray(labels), "classification",
                  ("neg", "pos"), np.asarray(["train"] * n, dtype=object), attributes=attributes)


def test_rows_become_the_sentences_of_their_document_in_file_order():
    c = group_documents(_rows(["a", "b", "a", "c", "b"], [1, 0, 1, 1, 0]), "doc")
    assert c.documents == [["sentence 0.", "sentence 2."], ["sentence 1.", "sentence 4."], ["sentence 3."]]
    assert c.texts[0] == "sentence 0. sentence 2." and list(c.labels) == [1, 0, 1]
    assert list(c.splits) == [hash_split(d) for d in ("a", "b", "c")]  # a document never straddles two splits
    assert c.stats["documents"] == 3 and c.stats["rows"] == 5 and "doc" not in c.attributes


def test_rows_of_one_document_must_agree():
    with pytest.raises(DataFormatError, match=r"document 'a' \(column 'doc'\) has rows with labels neg, pos"):
        group_documents(_rows(["a", "a"], [0, 1]), "doc")
    with pytest.raises(DataFormatError, match=r"document 'a' .* has rows with author ann, bob"):
        group_documents(_rows(["a", "a"], [0, 0], {"author": ["ann", "bob"]}), "doc")
    with pytest.raises(DataFormatError, match=r"empty in row 2"):
        group_documents(_rows(["a", " "], [0, 0]), "doc")
    with pytest.raises(DataFormatError, match=r"no such column"):
        group_documents(_rows(["a"], [0]), "thread")
