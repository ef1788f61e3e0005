"""Inversion of a trained encoder's r(x): the map back to the public encoder's space against planted encoders (exact
where r keeps everything, nothing from unrelated r), registry and plan, typed errors, and the bench cell on a real
Coavoux model with a small inverter."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from veil.attacks.base import attack_names, get_attack
from veil.attacks.inversion.mapped import MappedInversion
from veil.errors import DataFormatError, InvalidParameterError


@pytest.fixture(scope="module")
def attacker(tiny_inverter_home):
    return MappedInversion("inverter-quick", steps=0, beam=1)


def _cos(a, b):
    return float(np.mean(np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)))


def test_the_map_recovers_the_vectors_a_tanh_layer_keeps_and_nothing_from_unrelated_representations(attacker):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 384)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    W = rng.normal(size=(384, 384)) * 0.05
    R = np.tanh(X @ W + 0.1)  # as wide as the input: invertible through arctanh
    attacker.fit(R[:2500], X[:2500])
    assert attacker.fitted["public_pairs"] == 2500 and attacker.fitted["width"] == 384
    assert _cos(attacker.map(R[2500:]), X[2500:]) > 0.99
    narrow = np.tanh(X @ W[:, :64])  # 64 wide: only a 64-dimensional view of the vector survives
    attacker.fit(narrow[:2500], X[:2500])
    assert 0.2 < _cos(attacker.map(narrow[2500:]), X[2500:]) < 0.9
    unrelated = np.tanh(rng.normal(size=(3000, 64)))  # a control: representations that carry nothing of X
    attacker.fit(unrelated[:2500], X[:2500])
    assert abs(_cos(attacker.map(unrelated[2500:]), X[2500:])) < 0.1


def test_typed_errors_and_the_map_before_any_inversion(tiny_inverter_home):
    fresh = MappedInversion("inverter-quick", steps=0, beam=1)
    with pytest.raises(InvalidParameterError, match="not fitted"):
        fresh.map(np.zeros((2, 64)))
    with pytest.raises(DataFormatError, match="one representation per public vector"):
        fresh.fit(np.zeros((5, 64)), np.zeros((4, 384)))
    with pytest.raises(DataFormatError):
        fresh.fit(np.zeros((5, 64)), np.zeros((5, 100)))  # not the inverter's encoder's width
    fresh.fit(np.random.default_rng(1).normal(size=(50, 64)), np.random.default_rng(2).normal(size=(50, 384)))
    with pytest.raises(DataFormatError, match="64"):
        fresh.map(np.zeros((2, 32)))
    with pytest.raises(DataFormatError):
        fresh.map(np.full((2, 64), np.nan))


def test_registered_and_planned_on_every_representations_defense():
    from veil.bench.plan import BenchConfig, plan_cells
    from veil.defenses.base import defense_names, get_defense

    assert "invert-representations" in attack_names()
    assert get_attack("invert-representations") is MappedInversion
    tasks = {"debates-2016-speaker": "private-attributes"}
    planned = {c.defense for c in plan_cells(list(tasks), config=BenchConfig(quick=True), corpus_tasks=tasks)
               if c.attack == "invert-representations"}
    assert planned == {d for d in defense_names() if get_defense(d).releases == "representations"}



@pytest.mark.slow
def test_the_cell_inverts_a_trained_models_representations_beside_its_references(tiny_inverter_home, builtin,
                                                                                 monkeypatch, select_public_once):
    """On a small slice of the debates corpus: a model trained with LEACE, its r(x) inverted through the map learnt
    from queries on public sentences; the record holds the floor and its test, the undefended model's r(x) and
    the MiniLM vectors inverted on the same texts, and the map's fit."""
    from veil.bench.cells.representations import representations_inversion_cell
    from veil.bench.data import bench_data
    from veil.bench.plan import BenchConfig, Cell
    from veil.errors import DataWarning

    builtin("debates-2016")
    select_public_once(monkeypatch)
    config = BenchConfig(quick=True, limit=60, queries=4)
    data = bench_data("debates-2016-speaker", True, 60)
    cell = Cell.make("debates-2016-speaker", "leace", {}, "invert-representations", config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)  # a long debate turn is truncated to MiniLM's 256 tokens
        rec = representations_inversion_cell(cell, data)
    for key in ("token_f1", "floor_token_f1", "undefended_token_f1", "minilm_token_f1",
                "gain_over_undefended_token_f1", "gain_over_minilm_token_f1", "gain_over_floor_token_f1"):
        assert key in rec.metrics and rec.metrics[key].n == 4
    fit = rec.config["attack"]["map"]
    assert fit["public_pairs"] > 0 and fit["width"] == 64 and -1 <= fit["train_cosine"] <= 1
    bench = rec.extra["bench"]
    assert bench["success"] == "token_f1" and not bench["comparable"] and 0 < bench["test"]["p_value"] <= 1
    texts = data.corpus.texts
    assert all(e["original"] in texts for e in rec.extra["examples"])
