"""benchmarks/demo.py times a first `make demo` from the lines the bench prints: the quick model's estimate
(printed before it trains) and the bench's "model NAME ready after S s" line. Both are read here from a real
first use of the bench's model step (a tiny quick inverter trained into an empty VEIL_HOME), so a reworded
message breaks this test rather than the benchmark's record."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DEMO = Path(__file__).resolve().parents[2] / "benchmarks" / "demo.py"


def _demo():
    spec = importlib.util.spec_from_file_location("veil_benchmark_demo", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_demo_benchmark_reads_a_first_runs_model_phase(tmp_path, monkeypatch, real_home):
    import veil.training.inverter as ti
    from veil.bench.plan import BenchConfig, Cell
    from veil.bench.runner import ensure_models
    from veil.training.inverter import QUICK_INVERTER_MINUTES, InverterConfig

    for sub in ("corpora", "embeddings", "encoders"):
        if (real_home / sub).exists():
            (tmp_path / sub).symlink_to(real_home / sub)
    monkeypatch.setenv("VEIL_HOME", str(tmp_path))
    tiny = InverterConfig(name="inverter-quick", sources=(("news-articles", 8),), epochs=3, batch_size=4, warmup=2,
                          eval_every=4, heldout=2, max_tokens=12, threads=1, seed=3)
    monkeypatch.setattr(ti, "QUICK_INVERTER", tiny)
    cells = [Cell.make("rt-polarity", "none", {}, "invert", BenchConfig(quick=True))]
    lines: list[str] = []
    timed = ensure_models(cells, log=lines.append)
    assert [t["model"] for t in timed] == ["inverter-quick"]
    demo = _demo()
    rows = demo._models([(0.0, line) for line in lines])
    assert timed[0]["seconds"] >= 1.0  # loading MiniLM and training take seconds: the ready line is printed
    assert len(rows) == 1 and rows[0]["model"] == "inverter-quick"
    assert rows[0]["seconds"] == timed[0]["seconds"]
    assert rows[0]["estimate_minutes"] == QUICK_INVERTER_MINUTES
    assert rows[0]["ratio_to_estimate"] == round(timed[0]["seconds"] / 60 / QUICK_INVERTER_MINUTES, 2)
    # a second call finds it cached: no training, no ready line
    lines.clear()
    again = ensure_models(cells, log=lines.append)
    assert again[0]["seconds"] < 1.0 and demo._models([(0.0, line) for line in lines]) == []


def test_the_demo_benchmark_section_states_the_target_and_each_phase():
    demo = _demo()
    r = {"date": "2026-12-06T00:00:00+00:00", "git_commit": "abc", "machine": "m", "busy_loops": 2,
         "pip_cache": False, "load_after": 4.0, "note": "", "command": "python benchmarks/demo.py --busy 2",
         "status": "done", "phases_s": {"clone": 1.0, "venv": 120.0, "corpora": 30.0, "demo": 600.0},
         "models": [{"model": "mlm-quick", "seconds": 150.0, "estimate_minutes": 6.0, "ratio_to_estimate": 0.42,
                     "within_2x": False}],
         "cells": {"n": 3, "seconds": 400.0, "counts": {}}, "report_and_rest_s": 50.0, "total_s": 751.0,
         "target_minutes": 15.0, "within_target": True}
    text = demo.markdown(r)
    assert "2 busy loop(s) running" in text and "no pip cache" in text
    assert "| model `mlm-quick` | 150.0 | 2.50 | 6 | 0.42 (outside 2x) |" in text
    assert "within it" in text and "| 3 cells (summed cell time) | 400.0 |" in text
    assert "NOT within" in demo.markdown({**r, "within_target": False})


def test_the_demo_benchmark_reads_an_estimate_the_console_wrapped():
    """The lines of the first measured `make demo` (benchmarks/RESULTS.md, 2026-12-07): the CLI's console wrapped
    each model's estimate over two lines, and the parser must still pair it with the model's ready line."""
    demo = _demo()
    log = ["veil's quick masked LM is not cached yet: training it now (`veil models train ",
           "mlm --quick`, about 6 minutes on 2 idle cores, longer on a busy machine)",
           "bench: model mlm-quick ready after 207.3 s",
           "veil's quick inverter is not cached yet: training it now (`veil models train ",
           "inverter --quick`, about 12 minutes on 2 idle cores, longer on a busy machine)",
           "bench: model inverter-quick ready after 477.0 s"]
    rows = demo._models([(0.0, line) for line in log])
    assert [(r["model"], r["estimate_minutes"], r["ratio_to_estimate"], r["within_2x"]) for r in rows] == [
        ("mlm-quick", 6.0, 0.58, True), ("inverter-quick", 12.0, 0.66, True)]


def test_the_demo_benchmark_reads_the_estimate_the_demo_prints_before_its_cells():
    from veil.bench.selection import DEMO_MINUTES, demo_plan_line

    line = demo_plan_line({"why": ["a--b--c--quick-q500-e5-seed0"]}, "veil-results/bench")
    m = _demo()._CELLS_ESTIMATE.search(line)
    assert m and float(m.group(1)) == DEMO_MINUTES
