"""veil.experiments.dpsgd: DP-SGD against the non-private run on a small real slice of rt-polarity."""

from __future__ import annotations

import json

import pytest

from veil.errors import InvalidParameterError, InvalidTypeError, StaleResultError
from veil.experiments.dpsgd import planned_runs, run_dpsgd

SMALL = dict(corpus="rt-polarity", epsilons=(8.0,), epochs=1, batch_size=64, max_train=300, seeds=(0, 1))


def test_a_sweep_is_checked_before_any_work():
    base = dict(corpus="rt-polarity", epsilons=(1, 3, 8), setting="head", epochs=2, batch_size=32, clip=1.0,
                lr=1e-3, hidden=(128,), optimizer="adam", accountant="prv", seeds=(0, 1), max_train=None)
    runs = planned_runs(**base)
    assert [(r.seed, r.epsilon) for r in runs] == [(0, None), (0, 1.0), (0, 3.0), (0, 8.0), (1, None), (1, 1.0),
                                                  (1, 3.0), (1, 8.0)]
    assert "clip" not in runs[0].identity() and runs[1].identity()["clip"] == 1.0
    for bad in ({"epsilons": (0.0,)}, {"epsilons": (-1.0,)}, {"seeds": (1, 1)}, {"setting": "all-layers"},
                {"accountant": "gdp"}, {"clip": 0.0}, {"max_train": 1}):
        with pytest.raises(InvalidParameterError):
            planned_runs(**{**base, **bad})
    for bad in ({"epsilons": 8.0}, {"seeds": 0}, {"hidden": 128}):
        with pytest.raises(InvalidTypeError):
            planned_runs(**{**base, **bad})
    with pytest.raises(InvalidParameterError, match="optimizer"):
        planned_runs(**{**base, "optimizer": "rmsprop"})


def test_a_recipe_other_than_adams_is_in_the_file_name_and_adams_names_stay():
    from veil.experiments.dpsgd.utility import record_path

    base = dict(corpus="rt-polarity", epsilons=(8,), setting="top-layers", epochs=5, batch_size=256, clip=1.0,
                lr=1e-3, hidden=(128,), optimizer="adam", accountant="prv", seeds=(0,), max_train=2000)
    adam = planned_runs(**base)[1]
    sgd = planned_runs(**{**base, "optimizer": "sgd", "lr": 0.1})[1]
    assert record_path("r", adam).name == "rt-polarity-top-layers-eps8-ep5-bs256-clip1.0-lr0.001-n2000-seed0.json"
    assert record_path("r", sgd).name == \
        "rt-polarity-top-layers-eps8-ep5-bs256-clip1.0-optsgd-lr0.1-n2000-seed0.json"
    assert sgd.identity()["optimizer"] == "sgd" and adam.identity()["optimizer"] == "adam"


def _metrics(path):
    return json.loads(path.read_text())["metrics"]


def test_records_per_epsilon_and_seed_reuse_and_refusal(builtin, tmp_path):
    builtin("rt-polarity")
    lines: list[str] = []
    none, dp, none1, dp1 = run_dpsgd(tmp_path, log=lines.append, **SMALL)
    assert none1.name == none.name.replace("seed0", "seed1") and dp1.name == dp.name.replace("seed0", "seed1")
    # each DP record is compared with the non-private run of its own seed; a non-private run with nothing
    assert set(_metrics(none1)) == {"accuracy", "steps", "sample_rate", "majority_rate"}
    assert _metrics(dp1)["accuracy_change"]["mean"] == pytest.approx(
        _metrics(dp1)["accuracy"]["mean"] - _metrics(none1)["accuracy"]["mean"], abs=1e-12)
    assert none.name == "rt-polarity-head-none-ep1-bs64-lr0.001-n300-seed0.json"
    assert dp.name == "rt-polarity-head-eps8-ep1-bs64-clip1.0-lr0.001-n300-seed0.json"
    assert lines.count(f"wrote {none}") == 1 and lines.count(f"wrote {dp}") == 1
    m, b = _metrics(dp), _metrics(none)
    assert set(b) == {"accuracy", "steps", "sample_rate", "majority_rate"}
    assert set(m) == {"accuracy", "steps", "sample_rate", "majority_rate", "epsilon", "epsilon_prv", "epsilon_rdp",
                      "delta", "sigma", "accuracy_change"}
    assert b["majority_rate"]["mean"] == pytest.approx(778 / 1283)  # rt-polarity's test split: 778 of one class
    assert isinstance(json.loads(none.read_text())["extra"]["one_class"], bool)
    assert 8.0 - 0.01 <= m["epsilon"]["mean"] <= 8.0 and m["epsilon_rdp"]["mean"] > m["epsilon_prv"]["mean"]
    assert m["delta"]["mean"] == 1 / 3000 and m["steps"]["mean"] == b["steps"]["mean"] == 5
    acc = m["accuracy"]
    assert acc["n"] == 1283 and acc["ci_low"] < acc["mean"] < acc["ci_high"]
    change = m["accuracy_change"]
    assert change["mean"] == pytest.approx(acc["mean"] - b["accuracy"]["mean"], abs=1e-12)
    assert change["ci_low"] < change["mean"] < change["ci_high"]
    record = json.loads(dp.read_text())
    assert record["config"]["defense"]["rng"] == "OS CSPRNG" and len(record["extra"]["correct"]) == 1283
    assert record["extra"]["guarantee"]["epsilon"] == m["epsilon"]["mean"]

    stamps = {p: p.stat().st_mtime_ns for p in (none, dp)}
    again: list[str] = []
    assert run_dpsgd(tmp_path, log=again.append, **SMALL) == [none, dp, none1, dp1]
    assert {p: p.stat().st_mtime_ns for p in (none, dp)} == stamps and not any(s.startswith("wrote") for s in again)

    with pytest.raises(StaleResultError, match=r"hidden: stored \[128\], requested \[64\]"):
        run_dpsgd(tmp_path, log=lines.append, **{**SMALL, "hidden": (64,)})
    assert {p: p.stat().st_mtime_ns for p in (none, dp)} == stamps

    none.unlink()  # the non-private run is made again (fresh lots): the DP record's comparison follows it
    redo: list[str] = []
    run_dpsgd(tmp_path, log=redo.append, **SMALL)
    assert [line for line in redo if line.startswith("wrote")] == [f"wrote {none}", f"wrote {dp}"]
    m2, b2 = _metrics(dp), _metrics(none)
    assert m2["accuracy"] == m["accuracy"] and m2["epsilon"] == m["epsilon"]  # not retrained
    assert m2["accuracy_change"]["mean"] == pytest.approx(m2["accuracy"]["mean"] - b2["accuracy"]["mean"], abs=1e-12)


def test_a_batch_larger_than_the_slice_is_refused(builtin, tmp_path):
    builtin("rt-polarity")
    with pytest.raises(InvalidParameterError, match="more than the 40 training examples"):
        run_dpsgd(tmp_path, log=lambda line: None, **{**SMALL, "max_train": 40})
    assert not list(tmp_path.glob("*.json"))


@pytest.mark.slow
def test_the_top_layers_setting_records_its_layers_and_tokens(builtin, tmp_path):
    # convention-speeches: its test split (16 speeches, cut to 48 tokens like every text) is what both runs evaluate,
    # a 28th of sms-spam's encoder work; lots of 16 of 64 (q = 1/4, 4 steps): the PRV calibration of sigma takes a
    # third of the time it takes at q = 1/2
    builtin("convention-speeches")
    none, dp = run_dpsgd(tmp_path, log=lambda line: None, **{**SMALL, "corpus": "convention-speeches", "seeds": (0,),
                                                              "max_train": 64, "batch_size": 16}, setting="top-layers")
    assert none.name == "convention-speeches-top-layers-none-ep1-bs16-lr0.001-n64-seed0.json"
    rec = json.loads(dp.read_text())
    assert rec["config"]["trained_layers"] == 2 and rec["config"]["max_length"] == 48
    assert "layers 5-6 trained" in rec["config"]["encoder"] and 7.99 <= rec["metrics"]["epsilon"]["mean"] <= 8.0
    assert rec["config"]["defense"]["model"].startswith("given: TopLayers")
