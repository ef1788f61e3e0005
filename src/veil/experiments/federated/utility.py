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

__all__ = ["UTILITY_BASE", "utility_grid", "run_cells"]

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
    from veil.federated.run import frozen_backend
    from veil.results import ResultRecord

    # the backend too, as every record of the sweep holds it: the record is reused (and compared) as a run's is
    return ResultRecord(method="federated", experiment=cfg.name,
                        config={**cfg.to_dict(), **frozen_backend(cfg), "engine": "none"},
                        metrics={}, wall_time_s=0.0, extra={"infeasible": reason})


def run_cells(cells: Sequence[FederatedConfig], root: str | Path, *, engine: str = "flower", force: bool = False,
              log: Any = print) -> list[Path]:
    """Run every cell not yet on disk (or all with ``force``); returns the result paths.

    Before any cell runs, every record already on disk is read and compared with its cell's configuration: a
    damaged record (:class:`~veil.errors.DataFormatError`) or one made under another configuration
    (:class:`~veil.errors.StaleResultError`) stops the sweep with its path and the fix, never counted as done.
    The runner is :mod:`veil.experiments._sweep`, sequential only: Flower's simulation engine starts a Ray
    cluster of its own for each run.
    """
    from functools import partial

    from veil.experiments._sweep import Sweep, run_records
    from veil.federated.run import result_path
    from veil.outputs import check_output_dir

    root = check_output_dir(root)
    sweep = Sweep(name="federated utility", path=partial(result_path, results=root), finished=_finished,
                  cell_id=_run_name, run=partial(_run_cell, engine=engine), summary=_summary)
    return run_records(sweep, cells, root, force=force, progress=False, log=log)


def _run_name(cfg: FederatedConfig) -> str:
    return cfg.run_name


def _finished(cfg: FederatedConfig, path: Path) -> bool:
    from veil.federated.run import stored_result

    return stored_result(path, cfg) is not None


def _run_cell(cfg: FederatedConfig, *, engine: str) -> Any:
    """One run; a partition that cannot give every client a batch is recorded as infeasible, with the reason
    (checked before any engine starts)."""
    from veil.errors import InvalidParameterError
    from veil.federated.data import client_data
    from veil.federated.run import run_federated

    try:
        client_data(cfg, 0)
    except InvalidParameterError as exc:
        return _infeasible(cfg, str(exc))
    rec, _ = run_federated(cfg, engine=engine)
    return rec


def _summary(rec: Any) -> str:
    if "infeasible" in rec.extra:
        return f"infeasible ({rec.extra['infeasible']})"
    acc = rec.metrics.get("test_accuracy")
    return f"test accuracy {acc.mean:.3f}" if acc is not None else ""
