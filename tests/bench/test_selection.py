"""What ``veil bench`` selects (veil.bench.selection): ``--demo`` keeps the quick bench's own cells except those
that train a model for minutes, and says what it left out and why."""

from __future__ import annotations

import json

import pytest

from veil.bench.plan import QUICK_CORPORA, BenchConfig, plan_cells
from veil.bench.runner import cell_models
from veil.bench.selection import DEMO_LEFT_OUT, demo_cells, select_cells
from veil.defenses.base import get_defense


@pytest.fixture(scope="module")
def quick_plan():
    return plan_cells(QUICK_CORPORA, config=BenchConfig(quick=True))


def test_the_demo_is_the_quick_plan_less_the_cells_that_train_a_model_for_minutes(quick_plan):
    kept, left = demo_cells(quick_plan)
    ids = [c.id for c in quick_plan]
    assert [c.id for c in kept] == [i for i in ids if i in {c.id for c in kept}]  # same cells, same order
    assert sorted([c.id for c in kept] + [i for v in left.values() for i in v]) == sorted(ids)  # a partition
    assert set(left) == {why for why, _ in DEMO_LEFT_OUT}  # every rule leaves something out of the quick plan
    assert not any(cell_models(c) for c in kept)  # no inverter or masked LM to train first
    assert {c.attack for c in kept}.isdisjoint({"word-recovery-minilm", "word-recovery-trained", "invert",
                                                 "invert-representations", "invert-unmasked", "infill"})
    assert "generation" not in {c.defense for c in kept}
    hide = {(c.defense, c.setting_label) for c in kept if c.defense.startswith("texthide")}
    assert hide == {("texthide", "k4-m256-intra"), ("texthide-model", "ep200-k4-m256")}
    # every corpus and release of the quick bench keeps attack cells and a utility cell in the demo, except the
    # language-modeling corpus: each of its settings fine-tunes a language model and its reference model first
    lm_only = {"rt-polarity-planted"}
    assert not [c for c in kept if c.corpus in lm_only or get_defense(c.defense).releases == "generative-model"]
    assert {c.corpus for c in kept if c.attack != "utility"} == set(QUICK_CORPORA) - lm_only
    assert {c.corpus for c in kept if c.attack == "utility"} == set(QUICK_CORPORA) - lm_only


def test_select_cells_records_what_the_demo_left_out(quick_plan):
    sel = select_cells(list(QUICK_CORPORA), None, None, BenchConfig(quick=True), demo=True)
    kept, left = demo_cells([c for c in quick_plan])
    assert [c.id for c in sel.cells] == [c.id for c in kept] and sel.left_out == left
    assert select_cells(list(QUICK_CORPORA), None, None, BenchConfig(quick=True)).left_out == {}


def test_the_cli_demo_lists_its_cells_and_refuses_options_that_change_them():
    from typer.testing import CliRunner

    from veil.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["bench", "--demo", "--list", "--json"])
    assert res.exit_code == 0, res.output
    listed = [c["id"] for c in json.loads(res.stdout)["cells"]]
    sel = select_cells(list(QUICK_CORPORA), None, None, BenchConfig(quick=True), demo=True)
    assert listed == [c.id for c in sel.cells]
    for extra in (["--limit", "3"], ["--data", "x.csv", "--label-column", "y"]):
        res = runner.invoke(app, ["bench", "--demo", "--list", *extra])
        assert res.exit_code == 2
        assert "--demo runs the quick bench's own cells" in res.output and extra[0] in res.output
