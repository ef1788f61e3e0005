"""The TextHide experiment runner on a tiny real configuration."""

from __future__ import annotations

import json

import pytest

from veil.errors import InvalidParameterError
from veil.experiments.texthide.eval import TextHideEval, grid_configs, result_path, run_texthide_eval, table1_configs


def test_names_and_sweeps():
    assert TextHideEval(m=0, k=1).name == "rt-polarity-baseline-frozen"
    assert TextHideEval(m=None, k=8, finetune=True).name == "rt-polarity-intra-minf-k8-finetuned"
    assert len(grid_configs()) == 7 * 4
    t1 = table1_configs()
    assert len(t1) == 4 * 3 + 2 and {c.corpus for c in t1} == {"rt-polarity", "trec-questions", "sms-spam", "hutto-tweets"}
    with pytest.raises(InvalidParameterError):
        TextHideEval(mode="both")
    with pytest.raises(InvalidParameterError):
        TextHideEval(mode="inter", k=1)
    for bad in ({"batch_size": 0}, {"epochs": 0}, {"patience": 0}, {"public_size": 0}, {"head_warmup": -1},
                {"encoder_lr": 0.0}):
        with pytest.raises(InvalidParameterError):
            TextHideEval(**bad)


def test_budget_defaults_per_setting():
    frozen, tuned = TextHideEval().train_config(0), TextHideEval(finetune=True).train_config(0)
    assert (frozen.epochs, frozen.patience, frozen.batch_size, frozen.head_warmup_epochs) == (300, 50, 64, 0)
    assert (tuned.epochs, tuned.patience, tuned.batch_size, tuned.head_warmup_epochs) == (4, 2, 32, 60)
    grid = grid_configs()[5].train_config(0)
    assert (grid.epochs, grid.patience) == (60, 15)  # the grid's CPU budget, which the committed grid used
    assert TextHideEval(finetune=True, head_warmup=0).train_config(0).head_warmup_epochs == 0


def test_run_writes_a_record_without_key_material(builtin, tmp_path):
    builtin("trec-questions")
    cfg = TextHideEval(corpus="trec-questions", m=16, k=2, seeds=(0, 1), epochs=2, max_train=400)
    import warnings

    from veil.errors import CollapsedModelWarning

    with warnings.catch_warnings(record=True) as caught:  # 2 epochs on random masks may collapse: then it must say so
        warnings.simplefilter("always")
        rec = run_texthide_eval(cfg, progress=False)
    assert all(issubclass(w.category, CollapsedModelWarning) for w in caught), [str(w.message) for w in caught]
    flags = rec.extra["collapsed_dev"] + rec.extra["collapsed_test"]
    assert len(rec.extra["collapsed_dev"]) == 2 and len(caught) == sum(flags)  # one warning per flagged run
    assert set(rec.metrics) >= {"test_accuracy", "test_macro_f1", "test_mcc", "dev_accuracy"}
    assert rec.metrics["test_accuracy"].n == 2 and rec.extra["n_train"] == 400
    path = rec.write(result_path(cfg, tmp_path))
    text = path.read_text()
    data = json.loads(text)
    assert data["config"]["m"] == "16" and data["config"]["setting"] == "frozen"
    assert "mask" not in json.dumps(data["extra"]).lower()


def test_a_record_is_reused_only_under_the_encoder_backend_it_was_made_with(builtin, tmp_path, monkeypatch):
    """A frozen run's record (made with torch, as every committed one: no backend key) is kept by a torch run and
    refused under VEIL_ENCODER_BACKEND=onnx before any work; fine-tuned runs encode in torch whatever it says."""
    from veil.encoders.backends import ENV
    from veil.errors import StaleResultError
    from veil.experiments.texthide.eval import existing_result, identity, run_sweep

    builtin("trec-questions")
    monkeypatch.setenv(ENV, "torch")
    cfg = TextHideEval(corpus="trec-questions", m=0, k=1, seeds=(0,), epochs=1, max_train=100)
    (path,) = run_sweep([cfg], tmp_path, log=lambda line: None)
    assert "encoder_backend" not in json.loads(path.read_text())["config"]
    stamp = path.stat().st_mtime_ns
    assert existing_result(cfg, path) is not None
    monkeypatch.setenv(ENV, "onnx")
    assert identity(cfg)["encoder_backend"] == "onnx"
    with pytest.raises(StaleResultError, match=r'encoder_backend: stored \(absent\), requested "onnx"'):
        run_sweep([cfg], tmp_path, log=lambda line: None)
    assert path.stat().st_mtime_ns == stamp
    tuned = TextHideEval(corpus="trec-questions", finetune=True)
    assert "encoder_backend" not in identity(tuned)
    monkeypatch.setenv(ENV, "torch")
    lines: list[str] = []
    assert run_sweep([cfg], tmp_path, log=lines.append) == [path] and path.stat().st_mtime_ns == stamp
    assert lines[0].startswith("skip ")
