"""Attacks on recorded federated runs: gradient inversion of every update a server reads.

* :func:`run_tap_attack`: :class:`~veil.attacks.gradients.analytic.AnalyticInversion` (``"analytic"``) or
  :class:`~veil.attacks.gradients.matching.EncodingMatch` (``"gradmatch"``) on every update of a recorded run
  (``veil federated run --record DIR [--truth]``), with label leakage; scored against ``DIR.truth`` when it
  exists (rows recovered with Wilson CIs over rows, per batch size), else recovery counts only.
* :func:`analytic_grid` / :func:`run_analytic_cells`: the end-to-end first-layer inversion: each run recorded on
  Flower (tap + client-side truth), then attacked, one record ``analytic-<run>-seed0.json`` per cell.

Records (method ``gradients``) are written atomically; finished cells are skipped unless ``force``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from veil._threads import torch_threads
from veil.errors import InvalidParameterError
from veil.federated.config import FederatedConfig
from veil.federated.dp import accounting as dp_accounting
from veil.results import Metric, ResultRecord

__all__ = ["TAP_ATTACKS", "tap_result_path", "run_tap_attack", "analytic_grid", "tap_name", "tap_run_config",
           "reusable_tap_record", "plan_tap_cells", "run_analytic_cells", "run_tap_sweep"]

METHOD = "gradients"
TAP_ATTACKS = ("analytic", "gradmatch")


def tap_result_path(tap_dir: str | Path, attack: str, root: str | Path, seed: int = 0) -> Path:
    return Path(root) / f"{attack}-{Path(tap_dir).name}-seed{seed}.json"


def run_tap_attack(tap_dir: str | Path, attack: str = "analytic", *, seed: int = 0, match: bool = True,
                   max_evals: int = 400, restarts: int = 2, progress: bool = False) -> ResultRecord:
    """Attack every update of a recorded run; scored against ``DIR.truth`` when it exists."""
    from veil.attacks.gradients.analytic import AnalyticInversion, score_inputs
    from veil.attacks.gradients.labels import leak_labels, score_labels
    from veil.attacks.gradients.matching import EncodingMatch
    from veil.attacks.gradients.tap import Tap
    from veil.attacks.gradients.truth import read_truth, truth_dir
    from veil.progress import progress_bar

    if attack not in TAP_ATTACKS:
        raise InvalidParameterError(f"attack must be one of {', '.join(TAP_ATTACKS)}, got {attack!r}")
    start = time.perf_counter()
    tap = Tap(tap_dir)
    meta = tap.meta
    if attack == "analytic":
        attacker: Any = AnalyticInversion(match=match, match_evals=max_evals, restarts=restarts, rng=seed)
    else:
        attacker = EncodingMatch(max_evals=max_evals, restarts=restarts, rng=seed)
    scored = truth_dir(tap.path).is_dir()
    pairs = list(tap.updates())
    if not pairs:
        raise InvalidParameterError(f"the tap {tap.path} holds no client update; record at least one round")
    rows_out: list[dict[str, Any]] = []
    with torch_threads(1), progress_bar(len(pairs), f"{attack} on {tap.path.name}", progress) as advance:
        for r, c in pairs:
            update = tap.update(r, c)
            rec = attacker.recover_update(update, meta)
            complete = len(rec) == rec.expected_rows
            labels = leak_labels(update, meta, inputs=rec.vectors if complete else None)
            row: dict[str, Any] = {"round": r, "client": c, "rows": rec.expected_rows, "vectors": len(rec),
                                   "by_method": {m: rec.count(m) for m in sorted(set(rec.methods))},
                                   "matching_loss": rec.matching_loss, "seconds": rec.wall_time_s,
                                   "classes_leaked": list(labels.classes), "labels_exact": labels.exact}
            if scored:
                truth = read_truth(tap.path, r, c)
                row["scores"] = score_inputs(rec, truth)
                row["label_scores"] = score_labels(labels, truth, inputs=rec.vectors)
            rows_out.append(row)
            advance(1)
    metrics: dict[str, Metric] = {}
    if scored:
        metrics = _tap_metrics(rows_out)
    config = {"tap": str(tap.path), "attack": attacker.config(), "scored": scored,
              "run": {k: v for k, v in meta.to_dict().items() if k != "format"},
              "defense": dict(meta.defense), "batch_size": meta.batch_size, "client_mode": meta.client_mode}
    return ResultRecord(method=METHOD, experiment=f"tap-{attack}", config=config, metrics=metrics,
                        wall_time_s=time.perf_counter() - start, extra={"updates": rows_out})


def _tap_metrics(rows: list[dict[str, Any]]) -> dict[str, Metric]:
    from veil.metrics.leakage import wilson_interval

    def rate(num: int, den: int) -> Metric:
        lo, hi = wilson_interval(num, den) if den else (None, None)
        return Metric(mean=num / den if den else 0.0, n=den, ci_low=lo, ci_high=hi, ci_level=0.95 if den else None)

    total = sum(r["scores"]["rows"] for r in rows)
    got = sum(r["scores"]["recovered"] for r in rows)
    cos = sum(r["scores"]["recovered_cosine"] for r in rows)
    vec = sum(r["scores"]["vectors"] for r in rows)
    ok = sum(r["scores"]["correct_vectors"] for r in rows)
    out = {"rows_recovered": rate(got, total), "rows_recovered_cosine": rate(cos, total)}
    if vec:  # undefined when nothing was claimed
        out["precision"] = rate(ok, vec)
    errs = [r["label_scores"]["mean_label_error"] for r in rows]
    out["mean_label_error"] = Metric.from_values(errs, keep_values=False)
    per_row = [r["label_scores"]["per_row_error"] for r in rows if r["label_scores"]["per_row_error"] is not None]
    if per_row:
        out["per_row_label_error"] = Metric.from_values(per_row, keep_values=False)
    return out


def analytic_grid(*, corpus: str = "rt-polarity", batch_sizes: Sequence[int] = (1, 2, 4, 8, 16, 32), m: int = 256,
                  k: int = 4, seed: int = 0, rounds: int = 2) -> list[FederatedConfig]:
    """Recorded runs for the end-to-end first-layer inversion: ``alg2`` at every batch size (k = min(k, batch),
    so batch 1 is inference-style masking only), plus at batch 8 a head with dropout 0.1 and a ``fedavg`` client
    (one local AdamW epoch: many steps)."""
    base = FederatedConfig(corpus=corpus, clients=3, rounds=rounds, client_mode="alg2", m=m, max_train=3000,
                           max_test=300, seed=seed)
    cells = [replace(base, batch_size=b, k=min(k, b)) for b in batch_sizes]
    cells.append(replace(base, batch_size=8, k=min(k, 8), dropout=0.1))
    cells.append(replace(base, batch_size=8, k=min(k, 8), client_mode="fedavg", lr=1e-3))
    return cells


def tap_name(cfg: FederatedConfig) -> str:
    return cfg.name + (f"-drop{cfg.dropout:g}" if cfg.dropout else "")


def tap_run_config(cfg: FederatedConfig) -> dict[str, Any]:
    """What an attack record on a tap of ``cfg`` stores of the run (its ``config["run"]``, from ``tap.json``),
    in the form :func:`stored_tap_config` reads back: the keys that tell the recorded runs apart."""
    return {"corpus": cfg.corpus, "client_mode": cfg.client_mode, "lr": cfg.learning_rate,
            "weight_decay": 0.0 if cfg.client_mode == "alg2" else cfg.weight_decay, "batch_size": cfg.batch_size,
            "local_epochs": cfg.local_epochs if cfg.client_mode == "fedavg" else 0, "rounds": cfg.rounds,
            "clients": [str(i) for i in range(cfg.clients)],
            "defense": ({"name": "texthide", "m": cfg.m, "k": cfg.k, "mode": cfg.mode} if cfg.defended
                        else {"name": "none", "m": 0, "k": 1, "mode": "intra"}),
            "dropout": cfg.dropout, "hidden_layers": cfg.hidden_layers,
            **({"differential_privacy": dp_accounting(cfg)} if cfg.dp else {})}



def reusable_tap_record(path: Path, cfg: FederatedConfig, *, force: bool = False) -> bool:
    """True when ``path`` holds an attack record on a tap of ``cfg``; False when absent (or ``force``).

    A damaged record raises :class:`~veil.errors.DataFormatError` and one on a run of another configuration
    :class:`~veil.errors.StaleResultError`, both naming the path and the fix.
    """
    from veil.encoders.backends import stored_backend_identity
    from veil.federated.run import frozen_backend
    from veil.results import ResultRecord, check_same_config

    if force or not path.exists():
        return False
    rec = ResultRecord.read(path)
    run = rec.config.get("run") if isinstance(rec.config.get("run"), dict) else {}
    model = run.get("model") if isinstance(run.get("model"), dict) else {}
    wanted = tap_run_config(cfg)
    stored = {k: run.get(k) for k in wanted if k not in ("dropout", "hidden_layers")}
    stored["dropout"] = model.get("dropout")
    stored["hidden_layers"] = len(model["hidden"]) if isinstance(model.get("hidden"), list) else None
    # the backend of the recorded run's frozen encodings (and of the attack's own index), stamped by the sweep
    stored.update(stored_backend_identity(rec.config))
    check_same_config(stored, {**wanted, **frozen_backend(cfg)}, path)
    return True


def plan_tap_cells(cells: Sequence[FederatedConfig], root: Path, taps: Path, result_path: Any, *,
                   force: bool = False) -> list[tuple[FederatedConfig, Path, Path, bool]]:
    """(cell, tap folder, result path, done) for every cell, checked before any work: finished records are
    compared with their cells (damaged or stale: a typed error), and a tap folder about to be recorded again must
    be one veil recorded (it is replaced only then; a folder veil did not write is refused, ``force`` or not)."""
    from veil.federated.server import check_record_target

    plan = []
    for cfg in cells:
        tap = taps / tap_name(cfg)
        path = result_path(cfg, root)
        done = reusable_tap_record(path, cfg, force=force)
        if not done:
            check_record_target(tap, truth=True, force=True, option="--taps")
        plan.append((cfg, tap, path, done))
    return plan


def run_analytic_cells(cells: Sequence[FederatedConfig], root: str | Path, taps: str | Path, *,
                       engine: str = "flower", force: bool = False, log: Any = print) -> list[Path]:
    """Record each run on Flower (tap + client-side truth under ``taps``), attack it with the analytic inversion,
    write ``root/analytic-<run>-seed0.json``. Resumable per cell (a finished record is reused only when it was
    made on a run of the same configuration); the taps are data (never committed). The runner is
    :mod:`veil.experiments._sweep`, sequential only (Flower's simulation starts a Ray cluster of its own)."""
    from functools import partial

    from veil.outputs import check_output_dir

    root = check_output_dir(root)
    taps = check_output_dir(taps, option="--taps")
    path = partial(_analytic_path, taps=taps)
    return run_tap_sweep(cells, root, taps, path, partial(_analytic_cell, taps=taps, engine=engine),
                         name="analytic sweep", summary=_analytic_summary, force=force, log=log)


def run_tap_sweep(cells: Sequence[FederatedConfig], root: Path, taps: Path, result_path: Any, run: Any, *,
                  name: str, summary: Any, force: bool = False, log: Any = print) -> list[Path]:
    """The sweep over recorded runs (analytic and chain): every cell checked first (:func:`plan_tap_cells`), then
    each cell not done run (``run(cell)`` records its tap and returns the attack's record) and written."""
    from functools import partial

    from veil.experiments._sweep import Sweep, run_records

    plan = plan_tap_cells(cells, root, taps, result_path, force=force)
    done = frozenset(str(path) for _, _, path, is_done in plan if is_done)
    sweep = Sweep(name=name, path=partial(result_path, root=root), finished=partial(_planned_done, done=done),
                  cell_id=tap_name, run=partial(_with_backend, run=run), summary=summary)
    return run_records(sweep, cells, root, force=force, progress=False, log=log)


def _with_backend(cfg: FederatedConfig, *, run: Any) -> ResultRecord:
    """``run(cfg)``'s record with the backend of the run's frozen encodings when it is not torch (the run is
    recorded in this process, so it resolves the backend as :func:`reusable_tap_record` does)."""
    from veil.federated.run import frozen_backend

    rec = run(cfg)
    rec.config.update(frozen_backend(cfg))
    return rec


def _planned_done(cfg: FederatedConfig, path: Path, *, done: frozenset[str]) -> bool:
    return str(path) in done


def _analytic_path(cfg: FederatedConfig, root: Path, *, taps: Path) -> Path:
    return tap_result_path(taps / tap_name(cfg), "analytic", root)


def _analytic_cell(cfg: FederatedConfig, *, taps: Path, engine: str) -> ResultRecord:
    from veil.federated.run import run_federated

    tap = taps / tap_name(cfg)
    run_federated(cfg, engine=engine, record=tap, truth=True, force=True)  # replaces veil's own tap only
    return run_tap_attack(tap, "analytic")


def _analytic_summary(rec: ResultRecord) -> str:
    return f"rows recovered {rec.metrics.get('rows_recovered')}"
