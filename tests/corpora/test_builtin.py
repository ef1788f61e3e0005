"""Every built-in corpus matches the counts in RESOURCES.md within its documented cleaning."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import veil.corpora as vc
from veil.corpora.base import hash_split
from veil.corpora.registry import get_spec

ALL = vc.names()


def test_at_least_twelve_corpora():
    assert len(ALL) >= 12
    assert {"rt-polarity", "trec-questions", "sms-spam", "news-articles", "hoc-speeches", "health-tweets",
            "drug-reviews", "hutto-movies", "hutto-amazon", "hutto-nyt", "hutto-tweets",
            "convention-speeches", "debates-2016"} <= set(ALL)


@pytest.mark.parametrize("name", ALL)
def test_size_is_raw_minus_documented_cleaning(builtin, name):
    c = builtin(name)
    spec = get_spec(name)
    assert c.stats["raw_rows"] == spec.expected["raw_rows"]
    dropped = sum(v for k, v in c.stats.items() if k.startswith("dropped_"))
    assert len(c) == c.stats["raw_rows"] - dropped - c.stats["duplicates_removed"]
    assert len(set(c.texts)) == len(c), "exact duplicates must be removed"
    assert all(t.strip() == t and t for t in c.texts), "texts are stripped and non-empty"
    assert not any("\x00" in t for t in c.texts), "the encoders refuse NUL bytes: a corpus must not ship them"
    assert c.task == spec.task
    assert c.provenance and c.provenance[0].sha256 == spec.source.sha256
    for split in ("train", "dev", "test"):
        assert len(c.indices(split)) > 0
    if spec.documents:
        assert c.documents is not None and all(len(d) >= 1 for d in c.documents)


def test_rt_polarity_counts(builtin):
    c = builtin("rt-polarity")
    raw = c.stats["raw_categories"]
    assert (raw["fresh"], raw["rotten"], raw["plot"]) == (7403, 5405, 1097)
    assert c.label_names == ("rotten", "fresh")
    counts = c.label_counts()
    # duplicates only remove a few dozen snippets
    assert 7403 - 60 <= counts["fresh"] <= 7403 and 5405 - 60 <= counts["rotten"] <= 5405


def test_trec_sms_counts(builtin):
    assert len(builtin("trec-questions")) == 5381
    assert builtin("trec-questions").label_names == ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
    sms = builtin("sms-spam")
    assert sms.stats["raw_rows"] == 4837 and sms.stats["raw_spam"] == 638


@pytest.mark.parametrize("name", ["hutto-movies", "hutto-amazon", "hutto-nyt", "hutto-tweets"])
def test_hutto_regression_and_binary_view(builtin, name):
    c = builtin(name)
    assert c.labels.dtype == np.float64 and c.labels.min() >= -4 and c.labels.max() <= 4
    with pytest.warns(UserWarning) if np.any(c.labels == 0) else _nullcontext():
        b = c.binary_view()
    assert b.task == "classification" and set(np.unique(b.labels)) <= {0, 1}
    assert len(b) == int(np.sum(c.labels != 0))


def _nullcontext():
    import contextlib

    return contextlib.nullcontext()


def test_document_corpora_counts(builtin):
    news = builtin("news-articles")
    assert news.num_classes == 9
    assert 15 < np.mean([len(d) for d in news.documents]) < 40  # ~23 sentences per article
    hoc = builtin("hoc-speeches")
    assert {k: hoc.stats["raw_party"][k] for k in ("Con", "Lab", "LibDem")} == {"Con": 442, "Lab": 398, "LibDem": 58}
    assert set(hoc.attributes) >= {"speaker", "party"}
    assert len(set(builtin("debates-2016").attributes["speaker"])) == 9
    conv = builtin("convention-speeches")
    assert conv.stats["raw_rows"] == 189 and 20 < np.mean([len(d) for d in conv.documents]) < 80
    drugs = builtin("drug-reviews")
    assert (drugs.stats["raw_train"], drugs.stats["raw_test"]) == (600, 379)
    assert "condition" in drugs.attributes and len(set(drugs.attributes["condition"])) > 100
    # the official test file is the test split
    assert len(drugs.indices("test")) in (378, 379)
    tweets = builtin("health-tweets")
    assert tweets.task is None and len(set(tweets.attributes["account"])) == 16


def test_npm_corpora(builtin):
    spam = builtin("spam-assassin")
    groups = spam.stats["raw_groups"]
    assert sum(v for k, v in groups.items() if "ham" in k) == 4150
    assert sum(v for k, v in groups.items() if "spam" in k) == 1896
    assert {"from", "to"} <= set(spam.attributes)
    assert spam.stats["nul_bytes_removed_from"] == 1  # one spam mail's body has a NUL byte
    brown = builtin("brown")
    assert len(brown) == 500 and brown.num_classes == 15 and brown.stats["sentences"] == 57340
    assert sum(len(d) for d in brown.documents) == 57340


@pytest.mark.parametrize("name", ["rt-polarity", "trec-questions", "hoc-speeches"])
def test_splits_are_the_text_hash(builtin, name):
    c = builtin(name)
    assert all(c.splits[i] == hash_split(t) for i, t in enumerate(c.texts))
    share = Counter(c.splits.tolist())
    assert 0.75 < share["train"] / len(c) < 0.85


def test_sentences_come_from_spacy_not_a_regex(builtin):
    # "U.S." and "p.m." would break a naive period regex; senter keeps them inside sentences
    news = builtin("news-articles")
    doc = next(d for d in news.documents if any("U.S." in s for s in d))
    assert not any(s.endswith("U.") for s in doc)
