"""The committed quick bench (results/bench, rendered to docs/results/bench.md) measures heads that trained: no
utility cell collapsed to one class, and each was trained with the quick budget the code has now."""

from __future__ import annotations

import json
from pathlib import Path

from veil.bench.cells.utility import QUICK_BUDGET

CELLS = Path(__file__).resolve().parents[2] / "results" / "bench" / "cells"


def _utility_records() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(CELLS.glob("*--utility--*.json"))]


def test_every_committed_quick_utility_cell_trained():
    records = _utility_records()
    assert len(records) >= 10
    sentence = [r for r in records if "train" in r["config"]]
    assert sentence, "the quick run has sentence-classification heads"
    for r in records:
        assert not r["extra"].get("collapsed"), f"{r['experiment']}: the head collapsed to one class"
    for r in sentence:
        assert (r["config"]["train"]["epochs"], r["config"]["train"]["patience"]) == QUICK_BUDGET, r["experiment"]
        acc, majority = r["extra"]["bench"]["utility_metric"], r["extra"]["bench"]["majority_rate"]
        assert acc["ci_low"] > majority, f"{r['experiment']}: {acc['mean']:.3f} is not above {majority:.3f}"
