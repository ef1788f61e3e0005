"""Dirac canaries for auditing DP-SGD on veil's heads, and how the auditor scores them (white-box and black-box).

A head trained by :class:`~veil.defenses.dpsgd.DPSGD` maps an embedding of dimension d to logits through a first
``nn.Linear`` layer. The audit gives every example m extra input coordinates, zero for the real examples; canary
i is the input ``norm * sqrt(d / (d + m)) * e_(d+i)`` (its own coordinate, nothing else; ``norm`` 1: the norm of a
real embedding as the head sees it) with a label drawn by the auditor. So the
gradient of the first layer's column d+i comes from canary i alone: no real example and no other canary ever
touches it. Its clipped gradient there is the canary's whole signal; the noise in that column is the mechanism's
N(0, (sigma clip)^2) per coordinate. The real embeddings are scaled by sqrt(d / (d + m)) so that the head's own
input scaling (sqrt of its input dimension) sees them exactly as without the audit.

These are input-space canaries that go through the defense's real training loop: Poisson lots, Opacus' ghost
clipping, veil's noise and the accountant; the auditor only chooses the inputs (a poisoning adversary may).

Scores (higher = more likely included):

* white-box (:class:`WhiteBoxScorer`, fed by :func:`veil.defenses.dpsgd.engine.fit`'s ``transcript``: every step's
  weights and noisy gradients, which the DP guarantee covers): at each step the auditor computes what canary i's
  clipped gradient would add to its column, ``s`` (from the weights of that step and the claimed clip), reads the
  noisy column ``x`` (times the expected lot size) and adds the log-likelihood ratio of "sampled with probability
  q" against "absent": ``log(1 - q + q exp((<x, s> - |s|^2 / 2) / (sigma clip)^2))``, exact for the claimed
  mechanism;
* black-box (:func:`black_box_scores`): the released model's log-probability of the canary's label at the
  canary's input (queries only).

The white-box transcript also gives two checks of what the accountant assumes (:func:`mechanism_checks`): the noise
in the columns of excluded canaries must have variance (sigma clip)^2 (a two-sided chi-square test), and the mean
signal of included canaries along ``s`` must not exceed what clipping allows (a one-sided z-test).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError
from veil.validation import check_int, check_real

__all__ = ["DiracCanaries", "WhiteBoxScorer", "black_box_scores", "mechanism_checks", "CHECK_ALPHA"]

#: the level of the two mechanism checks: a correct implementation fails one with probability about 2e-6
CHECK_ALPHA = 1e-6


@dataclass(frozen=True)
class DiracCanaries:
    """m canaries on top of d-dimensional embeddings: canary i is ``radius * e_(d+i)`` with ``labels[i]``, where
    ``radius = norm * sqrt(d / (d + m))``: after the head's input scaling it has ``norm`` times a real embedding's
    norm (larger saturates the head at once, and a saturated canary's gradient, hence its signal, vanishes)."""

    m: int
    d: int
    labels: np.ndarray
    norm: float = 1.0

    def __post_init__(self) -> None:
        check_int("m", self.m, minimum=1)
        check_int("d", self.d, minimum=1)
        check_real("norm", self.norm, low=0.0, high=math.inf, low_open=True)
        if np.shape(self.labels) != (self.m,):
            raise DataFormatError(f"labels must have shape ({self.m},), got {np.shape(self.labels)}")

    @property
    def dim(self) -> int:
        """The audited head's input dimension, d + m."""
        return self.d + self.m

    @property
    def radius(self) -> float:
        """The canary's one nonzero input coordinate."""
        return float(self.norm) * math.sqrt(self.d / self.dim)

    def pad(self, X: np.ndarray) -> np.ndarray:
        """Real embeddings (n, d) -> (n, d + m): scaled by sqrt(d / (d + m)), zeros in the canary coordinates."""
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or X.shape[1] != self.d:
            raise DataFormatError(f"embeddings must have shape (n, {self.d}), got {X.shape}")
        out = np.zeros((len(X), self.dim), dtype=np.float32)
        out[:, :self.d] = X * np.float32(math.sqrt(self.d / self.dim))
        return out

    def inputs(self, which: np.ndarray | None = None) -> np.ndarray:
        """The canaries' inputs (all, or the indices ``which``), shape (k, d + m)."""
        idx = np.arange(self.m) if which is None else np.asarray(which, dtype=np.int64)
        out = np.zeros((len(idx), self.dim), dtype=np.float32)
        out[np.arange(len(idx)), self.d + idx] = np.float32(self.radius)
        return out


def _linear_layers(weights: list[Any]) -> list[tuple[Any, Any]]:
    """(weight, bias) pairs of a head whose trainable parameters are Linear layers in order (veil's MLPHead)."""
    if len(weights) < 2 or len(weights) % 2:
        raise InvalidParameterError("the one-run audit needs a head of Linear layers (weight, bias) in order: veil's "
                                    "MLPHead (DPSGD with hidden=..., no model=)")
    pairs = [(weights[i], weights[i + 1]) for i in range(0, len(weights), 2)]
    for w, b in pairs:
        if w.ndim != 2 or b.ndim != 1 or w.shape[0] != b.shape[0]:
            raise InvalidParameterError("the one-run audit needs a head of Linear layers (weight, bias) in order")
    return pairs


def _canary_gradients(weights: list[Any], canaries: DiracCanaries, scale: float) -> tuple[Any, Any]:
    """Per canary at these weights: the gradient of its loss in its own first-layer column (m, width) and the L2
    norm of its whole gradient (m,). ``scale``: the head's input scaling (sqrt of its input dimension)."""
    import torch
    from torch.func import grad, vmap

    pairs = _linear_layers(weights)
    w1, b1 = pairs[0]
    columns = w1[:, canaries.d:].T.contiguous()  # (m, width): canary i's column
    rest = [t for pair in pairs[1:] for t in pair]
    c = float(canaries.radius) * float(scale)

    def loss(col: Any, bias: Any, others: list[Any], label: Any) -> Any:
        h = col * c + bias
        for i in range(0, len(others), 2):
            h = torch.relu(h) @ others[i].T + others[i + 1]
        return torch.nn.functional.cross_entropy(h.unsqueeze(0), label.unsqueeze(0))

    labels = torch.as_tensor(canaries.labels, dtype=torch.long)
    g_col, g_bias, g_rest = vmap(grad(loss, argnums=(0, 1, 2)), in_dims=(0, None, None, 0))(columns, b1, rest, labels)
    sq = (g_col ** 2).sum(1) + (g_bias ** 2).sum(1)
    for g in g_rest:
        sq = sq + (g.reshape(len(labels), -1) ** 2).sum(1)
    return g_col, sq.sqrt()


class WhiteBoxScorer:
    """The white-box auditor: pass it as ``transcript`` to :meth:`DPSGD.train`; it reads every step's weights and
    noisy gradients and keeps, per canary, its log-likelihood-ratio score and what :func:`mechanism_checks`
    needs. ``sigma``, ``clip``, ``q`` and ``expected`` (q n) are the claimed mechanism's; ``scale`` the head's
    input scaling."""

    def __init__(self, canaries: DiracCanaries, *, sigma: float, clip: float, q: float, expected: float,
                 scale: float) -> None:
        self.canaries = canaries
        self.sigma, self.clip, self.q = float(sigma), float(clip), float(q)
        self.expected, self.scale = float(expected), float(scale)
        m = canaries.m
        self.scores = np.zeros(m)
        self.noise_sq = np.zeros(m)  # sum over steps of |x|^2 / (sigma clip)^2
        self.along = np.zeros(m)  # sum over steps of <x, s/|s|>
        self.signal = np.zeros(m)  # sum over steps of |s|
        self.signal_sq = np.zeros(m)  # sum over steps of |s|^2
        self.steps = 0
        self.width = 0

    def __call__(self, step: int, weights: list[Any], grads: list[Any]) -> None:
        import torch

        with torch.enable_grad():
            g_col, norm = _canary_gradients(list(weights), self.canaries, self.scale)
        factor = torch.clamp(self.clip / (norm + 1e-6), max=1.0)  # Opacus' clipping rule, at the claimed clip
        s = (g_col * factor[:, None]).double().numpy()
        x = (grads[0][:, self.canaries.d:].T.double() * self.expected).numpy()  # (m, width): sum + noise
        var = (self.sigma * self.clip) ** 2
        s_norm = np.sqrt((s ** 2).sum(1))
        dot = (x * s).sum(1)
        log_in = math.log(self.q) + (dot - s_norm ** 2 / 2.0) / var
        self.scores += np.logaddexp(math.log1p(-self.q) if self.q < 1.0 else -math.inf, log_in)
        self.noise_sq += (x ** 2).sum(1) / var
        self.along += np.where(s_norm > 0, dot / np.where(s_norm > 0, s_norm, 1.0), 0.0)
        self.signal += s_norm
        self.signal_sq += s_norm ** 2
        self.steps += 1
        self.width = x.shape[1]


def black_box_scores(model: Any, canaries: DiracCanaries, chunk: int = 512) -> np.ndarray:
    """The released model's log-probability of each canary's label at the canary's input (queries only)."""
    out = np.empty(canaries.m)
    for start in range(0, canaries.m, chunk):
        idx = np.arange(start, min(start + chunk, canaries.m))
        logits = np.asarray(model.logits(canaries.inputs(idx)), dtype=np.float64)
        logp = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
        out[idx] = logp[np.arange(len(idx)), canaries.labels[idx]]
    return out


def mechanism_checks(scorer: WhiteBoxScorer, included: np.ndarray, alpha: float = CHECK_ALPHA) -> dict[str, Any]:
    """What the accountant assumes, checked on the transcript (module docstring): ``noise`` (the columns of excluded
    canaries hold N(0, (sigma clip)^2) noise: chi-square on their squared entries, two-sided) and ``sensitivity``
    (included canaries' mean signal along the clipped direction is the clipped one: z-test, one-sided, large =
    more than clipping allows). Each has its statistic, p-value and ``passed`` at ``alpha``."""
    from scipy.stats import chi2, norm

    included = np.asarray(included, dtype=bool)
    out_idx, in_idx = ~included, included
    dof = int(out_idx.sum()) * scorer.steps * scorer.width
    stat = float(scorer.noise_sq[out_idx].sum())
    if dof:
        p_noise = float(min(1.0, 2 * min(chi2.sf(stat, dof), chi2.cdf(stat, dof))))
        ratio = stat / dof
    else:
        p_noise, ratio = 1.0, float("nan")
    q, var = scorer.q, (scorer.sigma * scorer.clip) ** 2
    observed = float(scorer.along[in_idx].sum())
    expected = q * float(scorer.signal[in_idx].sum())
    variance = int(in_idx.sum()) * scorer.steps * var + q * (1 - q) * float(scorer.signal_sq[in_idx].sum())
    z = (observed - expected) / math.sqrt(variance) if variance > 0 else 0.0
    p_sens = float(norm.sf(z))
    return {"noise": {"variance_ratio": ratio, "chi2": stat, "dof": dof, "p_value": p_noise,
                      "passed": bool(p_noise >= alpha)},
            "sensitivity": {"z": z, "observed": observed, "expected": expected, "p_value": p_sens,
                            "passed": bool(p_sens >= alpha)},
            "alpha": alpha}
