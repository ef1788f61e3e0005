"""veil.bench.cells: cell code keyed by the release kind an attack observes; every runnable release read as vectors."""

from __future__ import annotations

import importlib

import pytest

from veil.attacks.base import attack_names, get_attack
from veil.bench.cells import RUNNABLE_RELEASES
from veil.bench.cells.vectors import AS_VECTORS, VECTOR_RELEASES
from veil.kinds import RELEASE_KINDS, observable


def test_the_releases_read_as_vectors_are_the_kinds_that_contain_vectors():
    assert VECTOR_RELEASES == tuple(AS_VECTORS) == ("vectors", "training-encodings", "document-embeddings", "text")
    assert all(kind in RELEASE_KINDS and observable(kind, "vectors") for kind in VECTOR_RELEASES)
    others = set(RUNNABLE_RELEASES) - set(VECTOR_RELEASES)
    assert others == {"obfuscated-text", "representations", "model"}  # read in their own form, by their own cells
    assert not any(observable(kind, "vectors") for kind in others)


@pytest.mark.parametrize("name", [n for n in attack_names() if get_attack(n).bench_cell])
def test_an_attacks_bench_cell_lives_in_the_module_of_the_kind_it_observes(name):
    import veil.bench.cells as cells

    cls = get_attack(name)
    module, _, function = cls.bench_cell.partition(":")
    assert module == "veil.bench.cells." + cls.observes.replace("-", "_")
    target = getattr(importlib.import_module(module), function)
    assert callable(target)
    assert getattr(cells, function) is target  # "veil.bench.cells:<function>" (docs, older configs) still works


@pytest.mark.slow
def test_rewritten_text_is_read_as_the_encoding_of_each_rewritten_document(builtin):
    """A ``text`` release (word-level metric DP) is what anyone with the public encoder reads: one vector per
    document. Nearly noiseless rewriting leaves the documents re-identifiable; epsilon = 1 per word does not."""
    import warnings

    import numpy as np

    from veil.attacks.retrieval import SimilaritySearch
    from veil.bench.cells.vectors import AS_VECTORS
    from veil.bench.data import bench_data
    from veil.defenses.metric_dp import WordMetricDP
    from veil.errors import PrivacyLeakWarning

    builtin("drug-reviews")
    data = bench_data("drug-reviews", True, 30)
    rows = data.splits["test"]
    index = SimilaritySearch(list(data.texts), data.X)
    found = {}
    for eps in (1.0, 5000.0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)  # epsilon far above 50: the near-identity control
            defense = WordMetricDP.bench_make({"epsilon": eps}, data)
        obs, truth = AS_VECTORS["text"](defense, data, rows)
        assert truth is None and obs.vectors.shape == (len(rows), data.dim)
        found[eps] = float(np.mean(index.query(obs.vectors, 1)[0][:, 0] == rows))
    assert found[5000.0] >= 0.9 > found[1.0]
