"""The resumable runner reuses a record only if it was made from the same inputs (veil.experiments._sweep): a
sweep that names its cells' input hashes (``Sweep.inputs``) stamps them into every record and refuses, naming
--force, a record made from other content, never reusing it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from veil._io import sha256_file
from veil.errors import StaleResultError
from veil.experiments._sweep import Sweep, run_sweep
from veil.results import Metric, ResultRecord


@dataclass(frozen=True)
class Count:
    """A cell that reads a user's file: how many lines it has (the id does not pin the file's content)."""

    source: str

    @property
    def id(self) -> str:
        return f"count-{Path(self.source).stem}"


def _run(cell: Count) -> ResultRecord:
    lines = Path(cell.source).read_text().splitlines()
    return ResultRecord(method="count", experiment=cell.id, config={"cell": asdict(cell)},
                        metrics={"lines": Metric(mean=float(len(lines)))}, wall_time_s=0.0)


def _finished(cell: Count, path: Path) -> bool:
    from veil.outputs import existing_record

    return existing_record(path, asdict(cell), part="cell") is not None


def _inputs(cell: Count) -> dict[str, str]:
    return {"source": sha256_file(cell.source)}


def _sweep(root: Path, *, inputs: bool = True) -> Sweep:
    return Sweep(name="counts", path=lambda cell: root / f"{cell.id}.json", run=_run, finished=_finished,
                 **({"inputs": _inputs} if inputs else {}))


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("one\ntwo\n")
    return path


def test_a_record_keeps_its_inputs_and_is_reused_while_they_match(tmp_path, source):
    root = tmp_path / "out"
    cells = [Count(str(source))]
    assert run_sweep(_sweep(root), cells, out=root, progress=False).counts()["done"] == 1
    record = json.loads((root / "count-mine.json").read_text())
    assert record["config"]["inputs"] == {"source": sha256_file(source)}
    assert run_sweep(_sweep(root), cells, out=root, progress=False).counts() == {"done": 0, "skipped": 1,
                                                                                  "failed": 0}


def test_a_record_made_from_other_content_is_refused_naming_force_and_kept(tmp_path, source):
    root = tmp_path / "out"
    cells = [Count(str(source))]
    run_sweep(_sweep(root), cells, out=root, progress=False)
    before = (root / "count-mine.json").read_bytes()
    source.write_text("one\ntwo\nthree\n")  # the user edits the file: same cell id, other content
    with pytest.raises(StaleResultError, match=r"made from other input content \(source: sha256 .* in the record, "
                                               r"sha256 .* now\).*Pass --force") as info:
        run_sweep(_sweep(root), cells, out=root, progress=False)
    assert info.value.keys == ["inputs.source"]
    assert (root / "count-mine.json").read_bytes() == before  # never lost
    forced = run_sweep(_sweep(root), cells, out=root, progress=False, force=True)
    assert forced.counts()["done"] == 1
    assert json.loads((root / "count-mine.json").read_text())["metrics"]["lines"]["mean"] == 3.0


def test_a_record_made_before_inputs_were_recorded_is_not_taken_as_done(tmp_path, source):
    root = tmp_path / "out"
    cells = [Count(str(source))]
    run_sweep(_sweep(root, inputs=False), cells, out=root, progress=False)  # an old record: no inputs in it
    assert "inputs" not in json.loads((root / "count-mine.json").read_text())["config"]
    with pytest.raises(StaleResultError, match=r"source: none in the record"):
        run_sweep(_sweep(root), cells, out=root, progress=False)
