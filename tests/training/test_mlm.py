"""veil's masked LM: the quick model and its manifest, integrity checks, and a resumed run that ends where an
uninterrupted one does."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
import torch

from veil.errors import CacheCorruptError, InvalidParameterError, ResourceMissingError
from veil.models.mlm import WEIGHTS, load_mlm
from veil.parsing.treebank import load_treebank
from veil.training.mlm import QUICK_MLM, MLMConfig, state_path, train_mlm


def test_the_quick_model_learned_and_its_manifest_says_from_what(quick_mlm):
    m = quick_mlm.manifest
    assert m["name"] == "mlm-quick" and m["kind"] == "masked-lm"
    assert m["data"]["treebank"] == "silver-sm-quick" and m["data"]["split"] == "train"
    assert m["heldout"]["split"] == "dev" and m["heldout"]["masked_tokens"] > 1000
    assert m["config"] == QUICK_MLM.to_dict()
    curve = m["curve"]
    assert curve[0]["step"] == 0 and curve[-1]["step"] == m["steps"] > 0
    # a fresh MLM head predicts nothing; training must have taught it (far above its starting point)
    assert m["heldout"]["accuracy"] >= m["heldout"]["start_accuracy"] + 5.0
    assert quick_mlm.model.cls.predictions.decoder.weight.data_ptr() == \
        quick_mlm.model.bert.embeddings.word_embeddings.weight.data_ptr()  # the decoder stays tied


def test_a_damaged_or_missing_model_is_refused(quick_mlm, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(quick_mlm.folder, folder)
    assert load_mlm(folder).manifest["sha256"] == quick_mlm.manifest["sha256"]
    data = bytearray((folder / WEIGHTS).read_bytes())
    data[-100] ^= 0xFF
    (folder / WEIGHTS).write_bytes(bytes(data))
    with pytest.raises(CacheCorruptError, match="veil models train mlm"):
        load_mlm(folder)
    with pytest.raises(ResourceMissingError, match="veil models train mlm"):
        load_mlm(tmp_path / "nothing-here")


def _tiny() -> tuple[MLMConfig, list, list]:
    """Four steps of about 256 subword tokens (20 sentences, one epoch), an evaluation every second step."""
    trees = load_treebank("train", "silver-sm-quick")[:20]
    dev = load_treebank("dev", "silver-sm-quick")[:8]
    config = MLMConfig(name="mlm-quick", treebank="silver-sm-quick", epochs=1, batch_tokens=256, eval_every=2,
                       heldout=8, warmup=2, threads=1, seed=3)
    return config, [(t.words, t.tags) for t in trees], [(t.words, t.tags) for t in dev]


@pytest.fixture(scope="module")
def uninterrupted(quick_mlm, tmp_path_factory):
    """The uninterrupted run of :func:`_tiny`: its manifest and its saved weights (the run a resumed or capped run
    must end at; trained once for this file)."""
    config, train, heldout = _tiny()
    folder = tmp_path_factory.mktemp("mlm") / "whole"
    manifest = train_mlm(config, train, heldout, out=folder, log=lambda _: None)
    return manifest, load_mlm(folder).model.state_dict()


def test_an_interrupted_run_resumes_and_ends_where_an_uninterrupted_one_does(quick_mlm, tmp_path, uninterrupted):
    config, train, heldout = _tiny()
    whole, a = uninterrupted

    class Stop(Exception):
        pass

    def interrupt(line: str) -> None:
        if line.startswith("step 2 "):  # after the state of step 2 is written, two steps before the end
            raise Stop

    folder = tmp_path / "resumed"
    with pytest.raises(Stop):
        train_mlm(config, train, heldout, out=folder, log=interrupt)
    assert state_path(folder).is_file() and not folder.exists()
    lines: list[str] = []
    again = train_mlm(config, train, heldout, out=folder, log=lines.append)
    assert any(line.startswith("resumed at step 2") for line in lines)
    assert not state_path(folder).exists()  # finished: the resume state is gone
    assert again["steps"] == whole["steps"] == 4 and [r["step"] for r in again["curve"]] == [r["step"] for r in
                                                                                             whole["curve"]]
    b = load_mlm(folder).model.state_dict()
    assert all(torch.allclose(a[k], b[k]) for k in a)
    # a state of another configuration is never resumed
    with pytest.raises(InvalidParameterError, match="already exists"):
        train_mlm(config, train, heldout, out=folder, log=lambda _: None)
    with pytest.raises(InvalidParameterError, match="lr"):
        replace(config, lr=float("nan"))


def test_the_minute_cap_only_marks_a_run_cut_short_and_resuming_it_ends_where_an_uninterrupted_run_does(
        quick_mlm, tmp_path, uninterrupted):
    """The budget is steps (issue 50, item 1): a session stopped by its minute cap saves a model marked cut short
    and keeps its state, and resuming session after session (before and after an evaluation) ends where an
    uninterrupted run ends."""
    config, train, heldout = _tiny()
    whole, a = uninterrupted
    assert whole["stopped"] == "epochs" and whole["planned_steps"] == whole["steps"] >= 4
    folder, hurried = tmp_path / "capped", replace(config, max_minutes=1e-6)  # every session stops after a step
    sessions: list[dict] = []
    for _ in range(whole["steps"] + 2):
        lines: list[str] = []
        sessions.append(train_mlm(hurried, train, heldout, out=folder, log=lines.append))
        if sessions[-1]["stopped"] != "budget":
            break
        assert state_path(folder).is_file() and any("cut short" in line for line in lines)
    assert sessions[0]["steps"] == 1 and sessions[0]["planned_steps"] == whole["steps"]
    assert len(sessions) == whole["steps"] and not state_path(folder).exists()
    key = (lambda m: [(r["step"], r["accuracy"], r["loss"], r.get("train_loss")) for r in m["curve"]])
    assert key(sessions[-1]) == key(whole) and sessions[-1]["selected_step"] == whole["selected_step"]
    assert sessions[-1]["tokens_seen"] == whole["tokens_seen"]
    b = load_mlm(folder).model.state_dict()
    assert all(torch.allclose(a[k], b[k]) for k in a)


def test_the_first_use_resumes_a_quick_model_cut_short_or_trains_it_again(quick_mlm, tmp_path, monkeypatch,
                                                                          real_home):
    """ensure_mlm (the first use of the quick model) resumes a quick model its minute cap cut short, and trains
    one again whose state is gone, so a busy first run does not leave a weaker model for good."""
    import veil.training.mlm as tm
    from veil.parsing.mlm import ensure_mlm

    for sub in ("corpora", "encoders", "parsing"):  # the real treebank and MiniLM, read only
        if (real_home / sub).exists():
            (tmp_path / sub).symlink_to(real_home / sub)
    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    # every session: one step; of 20 sentences of the treebank's train split (tokenised in no time)
    monkeypatch.setattr(tm, "QUICK_MLM", replace(_tiny()[0], max_minutes=1e-6, max_train=20))
    ensure_mlm("mlm-quick", log=lambda _: None)
    assert load_mlm("mlm-quick").manifest["stopped"] == "budget" and load_mlm("mlm-quick").manifest["steps"] == 1
    lines: list[str] = []
    ensure_mlm("mlm-quick", log=lines.append)
    assert any("cut short by its minute cap at step 1 of" in line and "resuming it" in line for line in lines)
    assert load_mlm("mlm-quick").manifest["steps"] == 2
    state_path(tmp_path / "models" / "mlm-quick").unlink()
    lines.clear()
    ensure_mlm("mlm-quick", log=lines.append)
    assert any("no state is left to resume it from: training it again" in line for line in lines)
    assert load_mlm("mlm-quick").manifest["steps"] == 1


def test_models_list_shows_the_cached_model(quick_mlm, real_home, monkeypatch, capsys):
    from veil.cli.entry import main

    monkeypatch.setenv("VEIL_HOME", str(real_home))
    assert main(["models", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["models"]
    row = next(r for r in rows if r["name"] == "mlm-quick")
    assert row["kind"] == "masked-lm" and quick_mlm.manifest["sha256"][:12] in row["detail"]


@pytest.mark.parametrize("args, message", [
    (["--max-minutes", "nan"], "--max-minutes"),
    (["--max-minutes", "0"], "--max-minutes"),
    (["--epochs", "0"], "--epochs"),
])
def test_bad_training_options_fail_before_any_work(args, message, tmp_path, monkeypatch, capsys):
    from veil.cli.entry import main

    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    assert main(["models", "train", "mlm", "--quick", *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "models").exists()
