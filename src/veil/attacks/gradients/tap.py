"""The eavesdropper's tap on a federated run: its on-disk format, the reader attacks use, and one shared writer.

Format ``veil-federated-tap/1`` (written by :mod:`veil.federated` and by tests, read here)::

    DIR/tap.json                       the run's public description (see TapMeta)
    DIR/round-0001/global.npz          the weights the server sent that round (MLPHead state_dict keys)
    DIR/round-0001/client-<id>.npz     the weights client <id> replied
    DIR/round-0001/client-<id>.json    its reply's metrics: "num-examples", "train_loss"

Ground truth for scoring lives in the SIBLING folder ``DIR.truth/`` (never inside ``DIR``), written by
experiments only::

    DIR.truth/round-0001/client-<id>.npz   inputs (n, d) float32: the head inputs of that round's local training
                                           in step order; step (n,) int; sources (n, k) int (global train indices
                                           mixed into each row, -1 for a public row); soft_labels (n, C) float

The attack API takes a :class:`Tap` (or a :class:`ClientUpdate` read from one): neither has a field, method or
path that reaches the truth. The truth has its own module, :mod:`veil.attacks.gradients.truth`, whose
:func:`~veil.attacks.gradients.truth.read_truth` is the only code that opens ``DIR.truth`` (scoring only).
"""

from __future__ import annotations

import json
import math
import os
import re
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from veil._io import atomic_write, atomic_write_json
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, ResourceMissingError

__all__ = ["TAP_FORMAT", "ModelSpec", "TapMeta", "ClientUpdate", "Tap", "write_tap_meta", "write_tap_round",
           "linear_keys"]

TAP_FORMAT = "veil-federated-tap/1"
CLIENT_MODES = ("alg2", "fedavg")
OPTIMIZERS = ("sgd", "adamw")
_ROUND = re.compile(r"^round-(\d{4,})$")
_CLIENT = re.compile(r"^client-([A-Za-z0-9_.-]+)\.npz$")
_READ_ERRORS = (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile, zlib.error)


def linear_keys(hidden_layers: int) -> list[tuple[str, str]]:
    """(weight, bias) state_dict keys of an :class:`~veil.models.heads.MLPHead`'s Linear layers, first to last.

    The head is ``[Linear, ReLU, Dropout] * hidden_layers + [Linear]``, so Linear layers sit at ``net.0``,
    ``net.3``, ``net.6``, ...
    """
    return [(f"net.{3 * i}.weight", f"net.{3 * i}.bias") for i in range(hidden_layers + 1)]


def _frozen(a: Any, dtype: Any = None) -> np.ndarray:
    out = np.array(a, dtype=dtype, copy=True)
    out.flags.writeable = False
    return out


def _need(d: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise DataFormatError(f"{where} has no {key!r}; it is not a {TAP_FORMAT} tap (re-record the run with "
                              "`veil federated run --record DIR`)")
    return d[key]


@dataclass(frozen=True)
class ModelSpec:
    """The head's public architecture: ``MLPHead(in_dim, out_dim, hidden=hidden, dropout=dropout)``."""

    in_dim: int
    out_dim: int
    hidden: tuple[int, ...] = ()
    dropout: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        if self.in_dim < 1 or self.out_dim < 1 or any(h < 1 for h in self.hidden):
            raise DataFormatError(f"model sizes must be >= 1, got in_dim={self.in_dim}, hidden={list(self.hidden)}, "
                                  f"out_dim={self.out_dim}")
        if not 0.0 <= self.dropout < 1.0:
            raise DataFormatError(f"model dropout must be in [0, 1), got {self.dropout}")

    @property
    def keys(self) -> list[tuple[str, str]]:
        return linear_keys(len(self.hidden))

    def shapes(self) -> dict[str, tuple[int, ...]]:
        sizes = [self.in_dim, *self.hidden, self.out_dim]
        out: dict[str, tuple[int, ...]] = {}
        for (w, b), fan_in, fan_out in zip(self.keys, sizes[:-1], sizes[1:]):
            out[w], out[b] = (fan_out, fan_in), (fan_out,)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"in_dim": self.in_dim, "out_dim": self.out_dim, "hidden": list(self.hidden), "dropout": self.dropout}


@dataclass(frozen=True)
class TapMeta:
    """``tap.json``: what the eavesdropper knows of the run (everything but the clients' keys and data)."""

    model: ModelSpec
    rep_scale: float
    num_classes: int
    client_mode: str
    optimizer: str
    lr: float
    weight_decay: float
    batch_size: int
    local_epochs: int
    rounds: int
    defense: Mapping[str, Any]
    clients: tuple[str, ...]
    task: str = "classification"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "defense", MappingProxyType(dict(self.defense)))
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))
        object.__setattr__(self, "clients", tuple(str(c) for c in self.clients))
        if self.task != "classification":
            raise DataFormatError(f"the gradient attacks read classification taps only, got task {self.task!r}")
        if self.client_mode not in CLIENT_MODES:
            raise DataFormatError(f"client_mode must be one of {CLIENT_MODES}, got {self.client_mode!r}")
        if self.optimizer not in OPTIMIZERS:
            raise DataFormatError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise DataFormatError(f"lr must be a finite number > 0, got {self.lr}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise DataFormatError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if not (math.isfinite(self.rep_scale) and self.rep_scale > 0):
            raise DataFormatError(f"rep_scale must be a finite number > 0, got {self.rep_scale}")
        if self.num_classes != self.model.out_dim:
            raise DataFormatError(f"num_classes={self.num_classes} but the model has out_dim={self.model.out_dim}")
        if self.batch_size < 1 or self.rounds < 0 or self.local_epochs < 0:
            raise DataFormatError("batch_size must be >= 1, rounds and local_epochs >= 0")
        for c in self.clients:
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", c):
                raise DataFormatError(f"client id {c!r} may hold letters, digits, '_', '.' and '-' only")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "tap.json") -> TapMeta:
        if not isinstance(d, Mapping):
            raise DataFormatError(f"{where} must hold a JSON object")
        fmt = d.get("format")
        if fmt != TAP_FORMAT:
            raise DataFormatError(f"{where} has format {fmt!r}; this veil reads {TAP_FORMAT!r} taps")
        known = {"format", "model", "rep_scale", "task", "num_classes", "client_mode", "optimizer", "lr",
                 "weight_decay", "batch_size", "local_epochs", "rounds", "defense", "clients"}
        try:
            m = _need(d, "model", where)
            model = ModelSpec(int(_need(m, "in_dim", where)), int(_need(m, "out_dim", where)),
                              tuple(int(h) for h in m.get("hidden", ())), float(m.get("dropout", 0.0)))
            return cls(model=model, rep_scale=float(_need(d, "rep_scale", where)),
                       num_classes=int(_need(d, "num_classes", where)),
                       client_mode=str(_need(d, "client_mode", where)), optimizer=str(_need(d, "optimizer", where)),
                       lr=float(_need(d, "lr", where)), weight_decay=float(d.get("weight_decay", 0.0)),
                       batch_size=int(_need(d, "batch_size", where)), local_epochs=int(d.get("local_epochs", 0)),
                       rounds=int(d.get("rounds", 0)), defense=dict(d.get("defense") or {"name": "none"}),
                       clients=tuple(d.get("clients", ())), task=str(d.get("task", "classification")),
                       extra={k: v for k, v in d.items() if k not in known})
        except (TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, DataFormatError):
                raise
            raise DataFormatError(f"{where} has a malformed field ({type(exc).__name__}: {exc})") from None

    def to_dict(self) -> dict[str, Any]:
        return {"format": TAP_FORMAT, "model": self.model.to_dict(), "rep_scale": self.rep_scale, "task": self.task,
                "num_classes": self.num_classes, "client_mode": self.client_mode, "optimizer": self.optimizer,
                "lr": self.lr, "weight_decay": self.weight_decay, "batch_size": self.batch_size,
                "local_epochs": self.local_epochs, "rounds": self.rounds, "defense": dict(self.defense),
                "clients": list(self.clients), **dict(self.extra)}

    @property
    def defense_name(self) -> str:
        return str(self.defense.get("name", "none"))


def _read_npz(path: Path, shapes: Mapping[str, tuple[int, ...]] | None = None) -> dict[str, np.ndarray]:
    fix = "; the tap is damaged: re-record the run"
    try:
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as npz:
            arrays = {k: np.asarray(npz[k]) for k in npz.files}
    except FileNotFoundError:
        raise ResourceMissingError(f"tap file {path}", "veil federated run --record DIR",
                                   message=f"{path} does not exist; point --record at a complete tap folder") from None
    except _READ_ERRORS as exc:
        raise DataFormatError(f"{path} cannot be read as .npz ({type(exc).__name__}){fix}") from None
    if shapes is not None:
        if set(arrays) != set(shapes):
            raise DataFormatError(f"{path} holds {sorted(arrays)}, but the model in tap.json has {sorted(shapes)}"
                                  f"{fix}")
        for key, shape in shapes.items():
            a = arrays[key]
            if a.shape != shape or a.dtype.kind != "f" or not np.isfinite(a).all():
                raise DataFormatError(f"{path}: {key} must be finite floats of shape {shape}, got {a.dtype} "
                                      f"{a.shape}{fix}")
            arrays[key] = _frozen(a)
    return arrays


@dataclass(frozen=True, repr=False)
class ClientUpdate:
    """One client's reply in one round, with the global weights it started from (what the server sees).

    ``global_state`` / ``client_state``: read-only arrays keyed by MLPHead state_dict keys.
    """

    round: int
    client: str
    global_state: Mapping[str, np.ndarray]
    client_state: Mapping[str, np.ndarray]
    num_examples: int
    train_loss: float | None = None

    def __post_init__(self) -> None:
        for name in ("global_state", "client_state"):
            state = getattr(self, name)
            if not isinstance(state, Mapping):
                raise InvalidTypeError(f"{name} must be a mapping of arrays, not {type(state).__name__}")
            object.__setattr__(self, name, MappingProxyType({k: _frozen(v) for k, v in state.items()}))
        if set(self.global_state) != set(self.client_state):
            raise DataFormatError(f"round {self.round} client {self.client}: the reply's keys differ from the "
                                  "global weights'")

    def __repr__(self) -> str:
        return f"ClientUpdate(round={self.round}, client={self.client!r}, num_examples={self.num_examples})"

    def delta(self) -> dict[str, np.ndarray]:
        """``w_global - w_client`` in float64, per key."""
        return {k: self.global_state[k].astype(np.float64) - self.client_state[k].astype(np.float64)
                for k in self.global_state}

    def pseudo_gradient(self, meta: TapMeta) -> dict[str, np.ndarray]:
        """The gradient the update implies: ``(w_global - w_client) / lr`` (minus ``weight_decay * w_global``).

        Exact for one SGD step (Alg. 2, ``client_mode="alg2"``): torch's SGD adds ``weight_decay * w`` to the
        gradient. For several steps it is the sum of the steps' gradients (SGD) and only a proxy for AdamW,
        whose per-coordinate normalisation breaks the gradient's structure.
        """
        if not isinstance(meta, TapMeta):
            raise InvalidTypeError(f"meta must be the tap's TapMeta, not {type(meta).__name__}")
        out = {}
        for key, d in self.delta().items():
            g = d / meta.lr
            if meta.weight_decay:
                g = g - meta.weight_decay * self.global_state[key].astype(np.float64)
            out[key] = g
        return out

    def rows(self, meta: TapMeta) -> int:
        """How many head inputs the local training used (public: batch size, num-examples, local epochs)."""
        if meta.client_mode == "alg2":
            return int(min(meta.batch_size, self.num_examples))
        return int(max(1, meta.local_epochs) * self.num_examples)


class Tap:
    """A recorded federated run, read-only: ``tap.meta``, ``tap.rounds``, ``tap.clients(r)``, ``tap.update(r, c)``.

    Holds the public description and the weights only; nothing here reads ``DIR.truth``.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        path = Path(path)
        if path.name.endswith(".truth"):
            raise InvalidParameterError(f"{path} is a ground-truth folder, not a tap; pass the tap folder itself "
                                        f"({path.with_name(path.name[:-6])})")
        if not path.is_dir():
            raise ResourceMissingError(f"tap folder {path}", "veil federated run --record DIR",
                                       message=f"tap folder {path} does not exist; record a run with `veil federated "
                                               "run --record DIR` and pass that DIR")
        meta_path = path / "tap.json"
        try:
            raw = json.loads(meta_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataFormatError(f"{path} has no tap.json; it is not a {TAP_FORMAT} tap folder") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataFormatError(f"{meta_path} is not valid JSON ({type(exc).__name__}: {exc})") from None
        self._path = path
        self._meta = TapMeta.from_dict(raw, str(meta_path))
        rounds = []
        for child in path.iterdir():
            match = _ROUND.match(child.name)
            if match and child.is_dir():
                rounds.append(int(match.group(1)))
        self._rounds = tuple(sorted(rounds))

    @property
    def path(self) -> Path:
        return self._path

    @property
    def meta(self) -> TapMeta:
        return self._meta

    @property
    def rounds(self) -> tuple[int, ...]:
        return self._rounds

    def __repr__(self) -> str:
        return f"Tap({str(self._path)!r}, rounds={len(self._rounds)}, clients={len(self._meta.clients)})"

    def _round_dir(self, r: int) -> Path:
        if r not in self._rounds:
            raise InvalidParameterError(f"round {r} is not in the tap {self._path} (rounds: "
                                        f"{', '.join(map(str, self._rounds)) or 'none'})")
        return self._path / f"round-{r:04d}"

    def clients(self, r: int) -> tuple[str, ...]:
        """Clients that replied in round ``r`` (sorted: numerically when every id is a number)."""
        ids = [m.group(1) for p in self._round_dir(r).iterdir() if (m := _CLIENT.match(p.name))]
        return tuple(sorted(ids, key=lambda c: (0, int(c), c) if c.isdigit() else (1, 0, c)))

    def global_state(self, r: int) -> dict[str, np.ndarray]:
        return _read_npz(self._round_dir(r) / "global.npz", self._meta.model.shapes())

    def update(self, r: int, client: str) -> ClientUpdate:
        """Client ``client``'s reply in round ``r`` with the global weights it started from."""
        folder = self._round_dir(r)
        client = str(client)
        if not (folder / f"client-{client}.npz").exists():
            raise InvalidParameterError(f"client {client!r} did not reply in round {r}; clients there: "
                                        f"{', '.join(self.clients(r)) or 'none'}")
        shapes = self._meta.model.shapes()
        reply = _read_npz(folder / f"client-{client}.npz", shapes)
        info_path = folder / f"client-{client}.json"
        try:
            info = json.loads(info_path.read_text(encoding="utf-8"))
            num = int(info["num-examples"])
            loss = info.get("train_loss")
        except FileNotFoundError:
            raise DataFormatError(f"{info_path} is missing; the tap is incomplete, re-record the run") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataFormatError(f"{info_path} is not a client metrics file with 'num-examples' "
                                  f"({type(exc).__name__})") from None
        if num < 1:
            raise DataFormatError(f"{info_path}: num-examples must be >= 1, got {num}")
        return ClientUpdate(round=r, client=client, global_state=self.global_state(r), client_state=reply,
                            num_examples=num, train_loss=None if loss is None else float(loss))

    def updates(self) -> Iterator[tuple[int, str]]:
        """Every (round, client) pair in the tap, in order."""
        for r in self._rounds:
            for c in self.clients(r):
                yield r, c


# ---------------------------------------------------------------- writing (federated code, tests)
def _write_npz(path: Path, arrays: Mapping[str, Any], perms: int | None = None) -> None:
    with atomic_write(path, "wb", encoding=None, perms=perms) as fh:
        np.savez(fh, **{str(k): np.asarray(v) for k, v in arrays.items()})


def write_tap_meta(directory: str | os.PathLike, meta: TapMeta | Mapping[str, Any]) -> Path:
    """Write ``DIR/tap.json`` (validated first: a bad description writes nothing)."""
    if not isinstance(meta, TapMeta):
        meta = TapMeta.from_dict({"format": TAP_FORMAT, **dict(meta)}, "the tap description")
    path = Path(directory) / "tap.json"
    atomic_write_json(path, meta.to_dict())
    return path


def write_tap_round(directory: str | os.PathLike, r: int, *, global_state: Mapping[str, Any] | None = None,
                    replies: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]] | None = None) -> Path:
    """Write round ``r``'s global weights and/or client replies (``{id: (state, metrics)}``) atomically.

    ``metrics`` must hold ``"num-examples"`` (and usually ``"train_loss"``). Either part may be written on
    its own (the server writes the global weights before the replies arrive).
    """
    r = int(r)
    if r < 1:
        raise InvalidParameterError(f"rounds are numbered from 1, got {r}")
    folder = Path(directory) / f"round-{r:04d}"
    if global_state is not None:
        _write_npz(folder / "global.npz", global_state)
    for client, (state, metrics) in (replies or {}).items():
        client = str(client)
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", client):
            raise InvalidParameterError(f"client id {client!r} may hold letters, digits, '_', '.' and '-' only")
        if "num-examples" not in metrics:
            raise InvalidParameterError(f"client {client}'s metrics need 'num-examples'")
        _write_npz(folder / f"client-{client}.npz", state)
        atomic_write_json(folder / f"client-{client}.json", {k: _plain(v) for k, v in metrics.items()})
    return folder


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v
