"""Label leakage from the last layer's gradient (iDLG, Zhao et al. 2020, extended to TextHide's mixed labels).

veil trains with soft-label cross-entropy averaged over the batch, so the last layer's gradients are

    grad b_L = (1/B) sum_i (p_i - y~_i)            grad W_L = (1/B) sum_i (p_i - y~_i) h_i^T

with p_i = softmax(logits_i) and h_i the last hidden activations (the input itself for a head without hidden
layers). Hence:

* ``mean_label`` = mean_i y~_i = mean_i p_i - grad b_L: exact when the attacker can compute every p_i, i.e.
  when it knows the batch's head inputs (from :mod:`.analytic`) and the client used no dropout. Without
  inputs, p_i is replaced by the model's prediction on nothing in particular, 1/C (an approximation that is
  good at initialisation, where heads predict near-uniformly, and poor later).
* ``negative_classes``: classes with grad b_L < 0, which must carry label weight (p_c < y~_c needs y~_c > 0):
  Zhao et al.'s rule, needing nothing but the gradient (it may miss classes).
* ``per_row`` (when the attacker holds every input of a one-step update): the B vectors r_i = p_i - y~_i
  solve grad W_L = (1/B) R^T H, exactly when the h_i are linearly independent (B <= width of the last hidden
  layer) and there is no dropout, which gives every row's soft label y~_i = p_i - r_i: with TextHide's
  mixing, the weight of each class in each encoding, i.e. the mixing coefficients grouped by class
  (PRIOR-ART B.2: "the soft label leaks exactly").

For several local steps (``client_mode="fedavg"``) the update sums the steps' gradients at moving weights;
``mean_label`` then divides by the number of steps and is approximate (AdamW's normalisation makes it
rougher still). Scoring (:func:`score_labels`) compares with the true soft labels of the truth file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from veil.attacks.gradients.tap import ClientUpdate, TapMeta, _frozen
from veil.attacks.gradients.truth import TapTruth
from veil.errors import DataFormatError, InvalidTypeError

__all__ = ["LeakedLabels", "leak_labels", "score_labels", "head_forward_np"]


@dataclass(frozen=True, repr=False)
class LeakedLabels:
    """``mean_label`` (C,), ``classes`` (label weight > ``threshold``), ``negative_classes`` (iDLG rule),
    ``per_row`` ((n, C) or None), ``exact`` (whether the derivation is exact for this update)."""

    mean_label: np.ndarray
    classes: tuple[int, ...]
    negative_classes: tuple[int, ...]
    per_row: np.ndarray | None = None
    exact: bool = False
    config: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean_label", _frozen(self.mean_label, np.float64))
        if self.per_row is not None:
            object.__setattr__(self, "per_row", _frozen(self.per_row, np.float64))
        object.__setattr__(self, "config", MappingProxyType(dict(self.config)))

    def __repr__(self) -> str:
        rows = "" if self.per_row is None else f", per_row={self.per_row.shape[0]}"
        return f"LeakedLabels(classes={self.classes}, exact={self.exact}{rows})"


def head_forward_np(state: Mapping[str, np.ndarray], hidden_layers: int,
                    x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities (n, C), last hidden activations (n, h)) of an MLPHead in eval mode, in float64 numpy."""
    from veil.attacks.gradients.tap import linear_keys

    h = np.asarray(x, dtype=np.float64)
    keys = linear_keys(hidden_layers)
    for w, b in keys[:-1]:
        h = np.maximum(h @ state[w].astype(np.float64).T + state[b].astype(np.float64), 0.0)
    w, b = keys[-1]
    z = h @ state[w].astype(np.float64).T + state[b].astype(np.float64)
    z = z - z.max(1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(1, keepdims=True), h


def leak_labels(update: ClientUpdate, meta: TapMeta, *, inputs: np.ndarray | None = None,
                threshold: float = 1e-3) -> LeakedLabels:
    """The labels an update leaks (see the module docstring); ``inputs`` (n, d): head inputs the attacker holds
    for this update (e.g. :meth:`RecoveredInputs.vectors <veil.attacks.gradients.analytic.RecoveredInputs>`)."""
    if not isinstance(update, ClientUpdate) or not isinstance(meta, TapMeta):
        bad = update if not isinstance(update, ClientUpdate) else meta
        hint = " (the truth is for scoring only)" if isinstance(bad, TapTruth) else ""
        raise InvalidTypeError(f"leak_labels takes a ClientUpdate and its tap's TapMeta{hint}, not "
                               f"{type(bad).__name__}")
    spec = meta.model
    w_key, b_key = spec.keys[-1]
    g = update.pseudo_gradient(meta)
    gb, gW = g[b_key], g[w_key]
    C = spec.out_dim
    rows = update.rows(meta)
    steps = 1 if meta.client_mode == "alg2" else max(1, -(-rows // meta.batch_size))
    per_row = None
    exact = False
    if inputs is not None:
        x = np.asarray(inputs, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != spec.in_dim:
            raise DataFormatError(f"inputs must be (n, {spec.in_dim}), got {x.shape}")
        p, h = head_forward_np(update.global_state, len(spec.hidden), x)
        mean_p = p.mean(0) if len(x) else np.full(C, 1.0 / C)
        complete = len(x) == rows and meta.client_mode == "alg2"
        exact = complete and spec.dropout == 0.0
        if complete and len(x):
            # grad W_L = (1/B) R^T H  ->  R^T = B grad W_L H^+ (least squares; exact when H has full row rank)
            R = np.linalg.lstsq(h.T, rows * gW.T, rcond=None)[0]  # (n, C): H^T R = B grad W_L^T
            per_row = p - R
            exact = exact and np.linalg.matrix_rank(h) == len(x)
    else:
        mean_p = np.full(C, 1.0 / C)
    mean_label = mean_p - gb / steps
    classes = tuple(int(c) for c in np.flatnonzero(mean_label > threshold))
    negative = tuple(int(c) for c in np.flatnonzero(gb < 0))
    return LeakedLabels(mean_label=mean_label, classes=classes, negative_classes=negative, per_row=per_row,
                        exact=bool(exact), config={"threshold": threshold, "inputs": inputs is not None,
                                                   "steps": steps, "dropout": spec.dropout})


def score_labels(leaked: LeakedLabels, truth: TapTruth, *, inputs: np.ndarray | None = None) -> dict[str, Any]:
    """Plain scores against the true soft labels.

    ``mean_label_error``: max abs error of the batch's mean label (per step for several steps); class presence
    ``precision`` / ``recall`` (true classes: weight > 0 in some row); ``negative_precision`` (the iDLG rule);
    with per-row labels and the ``inputs`` they were derived from: ``per_row_error``, the max abs error over
    the rows whose input matches a true row (relative squared error <= 1e-3), and ``per_row_matched``.
    """
    from veil.attacks.gradients.analytic import RECOVERY_REL_MSE, match_rows

    if not isinstance(leaked, LeakedLabels) or not isinstance(truth, TapTruth):
        raise InvalidTypeError("score_labels takes LeakedLabels and the TapTruth of the same update")
    Y = truth.soft_labels
    steps = max(1, len(np.unique(truth.step)))
    mean_true = Y.mean(0)
    present = set(np.flatnonzero(Y.max(0) > 0).tolist())
    found = set(leaked.classes)
    neg = set(leaked.negative_classes)
    out: dict[str, Any] = {
        "mean_label_error": float(np.abs(leaked.mean_label - mean_true).max()), "steps": steps,
        "precision": len(found & present) / len(found) if found else None,
        "recall": len(found & present) / len(present) if present else None,
        "negative_precision": len(neg & present) / len(neg) if neg else None,
        "per_row_error": None, "per_row_matched": 0}
    if leaked.per_row is not None and inputs is not None:
        best, rel, _ = match_rows(truth.inputs, inputs)  # for each leaked row: the closest true row
        ok = rel <= RECOVERY_REL_MSE
        if ok.any():
            err = np.abs(leaked.per_row[ok] - Y[best[ok]]).max()
            out.update(per_row_error=float(err), per_row_matched=int(ok.sum()))
    return out
