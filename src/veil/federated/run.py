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
from veil.federated.dp import accounting as dp_accounting
from veil.results import Metric, ResultRecord

__all__ = ["run_federated", "write_result", "result_path", "simulation_backend", "frozen_backend"]

SECRET_RANDOMNESS = ("each client's mask pool: OS CSPRNG on the client (or its owner-only key file), never sent; "
                     "TextHide mixing: OS CSPRNG; the seed sets the partition, head init, batch order and dropout")


def simulation_backend(num_cpus: int | None = None) -> dict[str, Any]:
    """One CPU per virtual client, Ray limited to this machine's cores (Flower's default, 2 CPUs per client,
    would run one client at a time on 2 cores)."""
    cpus = num_cpus or os.cpu_count() or 1
    return {"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
            "init_args": {"num_cpus": cpus, "num_gpus": 0, "include_dashboard": False, "log_to_driver": False}}


ENGINES = ("flower", "reference")


def result_path(cfg: FederatedConfig, results: str | Path = "results/federated") -> Path:
    """``results/<run name>.json``: the name carries every setting that tells runs apart (see
    :attr:`FederatedConfig.run_name`)."""
    return Path(results) / f"{cfg.run_name}.json"


def requested_config(cfg: FederatedConfig) -> dict[str, Any]:
    """What a stored record's config must equal for the record to be this run's result (``timeout`` aside), with
    the backend of a frozen run's encodings when it is not torch (:func:`frozen_backend`)."""
    return {**cfg.result_config(), **frozen_backend(cfg)}


def frozen_backend(cfg: Any) -> dict[str, str]:
    """The backend of the frozen MiniLM encodings a run trains on, as records hold it: ``{"encoder_backend":
    name}`` for a backend other than torch, ``{}`` for torch (as every record made before backends existed) and for
    fine-tuned runs (they encode in torch on every client). Frozen runs encode with the default backend
    (``VEIL_ENCODER_BACKEND``, see :mod:`veil.encoders.backends`) in :mod:`veil.federated.data`."""
    if cfg.finetune:
        return {}
    from veil.encoders.backends import backend_identity

    return backend_identity(None)


def stored_result(path: str | Path, cfg: FederatedConfig, *, force: bool = False) -> ResultRecord | None:
    """The record at ``path`` if it is ``cfg``'s result; None if absent or ``force``; a damaged record is a
    :class:`~veil.errors.DataFormatError` and one made under another configuration a
    :class:`~veil.errors.StaleResultError` (both name the path and the fix)."""
    from veil.results import ResultRecord, check_same_config

    path = Path(path)
    if force or not path.exists():
        return None
    from veil.encoders.backends import stored_backend_identity

    rec = ResultRecord.read(path)
    wanted = requested_config(cfg)
    defaults = FederatedConfig().to_dict()  # a setting added after a record was made took its default then
    stored = {k: rec.config.get(k, defaults[k]) for k in cfg.result_config()}
    stored.update(stored_backend_identity(rec.config))
    check_same_config(stored, wanted, path)
    return rec


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
    config = {**cfg.to_dict(), **frozen_backend(cfg), "learning_rate": cfg.learning_rate, "engine": engine,
              "encoder": ("minilm (all-MiniLM-L6-v2), fine-tuned by every client (AdamW, encoder_lr) and averaged"
                          if cfg.finetune else "minilm (all-MiniLM-L6-v2), frozen")
                         + ", mean pooling, L2-normalised" + _frozen_backend_note(cfg),
              "differential_privacy": dp_accounting(cfg),
              "evaluation": "after every round, each client scores its IID share of the test split through its own "
                            "pool (k = 1); accuracy = correct / examples over all clients; nothing is selected on it",
              "secret_randomness": SECRET_RANDOMNESS, "tap": record}
    if cfg.dp:
        acc = config["differential_privacy"]
        metrics.update(epsilon=Metric(mean=acc["epsilon"]), epsilon_rdp=Metric(mean=acc["epsilon_rdp"]),
                       delta=Metric(mean=acc["delta"]))
    else:
        del config["differential_privacy"]  # the records made before DP existed hold no such key
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
                  key_dir: str | Path | None = None, backend: dict[str, Any] | None = None,
                  progress: Any = None) -> tuple[ResultRecord, list[dict[str, Any]]]:
    """Run ``cfg``; returns (result record, global weights after every round). Nothing is written here except
    the tap (``record``, published only on success).

    ``engine``: ``"flower"`` (Flower simulation on Ray) or ``"reference"`` (the in-process loop).
    ``truth``: also let clients write ground truth next to the tap (experiments only: it holds what the key
    protects). ``mixing_seed``: seeded TextHide mixing, derived per client and round (engine comparisons
    only; it warns). ``key_dir``: client p loads its pool from ``key_dir/client-<p>.key`` (written by
    ``MaskPool.save``) instead of drawing one (simulation; a deployment names each key in its node config).
    ``progress``: called with each round's summary row as the round ends (Flower engine).

    Ctrl-C (KeyboardInterrupt) stops the Flower simulation within seconds (the server stops asking clients,
    Ray is shut down) and removes the partial tap before it propagates.
    """
    from veil.federated.server import Recorder

    if engine not in ENGINES:
        raise InvalidParameterError(f"unknown engine {engine!r}; use one of {', '.join(ENGINES)}")
    if record and cfg.finetune:
        raise InvalidParameterError("recording a fine-tuned run is not supported: every reply holds the whole "
                                    "encoder (91 MB) and the gradient attacks read frozen-encoder taps; record a "
                                    "frozen-encoder run (without --finetune)")
    if cfg.dp and engine != "flower":
        raise InvalidParameterError(f"--dp runs on Flower's DP wrappers and mods: use --engine flower (the reference "
                                    f"loop has no DP), got engine={engine!r}")
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
        rows, history = _run_flower(cfg, recorder, mixing_seed, key_dir, backend, progress)
    rec = _record(cfg, rows, time.perf_counter() - start, "flower-simulation" if engine == "flower" else engine,
                  str(record) if record else None)
    return rec, history


def _run_flower(cfg: FederatedConfig, recorder: Any, mixing_seed: int | None, key_dir: str | Path | None,
                backend: dict[str, Any] | None, progress: Any = None) -> tuple[list[dict[str, Any]], list[Any]]:
    """Run Flower's simulation in a daemon thread, so that the main thread stays free to act on Ctrl-C.

    Flower runs its ServerApp in a thread of its own and its client workers in a thread pool that waits for
    Ray; a KeyboardInterrupt in the thread that called ``run_simulation`` would wait for both (the server
    waits up to ``timeout`` for replies that never come). Here the main thread only waits; on Ctrl-C it sets
    ``stop`` (the server's grid then raises at its next poll, which ends the ServerApp and with it the
    simulation), shuts Ray down (its workers and their processes), removes the partial tap and re-raises. While an
    interrupted run winds down, what Flower and Ray print about the actors it stopped (an ``ActorDiedError``
    traceback, shutdown warnings) is dropped (:class:`~veil.federated._quiet.Quiet`): the user asked for the stop.
    """
    import logging
    import threading

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
    stop = threading.Event()
    failure: list[BaseException] = []

    def report(row: dict[str, Any]) -> None:
        if progress is not None and not stop.is_set():
            progress(row)

    finished = threading.Event()
    on_end: list[Any] = []  # called once the simulation's thread ends (after an interrupt: the end of Quiet)

    def simulate() -> None:
        try:
            run_simulation(server_app=make_server_app(cfg, sink, recorder=recorder, extra=extra, stop=stop,
                                                      progress=report),
                           client_app=simulation_clientapp,
                           num_supernodes=cfg.clients, backend_config=backend or simulation_backend())
        except BaseException as exc:  # handed to the waiting thread
            failure.append(exc)
        finally:
            finished.set()
            for end in list(on_end):
                end()

    flwr_logger = logging.getLogger("flwr")
    level = flwr_logger.level
    flwr_logger.setLevel(logging.WARNING)  # one INFO line per message otherwise; errors still show
    runner = threading.Thread(target=simulate, name="veil-flower-simulation", daemon=True)
    try:
        runner.start()
        # an Event, not Thread.join: a join interrupted by Ctrl-C marks a running thread as stopped (bpo-45274)
        while not finished.wait(0.2):
            pass
        if failure:
            raise failure[0]
        if "error" in sink:
            raise sink["error"]
        if "strategy" not in sink:
            raise FederatedError("the Flower simulation ended without running the server; see the log above")
    except BaseException as exc:
        stop.set()
        quiet = None
        if isinstance(exc, KeyboardInterrupt):
            from veil.federated._quiet import Quiet

            quiet = Quiet().start()
        try:
            if recorder is not None:
                recorder.closed = True  # nothing more is written, even by a round still finishing
            if runner.is_alive() and not finished.is_set():
                _stop_simulation(finished)
            if recorder is not None:
                recorder.abort()
        finally:
            if quiet is not None:
                quiet.end_streams()  # the caller's "interrupted" line goes out
                on_end.append(quiet.end)  # Flower's and Ray's records stay dropped while the simulation lives
                if finished.is_set():
                    quiet.end()
        raise
    finally:
        flwr_logger.setLevel(level)
    if recorder is not None:
        recorder.finish()
    strategy = sink["strategy"]
    return strategy.summaries, strategy.history


def _stop_simulation(finished: Any, grace: float = 1.0, settle: float = 3.0) -> None:
    """After ``stop`` is set: give the simulation ``grace`` seconds to end by itself (the server raises at its next
    poll, Flower then stops its workers and shuts Ray down), else shut Ray down here and wait as long again.

    Ray's worker processes (the client actors) only notice a shut-down Ray after a while, so the processes this
    run started that still live are then ended by their ids: SIGTERM, and SIGKILL a second later. While stopping,
    this process is a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``): a worker whose raylet has just died (or
    that the raylet started during the shutdown) is re-parented here rather than to init, so it is still a
    descendant, and descendants are ended again until none is left or ``settle`` seconds have passed. The
    simulation itself runs in a daemon thread, so it cannot keep the process alive either.
    """
    started = _descendants(os.getpid())
    own = _children(os.getpid())  # whoever started these waits for them
    reaper = _child_subreaper(True)
    try:
        if not finished.wait(grace):
            try:
                import ray

                if ray.is_initialized():
                    ray.shutdown()
            except Exception:  # noqa: BLE001 (best effort while stopping; the interrupt is what propagates)
                pass
            finished.wait(grace)
        # workers Ray started during the grace period are descendants too: end those of both snapshots
        _end_processes(sorted(set(started) | set(_descendants(os.getpid()))))
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline:
            if reaper:
                _reap(own)
            left = _descendants(os.getpid())
            if not left:
                break
            _end_processes(left)
    finally:
        if reaper:
            _child_subreaper(False)
            _reap(own)


def _child_subreaper(on: bool) -> bool:
    """Make this process a child subreaper (or stop being one); False where the OS has no such thing."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, int(on), 0, 0, 0) == 0  # 36: PR_SET_CHILD_SUBREAPER (linux/prctl.h)
    except (OSError, AttributeError):
        return False


def _stat(entry: Path) -> tuple[str, int, str] | None:
    """(state, parent pid, start time) of the process whose /proc folder is ``entry``; None once it is gone."""
    try:
        fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1]), fields[19]


def _processes() -> dict[int, tuple[str, int, str]]:
    """Every process: pid -> (state, parent pid, start time), from /proc (empty where there is none)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return {}
    out = {}
    for entry in proc.iterdir():
        if entry.name.isdigit() and (stat := _stat(entry)) is not None:
            out[int(entry.name)] = stat
    return out


def _children(pid: int) -> set[int]:
    """The live and ended (zombie) children of ``pid``."""
    return {child for child, (_, parent, _) in _processes().items() if parent == pid}


def _reap(own: set[int]) -> None:
    """Collect the exit status of the ended processes that were re-parented here while stopping (not ``own``, the
    children this process started itself: whoever started those waits for them), so that none stays a zombie."""
    me = os.getpid()
    for pid, (state, parent, _) in _processes().items():
        if state == "Z" and parent == me and pid not in own:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def _descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, start time) of every live (not zombie) descendant of ``pid``, from /proc (empty where there is none)."""
    parents: dict[int, list[tuple[int, str]]] = {}
    for child, (state, parent, start) in _processes().items():
        if state != "Z":  # a zombie has ended (and has no children left)
            parents.setdefault(parent, []).append((child, start))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child[0])
    return out


def _end_processes(started: list[tuple[int, str]], wait: float = 1.0) -> None:
    """SIGTERM, then SIGKILL after ``wait`` seconds, each process of ``started`` that still runs (a pid is only
    signalled while its start time is the one recorded, so a reused pid is never hit)."""
    import signal

    def alive(pid: int, start: str) -> bool:
        stat = _stat(Path(f"/proc/{pid}"))
        return stat is not None and stat[2] == start and stat[0] != "Z"

    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = [(pid, start) for pid, start in started if alive(pid, start)]
        for pid, _ in left:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        if not left:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(alive(p, s) for p, s in left):
            time.sleep(0.05)


def _frozen_backend_note(cfg: Any) -> str:
    """The encoder backend of the frozen encodings (``", onnx backend"``; empty for torch, as records always held
    and for fine-tuned runs: see :func:`frozen_backend`)."""
    from veil.encoders.backends import BACKEND_KEY

    backend = frozen_backend(cfg).get(BACKEND_KEY)
    return "" if backend is None else f", {backend} backend"
