"""veil.experiments.rewriting.audit through ``veil audit dp-mlm``: records per claimed epsilon, the control caught
(exit 0 only when it is), bad options refused before any work."""

from __future__ import annotations

import json

from veil.results import ResultRecord

SMALL = ["--epsilons", "2", "--sentences", "2", "--calibration", "10", "--trials", "100000", "--selection-trials",
         "20000", "--pairs", "2", "--mlm", "mlm-quick"]


def test_the_control_is_caught_and_recorded_and_a_second_call_keeps_it(quick_mlm, tmp_path, capsys, monkeypatch,
                                                                      real_home):
    from veil.cli import main

    monkeypatch.setenv("VEIL_HOME", str(real_home))
    out = tmp_path / "audit"
    assert main(["audit", "dp-mlm", "--control", "greedy", *SMALL, "--results", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    rec = ResultRecord.read(out / "audit-rt-polarity-dp-mlm-broken-greedy-eps2.json")
    assert printed[0]["experiment"] == rec.experiment and rec.extra["control"]
    assert rec.metrics["violation"].mean == 1.0 and rec.metrics["epsilon_lower_bound"].mean > 2.0
    assert rec.config["mlm"]["name"] == "mlm-quick" and rec.config["unit"] == "word piece"
    assert main(["audit", "dp-mlm", "--control", "greedy", *SMALL, "--results", str(out)]) == 0
    assert "existed under this configuration" in capsys.readouterr().out


def test_bad_options_are_refused_before_any_work(cli):
    cli("audit", "dp-mlm", "--control", "no-such", match="control")
    cli("audit", "dp-mlm", "--epsilons", "0", match="epsilon")
    cli("audit", "dp-mlm", "--corpus", "no-such-corpus", match="corpus")
