"""Ground truth of a recorded federated run, for SCORING attacks only: ``DIR.truth/`` next to a tap ``DIR``.

``DIR.truth/round-0001/client-<id>.npz`` holds ``inputs`` (n, d) float32 (the head inputs of that round's
local training, in step order), ``step`` (n,) int, ``sources`` (n, k) int (global train indices mixed into each
row, -1 for a public row) and ``soft_labels`` (n, C). Experiments write it (:func:`write_tap_truth`, owner-only
files); scoring code reads it (:func:`read_truth`). Attacks take a :class:`~veil.attacks.gradients.tap.Tap` and
refuse a :class:`TapTruth`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from veil.attacks.gradients.tap import Tap, _frozen, _read_npz, _write_npz
from veil.errors import DataFormatError, ResourceMissingError

__all__ = ["TapTruth", "truth_dir", "read_truth", "write_tap_truth"]


@dataclass(frozen=True, repr=False)
class TapTruth:
    """The head inputs behind one client's update in one round. SCORING ONLY: never pass it to an attack."""

    inputs: np.ndarray
    step: np.ndarray
    sources: np.ndarray
    soft_labels: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", _frozen(self.inputs, np.float64))
        object.__setattr__(self, "step", _frozen(self.step, np.int64))
        object.__setattr__(self, "sources", _frozen(np.asarray(self.sources).reshape(len(self.step), -1), np.int64))
        object.__setattr__(self, "soft_labels", _frozen(self.soft_labels, np.float64))
        n = len(self.step)
        if self.inputs.ndim != 2 or self.inputs.shape[0] != n or self.soft_labels.shape[0] != n:
            raise DataFormatError("inconsistent truth: inputs (n, d), step (n,), sources (n, k), soft_labels (n, C)")

    def __len__(self) -> int:
        return int(len(self.step))

    def __repr__(self) -> str:
        return f"TapTruth(rows={len(self)}, dim={self.inputs.shape[1]})"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("TapTruth holds private inputs and cannot be pickled; keep it in the scoring process")


def truth_dir(tap_dir: str | os.PathLike) -> Path:
    """``DIR.truth``: the sibling folder holding a tap's ground truth."""
    p = Path(tap_dir)
    return p.with_name(p.name + ".truth")


def read_truth(tap_dir: str | os.PathLike, r: int, client: str) -> TapTruth:
    """The ground truth of client ``client`` in round ``r`` (from ``DIR.truth``; scoring code only)."""
    if isinstance(tap_dir, Tap):
        tap_dir = tap_dir.path
    path = truth_dir(tap_dir) / f"round-{int(r):04d}" / f"client-{client}.npz"
    if not path.exists():
        raise ResourceMissingError(f"ground truth {path}", "veil federated run --record DIR --truth",
                                   message=f"{path} does not exist: scoring needs the run's ground truth; record "
                                           "the run with --truth (experiments only)")
    a = _read_npz(path)
    missing = [k for k in ("inputs", "step", "sources", "soft_labels") if k not in a]
    if missing:
        raise DataFormatError(f"{path} lacks {', '.join(missing)}; it is not a veil tap truth file")
    return TapTruth(inputs=a["inputs"], step=a["step"], sources=a["sources"], soft_labels=a["soft_labels"])


def write_tap_truth(directory: str | os.PathLike, r: int, client: str, *, inputs: Any, step: Any, sources: Any,
                    soft_labels: Any) -> Path:
    """Write one client's ground truth for round ``r`` into ``DIR.truth`` (owner-only file; experiments only)."""
    truth = TapTruth(inputs=np.asarray(inputs), step=np.asarray(step), sources=np.asarray(sources),
                     soft_labels=np.asarray(soft_labels))  # validates shapes
    path = truth_dir(directory) / f"round-{int(r):04d}" / f"client-{client}.npz"
    _write_npz(path, {"inputs": np.asarray(inputs, dtype=np.float32), "step": truth.step, "sources": truth.sources,
                      "soft_labels": np.asarray(soft_labels, dtype=np.float32)}, perms=0o600)
    return path
