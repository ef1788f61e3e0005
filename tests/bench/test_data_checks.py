"""veil.bench.data_checks and the given-data parts of veil.bench.data: a file the bench cannot measure is refused
before any work, the content hashes a record keeps, and the truncation warning."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from veil.bench.data import corpus_inputs, use_corpus
from veil.bench.data_checks import MIN_ROWS, MIN_TRAIN_PER_CLASS, check_bench_corpus, content_sha256, warn_truncated
from veil.corpora.base import Corpus
from veil.corpora.files import load_file
from veil.errors import DataFormatError, DataWarning


def _corpus(labels: list[str], splits: list[str], *, documents=None, name: str = "file-mine") -> Corpus:
    names = sorted(set(labels))
    return Corpus(name=name, texts=[f"text {i}" for i in range(len(labels))],
                  labels=np.asarray([names.index(v) for v in labels]), task="classification", label_names=names,
                  splits=splits, documents=documents)


def _enough(n_train: int = 10) -> tuple[list[str], list[str]]:
    splits = ["train"] * n_train + ["dev"] * 2 + ["test"] * 2
    labels = ["pos" if i % 2 else "neg" for i in range(len(splits))]
    return labels, splits


def test_the_smallest_corpus_the_bench_measures_passes():
    labels, splits = _enough()
    check_bench_corpus(_corpus(labels, splits))
    assert MIN_ROWS == {"train": 10, "dev": 2, "test": 2} and MIN_TRAIN_PER_CLASS == 2  # docs/bench.md says these


def test_one_class_is_refused_naming_the_label():
    labels, splits = _enough()
    with pytest.raises(DataFormatError, match=r"every row has the same label \('pos'\).*at least two classes"):
        check_bench_corpus(_corpus(["pos"] * len(labels), splits))


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_a_split_with_too_few_rows_is_refused_with_the_counts_and_the_minimum(split):
    labels, splits = _enough()
    drop = splits.index(split)
    labels, splits = labels[:drop] + labels[drop + 1:], splits[:drop] + splits[drop + 1:]
    with pytest.raises(DataFormatError, match=r"file-mine: 13 rows: .* the bench needs at least 10 train, 2 dev, "
                                              r"2 test rows.*add rows with distinct texts"):
        check_bench_corpus(_corpus(labels, splits))


def test_a_class_seen_once_in_train_is_refused_naming_it():
    labels, splits = _enough(11)
    labels[0] = "meh"  # the only 'meh' row, in train
    with pytest.raises(DataFormatError, match=r"class\(es\) 'meh' \(1\) have fewer than 2 train rows"):
        check_bench_corpus(_corpus(labels, splits))


def test_documents_count_only_those_of_two_sentences_and_need_no_dev_split():
    labels, splits = _enough()
    labels, splits = labels[:10] + labels[12:], splits[:10] + splits[12:]  # no dev documents
    docs = [["one.", "two."] for _ in labels]
    check_bench_corpus(_corpus(labels, splits, documents=docs))
    docs[-1] = ["only one sentence."]
    with pytest.raises(DataFormatError, match=r"11 documents of two or more sentences: 10 train, 0 dev, 1 test"):
        check_bench_corpus(_corpus(labels, splits, documents=docs))


def _write(path, rows):
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return path


def test_a_file_of_one_repeated_text_is_refused_by_use_corpus_before_any_encoding(tmp_path):
    rows = [["text", "label"]] + [["the same text", "pos" if i % 2 else "neg"] for i in range(40)]
    with pytest.warns(DataWarning, match="duplicate"):
        corpus = load_file(_write(tmp_path / "same.csv", rows), label="label", name="file-same")
    with pytest.raises(DataFormatError, match=r"1 rows left once 39 rows that repeated a text were removed.*"
                                              r"needs distinct texts"):
        use_corpus(corpus)


def test_the_content_hash_follows_what_is_read_not_only_the_file(tmp_path):
    rows = [["review", "summary", "stars"]] + [[f"review {i}", f"summary {i}", "pos" if i % 2 else "neg"]
                                                for i in range(60)]
    path = _write(tmp_path / "mine.csv", rows)
    reviews = load_file(path, text="review", label="stars", name="file-mine")
    summaries = load_file(path, text="summary", label="stars", name="file-mine")
    assert reviews.provenance[0].sha256 == summaries.provenance[0].sha256  # the same file...
    assert content_sha256(reviews) != content_sha256(summaries)  # ...read as other data
    assert content_sha256(reviews) == content_sha256(load_file(path, text="review", label="stars", name="x"))
    use_corpus(reviews)
    inputs = corpus_inputs("file-mine")
    assert inputs == {"mine.csv": reviews.provenance[0].sha256, "rows": content_sha256(reviews)}
    assert corpus_inputs("rt-polarity") == {}  # a built-in corpus: pinned by veil's registry


@pytest.mark.slow
def test_texts_longer_than_the_encoders_limit_are_counted_in_one_warning():
    from veil.encoders import TextEncoder

    encoder = TextEncoder("minilm", backend="torch")
    texts = ["a short review", "word " * 2000, "another short one", "token " * 300]
    with pytest.warns(DataWarning, match=r"2 of 4 texts of file-long are longer than 256 tokens \(the longest has "
                                         r"2002\); the encoder reads only their first 256 tokens"):
        assert warn_truncated("file-long", texts, encoder) == 2
    assert warn_truncated("file-short", texts[::2], encoder) == 0  # no warning: filterwarnings = error
