"""veil.bench.data_attributes: the private-attribute corpora as the bench sees them (limit, describe, dispatch)."""

from __future__ import annotations

import numpy as np
import pytest

from veil.bench.data_attributes import AttributeBenchData, attribute_data
from veil.errors import InvalidParameterError, InvalidTypeError

SPLITS = ("train", "dev", "test")


@pytest.fixture(scope="module")
def debates(builtin):
    builtin("debates-2016")
    return attribute_data("debates-2016-speaker", True)


def test_limit_keeps_every_kth_example_of_every_split_with_its_labels_and_private_variables(debates):
    small = attribute_data("debates-2016-speaker", True, 60)
    whole, part = debates.corpus, small.corpus
    assert {s: len(part.indices(s)) for s in SPLITS} == {s: min(60, len(whole.indices(s))) for s in SPLITS}
    for s in SPLITS:
        src = whole.indices(s)
        picked = src[np.linspace(0, len(src) - 1, len(part.indices(s))).round().astype(int)]
        assert [part.texts[i] for i in part.indices(s)] == [whole.texts[i] for i in picked]
        assert np.array_equal(part.labels[part.indices(s)], whole.labels[picked])
        assert np.array_equal(part.private.Z[part.indices(s)], whole.private.Z[picked])
    again = attribute_data("debates-2016-speaker", True, 60).corpus
    assert again.texts == part.texts  # seed-free: the same examples every time


def test_describe_says_what_the_report_reads(debates):
    d = debates.describe()
    assert d["corpus"] == "debates-2016-speaker" and d["task"] == "private-attributes" and d["slice"] == "quick"
    assert d["n"] == len(debates.corpus) == sum(d["splits"].values())
    assert d["splits"] == {s: len(debates.corpus.indices(s)) for s in SPLITS}
    assert d["num_classes"] == len(debates.corpus.label_names) >= 2
    assert d["provenance"] and all(p["sha256"] and p["file"] for p in d["provenance"])
    assert d["private"] == {"kind": "attributes", "variables": ["speaker"]}


def test_quick_and_full_are_the_same_data(debates):
    full = attribute_data("debates-2016-speaker", False)
    assert full.corpus.texts == debates.corpus.texts and full.describe()["slice"] == "full"


def test_bench_data_dispatches_the_attribute_corpora_here_once_per_process(builtin):
    from veil.bench.data import bench_data

    builtin("debates-2016")
    first = bench_data("debates-2016-speaker", True, 60)
    assert isinstance(first, AttributeBenchData) and bench_data("debates-2016-speaker", True, 60) is first


@pytest.mark.parametrize(("name", "limit", "error", "match"), [
    ("debates-2016", None, InvalidParameterError, "choose from news-articles-people, debates-2016-speaker"),
    ("debates-2016-speaker", 1, InvalidParameterError, "limit must be in"),
    ("debates-2016-speaker", "60", InvalidTypeError, "limit must be an int"),
])
def test_bad_names_and_limits_are_refused(name, limit, error, match):
    with pytest.raises(error, match=match):
        attribute_data(name, True, limit)
