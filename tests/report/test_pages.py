"""Result pages are rendered from result records, and the committed pages match the committed records."""

from __future__ import annotations

from pathlib import Path

import pytest

from veil.results import Metric, ResultRecord
from veil.report import render_all

ROOT = Path(__file__).resolve().parents[2]


def _record(corpus, m, k, mode, acc, setting="frozen"):
    cfg = {"corpus": corpus, "m": m, "k": k, "mode": mode, "setting": setting, "task": "classification",
           "seeds": [0, 1]}
    name = "baseline" if (m == "0" and k == 1) else f"{mode}-m{m}-k{k}"
    return ResultRecord(method="texthide", experiment=f"{corpus}-{name}-{setting}", config=cfg,
                        metrics={"test_accuracy": Metric.from_values(acc)}, wall_time_s=1.0, git_commit="abc1234",
                        extra={"n_train": 10, "n_dev": 2, "n_test": 2, "best_epochs": [3, 4]})


def test_texthide_page_tables_and_heatmap(tmp_path):
    res = tmp_path / "results" / "texthide"
    for rec in [_record("rt-polarity", "0", 1, "intra", [0.80, 0.82]),
                _record("rt-polarity", "256", 4, "intra", [0.70, 0.72]),
                _record("rt-polarity", "256", 4, "inter", [0.60, 0.62]),
                _record("rt-polarity", "inf", 8, "intra", [0.55, 0.55])]:
        rec.write(res / f"{rec.experiment}.json")
    render_all(tmp_path / "results", tmp_path / "docs")
    page = (tmp_path / "docs" / "texthide.md").read_text()
    assert "| rt-polarity | accuracy | 81.0 ± 1.4 | 71.0 ± 1.4 | 61.0 ± 1.4 | – | – | SST-2 acc.: 92.4 / 91.7 / 91.3 |" in page
    assert "intra (256,4) -10.0, inter (256,4) -20.0" in page
    assert "| inf | – | – | – | 55.0 |" in page
    assert "Target, intra (256,4) loses at most 3 points on rt-polarity: it loses 10.0, missed by 7.0 points (" in page
    assert "Target, inter (256,4) loses at most 5 points on rt-polarity: it loses 20.0, missed by 15.0 points (" in page
    png = tmp_path / "docs" / "texthide_grid.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_texthide_targets_met_and_warm_start_kept(tmp_path):
    res = tmp_path / "results" / "texthide"
    kept = _record("rt-polarity", "256", 4, "intra", [0.79, 0.80], setting="finetuned")
    kept.extra["best_epochs"] = [0, 0]
    for rec in [_record("rt-polarity", "0", 1, "intra", [0.80, 0.82], setting="finetuned"), kept,
                _record("rt-polarity", "0", 4, "intra", [0.83, 0.83], setting="finetuned")]:
        rec.write(res / f"{rec.experiment}.json")
    render_all(tmp_path / "results", tmp_path / "docs")
    page = (tmp_path / "docs" / "texthide.md").read_text()
    assert "Target, intra (256,4) loses at most 3 points on rt-polarity: it loses 1.5, met" in page
    assert "inter (256,4) loses at most 5 points on rt-polarity: not run in this setting." in page
    assert "rt-polarity intra-m256-k4: fine-tuning never beat the head-only warm start" in page
    assert "- rt-polarity intra-m0-k4 (outside the table): 83.0 ± 0.0, +2.0 against the baseline (" in page


def test_committed_pages_match_committed_results(tmp_path):
    """docs/results/*.md must be exactly what `veil report` renders from results/ (never edited by hand)."""
    if not any((ROOT / "results").glob("*/*.json")):
        return  # nothing committed yet: nothing to compare
    render_all(ROOT / "results", tmp_path)
    for page in sorted(tmp_path.glob("*.md")):
        committed = ROOT / "docs" / "results" / page.name
        assert committed.exists(), f"{committed} missing: run `veil report`"
        assert committed.read_text() == page.read_text(), f"{committed} is stale: run `veil report`"


def test_difference_interval_is_welch_and_says_when_it_cannot_be_formed():
    from scipy import stats

    from veil.report.texthide import _diff_interval
    from veil.results import Metric, ResultRecord

    def rec(values):
        return ResultRecord(method="texthide", experiment="x", config={},
                            metrics={"test_accuracy": Metric.from_values(values)}, wall_time_s=0.0)

    a, b = [0.80, 0.84, 0.82], [0.70, 0.71, 0.75]
    low, high, text = _diff_interval(rec(a), rec(b), "test_accuracy")
    ref = stats.ttest_ind([100 * v for v in a], [100 * v for v in b], equal_var=False).confidence_interval(0.95)
    assert (low, high) == pytest.approx((ref.low, ref.high)) and "Welch, 3 vs 3 seeds" in text
    assert _diff_interval(rec([0.8]), rec(b), "test_accuracy")[:2] == (None, None)
    assert "the seeds agree exactly" in _diff_interval(rec([0.8, 0.8]), rec([0.7, 0.7]), "test_accuracy")[2]


def _membership(defense, method, auc, *, eps=None, epochs=10, acc=0.75, majority=0.6):
    cfg = {"corpus": "rt-polarity", "defense": defense, "epsilon": eps, "method": method, "members": 100,
           "epochs": epochs, "seed": 0, "shadows": 16 if method.startswith("lira") else None}
    metrics = {"auc": Metric(mean=auc, ci_low=auc - 0.01, ci_high=auc + 0.01, n=200),
               "tpr@1%fpr": Metric(mean=auc / 10, ci_low=0.0, ci_high=auc / 5, n=200),
               "tpr@0.1%fpr": Metric(mean=0.0, ci_low=0.0, ci_high=0.01, n=200),
               "test_accuracy": Metric(mean=acc, n=1000, ci_low=acc - 0.03, ci_high=acc + 0.03),
               "majority_rate": Metric(mean=majority, n=1000)}
    if eps is not None:
        metrics["delta"] = Metric(mean=5e-5)
    name = f"rt-polarity-{defense}{'' if eps is None else f'-eps{eps:g}'}-{method}-ep{epochs}"
    return ResultRecord(method="membership", experiment=name, config=cfg, metrics=metrics, wall_time_s=1.0,
                        git_commit="abc1234", extra={"target": {"one_class": False}})


def test_membership_page_names_the_strongest_attack_and_checks_dp_against_its_auc_bound(tmp_path):
    res = tmp_path / "results" / "membership"
    recs = [_membership("plain", "loss", 0.60), _membership("plain", "lira", 0.70),
            _membership("dpsgd", "loss", 0.50, eps=1.0, acc=0.605), _membership("dpsgd", "lira", 0.80, eps=1.0,
                                                                                  acc=0.605),
            _membership("dpsgd", "loss", 0.51, eps=3.0, acc=0.7), _membership("plain", "lira", 0.88, epochs=200)]
    for rec in recs:
        rec.write(res / f"{rec.experiment}.json")
    render_all(tmp_path / "results", tmp_path / "docs")
    page = (tmp_path / "docs" / "membership.md").read_text()
    assert "| rt-polarity | plain | none | 10 | 75.0 | yes (p " in page and "| 70.0 [69.0, 71.0] (lira) |" in page
    assert "| rt-polarity | plain | none | 200 | 75.0 | yes (p " in page and "88.0 [87.0, 89.0] (lira)" in page
    # 60.5% against a 60% majority on 1,000 test texts is no evidence of learning
    assert "| rt-polarity | dpsgd | 1 | 10 | 60.5 | no (p " in page
    # an AUC of 80 at epsilon 1 is above what (1, 5e-5)-DP allows (73.11): the page must say the guarantee fails
    assert ("DP-SGD at epsilon 1 (10 epochs): 1 of 2 attacks' AUC intervals lie above 50 (lira 80.0 [79.0, 81.0])"
            in page)
    assert "The largest AUC (1, 5e-05)-DP allows is 73.11; 1 attacks' intervals lie above it: the guarantee does " \
           "not hold as stated." in page
    # one Regenerate command per set of methods, each writing exactly the records it names
    assert "veil attack membership --corpus rt-polarity --defense plain,dpsgd --method lira,loss --epsilon 1 " in page
    assert "veil attack membership --corpus rt-polarity --defense dpsgd --method loss --epsilon 3 " in page
    assert "--defense plain --method lira --shadows 16 --members 100 --epochs 200 " in page


def test_the_dpsgd_audit_page_says_which_corpus_each_audit_ran_on(tmp_path):
    import shutil

    res = tmp_path / "results" / "dpsgd-audit"
    res.mkdir(parents=True)
    for name in ("rt-polarity-dpsgd-recipe-eps1-m10000-n2000-clip1.0-seed0.json",
                 "sms-spam-dpsgd-recipe-eps1-m10000-n2000-clip1.0-seed0.json"):
        shutil.copy(ROOT / "results" / "dpsgd-audit" / name, res / name)
    render_all(tmp_path / "results", tmp_path / "docs")
    rows = [line for line in (tmp_path / "docs" / "dpsgd-audit.md").read_text().splitlines()
            if line.startswith("| ") and "recipe" in line]
    assert [row.split(" | ")[0] for row in rows] == ["| rt-polarity", "| sms-spam"]
    assert all(row.endswith("| PASS |") for row in rows)
