"""veil.bench.cells: cell code keyed by the release kind an attack observes; every runnable release read as vectors."""

from __future__ import annotations

import importlib

import pytest

from veil.attacks.base import attack_names, get_attack
from veil.bench.cells.vectors import AS_VECTORS, RUNNABLE_RELEASES
from veil.kinds import RELEASE_KINDS, observable


def test_every_runnable_release_is_a_kind_that_can_be_read_as_vectors():
    assert RUNNABLE_RELEASES == tuple(AS_VECTORS) == ("vectors", "training-encodings", "document-embeddings")
    assert all(kind in RELEASE_KINDS and observable(kind, "vectors") for kind in RUNNABLE_RELEASES)


@pytest.mark.parametrize("name", [n for n in attack_names() if get_attack(n).bench_cell])
def test_an_attacks_bench_cell_lives_in_the_module_of_the_kind_it_observes(name):
    import veil.bench.cells as cells

    cls = get_attack(name)
    module, _, function = cls.bench_cell.partition(":")
    assert module == "veil.bench.cells." + cls.observes.replace("-", "_")
    target = getattr(importlib.import_module(module), function)
    assert callable(target)
    assert getattr(cells, function) is target  # "veil.bench.cells:<function>" (docs, older configs) still works
