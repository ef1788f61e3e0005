"""Analytic inversion of a client update: the head's INPUTS (TextHide encodings times rep_scale) from its weights.

With a frozen encoder, the head's input is TextHide's encoding e~ = sigma o sum_j lambda_j e_j itself, so a
server that can invert the head's first layer holds every encoding the client trained on, without learning
any mask (PRIOR-ART B.2); abs-RSS, mask recovery and unmixing (:mod:`veil.attacks.texthide`) take it from
there. The first Linear layer's gradients for a batch of B rows are (mean loss; any depth, any loss)

    grad W1 = (1/B) sum_i delta_i x_i^T        grad b1 = (1/B) sum_i delta_i

with delta_i = dL_i/dz_i the error at the layer's pre-activation. So every ratio row
``grad W1[j] / grad b1[j]`` is a weighted average of the rows' inputs, with weights delta_ij, and EQUALS x_i
when unit j is active for row i alone (ReLU makes most units inactive for most rows; dropout only adds zeros).
The attack (breaching's ``invert_fc_layer``, Geiping et al., made batch-aware):

1. The update's gradient: ``(w_global - w_client) / lr`` (one SGD step, Alg. 2; see
   :meth:`ClientUpdate.pseudo_gradient <veil.attacks.gradients.tap.ClientUpdate.pseudo_gradient>`).
2. Ratio rows of every unit with grad b1[j] != 0, clustered: rows within relative distance ``tol`` of each
   other are one cluster (greedy, strongest units first; the centre is the grad-b1-weighted least-squares fit
   ``sum_j gb_j gW_j / sum_j gb_j^2`` over its units). At B = 1 every active unit isolates the single row:
   x = that fit over all units, exactly.
3. B > 1: a cluster is NOT necessarily one row. In a binary task with one hidden layer,
   delta_ij = rho_i u_j 1[unit j active for row i] (u = W2[0] - W2[1]), so all units active for the same SET
   of rows share one ratio: every set of rows that some units single out makes a cluster. veil keeps the
   centres that pass a consistency test (:func:`inconsistency`): a true input's activation
   (W1 x + b1 > 0, computable from the public weights) is constant on every cluster and off on the units no
   row reached, while a weighted average of rows splits the clusters that hold one of its rows but not the
   other. Accepted centres must also leave each other's clusters inactive (a single row's cluster has no other
   row), and nothing is accepted when the clusters carry fewer than ``min_bits`` bits of evidence
   (:func:`evidence_bits`: a wrong candidate with random activations would pass with probability 2^-bits).
4. Peeling (binary task, one hidden layer, no dropout): each unit reads
   ``(B / u_j) (grad W1[j], grad b1[j]) = sum_{i in S_j} rho_i (x_i, 1)``; subtracting the rows already
   recovered from a cluster leaves its unknown rows, and a cluster with one unknown row yields it. Residuals go
   through the test of step 3 again, until no new row appears.
5. What stays unrecovered (alg2 updates only) goes to gradient matching in encoding space
   (:class:`veil.attacks.gradients.matching.EncodingMatch`): the recovered rows fixed, the missing ones
   optimised inside the row space of grad W1 (= the span of the batch's inputs), labels learned.

Measured (one hidden layer of 384 units, TextHide k = 2-4, real MiniLM encodings): every row exactly up to
B = 8; a few rows, with some false ones, at B = 10-12; nothing from the ratios at B >= 16 (no unit singles out
few enough rows), where matching alone rarely converges. Precision is reported with every score.

Updates of several local steps: with SGD the first layer still sums delta x^T terms (at moving weights), so
step 2 applies to all n = epochs x examples rows, with fewer isolating units; AdamW divides each coordinate
by its running gradient scale, which destroys the ratio structure: recovery there is expected to fail and is
reported as measured (``client_mode="fedavg"``), not assumed. Float32 weights limit precision: the update is
a difference of float32 numbers, so ratio rows of units with tiny grad b1 are noisy; ``tol`` absorbs that.

Scoring (:func:`score_inputs`): a true row is recovered when some recovered vector r has relative squared
error ``||r - x||^2 / ||x||^2 <= 1e-3`` (which implies cosine >= 0.9995); the cosine >= 0.999 criterion is
reported too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from veil.attacks.base import Attack, ThreatModel, rng_description
from veil.attacks.gradients.ratios import (RatioClusters, evidence_bits, inconsistency, invert_first_layer,
                                           select_inputs)
from veil.attacks.gradients.tap import ClientUpdate, Tap, TapMeta, _frozen
from veil.attacks.gradients.truth import TapTruth
from veil.validation import check_int, check_real, check_rng
from veil.errors import DataFormatError, InvalidTypeError
from veil.random import RngLike

__all__ = ["RatioClusters", "invert_first_layer", "inconsistency", "evidence_bits", "select_inputs",
           "RecoveredInputs", "AnalyticInversion", "score_inputs", "match_rows", "RECOVERY_REL_MSE", "RECOVERY_COSINE"]

RECOVERY_REL_MSE = 1e-3
RECOVERY_COSINE = 0.999


@dataclass(frozen=True, repr=False)
class RecoveredInputs:
    """Head inputs recovered from one update: ``vectors`` (n, d), ``methods`` per vector (``"ratio"``: a
    multi-unit cluster, or the single row at B = 1; ``"matched"``: gradient matching), ``expected_rows`` (how
    many inputs the update holds: public batch size and example count)."""

    round: int
    client: str
    vectors: np.ndarray
    methods: tuple[str, ...]
    expected_rows: int
    matching_loss: float | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    wall_time_s: float = 0.0

    def __post_init__(self) -> None:
        v = np.asarray(self.vectors, dtype=np.float64)
        object.__setattr__(self, "methods", tuple(self.methods))
        if v.ndim != 2 or len(v) != len(self.methods):
            raise DataFormatError(f"vectors must be (n, d) with one method per row, got {v.shape} and "
                                  f"{len(self.methods)} methods")
        object.__setattr__(self, "vectors", _frozen(v))
        object.__setattr__(self, "config", MappingProxyType(dict(self.config)))

    def __len__(self) -> int:
        return len(self.methods)

    def __repr__(self) -> str:
        return (f"RecoveredInputs(round={self.round}, client={self.client!r}, vectors={len(self)}, "
                f"expected_rows={self.expected_rows})")

    def count(self, method: str) -> int:
        return sum(m == method for m in self.methods)


class AnalyticInversion(Attack):
    """Recover a client's head inputs (TextHide encodings) from its model update (see the module docstring).

    Parameters
    ----------
    tol: relative distance within which two ratio rows are the same input.
    max_inconsistency: the largest :func:`inconsistency` (fraction of units) of an accepted input (the head's
        dropout rate is added: dropped units break the pattern).
    match: run gradient matching for the rows the ratios leave (alg2 updates only).
    match_evals, restarts: the matching budget.
    rng: the matching's initialisation. None = OS entropy; an int seed for reproducible experiments.
    """

    name = "analytic"
    citation = ("first-layer inversion (Geiping et al. 2020, breaching invert_fc_layer; Phong et al. 2018) on "
                "TextHide's Alg. 2 updates (Huang et al. 2020), PRIOR-ART B.2; matching after Zhu et al. 2019")
    threat = ThreatModel(observes="each client's model update (the weights it replies) and the global weights",
                         needs=("the head's architecture, learning rate, optimizer and batch size (tap.json)",))
    observes = "updates"

    def __init__(self, *, tol: float = 1e-4, max_inconsistency: float = 0.02, match: bool = True,
                 match_evals: int = 400, restarts: int = 2, rng: RngLike = None) -> None:
        self.tol = check_real("tol", tol, low=0.0, high=1.0, low_open=True)
        self.max_inconsistency = check_real("max_inconsistency", max_inconsistency, low=0.0, high=0.5)
        if not isinstance(match, bool):
            raise InvalidTypeError(f"match must be a bool, got {type(match).__name__}")
        self.match = match
        self.match_evals = check_int("match_evals", match_evals, minimum=1)
        self.restarts = check_int("restarts", restarts, minimum=1)
        check_rng(rng)
        self._rng = rng
        self._rng_desc = rng_description(rng)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "tol": self.tol, "max_inconsistency": self.max_inconsistency, "match": self.match,
                "match_evals": self.match_evals, "restarts": self.restarts, "rng": self._rng_desc,
                "criterion": f"relative squared error <= {RECOVERY_REL_MSE:g}"}

    def run(self, observation: Tap) -> dict[tuple[int, str], Any]:
        """The attack's one verb: recover the inputs behind every client update of every round of a tap
        (``{(round, client): what :meth:`recover` returns}``)."""
        if not isinstance(observation, Tap):
            raise InvalidTypeError(f"observation must be a veil Tap (Tap(DIR)), not {type(observation).__name__}")
        return {(r, c): self.recover(observation, r, c) for r, c in observation.updates()}

    def recover(self, tap: Tap, round: int, client: str) -> RecoveredInputs:
        """Recover the inputs behind client ``client``'s update in round ``round`` of ``tap``."""
        if not isinstance(tap, Tap):
            hint = " (the truth is for scoring only)" if isinstance(tap, TapTruth) else ""
            raise InvalidTypeError(f"tap must be a veil Tap (Tap(DIR)){hint}, not {type(tap).__name__}")
        return self.recover_update(tap.update(round, client), tap.meta)

    def recover_update(self, update: ClientUpdate, meta: TapMeta) -> RecoveredInputs:
        """The same on one :class:`ClientUpdate` read from a tap (with the tap's :class:`TapMeta`)."""
        if not isinstance(update, ClientUpdate) or not isinstance(meta, TapMeta):
            bad = update if not isinstance(update, ClientUpdate) else meta
            hint = " (the truth is for scoring only)" if isinstance(bad, TapTruth) else ""
            raise InvalidTypeError(f"recover_update takes a ClientUpdate and its TapMeta{hint}, not "
                                   f"{type(bad).__name__}")
        start = time.perf_counter()
        spec = meta.model
        w_key, b_key = spec.keys[0]
        g = update.pseudo_gradient(meta)
        rows = update.rows(meta)
        G, gb = g[w_key], g[b_key]
        clusters = invert_first_layer(G, gb, tol=self.tol)
        W1 = update.global_state[w_key].astype(np.float64)
        b1 = update.global_state[b_key].astype(np.float64)
        peel = meta.client_mode == "alg2" and len(spec.hidden) == 1 and spec.out_dim == 2 and spec.dropout == 0
        if rows == 1 and len(clusters.support):
            # every active unit isolates the one row: one least-squares fit over all of them
            vectors, methods, scores = [(gb @ G) / (gb @ gb)], ["ratio"], [0.0]
        elif not spec.hidden:  # a linear head: ratio rows of the C classes mix all rows; nothing isolates one
            vectors, methods, scores = [], [], []
        else:
            u = None
            if peel:
                W2 = update.global_state[spec.keys[1][0]].astype(np.float64)
                u = W2[0] - W2[1]
            vectors, scores = select_inputs(G, gb, clusters, W1, b1, rows, u=u,
                                            max_inconsistency=self.max_inconsistency + spec.dropout)
            methods = ["ratio"] * len(vectors)
        loss = None
        if self.match and meta.client_mode == "alg2" and len(vectors) < rows:
            from veil.attacks.gradients.matching import EncodingMatch

            fixed = np.array(vectors).reshape(-1, spec.in_dim)
            matcher = EncodingMatch(max_evals=self.match_evals, restarts=self.restarts, rng=self._rng)
            found = matcher.recover_update(update, meta, fixed=fixed)
            vectors += list(found.vectors[len(fixed):])
            methods += ["matched"] * (len(found) - len(fixed))
            loss = found.matching_loss
        return RecoveredInputs(round=update.round, client=update.client,
                               vectors=np.array(vectors).reshape(-1, spec.in_dim), methods=tuple(methods),
                               expected_rows=rows, matching_loss=loss,
                               config={**self.config(), "clusters": len(clusters.support), "peeling": peel,
                                       "inconsistency": scores,
                                       "multi_unit_clusters": int((clusters.support >= 2).sum()),
                                       "active_units": clusters.active_units, "client_mode": meta.client_mode,
                                       "optimizer": meta.optimizer},
                               wall_time_s=time.perf_counter() - start)


# ---------------------------------------------------------------- scoring (needs the truth; never seen by the attack)
def match_rows(vectors: np.ndarray, truth_inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each true row: (index of the closest recovered vector or -1, its relative squared error, its cosine)."""
    T = np.asarray(truth_inputs, dtype=np.float64)
    V = np.asarray(vectors, dtype=np.float64).reshape(-1, T.shape[1])
    if len(V) == 0:
        return np.full(len(T), -1), np.full(len(T), np.inf), np.zeros(len(T))
    tn = (T ** 2).sum(1)
    err = ((V ** 2).sum(1)[None, :] - 2 * T @ V.T + tn[:, None]) / np.maximum(tn[:, None], 1e-300)
    best = err.argmin(1)
    rel = np.maximum(err[np.arange(len(T)), best], 0.0)
    vn = np.linalg.norm(V[best], axis=1) * np.sqrt(tn)
    cos = np.einsum("ij,ij->i", T, V[best]) / np.maximum(vn, 1e-300)
    return best, rel, cos


def score_inputs(recovered: RecoveredInputs, truth: TapTruth, *, threshold: float = RECOVERY_REL_MSE) -> dict[str, Any]:
    """Plain per-update scores (the runner adds Wilson CIs over rows):

    ``rows``, ``recovered`` (true rows within ``threshold`` relative squared error of some recovered vector),
    ``recovered_cosine`` (cosine >= 0.999), ``recovered_by`` (per method), ``vectors``, ``correct_vectors``
    (recovered vectors within ``threshold`` of some true row: precision's numerator), ``median_rel_error``.
    """
    if not isinstance(recovered, RecoveredInputs) or not isinstance(truth, TapTruth):
        raise InvalidTypeError("score_inputs takes RecoveredInputs and the TapTruth of the same update")
    if len(recovered) and recovered.vectors.shape[1] != truth.inputs.shape[1]:
        raise DataFormatError(f"recovered vectors have dimension {recovered.vectors.shape[1]}, the truth "
                              f"{truth.inputs.shape[1]}")
    best, rel, cos = match_rows(recovered.vectors, truth.inputs)
    ok = rel <= threshold
    by: dict[str, int] = {}
    for i in np.flatnonzero(ok):
        method = recovered.methods[int(best[i])]
        by[method] = by.get(method, 0) + 1
    correct = 0
    if len(recovered):
        _, rel_v, _ = match_rows(truth.inputs, recovered.vectors)
        correct = int((rel_v <= threshold).sum())
    return {"rows": int(len(truth)), "recovered": int(ok.sum()),
            "recovered_cosine": int((cos >= RECOVERY_COSINE).sum()), "recovered_by": by, "vectors": int(len(recovered)), "correct_vectors": correct,
            "median_rel_error": float(np.median(rel)) if len(rel) and np.isfinite(np.median(rel)) else None}
