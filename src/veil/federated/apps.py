"""The Flower 1.41 apps (Message API): :data:`clientapp` and :data:`serverapp` for a real SuperLink/SuperNode
deployment, and :func:`make_server_app` for simulation. The work itself is in :mod:`veil.federated.client`
(local training, evaluation) and :mod:`veil.federated.server` (aggregation, tap), shared with the reference loop.

Client (each SuperNode):

* reads the run's :class:`FederatedConfig` from the server's message, its
  partition from ``context.node_config`` (``partition-id``, ``num-partitions``);
* holds its own secret :class:`~veil.defenses.texthide.MaskPool`: from the
  owner-only key file named by ``key-path`` in its node config
  (``MaskPool.load``) or, without one, drawn once from the OS CSPRNG and kept
  in ``context.state`` (which Flower keeps on the client's side and never
  sends; never a module global). A restarted SuperNode without a key file
  draws a new key: use a key file for real deployments;
* replies with the head's weights and ``num-examples`` (plus ``train_loss``
  and its ``partition-id``, which is not secret). Never the pool, never a
  vector.

Server: :class:`StrictFedAvg`, Flower's FedAvg that fails loudly. Flower's
FedAvg logs a client's error reply and aggregates the rest; a run that
silently lost a client is not the run the user asked for, so here a client
error, a missing reply or too few connected clients (after ``timeout``
seconds, instead of Flower's endless wait) ends the run with
:class:`~veil.errors.FederatedError` naming the client. With a
:class:`~veil.federated.server.Recorder` it also records every global model
and every reply (the eavesdropper tap).
"""

from __future__ import annotations

import os
import time
import traceback
from typing import Any

import numpy as np

from veil.errors import FederatedError, InvalidParameterError
from veil.federated.config import FederatedConfig

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # Flower posts usage events to flower.ai otherwise
os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402

__all__ = ["clientapp", "simulation_clientapp", "serverapp", "make_server_app", "StrictFedAvg", "to_record", "from_record",
           "EXTRA_KEYS"]

#: keys of the train/evaluate config that are not part of FederatedConfig: experiment-only switches
#: (``x-key-dir``: simulation only, load client I's key from ``DIR/client-I.key``, to rerun with fixed keys)
EXTRA_KEYS = ("x-truth-dir", "x-mixing-seed", "x-key-dir")
_POOL_KEY = "veil-mask-pool"


def to_record(arrays: dict[str, np.ndarray]) -> ArrayRecord:
    return ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in arrays.items()})


def from_record(record: ArrayRecord) -> dict[str, np.ndarray]:
    return {k: np.array(v.numpy()) for k, v in record.items()}


# ------------------------------------------------------------------ client
def _client_pool(cfg: FederatedConfig, context: Context, dim: int, key_dir: str = "") -> Any:
    from pathlib import Path

    from veil.defenses.texthide import MaskPool

    if not cfg.defended:
        return None
    key_path = context.node_config.get("key-path")
    if not key_path and key_dir:
        key_path = str(Path(key_dir) / f"client-{int(context.node_config['partition-id'])}.key")
    if key_path:
        return MaskPool.load(str(key_path), dim=dim)
    if _POOL_KEY in context.state:
        masks = context.state[_POOL_KEY]["masks"].numpy()
        return MaskPool.from_masks(masks)
    from veil.defenses.defaults import mask_pool

    pool = mask_pool(cfg.m, dim)  # OS CSPRNG, once per client; kept only in this client's context
    context.state[_POOL_KEY] = ArrayRecord({"masks": Array(pool.masks.numpy().astype(np.int8))})
    return pool


def _client_setup(msg: Message, context: Context,
                  experiments: bool) -> tuple[FederatedConfig, Any, Any, dict[str, Any]]:
    from veil.federated.data import client_data

    raw = dict(msg.content["config"])
    extra = {k: raw.pop(k) for k in EXTRA_KEYS if k in raw}
    if extra and not experiments:  # a server must not be able to weaken a client's secrets
        raise InvalidParameterError(f"the server asked for experiment-only settings {sorted(extra)}; a deployed "
                                    "client refuses them (seeded mixing, server-chosen key paths and ground-truth "
                                    "files exist for simulations only)")
    cfg = FederatedConfig.from_run_config(raw)
    if "partition-id" not in context.node_config:
        raise InvalidParameterError("this SuperNode has no partition-id; start it with --node-config "
                                    f"'partition-id=I num-partitions={cfg.clients}'")
    partition = int(context.node_config["partition-id"])
    parts = int(context.node_config.get("num-partitions", cfg.clients))
    if parts != cfg.clients:
        raise InvalidParameterError(f"SuperNode says num-partitions={parts} but the run has {cfg.clients} clients")
    data = client_data(cfg, partition, parts)
    return cfg, data, _client_pool(cfg, context, data.dim, str(extra.get("x-key-dir", ""))), extra


def _client_error(context: Context, exc: BaseException) -> FederatedError:
    who = context.node_config.get("partition-id", f"node {context.node_id}")
    return FederatedError(f"client {who} failed: {type(exc).__name__}: {exc}", client=str(who))


def _make_clientapp(experiments: bool) -> ClientApp:
    """The client. ``experiments=False`` (deployment) refuses the server's experiment-only switches."""
    from veil.federated.dp import dp_mod

    app = ClientApp(mods=[dp_mod])  # DP per the run's config: nothing, clipping (client) or clip + noise (local)

    @app.train()
    def _train(msg: Message, context: Context) -> Message:
        from veil.federated.client import local_train
        from veil.federated.server import write_truth

        try:
            cfg, data, pool, extra = _client_setup(msg, context, experiments)
            server_round = int(msg.content["config"]["server-round"])
            seed = int(extra.get("x-mixing-seed", -1))
            truth_dir = str(extra.get("x-truth-dir", ""))
            res = local_train(from_record(msg.content["arrays"]), data, cfg, pool, server_round=server_round,
                              mixing_seed=None if seed < 0 else seed, record_truth=bool(truth_dir))
            if truth_dir and res.truth is not None:
                write_truth(truth_dir, server_round, str(data.partition), res.truth)
        except Exception as exc:  # named, so the server's error says which client failed and why
            raise _client_error(context, exc) from exc
        metrics = MetricRecord({"num-examples": res.num_examples, "train_loss": res.train_loss,
                                "partition-id": data.partition, **({"dp-weight": 1} if cfg.dp else {})})
        return Message(content=RecordDict({"arrays": to_record(res.arrays), "metrics": metrics}), reply_to=msg)

    @app.evaluate()
    def _evaluate(msg: Message, context: Context) -> Message:
        from veil.federated.client import local_evaluate

        try:
            cfg, data, pool, _ = _client_setup(msg, context, experiments)
            out = local_evaluate(from_record(msg.content["arrays"]), data, cfg, pool)
        except Exception as exc:
            raise _client_error(context, exc) from exc
        metrics = MetricRecord({"num-examples": int(out["num-examples"]), "correct": int(out["correct"]),
                                "accuracy": float(out["accuracy"]), "partition-id": data.partition,
                                **({"dp-weight": 1} if cfg.dp else {}),
                                **{k: int(v) for k, v in out.items() if k.startswith(("pred-", "label-"))}})
        return Message(content=RecordDict({"metrics": metrics}), reply_to=msg)

    return app


#: the deployed client (`flwr run deploy/flower`): refuses experiment-only switches from the server
clientapp = _make_clientapp(experiments=False)
#: the client `veil federated run` simulates: the same code, accepting the experiment switches its own driver sets
simulation_clientapp = _make_clientapp(experiments=True)


# ------------------------------------------------------------------ server
class StrictFedAvg(FedAvg):
    """FedAvg over all clients every round that raises :class:`FederatedError` instead of carrying on."""

    def __init__(self, cfg: FederatedConfig, *, recorder: Any = None, evaluate: bool = True,
                 progress: Any = None) -> None:
        from veil.federated.dp import WEIGHT_KEY

        n = cfg.clients
        # under DP the average is unweighted (its sensitivity must not depend on the clients' data sizes)
        super().__init__(fraction_train=1.0, fraction_evaluate=1.0 if evaluate else 0.0, min_train_nodes=n,
                         min_evaluate_nodes=n, min_available_nodes=n,
                         weighted_by_key=WEIGHT_KEY if cfg.dp else "num-examples")
        self.cfg, self.recorder, self.progress = cfg, recorder, progress
        self.recorded_upstream = False  # a DP wrapper recorded this round's replies before clipping them
        self.summaries: list[dict[str, Any]] = []
        self.history: list[dict[str, np.ndarray]] = []
        self._expected: dict[int, list[int]] = {}

    def _wait_for_clients(self, grid: Grid) -> list[int]:
        deadline = time.monotonic() + self.cfg.timeout
        while True:
            nodes = list(grid.get_node_ids())
            if len(nodes) >= self.cfg.clients:
                return nodes
            if time.monotonic() > deadline:
                raise FederatedError(f"only {len(nodes)} of {self.cfg.clients} clients connected within "
                                     f"{self.cfg.timeout:g} s; start the missing SuperNodes or lower --clients")
            time.sleep(0.5)

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid):
        self._wait_for_clients(grid)
        self._round_start = time.perf_counter()
        if self.recorder is not None:
            self.recorder.global_weights(server_round, from_record(arrays))
        messages = list(super().configure_train(server_round, arrays, config, grid))
        self._expected[server_round] = [m.metadata.dst_node_id for m in messages]
        return messages

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid):
        if self.fraction_evaluate > 0:
            self._wait_for_clients(grid)
        return super().configure_evaluate(server_round, arrays, config, grid)

    def _check(self, server_round: int, replies: list[Message], what: str) -> None:
        for msg in replies:
            if msg.has_error():
                reason = (msg.error.reason or "").strip().splitlines()
                line = next((ln for ln in reversed(reason) if "FederatedError" in ln or "client " in ln),
                            reason[-1] if reason else "no reason given")
                raise FederatedError(f"{what} round {server_round}: node {msg.metadata.src_node_id} replied with an "
                                     f"error: {line}", client=str(msg.metadata.src_node_id))
        expected = self._expected.get(server_round, [])
        got = {m.metadata.src_node_id for m in replies}
        missing = [n for n in expected if n not in got] if what == "training" else []
        if missing or len(replies) < self.cfg.clients:
            raise FederatedError(f"{what} round {server_round}: {len(replies)} of {self.cfg.clients} clients "
                                 f"replied within {self.cfg.timeout:g} s (missing nodes: {missing or 'unknown'})",
                                 client=str(missing[0]) if missing else None)

    def aggregate_train(self, server_round: int, replies: Any):
        replies = list(replies)
        self._check(server_round, replies, "training")
        replies.sort(key=lambda m: int(m.content["metrics"]["partition-id"]))  # a fixed order: reproducible sums
        if not self.recorded_upstream:
            self.record_replies(server_round, replies)
        arrays, metrics = super().aggregate_train(server_round, replies)
        self.history.append(from_record(arrays))
        self.summaries.append({"round": server_round, "seconds": time.perf_counter() - self._round_start,
                               "train_loss": float(metrics["train_loss"]),
                               "clients": sorted(str(int(m.content["metrics"]["partition-id"])) for m in replies)})
        if self.progress is not None and self.fraction_evaluate == 0:
            self.progress(dict(self.summaries[-1]))
        return arrays, metrics

    def record_replies(self, server_round: int, replies: list[Message]) -> None:
        """The eavesdropper's tap: every reply as the server receives it."""
        if self.recorder is None:
            return
        for msg in sorted(replies, key=lambda m: int(m.content["metrics"]["partition-id"])):
            metrics = dict(msg.content["metrics"])
            self.recorder.reply(server_round, str(int(metrics["partition-id"])), from_record(msg.content["arrays"]),
                                metrics)

    def aggregate_evaluate(self, server_round: int, replies: Any):
        replies = list(replies)
        self._check(server_round, replies, "evaluation")
        correct = sum(int(m.content["metrics"]["correct"]) for m in replies)
        n = sum(int(m.content["metrics"]["num-examples"]) for m in replies)
        row = next(s for s in self.summaries if s["round"] == server_round)
        row["test_accuracy"], row["test_examples"] = correct / max(1, n), n
        from veil.federated.server import class_counts

        row.update(class_counts([dict(m.content["metrics"]) for m in replies]))
        row["seconds"] = time.perf_counter() - self._round_start  # training + evaluation, as the reference loop
        if self.progress is not None:
            self.progress(dict(row))
        return super().aggregate_evaluate(server_round, replies)


class Stopped(FederatedError):
    """The run was stopped from outside (Ctrl-C in the process that runs the simulation)."""


class StoppableGrid:
    """A Grid whose every call first checks ``stop``: once it is set, the ServerApp's next poll for replies raises
    :class:`Stopped`, so the server thread ends within one poll interval instead of waiting out ``timeout``."""

    def __init__(self, grid: Grid, stop: Any) -> None:
        self._grid, self._stop = grid, stop

    def _check(self) -> None:
        if self._stop.is_set():
            raise Stopped("the federated run was interrupted")

    def send_and_receive(self, messages: Any, *, timeout: float | None = None) -> list[Message]:
        """Flower's ``send_and_receive`` (push, then pull until every reply came or ``timeout``), with ``stop``
        checked at every poll."""
        self._check()
        waiting = set(self._grid.push_messages(messages))
        end = time.time() + (timeout if timeout is not None else 0.0)
        replies: list[Message] = []
        while timeout is None or time.time() < end:
            self._check()
            got = list(self._grid.pull_messages(waiting))
            replies.extend(got)
            waiting.difference_update(m.metadata.reply_to_message_id for m in got)
            if not waiting:
                break
            time.sleep(float(getattr(self._grid, "pull_interval", 0.1)))
        return replies

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._grid, name)
        if not callable(attr):
            return attr

        def checked(*args: Any, **kwargs: Any) -> Any:
            self._check()
            return attr(*args, **kwargs)

        return checked


def serve(grid: Grid, cfg: FederatedConfig, *, recorder: Any = None, extra: dict[str, Any] | None = None,
          evaluate: bool = True, progress: Any = None) -> StrictFedAvg:
    """Run ``cfg`` on ``grid`` (all clients every round); returns the strategy with its summaries and history."""
    from veil.federated.client import initial_state
    from veil.federated.data import corpus_arrays
    from veil.federated.server import tap_description

    X_tr, _, _, _, num_classes, _ = corpus_arrays(cfg)
    dim = int(X_tr.shape[1])
    if recorder is not None:
        recorder.describe(tap_description(cfg, dim, num_classes))
    from veil.federated.dp import wrap_strategy

    strategy = StrictFedAvg(cfg, recorder=recorder, evaluate=evaluate, progress=progress)
    config = ConfigRecord({**cfg.to_run_config(), **(extra or {})})
    wrap_strategy(strategy, cfg).start(grid=grid, initial_arrays=to_record(initial_state(cfg, dim, num_classes)),
                                       num_rounds=cfg.rounds, timeout=cfg.timeout, train_config=config,
                                       evaluate_config=config)
    return strategy


def make_server_app(cfg: FederatedConfig, sink: dict[str, Any], *, recorder: Any = None,
                    extra: dict[str, Any] | None = None, evaluate: bool = True, stop: Any = None,
                    progress: Any = None) -> ServerApp:
    """A ServerApp for simulation: runs :func:`serve` and leaves the strategy (or the exception) in ``sink``.

    Flower's simulation runtime logs an exception raised in the ServerApp and returns normally, so the caller
    re-raises what ``sink["error"]`` holds. ``stop`` (a ``threading.Event``): once set, the server stops at its
    next poll (see :class:`StoppableGrid`). ``progress``: called with each round's summary as it ends.
    """
    app = ServerApp()

    @app.main()
    def _main(grid: Grid, context: Context) -> None:
        try:
            served = StoppableGrid(grid, stop) if stop is not None else grid
            sink["strategy"] = serve(served, cfg, recorder=recorder, extra=extra, evaluate=evaluate,
                                     progress=progress)
        except BaseException as exc:  # handed back to run_federated, which raises it
            sink["error"] = exc
            sink["traceback"] = traceback.format_exc()

    return app


# ------------------------------------------------------------------ deployment
serverapp = ServerApp()


@serverapp.main()
def _deployed_main(grid: Grid, context: Context) -> None:
    """``flwr run`` entry: the run config is the app's ``[tool.flwr.app.config]`` (plus ``--run-config``).

    ``record`` (a folder) turns the tap on; ``results`` (a folder) is where the result JSON is written.
    """
    from veil.federated.run import write_result
    from veil.federated.server import Recorder

    run = dict(context.run_config)
    record, results = str(run.pop("record", "") or ""), str(run.pop("results", "") or "")
    cfg = FederatedConfig.from_run_config(run)
    recorder = Recorder(record) if record else None
    start = time.perf_counter()
    try:
        strategy = serve(grid, cfg, recorder=recorder)
    except BaseException:
        if recorder is not None:
            recorder.abort()
        raise
    if recorder is not None:
        recorder.finish()
    path = write_result(cfg, strategy.summaries, time.perf_counter() - start, engine="flower-deployment",
                        results=results or "results/federated", record=record or None)
    print(f"veil: result written to {path}")
