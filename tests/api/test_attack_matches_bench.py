"""The README's Python path gives the bench's numbers: for each defense it protects (TextHide's inference masks,
DeepCandidate, metric DP, redaction), veil.protect with the bench cell's key and public material makes the cell's
release, and veil.attack with the attack the README runs on it returns the cell's record, metric for metric."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import veil
from veil.errors import PrivacyLeakWarning


@pytest.fixture(scope="module")
def slices():
    from veil.bench.data import bench_data

    return {"rt-polarity": bench_data("rt-polarity", True, 100), "drug-reviews": bench_data("drug-reviews", True)}


def _public_documents(data):
    return [list(data.sentences[i]) for i in data.splits["train"]]


#: (corpus, defense, bench setting, protect's settings beyond the key, the README's attack)
CASES = [
    ("rt-polarity", "texthide-inference", {"m": 256}, lambda d: {"m": 256}, "abs-rss"),
    ("drug-reviews", "deepcandidate", {"epsilon": 3.0}, lambda d: {"epsilon": 3.0, "public": _public_documents(d)},
     "rss"),
    ("drug-reviews", "metric-dp", {"epsilon": 10.0},
     lambda d: {"epsilon": 10.0, "public": [s for doc in _public_documents(d) for s in doc]}, "abs-rss"),
    ("drug-reviews", "redaction", {"operator": "type"}, lambda d: {"operator": "type"}, "rss"),
]


@pytest.mark.parametrize("corpus,defense,setting,settings,attack", CASES, ids=[c[1] for c in CASES])
def test_protect_and_attack_give_the_bench_cells_record(slices, corpus, defense, setting, settings, attack):
    from veil.attacks.retrieval import sample_queries
    from veil.bench.cells import retrieval_cell
    from veil.bench.cells.common import key_rng
    from veil.bench.plan import BenchConfig, Cell

    data = slices[corpus]
    limit = 100 if corpus == "rt-polarity" else None
    cell = Cell.make(corpus, defense, setting, attack, BenchConfig(quick=True, seed=3, queries=20, key_seed=7,
                                                                   limit=limit))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # seeded keys: the bench's key_seed, for this check
        bench = retrieval_cell(cell, data).to_dict()
        q = sample_queries(len(data.index), 20, rng=3)
        rows = data.private_ids[q]
        private = ([data.texts[i] for i in rows] if data.documents is None else
                   [list(data.sentences[i]) for i in rows])
        given = data.X[rows] if defense == "texthide-inference" else private
        out = veil.protect(given, defense, seed=key_rng(cell, "defense"), **settings(data))
    got = veil.attack(out, attack, private=private, index=data.index, query_ids=q,
                      text_embeddings=data.X[data.private_ids], seed=3)
    assert got.record["metrics"] == bench["metrics"]
    assert got.record["extra"]["bench"] == bench["extra"]["bench"]
    assert got.test == bench["extra"]["bench"]["test"]
