"""veil.experiments.membership and ``veil attack membership``: a small real run on rt-polarity (plain and DP-SGD at
epsilon 8), reuse, refusal of another configuration, checks before any work."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from veil.errors import InvalidParameterError, InvalidTypeError, StaleResultError
from veil.experiments.membership import planned_runs, run_membership

SMALL = dict(corpus="rt-polarity", defenses=("plain", "dpsgd"), epsilons=(8.0,), methods=("loss", "lira"), shadows=2,
             members=300, epochs=2, batch_size=64)


def test_a_sweep_is_checked_before_any_work():
    base = dict(corpus="rt-polarity", defenses=("plain", "dpsgd"), epsilons=(1, 8), methods=("loss", "rmia"),
                shadows=4, members=100, seed=0, epochs=2, batch_size=32, lr=1e-3, clip=1.0, hidden=(128,))
    runs = planned_runs(**base)
    assert [(r.setting, r.method) for r in runs] == [("plain", "loss"), ("plain", "rmia"), ("dpsgd-eps1", "loss"),
                                                     ("dpsgd-eps1", "rmia"), ("dpsgd-eps8", "loss"),
                                                     ("dpsgd-eps8", "rmia")]
    assert "clip" not in runs[0].identity() and "shadows" not in runs[0].identity()
    assert [r.setting for r in planned_runs(**{**base, "defenses": ("texthide",)})] == ["texthide-m256-k4"] * 2
    assert planned_runs(**{**base, "defenses": ("texthide",)})[0].identity()["texthide_k"] == 4
    assert "texthide_m" not in runs[0].identity()  # records of the other targets keep their old configuration
    asked = planned_runs(**{**base, "defenses": ("texthide",), "queries": 32})[0]
    assert asked.identity()["queries"] == 32 and "queries" not in runs[0].identity()
    from veil.experiments.membership.run import record_path
    assert record_path("r", asked).name == "rt-polarity-texthide-m256-k4-loss-m100-q32-ep2-bs32-seed0.json"
    top = planned_runs(**{**base, "defenses": ("plain",), "model": "top-layers"})[0]
    assert top.identity()["trained_layers"] == 2 and "model" not in runs[0].identity()
    assert record_path("r", top).name == "rt-polarity-top-layers-plain-loss-m100-ep2-bs32-seed0.json"
    sgd = planned_runs(**{**base, "defenses": ("dpsgd",), "model": "top-layers", "optimizer": "sgd", "lr": 0.1})[0]
    assert sgd.identity()["optimizer"] == "sgd" and "optimizer" not in top.identity()  # Adam's records stay as made
    assert record_path("r", sgd).name == "rt-polarity-top-layers-dpsgd-eps1-loss-m100-ep2-bs32-optsgd-lr0.1-seed0.json"
    with pytest.raises(InvalidParameterError, match="optimizer"):
        planned_runs(**{**base, "optimizer": "rmsprop"})
    with pytest.raises(InvalidParameterError, match="TextHide"):
        planned_runs(**{**base, "defenses": ("texthide",), "model": "top-layers"})
    for bad in ({"defenses": ("quantum",)}, {"methods": ("shadow",)}, {"epsilons": (0,)}, {"shadows": 1},
                {"members": 1}, {"clip": 0.0}):
        with pytest.raises(InvalidParameterError):
            planned_runs(**{**base, **bad})
    for bad in ({"epsilons": 8.0}, {"methods": "loss"}, {"hidden": 128}):
        with pytest.raises(InvalidTypeError):
            planned_runs(**{**base, **bad})


def test_records_per_setting_and_method_reuse_and_refusal(builtin, tmp_path):
    builtin("rt-polarity")
    lines: list[str] = []
    paths = run_membership(tmp_path, log=lines.append, **SMALL)
    assert [p.name for p in paths] == ["rt-polarity-plain-loss-m300-ep2-bs64-seed0.json",
                                       "rt-polarity-plain-lira-m300-sh2-ep2-bs64-seed0.json",
                                       "rt-polarity-dpsgd-eps8-loss-m300-ep2-bs64-seed0.json",
                                       "rt-polarity-dpsgd-eps8-lira-m300-sh2-ep2-bs64-seed0.json"]
    recs = [json.loads(p.read_text()) for p in paths]
    for rec in recs:
        m = rec["metrics"]
        for k in ("auc", "tpr@1%fpr", "tpr@0.1%fpr", "test_accuracy"):
            assert m[k]["ci_low"] <= m[k]["mean"] <= m[k]["ci_high"]
        assert rec["config"]["candidates"] == 600 and rec["config"]["n_train"] == 300
        roc = rec["extra"]["roc"]
        assert roc["fpr"][0] == 0.0 and roc["fpr"][-1] == 1.0 and roc["tpr"][-1] == 1.0
        assert roc["tpr"] == sorted(roc["tpr"])
    assert recs[0]["extra"]["target"] == recs[1]["extra"]["target"]  # one target per setting
    import veil.corpora as vc

    test_labels = np.asarray(vc.load("rt-polarity").labels)[vc.load("rt-polarity").indices("test")]
    share = np.bincount(test_labels).max() / len(test_labels)  # what a target that learnt nothing scores
    for rec in recs:
        assert rec["metrics"]["majority_rate"]["mean"] == pytest.approx(share)
        assert rec["metrics"]["majority_rate"]["n"] == rec["metrics"]["test_accuracy"]["n"] == len(test_labels)
        assert isinstance(rec["extra"]["target"]["one_class"], bool)
    assert 7.99 <= recs[2]["metrics"]["epsilon"]["mean"] <= 8.0 and "epsilon" not in recs[0]["metrics"]
    assert recs[2]["config"]["recipe"]["params"]["epsilon"] == 8.0 and recs[2]["config"]["attack"] == "membership-loss"
    assert sum(line.startswith("wrote ") for line in lines) == 4
    before = [p.read_text() for p in paths]
    again: list[str] = []
    run_membership(tmp_path, log=again.append, **SMALL)
    assert [p.read_text() for p in paths] == before and "4 of 4 records existed" in again[-1]
    rec = json.loads(paths[0].read_text())  # a record of another configuration at this path is refused
    rec["config"]["lr"] = 0.5
    paths[0].write_text(json.dumps(rec))
    with pytest.raises(StaleResultError):
        run_membership(tmp_path, log=again.append, **SMALL)


def test_cli_refuses_bad_values_before_any_work(tmp_path, monkeypatch):
    from veil.cli import app

    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for args, message in ((("--defense", "quantum"), "--defense must be one of"),
                          (("--method", "shadow"), "--method must be one of"),
                          (("--epsilon", "0"), "--epsilon must be > 0"),
                          (("--defense", "plain,quantum"), "--defense must be one of"),
                          (("--shadows", "1"), "x>=2"),
                          (("--optimizer", "rmsprop"), "--optimizer must be adam or sgd"),
                          (("--lr", "0"), "--lr must be > 0")):
        result = runner.invoke(app, ["attack", "membership", *args])
        assert result.exit_code == 2, result.output
        assert message in result.output
    assert not any(tmp_path.iterdir())


def test_a_texthide_target_is_queried_through_its_pool_and_shadowed_with_pools_of_the_attackers(builtin, tmp_path):
    builtin("rt-polarity")
    lines: list[str] = []
    small = {**SMALL, "defenses": ("texthide",)}
    paths = run_membership(tmp_path, log=lines.append, **small)
    assert [p.name for p in paths] == ["rt-polarity-texthide-m256-k4-loss-m300-ep2-bs64-seed0.json",
                                       "rt-polarity-texthide-m256-k4-lira-m300-sh2-ep2-bs64-seed0.json"]
    rec = json.loads(paths[1].read_text())
    assert rec["config"]["recipe"] == {"defense": "texthide-model", "params": {
        "epochs": 2, "batch_size": 64, "lr": 0.001, "optimizer": "adam", "hidden": [128], "num_classes": 2,
        "init_seed": 0, "m": 256, "k": 4}}
    assert rec["config"]["defense"] == "texthide" and "epsilon" not in rec["metrics"]
    assert 0.0 <= rec["metrics"]["auc"]["mean"] <= 1.0
