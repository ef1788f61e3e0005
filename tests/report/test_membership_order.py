"""The membership page (veil.report.dpsgd) is a function of its records, not of the order they are listed in nor of
Python's string hashing: its targets (tables and ROC panels) are ordered by a total key, so re-rendering gives the
same bytes (`make report` twice leaves git clean)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from veil.report.dpsgd import _target_order, membership_page
from veil.report.markdown import read_record

ROOT = Path(__file__).resolve().parents[2]
MEMBERSHIP = ROOT / "results" / "membership"

#: two targets that differ only in the model's recipe: the pair whose ROC panels swapped between renderings
TIED = [("head", 10, "plain", None), ("top-layers", 5, "dpsgd", 8.0), ("top-layers; sgd, lr 0.1", 5, "dpsgd", 8.0),
        ("top-layers", 5, "plain", None), ("head", 10, "dpsgd", 1.0)]


def _old_order(key: tuple) -> tuple:
    """The key before the fix (no model label): a planted partial order."""
    model, epochs, defense, eps = key
    from veil.experiments.membership import DEFENSES

    return model != "head", epochs, DEFENSES.index(defense), eps or 0


def test_the_target_order_is_total():
    assert sorted(TIED, key=_target_order) == sorted(reversed(TIED), key=_target_order)
    assert len({_target_order(k) for k in TIED}) == len(TIED)


def test_negative_control_a_partial_order_depends_on_the_listing():
    """The check above bites: the old key ties the two top-layers DP-SGD targets, so their order follows the input."""
    assert sorted(TIED, key=_old_order) != sorted(reversed(TIED), key=_old_order)


def _records(corpus: str) -> list[tuple[Path, object]]:
    paths = sorted(p for p in MEMBERSHIP.glob(f"{corpus}-*.json")) if MEMBERSHIP.is_dir() else []
    assert paths, f"no membership records of {corpus} under {MEMBERSHIP} (the committed records are the fixture)"
    return [(p, read_record(p)) for p in paths]


def test_listing_order_does_not_change_the_page_or_the_roc(tmp_path):
    records = _records("rt-polarity")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    page_a = membership_page("membership", records, a)
    page_b = membership_page("membership", list(reversed(records)), b)
    assert page_a == page_b
    png = "membership_rt-polarity_roc.png"
    assert (a / png).read_bytes() == (b / png).read_bytes()


_RENDER = """
import sys
from pathlib import Path
from veil.report.dpsgd import membership_page
from veil.report.markdown import read_record
paths = sorted(Path(sys.argv[1]).glob("rt-polarity-*.json"))
membership_page("membership", [(p, read_record(p)) for p in paths], Path(sys.argv[2]))
"""


def test_string_hashing_does_not_change_the_roc(tmp_path):
    """Set iteration order of strings changes with PYTHONHASHSEED between processes: two processes with different
    seeds must draw the same PNG (the bug: panels from a set of targets sorted by a key that tied two of them)."""
    _records("rt-polarity")
    out = []
    for seed in ("1", "2"):
        folder = tmp_path / seed
        folder.mkdir()
        env = {**os.environ, "PYTHONHASHSEED": seed, "MPLBACKEND": "Agg"}
        subprocess.run([sys.executable, "-c", _RENDER, str(MEMBERSHIP), str(folder)], check=True, env=env,
                       timeout=300)
        out.append((folder / "membership_rt-polarity_roc.png").read_bytes())
    assert out[0] == out[1]
