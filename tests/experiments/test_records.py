"""Result records and `veil report` rendering."""

from __future__ import annotations

import json
import os

import pytest

from veil.errors import DataFormatError
from veil.results import Metric, ResultRecord
from veil.report import render_all


def test_metric_from_values():
    m = Metric.from_values([0.8, 0.9, 1.0])
    assert m.mean == pytest.approx(0.9) and m.std == pytest.approx(0.1) and m.n == 3
    assert Metric.from_values([0.5]).std is None
    assert str(Metric(mean=0.5, ci_low=0.4, ci_high=0.6, ci_level=0.95)) == "0.5 [0.4, 0.6]"


def test_record_roundtrip_and_atomic_write(tmp_path, monkeypatch):
    rec = ResultRecord(method="demo", experiment="table1", config={"corpus": "rt-polarity", "seeds": [0, 1]},
                       metrics={"accuracy": Metric.from_values([0.8, 0.82])}, wall_time_s=1.5)
    path = rec.write(tmp_path / "results" / "demo" / "a.json")
    data = json.loads(path.read_text())
    assert data["schema_version"] == 1 and data["environment"]["packages"]["numpy"]
    assert data["git_commit"] and data["created"]
    back = ResultRecord.read(path)
    assert back.metrics["accuracy"].mean == pytest.approx(0.81) and back.config == rec.config
    assert [p.name for p in path.parent.iterdir()] == ["a.json"]  # no temp files left

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)  # the crash comes after the new bytes went into the temporary file
    with pytest.raises(OSError):
        rec.write(path)
    assert json.loads(path.read_text()) == data  # the old file is intact
    assert [p.name for p in path.parent.iterdir()] == ["a.json"]


def test_record_with_nan_is_refused_and_nothing_is_written(tmp_path):
    from veil.errors import InvalidParameterError

    rec = ResultRecord(method="demo", experiment="x", config={"lr": float("nan")},
                       metrics={"accuracy": Metric(mean=float("inf"))}, wall_time_s=1.0)
    with pytest.raises(InvalidParameterError, match="NaN or infinite"):
        rec.write(tmp_path / "r" / "x.json")
    assert not (tmp_path / "r").exists()  # refused before the folder or a temporary file was made


def test_read_rejects_non_records(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{\"hello\": 1}")
    with pytest.raises(DataFormatError, match="not a veil result record"):
        ResultRecord.read(p)
    p.write_text("{")
    with pytest.raises(DataFormatError, match="not valid JSON"):
        ResultRecord.read(p)


def test_report_renders_pages_from_records(tmp_path):
    results = tmp_path / "results"
    for seed, acc in [(0, 0.81), (1, 0.79)]:
        ResultRecord(method="demo", experiment="grid", config={"m": 16, "k": seed + 1},
                     metrics={"accuracy": Metric.from_values([acc])}, wall_time_s=2.0).write(results / "demo" / f"{seed}.json")
    pages = render_all(results, tmp_path / "docs")
    text = (tmp_path / "docs" / "demo.md").read_text()
    assert "do not edit by hand" in text and "0.81" in text and "0.79" in text and "m=16, k=2" in text
    assert (tmp_path / "docs" / "index.md").read_text().count("demo.md") == 1
    assert len(pages) == 2
