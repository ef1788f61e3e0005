"""Run bench cells: resumable, one failing cell never stops the others, sequential or on a Ray cluster.

Every finished cell is written atomically to ``OUT/cells/<cell id>.json`` as soon as it is done; a cell whose
file exists is skipped unless ``force``. A cell that raises is reported (type, message, the last lines of its
traceback) in ``OUT/run.json`` and on the console, and the others go on; :func:`run_bench` returns a
:class:`BenchRun` whose ``failed`` list the CLI turns into its exit code.

``workers > 1`` (or ``ray_address``) runs cells as Ray tasks of one CPU each on a local cluster started here
(``ray.init(num_cpus=workers)``) or on an existing one; each worker process loads and encodes a corpus once and
reuses it for every cell it runs. Cells are deterministic given their seed when keys are seeded
(``key_seed``), so a Ray run writes the same metrics as a sequential one.
"""

from __future__ import annotations

import contextlib
import importlib
import platform
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from veil.errors import InvalidParameterError

__all__ = ["BenchRun", "CellOutcome", "run_bench", "run_cell", "cell_path"]


@dataclass
class CellOutcome:
    id: str
    status: str  # "done", "skipped" or "failed"
    path: str | None = None
    error: str | None = None
    traceback: str | None = None
    wall_time_s: float = 0.0
    summary: str = ""


@dataclass
class BenchRun:
    out: str
    outcomes: list[CellOutcome] = field(default_factory=list)
    wall_time_s: float = 0.0
    workers: int = 1
    engine: str = "sequential"

    @property
    def failed(self) -> list[CellOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def counts(self) -> dict[str, int]:
        out = {"done": 0, "skipped": 0, "failed": 0}
        for o in self.outcomes:
            out[o.status] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"out": self.out, "wall_time_s": self.wall_time_s, "workers": self.workers, "engine": self.engine,
                "counts": self.counts(), "machine": {"platform": platform.platform(), "python":
                                                     platform.python_version(), "processor": platform.machine()},
                "cells": [asdict(o) for o in self.outcomes]}


def cell_path(out: str | Path, cell: Any) -> Path:
    return Path(out) / "cells" / f"{cell.id}.json"


def _target(path: str) -> Callable[..., Any]:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def run_cell(cell: Any) -> Any:
    """Run one cell in this process; returns its :class:`~veil.results.ResultRecord` (not written)."""
    from veil.attacks.base import get_attack
    from veil.bench.cells import UTILITY_CELLS
    from veil.bench.data import bench_data
    from veil.bench.plan import UTILITY

    data = bench_data(cell.corpus, cell.config.quick, cell.config.limit)
    if cell.attack == UTILITY:
        target = UTILITY_CELLS.get(data.task)
        if target is None:
            raise InvalidParameterError(f"no utility measure for task {data.task!r}")
    else:
        target = get_attack(cell.attack).bench_cell
        if not target:
            raise InvalidParameterError(f"attack {cell.attack!r} declares no bench cell")
    return _target(target)(cell, data)


def _summary(rec: Any) -> str:
    bench = rec.extra.get("bench", {})
    if "success" in bench:
        m = bench["success_metric"]
        ci = f" [{m['ci_low']:.3f}, {m['ci_high']:.3f}]" if "ci_low" in m else ""
        return f"{bench['success']}={m['mean']:.3f}{ci}"
    if "utility" in bench:
        m = bench["utility_metric"]
        return f"{bench['utility']}={m['mean']:.3f} [{m['ci_low']:.3f}, {m['ci_high']:.3f}]"
    return ""


def execute(cell: Any, out: str) -> CellOutcome:
    """Run and write one cell; never raises for the cell's own errors (they come back in the outcome)."""
    import warnings

    start = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # kept in the record and the outcome, never fatal to a cell
            rec = run_cell(cell)
        notes = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
        if notes:
            rec.extra["warnings"] = notes
        path = cell_path(out, cell)
        rec.write(path)
        return CellOutcome(cell.id, "done", str(path), wall_time_s=time.perf_counter() - start,
                           summary=_summary(rec) + "".join(f"; {n.split(':')[0]}" for n in notes))
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - one failing cell must not stop the others
        tb = "".join(traceback.format_exception(exc)[-4:])
        return CellOutcome(cell.id, "failed", error=f"{type(exc).__name__}: {exc}", traceback=tb,
                           wall_time_s=time.perf_counter() - start)


def _identity(cell: dict[str, Any]) -> dict[str, Any]:
    """What a cell's result depends on, flat (``config.queries`` None and 500 are the same run: ``n_queries``)."""
    config = cell.get("config") if isinstance(cell.get("config"), dict) else {}
    return {**{k: v for k, v in cell.items() if k != "config"},
            **{f"config.{k}": v for k, v in config.items() if k not in ("queries", "epochs")}}


def finished_cells(cells: list[Any], out: str | Path, *, force: bool = False) -> set[str]:
    """The ids of ``cells`` whose record in ``OUT/cells/`` exists and was made for that same cell (none with
    ``force``). Checked before any work: a damaged record (empty, truncated, not UTF-8, not JSON) is a
    :class:`~veil.errors.DataFormatError` and one made for another cell a :class:`~veil.errors.StaleResultError`,
    each naming the file and the fix; neither is ever counted as done."""
    from veil._io import read_json
    from veil.errors import DataFormatError
    from veil.results import check_same_config

    done: set[str] = set()
    if force:
        return done
    for cell in cells:
        path = cell_path(out, cell)
        if not path.exists():
            continue
        fix = f"delete it, or pass --force to re-run every cell (the bench cell {cell.id} is not done)"
        data = read_json(path, what="bench cell record", fix=fix)
        stored = (data.get("config") or {}).get("cell") if isinstance(data, dict) else None
        if not isinstance(stored, dict) or not isinstance(data.get("metrics"), dict):
            raise DataFormatError(f"damaged bench cell record {path}: not a veil result record; {fix}")
        check_same_config(_identity(stored), _identity(cell.to_dict()), path)
        done.add(cell.id)
    return done


def run_bench(cells: list[Any], out: str | Path, *, workers: int = 1, ray_address: str | None = None,
              force: bool = False, progress: bool = True, log: Callable[[str], None] | None = None) -> BenchRun:
    """Run every cell not yet done (all with ``force``); writes ``OUT/cells/*.json`` and ``OUT/run.json``.

    Every existing cell record is checked first (:func:`finished_cells`); an empty plan is an error. Ctrl-C stops
    the run (Ray tasks cancelled, a cluster started here shut down) and leaves only finished cells.
    """
    from veil._io import atomic_write_json, writable_dir
    from veil.progress import progress_bar

    if workers < 1:
        raise InvalidParameterError(f"workers must be >= 1, got {workers}")
    if not cells:
        raise InvalidParameterError("the bench plan has no cells; choose corpora, defenses and attacks that apply "
                                    "to each other (`veil bench --list` shows a plan)")
    done = finished_cells(cells, out, force=force)
    out_dir = writable_dir(out)
    writable_dir(out_dir / "cells")
    log = log or (lambda line: None)
    start = time.perf_counter()
    engine = "sequential" if workers == 1 and ray_address is None else "ray"
    run = BenchRun(out=str(out_dir), workers=workers, engine=engine)
    todo = []
    for cell in cells:
        if cell.id in done:
            run.outcomes.append(CellOutcome(cell.id, "skipped", str(cell_path(out_dir, cell))))
        else:
            todo.append(cell)
    if len(todo) < len(cells):
        log(f"{len(cells) - len(todo)} of {len(cells)} cells already done in {out_dir / 'cells'} (made for the same "
            f"cells; skipped; --force reruns them)")

    def report(i: int, outcome: CellOutcome) -> None:
        run.outcomes.append(outcome)
        if outcome.status == "failed":
            log(f"[{i}/{len(todo)}] FAILED {outcome.id}: {outcome.error}")
        else:
            log(f"[{i}/{len(todo)}] {outcome.id}: {outcome.summary} ({outcome.wall_time_s:.0f} s)")

    with progress_bar(len(todo), f"bench ({engine}, {workers} worker{'s' if workers > 1 else ''})",
                      progress and bool(todo)) as advance:
        if engine == "sequential":
            for i, cell in enumerate(todo, 1):
                report(i, execute(cell, str(out_dir)))
                advance(1)
        else:
            for i, outcome in enumerate(_run_on_ray(todo, str(out_dir), workers, ray_address), 1):
                report(i, outcome)
                advance(1)
    run.wall_time_s = time.perf_counter() - start
    atomic_write_json(out_dir / "run.json", run.to_dict())
    return run


def _run_on_ray(cells: list[Any], out: str, workers: int, address: str | None):
    """Yield outcomes as Ray tasks finish (one CPU per task)."""
    import os

    import ray

    started_here = not ray.is_initialized()
    pending: list[Any] = []
    try:
        if started_here:
            os.environ.setdefault("RAY_DEDUP_LOGS", "0")
            os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")  # CPU only; silences a FutureWarning
            with _sigint_after():  # a half-started cluster cannot be shut down: Ctrl-C waits for init (seconds)
                if address is None:
                    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
                else:
                    ray.init(address=address, log_to_driver=False, configure_logging=False)
        remote = ray.remote(num_cpus=1, max_retries=0)(execute)
        ids = {remote.remote(cell, out): cell.id for cell in cells}
        pending = list(ids)
        while pending:
            # a short timeout keeps the driver in Python between waits, so Ctrl-C is seen within a second
            done, pending = ray.wait(pending, num_returns=1, timeout=0.5)
            for ref in done:
                try:
                    yield ray.get(ref)
                except ray.exceptions.RayError as exc:  # a worker died: report it, go on
                    yield CellOutcome(ids[ref], "failed", error=f"{type(exc).__name__}: {exc}")
    except BaseException:  # Ctrl-C (or an error): unfinished tasks must not go on writing cells after we exit
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - best effort: the task may have finished meanwhile
                pass
        raise
    finally:
        if started_here:  # also after a half-finished ray.init: shutdown is safe either way
            ray.shutdown()
        _remove_partial(out, cells)


@contextlib.contextmanager
def _sigint_after():
    """Hold Ctrl-C (SIGINT) back until the block ends, then raise KeyboardInterrupt (main thread only).

    Interrupting ``ray.init`` half-way leaves Ray agent processes that no shutdown reaches; started fully, the
    cluster is shut down with all its processes a moment later.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _remove_partial(out: str, cells: list[Any]) -> None:
    """Remove temporary files a killed worker may leave beside its cell record (atomic writes' ``.<name>.*.tmp``)."""
    import os

    folder = Path(out) / "cells"
    for cell in cells:
        for tmp in folder.glob(f".{cell.id}.json.*.tmp"):
            with contextlib.suppress(OSError):
                os.unlink(tmp)
