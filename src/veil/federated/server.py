"""The server's side of a federated run, with no Flower in it: FedAvg aggregation as Flower computes it, the
per-round summary, and the eavesdropper tap (what the server, or anyone on the wire, records).

The tap directory is the attacker's whole input (format ``veil-federated-tap/1``,
read by :mod:`veil.attacks.gradients.tap`)::

    DIR/tap.json                          the run's public description (model shape, optimiser, lr, defense m/k/mode)
    DIR/round-0001/global.npz             the weights the server sent in round 1
    DIR/round-0001/client-<id>.npz        what client <id> (its partition id) replied
    DIR/round-0001/client-<id>.json       its reply's metrics (num-examples, train_loss)

Ground truth for scoring attacks is written only by experiments, by the
clients themselves, in the sibling ``DIR.truth/`` (never inside DIR, so the
tap can be handed to an attacker alone), with the run's configuration in
``DIR.truth/run.json``. Both are written under
``*.partial`` names and renamed when the run succeeds; a failed run removes
them, so no half-recorded run is ever left looking complete.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from veil._io import atomic_write, atomic_write_json
from veil.errors import FederatedError, InvalidParameterError
from veil.federated.config import FederatedConfig
from veil.federated.dp import accounting as dp_accounting

__all__ = ["aggregate", "RoundSummary", "Recorder", "check_record_target", "TAP_FORMAT", "tap_description", "write_arrays"]

TAP_FORMAT = "veil-federated-tap/1"


def aggregate(replies: list[tuple[dict[str, np.ndarray], float]]) -> dict[str, np.ndarray]:
    """The num-examples-weighted mean of the replies' weights, computed as Flower's FedAvg does (same order of
    operations: weights normalised first, then summed in reply order)."""
    if not replies:
        raise InvalidParameterError("nothing to aggregate: no client replied")
    total = sum(w for _, w in replies)
    factors = [w / total for _, w in replies]
    out: dict[str, np.ndarray] = {}
    for (arrays, _), f in zip(replies, factors, strict=True):
        for key, value in arrays.items():
            if key not in out:
                out[key] = np.asarray(value) * f
            else:
                out[key] += np.asarray(value) * f
    return out


def class_counts(evals: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum the clients' per-class prediction and label counts: ``predicted`` and ``labels`` (lists by class),
    ``majority_rate`` (the test split's most common class share: what a one-class head scores) and
    ``collapsed`` (every test prediction is the same class)."""
    keys = sorted({k for e in evals for k in e if str(k).startswith("pred-")}, key=lambda k: int(k[5:]))
    if not keys:
        return {}
    pred = [int(sum(e.get(k, 0) for e in evals)) for k in keys]
    labels = [int(sum(e.get("label-" + k[5:], 0) for e in evals)) for k in keys]
    n = max(1, sum(labels))
    return {"predicted": pred, "labels": labels, "majority_rate": max(labels) / n,
            "collapsed": sum(1 for p in pred if p > 0) <= 1}


@dataclass
class RoundSummary:
    """What the server learns each round (weighted by num-examples): train loss and the clients' test accuracy."""

    server_round: int
    train_loss: float
    test_accuracy: float | None = None
    test_examples: int = 0
    clients: list[str] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the round: local training of every client, aggregation, evaluation
    classes: dict[str, Any] = field(default_factory=dict)  # see class_counts

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.server_round, "seconds": self.seconds, "train_loss": self.train_loss,
                "test_accuracy": self.test_accuracy, "test_examples": self.test_examples, "clients": self.clients,
                **self.classes}


def tap_description(cfg: FederatedConfig, dim: int, num_classes: int) -> dict[str, Any]:
    """The public description of a run an eavesdropper is assumed to know (Kerckhoffs: everything but the keys)."""
    from veil.federated.client import rep_scale

    return {"format": TAP_FORMAT,
            "model": {"in_dim": dim, "out_dim": num_classes, "hidden": [dim] * cfg.hidden_layers,
                      "dropout": cfg.dropout},
            "rep_scale": rep_scale(dim), "task": "classification", "num_classes": num_classes,
            "client_mode": cfg.client_mode, "optimizer": "sgd" if cfg.client_mode == "alg2" else "adamw",
            "lr": cfg.learning_rate, "weight_decay": 0.0 if cfg.client_mode == "alg2" else cfg.weight_decay,
            "batch_size": cfg.batch_size, "local_epochs": cfg.local_epochs if cfg.client_mode == "fedavg" else 0,
            "rounds": cfg.rounds,
            "defense": ({"name": "texthide", "m": cfg.m, "k": cfg.k, "mode": cfg.mode} if cfg.defended
                        else {"name": "none", "m": 0, "k": 1, "mode": "intra"}),
            "clients": [str(i) for i in range(cfg.clients)], "corpus": cfg.corpus,
            **({"differential_privacy": dp_accounting(cfg)} if cfg.dp else {})}



def write_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with atomic_write(path, "wb", encoding=None) as fh:
        np.savez(fh, **{k: np.asarray(v) for k, v in arrays.items()})


def _round_dir(root: Path, server_round: int) -> Path:
    return root / f"round-{server_round:04d}"


class Recorder:
    """Writes the tap as the run goes (under ``DIR.partial``); :meth:`finish` publishes it, :meth:`abort` removes it.

    ``truth``: also reserve ``DIR.truth`` for the clients' ground truth (experiments only).

    Every folder the recorder creates carries veil's ownership marker (:func:`veil._io.mark_owned`), and only such
    folders are ever removed or replaced: an existing ``DIR`` (or ``DIR.truth``, ``DIR.partial``) that veil did
    not write is refused before any work, ``force`` or not, so a user's folder given to ``--record`` by mistake
    is never deleted.
    """

    def __init__(self, directory: str | Path, *, truth: bool = False, force: bool = False) -> None:
        from veil._io import mark_owned

        self.final = Path(directory)
        self.truth_final = self.final.with_name(self.final.name + ".truth")
        self.partial = self.final.with_name(self.final.name + ".partial")
        self.truth_partial = self.final.with_name(self.final.name + ".truth.partial") if truth else None
        check_record_target(self.final, truth=truth, force=force)
        for path in (self.partial, self.truth_partial):
            if path is not None and (path.exists() or path.is_symlink()):
                # a partial folder left by an earlier run that was killed: veil's own (marked) one is replaced
                remove_owned(path, option="a new run")
        mark_owned(self.partial, "federated tap (partial: renamed when the run succeeds)")
        if self.truth_partial is not None:
            mark_owned(self.truth_partial, "ground truth of a federated tap (partial)")
        self.force = force
        self.closed = False

    def _folder(self, path: Path) -> Path:
        if self.closed:
            raise FederatedError(f"the recording of {self.final} was stopped; nothing more is written")
        return path

    def describe(self, description: dict[str, Any]) -> None:
        atomic_write_json(self._folder(self.partial) / "tap.json", description)

    def describe_truth(self, run_config: dict[str, Any]) -> None:
        """``DIR.truth/run.json``: the run's full configuration (scoring maps truth rows to corpus rows with it)."""
        if self.truth_partial is not None:
            atomic_write_json(self._folder(self.truth_partial) / "run.json", run_config)

    def global_weights(self, server_round: int, arrays: dict[str, np.ndarray]) -> None:
        write_arrays(_round_dir(self._folder(self.partial), server_round) / "global.npz", arrays)

    def reply(self, server_round: int, client: str, arrays: dict[str, np.ndarray], metrics: dict[str, Any]) -> None:
        folder = _round_dir(self._folder(self.partial), server_round)
        write_arrays(folder / f"client-{client}.npz", arrays)
        atomic_write_json(folder / f"client-{client}.json", metrics)

    def finish(self) -> Path:
        self.closed = True
        for partial, final in ((self.partial, self.final), (self.truth_partial, self.truth_final)):
            if partial is None:
                continue
            if (final.exists() or final.is_symlink()) and self.force:
                remove_owned(final)  # checked before the run too; a folder that lost its marker since is refused
            partial.rename(final)
        return self.final

    def abort(self) -> None:
        """Remove the partial folders (veil created and marked them); later writes are refused."""
        self.closed = True
        for path in (self.partial, self.truth_partial):
            if path is not None and path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)


def remove_owned(path: Path, *, option: str = "--force") -> None:
    """Remove ``path`` if veil wrote it (see :func:`veil._io.remove_owned_dir`), else :class:`NotOwnedError`."""
    from veil._io import remove_owned_dir

    remove_owned_dir(path, option=option)


def check_record_target(final: Path, *, truth: bool = False, force: bool = False, option: str = "--record") -> None:
    """Before any work: ``final`` (and ``final.truth`` with ``truth``) is free, or veil's own with ``force``.

    A path under a file, an existing file, or a folder veil did not write is refused whatever ``force`` says
    (:class:`~veil.errors.NotOwnedError` / :class:`~veil.errors.InvalidParameterError`); the "exists" message
    offers ``--force`` only for a folder veil wrote.
    """
    from veil._io import OWNED_MARKER, is_owned
    from veil.errors import NotOwnedError

    final = Path(final)
    for parent in final.parents:
        if parent.exists() and not parent.is_dir():
            raise InvalidParameterError(f"{option} {final}: {parent} is a file, so no folder can be created under "
                                        f"it; choose another {option} folder")
    targets = [final, final.with_name(final.name + ".truth")] if truth else [final]
    for path in targets:
        if not (path.exists() or path.is_symlink()):
            continue
        if path.is_symlink() or not path.is_dir() or not is_owned(path):
            kind = "a link" if path.is_symlink() else ("a folder" if path.is_dir() else "a file")
            raise NotOwnedError(f"{path} exists and is {kind} veil did not write (no {OWNED_MARKER} marker), so "
                                f"veil will not replace it, --force or not; choose another {option} folder")
        if not force:
            raise InvalidParameterError(f"{path} exists (a tap veil recorded); choose another {option} folder, or "
                                        "pass --force to replace it")


def write_truth(truth_dir: str | Path, server_round: int, client: str, truth: dict[str, np.ndarray]) -> None:
    """A client's ground truth for one round (experiments only; called on the client)."""
    write_arrays(_round_dir(Path(truth_dir), server_round) / f"client-{client}.npz", truth)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())
