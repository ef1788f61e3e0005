"""`veil adversarial train` and `veil attack attribute`: JSON output, resumption, typed errors on bad input.

The commands are mounted on a fresh Typer app with ``register`` of veil.cli.adversarial and veil.cli.attack (what
veil.cli.root does), so these tests run only the commands they test.
"""

from __future__ import annotations

import json

import click
import pytest
import typer

from veil.cli import adversarial, attack as attack_commands
from veil.errors import InvalidParameterError


def _run(args: list[str]) -> None:
    app = typer.Typer()
    adversarial.register(app)
    attack_commands.register(app)
    typer.main.get_command(app).main(args=args, prog_name="veil", standalone_mode=False)


def test_train_then_attack_reads_the_same_record(tmp_path, capsys, builtin):
    builtin("debates-2016")
    # --encoder lstm: the paper's setting (attack attribute's default is minilm, the one that shows the leak)
    args = ["--corpus", "debates-2016", "--defense", "decluster", "--width", "8", "--epochs", "1", "--max-train",
            "120", "--encoder", "lstm", "--results", str(tmp_path), "--json"]
    _run(["adversarial", "train", *args])
    out = json.loads(capsys.readouterr().out)
    assert out["ran"] is True and "privacy[mlp]" in out["metrics"] and "floor_privacy" in out["metrics"]
    files = list(tmp_path.glob("*.json"))
    assert [f.name for f in files] == ["debates-2016-lstm-decluster-w8-s0-ep1-n120.json"]
    _run(["attack", "attribute", *args])  # the record exists: no retraining
    attack = json.loads(capsys.readouterr().out)
    assert attack["result"] == str(files[0]) and set(attack["attacks"]) == {"mlp", "mlp-wide", "linear"}
    assert attack["metrics"] == out["metrics"]


def test_bad_input_raises_typed_errors_before_any_work(tmp_path):
    with pytest.raises(InvalidParameterError, match="defense must be one of .*multidetask"):
        _run(["adversarial", "train", "--defense", "dp-sgd", "--results", str(tmp_path)])
    with pytest.raises(InvalidParameterError, match="news-articles"):
        _run(["adversarial", "train", "--corpus", "rt-polarity", "--results", str(tmp_path)])
    with pytest.raises(click.BadParameter, match="--defenses must name"):
        _run(["adversarial", "sweep", "--defenses", "none,foo", "--results", str(tmp_path)])
    assert not any(tmp_path.iterdir())
