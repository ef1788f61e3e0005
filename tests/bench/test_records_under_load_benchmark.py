"""benchmarks/records_under_load.py compares two runs' cell records without what times the run: a record that
differs only in its timings is identical, one whose result or budget outcome differs is caught, with where."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "records_under_load.py"


def _script():
    spec = importlib.util.spec_from_file_location("veil_benchmark_records_under_load", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(folder: Path, name: str, record: dict) -> None:
    (folder / "cells").mkdir(parents=True, exist_ok=True)
    (folder / "cells" / name).write_text(json.dumps(record))


def test_timings_are_ignored_and_a_different_result_or_budget_is_caught(tmp_path):
    committed = Path(__file__).resolve().parents[2] / "results" / "bench" / "cells"
    real = json.loads((committed / "rt-polarity--dpsgd-ep200-eps8--membership-lira--quick-q500-e5-seed0.json")
                      .read_text())
    slower = json.loads(json.dumps(real))
    slower["wall_time_s"] *= 3
    slower["created"] = "2030-01-01T00:00:00+00:00"
    slower["environment"]["platform"] = "elsewhere"
    slower.setdefault("extra", {})["train_seconds"] = 1e6
    changed = json.loads(json.dumps(real))
    changed["metrics"]["auc"] = 0.123
    cut = json.loads(json.dumps(real))
    cut["extra"]["bench"]["budget"] = "cut short by its minute cap"
    for name, quiet, busy in (("a.json", real, slower), ("b.json", real, changed), ("c.json", real, cut)):
        _write(tmp_path / "quiet", name, quiet)
        _write(tmp_path / "busy", name, busy)
    out = _script().compare(tmp_path / "quiet", tmp_path / "busy")
    assert out["compared"] == 3 and out["identical"] == 1
    assert set(out["differing"]) == {"b.json", "c.json"}
    assert out["differing"]["b.json"].startswith("/metrics/auc (")
    assert out["differing"]["c.json"].startswith("/extra/bench/budget")
