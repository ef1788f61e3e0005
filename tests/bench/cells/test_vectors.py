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
    # read in their own form, by their own cells
    assert others == {"obfuscated-text", "representations", "model", "generative-model"}
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


def test_inversion_is_planned_where_the_vectors_are_a_texts_own_embedding():
    from veil.bench.plan import BenchConfig, plan_cells

    tasks = {"rt-polarity": "sentence-classification", "drug-reviews": "document-classification"}
    cells = [c for c in plan_cells(list(tasks), config=BenchConfig(quick=True), corpus_tasks=tasks)
             if c.attack == "invert"]
    assert {(c.corpus, c.defense) for c in cells} == {
        ("rt-polarity", "none"), ("drug-reviews", "none"), ("drug-reviews", "deepcandidate"),
        ("drug-reviews", "truncation"), ("drug-reviews", "redaction"), ("drug-reviews", "metric-dp")}
    # TextHide's masked vectors and mixtures need the masks first (invert-unmasked recovers them); the baselines are
    # scored inside the cell
    planned = plan_cells(list(tasks), corpus_tasks=tasks)
    assert not any(c.attack.startswith("invert-") and c.attack != "invert-unmasked" for c in planned)
    assert {c.defense for c in planned if c.attack == "invert-unmasked"} == {"texthide", "texthide-inference"}



@pytest.mark.slow
def test_the_inversion_cell_scores_the_release_against_the_floor_text_by_text(tiny_inverter_home, builtin, tmp_path,
                                                                              monkeypatch, select_public_once):
    """An inversion cell on real data with a small inverter: token F1 with its interval, the floor (the same attack
    on unrelated public vectors) and the nearest public sentence scored on the same texts, the paired test's
    verdict in the bench block."""
    import numpy as np

    from veil.bench.cells.vectors import inversion_cell
    from veil.bench.data import bench_data
    from veil.bench.plan import BenchConfig, plan_cells

    builtin("rt-polarity")
    select_public_once(monkeypatch)
    config = BenchConfig(quick=True, limit=40, queries=8)
    cell = next(c for c in plan_cells(["rt-polarity"], defenses=["none"], attacks=["invert"], config=config,
                                      corpus_tasks={"rt-polarity": "sentence-classification"}, utility=False))
    data = bench_data("rt-polarity", True, 40)
    rec = inversion_cell(cell, data)
    rec.write(tmp_path / "cell.json")  # the record is plain JSON (as the bench writes it)
    f1 = rec.metrics["token_f1"]
    assert f1.n == 8 and f1.ci_low <= f1.mean <= f1.ci_high
    for key in ("floor_token_f1", "nearest_public_token_f1", "gain_over_floor_token_f1", "bleu", "names_recovered"):
        assert key in rec.metrics
    gain = rec.metrics["gain_over_floor_token_f1"]
    assert gain.mean == pytest.approx(f1.mean - rec.metrics["floor_token_f1"].mean, abs=1e-9)
    bench = rec.extra["bench"]
    assert bench["success"] == "token_f1" and not bench["comparable"]
    assert bench["success_metric"]["mean"] == pytest.approx(f1.mean / 100)
    test = bench["test"]
    assert 0 < test["p_value"] <= 1 and test["reject"] == (test["p_value"] <= 0.05) and test["n"] == 8
    assert rec.config["attack"]["steps"] == 1 and rec.config["attack"]["inverter"]["name"] == "inverter-quick"
    rows = np.sort(np.random.default_rng(config.seed).choice(data.private_ids, size=8, replace=False))
    assert [e["original"] for e in rec.extra["examples"]] == [data.texts[i] for i in rows[:5]]
    # the floor is computed once per corpus and attacker (kept with the corpus' data for the next cell)
    (floor,) = [v for k, v in data._cache.items() if isinstance(k, tuple) and k[0] == "inversion-floor"]
    assert [e["floor"] for e in rec.extra["examples"]] == floor[:5]
