"""Gradient matching in encoding space on a recorded update (Zhu et al. 2019, DLG; Geiping et al. 2020 for the
restarts): find head inputs whose gradient at the global weights equals the update's.

With a frozen encoder and TextHide on the head's input, Alg. 3's dummy masks and coefficients are redundant:
the gradient depends on them only through the encoding e~ = sigma o sum lambda e, so veil matches e~ directly
(one dummy vector per row of the batch). Choices, each a departure from plain DLG:

* dummies live in the row space of the first layer's gradient (grad W1 = (1/B) sum_i delta_i x_i^T, so that
  space is the span of the batch's inputs, computed by SVD): B x rank unknowns instead of B x d;
* rows already recovered analytically (:mod:`.analytic`) can be held fixed;
* labels are learned (one softmax per row), as in DLG; the distance is sum ||g' - g||^2 / ||g||^2;
* L-BFGS (lr 1, history 100, 20 iterations per step) with a strong-Wolfe line search, ``restarts`` random
  starts, the best final distance kept;
* dropout is off in the attacker's model (the client's dropout masks are unknown randomness: with dropout > 0
  the match cannot be exact);
* one step of plain SGD is assumed (alg2); on a several-step update the pseudo-gradient is matched as if it
  were one step (approximate).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from veil.attacks.base import Attack, ThreatModel, rng_description
from veil.attacks.gradients._net import forward, gradient_distance, layers_from_state, loss_gradients, \
    minimise_distance, soft_cross_entropy
from veil.attacks.gradients.tap import ClientUpdate, Tap, TapMeta
from veil.attacks.gradients.truth import TapTruth
from veil.validation import check_int, check_real, check_rng
from veil.errors import DataFormatError, InvalidTypeError
from veil.random import RngLike, torch_generator

__all__ = ["EncodingMatch", "row_space"]


def row_space(grad_W: np.ndarray, rank: int, *, rel: float = 1e-7) -> np.ndarray:
    """(d, r) orthonormal basis of the top-``rank`` right singular vectors of ``grad_W`` (r <= numerical rank)."""
    _, s, Vt = np.linalg.svd(np.asarray(grad_W, dtype=np.float64), full_matrices=False)
    r = int(min(rank, (s > rel * (s[0] if len(s) else 0.0)).sum()))
    return Vt[:r].T


class EncodingMatch(Attack):
    """DLG in encoding space on one recorded update (see the module docstring).

    Parameters
    ----------
    max_evals: loss evaluations per restart.
    restarts: random starts (the best is kept).
    max_rows: updates with more unknown rows than this are not matched (returned with the fixed rows only).
    tol: stop a restart once the scaled distance falls below this.
    subspace: optimise inside the first layer's gradient row space (default) or in the full input space.
    rng: the starts. None = OS entropy; an int seed for reproducible experiments.
    """

    name = "encoding-match"
    citation = "Zhu et al., Deep Leakage from Gradients, NeurIPS 2019, in TextHide's encoding space (PRIOR-ART B.2)"
    threat = ThreatModel(observes="each client's model update and the global weights",
                         needs=("the head's architecture, learning rate and batch size (tap.json)",))
    observes = "updates"

    def __init__(self, *, max_evals: int = 400, restarts: int = 2, tol: float = 1e-10, subspace: bool = True,
                 max_rows: int = 256, rng: RngLike = None) -> None:
        self.max_evals = check_int("max_evals", max_evals, minimum=1)
        self.max_rows = check_int("max_rows", max_rows, minimum=1)
        self.restarts = check_int("restarts", restarts, minimum=1)
        self.tol = check_real("tol", tol, low=0.0, high=1.0)
        if not isinstance(subspace, bool):
            raise InvalidTypeError(f"subspace must be a bool, got {type(subspace).__name__}")
        self.subspace = subspace
        check_rng(rng)
        self._rng_desc = rng_description(rng)
        self._gen = torch_generator(rng)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "max_evals": self.max_evals, "restarts": self.restarts, "tol": self.tol,
                "max_rows": self.max_rows,
                "subspace": self.subspace, "rng": self._rng_desc, "optimizer": "L-BFGS strong-Wolfe"}

    def run(self, observation: Tap) -> dict[tuple[int, str], Any]:
        """The attack's one verb: recover the inputs behind every client update of every round of a tap
        (``{(round, client): what :meth:`recover` returns}``)."""
        if not isinstance(observation, Tap):
            raise InvalidTypeError(f"observation must be a veil Tap (Tap(DIR)), not {type(observation).__name__}")
        return {(r, c): self.recover(observation, r, c) for r, c in observation.updates()}

    def recover(self, tap: Tap, round: int, client: str) -> Any:
        """Match the update of client ``client`` in round ``round`` -> :class:`~.analytic.RecoveredInputs`."""
        if not isinstance(tap, Tap):
            hint = " (the truth is for scoring only)" if isinstance(tap, TapTruth) else ""
            raise InvalidTypeError(f"tap must be a veil Tap (Tap(DIR)){hint}, not {type(tap).__name__}")
        return self.recover_update(tap.update(round, client), tap.meta)

    def recover_update(self, update: ClientUpdate, meta: TapMeta, *, fixed: np.ndarray | None = None) -> Any:
        """Match one update; ``fixed`` (f, d): rows already known, held fixed (they come first in the output)."""
        import torch

        from veil.attacks.gradients.analytic import RecoveredInputs

        if not isinstance(update, ClientUpdate) or not isinstance(meta, TapMeta):
            raise InvalidTypeError("recover_update takes a ClientUpdate and its TapMeta (the truth is for scoring "
                                   "only)")
        start = time.perf_counter()
        spec = meta.model
        rows = update.rows(meta)
        fixed = np.zeros((0, spec.in_dim)) if fixed is None else np.asarray(fixed, dtype=np.float64)
        if fixed.ndim != 2 or fixed.shape[1] != spec.in_dim or len(fixed) > rows:
            raise DataFormatError(f"fixed must be (f <= {rows}, {spec.in_dim}), got {fixed.shape}")
        free = rows - len(fixed)
        skipped = free > self.max_rows
        if skipped:  # e.g. several local epochs over a whole partition: far beyond what matching can solve
            free = 0
        g = update.pseudo_gradient(meta)
        target = [torch.from_numpy(g[key]) for pair in spec.keys for key in pair]
        norm = sum(float((t ** 2).sum()) for t in target) or 1.0
        layers = layers_from_state(update.global_state, len(spec.hidden), requires_grad=True)
        w_key = spec.keys[0][0]
        basis = torch.from_numpy(row_space(g[w_key], rows)) if self.subspace else None
        fixed_t = torch.from_numpy(fixed)
        best_loss, best_rows = math.inf, np.zeros((free, spec.in_dim))
        if free:
            for _ in range(self.restarts):
                loss, found = self._one(layers, target, norm, fixed_t, free, basis, meta, torch)
                if loss < best_loss:
                    best_loss, best_rows = loss, found
        vectors = np.concatenate([fixed, best_rows]) if free else fixed
        methods = ("ratio",) * len(fixed) + ("matched",) * free
        return RecoveredInputs(round=update.round, client=update.client, vectors=vectors, methods=methods,
                               expected_rows=rows, matching_loss=None if not free else best_loss,
                               config={**self.config(), "approximate": meta.client_mode != "alg2"
                                       or spec.dropout > 0, "skipped_rows": rows - len(fixed) if skipped else 0},
                               wall_time_s=time.perf_counter() - start)

    def _one(self, layers: Any, target: list, norm: float, fixed: Any, free: int, basis: Any, meta: TapMeta,
             torch: Any) -> tuple[float, np.ndarray]:
        spec, gen, dt = meta.model, self._gen, torch.float64
        rows = len(fixed) + free
        scale = float(meta.rep_scale)  # head inputs are unit-norm vectors (or their mixtures) times rep_scale
        if basis is not None and basis.shape[1]:
            coef = (torch.randn(free, basis.shape[1], generator=gen, dtype=dt) * scale / math.sqrt(basis.shape[1]))
            coef.requires_grad_()
            make = lambda: coef @ basis.T  # noqa: E731
            params = [coef]
        else:
            x = (torch.randn(free, spec.in_dim, generator=gen, dtype=dt) * scale / math.sqrt(spec.in_dim))
            x.requires_grad_()
            make = lambda: x  # noqa: E731
            params = [x]
        ylog = torch.zeros(rows, spec.out_dim, dtype=dt, requires_grad=True)
        params.append(ylog)
        def distance() -> Any:
            logits = forward(layers, torch.cat([fixed, make()]), activation="relu")
            return gradient_distance(loss_gradients(layers, soft_cross_entropy(logits, torch.softmax(ylog, -1)),
                                                    create_graph=True), target, norm)

        loss, _ = minimise_distance(params, distance, max_evals=self.max_evals, tol=self.tol)
        with torch.no_grad():
            return loss, make().numpy().copy()
