"""veil.report.dpsgd: the DP-SGD and membership pages keep the records of two recipes of one setting apart (a row
and a Regenerate command each), from copies of committed records with the recipe changed."""

from __future__ import annotations

import copy
from pathlib import Path

from veil.report.dpsgd import dpsgd_page, membership_page
from veil.results import ResultRecord

RESULTS = Path(__file__).resolve().parents[2] / "results"


def _with_recipe(rec: ResultRecord, optimizer: str, lr: float) -> ResultRecord:
    out = copy.deepcopy(rec)
    out.config.update(optimizer=optimizer, lr=lr)
    return out


def _pair(folder: str, pattern: str, tmp_path: Path) -> list[tuple[Path, ResultRecord]]:
    adam = [(p, ResultRecord.read(p)) for p in sorted((RESULTS / folder).glob(pattern))]
    assert adam, f"no committed record matches {folder}/{pattern}"
    sgd = [(tmp_path / f"sgd-{p.name}", _with_recipe(r, "sgd", 0.1)) for p, r in adam]
    return [(RESULTS / folder / p.name, r) for p, r in adam] + sgd


def test_two_recipes_of_the_top_layers_are_two_rows_and_two_commands(tmp_path):
    records = _pair("dpsgd", "rt-polarity-top-layers-*.json", tmp_path)
    page = dpsgd_page("dpsgd", records, tmp_path)
    rows = [line for line in page.splitlines() if line.startswith("| rt-polarity | top-layers |")]
    assert sum("| adam, lr 0.001 |" in row for row in rows) == 4 and sum("| sgd, lr 0.1 |" in row for row in rows) == 4
    commands = [line for line in page.splitlines() if line.startswith("veil dpsgd train")]
    assert len(commands) == 2
    assert sum("--optimizer sgd --lr 0.1" in c for c in commands) == 1
    assert sum("--optimizer" not in c and "--lr" not in c for c in commands) == 1


def test_membership_targets_of_two_recipes_stay_apart(tmp_path):
    records = _pair("membership", "rt-polarity-top-layers-*.json", tmp_path)
    page = membership_page("membership", records, tmp_path)
    assert "dpsgd (MiniLM's top layers; sgd, lr 0.1)" in page and "dpsgd (MiniLM's top layers) |" in page
    commands = [line for line in page.splitlines() if line.startswith("veil attack membership")]
    assert sum("--optimizer sgd --lr 0.1" in c for c in commands) == 1, commands
    assert len(commands) == 2
