"""`veil adversarial sweep` on the one resumable runner: records per run, resumed across engines, Ray workers."""

from __future__ import annotations

import pytest

from veil.experiments.adversarial.attributes import AttributeRun, result_path, sweep
from veil.results import ResultRecord

TINY = {"width": 8, "epochs": 1, "attacker_epochs": 1, "max_train": 120}


@pytest.mark.slow
# Ray's local cluster leaves /dev/null handles and helper processes to its own reaper after ray.shutdown()
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_sweep_resumes_and_runs_on_ray_workers(tmp_path, builtin, ray_leftovers):
    builtin("debates-2016")
    lines: list[str] = []
    first = sweep("debates-2016", tmp_path, defenses=("none",), seeds=(0,), progress=False, log=lines.append, **TINY)
    cfg = AttributeRun(corpus="debates-2016", defense="none", seed=0, **TINY)
    assert first == [result_path(cfg, tmp_path)] and "test_accuracy=" in lines[-1]
    stamp = first[0].stat().st_mtime_ns
    lines.clear()
    both = sweep("debates-2016", tmp_path, defenses=("none",), seeds=(0, 1), progress=False, log=lines.append,
                 workers=2, **TINY)
    assert both[0] == first[0] and first[0].stat().st_mtime_ns == stamp  # kept, not re-run
    assert lines[0].startswith("skip ") and "[1/1]" in lines[-1]
    rec = ResultRecord.read(both[1])
    assert rec.config["seed"] == 1 and "privacy[mlp]" in rec.metrics
