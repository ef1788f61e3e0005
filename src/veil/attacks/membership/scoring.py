"""Scoring a membership attack against the truth: ROC, AUC, TPR at low FPR, with bootstrap intervals.

Every membership attack returns one score per candidate (higher: more likely a member; :class:`MembershipScores`);
:func:`score_membership` compares them with :class:`~veil.attacks.membership.observe.MembershipTruth`:

* ``auc``: the area under the ROC curve = P(score of a random member > score of a random non-member) + 1/2
  P(tie) (Mann-Whitney); 0.5 is random guessing;
* ``tpr@1%fpr``, ``tpr@0.1%fpr``: the largest true-positive rate among thresholds whose false-positive rate is at
  most 1% (0.1%) (Carlini et al. 2022, Sec. III: what matters is confident identification of a few members);
* each with a percentile bootstrap interval: members and non-members resampled with replacement separately
  (stratified, so both are present in every resample), ``resamples`` times, from a seeded generator.

The ROC arrays (:class:`Roc`) go to log-scale plots. :func:`roc_reference` and :func:`auc_reference` are slow,
obviously-correct versions for the oracle tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from veil.errors import DataFormatError
from veil.results import Metric

__all__ = ["MembershipScores", "Roc", "MembershipScore", "roc", "auc", "tpr_at_fpr", "score_membership",
           "roc_reference", "auc_reference", "membership_test", "FPRS", "metric_name", "dp_auc_bound"]

#: the false-positive rates at which TPR is reported
FPRS = (0.01, 0.001)


def metric_name(fpr: float) -> str:
    return f"tpr@{fpr * 100:g}%fpr"


@dataclass(frozen=True)
class MembershipScores:
    """What a membership attack returns: one score per candidate (higher = member), its configuration and time."""

    attack: str
    scores: np.ndarray = field(repr=False)
    config: Mapping[str, Any] = field(default_factory=dict)
    defense: Mapping[str, Any] = field(default_factory=dict)
    wall_time_s: float = 0.0

    def __post_init__(self) -> None:
        s = np.array(self.scores, dtype=np.float64, copy=True)
        if s.ndim != 1 or not np.isfinite(s).all():
            raise DataFormatError("membership scores must be a finite 1-d array (one per candidate)")
        s.flags.writeable = False
        object.__setattr__(self, "scores", s)


@dataclass(frozen=True)
class Roc:
    """ROC points (thresholds from high to low), starting at (0, 0) and ending at (1, 1)."""

    fpr: np.ndarray
    tpr: np.ndarray

    def to_dict(self) -> dict[str, list[float]]:
        return {"fpr": [float(v) for v in self.fpr], "tpr": [float(v) for v in self.tpr]}


@dataclass(frozen=True)
class MembershipScore:
    """:func:`score_membership`'s answer: the :class:`~veil.attacks.base.AttackResult` and the ROC curve."""

    result: Any
    roc: Roc


def _check(scores: Any, members: Any) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    m = np.asarray(members)
    if s.ndim != 1 or m.shape != s.shape or m.dtype != np.bool_:
        raise DataFormatError(f"scores and members must be 1-d arrays of one length (members boolean), got "
                              f"{s.shape} and {m.shape} ({m.dtype})")
    if m.all() or not m.any():
        raise DataFormatError("ROC needs both members and non-members")
    return s, m


def _counts(s: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative (true, false) positives at each distinct threshold, from the highest score down."""
    order = np.argsort(-s, kind="stable")
    s, m = s[order], m[order]
    last = np.r_[np.flatnonzero(np.diff(s) != 0), len(s) - 1]  # the last index of each run of equal scores
    tp = np.cumsum(m)[last]
    fp = (last + 1) - tp
    return np.r_[0, tp], np.r_[0, fp]


def roc(scores: Any, members: Any) -> Roc:
    """The ROC curve: a member is predicted when its score is >= a threshold, for every distinct score."""
    s, m = _check(scores, members)
    tp, fp = _counts(s, m)
    return Roc(fpr=fp / (~m).sum(), tpr=tp / m.sum())


def auc(scores: Any, members: Any) -> float:
    """The area under the ROC curve (trapezoids; equals the Mann-Whitney probability with ties counted 1/2)."""
    r = roc(scores, members)
    return float(np.sum(np.diff(r.fpr) * (r.tpr[1:] + r.tpr[:-1]) / 2))


def dp_auc_bound(epsilon: float, delta: float = 0.0) -> float:
    """The largest AUC any membership test can reach against an (epsilon, delta)-DP training algorithm.

    DP bounds every test of "x in" against "x out" (Kairouz, Oh & Viswanath 2015) by
    TPR <= min(e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR), 1). The first two lines cross at
    FPR = (1 - delta) / (1 + e^eps) and the third takes over at 1 - delta; integrating the three pieces, the two
    quadratic terms cancel and the area is (1 - delta)(e^eps + delta) / (1 + e^eps) + delta (with delta = 0:
    e^eps / (1 + e^eps), which randomized response at eps reaches). An AUC above 50% does not contradict DP; one
    above this bound does.
    """
    from veil.validation import check_real

    eps = check_real("epsilon", epsilon, low=0.0, high=np.inf, low_open=True, high_open=True,
                     hint="; the DP guarantee's finite epsilon > 0")
    delta = check_real("delta", delta, low=0.0, high=1.0, high_open=True, hint="; the DP guarantee's delta")
    in_ = np.exp(-np.logaddexp(0.0, -eps))  # e^eps / (1 + e^eps), without overflow
    return float((1.0 - delta) * (in_ + delta * (1.0 - in_)) + delta)


def tpr_at_fpr(scores: Any, members: Any, fpr: float) -> float:
    """The largest TPR among thresholds whose FPR is at most ``fpr`` (0 when even the strictest exceeds it)."""
    r = roc(scores, members)
    ok = r.fpr <= fpr + 1e-12
    return float(r.tpr[ok].max())


def roc_reference(scores: Any, members: Any) -> Roc:
    """Slow reference: for every distinct score t from high to low, the rates of (score >= t)."""
    s, m = _check(scores, members)
    fpr, tpr = [0.0], [0.0]
    for t in sorted(set(s.tolist()), reverse=True):
        hit = s >= t
        tpr.append(float((hit & m).sum() / m.sum()))
        fpr.append(float((hit & ~m).sum() / (~m).sum()))
    return Roc(fpr=np.array(fpr), tpr=np.array(tpr))


def auc_reference(scores: Any, members: Any) -> float:
    """Slow reference: the fraction of (member, non-member) pairs ordered correctly, ties counting 1/2."""
    s, m = _check(scores, members)
    total = 0.0
    for a in s[m]:
        for b in s[~m]:
            total += 1.0 if a > b else (0.5 if a == b else 0.0)
    return total / (m.sum() * (~m).sum())


def _bootstrap(s: np.ndarray, m: np.ndarray, resamples: int, rng: Any) -> np.ndarray:
    """(resamples, 1 + len(FPRS)): AUC and TPR at each FPR on stratified resamples."""
    from veil.random import as_generator

    gen = as_generator(rng)
    pos, neg = s[m], s[~m]
    labels = np.r_[np.ones(len(pos), bool), np.zeros(len(neg), bool)]
    out = np.empty((resamples, 1 + len(FPRS)))
    for b in range(resamples):
        x = np.r_[pos[gen.integers(0, len(pos), len(pos))], neg[gen.integers(0, len(neg), len(neg))]]
        tp, fp = _counts(x, labels)
        tpr, fpr = tp / len(pos), fp / len(neg)
        out[b, 0] = np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2)
        for j, f in enumerate(FPRS):
            out[b, 1 + j] = tpr[fpr <= f + 1e-12].max()
    return out


def score_membership(result: MembershipScores, truth: Any, *, level: float = 0.95, resamples: int = 1000,
                     rng: Any = 0) -> MembershipScore:
    """The attack's AUC and TPR at :data:`FPRS` against ``truth`` (a
    :class:`~veil.attacks.membership.observe.MembershipTruth`), each with a percentile bootstrap interval at
    ``level`` (module docstring); ``rng`` seeds the resampling only."""
    from veil.attacks.base import AttackResult
    from veil.attacks.membership.observe import MembershipTruth
    from veil.validation import check_int, check_real

    if not isinstance(result, MembershipScores):
        from veil.errors import InvalidTypeError

        raise InvalidTypeError(f"result must be a MembershipScores (what a membership attack's run returns), not "
                               f"{type(result).__name__}")
    if not isinstance(truth, MembershipTruth):
        truth = MembershipTruth(np.asarray(truth))
    level = check_real("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    resamples = check_int("resamples", resamples, minimum=1)
    s, m = _check(result.scores, truth.members)
    curve = roc(s, m)
    point = [auc(s, m), *(tpr_at_fpr(s, m, f) for f in FPRS)]
    boot = _bootstrap(s, m, resamples, rng)
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2], axis=0)
    names = ["auc", *(metric_name(f) for f in FPRS)]
    metrics = {k: Metric(mean=float(v), n=len(s), ci_low=float(a), ci_high=float(b), ci_level=level)
               for k, v, a, b in zip(names, point, lo, hi)}
    config = {**dict(result.config), "scoring": {"ci": f"percentile bootstrap, stratified, {resamples} resamples",
                                                 "members": int(m.sum()), "non_members": int((~m).sum())}}
    res = AttackResult(attack=result.attack, defense=result.defense, n_queries=len(s), metrics=metrics,
                       config=config, wall_time_s=result.wall_time_s)
    return MembershipScore(result=res, roc=curve)


def membership_test(scores: Any, members: Any, *, alpha: float = 0.05) -> Any:
    """One-sided Mann-Whitney U test: do members score higher than non-members? (a
    :class:`~veil.metrics.stats.Verdict`). Exact under H0 whenever the target's answers do not depend on which
    candidates were members: membership is a uniformly random half of the candidates, drawn independently of
    everything the attacker computes, so every split of the scores is equally likely. ``statistic`` is the AUC."""
    from scipy.stats import mannwhitneyu

    from veil.metrics.stats import Verdict, check_alpha

    alpha = check_alpha(alpha)
    s, m = _check(scores, members)
    res = mannwhitneyu(s[m], s[~m], alternative="greater")
    return Verdict(test="Mann-Whitney U, one-sided (members score higher)", statistic=auc(s, m),
                   p_value=float(res.pvalue), alpha=alpha, reject=bool(res.pvalue <= alpha),
                   null="members' and non-members' scores are exchangeable (AUC 0.5)", n=len(s))
