"""veil.bench.cells.model: a released model's membership cells and utility, on a small real slice of rt-polarity."""

from __future__ import annotations

import pytest

from veil.bench.plan import UTILITY, BenchConfig, Cell, plan_cells

TASKS = {"rt-polarity": "sentence-classification"}


@pytest.mark.parametrize(("quick", "settings"), [(True, [{}, {"epsilon": 8.0}]),
                                                 (False, [{}, {"epsilon": 1.0}, {"epsilon": 3.0}, {"epsilon": 8.0}])])
def test_the_plan_pairs_plain_and_dpsgd_with_every_membership_attack(quick, settings):
    from veil.defenses.dpsgd.mechanism import BENCH_EPOCHS

    settings = [{**s, "epochs": BENCH_EPOCHS} for s in settings]  # every target at one budget, named in its id
    cells = plan_cells(list(TASKS), defenses=["plain", "dpsgd"], config=BenchConfig(quick=quick), corpus_tasks=TASKS)
    assert all(f"-ep{BENCH_EPOCHS}" in c.id for c in cells)
    assert sorted({c.setting_json for c in cells}, key=len) == sorted({Cell.make("x", "d", s, "a").setting_json
                                                                       for s in settings}, key=len)
    assert {c.attack for c in cells} == {"membership-loss", "membership-lira", "membership-rmia", UTILITY}
    assert len(cells) == 4 * len(settings)


@pytest.mark.slow
def test_cells_share_one_target_and_score_auc_against_one_half(builtin):
    import warnings

    from veil.bench.cells import membership_cell, utility_cell
    from veil.bench.data import bench_data
    from veil.errors import PrivacyLeakWarning

    builtin("rt-polarity")
    data = bench_data("rt-polarity", True, 900)
    cfg = BenchConfig(quick=True, limit=900, key_seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # key_seed: reproducible lots and noise, recorded
        for setting in ({}, {"epsilon": 8.0}):
            defense = "plain" if not setting else "dpsgd"
            util = utility_cell(Cell.make("rt-polarity", defense, setting, UTILITY, cfg), data)
            rec = membership_cell(Cell.make("rt-polarity", defense, setting, "membership-loss", cfg), data)
            b = rec.extra["bench"]
            assert b["success"] == "auc" and b["comparable"] is True and b["random_rate"] == 0.5
            assert b["test"]["test"].startswith("Mann-Whitney") and 0 < b["test"]["p_value"] <= 1
            assert rec.metrics["test_accuracy"].mean == util.extra["bench"]["utility_metric"]["mean"]  # one target
            assert rec.config["n_train"] == 299 and rec.config["candidates"] == 598
            assert rec.metrics["auc"].ci_low <= rec.metrics["auc"].mean <= rec.metrics["auc"].ci_high
            assert rec.config["recipe"]["defense"] == defense
