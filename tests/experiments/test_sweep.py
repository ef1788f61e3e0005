"""The one resumable runner (veil.experiments._sweep): resume, reuse only records of the same configuration,
failures isolated and re-raised with their own type, Ray agreeing with the sequential engine."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import pytest

from veil.errors import DataFormatError, InvalidParameterError, StaleResultError
from veil.experiments._sweep import Sweep, run_records, run_sweep
from veil.results import Metric, ResultRecord


@dataclass(frozen=True)
class Square:
    x: int
    scale: int = 1

    @property
    def id(self) -> str:
        return f"square-{self.x}"


def _path(cell: Square, root: Path) -> Path:
    return root / f"{cell.id}.json"


def _run(cell: Square) -> ResultRecord:
    if cell.x < 0:
        raise InvalidParameterError(f"x must be >= 0, got {cell.x}")
    return ResultRecord(method="square", experiment=cell.id, config={"cell": asdict(cell)},
                        metrics={"value": Metric(mean=float(cell.scale * cell.x ** 2))}, wall_time_s=0.0)


def _finished(cell: Square, path: Path) -> bool:
    from veil.outputs import existing_record

    return existing_record(path, asdict(cell), part="cell") is not None


def _sweep(root: Path) -> Sweep:
    return Sweep(name="squares", path=partial(_path, root=root), run=_run, finished=_finished,
                 summary=lambda rec: f"value={rec.metrics['value'].mean:g}")


def _values(root: Path) -> dict[str, float]:
    return {p.name: json.loads(p.read_text())["metrics"]["value"]["mean"] for p in sorted(root.glob("*.json"))}


def test_runs_resumes_and_keeps_finished_records(tmp_path):
    cells = [Square(x) for x in range(4)]
    lines: list[str] = []
    run = run_sweep(_sweep(tmp_path), cells, out=tmp_path, progress=False, log=lines.append)
    assert run.counts() == {"done": 4, "skipped": 0, "failed": 0} and run.engine == "sequential"
    assert _values(tmp_path) == {f"square-{x}.json": float(x * x) for x in range(4)}
    assert any("value=9" in line for line in lines)
    stamps = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    lines.clear()
    again = run_sweep(_sweep(tmp_path), cells, out=tmp_path, progress=False, log=lines.append)
    assert again.counts() == {"done": 0, "skipped": 4, "failed": 0}
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == stamps  # nothing rewritten
    assert len(lines) == 4 and all(line.startswith("skip ") for line in lines)
    forced = run_sweep(_sweep(tmp_path), cells[:1], out=tmp_path, progress=False, force=True)
    assert forced.counts()["done"] == 1


def test_one_failing_cell_never_stops_the_others_and_is_reraised_with_its_type(tmp_path):
    cells = [Square(-1), Square(2), Square(-3), Square(4)]
    run = run_sweep(_sweep(tmp_path), cells, out=tmp_path, progress=False)
    assert [o.id for o in run.failed] == ["square--1", "square--3"]
    assert run.failed[0].error.startswith("InvalidParameterError") and "x must be >= 0" in run.failed[0].error
    assert set(_values(tmp_path)) == {"square-2.json", "square-4.json"}  # the others ran
    assert "exception" not in json.dumps(run.to_dict())  # run.json carries text, not objects
    with pytest.raises(InvalidParameterError, match="got -1") as info:
        run.raise_failed()
    assert any("square--3" in note for note in info.value.__notes__)
    with pytest.raises(InvalidParameterError, match="got -1"):
        run_records(_sweep(tmp_path), cells, tmp_path, progress=False)
    assert run_records(_sweep(tmp_path), cells[1:2], tmp_path, progress=False) == [tmp_path / "square-2.json"]


def test_stale_or_damaged_records_stop_the_sweep_before_any_work(tmp_path):
    run_sweep(_sweep(tmp_path), [Square(1)], out=tmp_path, progress=False)
    with pytest.raises(StaleResultError, match="scale"):  # same path, made under another configuration
        run_sweep(_sweep(tmp_path), [Square(0), Square(1, scale=2)], out=tmp_path, progress=False)
    assert not (tmp_path / "square-0.json").exists()  # checked before the first cell ran
    (tmp_path / "square-1.json").write_text("{")
    with pytest.raises(DataFormatError, match="square-1.json"):
        run_sweep(_sweep(tmp_path), [Square(0), Square(1)], out=tmp_path, progress=False)
    assert not (tmp_path / "square-0.json").exists()


def test_bad_plans_are_refused(tmp_path):
    with pytest.raises(InvalidParameterError, match="repeated: square-1"):
        run_sweep(_sweep(tmp_path), [Square(1), Square(1, scale=2)], out=tmp_path, progress=False)
    with pytest.raises(InvalidParameterError, match="workers must be >= 1"):
        run_sweep(_sweep(tmp_path), [Square(1)], out=tmp_path, workers=0, progress=False)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
# Ray's local cluster leaves /dev/null handles and helper processes to its own reaper after ray.shutdown()
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_ray_writes_what_the_sequential_engine_writes(tmp_path, ray_leftovers):
    import sys

    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import this test module
    cells = [Square(x) for x in (-1, 0, 1, 2, 3)]
    run_sweep(_sweep(tmp_path / "seq"), cells, out=tmp_path / "seq", progress=False)
    run = run_sweep(_sweep(tmp_path / "ray"), cells, out=tmp_path / "ray", workers=2, progress=False)
    assert run.engine == "ray" and [o.id for o in run.failed] == ["square--1"]
    with pytest.raises(InvalidParameterError, match="got -1"):  # the worker's exception comes back with its type
        run.raise_failed()
    assert _values(tmp_path / "ray") == _values(tmp_path / "seq") and len(_values(tmp_path / "seq")) == 4
    assert not list((tmp_path / "ray").glob(".*.tmp"))
