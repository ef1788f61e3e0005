"""Auditing a DP claim in one training run (Steinke, Nasr and Jagielski, NeurIPS 2023, "Privacy Auditing with One
(1) Training Run", Theorem 3 and its p-value).

Setting: m canaries, each included in the training set independently with probability 1/2 (S_i = +1 in, -1 out).
After training, an auditor scores every canary and guesses: "in" for its k+ highest scores, "out" for its k-
lowest, and abstains on the rest (r = k+ + k- guesses, v of them correct). If training is (epsilon, delta)-DP
under adding or removing one example, then

    P[v >= observed] <= P[Binomial(r, p) >= v] + 2 m delta max_{i = 1..v} (1/i) P[v - i <= Binomial(r, p) < v],

with p = e^epsilon / (1 + e^epsilon): :func:`p_value`. The largest epsilon whose p-value stays below alpha is a
lower bound on the true epsilon at confidence 1 - alpha (:func:`epsilon_lower_bound`): the claim "the training is
(epsilon', delta)-DP" is rejected for every epsilon' below it.

veil fixes the guesses before any score is seen: the pairs (k+, k-) of :data:`GUESSES` (those with k+ + k- <= m),
and reports the best bound over them at alpha divided by their number (Bonferroni), so choosing the best pair
costs nothing that is not accounted for (:func:`best_bound`).

Why one run is loose: a canary in the training set shifts its score only on average, so even the best guesses are
right at a rate that certifies far less than the true epsilon of Gaussian noise: :func:`ideal_bound` simulates that
ceiling, and docs/results/dpsgd-audit.md records it beside every audit.
No heavy imports beyond numpy and scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError
from veil.validation import check_int, check_real

__all__ = ["GUESSES", "Bound", "p_value", "epsilon_lower_bound", "best_bound", "ideal_bound"]

#: the (k+, k-) guess counts tried, fixed in advance: "in" only, and as many "in" as "out"
GUESSES: tuple[tuple[int, int], ...] = tuple((k, 0) for k in (10, 30, 100, 300, 1000, 3000)) + tuple(
    (k, k) for k in (30, 100, 300, 1000))


def _check(m: int, r: int, v: int, delta: float) -> tuple[int, int, int, float]:
    m, r, v = (check_int(n, x, minimum=0) for n, x in (("m", m), ("r", r), ("v", v)))
    if not v <= r <= m:
        raise InvalidParameterError(f"need 0 <= v <= r <= m (correct guesses, guesses, canaries), got v={v}, r={r}, "
                                    f"m={m}")
    delta = check_real("delta", delta, low=0.0, high=1.0)
    return m, r, v, delta


def p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """The probability, under the claim that training is (``epsilon``, ``delta``)-DP, of at least ``v`` correct
    guesses out of ``r`` with ``m`` canaries (module docstring): a bound, so small values reject the claim."""
    from scipy.stats import binom

    m, r, v, delta = _check(m, r, v, delta)
    epsilon = check_real("epsilon", epsilon, low=0.0, high=math.inf)
    if v == 0:
        return 1.0
    p = 1.0 / (1.0 + math.exp(-epsilon))  # the accuracy of epsilon-DP randomized response
    tail = float(binom.sf(v - 1, r, p))  # P[W' >= v]
    below = binom.pmf(np.arange(v - 1, -1, -1), r, p)  # P[W' = v-1], P[W' = v-2], ..., P[W' = 0]
    correction = float(np.max(np.cumsum(below) / np.arange(1, v + 1)))
    return min(1.0, tail + 2.0 * m * delta * correction)


def epsilon_lower_bound(m: int, r: int, v: int, delta: float, alpha: float = 0.05) -> float:
    """The largest epsilon (to 1e-6) whose :func:`p_value` is below ``alpha``: with confidence 1 - ``alpha``,
    training is not (epsilon', ``delta``)-DP for any epsilon' below it. 0 when not even epsilon 0 is rejected."""
    m, r, v, delta = _check(m, r, v, delta)
    alpha = check_real("alpha", alpha, low=0.0, high=1.0, low_open=True, high_open=True)
    if p_value(m, r, v, 0.0, delta) >= alpha:
        return 0.0
    lo, hi = 0.0, 1.0
    while p_value(m, r, v, hi, delta) < alpha:  # the p-value rises with epsilon
        lo, hi = hi, 2.0 * hi
        if hi > 1e4:
            return math.inf  # only possible with delta = 0 and perfect guesses
    while hi - lo > 1e-6:
        mid = (lo + hi) / 2.0
        if p_value(m, r, v, mid, delta) < alpha:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class Bound:
    """The best one-run bound over the guesses tried: ``epsilon`` (a lower bound at confidence 1 - ``alpha``),
    made by guessing "in" for the top ``k_in`` scores and "out" for the bottom ``k_out``: ``correct`` of ``r``
    guesses right, with ``m`` canaries; ``tried``: how many (k+, k-) pairs shared ``alpha`` (Bonferroni)."""

    epsilon: float
    k_in: int
    k_out: int
    r: int
    correct: int
    m: int
    alpha: float
    tried: int
    delta: float

    @property
    def precision(self) -> float:
        return self.correct / self.r if self.r else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "precision": self.precision}


def best_bound(scores: Any, included: Any, *, delta: float, alpha: float = 0.05,
               guesses: Sequence[tuple[int, int]] = GUESSES) -> Bound:
    """The best :func:`epsilon_lower_bound` over the (k+, k-) pairs of ``guesses`` that fit m (Bonferroni: each at
    ``alpha`` / their number). ``scores``: higher = more likely included; ``included``: the truth (bool, per
    canary). Ties in the scores are broken by position, which the auditor fixes before looking at them."""
    s = np.asarray(scores, dtype=np.float64)
    truth = np.asarray(included)
    if s.ndim != 1 or truth.shape != s.shape:
        raise DataFormatError(f"scores and included must be 1-D of the same length, got {s.shape} and {truth.shape}")
    if truth.dtype != bool:
        raise DataFormatError(f"included must be booleans, got dtype {truth.dtype}")
    if not np.isfinite(s).all():
        raise DataFormatError("scores must be finite")
    m = len(s)
    pairs = [(a, b) for a, b in guesses if 0 < a + b <= m]
    if not pairs:
        raise InvalidParameterError(f"{m} canaries are too few for any guess count in {list(guesses)}; use at least "
                                    f"{min(a + b for a, b in guesses)} canaries")
    order = np.argsort(-s, kind="stable")
    each = alpha / len(pairs)
    best: Bound | None = None
    for k_in, k_out in pairs:
        right = int(truth[order[:k_in]].sum()) + int((~truth[order[m - k_out:]]).sum() if k_out else 0)
        eps = epsilon_lower_bound(m, k_in + k_out, right, delta, each)
        if best is None or eps > best.epsilon:
            best = Bound(epsilon=eps, k_in=k_in, k_out=k_out, r=k_in + k_out, correct=right, m=m, alpha=alpha,
                         tried=len(pairs), delta=delta)
    assert best is not None
    return best


def ideal_bound(m: int, *, sigma: float, q: float, steps: int, delta: float, alpha: float = 0.05,
                rng: Any = None) -> Bound:
    """The bound a perfect white-box auditor would get from the claimed mechanism itself: m canaries, each in with
    probability 1/2, whose clipped gradient is exactly the clip bound along a direction nothing else touches, in
    ``steps`` Poisson lots of rate ``q``, observed through N(0, sigma^2) noise (in units of the clip), scored by the
    exact log-likelihood ratio. A simulation (``rng`` None: OS entropy), the ceiling of what one run can certify at
    this size; a real auditor's bound below it is the price of a real model, one above it is chance."""
    from veil.random import as_generator

    m = check_int("m", m, minimum=1)
    steps = check_int("steps", steps, minimum=1)
    sigma = check_real("sigma", sigma, low=0.0, high=math.inf, low_open=True)
    q = check_real("q", q, low=0.0, high=1.0, low_open=True)
    gen = as_generator(rng)
    included = gen.random(m) < 0.5
    scores = np.zeros(m)
    for start in range(0, steps, 64):  # in chunks of steps: memory m x 64
        t = min(64, steps - start)
        sampled = (gen.random((m, t)) < q) & included[:, None]
        x = sampled + gen.normal(0.0, sigma, (m, t))
        log_in = math.log(q) + (x - 0.5) / sigma ** 2
        scores += np.logaddexp(math.log1p(-q) if q < 1.0 else -math.inf, log_in).sum(1)
    return best_bound(scores, included, delta=delta, alpha=alpha)
