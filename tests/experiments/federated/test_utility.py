"""The federated utility sweep reuses a record only when it was made with the same frozen-encoder backend."""

from __future__ import annotations

import pytest

from veil.encoders.backends import ENV
from veil.errors import StaleResultError
from veil.experiments.federated.utility import run_cells
from veil.federated import FederatedConfig
from veil.federated.run import requested_config, result_path
from veil.results import ResultRecord

SMALL = dict(corpus="rt-polarity", clients=2, rounds=1, max_train=64, max_test=32, batch_size=16, m=0, k=1)


@pytest.fixture(autouse=True)
def _corpus(builtin):
    builtin("rt-polarity")


def test_a_frozen_run_is_reused_only_under_the_backend_it_was_made_with(tmp_path, monkeypatch):
    """A torch record (as every committed one: no backend key) is kept under torch and refused under
    VEIL_ENCODER_BACKEND=onnx before any run; fine-tuned runs encode in torch, whatever the variable says."""
    cfg = FederatedConfig(**SMALL)
    monkeypatch.setenv(ENV, "torch")
    (path,) = run_cells([cfg], tmp_path, engine="reference", log=lambda line: None)
    assert path == result_path(cfg, tmp_path) and "encoder_backend" not in ResultRecord.read(path).config
    stamp = path.stat().st_mtime_ns
    monkeypatch.setenv(ENV, "onnx")
    assert requested_config(cfg)["encoder_backend"] == "onnx"
    assert "encoder_backend" not in requested_config(FederatedConfig(**{**SMALL, "client_mode": "fedavg"},
                                                                     finetune=True))
    with pytest.raises(StaleResultError, match=r'encoder_backend: stored \(absent\), requested "onnx"'):
        run_cells([cfg], tmp_path, engine="reference", log=lambda line: None)
    monkeypatch.setenv(ENV, "torch")
    lines: list[str] = []
    assert run_cells([cfg], tmp_path, engine="reference", log=lines.append) == [path]
    assert "skip" in lines[0] and path.stat().st_mtime_ns == stamp


def test_an_infeasible_cell_made_under_onnx_names_its_backend(tmp_path, monkeypatch):
    """The infeasibility check reads the encoded split (here by ONNX Runtime): its record is reused under onnx and
    refused under torch, as a run's would be."""
    cfg = FederatedConfig(**{**SMALL, "clients": 10, "alpha": 0.1})  # 10 clients x 16 > 64 examples
    monkeypatch.setenv(ENV, "onnx")
    (path,) = run_cells([cfg], tmp_path, engine="reference", log=lambda line: None)
    rec = ResultRecord.read(path)
    assert "infeasible" in rec.extra and rec.config["encoder_backend"] == "onnx"
    lines: list[str] = []
    assert run_cells([cfg], tmp_path, engine="reference", log=lines.append) == [path] and "skip" in lines[0]
    monkeypatch.setenv(ENV, "torch")
    with pytest.raises(StaleResultError, match=r'encoder_backend: stored "onnx", requested \(absent\)'):
        run_cells([cfg], tmp_path, engine="reference", log=lambda line: None)
