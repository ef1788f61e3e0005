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
    assert FULL.exists(), f"the committed record of the full inverter on rt-polarity is missing: {FULL}"
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


def test_the_cpu_cost_line_reads_the_benchmark_section_it_writes(tmp_path: Path) -> None:
    """The fragment parses exactly what benchmarks/inverter_training.py appends, and says 'not measured' without it."""
    import importlib.util

    from veil.report.fragment_inversion import _cpu_cost

    assert "not measured yet" in _cpu_cost(tmp_path / "missing.md")
    spec = importlib.util.spec_from_file_location(
        "inverter_training", Path(__file__).resolve().parents[2] / "benchmarks" / "inverter_training.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    run = {"sentences": 1000, "batch_size": 96, "epochs": 4, "max_tokens": 48, "evaluation_minutes": 0.5,
           "train_minutes": 2.0, "wall_minutes": 4.0, "sentences_per_second": 48.0}
    section = bench.markdown({
        "date": "2026-12-05T00:00:00+00:00", "git_commit": "abcdef123456", "machine": "Linux, 2 CPUs", "threads": 2,
        "torch": "2.13.0", "load_after": 1.5, "note": "", "command": "python benchmarks/inverter_training.py",
        "minutes_cap": 3.0, "full_step_over_quick_step": 4.0, "full_planned_hours": 28.5,
        "runs": {"quick": {**run, "name": "inverter-quick", "steps_done": 240, "seconds_per_step": 0.5,
                           "planned_steps": 626, "planned_minutes": 5.2},
                 "full": {**run, "name": "inverter", "steps_done": 60, "seconds_per_step": 10.0,
                          "planned_steps": 10252, "planned_minutes": 1708.7}}})
    (tmp_path / "RESULTS.md").write_text("# Benchmark results\n\n" + section)
    line = _cpu_cost(tmp_path / "RESULTS.md")
    assert "10.000 s per step of 96" in line and "10,252 steps" in line and "about 28 hours" in line
    assert "from 60 steps" in line and "commit abcdef1" in line and "load 1.5" in line


@pytest.mark.parametrize("corpus, queries, expect", [
    ("sms-spam", {"from": "the bench's private items (every text)"}, "may include sentences the inverter learned"),
    ("sms-spam", {"from": "the bench's private items (every text)", "unseen": True, "excluded_seen": 3157},
     "3157 left out"),
    ("rt-polarity", {"from": "the bench's private items (every text)"}, ""),
    ("drug-reviews", {"from": "the bench's private items (test documents)"}, ""),
])
def test_records_whose_queries_may_hold_training_sentences_are_marked(corpus, queries, expect):
    from veil.report.inversion import _seen_queries

    rec = ResultRecord(method="inversion", experiment="x", metrics={}, wall_time_s=0.0, git_commit="t",
                       config={"cell": {"corpus": corpus}, "queries": queries,
                               "public": {"corpora": ["drug-reviews", "sms-spam", "trec-questions"]}})
    text = _seen_queries(rec)
    assert (expect in text) if expect else text == ""


def test_a_record_made_with_an_inverter_cut_short_is_marked(full: ResultRecord, tmp_path: Path) -> None:
    from veil.report.inversion import inversion_page

    assert "cut short by its minute cap" not in inversion_page("inversion", [(FULL, full)], tmp_path)
    cut = ResultRecord.read(FULL)
    cut.config["inverter"].update(stopped="budget", steps_trained=80, planned_steps=626)
    page = inversion_page("inversion", [(FULL, cut)], tmp_path)
    assert "cut short by its minute cap** at step 80 of 626" in page and "lower bound, not a result" in page
