"""``veil lm train`` and ``veil lm attack``: bad input is refused before any work with a fix that names real
options, and the quick run writes its records through the CLI with --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.mark.parametrize(("args", "match"), [
    (("lm", "train", "--corpus", "no-such-corpus"), "no-such-corpus"),
    (("lm", "train", "--defense", "dpsgd"), "lm-plain"),
    (("lm", "train", "--steps", "0"), "--steps"),
    (("lm", "train", "--epsilon", "3"), "--epsilon is lm-dpsgd's target; lm-plain has none"),
    (("lm", "train", "--defense", "lm-dpsgd", "--epsilon", "0"), "epsilon"),
    (("lm", "attack", "--attacks", "membership-loss"), "canary-exposure, extraction, pii-inference"),
    (("lm", "attack", "--attacks", "extraction,extraction"), "names one twice"),
])
def test_bad_input_is_refused_before_any_work(cli, args, match):
    cli(*args, "--results", "out", match=match)


def test_attacking_a_run_never_trained_names_the_command_that_trains_it(cli):
    cli("lm", "attack", "--seed", "987", "--results", "out", match="veil lm train --corpus rt-polarity")


def test_the_quick_run_trains_and_is_attacked_through_the_cli(tmp_path, monkeypatch, real_home, capsys, builtin):
    from veil.cli import main

    builtin("rt-polarity")
    home = tmp_path / "home"
    home.mkdir()
    for sub in ("corpora", "encoders", "downloads"):
        if (real_home / sub).exists():
            (home / sub).symlink_to(real_home / sub)
    monkeypatch.setenv("VEIL_HOME", str(home))
    out = tmp_path / "results"
    assert main(["lm", "train", "--quick", "--steps", "2", "--results", str(out), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["experiment"] == "utility" and "heldout_perplexity" in rows[0]["metrics"]
    assert main(["lm", "attack", "--quick", "--steps", "2", "--attacks", "extraction", "--results", str(out),
                 "--json"]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)
    assert [r["experiment"] for r in rows] == ["extraction"] and "wrote " in captured.err
    assert all(json.loads(Path(r["path"]).read_text())["method"] == "generation" for r in rows)
    assert rows[0]["kept"] is False
    # a second call keeps the record, and says so rather than "wrote"
    assert main(["lm", "attack", "--quick", "--steps", "2", "--attacks", "extraction", "--results", str(out),
                 "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)[0]["kept"] is True and "wrote " not in captured.err and "; kept " in captured.err
