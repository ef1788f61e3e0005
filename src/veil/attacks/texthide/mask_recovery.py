"""Mask-pool recovery: learn TextHide's secret mask pool from the encodings an eavesdropper collects.

TextHide (Huang et al., Findings of EMNLP 2020, Alg. 1) publishes
``e~ = sigma o z`` with ``z = sum_j lambda_j x_j`` a convex mixture of sentence
representations and ``sigma`` one of ``m`` secret +-1 masks, reused across
examples and epochs (Sec. 3.4). The idea is Carlini et al.'s attack on
InstaHide ("An Attack on InstaHide", IEEE S&P 2021; arXiv 2011.05315):
group the encodings that share a secret, then solve for it. Here the shared
secret is the mask, and the representations' anisotropy gives it away:

1. Soft mask estimate per encoding. Sentence embeddings are anisotropic
   (MiniLM's mean has norm ~0.46) and a convex mixture keeps the mean, so
   ``sign(z_j) = sign(mu_j)`` far more often than not. With
   ``z_j ~ N(mu_j, s_j^2)`` the posterior mean of ``sigma_j`` given ``e~_j`` is
   ``tanh(e~_j mu_j / s_j^2)``; ``mu`` is a public corpus's mean and
   ``s_j^2 = mean(e~_j^2) - mu_j^2`` (``e~_j^2`` is mask-invariant).
2. Clustering. Estimates of encodings that share a mask have cosine ~0.3
   (k=4, MiniLM); with different masks the cosine is ~N(0, 1/d) exactly
   (independent random signs), the null all thresholds refer to. Rounds of
   ``seeds_per_round`` random seeds among unclaimed encodings: each seed's
   neighbours (above ``seed_z`` null sds) vote a mask (sign of the summed
   estimates), refined three times by re-collecting the encodings above
   ``member_z / sqrt(d)`` and re-voting. Candidates with fewer than
   ``min_cluster_size`` members or duplicating a known mask are dropped; the
   search stops after two rounds without a new mask. m is thus ESTIMATED
   (``max_masks`` caps it when the attacker is told an upper bound).
3. Second-order refinement (needs a covariance): a vote cannot fix bits where
   ``mu_j ~ 0``. Members are modelled as ``sigma o z``, ``z ~ N(mu, q Cov)``
   (``Cov`` shrunk by ``shrinkage``, ``q`` fitted to the observed second
   moments), so the cluster's mask maximises
   ``sigma^T (Lambda mu o s) - 1/2 sigma^T (Lambda o M) sigma`` (``s``, ``M``:
   the members' first and second moment sums, ``Lambda = (q Cov)^-1``):
   coordinate ascent (ICM) from the vote, at most ``max_sweeps`` sweeps.
   Masks that converge to the same one are merged; masks with fewer than
   ``min_cluster_size`` members above ``member_z`` are dropped.
4. Assignment: each encoding takes its best mask by cosine, or, when the two
   best are within 3 null sds, the best of its ``candidates`` by Gaussian
   likelihood; it stays unassigned (-1) below ``assign_z / sqrt(d)``.
5. Self-training (``refits`` passes, default 1): the assigned encodings,
   unmasked, give in-domain mean and covariance; steps 1-4 run again with
   them, starting from the masks found. A public corpus from another domain
   is then enough to start (a public mean whose SIGN differs from the private
   data's on a coordinate flips that bit in every mask, and the encodings
   cannot reveal it: ``sigma o s`` and ``z o s`` explain them as well).

Departures from Carlini et al.: a closed-form same-secret score from public
statistics (no learned pair classifier), clustering by seeded votes (not
graph colouring), masks solved as a binary quadratic program (not by
gradient descent on images). No index of the private texts is needed.
Scoring (:func:`score_mask_recovery`) compares with a :class:`TextHideTruth`
the attack never sees; a mask and its negation count as the same
(``sigma o z = (-sigma) o (-z)``).

>>> attack = MaskRecovery.from_public(P, rng=0)           # P: public representations (N, d)
>>> rec = attack.recover(observation)                     # RecoveredMasks: rec.masks (m', d), rec.assignment (n,)
>>> score_mask_recovery(rec, truth).metrics["mask_bits"]
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from veil.attacks.base import Attack, AttackResult, Observation, ThreatModel, rng_description
from veil.attacks.texthide.observe import PublicStats, TextHideTruth, _frozen
from veil.validation import check_int, check_real, check_rng
from veil.errors import DataFormatError, InvalidTypeError
from veil.random import RngLike, as_generator

__all__ = ["RecoveredMasks", "MaskRecovery", "MaskRecoveryResult", "score_mask_recovery",
           "evaluate_mask_recovery", "soft_mask_estimates", "vote_masks", "refine_masks"]

_CHUNK = 8192  # rows per block of the (n, m') similarity products
_RERANK_MARGIN = 3.0  # step 4 re-ranks encodings whose two best cosines are closer than this many null sds


@dataclass(frozen=True, repr=False)
class RecoveredMasks:
    """The attacker's output: ``masks`` int8 (m', d) of +-1, ``assignment`` int64 (n,) (-1 = unassigned)."""

    masks: np.ndarray
    assignment: np.ndarray
    config: Mapping[str, Any] = field(default_factory=dict)
    wall_time_s: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "masks", _frozen(self.masks, np.int8))
        object.__setattr__(self, "assignment", _frozen(self.assignment, np.int64))
        object.__setattr__(self, "config", MappingProxyType(dict(self.config)))
        if self.masks.ndim != 2 or self.assignment.ndim != 1:
            raise DataFormatError("masks must be (m', d) and assignment (n,)")
        if self.assignment.size and (self.assignment.min() < -1 or self.assignment.max() >= len(self.masks)):
            raise DataFormatError("assignment holds ids outside [-1, m')")

    @property
    def m_estimate(self) -> int:
        """How many masks the attacker found (its estimate of m)."""
        return int(self.masks.shape[0])

    @property
    def sizes(self) -> np.ndarray:
        """Encodings assigned to each recovered mask."""
        a = self.assignment
        return np.bincount(a[a >= 0], minlength=self.m_estimate)

    def __repr__(self) -> str:
        return (f"RecoveredMasks(m_estimate={self.m_estimate}, dim={self.masks.shape[1]}, n={len(self.assignment)}, "
                f"assigned={int((self.assignment >= 0).sum())})")


# ---------------------------------------------------------------- the algorithm's parts (pure functions)
def soft_mask_estimates(E: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Step 1: float32 (n, d) unit rows ``tanh(e~_j mu_j / s_j^2)`` (the posterior mean of each mask bit)."""
    E64 = E.astype(np.float64)
    second = (E64 ** 2).mean(0)
    s2 = np.maximum(second - mean ** 2, 1e-3 * float(second.mean()) + 1e-30)
    T = np.tanh(E * (mean / s2).astype(np.float32))
    norms = np.linalg.norm(T, axis=1, keepdims=True)
    return np.divide(T, norms, out=np.zeros_like(T), where=norms > 0)


def _signs(x: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, 1.0, -1.0).astype(np.float32)


def _weighted_sums(W: np.ndarray, T: np.ndarray) -> np.ndarray:
    """``W @ T`` for a wide 0/1 matrix W (B, n), computed as (T.T @ W.T).T: several times faster in OpenBLAS."""
    return (T.T @ W.T.astype(np.float32)).T


def vote_masks(T: np.ndarray, assignment: np.ndarray, count: int) -> np.ndarray:
    """float32 (count, d): the sign of the summed estimates of each cluster's members (ties and empty -> +1)."""
    sums = np.zeros((count, T.shape[1]), dtype=np.float64)
    rows = np.flatnonzero(assignment >= 0)
    if len(rows):
        rows = rows[np.argsort(assignment[rows], kind="stable")]
        ids, starts = np.unique(assignment[rows], return_index=True)
        sums[ids] = np.add.reduceat(T[rows].astype(np.float64), starts, axis=0)
    return _signs(sums)


def _precision(E: np.ndarray, stats: PublicStats, shrinkage: float) -> tuple[np.ndarray, float]:
    """Lambda = (q Cov_shrunk)^-1, with q fitted to the observed (mask-invariant) second moments."""
    cov, mu = stats.cov, stats.mean
    diag = np.diag(cov)
    second = (E.astype(np.float64) ** 2).mean(0)
    q = float(np.clip(((second - mu ** 2) * diag).sum() / max(float((diag ** 2).sum()), 1e-30), 1e-3, 10.0))
    shrunk = (1 - shrinkage) * cov + shrinkage * float(diag.mean()) * np.eye(len(mu))
    return np.linalg.inv(q * shrunk), q


def refine_masks(E: np.ndarray, assignment: np.ndarray, masks: np.ndarray, mean: np.ndarray,
                 precision: np.ndarray, *, max_sweeps: int = 10, group: int = 32) -> np.ndarray:
    """Step 3: ICM on ``sigma^T (Lambda mu o s) - 1/2 sigma^T (Lambda o M) sigma`` per cluster, from ``masks``.

    Coordinates are updated in order j = 0..d-1 (sigma_j = sign of its local
    field, ties -> +1), sweep after sweep until no bit changes or
    ``max_sweeps``; vectorised over ``group`` clusters at a time.
    """
    E64 = E.astype(np.float64)
    lmu = precision @ mean
    out = masks.astype(np.float64).copy()
    d = E.shape[1]
    for start in range(0, len(masks), group):
        ids = np.arange(start, min(start + group, len(masks)))
        Q = np.empty((len(ids), d, d))
        h = np.empty((len(ids), d))
        for g, c in enumerate(ids):
            members = E64[assignment == c]
            Q[g] = precision * (members.T @ members)
            np.fill_diagonal(Q[g], 0.0)
            h[g] = lmu * members.sum(0)
        sig = out[ids]
        for _ in range(max_sweeps):
            changed = 0
            for j in range(d):
                new = np.where(h[:, j] - np.einsum("gl,gl->g", Q[:, j, :], sig) >= 0, 1.0, -1.0)
                changed += int((new != sig[:, j]).sum())
                sig[:, j] = new
            if changed == 0:
                break
        out[ids] = sig
    return out.astype(np.float32)


def _best(T: np.ndarray, C: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of T: the ``top`` columns of T @ C.T / sqrt(d) with the largest values (descending), and the values."""
    n, top = len(T), min(top, len(C))
    idx = np.empty((n, top), dtype=np.int64)
    val = np.empty((n, top), dtype=np.float32)
    scale = np.float32(1 / np.sqrt(T.shape[1]))
    for s in range(0, n, _CHUNK):
        S = (T[s:s + _CHUNK] @ C.T) * scale
        if top == 1:
            part = S.argmax(1)[:, None]
        elif top < S.shape[1]:
            part = np.argpartition(-S, top - 1, axis=1)[:, :top]
        else:
            part = np.tile(np.arange(top), (len(S), 1))
        pv = np.take_along_axis(S, part, axis=1)
        order = np.argsort(-pv, axis=1, kind="stable")
        idx[s:s + _CHUNK] = np.take_along_axis(part, order, axis=1)
        val[s:s + _CHUNK] = np.take_along_axis(pv, order, axis=1)
    return idx, val


class MaskRecovery(Attack):
    """Recover TextHide's secret mask pool (and each encoding's mask) from observed encodings alone.

    Parameters
    ----------
    stats: :class:`PublicStats` of a public corpus (mean; covariance for step 3).
    max_masks: None (m is estimated) or an upper bound on m given to the attacker.
    min_cluster_size: smallest group of encodings accepted as sharing a mask.
    seeds_per_round, seed_z, member_z, assign_z: clustering (see the module docstring);
        z values are in standard deviations of the exact null (different masks).
    candidates: masks per encoding re-ranked by Gaussian likelihood in step 4.
    max_sweeps, shrinkage: step 3.
    refits: step 5 passes.
    rng: seed choice. None = OS entropy; an int seed for reproducible experiments.
    """

    name = "mask-recovery"
    citation = ("Carlini et al., An Attack on InstaHide, IEEE S&P 2021 (arXiv 2011.05315), adapted to TextHide "
                "(Huang et al. 2020, Sec. 3.2-3.4); see veil issue 11")
    threat = ThreatModel(observes="TextHide encodings of one client (a training run or inference encodings)",
                         needs=("mean and covariance of original representations of a public corpus",
                                "the public encoder's output dimension"))
    observes = "training-encodings"
    bench_cell = "veil.bench.cells.training_encodings:mask_recovery_cell"

    def run(self, observation: Observation) -> Any:
        """The attack's one verb: :meth:`recover` the secret pool from a training run's encodings."""
        return self.recover(observation)

    @classmethod
    def bench_applies(cls, defense: str, setting: Any) -> bool:
        """A finite, non-empty pool only (m=0 has no mask, m=inf no pool to recover)."""
        return setting.get("m") not in (0, "inf", None)

    @classmethod
    def for_bench(cls, resources: Any) -> "MaskRecovery":
        return cls(resources.stats, rng=resources.seed)

    def __init__(self, stats: PublicStats, *, max_masks: int | None = None, min_cluster_size: int = 3,
                 seeds_per_round: int = 64, seed_z: float = 4.5, member_z: float = 5.0, assign_z: float = 3.0,
                 candidates: int = 10, max_sweeps: int = 10, shrinkage: float = 0.05, refits: int = 1,
                 rng: RngLike = None) -> None:
        if not isinstance(stats, PublicStats):
            raise InvalidTypeError(f"stats must be PublicStats (PublicStats.from_vectors(public_vectors)), "
                                   f"not {type(stats).__name__}")
        self.stats = stats
        self.max_masks = None if max_masks is None else check_int("max_masks", max_masks, minimum=1)
        self.min_cluster_size = check_int("min_cluster_size", min_cluster_size, minimum=1)
        self.seeds_per_round = check_int("seeds_per_round", seeds_per_round, minimum=1)
        self.seed_z = check_real("seed_z", seed_z, low=0.0, high=100.0)
        self.member_z = check_real("member_z", member_z, low=0.0, high=100.0)
        self.assign_z = check_real("assign_z", assign_z, low=0.0, high=100.0)
        self.candidates = check_int("candidates", candidates, minimum=1)
        self.max_sweeps = check_int("max_sweeps", max_sweeps, minimum=0)
        self.shrinkage = check_real("shrinkage", shrinkage, low=0.0, high=1.0)
        self.refits = check_int("refits", refits, minimum=0)
        check_rng(rng)
        self._rng_desc = rng_description(rng)
        self._gen = as_generator(rng)

    @classmethod
    def from_public(cls, vectors: Any, *, source: str = "public vectors", **kwargs: Any) -> MaskRecovery:
        """An attack whose public statistics come from (N, d) public representations."""
        return cls(PublicStats.from_vectors(vectors, source=source), **kwargs)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "public": self.stats.describe(), "max_masks": self.max_masks,
                "min_cluster_size": self.min_cluster_size, "seeds_per_round": self.seeds_per_round,
                "seed_z": self.seed_z, "member_z": self.member_z, "assign_z": self.assign_z,
                "candidates": self.candidates, "max_sweeps": self.max_sweeps, "shrinkage": self.shrinkage,
                "refits": self.refits, "rng": self._rng_desc}

    # ------------------------------------------------------------ the attack
    def recover(self, observation: Observation) -> RecoveredMasks:
        """Recover the mask pool from ``observation`` (its vectors only) -> :class:`RecoveredMasks`."""
        if not isinstance(observation, Observation):
            hint = " (the ground truth is for scoring only)" if isinstance(observation, TextHideTruth) else ""
            raise InvalidTypeError(f"observation must be an Observation of encodings (observe_training_run, "
                                   f"observe_inference, veil.attacks.retrieval.observe){hint}, "
                                   f"not {type(observation).__name__}")
        if observation.dim != self.stats.dim:
            raise DataFormatError(f"the encodings have dimension {observation.dim} but the public statistics have "
                                  f"{self.stats.dim}; compute them with the encoder the defense used")
        start = time.perf_counter()
        E = np.ascontiguousarray(observation.vectors, dtype=np.float32)
        stats, passes, masks = self.stats, [], np.zeros((0, E.shape[1]), dtype=np.float32)
        for p in range(self.refits + 1):
            T = soft_mask_estimates(E, stats.mean)
            centroids, rounds = self._seed(T, masks)  # a refit starts from the previous pass's masks
            masks, assignment, q = self._solve(E, T, centroids, stats)
            passes.append({"stats": stats.source, "rounds": rounds, "candidates": int(len(centroids)),
                           "masks": int(len(masks)), "assigned": int((assignment >= 0).sum()), "variance_factor_q": q})
            ok = np.flatnonzero(assignment >= 0)
            if p == self.refits or len(ok) < 2:
                break
            Z = E[ok].astype(np.float64) * masks[assignment[ok]]  # unmasked: in-domain statistics
            cov = None
            if stats.cov is not None:  # few unmasked rows: lean on the previous covariance (weight d / (n + d))
                w = len(ok) / (len(ok) + E.shape[1])
                cov = w * np.cov(Z, rowvar=False) + (1 - w) * stats.cov
            stats = PublicStats(mean=Z.mean(0), cov=cov, n=len(ok), source=f"encodings unmasked by pass {p + 1}")
        config = {**self.config(), "passes": passes, "n_encodings": int(len(E))}
        return RecoveredMasks(masks=masks.astype(np.int8), assignment=assignment, config=config,
                              wall_time_s=time.perf_counter() - start)

    def _seed(self, T: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, int]:
        """Step 2: candidate masks (float32 +-1 rows) from rounds of seeded votes, after the ``start`` masks."""
        n, d = T.shape
        scale, member = np.float32(1 / np.sqrt(d)), self.member_z / np.sqrt(d)
        t2 = (T.astype(np.float64) ** 2).mean(0)
        usable = np.linalg.norm(T, axis=1) > 0
        cents = start.astype(np.float32)
        best = _best(T, cents, 1)[1][:, 0] if len(cents) else np.full(n, -np.inf, dtype=np.float32)
        idle = rounds = 0
        while idle < 2 and rounds < 10_000:
            free = np.flatnonzero(usable & (best < member))
            if len(free) == 0:
                break
            rounds += 1
            seeds = self._gen.choice(free, size=min(self.seeds_per_round, len(free)), replace=False)
            S = T[seeds] @ T.T
            null_sd = np.sqrt((T[seeds].astype(np.float64) ** 2) @ t2).astype(np.float32)[:, None]  # exact null
            W = S > self.seed_z * null_sd
            C = _signs(_weighted_sums(W, T))
            for _ in range(3):
                W = (C @ T.T) * scale > member
                C = _signs(_weighted_sums(W, T))
            C = C[W.sum(1) >= self.min_cluster_size]
            new: list[np.ndarray] = []
            for c in C:  # greedy de-duplication against known and accepted masks
                known = np.concatenate([cents, np.array(new, dtype=np.float32).reshape(-1, d)])
                if len(known) == 0 or np.abs(known @ c).max() / d <= 0.5:
                    new.append(c)
            if not new:
                idle += 1
                continue
            idle = 0
            added = np.array(new, dtype=np.float32)
            cents = np.concatenate([cents, added])
            best = np.maximum(best, _best(T, added, 1)[1][:, 0])
        return cents, rounds

    def _solve(self, E: np.ndarray, T: np.ndarray, cents: np.ndarray,
               stats: PublicStats) -> tuple[np.ndarray, np.ndarray, float | None]:
        """Steps 3-4: vote and refine each cluster's mask, merge duplicates, assign every encoding."""
        n, d = T.shape
        if len(cents) == 0:
            return np.zeros((0, d), dtype=np.float32), np.full(n, -1, dtype=np.int64), None
        idx, val = _best(T, cents, 1)
        a = np.where(val[:, 0] > self.member_z / np.sqrt(d), idx[:, 0], -1)
        sizes = np.bincount(a[a >= 0], minlength=len(cents))
        keep = np.flatnonzero(sizes >= self.min_cluster_size)
        remap = np.full(len(cents), -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        a = np.where(a >= 0, remap[np.maximum(a, 0)], -1)
        masks = vote_masks(T, a, len(keep))
        q = precision = None
        if stats.cov is not None and len(keep):
            precision, q = _precision(E, stats, self.shrinkage)
            masks = refine_masks(E, a, masks, stats.mean, precision, max_sweeps=self.max_sweeps)
        # merge masks that converged to the same one (keep the larger cluster), cap at max_masks
        sizes = np.bincount(a[a >= 0], minlength=len(masks))
        chosen: list[int] = []
        for c in np.argsort(-sizes, kind="stable"):
            if chosen and np.abs(masks[chosen] @ masks[c]).max() / d > 0.75:
                continue
            chosen.append(int(c))
            if self.max_masks is not None and len(chosen) == self.max_masks:
                break
        masks = masks[np.sort(chosen)]
        # drop masks with fewer than min_cluster_size confident members (noise clusters) and re-assign
        while len(masks):  # ends: masks shrink every pass
            a, cos = self._assign(E, T, masks, precision, stats.mean)
            confident = a[(a >= 0) & (cos > self.member_z / np.sqrt(d))]
            small = np.bincount(confident, minlength=len(masks)) < self.min_cluster_size
            if not small.any():
                return masks, a, q
            masks = masks[~small]
        return masks, np.full(n, -1, dtype=np.int64), q

    def _assign(self, E: np.ndarray, T: np.ndarray, masks: np.ndarray, precision: np.ndarray | None,
                mean: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Step 4: (mask id or -1, cosine with it) per encoding: the best of the top ``candidates`` masks by
        Gaussian likelihood (by cosine without covariance)."""
        n, d = T.shape
        idx, val = _best(T, masks, self.candidates)
        pick = np.zeros(n, dtype=np.int64)
        if precision is not None and idx.shape[1] > 1:
            rows = np.flatnonzero(val[:, 0] - val[:, 1] < _RERANK_MARGIN / np.sqrt(d))  # others: a clear winner
            lam, mu = precision.astype(np.float32), mean.astype(np.float32)
            ll = np.empty((len(rows), idx.shape[1]), dtype=np.float32)
            for s in range(0, len(rows), _CHUNK):
                r = rows[s:s + _CHUNK]
                for j in range(idx.shape[1]):
                    Z = E[r] * masks[idx[r, j]] - mu
                    ll[s:s + _CHUNK, j] = -0.5 * np.einsum("ij,ij->i", Z @ lam, Z)
            if len(rows):
                pick[rows] = ll.argmax(1)
        rows = np.arange(n)
        cos = val[rows, pick]
        return np.where(cos > self.assign_z / np.sqrt(d), idx[rows, pick], -1), cos


# ---------------------------------------------------------------- scoring (needs the truth; never seen by the attack)
@dataclass(frozen=True)
class MaskRecoveryResult(AttackResult):
    """Scores of a mask recovery, plus per pool mask: encodings observed with it and fraction of its bits recovered."""

    per_mask_encodings: tuple[int, ...] = ()
    per_mask_bits: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "per_mask_encodings": list(self.per_mask_encodings),
                "per_mask_bits": list(self.per_mask_bits)}


def _bootstrap_ci(num: np.ndarray, den: np.ndarray | None, level: float, draws: int,
                  gen: np.random.Generator) -> tuple[float, float]:
    """Percentile CI of sum(num)/sum(den) (or mean(num)) over resamples of the pool masks."""
    m = len(num)
    stats = np.empty(draws)
    for s in range(0, draws, 100):
        k = min(100, draws - s)
        pick = gen.integers(0, m, size=(k, m))
        top = num[pick].sum(1)
        stats[s:s + k] = top / m if den is None else top / np.maximum(den[pick].sum(1), 1)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return float(lo), float(hi)


def score_mask_recovery(recovered: RecoveredMasks, truth: TextHideTruth, *, ci_level: float = 0.95,
                        bootstrap: int = 2000, ci_rng: RngLike = 0,
                        observation: Observation | None = None) -> MaskRecoveryResult:
    """Score recovered masks against the truth (sign-symmetric: a mask and its negation are the same).

    Metrics:

    * ``mask_bits``: fraction of pool bits recovered = mean over the pool's
      masks of the best agreement with any recovered mask (0.5 when nothing was
      recovered); CI: percentile bootstrap over pool masks (``bootstrap`` draws).
    * ``masks_exact``: fraction of pool masks recovered exactly (all d bits); Wilson CI over pool masks.
    * ``encodings_exact``: fraction of encodings whose assigned mask equals their
      true mask (unassigned count as failures); CI: percentile bootstrap over
      pool masks, resampling each mask with all its encodings (encodings that
      share a mask are not independent).
    * ``encodings_assigned``: fraction of encodings given a mask; Wilson CI.

    ``ci_rng`` seeds the bootstrap only (default 0: reproducible intervals).
    """
    from veil.metrics.leakage import wilson_interval
    from veil.results import Metric

    if not isinstance(recovered, RecoveredMasks):
        raise InvalidTypeError(f"recovered must be RecoveredMasks (from MaskRecovery.recover), "
                               f"not {type(recovered).__name__}")
    if not isinstance(truth, TextHideTruth):
        raise InvalidTypeError(f"truth must be a TextHideTruth, not {type(truth).__name__}")
    n = truth.n_encodings
    if len(recovered.assignment) != n:
        raise DataFormatError(f"{len(recovered.assignment)} assignments for {n} encodings; score the recovery "
                              "against the truth of the same observation")
    if recovered.m_estimate and recovered.masks.shape[1] != truth.dim:
        raise DataFormatError(f"recovered masks have dimension {recovered.masks.shape[1]}, the pool {truth.dim}")
    if n == 0:
        raise DataFormatError("nothing to score: the truth holds no encodings")
    bootstrap = check_int("bootstrap", bootstrap, minimum=100)
    level = check_real("ci_level", ci_level, low=0.0, high=1.0, low_open=True, high_open=True)
    d, true = truth.dim, truth.masks.astype(np.float32)
    m_true = len(true)
    if recovered.m_estimate:
        agree = np.abs(true @ recovered.masks.T.astype(np.float32))  # exact integers (|entries| <= d < 2^24)
        best = agree.max(1)
    else:
        agree, best = np.zeros((m_true, 0), dtype=np.float32), np.zeros(m_true, dtype=np.float32)
    bits = (d + best) / (2 * d)
    exact_mask = best == d
    a, enc_exact = recovered.assignment, np.zeros(n, dtype=bool)
    ok = a >= 0
    enc_exact[ok] = agree[truth.mask_index[ok], a[ok]] == d
    per_enc = np.bincount(truth.mask_index, minlength=m_true)
    per_exact = np.bincount(truth.mask_index, weights=enc_exact.astype(np.float64), minlength=m_true)
    gen, used = as_generator(ci_rng), per_enc > 0

    def metric(mean: float, count: int, ci: tuple[float, float]) -> Metric:
        return Metric(mean=float(mean), n=int(count), ci_low=ci[0], ci_high=ci[1], ci_level=level)

    metrics = {
        "mask_bits": metric(bits.mean(), m_true, _bootstrap_ci(bits, None, level, bootstrap, gen)),
        "masks_exact": metric(exact_mask.mean(), m_true, wilson_interval(float(exact_mask.sum()), m_true, level)),
        "encodings_exact": metric(enc_exact.mean(), n, _bootstrap_ci(per_exact[used], per_enc[used].astype(float),
                                                                      level, bootstrap, gen)),
        "encodings_assigned": metric(ok.mean(), n, wilson_interval(float(ok.sum()), n, level)),
    }
    config = {**recovered.config, "ci": {"mask_bits": "percentile bootstrap over pool masks",
                                         "masks_exact": "Wilson", "encodings_assigned": "Wilson",
                                         "encodings_exact": "percentile bootstrap over pool masks (clustered)",
                                         "draws": bootstrap, "ci_rng": rng_description(ci_rng)},
              "m_true": truth.pool_size, "masks_used": int(used.sum()), "m_recovered": recovered.m_estimate,
              "encodings_per_used_mask": float(per_enc[used].mean()) if used.any() else 0.0,
              "mask_bits_used": float(bits[used].mean()) if used.any() else 0.0}
    defense = dict(observation.defense) if observation is not None else {"defense": "texthide", "m": truth.pool_size}
    return MaskRecoveryResult(attack=MaskRecovery.name, defense=defense, n_queries=n, metrics=metrics, config=config,
                              wall_time_s=recovered.wall_time_s, per_mask_encodings=tuple(int(c) for c in per_enc),
                              per_mask_bits=tuple(float(b) for b in bits))


def evaluate_mask_recovery(attack: MaskRecovery, observation: Observation, truth: TextHideTruth,
                           **score_kwargs: Any) -> MaskRecoveryResult:
    """``attack.recover(observation)`` (which never sees ``truth``), then :func:`score_mask_recovery`."""
    if not isinstance(attack, MaskRecovery):
        raise InvalidTypeError(f"attack must be a MaskRecovery, not {type(attack).__name__}")
    if not isinstance(truth, TextHideTruth):
        raise InvalidTypeError(f"truth must be a TextHideTruth, not {type(truth).__name__}")
    if isinstance(observation, Observation) and len(observation) != truth.n_encodings:
        raise DataFormatError(f"{len(observation)} encodings observed but the truth describes {truth.n_encodings}")
    recovered = attack.recover(observation)
    return score_mask_recovery(recovered, truth, observation=observation, **score_kwargs)
