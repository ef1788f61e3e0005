"""veil.bench.cells.representations: one training per setting shared by its utility and attack cells, the
strongest post-hoc attacker (chosen on dev) tested against the floor by a paired permutation test, the undefended
reference, and the run being run_attribute's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veil.bench.cells.common import ALPHA
from veil.bench.cells.representations import _outcome, paired_floor_test, train_setting
from veil.bench.plan import UTILITY, BenchConfig, Cell, plan_cells
from veil.errors import InvalidParameterError

CORPUS = "debates-2016-speaker"
#: 300 training texts (dev and test whole: 117 and 105): the undefended linear probe beats the floor there
LIMIT = 300
CFG = BenchConfig(quick=True, limit=LIMIT)
# debate turns longer than MiniLM's 256 tokens are cut when first encoded (expected, and said in a DataWarning)
pytestmark = pytest.mark.filterwarnings("ignore:.*longer than max_length.*:veil.errors.DataWarning")


@pytest.fixture(scope="module")
def debates(builtin):
    from veil.bench.data import bench_data

    builtin("debates-2016")
    return bench_data(CORPUS, True, LIMIT)


@pytest.mark.parametrize("quick", [True, False])
def test_an_attribute_corpus_plans_every_representations_defense_with_attribute_and_utility_cells(quick):
    from veil.defenses.base import defense_names

    cells = plan_cells([CORPUS], config=BenchConfig(quick=quick))  # names only: nothing is loaded
    planned: dict[str, set[str]] = {}
    for c in cells:
        planned.setdefault(c.defense, set()).add(c.attack)
    assert set(planned) == set(defense_names("representations"))
    assert all({"attribute", UTILITY} <= attacks for attacks in planned.values())


def _finite(m):
    return all(math.isfinite(m[k]) for k in ("mean", "ci_low", "ci_high")) and m["ci_low"] <= m["mean"] <= m["ci_high"]


def test_the_utility_and_attack_cells_of_a_setting_share_one_training(debates, tmp_path):
    from veil.bench.runner import run_cell
    from veil.results import ResultRecord

    util = run_cell(Cell.make(CORPUS, "grl", {}, UTILITY, CFG))
    att = run_cell(Cell.make(CORPUS, "grl", {}, "attribute", CFG))
    trained = [k for k in debates._cache if k[0] == "representations" and k[1].defense == "grl"]
    assert len(trained) == 1
    assert util.extra["training"] == "trained in this cell" and att.extra["training"].startswith("shared")
    assert util.config["run"] == att.config["run"]
    out = debates._cache[trained[0]]

    u = util.extra["bench"]
    assert u["utility"] == "accuracy" and _finite(u["utility_metric"])
    assert u["utility_metric"]["mean"] == out.metrics["test_accuracy"].mean
    assert 0 < u["majority_rate"] < 1

    b = att.extra["bench"]
    assert b["success"] == "attribute accuracy" and b["comparable"] is True and "floor" not in b
    assert _finite(b["success_metric"]) and _finite(b["floor_success"])
    assert b["random_rate"] == b["floor_success"]["mean"] == att.metrics["floor_score"].mean
    assert b["attacker"] == max(("mlp", "mlp-wide", "linear"), key=lambda a: att.metrics[f"dev_score[{a}]"].mean)
    assert b["success_metric"]["mean"] == att.metrics[f"score[{b['attacker']}]"].mean
    t = b["test"]
    assert t["alpha"] == ALPHA and 0 < t["p_value"] <= 1 and t["reject"] == (t["p_value"] <= ALPHA)
    assert t["test"].startswith("paired permutation") and t["null"]
    assert "dev split" in b["measure"] and "score[adversary]" in att.metrics  # grl's own adversary, beside them
    assert u["reference"] == b["reference"] and _finite(b["reference"]["utility"])

    for rec in (util, att):  # the records go to JSON and back
        rec.write(tmp_path / f"{rec.experiment}.json")
        assert ResultRecord.read(tmp_path / f"{rec.experiment}.json").extra["bench"] == rec.extra["bench"]


def test_the_setting_is_run_attribute_seed_for_seed(debates):
    """Oracle: the cell's training is run_attribute's (phases 1-3, the same seeds), so the bench's numbers are the
    adversarial experiment's."""
    from veil.experiments.adversarial.attributes import AttributeRun, run_attribute

    import torch

    cfg = AttributeRun(corpus="debates-2016", defense="multidetask", encoder="minilm", width=64, seed=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the cell trains (tiny layers: more threads only contend)
    try:
        ours = train_setting(cfg, debates.corpus)
        theirs = run_attribute(cfg, data=debates.corpus)
    finally:
        torch.set_num_threads(threads)
    assert {k: v.to_dict() for k, v in ours.metrics.items()} == {k: v.to_dict() for k, v in theirs.metrics.items()}
    for arch in ("mlp", "mlp-wide", "linear"):  # the kept rows are what the attacker was scored on
        assert ours.rows[arch][:, 0].mean() == pytest.approx(theirs.metrics[f"score[{arch}]"].mean, abs=1e-12)


def test_leace_leaves_the_linear_attacker_no_better_than_the_floor(debates):
    """LEACE's guarantee (no linear probe beats a constant) seen by the bench: its linear attacker does not beat the
    floor, while the same probe on the undefended model's r(x) does (so the data can show a leak)."""
    from veil.bench.runner import run_cell

    cell = Cell.make(CORPUS, "leace", {}, "attribute", CFG)
    rec = run_cell(cell)
    assert not rec.config["significance"]["linear"]["reject"]
    ref, _ = _outcome(cell, debates, defense="none")
    assert paired_floor_test(ref.rows["linear"], ref.rows["floor"], ref.kind).reject


def test_a_setting_the_run_does_not_take_is_refused_before_training(debates):
    from veil.bench.cells.representations import attribute_cell

    with pytest.raises(InvalidParameterError, match="takes alpha, beta, reduction, max_chars; got epsilon"):
        attribute_cell(Cell.make(CORPUS, "grl", {"epsilon": 1.0}, "attribute", CFG), debates)


# ---------------------------------------------------------------- the paired permutation test
def _slow_p(rows, floor, kind, resamples, seed):
    """Reference: the same coin flips, one resample at a time, the score computed from scratch."""
    def score(r):
        if kind == "entities":
            tp, fp, fn = r.sum(axis=0)
            return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
        return r[:, 0].mean()

    flips = np.random.default_rng(seed).random((resamples, len(rows))) < 0.5
    observed = score(rows) - score(floor)
    extreme = 0
    for f in flips:
        a = np.where(f[:, None], floor, rows)
        b = np.where(f[:, None], rows, floor)
        extreme += score(a) - score(b) >= observed - 1e-12
    return (1 + extreme) / (resamples + 1)


@pytest.mark.parametrize("kind", ["attributes", "entities"])
def test_the_paired_test_matches_a_slow_reference(kind):
    g = np.random.default_rng(3)
    n = 40
    if kind == "entities":
        rows, floor = g.integers(0, 3, (n, 3)).astype(float), g.integers(0, 3, (n, 3)).astype(float)
    else:
        rows, floor = g.integers(0, 4, (n, 1)) / 3, g.integers(0, 4, (n, 1)) / 3
    v = paired_floor_test(rows, floor, kind, resamples=500, rng=11)
    assert v.p_value == _slow_p(rows, floor, kind, 500, 11)
    assert v.n == n and v.alpha == ALPHA


def test_the_paired_test_on_equal_and_dominating_rows():
    g = np.random.default_rng(0)
    same = (g.random((30, 1)) < 0.4).astype(float)
    assert paired_floor_test(same, same, "attributes", rng=1).p_value == 1.0
    better = paired_floor_test(np.ones((30, 1)), np.zeros((30, 1)), "attributes", rng=1)
    assert better.reject and better.p_value < 1e-3 and better.statistic == 1.0


def test_the_paired_test_rejects_at_most_alpha_under_the_null():
    """Statistical test of the test: 400 data sets where attacker and floor rows are exchangeable per example; the
    number of rejections at alpha = 0.05 is checked against Binomial(400, 0.05) at a false-positive rate of 1e-6."""
    from veil.metrics.stats import binomial_test

    g = np.random.default_rng(7)
    rejections = 0
    for _ in range(400):
        p = g.random(50)[:, None]  # each example's own hit rate, shared by both predictors (H0)
        rows, floor = (g.random((50, 1)) < p).astype(float), (g.random((50, 1)) < p).astype(float)
        rejections += paired_floor_test(rows, floor, "attributes", resamples=199, rng=g).reject
    assert not binomial_test(rejections, 400, ALPHA, alpha=1e-6).reject, rejections
