"""The ``dpsgd-top-layers`` fragment of docs/dpsgd.md (veil.report.fragment_texts): one row per recipe, DP-SGD's
best run at the largest epsilon against the best non-private run, paired over the same test texts; records of two
budgets are refused rather than mixed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from veil.errors import DataFormatError
from veil.report.fragment_texts import dpsgd_top_layers
from veil.results import ResultRecord

RESULTS = Path(__file__).resolve().parents[2] / "results"
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "RESULTS.md"


def _copy_top_layers(tmp_path: Path) -> Path:
    folder = tmp_path / "dpsgd"
    folder.mkdir()
    for p in (RESULTS / "dpsgd").glob("*-top-layers-*.json"):
        shutil.copy(p, folder / p.name)
    return folder


def test_each_recipe_is_a_row_and_the_best_runs_are_compared(tmp_path):
    folder = _copy_top_layers(tmp_path)
    text = dpsgd_top_layers(tmp_path, BENCH)
    recipes = {(r.config.get("optimizer", "adam"), float(r.config["lr"]))
               for r in map(ResultRecord.read, folder.glob("*.json"))}
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| recipe")]
    assert len(rows) == len(recipes) >= 2
    assert "DP-SGD's best run at epsilon 8 (" in text and "paired over the same test texts" in text
    # the comparison moves with the records: without the best plain run, another plain run is the reference
    best = max((ResultRecord.read(p) for p in folder.glob("*-none-*.json")), key=lambda r: r.metrics["accuracy"].mean)
    name = f"{best.config.get('optimizer', 'adam')}, lr {float(best.config['lr']):g}"
    assert f"best non-private run ({name}: " in text


def test_records_of_two_budgets_are_refused(tmp_path):
    folder = _copy_top_layers(tmp_path)
    path = next(folder.glob("*-none-*.json"))
    rec = ResultRecord.read(path)
    rec.config["epochs"] = rec.config["epochs"] + 1
    rec.write(folder / ("other-" + path.name))
    with pytest.raises(DataFormatError, match="2 budgets"):
        dpsgd_top_layers(tmp_path, BENCH)
