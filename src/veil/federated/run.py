"""Run federated TextHide on Flower's simulation engine (Ray), or in-process for reference, and write one result.

``veil federated run`` calls :func:`run_federated`. Each of ``cfg.clients``
virtual SuperNodes runs :data:`veil.federated.apps.simulation_clientapp`; the ServerApp
runs :class:`~veil.federated.apps.StrictFedAvg` in this process. The result
(``results/federated/<name>.json``) is written atomically only when the run
succeeds; a failing client raises :class:`~veil.errors.FederatedError` and
leaves no result file and no tap.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from veil.errors import FederatedError, InvalidParameterError
from veil.federated.config import FederatedConfig
from veil.results import Metric, ResultRecord

__all__ = ["run_federated", "write_result", "result_path", "simulation_backend"]

SECRET_RANDOMNESS = ("each client's mask pool: OS CSPRNG on the client (or its owner-only key file), never sent; "
                     "TextHide mixing: OS CSPRNG; the seed sets the partition, head init, batch order and dropout")


def simulation_backend(num_cpus: int | None = None) -> dict[str, Any]:
    """One CPU per virtual client, Ray limited to this machine's cores (Flower's default, 2 CPUs per client,
    would run one client at a time on 2 cores)."""
    cpus = num_cpus or os.cpu_count() or 1
    return {"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
            "init_args": {"num_cpus": cpus, "num_gpus": 0, "include_dashboard": False, "log_to_driver": False}}


def result_path(cfg: FederatedConfig, results: str | Path = "results/federated") -> Path:
    return Path(results) / f"{cfg.name}.json"


def _record(cfg: FederatedConfig, summaries: list[dict[str, Any]], seconds: float, engine: str,
            record: str | None) -> ResultRecord:
    from veil.metrics.leakage import wilson_interval

    last = summaries[-1]
    metrics: dict[str, Metric] = {"train_loss": Metric(mean=float(last["train_loss"]))}
    if last.get("test_accuracy") is not None:
        n = int(last["test_examples"])
        hits = round(float(last["test_accuracy"]) * n)
        lo, hi = wilson_interval(hits, n, 0.95)
        metrics["test_accuracy"] = Metric(mean=hits / n, n=n, ci_low=lo, ci_high=hi, ci_level=0.95)
        if "majority_rate" in last:
            metrics["majority_rate"] = Metric(mean=float(last["majority_rate"]), n=n)
    config = {**cfg.to_dict(), "learning_rate": cfg.learning_rate, "engine": engine,
              "encoder": ("minilm (all-MiniLM-L6-v2), fine-tuned by every client (AdamW, encoder_lr) and averaged"
                          if cfg.finetune else "minilm (all-MiniLM-L6-v2), frozen")
                         + ", mean pooling, L2-normalised",
              "evaluation": "after every round, each client scores its IID share of the test split through its own "
                            "pool (k = 1); accuracy = correct / examples over all clients; nothing is selected on it",
              "secret_randomness": SECRET_RANDOMNESS, "tap": record}
    return ResultRecord(method="federated", experiment=cfg.name, config=config, metrics=metrics,
                        wall_time_s=seconds, extra={"rounds": summaries, "collapsed": last.get("collapsed")})


def write_result(cfg: FederatedConfig, summaries: list[dict[str, Any]], seconds: float, *, engine: str,
                 results: str | Path = "results/federated", record: str | None = None) -> Path:
    from veil._io import atomic_write_json

    path = result_path(cfg, results)
    atomic_write_json(path, _record(cfg, summaries, seconds, engine, record).to_dict())
    return path


def run_federated(cfg: FederatedConfig, *, engine: str = "flower", record: str | Path | None = None,
                  truth: bool = False, force: bool = False, mixing_seed: int | None = None,
                  key_dir: str | Path | None = None, backend: dict[str, Any] | None = None) -> tuple[ResultRecord, list[dict[str, Any]]]:
    """Run ``cfg``; returns (result record, global weights after every round). Nothing is written here except
    the tap (``record``, published only on success).

    ``engine``: ``"flower"`` (Flower simulation on Ray) or ``"reference"`` (the in-process loop).
    ``truth``: also let clients write ground truth next to the tap (experiments only: it holds what the key
    protects). ``mixing_seed``: seeded TextHide mixing, derived per client and round (engine comparisons
    only; it warns). ``key_dir``: client p loads its pool from ``key_dir/client-<p>.key`` (written by
    ``MaskPool.save``) instead of drawing one (simulation; a deployment names each key in its node config).
    """
    from veil.federated.server import Recorder

    if record and cfg.finetune:
        raise InvalidParameterError("recording a fine-tuned run is not supported: every reply holds the whole "
                                    "encoder (91 MB) and the gradient attacks read frozen-encoder taps; record a "
                                    "frozen-encoder run (without --finetune)")
    recorder = Recorder(record, truth=truth, force=force) if record else None
    if recorder is not None:
        recorder.describe_truth(cfg.to_dict())
    start = time.perf_counter()
    if engine == "reference":
        from veil.federated.reference import run_reference

        pools = None
        if key_dir is not None and cfg.defended:
            from veil.defenses.texthide import MaskPool

            pools = {p: MaskPool.load(Path(key_dir) / f"client-{p}.key") for p in range(cfg.clients)}
        _, summaries, history = run_reference(cfg, pools=pools, mixing_seed=mixing_seed, recorder=recorder)
        rows = [s.to_dict() for s in summaries]
    elif engine == "flower":
        rows, history = _run_flower(cfg, recorder, mixing_seed, key_dir, backend)
    else:
        raise FederatedError(f"unknown engine {engine!r}; use 'flower' or 'reference'")
    rec = _record(cfg, rows, time.perf_counter() - start, "flower-simulation" if engine == "flower" else engine,
                  str(record) if record else None)
    return rec, history


def _run_flower(cfg: FederatedConfig, recorder: Any, mixing_seed: int | None, key_dir: str | Path | None,
                backend: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[Any]]:
    import logging

    from veil.federated.apps import make_server_app, simulation_clientapp

    from flwr.simulation import run_simulation

    extra: dict[str, Any] = {}
    if recorder is not None and recorder.truth_partial is not None:
        extra["x-truth-dir"] = str(recorder.truth_partial.resolve())
    if mixing_seed is not None:
        extra["x-mixing-seed"] = int(mixing_seed)
    if key_dir is not None:
        extra["x-key-dir"] = str(Path(key_dir).resolve())
    sink: dict[str, Any] = {}
    flwr_logger = logging.getLogger("flwr")
    level = flwr_logger.level
    flwr_logger.setLevel(logging.WARNING)  # one INFO line per message otherwise; errors still show
    try:
        run_simulation(server_app=make_server_app(cfg, sink, recorder=recorder, extra=extra),
                       client_app=simulation_clientapp,
                       num_supernodes=cfg.clients, backend_config=backend or simulation_backend())
        if "error" in sink:
            raise sink["error"]
        if "strategy" not in sink:
            raise FederatedError("the Flower simulation ended without running the server; see the log above")
    except BaseException:
        if recorder is not None:
            recorder.abort()
        raise
    finally:
        flwr_logger.setLevel(level)
    if recorder is not None:
        recorder.finish()
    strategy = sink["strategy"]
    return strategy.summaries, strategy.history
