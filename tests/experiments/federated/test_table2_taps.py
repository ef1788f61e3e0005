"""The gradient-attack runners (veil.experiments.federated.table2 and .taps) and commands (veil.cli.attack):
resumable Table 2 cells with Wilson intervals, attacks on a recorded run with and without ground truth, JSON output, typed errors,
and the rendered page. The commands are exercised through ``register`` on a fresh Typer app (how veil.cli.root
mounts them)."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import typer
from typer.testing import CliRunner

from veil.attacks.gradients.tap import write_tap_meta, write_tap_round
from veil.attacks.gradients.truth import write_tap_truth
from veil.errors import InvalidParameterError, PrivacyLeakWarning, ResourceMissingError
from veil.experiments.federated.table2 import Table2Cell, result_path, run_table2, table2_cells
from veil.experiments.federated.taps import run_tap_attack, tap_result_path
from veil.results import ResultRecord

pytestmark = pytest.mark.usefixtures("builtin")


@pytest.fixture(autouse=True)
def _corpus(builtin):
    builtin("rt-polarity")


def _app() -> typer.Typer:
    from veil.cli import attack

    app = typer.Typer()
    attack.register(app)
    return app


def _tap(path, *, truth=True, batch=4):
    """One alg2 round of two clients on TextHide (k=2, m=8) encodings of random unit vectors, recorded."""
    from veil.defenses.texthide import MaskPool, TextHide
    from veil.models.heads import MLPHead

    d, scale = 24, math.sqrt(24)
    write_tap_meta(path, {"model": {"in_dim": d, "out_dim": 2, "hidden": [256], "dropout": 0.0}, "rep_scale": scale,
                          "task": "classification", "num_classes": 2, "client_mode": "alg2", "optimizer": "sgd",
                          "lr": 0.5, "weight_decay": 0.0, "batch_size": batch, "local_epochs": 0, "rounds": 1,
                          "defense": {"name": "texthide", "m": 8, "k": 2, "mode": "intra"}, "clients": ["0", "1"]})
    head = MLPHead(d, 2, hidden=(256,), dropout=0.0, rng=0)
    start = {k: v.detach().numpy().copy() for k, v in head.state_dict().items()}
    rng = np.random.default_rng(0)
    replies = {}
    for c in ("0", "1"):
        head.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in start.items()})
        x = rng.standard_normal((batch, d)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        y = torch.nn.functional.one_hot(torch.arange(batch) % 2, 2).float()
        with warnings.catch_warnings():  # a seeded key: the recorded run (and what it lets the attack do) is fixed
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            hide = TextHide(k=2, pool=MaskPool(8, d, rng=int(c) + 10), rng=int(c) + 20)
        out = hide.encrypt(torch.from_numpy(x) * scale, y)
        loss = -(out.y * torch.log_softmax(head(out.e), -1)).sum(-1).mean()
        opt = torch.optim.SGD(head.parameters(), lr=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        replies[c] = ({k: v.detach().numpy().copy() for k, v in head.state_dict().items()},
                      {"num-examples": batch, "train_loss": float(loss.detach())})
        if truth:
            write_tap_truth(path, 1, c, inputs=out.e.detach().numpy(), step=np.zeros(batch, dtype=np.int64),
                            sources=np.arange(batch)[:, None], soft_labels=out.y.numpy())
    write_tap_round(path, 1, global_state=start, replies=replies)
    return path


def test_table2_cells_resume_and_carry_wilson_intervals(tmp_path):
    cells = [Table2Cell(k=0, d=4, runs=3, max_evals=60), Table2Cell(k=1, d=4, runs=3, max_evals=60)]
    first = run_table2(cells, tmp_path, progress=False, log=lambda line: None)
    stamps = [p.stat().st_mtime_ns for p in first]
    lines: list[str] = []
    again = run_table2(cells, tmp_path, progress=False, log=lines.append)
    assert again == first and [p.stat().st_mtime_ns for p in again] == stamps
    assert all("skip" in line for line in lines)
    rec = ResultRecord.read(result_path(cells[1], tmp_path))
    s = rec.metrics["success"]
    assert s.n == 3 and s.ci_low is not None and s.ci_low <= s.mean <= s.ci_high and s.ci_level == 0.95
    assert rec.config["defense"]["k"] == 1 and "OS CSPRNG" in rec.config["secret_randomness"]
    assert len(rec.extra["runs"]) == 3 and "mask_bits" in rec.metrics
    base = ResultRecord.read(result_path(cells[0], tmp_path))
    assert base.config["defense"] == {"defense": "none"} and "mask_bits" not in base.metrics
    grid = table2_cells()
    assert {(c.k, c.d) for c in grid} == {(k, d) for k in (0, 1, 2, 4) for d in (4, 16, 64, 256, 1024)}
    assert len({c.name for c in grid}) == len(grid)
    with pytest.raises(InvalidParameterError, match="placement"):
        Table2Cell(placement="output")


def test_gradmatch_table_command_prints_json(tmp_path):
    result = CliRunner().invoke(_app(), ["attack", "gradmatch-table", "--k", "2", "--d", "4", "--runs", "2",
                                         "--max-evals", "30", "--no-baseline", "--results", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert len(out["results"]) == 1 and out["table"][0]["k"] == 2 and out["table"][0]["success"]["n"] == 2
    bad = CliRunner().invoke(_app(), ["attack", "gradmatch-table", "--k", "0", "--results", str(tmp_path)])
    assert bad.exit_code == 2 and ">= 1" in bad.output


def test_attacks_on_a_recorded_run_with_and_without_truth(tmp_path):
    tap = _tap(tmp_path / "run")
    rec = run_tap_attack(tap, "analytic", seed=0, match=False)
    assert rec.config["scored"] and len(rec.extra["updates"]) == 2
    assert rec.metrics["rows_recovered"].n == 8 and rec.metrics["rows_recovered"].ci_high is not None
    assert rec.metrics["rows_recovered"].mean == 1.0 and rec.metrics["precision"].mean == 1.0
    # per-row soft labels come from float32 weight differences (w_global - w_client) / lr, whose cancellation
    # error reaches ~1e-3 at batch 4 (one CI run saw 4e-3); a wrongly attributed label would be off by >= 0.1
    assert rec.metrics["per_row_label_error"].mean < 0.02
    blind = _tap(tmp_path / "blind", truth=False)
    rec = run_tap_attack(blind, "analytic", seed=0, match=False)
    assert not rec.config["scored"] and rec.metrics == {} and rec.extra["updates"][0]["vectors"] == 4

    result = CliRunner().invoke(_app(), ["attack", "analytic", "--record", str(tap), "--results", str(tmp_path / "r"),
                                         "--no-match", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["experiment"] == "tap-analytic" and out["metrics"]["rows_recovered"]["mean"] == 1.0
    assert tap_result_path(tap, "analytic", tmp_path / "r").is_file()
    again = CliRunner().invoke(_app(), ["attack", "analytic", "--record", str(tap), "--results", str(tmp_path / "r")])
    assert isinstance(again.exception, InvalidParameterError) and "--force" in str(again.exception)
    result = CliRunner().invoke(_app(), ["attack", "gradmatch", "--record", str(tap), "--results", str(tmp_path / "r"),
                                         "--max-evals", "20", "--restarts", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["experiment"] == "tap-gradmatch"
    missing = CliRunner().invoke(_app(), ["attack", "analytic", "--record", str(tmp_path / "none")])
    assert isinstance(missing.exception, ResourceMissingError) and "--record" in str(missing.exception)


def test_page_renders_both_tables(tmp_path):
    from veil.report import render_all

    folder = tmp_path / "results" / "gradients"
    run_table2([Table2Cell(k=0, d=4, runs=2, max_evals=30), Table2Cell(k=2, d=4, runs=2, max_evals=30)], folder,
               progress=False, log=lambda line: None)
    run_tap_attack(_tap(tmp_path / "run"), "analytic", match=False).write(folder / "analytic-run-seed0.json")
    render_all(tmp_path / "results", tmp_path / "docs")
    page = (tmp_path / "docs" / "gradients.md").read_text()
    assert "## Table 2 analogue" in page and "| baseline (no TextHide) |" in page and "| k=2 |" in page
    assert "(0.82)" in page and "| run | analytic | alg2 | texthide (8,2) intra | 4 | 2 | " in page


def test_run_table2_counts_no_damaged_or_stale_record_as_done(tmp_path):
    """Every record on disk is checked before any cell runs: damaged or of another cell -> a typed error."""
    import dataclasses

    from veil.errors import DataFormatError, StaleResultError
    from veil.experiments.federated.table2 import Table2Cell, result_path, run_table2
    from veil.results import ResultRecord

    cell = Table2Cell(k=1, d=4, runs=1, max_evals=5)
    path = result_path(cell, tmp_path)
    path.write_bytes(b"\xff not utf-8")
    with pytest.raises(DataFormatError, match="not UTF-8"):
        run_table2([cell], tmp_path, progress=False, log=lambda _: None)
    other = dataclasses.replace(cell, activation="relu")
    ResultRecord(method="gradients", experiment="table2", config={"cell": other.to_dict()}, metrics={},
                 wall_time_s=0.0).write(path)
    with pytest.raises(StaleResultError, match="activation"):
        run_table2([cell], tmp_path, progress=False, log=lambda _: None)


def test_table2_cells_are_reused_only_under_the_encoder_backend_they_were_made_with(tmp_path, monkeypatch):
    """The inputs are frozen MiniLM vectors: a torch record (as every committed one: no backend key in its cell) is
    kept under torch and refused under VEIL_ENCODER_BACKEND=onnx before any cell runs."""
    from veil.encoders.backends import ENV
    from veil.errors import StaleResultError

    cells = [Table2Cell(k=0, d=4, runs=1, max_evals=5)]
    monkeypatch.setenv(ENV, "torch")
    (path,) = run_table2(cells, tmp_path, progress=False, log=lambda line: None)
    assert ResultRecord.read(path).config["cell"] == cells[0].to_dict()
    stamp = path.stat().st_mtime_ns
    monkeypatch.setenv(ENV, "onnx")
    with pytest.raises(StaleResultError, match=r'encoder_backend: stored \(absent\), requested "onnx"'):
        run_table2(cells, tmp_path, progress=False, log=lambda line: None)
    monkeypatch.setenv(ENV, "torch")
    lines: list[str] = []
    assert run_table2(cells, tmp_path, progress=False, log=lines.append) == [path]
    assert "skip" in lines[0] and path.stat().st_mtime_ns == stamp


COMMITTED = Path(__file__).resolve().parents[3] / "results" / "gradients"


def test_committed_tap_records_match_under_torch_only(tmp_path, monkeypatch):
    """The committed attack records on recorded frozen runs (torch, no backend key) are their cells' under torch
    and refused under VEIL_ENCODER_BACKEND=onnx (the runs' and the index's vectors would be ONNX Runtime's)."""
    import shutil

    from veil.encoders.backends import ENV
    from veil.errors import StaleResultError
    from veil.experiments.federated.chain import chain_grid, chain_result_path
    from veil.experiments.federated.taps import analytic_grid, reusable_tap_record, tap_name

    pairs = [(cfg, tap_result_path(tmp_path / tap_name(cfg), "analytic", COMMITTED)) for cfg in analytic_grid()]
    pairs += [(cfg, chain_result_path(cfg, COMMITTED)) for cfg in chain_grid()]
    pairs = [(cfg, shutil.copy(p, tmp_path / p.name)) for cfg, p in pairs if p.exists()]
    assert len(pairs) >= 10
    for cfg, path in pairs:
        monkeypatch.setenv(ENV, "torch")
        assert reusable_tap_record(Path(path), cfg)
        monkeypatch.setenv(ENV, "onnx")
        with pytest.raises(StaleResultError, match=r'encoder_backend: stored \(absent\), requested "onnx"'):
            reusable_tap_record(Path(path), cfg)


def test_the_tap_sweep_stamps_the_backend_of_its_frozen_runs(tmp_path, monkeypatch):
    """A record the sweep writes names the backend the run it attacks was recorded with, when it is not torch."""
    from veil.encoders.backends import ENV
    from veil.experiments.federated.taps import analytic_grid, run_tap_sweep

    tap = _tap(tmp_path / "run")
    cfg = analytic_grid(batch_sizes=[4])[0]
    path = tmp_path / "res" / "attack.json"
    run = [tmp_path / "taps", lambda c, root: path, lambda c: run_tap_attack(tap, "analytic", match=False)]
    for backend, stamped in (("onnx", "onnx"), ("torch", None)):
        monkeypatch.setenv(ENV, backend)
        run_tap_sweep([cfg], tmp_path / "res", *run, name="test", summary=lambda rec: "", force=True,
                      log=lambda line: None)
        assert ResultRecord.read(path).config.get("encoder_backend") == stamped
