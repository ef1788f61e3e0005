"""Ratio rows of a Linear layer's gradient: clustering, the consistency test and peeling (steps 2-4 of
:mod:`veil.attacks.gradients.analytic`, whose docstring explains them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.errors import DataFormatError

__all__ = ["RatioClusters", "invert_first_layer", "inconsistency", "evidence_bits", "select_inputs"]


@dataclass(frozen=True, repr=False)
class RatioClusters:
    """Step 2's output: ``centres`` (c, d) sorted by ``support`` (units per cluster) then strength;
    ``units`` (u,) the units with a gradient and ``labels`` (u,) the cluster of each; ``zero_units`` the units
    whose bias gradient is exactly zero (no row reached them)."""

    centres: np.ndarray
    support: np.ndarray
    strength: np.ndarray
    units: np.ndarray
    labels: np.ndarray
    zero_units: np.ndarray

    @property
    def active_units(self) -> int:
        return int(len(self.units))

    def __repr__(self) -> str:
        return f"RatioClusters(clusters={len(self.support)}, multi_unit={int((self.support >= 2).sum())})"


def _check_pair(grad_W: Any, grad_b: Any) -> tuple[np.ndarray, np.ndarray]:
    G = np.asarray(grad_W, dtype=np.float64)
    gb = np.asarray(grad_b, dtype=np.float64)
    if G.ndim != 2 or gb.shape != (G.shape[0],):
        raise DataFormatError(f"grad_W must be (h, d) and grad_b (h,), got {G.shape} and {gb.shape}")
    if not (np.isfinite(G).all() and np.isfinite(gb).all()):
        raise DataFormatError("the gradient holds NaN or inf; the update is damaged")
    return G, gb


def invert_first_layer(grad_W: Any, grad_b: Any, *, tol: float = 1e-4, floor: float = 1e-9) -> RatioClusters:
    """Cluster the ratio rows ``grad_W[j] / grad_b[j]`` of a Linear layer's gradient (step 2).

    Units with ``|grad_b[j]| <= floor * max|grad_b|`` are skipped (no signal). Greedy: units in order of
    decreasing |grad_b| join the first centre within relative distance ``tol`` (``||r - c|| <= tol ||c||``),
    else open a new one; centres are refitted by weighted least squares as units join.
    """
    G, gb = _check_pair(grad_W, grad_b)
    scale = float(np.abs(gb).max()) if gb.size else 0.0
    zero = np.flatnonzero(gb == 0)
    if scale == 0.0:
        empty = np.zeros(0, dtype=np.int64)
        return RatioClusters(np.zeros((0, G.shape[1])), empty, np.zeros(0), empty, empty, zero)
    units = np.flatnonzero(np.abs(gb) > floor * scale)
    units = units[np.argsort(-np.abs(gb[units]), kind="stable")]
    num = np.zeros((len(units), G.shape[1]))  # per centre: sum gb_j gW_j
    den = np.zeros(len(units))  # per centre: sum gb_j^2
    centres = np.zeros((len(units), G.shape[1]))
    norms = np.zeros(len(units))
    support = np.zeros(len(units), dtype=np.int64)
    labels = np.zeros(len(units), dtype=np.int64)
    count = 0
    for u, j in enumerate(units):
        r = G[j] / gb[j]
        if count:
            dist = np.linalg.norm(centres[:count] - r, axis=1)
            best = int(np.argmin(dist / np.maximum(norms[:count], 1e-300)))
            if dist[best] <= tol * norms[best]:
                num[best] += gb[j] * G[j]
                den[best] += gb[j] ** 2
                centres[best] = num[best] / den[best]
                norms[best] = np.linalg.norm(centres[best])
                support[best] += 1
                labels[u] = best
                continue
        num[count], den[count], centres[count] = gb[j] * G[j], gb[j] ** 2, r
        norms[count], support[count], labels[u] = np.linalg.norm(r), 1, count
        count += 1
    order = np.lexsort((-den[:count], -support[:count]))
    rank = np.empty(count, dtype=np.int64)
    rank[order] = np.arange(count)
    return RatioClusters(centres[:count][order], support[:count][order], np.sqrt(den[:count][order]), units,
                         rank[labels], zero)


def inconsistency(candidates: np.ndarray, clusters: RatioClusters, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How far each candidate input is from explaining the clusters (0 for the batch's true inputs).

    A true input x_i is active (W_j x_i + b_j > 0) on a unit exactly when the unit's rows include i, and every
    unit of a cluster has the same rows: so x_i's activation is constant on every cluster, and off on the units
    no row reached. A weighted average of rows (a cluster of several rows) splits clusters. Score: the
    support-weighted mean over the clusters of two or more units (one unit cannot be split) of
    min(active fraction, inactive fraction), pooled with the active fraction of the zero-gradient units;
    1 when no cluster has two units (no evidence).
    """
    X = np.asarray(candidates, dtype=np.float64).reshape(-1, W.shape[1])
    multi = clusters.support >= 2
    if len(X) == 0 or not multi.any():
        return np.ones(len(X))  # single-unit clusters cannot be split: no evidence either way
    used = multi[clusters.labels]
    units, labels = clusters.units[used], clusters.labels[used]
    act = (X @ W[units].T + b[units]) > 0  # (n, u)
    k = len(clusters.support)
    frac = np.stack([np.bincount(labels, weights=a.astype(np.float64), minlength=k) for a in act])
    frac = frac[:, multi] / clusters.support[multi]
    weight = clusters.support[multi]
    split = (np.minimum(frac, 1 - frac) * weight).sum(1) / weight.sum()
    if len(clusters.zero_units):
        stray = ((X @ W[clusters.zero_units].T + b[clusters.zero_units]) > 0).mean(1)
        split = (split * weight.sum() + stray * len(clusters.zero_units)) / (weight.sum() + len(clusters.zero_units))
    return split


def _peel(G: np.ndarray, gb: np.ndarray, clusters: RatioClusters, u: np.ndarray, known: list[np.ndarray],
          W: np.ndarray, b: np.ndarray, rows: int) -> list[np.ndarray]:
    """Binary task, one hidden layer, no dropout: delta_ij = rho_i u_j 1[active] with u = W2[0] - W2[1], so every
    unit reads (rows / u_j) (grad W1[j], grad b1[j]) = sum_{i in S_j} rho_i (x_i, 1). Subtracting the known rows
    of each cluster leaves the unknown ones; a cluster with one unknown row gives it as the residual ratio."""
    ok = np.abs(u[clusters.units]) > 1e-12 * max(float(np.abs(u).max()), 1e-300)
    k = len(clusters.support)
    scale = rows / u[clusters.units]
    A = np.zeros((k, G.shape[1]))
    S = np.zeros(k)
    n = np.zeros(k)
    for c, j, f, good in zip(clusters.labels, clusters.units, scale, ok):
        if good:
            A[c] += f * G[j]
            S[c] += f * gb[j]
            n[c] += 1
    have = n > 0
    A[have] /= n[have, None]
    S[have] /= n[have]
    if not known:
        return []
    K = np.array(known)
    act = (K @ W[clusters.units].T + b[clusters.units]) > 0  # (known, units)
    member = np.stack([np.bincount(clusters.labels, weights=a.astype(np.float64), minlength=k) for a in act])
    member = member / np.maximum(clusters.support, 1) > 0.5  # (known, clusters)
    # rho of each known row: from a cluster whose only known member it is and which it explains alone
    rho = np.full(len(K), np.nan)
    for i in range(len(K)):
        for c in np.flatnonzero(member[i] & (member.sum(0) == 1) & have):
            if np.linalg.norm(A[c] - S[c] * K[i]) <= 1e-3 * np.linalg.norm(A[c]):
                rho[i] = S[c]
                break
    out = []
    for c in np.flatnonzero(have):
        mine = np.flatnonzero(member[:, c])
        if len(mine) == 0 or np.isnan(rho[mine]).any():
            continue
        ra = A[c] - rho[mine] @ K[mine]
        rs = S[c] - rho[mine].sum()
        if abs(rs) > 1e-6 * max(abs(S[c]), 1e-300) and np.linalg.norm(ra) > 1e-6 * np.linalg.norm(A[c]):
            out.append(ra / rs)
    return out


def evidence_bits(clusters: RatioClusters) -> int:
    """How much the cluster pattern can reject a wrong candidate: sum over clusters of (units - 1), plus the
    zero-gradient units (a candidate whose activations were coin flips would pass with probability 2^-bits)."""
    multi = clusters.support[clusters.support >= 2]
    return int((multi - 1).sum() + len(clusters.zero_units))


def select_inputs(G: np.ndarray, gb: np.ndarray, clusters: RatioClusters, W: np.ndarray, b: np.ndarray, rows: int,
                  *, max_inconsistency: float, u: np.ndarray | None = None, min_bits: int = 30,
                  rounds: int = 50) -> tuple[list[np.ndarray], list[float]]:
    """Accept cluster centres (and, with ``u``, peeled residuals) whose :func:`inconsistency` is at most
    ``max_inconsistency``, best first (then larger clusters first), distinct (relative distance > 1e-3), at
    most ``rows`` of them; nothing when the clusters carry fewer than ``min_bits`` :func:`evidence_bits`.

    A centre is also refused when an input already accepted is active on one of its cluster's units: the
    cluster of a single row has no other row active there (this rejects weighted averages of accepted rows).
    """
    known: list[np.ndarray] = []
    scores: list[float] = []
    if evidence_bits(clusters) < min_bits:
        return known, scores
    candidates = list(clusters.centres)
    origin: list[int] = list(range(len(candidates)))
    for _ in range(rounds):
        if not candidates or len(known) >= rows:
            break
        inc = inconsistency(np.array(candidates), clusters, W, b)
        support = np.array([clusters.support[o] if o >= 0 else 0 for o in origin])
        added = 0
        for i in np.lexsort((-support, np.round(inc, 3))):
            if inc[i] > max_inconsistency or len(known) >= rows:
                break
            x = candidates[i]
            if any(np.linalg.norm(x - y) <= 1e-3 * np.linalg.norm(y) for y in known):
                continue
            if origin[i] >= 0 and known:
                own = clusters.units[clusters.labels == origin[i]]
                if ((np.array(known) @ W[own].T + b[own]) > 0).any():
                    continue
            known.append(x)
            scores.append(float(inc[i]))
            added += 1
        if u is None or not added:
            break
        candidates = _peel(G, gb, clusters, u, known, W, b, rows)
        origin = [-1] * len(candidates)
    return known, scores
