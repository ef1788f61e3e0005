"""``veil models train inverter``: bad options fail before any work, and the ``--quick`` path on a tiny slice
trains, writes the model with its manifest, and ``veil models list`` shows it."""

from __future__ import annotations

import json

import pytest

from veil.cli.entry import main


@pytest.mark.parametrize("args, message", [
    (["--max-minutes", "nan"], "--max-minutes"),
    (["--max-minutes", "0"], "--max-minutes"),
    (["--epochs", "0"], "--epochs"),
    (["--heldout", "0"], "--heldout"),
    (["--device", "tpu"], "--device"),
])
def test_bad_training_options_fail_before_any_work(args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    assert main(["models", "train", "inverter", "--quick", *args]) == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_the_quick_path_on_a_tiny_slice_trains_and_is_listed(real_home, tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    home.mkdir()
    (home / "corpora").symlink_to(real_home / "corpora")  # the pulled corpora, read only
    monkeypatch.setenv("VEIL_HOME", str(home))
    args = ["models", "train", "inverter", "--quick", "--max-train", "12", "--heldout", "3", "--threads", "1"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["name"] == "inverter-quick" and out["train_sentences"] == 12 and out["heldout"]["sentences"] == 3
    assert out["data"]["corpora"]["news-articles"]["sentences"] == 12 and out["steps"] == 2
    assert out["config"]["max_train"] == 12 and out["encoder"]["name"] == "minilm"
    assert (home / "models" / "inverter-quick" / ".veil-owned").is_file()
    assert main(args) == 2  # it exists: only --force trains it again
    assert "--force" in capsys.readouterr().err
    assert main(["models", "list", "--json"]) == 0
    row = next(r for r in json.loads(capsys.readouterr().out)["models"] if r["name"] == "inverter-quick")
    assert row["kind"] == "inverter" and out["sha256"][:12] in row["detail"]
