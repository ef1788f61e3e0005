"""``veil dpsgd train`` (veil.cli.dpsgd), mounted on a bare Typer app as veil's root app mounts it."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from veil.cli.dpsgd import register


@pytest.fixture
def invoke(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = typer.Typer()
    register(app)

    @app.callback()
    def _root() -> None:  # a group, as in veil
        pass

    def run(*args: str):
        return CliRunner().invoke(app, ["dpsgd", "train", *args])

    return run


@pytest.mark.parametrize("args, message", [
    (("--epsilon", "0"), "--epsilon must be > 0"),
    (("--epsilon", "-1"), "--epsilon must be > 0"),
    (("--epsilon", "8,8"), "--epsilon repeats"),
    (("--epsilon", "inf"), "--epsilon must be a finite number"),
    (("--setting", "all-layers"), "--setting must be one of head, top-layers"),
    (("--accountant", "gdp"), "--accountant must be prv or rdp"),
    (("--clip", "0"), "--clip must be > 0"),
    (("--seeds", "1,1"), "--seeds repeats"),
    (("--epochs", "0"), "x>=1"),
    (("--optimizer", "rmsprop"), "--optimizer must be adam or sgd"),
    (("--lr", "0"), "--lr must be > 0"),
])
def test_bad_values_stop_before_any_work(invoke, tmp_path, args, message):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not any(tmp_path.iterdir())  # nothing written, not even the results folder


def test_json_output_lists_one_record_per_run(invoke, tmp_path, builtin):
    builtin("rt-polarity")
    result = invoke("--epsilon", "8", "--epochs", "1", "--batch-size", "50", "--max-train", "200", "--results",
                    str(tmp_path / "out"), "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["epsilon_target"] for r in rows] == [None, 8.0]
    assert rows[1]["metrics"]["epsilon"]["mean"] <= 8.0 and "accuracy_change" in rows[1]["metrics"]
    assert all((tmp_path / "out" / r["path"].rsplit("/", 1)[1]).exists() for r in rows)
