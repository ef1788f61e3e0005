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
    real["extra"]["speed"], slower["extra"]["speed"] = {"sentences_per_s": 333.4}, {"sentences_per_s": 138.1}
    real["extra"]["note"] = "stopped at its optimiser-step cap after 0.29 min; dev MRR 0.045 -> 0.056"
    slower["extra"]["note"] = "stopped at its optimiser-step cap after 0.43 min; dev MRR 0.045 -> 0.056"
    changed = json.loads(json.dumps(real))
    changed["metrics"]["auc"] = 0.123
    cut = json.loads(json.dumps(real))
    cut["extra"]["bench"]["budget"] = "cut short by its minute cap"
    capped = json.loads(json.dumps(real))  # the same minutes in the text, another ending: caught
    capped["extra"]["note"] = "stopped by the 8-minute budget after 0.29 min; dev MRR 0.045 -> 0.056"
    for name, quiet, busy in (("a.json", real, slower), ("b.json", real, changed), ("c.json", real, cut),
                              ("d.json", real, capped)):
        _write(tmp_path / "quiet", name, quiet)
        _write(tmp_path / "busy", name, busy)
    out = _script().compare(tmp_path / "quiet", tmp_path / "busy")
    assert out["compared"] == 4 and out["identical"] == 1
    assert set(out["differing"]) == {"b.json", "c.json", "d.json"}
    assert out["differing"]["d.json"].startswith("/extra/note")
    assert out["differing"]["b.json"].startswith("/metrics/auc (")
    assert out["differing"]["c.json"].startswith("/extra/bench/budget")
