"""``veil parse train`` reports only what it wrote (issue 26): a run that ends before its first dev evaluation is
evaluated at its end and saved; a resume continues only its own run; nothing is replaced without --force.

Real runs on the tiny treebank (tests/parsing/conftest.py), a few seconds each (no md vectors, 8 hidden units).
"""

from __future__ import annotations

import re

import torch

from veil.cli import main

ARGS = ["--vectors", "none", "--hidden", "8", "--max-minutes", "0.1", "--max-train", "100"]


def test_a_run_shorter_than_one_evaluation_still_saves_its_parser(tiny_treebank, tmp_path, capsys):
    from veil.models.biaffine import BiaffineParser
    from veil.parsing.train import read_summary

    out = tmp_path / "m.pt"
    assert main(["parse", "train", "--treebank", str(tiny_treebank), "--out", str(out), *ARGS]) == 0
    text = capsys.readouterr().out
    uas = float(re.search(r"best dev UAS (-?[\d.]+)", text).group(1))
    assert 0.0 <= uas <= 100.0, text  # never the -1.00 of a run that was not evaluated
    # rich wraps long paths at a space, which it then drops: compare without whitespace
    assert re.sub(r"\s", "", f"wrote {out} and {out.with_suffix('.json')}") in re.sub(r"\s", "", text)
    assert isinstance(BiaffineParser.load(out), BiaffineParser)
    summary = read_summary(out)
    assert summary["history"] and summary["history"][-1]["step"] == summary["steps"]
    assert summary["best_dev_uas"] == uas or abs(summary["best_dev_uas"] - uas) < 0.01

    # the same configuration resumes its own run (the state is read with weights_only=True) and writes nothing new
    before = out.read_bytes()
    assert main(["parse", "train", "--treebank", str(tiny_treebank), "--out", str(out), *ARGS]) == 0
    assert "resumed at step" in capsys.readouterr().out and out.read_bytes() == before

    # --no-resume (or another configuration) refuses to replace it; --force replaces it
    assert main(["parse", "train", "--treebank", str(tiny_treebank), "--out", str(out), *ARGS, "--no-resume"]) == 2
    assert re.search(r"already exist.*--no-resume was given.*--force", capsys.readouterr().err)
    assert out.read_bytes() == before
    args = [a if a != "8" else "12" for a in ARGS]  # --hidden 12: another configuration
    assert main(["parse", "train", "--treebank", str(tiny_treebank), "--out", str(out), *args]) == 2
    assert re.search(r"another configuration \(hidden: stored 8, requested 12\).*--force", capsys.readouterr().err)
    assert main(["parse", "train", "--treebank", str(tiny_treebank), "--out", str(out), *args, "--force"]) == 0
    capsys.readouterr()
    assert BiaffineParser.load(out).config.hidden == 12


def test_the_resume_state_holds_only_tensors_and_plain_values(tiny_treebank, tmp_path, capsys):
    out = tmp_path / "m.pt"
    assert main(["parse", "train", "--treebank", str(tiny_treebank), "--out", str(out), *ARGS]) == 0
    capsys.readouterr()
    state = torch.load(out.with_suffix(".state.pt"), map_location="cpu", weights_only=True)
    assert {"config", "net", "opt", "step", "best", "history"} <= set(state)


def test_a_step_budget_ends_the_run_at_its_steps_whatever_the_minutes(tiny_treebank, tmp_path, capsys):
    """--max-steps is the budget (recorded as how the run stopped); --max-minutes stays a far-away safety cap, so
    two runs of the same seed give the same parser."""
    from veil.parsing.train import read_summary

    args = ["--vectors", "none", "--hidden", "8", "--max-minutes", "30", "--max-train", "100", "--max-steps", "3"]
    outs = [tmp_path / "a.pt", tmp_path / "b.pt"]
    for out in outs:
        assert main(["parse", "train", "--treebank", str(tiny_treebank), "--out", str(out), *args]) == 0
    capsys.readouterr()
    summaries = [read_summary(out) for out in outs]
    for s in summaries:
        assert s["steps"] == 3 and s["stopped"] == "steps" and s["config"]["max_steps"] == 3
    assert summaries[0]["history"] == [{**h, "minutes": summaries[0]["history"][i]["minutes"]}
                                       for i, h in enumerate(summaries[1]["history"])]
    a, b = (torch.load(out, map_location="cpu", weights_only=True)["state"] for out in outs)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
