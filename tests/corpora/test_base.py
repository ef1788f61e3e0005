"""Corpus object, hash splits and the assemble step."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veil.corpora._build import assemble, infer_task
from veil.corpora.base import Corpus, hash_split
from veil.errors import DataFormatError, InvalidParameterError

TEXTS = ["The film is a triumph.", "A dull, lifeless mess.", "I laughed, I cried.", "Skip it.",
         "The film is a triumph.", "Not bad at all."]


@given(st.text(min_size=1))
@settings(max_examples=200)
def test_hash_split_is_a_pure_function_of_the_text(text):
    assert hash_split(text) == hash_split(str(text)) in ("train", "dev", "test")


def test_hash_split_known_values_never_change():
    # pinned values: a change here would silently reshuffle every corpus's splits
    assert hash_split("sentence number 7") == "test"
    assert hash_split("sentence number 33") == "dev"
    assert hash_split("sentence number 0") == "train"
    import hashlib

    for t in TEXTS:
        bucket = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big") % 100
        assert hash_split(t) == ("train" if bucket < 80 else "dev" if bucket < 90 else "test")


def test_hash_split_proportions():
    splits = [hash_split(f"sentence number {i}") for i in range(20000)]
    share = {s: splits.count(s) / len(splits) for s in ("train", "dev", "test")}
    # binomial sd at n=20000 is < 0.003; 0.02 is > 6 sd
    assert abs(share["train"] - 0.8) < 0.02 and abs(share["dev"] - 0.1) < 0.02


def test_assemble_dedups_and_counts_conflicts():
    labels = ["pos", "neg", "pos", "neg", "neg", "pos"]
    c = assemble("t", TEXTS, labels=labels)
    assert len(c) == 5 and c.stats["duplicates_removed"] == 1 and c.stats["duplicate_label_conflicts"] == 1
    assert c.label_names == ("neg", "pos") and c.labels[0] == 1  # first copy kept


def test_split_independent_of_row_order():
    a = assemble("a", TEXTS[:4], labels=[1, 0, 1, 0])
    b = assemble("b", TEXTS[:4][::-1], labels=[0, 1, 0, 1])
    assert dict(zip(a.texts, a.splits)) == dict(zip(b.texts, b.splits))


def test_infer_task():
    assert infer_task(["a", "b"]) == "classification"
    assert infer_task([0, 1, 1, 0]) == "classification"
    assert infer_task([0.5, -1.25, 3.0]) == "regression"
    with pytest.raises(DataFormatError, match="mixed label types"):
        infer_task([1, "spam", 0])
    with pytest.raises(DataFormatError, match="missing"):
        infer_task(["a", None])


def test_corpus_validation_and_select(tmp_path):
    c = assemble("t", TEXTS[:4], labels=[0.5, -1.0, 2.0, -3.0], task="regression",
                 attributes={"who": ["a", "b", "c", "d"]})
    assert c.task == "regression"
    sub = c.select([2, 0])
    assert sub.texts == [TEXTS[2], TEXTS[0]] and sub.attributes["who"] == ["c", "a"]
    np.testing.assert_array_equal(sub.labels, [2.0, 0.5])
    c.save(tmp_path / "c")
    back = Corpus.load_folder(tmp_path / "c")
    assert back.texts == c.texts and back.attributes == c.attributes
    np.testing.assert_array_equal(back.labels, c.labels)
    assert list(back.splits) == list(c.splits)
    with pytest.raises(InvalidParameterError, match="unknown split"):
        c.indices("validation")
    with pytest.raises(DataFormatError):
        Corpus(name="x", texts=["a"], splits=["train", "dev"])
    with pytest.raises(InvalidParameterError, match="regression"):
        assemble("t", TEXTS[:2], labels=["a", "b"]).binary_view()


def test_integer_labels_written_two_ways_are_one_class():
    c = assemble("x", ["a", "b", "c", "d"], labels=["1", "1.0", 0, 0.0])
    assert c.label_names == ("0", "1") and list(c.labels) == [1, 1, 0, 0]


@pytest.mark.parametrize("bad", [None, "", float("nan"), "nan"])
def test_missing_labels_refused_even_with_explicit_task(bad):
    with pytest.raises(DataFormatError, match="missing"):
        assemble("x", ["a", "b"], labels=["pos", bad], task="classification")
