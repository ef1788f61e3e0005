"""veil.bench.cells.utility: utility dispatched on (corpus task, the defense's release kind)."""

from __future__ import annotations

import pytest

from veil.bench.cells.utility import UTILITY_CELLS, UTILITY_MEASURES, utility_cell
from veil.bench.plan import UTILITY, BenchConfig, Cell, plan_cells
from veil.bench.runner import _target
from veil.defenses.base import get_defense
from veil.errors import InvalidParameterError
from veil.kinds import TASKS

EVERY_TASK = {"rt-polarity": "sentence-classification", "drug-reviews": "document-classification",
              "silver-sm": "dependency-parsing", "debates-2016-speaker": "private-attributes",
              "rt-polarity-planted": "language-modeling"}


@pytest.mark.parametrize("quick", [True, False])
def test_every_utility_cell_the_bench_runs_has_a_measure_for_its_task_and_kind(quick):
    cells = plan_cells(list(EVERY_TASK), config=BenchConfig(quick=quick), corpus_tasks=EVERY_TASK)
    pairs = {(EVERY_TASK[c.corpus], get_defense(c.defense).releases) for c in cells if c.attack == UTILITY}
    assert pairs == set(UTILITY_MEASURES)  # every measure is used, and nothing planned lacks one
    for task, _ in pairs:
        assert _target(UTILITY_CELLS[task]) is utility_cell
    assert set(UTILITY_CELLS) <= set(TASKS)


@pytest.mark.parametrize(("task", "defense", "setting", "kind"), [
    ("sentence-classification", "deepcandidate", {"epsilon": 3.0}, "document-embeddings"),
    ("document-classification", "texthide", {"k": 4, "m": 256, "mode": "intra"}, "training-encodings"),
])
def test_a_task_and_kind_without_a_measure_is_refused_saying_which_there_are(task, defense, setting, kind):
    cell = Cell.make("rt-polarity", defense, setting, UTILITY, BenchConfig(quick=True, key_seed=1))
    with pytest.raises(InvalidParameterError, match=f"releases '{kind}': no {task} utility measure") as err:
        utility_cell(cell, None, task=task)  # refused before any data is read
    assert "sentence-classification x training-encodings" in str(err.value)


@pytest.mark.slow
def test_a_quick_masked_texthide_head_trains_rather_than_collapse(builtin):
    """The hardest quick head (inter-dataset (256, 4): masked, mixed with public texts) learns the task: above the
    majority class with its 95% interval, not collapsed. On the old quick slice (2,000 texts, 30 epochs,
    patience 10) every masked head stayed at the majority class."""
    from veil.bench.data import bench_data

    builtin("rt-polarity")
    cell = Cell.make("rt-polarity", "texthide", {"k": 4, "m": 256, "mode": "inter"}, UTILITY,
                     BenchConfig(quick=True, key_seed=3))
    with _no_collapse():
        rec = utility_cell(cell, bench_data("rt-polarity", True, None))
    acc, majority = rec.extra["bench"]["utility_metric"], rec.extra["bench"]["majority_rate"]
    assert not rec.extra["collapsed"]
    assert acc["ci_low"] > majority, (acc, majority)


def _no_collapse():
    import contextlib
    import warnings

    from veil.errors import CollapsedModelWarning, PrivacyLeakWarning

    @contextlib.contextmanager
    def ctx():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)  # key_seed: reproducible keys, said in the record
            warnings.simplefilter("error", CollapsedModelWarning)
            yield

    return ctx()
