"""The one resumable runner of every sweep (``veil bench`` and the experiment grids): sequential or on Ray.

A sweep is a list of cells and a :class:`Sweep` that says, for one cell, its id, the path of its record, whether a
record there is already that cell's (made under the same configuration), and how to run it (a function that
returns the record, not written). :func:`run_sweep` then

* checks every existing record before any work (:attr:`Sweep.finished`: a damaged record is a
  :class:`~veil.errors.DataFormatError` and one made under another configuration a
  :class:`~veil.errors.StaleResultError`, each naming the file and the fix; neither is ever counted as done) and
  skips the cells whose record is their own (none with ``force``). A record is its cell's only if it was also made
  from the same inputs: :attr:`Sweep.inputs` gives the content hash of every input whose content the cell's id does
  not pin (a user's file, a corpus given in this process); each record keeps them (``config["inputs"]``) and one
  made from other content is a :class:`~veil.errors.StaleResultError` naming ``--force``, never reused;
* runs the others, writing each record atomically as soon as it is done; a cell that raises is reported (type,
  message, the last lines of its traceback) and the others go on: the failures come back in
  :attr:`SweepRun.failed` (bench turns them into an exit code; the experiment runners re-raise the first one
  after the others ran, :meth:`SweepRun.raise_failed`);
* ``workers > 1`` (or ``ray_address``) runs the cells as Ray tasks of one CPU each on a local cluster started here
  (``ray.init(num_cpus=workers)``) or on an existing one. Only cells that do not depend on each other belong in
  one sweep; a sweep whose cells share state runs with ``workers=1``;
* Ctrl-C stops the run (Ray tasks cancelled, a cluster started here shut down) and leaves only finished records:
  a killed worker's temporary file beside a record is removed.
"""

from __future__ import annotations

import contextlib
import platform
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from veil.errors import InvalidParameterError, VeilError

__all__ = ["Sweep", "SweepRun", "CellOutcome", "run_sweep", "run_records", "execute", "finished", "check_inputs",
           "record_exists"]


@dataclass
class CellOutcome:
    id: str
    status: str  # "done", "skipped" or "failed"
    path: str | None = None
    error: str | None = None
    traceback: str | None = None
    wall_time_s: float = 0.0
    summary: str = ""
    #: the cell's own exception (failed cells run in this process or returned by a Ray worker); not in run.json
    exception: BaseException | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "exception"}


@dataclass
class SweepRun:
    out: str
    outcomes: list[CellOutcome] = field(default_factory=list)
    wall_time_s: float = 0.0
    workers: int = 1
    engine: str = "sequential"
    #: what the caller adds to ``run.json`` about the run (the bench's ``--demo``: the cells it left out)
    notes: dict[str, Any] = field(default_factory=dict)

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
                "cells": [o.to_dict() for o in self.outcomes], **self.notes}

    def raise_failed(self) -> None:
        """Re-raise the first failed cell's own exception (its type unchanged), the other failures noted on it;
        nothing when every cell finished."""
        failed = self.failed
        if not failed:
            return
        first = failed[0]
        others = [f"{o.id}: {o.error}" for o in failed[1:]]
        exc = first.exception
        if exc is None:  # lost on the way back from a worker that died
            exc = VeilError(f"the cell {first.id} failed: {first.error}")
        if others:
            exc.add_note(f"{len(others)} other cell(s) failed too: " + "; ".join(others))
        raise exc


def _attribute_id(cell: Any) -> str:
    return cell.id


def _no_summary(record: Any) -> str:
    return ""


def _write(record: Any, path: Path) -> None:
    record.write(path)


def _no_inputs(cell: Any) -> dict[str, str]:
    return {}


def record_exists(cell: Any, path: Path) -> bool:
    """The plainest reuse rule: a record at the path is the cell's (for sweeps whose path names every setting)."""
    return path.exists()


@dataclass(frozen=True)
class Sweep:
    """How to run one kind of cell. Every function must be picklable for Ray (module-level functions, partials
    of them, or cloudpickle-able closures that carry no large data)."""

    #: shown on the progress bar
    name: str
    #: cell -> the path of its record
    path: Callable[[Any], Path]
    #: cell -> its record (a :class:`~veil.results.ResultRecord` or anything with ``write(path)``), not written
    run: Callable[[Any], Any]
    #: (cell, path) -> True when ``path`` holds that cell's record (False when absent); raises for a damaged record
    #: or one made under another configuration. Never called with ``force``.
    finished: Callable[[Any, Path], bool] = record_exists
    #: cell -> its id (unique in the sweep): logs, run.json and the failures
    cell_id: Callable[[Any], str] = _attribute_id
    #: record -> a short text for the log line of a finished cell
    summary: Callable[[Any], str] = _no_summary
    #: (record, path) -> writes it (atomically)
    write: Callable[[Any, Path], None] = _write
    #: True: warnings a cell raises are kept in its record (``extra["warnings"]``) and the log, never fatal to it
    keep_warnings: bool = False
    #: how skipped cells are logged: ``"each"`` (a line per cell), ``"count"`` (one line) or ``"none"``
    skip_log: str = "each"
    #: cell -> {input: sha256 of its content} for every input the cell reads whose content its id does not pin (a
    #: user's file, a corpus given in this process); {} when the id pins everything (built-in corpora, whose content
    #: veil's registry pins). A non-empty map is stamped into the record (``config["inputs"]``) and must match on
    #: resume (:func:`check_inputs`)
    inputs: Callable[[Any], Mapping[str, str]] = _no_inputs

    def __post_init__(self) -> None:
        if self.skip_log not in ("each", "count", "none"):
            raise InvalidParameterError(f"skip_log must be each, count or none, got {self.skip_log!r}")


def execute(sweep: Sweep, cell: Any) -> CellOutcome:
    """Run and write one cell; never raises for the cell's own errors (they come back in the outcome)."""
    import warnings

    start = time.perf_counter()
    cell_id = sweep.cell_id(cell)
    try:
        if sweep.keep_warnings:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")  # kept in the record and the outcome, never fatal to a cell
                rec = sweep.run(cell)
            notes = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
            if notes:
                rec.extra["warnings"] = notes
        else:
            rec, notes = sweep.run(cell), []
        _stamp_inputs(rec, sweep.inputs(cell))
        path = sweep.path(cell)
        sweep.write(rec, path)
        return CellOutcome(cell_id, "done", str(path), wall_time_s=time.perf_counter() - start,
                           summary=sweep.summary(rec) + "".join(f"; {n.split(':')[0]}" for n in notes))
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - one failing cell must not stop the others
        tb = "".join(traceback.format_exception(exc)[-4:])
        return CellOutcome(cell_id, "failed", error=f"{type(exc).__name__}: {exc}", traceback=tb,
                           wall_time_s=time.perf_counter() - start, exception=exc)


def _stamp_inputs(rec: Any, inputs: Mapping[str, str]) -> None:
    """Keep the cell's input hashes in its record (``config["inputs"]``), where :func:`check_inputs` reads them."""
    if not inputs:
        return
    config = getattr(rec, "config", None)
    if not isinstance(config, dict):
        raise InvalidParameterError(f"a sweep with inputs needs records with a config dict (a ResultRecord), not "
                                    f"{type(rec).__name__}")
    config["inputs"] = dict(inputs)


def check_inputs(sweep: Sweep, cell: Any, path: Path) -> None:
    """Raise :class:`~veil.errors.StaleResultError` unless the record at ``path`` was made from the inputs the
    cell reads now (:attr:`Sweep.inputs`: same names, same content hashes); nothing when the cell has none.

    A record made before inputs were recorded holds none, so it never matches a cell that has some: refused, like
    any other, never taken as done."""
    from veil._io import read_json
    from veil.errors import StaleResultError

    wanted = dict(sweep.inputs(cell))
    if not wanted:
        return
    data = read_json(path, what=f"{sweep.name} record")
    config = data.get("config") if isinstance(data, dict) else None
    stored = config.get("inputs") if isinstance(config, dict) else None
    stored = dict(stored) if isinstance(stored, dict) else {}
    if stored == wanted:
        return
    keys = sorted(set(stored) | set(wanted), key=str)
    changed = [k for k in keys if stored.get(k) != wanted.get(k)]

    def show(value: Any) -> str:
        return "none" if value is None else f"sha256 {str(value)[:12]}..."

    shown = "; ".join(f"{k}: {show(stored.get(k))} in the record, {show(wanted.get(k))} now" for k in changed[:3])
    more = f" (and {len(changed) - 3} more)" if len(changed) > 3 else ""
    raise StaleResultError(
        f"{path} was made from other input content ({shown}{more}): the data changed since, so it was not reused. "
        "Pass --force to re-run and replace it, or write to another output folder to keep both",
        keys=[f"inputs.{k}" for k in changed])


def finished(sweep: Sweep, cells: Sequence[Any], *, force: bool = False) -> set[str]:
    """The ids of ``cells`` whose record exists and is their own, every record checked before any work (none with
    ``force``); a damaged or stale record, or one made from other inputs (:func:`check_inputs`), raises
    (:attr:`Sweep.finished`)."""
    if force:
        return set()
    done = set()
    for cell in cells:
        path = sweep.path(cell)
        if sweep.finished(cell, path):
            check_inputs(sweep, cell, path)
            done.add(sweep.cell_id(cell))
    return done


def run_sweep(sweep: Sweep, cells: Sequence[Any], *, out: str | Path, workers: int = 1,
              ray_address: str | None = None, force: bool = False, progress: bool = True,
              log: Callable[[str], None] | None = None, run_json: bool = False,
              notes: dict[str, Any] | None = None) -> SweepRun:
    """Run every cell not yet done (all with ``force``); see the module docstring. ``out``: the folder the run
    belongs to (``OUT/run.json`` is written there with ``run_json``). The outcomes keep the order of ``cells``
    for skipped ones first, then finished and failed ones as they end."""
    if workers < 1:
        raise InvalidParameterError(f"workers must be >= 1, got {workers}")
    ids = [sweep.cell_id(cell) for cell in cells]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise InvalidParameterError(f"a sweep names each cell once; repeated: {', '.join(dup[:5])}")
    done = finished(sweep, cells, force=force)
    log = log or (lambda line: None)
    start = time.perf_counter()
    engine = "sequential" if workers == 1 and ray_address is None else "ray"
    run = SweepRun(out=str(out), workers=workers, engine=engine, notes=dict(notes or {}))
    todo = []
    for cell, cell_id in zip(cells, ids):
        if cell_id in done:
            path = sweep.path(cell)
            run.outcomes.append(CellOutcome(cell_id, "skipped", str(path)))
            if sweep.skip_log == "each":
                log(f"skip {cell_id}: {path} holds its result (same configuration; --force re-runs it)")
        else:
            todo.append(cell)
    if len(todo) < len(cells) and sweep.skip_log == "count":
        folder = Path(run.outcomes[0].path or out).parent
        log(f"{len(cells) - len(todo)} of {len(cells)} cells already done in {folder} (made for the same cells; "
            f"skipped; --force reruns them)")

    def report(i: int, outcome: CellOutcome) -> None:
        run.outcomes.append(outcome)
        if outcome.status == "failed":
            log(f"[{i}/{len(todo)}] FAILED {outcome.id}: {outcome.error}")
        else:
            shown = f"{outcome.summary} " if outcome.summary else ""
            log(f"[{i}/{len(todo)}] {outcome.id}: {shown}({outcome.wall_time_s:.0f} s) -> {outcome.path}")

    from veil.progress import progress_bar

    label = f"{sweep.name} ({engine}, {workers} worker{'s' if workers > 1 else ''})"
    with progress_bar(len(todo), label, progress and bool(todo)) as advance:
        outcomes = ((execute(sweep, cell) for cell in todo) if engine == "sequential"
                    else _run_on_ray(sweep, todo, workers, ray_address))
        for i, outcome in enumerate(outcomes, 1):
            report(i, outcome)
            advance(1)
    run.wall_time_s = time.perf_counter() - start
    if run_json:
        from veil._io import atomic_write_json

        atomic_write_json(Path(out) / "run.json", run.to_dict())
    return run


def _run_on_ray(sweep: Sweep, cells: list[Any], workers: int, address: str | None) -> Iterator[CellOutcome]:
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
        shared = ray.put(sweep)
        ids = {remote.remote(shared, cell): sweep.cell_id(cell) for cell in cells}
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
        _remove_partial(sweep, cells)


@contextlib.contextmanager
def _sigint_after() -> Iterator[None]:
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


def _remove_partial(sweep: Sweep, cells: list[Any]) -> None:
    """Remove temporary files a killed worker may leave beside a record (atomic writes' ``.<name>.*.tmp``)."""
    import os

    for cell in cells:
        path = sweep.path(cell)
        for tmp in path.parent.glob(f".{path.name}.*.tmp"):
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def run_records(sweep: Sweep, cells: Sequence[Any], out: str | Path, *, workers: int = 1,
                ray_address: str | None = None, force: bool = False, progress: bool = True,
                log: Callable[[str], None] | None = None) -> list[Path]:
    """:func:`run_sweep` for an experiment grid: every cell runs (one failing never stops the others), then the
    first failure is re-raised (:meth:`SweepRun.raise_failed`); returns the record paths in the order of
    ``cells``."""
    run = run_sweep(sweep, cells, out=out, workers=workers, ray_address=ray_address, force=force,
                    progress=progress, log=log)
    run.raise_failed()
    return [sweep.path(cell) for cell in cells]
