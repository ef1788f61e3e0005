"""The inversion page states where an imported inverter came from and whether the full inverter meets its target,
from the committed record of the full inverter on rt-polarity."""

from __future__ import annotations

from pathlib import Path

import pytest

from veil.report.inversion import _bag_of_words_budget, _target_section, _transfer_sentence
from veil.results import ResultRecord

FULL = Path(__file__).resolve().parents[2] / "results" / "inversion" / \
    "rt-polarity-none-inverter-steps5-beam4-q100-seed0.json"


@pytest.fixture(scope="module")
def full() -> ResultRecord:
    if not FULL.exists():
        pytest.skip("no committed record of the full inverter on rt-polarity")
    return ResultRecord.read(FULL)


def test_the_transfer_sentence_reads_the_import_manifest(full: ResultRecord) -> None:
    t = full.config["inverter"]["transfer"]
    text = _transfer_sentence("inverter", t)
    assert "None" not in text
    assert t["exported"]["device"] in text and "veil models import" in text
    assert f"{t['heldout_here']['token_f1']:.1f}" in text


def test_the_transfer_sentence_survives_a_bare_block() -> None:
    text = _transfer_sentence("inverter", {})
    assert "None" not in text and text.endswith(".")


def test_the_target_verdict_follows_the_interval(full: ResultRecord) -> None:
    text = "\n".join(_target_section([full]))
    f1 = full.metrics["inverter_token_f1"]
    row = next(line for line in text.splitlines() if line.startswith("| token F1 >= 45"))
    assert (f1.ci_low >= 45) == ("| met" in row)
    gain = full.metrics["gain_over_bag_of_words_token_f1"]
    row = next(line for line in text.splitlines() if "bag of words" in line and line.startswith("|"))
    assert (gain.ci_low >= 10) == ("| met" in row)


def test_the_bag_of_words_budget_is_judged_from_its_curve(full: ResultRecord) -> None:
    b = full.config["bag_of_words"]
    text = _bag_of_words_budget(b)
    assert ("step cap" in text) == (b["stopped"] == "max_steps") and "None" not in text
    early = {**b, "stopped": "patience", "curve": b["curve"][:3]}
    assert "budget was enough" in _bag_of_words_budget(early)
    assert _bag_of_words_budget({}) == ""
