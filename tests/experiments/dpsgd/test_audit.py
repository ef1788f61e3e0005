"""``veil audit dpsgd``: the one-run audit on a small real slice of rt-polarity passes DP-SGD and catches both
negative controls (half the noise, no clipping), writes one record per audit, reuses it only under its own
configuration, and refuses bad input before any work."""

from __future__ import annotations

import json

import pytest

from veil.cli import main
from veil.errors import InvalidParameterError, InvalidTypeError, StaleResultError
from veil.experiments.dpsgd.audit import planned_audits, run_audit

SMALL = dict(corpus="rt-polarity", epsilons=(2.0,), settings=("one-step",), canaries=1000, max_train=300)


def test_an_audit_is_checked_before_any_work():
    runs = planned_audits(**SMALL, seeds=(0, 1))
    assert [(r.defense, r.seed, r.setting) for r in runs] == [("dpsgd", 0, "one-step"), ("dpsgd", 1, "one-step")]
    assert planned_audits(**SMALL, control="no-clip")[0].defense == "dpsgd-broken-no-clip"
    for bad in ({"epsilons": (0.0,)}, {"settings": ("twice",)}, {"canaries": 10}, {"control": "quarter-noise"},
                {"max_train": 100, "settings": ("recipe",)}):
        with pytest.raises(InvalidParameterError):
            planned_audits(**{**SMALL, **bad})
    with pytest.raises(InvalidTypeError):
        planned_audits(**{**SMALL, "epsilons": 2.0})


def _record(path):
    return json.loads(path.read_text())


def test_dpsgd_passes_and_a_record_is_reused_only_under_its_configuration(builtin, tmp_path):
    builtin("rt-polarity")
    lines: list[str] = []
    (path,) = run_audit(tmp_path, log=lines.append, **SMALL)
    assert path.name == "rt-polarity-dpsgd-one-step-eps2-m1000-n300-clip1.0-seed0.json"
    assert lines.count(f"wrote {path}") == 1
    rec = _record(path)
    m = rec["metrics"]
    assert m["passed"]["mean"] == 1.0
    assert m["epsilon_lower_white"]["mean"] <= m["epsilon_claimed"]["mean"] <= 2.0
    assert m["steps"]["mean"] == 1 and m["sample_rate"]["mean"] == 1.0
    assert rec["config"]["n_public"] == 300 + 500 and rec["extra"]["white"]["tried"] >= 1
    assert abs(m["noise_variance_ratio"]["mean"] - 1) < 0.05
    before = path.stat().st_mtime_ns
    assert run_audit(tmp_path, log=lines.append, **SMALL) == [path] and path.stat().st_mtime_ns == before
    other = json.loads(path.read_text())
    other["config"]["lr"] = 0.5
    path.write_text(json.dumps(other))
    with pytest.raises(StaleResultError, match="lr"):
        run_audit(tmp_path, log=lines.append, **SMALL)


@pytest.mark.parametrize("control, failing", [("half-noise", "noise_p_value"), ("no-clipping", "sensitivity_p_value")])
def test_the_cli_catches_each_negative_control(builtin, tmp_path, capsys, control, failing):
    builtin("rt-polarity")
    args = ["audit", "dpsgd", "--epsilon", "2", "--settings", "one-step", "--canaries", "1000", "--max-train",
            "300", "--results", str(tmp_path), "--control", control, "--json"]
    assert main(args) == 0  # caught: the audit failed the broken mechanism, as it must
    (rec,) = json.loads(capsys.readouterr().out)
    assert rec["metrics"]["passed"]["mean"] == 0.0 and rec["metrics"][failing]["mean"] < 1e-6
    assert rec["extra"]["control"] is True


def test_bad_input_fails_before_any_work(tmp_path, capsys):
    assert main(["audit", "dpsgd", "--control", "quarter-noise", "--results", str(tmp_path)]) != 0
    assert "quarter-noise" in capsys.readouterr().err
    assert main(["audit", "dpsgd", "--corpus", "no-such-corpus", "--results", str(tmp_path)]) != 0
    assert main(["audit", "dpsgd", "--canaries", "5", "--results", str(tmp_path)]) != 0
    assert not any(tmp_path.iterdir())
