"""veil.bench.cells.obfuscated_text: word recovery on the bench treebank's obfuscated sentences, and parsing utility.

Run on the quick silver treebank (built once, under a minute) with every split capped at a few dozen sentences."""

from __future__ import annotations

import numpy as np
import pytest

from veil.bench.cells.obfuscated_text import _mcnemar, _random_rates
from veil.bench.plan import UTILITY, BenchConfig, Cell, plan_cells

TREEBANK = {"silver-sm": "dependency-parsing"}


@pytest.mark.parametrize("quick", [True, False])
def test_the_plan_pairs_each_obfuscation_with_every_word_recovery_attack_and_the_floors(quick):
    cells = plan_cells(["silver-sm"], config=BenchConfig(quick=quick), corpus_tasks=TREEBANK)
    random = {(c.setting["level"], c.attack) for c in cells if c.defense == "obfuscation-random"}
    attacks = {"keep-word", "tag-frequency", "word-recovery-trained", "word-recovery-minilm", "word-recovery-mlm",
               "word-recovery-veil-mlm", "word-recovery-veil-mlm-tuned", UTILITY}
    assert random == {(lv, a) for lv in ("P3", "P5") for a in attacks}
    neural = {c.setting["level"] for c in cells if c.defense == "obfuscation-neural"}
    assert neural == (set() if quick else {"P3", "P5"})  # the neural obfuscator trains through the parser: full only
    assert {c.defense for c in cells} <= {"obfuscation-random", "obfuscation-neural"}


def test_mcnemar_credits_only_what_the_floor_misses():
    floor = np.array([True] * 20 + [False] * 80)
    better = floor.copy()
    better[20:45] = True  # right on 25 positions the floor misses, wrong on none it gets
    v = _mcnemar(better, floor)
    assert v["reject"] and v["discordant"] == {"attack_only": 25, "floor_only": 0}
    same = _mcnemar(floor.copy(), floor)  # negative control: the floor itself never beats the floor
    assert not same["reject"] and same["p_value"] == 1.0
    swapped = floor.copy()
    swapped[:10], swapped[20:30] = False, True  # as many won as lost
    assert not _mcnemar(swapped, floor)["reject"]


def test_random_rates_are_one_over_the_tags_public_words():
    from veil.attacks.word_recovery import ObfuscatedText
    from veil.defenses.obfuscation import TagVocabulary

    vocab = TagVocabulary.from_sentences([(["cats", "Dogs", "dogs", "run"], ["NNS", "NNS", "NNS", "VBP"]),
                                          (["birds", "sing"], ["NNS", "VBP"])])
    text = ObfuscatedText((("dogs", "sing"),), (("NNS", "VBP"),), ((0, 1),))
    np.testing.assert_allclose(_random_rates(text, vocab), [1 / 3, 1 / 2])  # cats, dogs, birds; run, sing


@pytest.fixture(scope="module")
def small_treebank(real_home):
    import os

    from veil.bench.data import bench_data

    old = os.environ.get("VEIL_HOME")
    os.environ["VEIL_HOME"] = str(real_home)
    try:
        yield bench_data("silver-sm", True, 40)
    finally:
        if old is None:
            os.environ.pop("VEIL_HOME", None)
        else:
            os.environ["VEIL_HOME"] = old


def _run(cell, data):
    """The cell through the function the bench runs it with (its attack's bench_cell, or the utility measure)."""
    from veil.attacks.base import get_attack
    from veil.bench.runner import _target
    from veil.bench.cells.utility import utility_cell

    return utility_cell(cell, data) if cell.attack == UTILITY else _target(get_attack(cell.attack).bench_cell)(
        cell, data)


@pytest.mark.slow
def test_a_trained_attacker_cell_is_tested_against_the_tag_frequency_floor(small_treebank):
    data = small_treebank
    assert len(data.test) == 40 and len(data.train) == 40 and data.treebank == "silver-sm-quick"
    cfg = BenchConfig(quick=True, limit=40, key_seed=3)
    rec = _run(Cell.make("silver-sm", "obfuscation-random", {"level": "P3"}, "word-recovery-trained", cfg), data)
    b = rec.extra["bench"]
    assert b["success"] == "top1" and b["comparable"] and "floor" not in b
    assert 0.0 <= b["success_metric"]["ci_low"] <= b["success_metric"]["mean"] <= b["success_metric"]["ci_high"] <= 1
    assert 0 < b["random_rate"] < 1 and b["versus"] == "the tag-frequency floor"
    assert b["test"]["test"] == "exact McNemar, one-sided" and 0 <= b["test"]["p_value"] <= 1
    assert rec.metrics["floor_top1"].n == rec.config["positions"] > 0
    floor = _run(Cell.make("silver-sm", "obfuscation-random", {"level": "P3"}, "tag-frequency", cfg), data)
    fb = floor.extra["bench"]
    assert fb["floor"] and not fb["comparable"] and fb["versus"] == "random guessing among the tag's public words"
    assert fb["test"]["test"].startswith("exact")


@pytest.mark.slow
def test_parsing_utility_falls_from_the_originals_as_more_words_are_hidden(small_treebank):
    cfg = BenchConfig(quick=True, limit=40, key_seed=3)
    rec = _run(Cell.make("silver-sm", "obfuscation-random", {"level": "P5"}, UTILITY, cfg), small_treebank)
    b = rec.extra["bench"]
    assert b["utility"] == "UAS" and b["utility_parser"] == "spacy-md"
    assert 0 < b["utility_metric"]["mean"] < b["reference_metric"]["mean"] <= 1
    assert b["utility_metric"]["n"] == sum(map(len, small_treebank.test))
    assert {"uas[spacy-md]", "las[spacy-md]", "uas[spacy-md on originals]"} <= set(rec.metrics)


def test_the_budget_note_says_when_an_attacker_was_cut_short():
    from veil.bench.cells.obfuscated_text import budget_note

    rising = [{"epoch": e, "minutes": 0.25 * (e + 1), "dev_mrr": 0.05 + 0.01 * e} for e in range(4)]
    assert budget_note(rising, 1.0) == ("stopped by the 1-minute budget; dev MRR 0.050 -> 0.080 over its last 4 "
                                        "epochs (still rising)")
    flat = [{"epoch": e, "minutes": 0.1 * (e + 1), "dev_mrr": 0.07} for e in range(5)]
    assert budget_note(flat, 1.0).endswith("(flat)") and budget_note(flat, 1.0).startswith("5 epochs in 0.50 min")
    falling = [{"epoch": 0, "loss": 8.0, "minutes": 0.1}, {"epoch": 1, "loss": 7.0, "minutes": 0.2}]
    assert "still falling; no dev split" in budget_note(falling, 1.0)
    assert budget_note([], 1.0) == ""
    # attackers that stop on their own dev MRR say so, per evaluation rather than per epoch
    early = [{"step": 100 * k, "minutes": 0.2 * k, "dev_mrr": v} for k, v in enumerate([0.1, 0.2, 0.21, 0.2, 0.2])]
    note = budget_note(early, 8.0, "flattened")
    assert note.startswith("stopped after 0.80 min when its own dev MRR stopped rising") and "evaluations (flat)" in note
    assert budget_note(early, 0.8, "budget").startswith("stopped by the 0.8-minute budget")
    # a step cap is a budget in steps: said as such, even where the minutes used come close to the cap
    assert budget_note(early, 0.8, "steps").startswith("stopped at its optimiser-step cap after 0.80 min; dev MRR")


def test_the_quick_attackers_budget_is_steps_with_the_minutes_a_cap_only():
    """Issue 50: a quick word-recovery attacker that stops on its dev MRR has a step cap, and the minute cap is the
    full bench's, far above what the quick attackers take on 2 cores (a busy machine takes longer, records the same)."""
    from veil.bench.data_parsing import SIZES

    assert SIZES["attack_steps"][0] is not None and SIZES["attack_minutes"][0] >= 30.0
