"""veil.attack on obfuscated-text releases: word recovery, with exactly the bench cell's numbers."""

from __future__ import annotations

import pytest

import veil
from veil.errors import InvalidParameterError, InvalidTypeError, PrivacyLeakWarning


@pytest.fixture(scope="module")
def treebank():
    from veil.bench.data_parsing import treebank_data

    return treebank_data("silver-sm", True, 40)  # the quick silver treebank, 40 private and 40 public sentences


def _protected(data, cell):
    """The bench cell's release, made through veil.protect with the cell's seeded key (key_seed)."""
    from veil.bench.cells.common import key_rng

    with pytest.warns(PrivacyLeakWarning):
        return veil.protect([(list(t.words), list(t.tags)) for t in data.test], "obfuscation-random", level="P3",
                            treebank=data.treebank, seed=key_rng(cell, "defense"))


@pytest.mark.parametrize("name", ["tag-frequency", "keep-word"])
def test_word_recovery_gives_exactly_the_bench_cells_numbers(treebank, name):
    from veil.bench.cells import word_recovery_cell
    from veil.bench.plan import BenchConfig, Cell

    cell = Cell.make("silver-sm", "obfuscation-random", {"level": "P3"}, name,
                     BenchConfig(quick=True, seed=3, limit=40, key_seed=7))
    bench = word_recovery_cell(cell, treebank).to_dict()
    released = _protected(treebank, cell)
    got = veil.attack(released, name, private=[(t.words, t.tags) for t in treebank.test], treebank=treebank, seed=3)
    assert got.kind == "obfuscated-text" and got.metric == "top1"
    assert got.record["metrics"] == bench["metrics"]
    assert got.record["extra"]["bench"] == bench["extra"]["bench"]
    assert got.test == bench["extra"]["bench"]["test"]
    assert got.floor == bench["extra"]["bench"]["random_rate"]


def test_word_recovery_refuses_a_release_without_its_keys_or_truth(treebank):
    from dataclasses import replace

    from veil.bench.plan import BenchConfig, Cell

    cell = Cell.make("silver-sm", "obfuscation-random", {"level": "P3"}, "keep-word", BenchConfig(key_seed=1))
    released = _protected(treebank, cell)
    truth = [(t.words, t.tags) for t in treebank.test]
    with pytest.raises(InvalidParameterError, match="pass private="):
        veil.attack(released, "keep-word", treebank=treebank)
    with pytest.raises(InvalidTypeError, match="40 protected sentences"):
        veil.attack(released, "keep-word", private=truth[:3], treebank=treebank)
    with pytest.raises(InvalidParameterError, match="key included"):
        veil.attack(replace(released, key=None), "keep-word", private=truth, treebank=treebank)
    with pytest.raises(InvalidParameterError, match="treebank=.*limit="):
        veil.attack(released, "keep-word", private=truth, index=None)
    with pytest.raises(InvalidParameterError, match="observes 'vectors'.*observe it: .*keep-word"):
        veil.attack(released, "rss", private=truth)
