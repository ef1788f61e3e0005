"""Significance tests for attack verdicts: does an attack beat random guessing, at a stated alpha?

A leakage table needs a verdict per cell ("this attack finds more than chance"),
and "the mean lies inside Rand's CI" is not a test: its false-positive rate is
unstated and it compares a point to an interval of another noisy estimate.
veil computes every verdict with one of these tests instead, each returning a
frozen :class:`Verdict` (test name, statistic, p-value, alpha, reject):

* :func:`binomial_test`: exact one-sided binomial test of a hit count against
  a KNOWN random rate p0 (H0: hit probability <= p0; H1: > p0). For Identity,
  random guessing over an index of n distinct texts hits with p0 = 1/n per
  query. Uses ``scipy.stats.binomtest`` (exact tail sum, no approximation).
* :func:`poisson_binomial_test`: the same when the random rate differs per
  query (e.g. an index holding a text twice, or "any of the k sources": the
  chance that a random entry is one of a query's sources). The exact tail of
  the Poisson-binomial law is computed by convolving one binomial pmf per
  distinct rate (no approximation). :func:`hit_rate_test` picks between the
  two.
* :func:`two_sample_test`: for metrics whose random-guessing law is not known
  in closed form (Jaccard, TF-IDF and SBERT similarity), the attack's
  per-query scores against Rand's per-query scores. Default: a one-sided
  PERMUTATION test of the difference of means (H0: the two samples are
  exchangeable, i.e. the attack's scores have the same law as Rand's; H1:
  larger mean). Why this test: (1) the pages report means, so the test
  statistic is the reported quantity; (2) it assumes nothing about the score
  distribution, and these scores are bounded, skewed and heavily tied (most
  Jaccard scores of random pairs are 0), where a t-test's normal approximation
  and Mann-Whitney's tie-corrected normal approximation are both only
  asymptotic; (3) with the p-value ``(1 + #{permuted >= observed}) / (R + 1)``
  its false-positive rate is at most alpha for ANY number of resamples R
  (Phipson and Smyth 2010, "Permutation p-values should never be zero").
  ``method="mann-whitney"`` gives the one-sided Mann-Whitney U test
  (``scipy.stats.mannwhitneyu``) instead, which tests stochastic dominance
  rather than means.
* :func:`paired_permutation_test`: per-query scores of an attack and of a
  baseline on the SAME queries (e.g. the token F1 of an inversion and of the
  inverter run on an unrelated public vector, text by text): a one-sided
  sign-flip permutation test of the mean paired difference (H0: each
  difference is symmetric about 0), with the same p-value rule.

All tests are one-sided ("greater"): a privacy verdict asks whether the attack
finds MORE than chance. Nothing here corrects for multiple comparisons; a page
testing many cells should say so (or divide alpha).

scipy is imported inside the functions that need it.
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.random import RngLike, as_generator

__all__ = ["Verdict", "DEFAULT_ALPHA", "bootstrap_mean", "binomial_test", "poisson_binomial_test",
           "poisson_binomial_tail", "hit_rate_test", "two_sample_test", "paired_hits_test", "paired_permutation_test",
           "check_alpha", "clopper_pearson", "TWO_SAMPLE_METHODS"]

DEFAULT_ALPHA = 0.05
TWO_SAMPLE_METHODS = ("permutation", "mann-whitney")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one one-sided significance test.

    ``test``: which test; ``statistic``: its statistic (hit count, difference
    of means, U); ``p_value``; ``alpha``: the stated false-positive rate;
    ``reject``: ``p_value <= alpha`` (H0 rejected: the attack beats random);
    ``null``: H0 in words; ``n``: the sample size (queries; for two-sample
    tests the attack's).
    """

    test: str
    statistic: float
    p_value: float
    alpha: float
    reject: bool
    null: str = ""
    n: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_alpha(alpha: Any) -> float:
    """``alpha`` as a float in (0, 1), or a typed error."""
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, numbers.Real):
        raise InvalidTypeError(f"alpha must be a real number in (0, 1), e.g. 0.05, got {type(alpha).__name__}")
    alpha = float(alpha)
    if not 0.0 < alpha < 1.0:
        raise InvalidParameterError(f"alpha must be in (0, 1), e.g. 0.05, got {alpha}")
    return alpha


def _check_count(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if int(value) < minimum:
        raise InvalidParameterError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_rate(name: str, p: Any) -> float:
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, numbers.Real):
        raise InvalidTypeError(f"{name} must be a real number in [0, 1], got {type(p).__name__}")
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise InvalidParameterError(f"{name} must be a probability in [0, 1], got {p}")
    return p


def _verdict(test: str, statistic: float, p_value: float, alpha: float, null: str, n: int) -> Verdict:
    p_value = float(p_value)
    p_value = 1.0 if p_value != p_value else min(1.0, max(0.0, p_value))  # NaN (no evidence) never rejects
    return Verdict(test=test, statistic=float(statistic), p_value=p_value, alpha=alpha, reject=bool(p_value <= alpha),
                   null=null, n=int(n))


def binomial_test(hits: int, n: int, p0: float, *, alpha: float = DEFAULT_ALPHA) -> Verdict:
    """Exact one-sided binomial test: is ``hits`` of ``n`` trials more than a random rate ``p0`` gives?

    p-value = P(Binomial(n, p0) >= hits). Rejects (``reject=True``: the attack
    beats random) when p-value <= ``alpha``; under H0 that happens with
    probability at most ``alpha``.

    >>> binomial_test(37, 1000, 1 / 2000).reject
    True
    """
    from scipy.stats import binomtest

    alpha = check_alpha(alpha)
    n = _check_count("n", n, 1)
    hits = _check_count("hits", hits, 0)
    if hits > n:
        raise InvalidParameterError(f"hits ({hits}) cannot exceed the number of trials n ({n})")
    p0 = _check_rate("p0", p0)
    p = binomtest(hits, n, p0, alternative="greater").pvalue
    return _verdict("exact binomial, one-sided", hits, p, alpha, f"hit rate <= {p0:.6g} (random guessing)", n)


def _rates(rates: Any) -> np.ndarray:
    r = np.asarray(rates, dtype=np.float64) if not isinstance(rates, np.ndarray) else rates.astype(np.float64)
    if r.ndim != 1 or len(r) == 0:
        raise DataFormatError(f"rates must be a non-empty 1-D array (one random rate per trial), got shape {r.shape}")
    if not np.isfinite(r).all() or (r < 0).any() or (r > 1).any():
        raise InvalidParameterError("rates must be probabilities in [0, 1]")
    return r


def poisson_binomial_tail(hits: int, rates: Any) -> float:
    """P(S >= hits) for S a sum of independent Bernoulli(rates[i]): exact, by convolving binomial pmfs.

    Trials are grouped by distinct rate; each group of g trials at rate p
    contributes a Binomial(g, p) pmf (scipy), and the pmfs are convolved.
    """
    from scipy.stats import binom

    r = _rates(rates)
    values, counts = np.unique(r, return_counts=True)
    pmf = np.ones(1)
    for p, g in zip(values, counts):
        pmf = np.convolve(pmf, binom.pmf(np.arange(g + 1), g, p))
    return float(min(1.0, pmf[hits:].sum())) if hits < len(pmf) else 0.0


def poisson_binomial_test(hits: int, rates: Any, *, alpha: float = DEFAULT_ALPHA) -> Verdict:
    """Exact one-sided test of a hit count when trial i hits by chance with its own rate ``rates[i]``.

    p-value = P(S >= hits), S ~ Poisson-binomial(rates). With equal rates this
    is :func:`binomial_test`.
    """
    alpha = check_alpha(alpha)
    r = _rates(rates)
    hits = _check_count("hits", hits, 0)
    if hits > len(r):
        raise InvalidParameterError(f"hits ({hits}) cannot exceed the number of trials ({len(r)})")
    p = poisson_binomial_tail(hits, r)
    return _verdict("exact Poisson-binomial, one-sided", hits, p, alpha,
                    f"hit rates <= per-query random rates (mean {r.mean():.6g})", len(r))


def hit_rate_test(hits: Any, rates: Any, *, alpha: float = DEFAULT_ALPHA) -> Verdict:
    """Test per-query 0/1 ``hits`` against per-query random ``rates``: binomial if all rates are equal, else
    Poisson-binomial (both exact)."""
    h = np.asarray(hits)
    r = _rates(rates)
    if h.ndim != 1 or len(h) != len(r):
        raise DataFormatError(f"hits must be 1-D with one 0/1 entry per rate ({len(r)}), got shape {h.shape}")
    if not np.isin(h, (0, 1)).all():
        raise DataFormatError("hits must be 0/1 per query")
    count = int(h.sum())
    if (r == r[0]).all():
        return binomial_test(count, len(r), float(r[0]), alpha=alpha)
    return poisson_binomial_test(count, r, alpha=alpha)


def _scores(name: str, x: Any) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64) if not isinstance(x, np.ndarray) else x.astype(np.float64)
    if a.ndim != 1 or len(a) == 0:
        raise DataFormatError(f"{name} must be a non-empty 1-D array of per-query scores, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise DataFormatError(f"{name} contains NaN or inf")
    return a


def two_sample_test(scores: Any, baseline: Any, *, alpha: float = DEFAULT_ALPHA, method: str = "permutation",
                    n_resamples: int = 9999, rng: RngLike = None) -> Verdict:
    """One-sided two-sample test: are the attack's per-query ``scores`` larger than ``baseline``'s (Rand)?

    ``method="permutation"`` (default; see the module docstring for why):
    statistic = mean(scores) - mean(baseline); p-value = (1 + #{resampled
    statistic >= observed}) / (n_resamples + 1) over random relabellings of the
    pooled scores. ``rng`` draws the relabellings (None = OS entropy; an int
    seed makes the p-value reproducible). ``method="mann-whitney"``: scipy's
    one-sided Mann-Whitney U (statistic U of ``scores``); ``n_resamples`` and
    ``rng`` are unused.
    """
    alpha = check_alpha(alpha)
    x, y = _scores("scores", scores), _scores("baseline", baseline)
    if method not in TWO_SAMPLE_METHODS:
        raise InvalidParameterError(f"method must be one of {', '.join(TWO_SAMPLE_METHODS)}, got {method!r}")
    if method == "mann-whitney":
        from scipy.stats import mannwhitneyu

        res = mannwhitneyu(x, y, alternative="greater")
        return _verdict("Mann-Whitney U, one-sided", res.statistic, res.pvalue, alpha,
                        "scores not stochastically larger than the baseline's", len(x))
    n_resamples = _check_count("n_resamples", n_resamples, 1)
    gen = as_generator(rng)
    pooled = np.concatenate([x, y])
    n1 = len(x)
    observed = float(x.mean() - y.mean())
    # the difference of means is increasing in the first group's sum (the pooled total is fixed)
    total = float(pooled.sum())
    obs_sum = float(x.sum())
    tol = 1e-9 * max(1.0, abs(total))  # float summation order must not break ties against the observed value
    chunk = max(1, min(n_resamples, (1 << 22) // len(pooled)))
    extreme, done = 0, 0
    while done < n_resamples:
        c = min(chunk, n_resamples - done)
        perm = gen.permuted(np.broadcast_to(pooled, (c, len(pooled))), axis=1)
        extreme += int((perm[:, :n1].sum(axis=1) >= obs_sum - tol).sum())
        done += c
    p = (1 + extreme) / (n_resamples + 1)
    return _verdict(f"permutation (difference of means, {n_resamples} resamples), one-sided", observed, p, alpha,
                    "scores exchangeable with the baseline's", len(x))


def paired_hits_test(hits: Any, baseline: Any, *, alpha: float = DEFAULT_ALPHA) -> Verdict:
    """Exact one-sided McNemar test: on the SAME targets, does the attack hit more often than a baseline?

    ``hits`` and ``baseline`` are 0/1 per target (the attack's and the baseline's hit on it). Only the discordant
    targets carry evidence: with b = #(attack hits, baseline misses) and c = #(the reverse), H0 says each
    discordant target is a fair coin, and p-value = P(Binomial(b + c, 1/2) >= b). No discordant target: p = 1.
    """
    from scipy.stats import binomtest

    alpha = check_alpha(alpha)
    x, y = _scores("hits", hits), _scores("baseline", baseline)
    if len(x) != len(y):
        raise DataFormatError(f"hits has {len(x)} targets, baseline {len(y)}: pair them target by target")
    if not np.isin(x, (0.0, 1.0)).all() or not np.isin(y, (0.0, 1.0)).all():
        raise DataFormatError("hits and baseline must be 0/1 per target")
    b, c = int(((x == 1) & (y == 0)).sum()), int(((x == 0) & (y == 1)).sum())
    p = binomtest(b, b + c, 0.5, alternative="greater").pvalue if b + c else 1.0
    return _verdict(f"exact McNemar, one-sided ({b} vs {c} discordant targets)", b - c, p, alpha,
                    "the attack hits no more often than the baseline on the same targets", len(x))


def paired_permutation_test(scores: Any, baseline: Any, *, alpha: float = DEFAULT_ALPHA, n_resamples: int = 9999,
                            rng: RngLike = None) -> Verdict:
    """One-sided paired sign-flip permutation test: on the SAME queries, are the attack's ``scores`` larger than
    the ``baseline``'s on average?

    statistic = mean(scores - baseline); under H0 each paired difference is symmetric about 0, so its sign is
    flipped at random in every resample; p-value = (1 + #{resampled mean >= observed}) / (n_resamples + 1) (never
    zero, false-positive rate at most alpha for any ``n_resamples``). ``rng`` draws the signs (None: OS entropy;
    an int seed makes the p-value reproducible). All differences zero: p = 1.
    """
    alpha = check_alpha(alpha)
    x, y = _scores("scores", scores), _scores("baseline", baseline)
    if len(x) != len(y):
        raise DataFormatError(f"scores has {len(x)} queries, baseline {len(y)}: pair them query by query")
    n_resamples = _check_count("n_resamples", n_resamples, 1)
    d = x - y
    observed = float(d.mean())
    name = f"paired sign-flip permutation (mean difference, {n_resamples} resamples), one-sided"
    null = "each paired difference symmetric about 0"
    if not np.any(d):
        return _verdict(name, observed, 1.0, alpha, null, len(d))
    gen = as_generator(rng)
    tol = 1e-9 * max(1.0, float(np.abs(d).sum()))
    chunk = max(1, min(n_resamples, (1 << 22) // len(d)))
    extreme, done = 0, 0
    while done < n_resamples:
        c = min(chunk, n_resamples - done)
        signs = gen.integers(0, 2, size=(c, len(d)), dtype=np.int8) * 2 - 1
        extreme += int(((signs * d).sum(axis=1) >= d.sum() - tol).sum())
        done += c
    return _verdict(name, observed, (1 + extreme) / (n_resamples + 1), alpha, null, len(d))


def clopper_pearson(hits: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact two-sided (Clopper-Pearson) interval for a binomial proportion: ``hits`` successes in ``n`` trials.

    Unlike a percentile bootstrap, whose interval collapses to a point when every unit is a success (or none is),
    it keeps its coverage there: at ``hits == n`` the lower limit is ``(alpha/2) ** (1/n)``.
    """
    n = _check_count("n", n, 1)
    hits = _check_count("hits", hits, 0)
    if hits > n:
        raise InvalidParameterError(f"hits must be at most n ({n}), got {hits}")
    if not 0.0 < float(level) < 1.0:
        raise InvalidParameterError(f"level must be in (0, 1), e.g. 0.95, got {level!r}")
    from scipy.stats import beta

    a = (1.0 - float(level)) / 2.0
    low = 0.0 if hits == 0 else float(beta.ppf(a, hits, n - hits + 1))
    high = 1.0 if hits == n else float(beta.ppf(1.0 - a, hits + 1, n - hits))
    return low, high


def bootstrap_mean(x: Any, *, seed: int, level: float = 0.95, draws: int = 2000) -> Any:
    """The mean of the entries of ``x`` as a :class:`~veil.results.Metric` with a percentile bootstrap interval
    (``draws`` resamples of the entries, numpy ``default_rng(seed)``)."""
    from veil.results import Metric

    v = np.asarray(x, dtype=np.float64).ravel()
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise InvalidParameterError(f"bootstrap_mean needs finite values, got {v.size} entries"
                                    + ("" if v.size == 0 else " with a NaN or infinity"))
    means = v[np.random.default_rng(seed).integers(0, v.size, size=(draws, v.size))].mean(axis=1)
    tail = 100 * (1 - level) / 2
    return Metric(float(v.mean()), n=int(v.size), ci_low=float(np.percentile(means, tail)),
                  ci_high=float(np.percentile(means, 100 - tail)), ci_level=level)
