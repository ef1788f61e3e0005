"""veil.experiments.rewriting.utility through ``veil rewrite utility``: one record per epsilon with the clean
classifier's accuracy beside the rewritten text's, and more epsilon keeping more of the text."""

from __future__ import annotations

from veil.results import ResultRecord


def test_records_per_epsilon_with_the_clean_reference(quick_mlm, tmp_path, capsys, monkeypatch, real_home):
    from veil.cli import main

    monkeypatch.setenv("VEIL_HOME", str(real_home))
    out = tmp_path / "rewriting"
    assert main(["rewrite", "utility", "--n-test", "40", "--epsilons", "5,200", "--calibration", "10", "--mlm",
                 "mlm-quick", "--results",
                 str(out)]) == 0
    low = ResultRecord.read(out / "rt-polarity-dp-mlm-eps5.json")
    high = ResultRecord.read(out / "rt-polarity-dp-mlm-eps200.json")
    for rec in (low, high):
        m = rec.metrics
        assert m["accuracy"].n == 40 and m["accuracy"].ci_low <= m["accuracy"].mean <= m["accuracy"].ci_high
        assert m["accuracy_clean"].mean == low.metrics["accuracy_clean"].mean  # one classifier, one clean test
        assert 0 < m["majority_rate"].mean < 1 and len(rec.extra["examples"]) == 5
        assert rec.config["clip"][0] < rec.config["clip"][1] and rec.extra["guarantee"]["kind"] == "epsilon-dp"
    assert high.metrics["kept"].mean > low.metrics["kept"].mean
    assert high.metrics["cosine"].mean > low.metrics["cosine"].mean
    assert "wrote" in capsys.readouterr().out


def test_bad_options_are_refused_before_any_work(cli):
    cli("rewrite", "utility", "--epsilons", "-1", match="epsilon")
    cli("rewrite", "utility", "--corpus", "no-such-corpus", match="corpus")
