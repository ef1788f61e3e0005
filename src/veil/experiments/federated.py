"""Utility of federated TextHide against centralised training, plain against TextHide (issue: federated TextHide).

One cell = one :class:`~veil.federated.FederatedConfig` run on Flower's simulation engine, written as
``results/federated/<name>.json`` as soon as it finishes (the sweep is resumable: finished cells are skipped).
The centralised reference is the same code with one client holding the whole train split (``clients=1``), so
both sides share the model, optimiser, budget (rounds x local epochs = epochs over the data) and test set.

The utility grid (frozen encoder, ``fedavg`` clients: one local AdamW epoch per round):

* defenses: none (m=0, k=1) and TextHide (256, 4) intra;
* clients {3, 5, 10} x partition {IID, Dirichlet 0.5, Dirichlet 0.1}, plus centralised;
* seeds {0, 1, 2} (partition, head init, batch order; every run draws fresh client keys from the OS CSPRNG).

A partition that cannot give every client a batch (Dirichlet 0.1 with binary labels and many clients) is
recorded as infeasible with the reason, not silently skipped or changed.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from veil.federated.config import FederatedConfig

__all__ = ["utility_grid", "run_cells"]

UTILITY_BASE = FederatedConfig(corpus="rt-polarity", rounds=20, client_mode="fedavg", batch_size=32, local_epochs=1,
                               hidden_layers=1, dropout=0.0, lr=1e-3)


def utility_grid(*, corpus: str = "rt-polarity", seeds: Sequence[int] = (0, 1, 2), clients: Sequence[int] = (3, 5, 10),
                 alphas: Sequence[float] = (0.0, 0.5, 0.1), rounds: int = 20,
                 settings: Sequence[tuple[int, int]] = ((0, 1), (256, 4))) -> list[FederatedConfig]:
    base = replace(UTILITY_BASE, corpus=corpus, rounds=rounds)
    cells = []
    for seed, (m, k) in itertools.product(seeds, settings):
        cells.append(replace(base, clients=1, alpha=0.0, m=m, k=k, seed=seed))
        for n, alpha in itertools.product(clients, alphas):
            cells.append(replace(base, clients=n, alpha=alpha, m=m, k=k, seed=seed))
    return cells


def _infeasible(cfg: FederatedConfig, reason: str) -> Any:
    from veil.results import ResultRecord

    return ResultRecord(method="federated", experiment=cfg.name, config={**cfg.to_dict(), "engine": "none"},
                        metrics={}, wall_time_s=0.0, extra={"infeasible": reason})


def run_cells(cells: Sequence[FederatedConfig], root: str | Path, *, engine: str = "flower", force: bool = False,
              log: Any = print) -> list[Path]:
    """Run every cell not yet on disk (or all with ``force``); returns the result paths.

    Before any cell runs, every record already on disk is read and compared with its cell's configuration: a
    damaged record (:class:`~veil.errors.DataFormatError`) or one made under another configuration
    (:class:`~veil.errors.StaleResultError`) stops the sweep with its path and the fix, never counted as done.
    """
    from veil._io import atomic_write_json
    from veil.errors import InvalidParameterError
    from veil.outputs import check_output_dir
    from veil.federated.data import client_data
    from veil.federated.run import result_path, run_federated, stored_result

    root = check_output_dir(root)
    paths = [result_path(cfg, root) for cfg in cells]
    done = [stored_result(path, cfg, force=force) is not None for cfg, path in zip(cells, paths)]
    for i, (cfg, path) in enumerate(zip(cells, paths), 1):
        if done[i - 1]:
            log(f"[{i}/{len(cells)}] skip {cfg.run_name}: {path} holds its result")
            continue
        try:
            client_data(cfg, 0)  # partitions are checked before any engine starts
        except InvalidParameterError as exc:
            atomic_write_json(path, _infeasible(cfg, str(exc)).to_dict())
            log(f"[{i}/{len(cells)}] {cfg.run_name}: infeasible ({exc})")
            continue
        rec, _ = run_federated(cfg, engine=engine)
        atomic_write_json(path, rec.to_dict())
        acc = rec.metrics.get("test_accuracy")
        log(f"[{i}/{len(cells)}] {cfg.run_name}: test accuracy {acc.mean:.3f} ({rec.wall_time_s:.0f} s) -> {path}")
    return paths


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
            "dropout": cfg.dropout, "hidden_layers": cfg.hidden_layers}


def reusable_tap_record(path: Path, cfg: FederatedConfig, *, force: bool = False) -> bool:
    """True when ``path`` holds an attack record on a tap of ``cfg``; False when absent (or ``force``).

    A damaged record raises :class:`~veil.errors.DataFormatError` and one on a run of another configuration
    :class:`~veil.errors.StaleResultError`, both naming the path and the fix.
    """
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
    check_same_config(stored, wanted, path)
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
    made on a run of the same configuration); the taps are data (never committed)."""
    from veil.experiments.gradients import run_tap_attack, tap_result_path
    from veil.outputs import check_output_dir
    from veil.federated.run import run_federated

    root = check_output_dir(root)
    taps = check_output_dir(taps, option="--taps")
    plan = plan_tap_cells(cells, root, taps, lambda cfg, r: tap_result_path(taps / tap_name(cfg), "analytic", r),
                          force=force)
    for i, (cfg, tap, path, done) in enumerate(plan, 1):
        if done:
            log(f"[{i}/{len(cells)}] skip {tap.name}: {path} holds its result")
            continue
        run_federated(cfg, engine=engine, record=tap, truth=True, force=True)  # replaces veil's own tap only
        rec = run_tap_attack(tap, "analytic")
        rec.write(path)
        got = rec.metrics.get("rows_recovered")
        log(f"[{i}/{len(cells)}] {tap.name}: rows recovered {got} -> {path}")
    return [path for _, _, path, _ in plan]
