"""One budget per TextHide table, dirty-tree records flagged, exact intervals at 0/100%, damaged records as one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from veil.errors import DataFormatError
from veil.results import Metric, ResultRecord
from veil.report import render_all
from veil.report.markdown import proportion_interval, read_record


def _rec(m, k, acc, epochs, commit="abc1234"):
    cfg = {"corpus": "rt-polarity", "m": m, "k": k, "mode": "intra", "setting": "frozen", "task": "classification",
           "seeds": [0, 1], "train": {"epochs": epochs, "patience": 15 if epochs == 60 else 50, "batch_size": 64}}
    name = "baseline" if (m == "0" and k == 1) else f"intra-m{m}-k{k}"
    return ResultRecord(method="texthide", experiment=f"rt-polarity-{name}-frozen-ep{epochs}", config=cfg,
                        metrics={"test_accuracy": Metric.from_values(acc)}, wall_time_s=1.0, git_commit=commit,
                        extra={"n_train": 10, "n_dev": 2, "n_test": 2, "best_epochs": [3, 4]})


def test_grid_and_table1_never_mix_budgets(tmp_path):
    res = tmp_path / "results" / "texthide"
    for rec in [_rec("0", 1, [0.80, 0.82], 300), _rec("256", 4, [0.74, 0.76], 300),
                _rec("0", 1, [0.78, 0.80], 60), _rec("256", 4, [0.66, 0.68], 60), _rec("16", 4, [0.70, 0.72], 60),
                _rec("64", 4, [0.69, 0.69], 60)]:
        rec.write(res / f"{rec.experiment}.json")
    render_all(tmp_path / "results", tmp_path / "docs")
    page = (tmp_path / "docs" / "texthide.md").read_text()
    table1, grid = page.split("## Fig. 2")[0], page.split("## Fig. 2")[1].split("## Runs")[0]
    assert "| rt-polarity | accuracy | 81.0 ± 1.4 | 75.0 ± 1.4 | – | – | – |" in table1  # the 60-epoch (16,4) is not here
    assert "| 256 | – | – | 67.0 | – |" in grid and "| 0 | 79.0 |" in grid  # the 60-epoch cells, not the 300-epoch
    assert "- intra (256, 4): 67.0 ± 1.4 at 60 epochs, 75.0 ± 1.4 at 300 epochs (+8.0 points;" in grid
    assert "veil texthide eval --corpus rt-polarity --m 256 --k 4 --mode intra --seeds 0,1 --epochs 60 " \
           "--patience 15 --batch-size 64 --results results/texthide" in page


def test_a_dirty_record_is_flagged_and_judges_no_target(tmp_path):
    res = tmp_path / "results" / "texthide"
    for rec in [_rec("0", 1, [0.80, 0.82], 300), _rec("256", 4, [0.80, 0.81], 300, commit="abc1234-dirty")]:
        rec.write(res / f"{rec.experiment}.json")
    render_all(tmp_path / "results", tmp_path / "docs")
    page = (tmp_path / "docs" / "texthide.md").read_text()
    assert "| 80.5 ± 0.7 † |" in page
    assert "intra (256,4) loses at most 3 points on rt-polarity: not judged, a record behind it is from a dirty" in page
    assert "met" not in page.split("Target, intra (256,4)")[1].split("\n")[0]


def test_collapsed_percentile_interval_becomes_clopper_pearson():
    from scipy.stats import binomtest

    low, high = proportion_interval(1.0, 256, 1.0, 1.0, 0.95)
    ref = binomtest(256, 256).proportion_ci(0.95, method="exact")
    assert (low, high) == pytest.approx((ref.low, ref.high)) and high == 1.0 and low < 1.0
    assert proportion_interval(0.0, 40, 0.0, 0.0)[0] == 0.0 and proportion_interval(0.0, 40, 0.0, 0.0)[1] > 0.05
    assert proportion_interval(0.5, 40, 0.4, 0.6) == (0.4, 0.6)  # a real interval is kept


@pytest.mark.parametrize("content", [b"", b'{"method": "x", ', b"\xff\xfe\x00garbage", b"[1, 2]"])
def test_a_damaged_record_is_one_typed_error_naming_it(tmp_path, content):
    path = tmp_path / "results" / "texthide" / "x.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(DataFormatError, match=r"x\.json.*veil report"):
        read_record(path)
    with pytest.raises(DataFormatError, match=r"x\.json"):
        render_all(tmp_path / "results", tmp_path / "out")


def test_veil_report_on_a_damaged_record_prints_one_line_and_no_traceback(tmp_path):
    path = tmp_path / "results" / "bench-x" / "cells" / "a.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x80\x81 not utf-8")
    run = subprocess.run([sys.executable, "-m", "veil.cli", "report", "--results", str(tmp_path / "results"),
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and "UnicodeDecodeError" not in run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("veil: error")]
    assert len(errors) == 1 and "a.json" in errors[0] and "not UTF-8" in errors[0]
