"""Significance tests (veil.metrics.stats): exactness against brute force, calibration of the false-positive rate
by simulation (with a stated tolerance), power, and validation.

Calibration tolerance: R simulated runs under H0, each rejecting with probability at most alpha, give a rejection
count stochastically below Binomial(R, alpha); the tests assert the count is at most that law's upper 1e-6
quantile, so a correct test fails them with probability below 1e-6.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from scipy import stats

from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError
from veil.metrics.stats import (Verdict, binomial_test, hit_rate_test, poisson_binomial_tail, poisson_binomial_test,
                                two_sample_test)

FP = 1e-6  # false-positive rate of each statistical assertion below


def upper_quantile(runs: int, alpha: float) -> int:
    """Largest rejection count a test of size <= alpha reaches with probability >= FP over ``runs`` runs."""
    return int(stats.binom.isf(FP, runs, alpha))


# ---------------------------------------------------------------- binomial
def test_binomial_p_value_is_the_exact_upper_tail():
    for hits, n, p0 in [(0, 10, 0.1), (3, 10, 0.1), (37, 1000, 1 / 2000), (1000, 1000, 0.5), (5, 20, 0.0)]:
        v = binomial_test(hits, n, p0)
        expected = sum(math.comb(n, j) * p0 ** j * (1 - p0) ** (n - j) for j in range(hits, n + 1))
        assert v.p_value == pytest.approx(expected, rel=1e-9, abs=1e-300)
        assert v.statistic == hits and v.n == n and v.alpha == 0.05 and v.reject == (v.p_value <= 0.05)
        assert v.test == "exact binomial, one-sided"


@pytest.mark.parametrize(("n", "p0"), [(1000, 1 / 2000), (1000, 1 / 5381), (200, 0.3), (50, 0.5)])
def test_binomial_size_is_at_most_alpha_exactly(n, p0):
    """The exact probability of rejecting under H0 (hit rate = p0) is <= alpha: the rejection region is
    {hits >= c}, and P(Bin(n, p0) >= c) <= alpha."""
    alpha = 0.05
    rejecting = [h for h in range(n + 1) if binomial_test(h, n, p0, alpha=alpha).reject]
    c = rejecting[0]
    assert rejecting == list(range(c, n + 1))  # monotone: more hits never un-rejects
    assert stats.binom.sf(c - 1, n, p0) <= alpha
    assert stats.binom.sf(c - 2, n, p0) > alpha  # and c is the smallest such count (the test is not wasteful)


@pytest.mark.parametrize(("n", "p0"), [(1000, 1 / 2000), (200, 0.3), (60, 0.5)])
def test_simulated_random_attacker_is_flagged_at_most_alpha(n, p0):
    """2000 simulated random attackers (hits ~ Binomial(n, p0)) at alpha = 0.05: the rejection count must stay
    below the Binomial(2000, 0.05) upper 1e-6 quantile."""
    runs, alpha = 2000, 0.05
    hits = np.random.default_rng(0).binomial(n, p0, size=runs)
    rejections = sum(binomial_test(int(h), n, p0, alpha=alpha).reject for h in hits)
    assert rejections <= upper_quantile(runs, alpha)


def test_strong_attacker_is_flagged_and_power_matches_theory():
    assert binomial_test(20, 1000, 1 / 2000).p_value < 1e-20
    # an attacker hitting 0.5% of queries against chance 0.05%: exact power of the alpha=0.05 test
    n, p0, p1, runs = 1000, 1 / 2000, 0.005, 2000
    c = next(h for h in range(n + 1) if binomial_test(h, n, p0).reject)
    power = stats.binom.sf(c - 1, n, p1)
    assert power > 0.8
    hits = np.random.default_rng(1).binomial(n, p1, size=runs)
    rejections = sum(binomial_test(int(h), n, p0).reject for h in hits)
    lo, hi = stats.binom.ppf(FP / 2, runs, power), stats.binom.isf(FP / 2, runs, power)
    assert lo <= rejections <= hi


# ---------------------------------------------------------------- Poisson-binomial
def test_poisson_binomial_tail_matches_enumeration():
    rates = np.array([0.05, 0.3, 0.3, 0.5, 0.01, 0.9, 0.2, 0.3, 0.05, 0.7])
    for hits in range(len(rates) + 2):
        brute = 0.0
        for outcome in itertools.product((0, 1), repeat=len(rates)):
            if sum(outcome) >= hits:
                brute += float(np.prod([r if o else 1 - r for o, r in zip(outcome, rates)]))
        assert poisson_binomial_tail(hits, rates) == pytest.approx(brute, rel=1e-9, abs=1e-15)


def test_poisson_binomial_reduces_to_binomial_and_hit_rate_test_dispatches():
    assert poisson_binomial_test(7, [0.2] * 30).p_value == pytest.approx(binomial_test(7, 30, 0.2).p_value,
                                                                       rel=1e-9)
    equal = hit_rate_test(np.array([1, 0, 0, 1]), np.full(4, 0.25))
    assert equal.test.startswith("exact binomial") and equal == binomial_test(2, 4, 0.25)
    mixed = hit_rate_test(np.array([1, 0, 0, 1]), np.array([0.25, 0.5, 0.25, 0.1]))
    assert mixed.test.startswith("exact Poisson-binomial")


def test_simulated_heterogeneous_random_attacker_is_flagged_at_most_alpha():
    """Random rates that differ per query (duplicated texts, several sources): 2000 simulated runs under H0."""
    gen = np.random.default_rng(2)
    rates = gen.choice([1 / 500, 2 / 500, 4 / 500], size=400)
    runs, alpha = 2000, 0.05
    rejections = sum(hit_rate_test((gen.random(400) < rates).astype(int), rates, alpha=alpha).reject
                     for _ in range(runs))
    assert rejections <= upper_quantile(runs, alpha)


# ---------------------------------------------------------------- two-sample
def _jaccard_like(gen: np.random.Generator, n: int, shift: float = 0.0) -> np.ndarray:
    """Bounded, skewed, heavily tied scores (most random pairs share no word)."""
    return np.where(gen.random(n) < 0.6, 0.0, np.clip(gen.beta(2, 8, n) + shift, 0, 1))


@pytest.mark.parametrize("method", ["permutation", "mann-whitney"])
def test_two_sample_false_positive_rate_at_most_alpha(method):
    """1000 simulated attacks no better than Rand (same score law) at alpha = 0.05."""
    gen = np.random.default_rng(3)
    runs, alpha = 1000, 0.05
    rejections = sum(two_sample_test(_jaccard_like(gen, 60), _jaccard_like(gen, 60), alpha=alpha, method=method,
                                     n_resamples=199, rng=gen).reject for _ in range(runs))
    assert rejections <= upper_quantile(runs, alpha)


@pytest.mark.parametrize("method", ["permutation", "mann-whitney"])
def test_two_sample_detects_a_better_attack_and_is_one_sided(method):
    gen = np.random.default_rng(4)
    better, rand = _jaccard_like(gen, 300, shift=0.15), _jaccard_like(gen, 300)
    v = two_sample_test(better, rand, method=method, rng=0)
    assert v.reject and v.p_value < 1e-3
    worse = two_sample_test(rand * 0.5, rand, method=method, rng=0)
    assert not worse.reject and worse.p_value > 0.5


def test_permutation_details():
    gen = np.random.default_rng(5)
    x, y = gen.random(40), gen.random(50)
    a = two_sample_test(x, y, rng=7, n_resamples=999)
    assert a == two_sample_test(x, y, rng=7, n_resamples=999)  # a seed makes the p-value reproducible
    assert a.statistic == pytest.approx(x.mean() - y.mean())
    assert a.p_value * 1000 == pytest.approx(round(a.p_value * 1000))  # (1 + count) / (R + 1)
    # p-value never 0: (1 + 0) / (R + 1) at the least, even for separated samples
    assert two_sample_test(y + 10, y, rng=0, n_resamples=99).p_value == pytest.approx(0.01)
    # identical constant samples: every relabelling ties the observed value, p = 1
    assert two_sample_test(np.zeros(10), np.zeros(10), rng=0, n_resamples=99).p_value == 1.0


# ---------------------------------------------------------------- the verdict object and validation
def test_verdict_is_frozen_and_exports():
    v = binomial_test(3, 10, 0.1, alpha=0.01)
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.reject = True
    d = v.to_dict()
    assert d == {"test": v.test, "statistic": 3.0, "p_value": v.p_value, "alpha": 0.01, "reject": False,
                 "null": v.null, "n": 10}
    assert isinstance(v, Verdict) and "0.1" in v.null


def test_validation_gives_typed_errors():
    with pytest.raises(InvalidParameterError, match="alpha"):
        binomial_test(1, 10, 0.1, alpha=0.0)
    with pytest.raises(InvalidParameterError, match="alpha"):
        binomial_test(1, 10, 0.1, alpha=1.5)
    with pytest.raises(InvalidTypeError):
        binomial_test(1, 10, 0.1, alpha="0.05")
    with pytest.raises(InvalidParameterError, match="exceed"):
        binomial_test(11, 10, 0.1)
    with pytest.raises(InvalidParameterError):
        binomial_test(-1, 10, 0.1)
    with pytest.raises(InvalidParameterError, match="probability"):
        binomial_test(1, 10, 1.2)
    with pytest.raises(InvalidTypeError):
        binomial_test(1.0, 10, 0.1)
    with pytest.raises(InvalidParameterError):
        binomial_test(0, 0, 0.1)
    with pytest.raises(InvalidParameterError, match="probabilities"):
        poisson_binomial_test(1, [0.1, np.nan])
    with pytest.raises(DataFormatError):
        poisson_binomial_test(1, [])
    with pytest.raises(InvalidParameterError, match="exceed"):
        poisson_binomial_test(3, [0.1, 0.2])
    with pytest.raises(DataFormatError, match="0/1"):
        hit_rate_test(np.array([0, 2]), np.array([0.1, 0.1]))
    with pytest.raises(DataFormatError, match="one 0/1 entry per rate"):
        hit_rate_test(np.array([0, 1, 1]), np.array([0.1, 0.1]))
    with pytest.raises(DataFormatError, match="NaN"):
        two_sample_test([0.1, np.nan], [0.2, 0.3])
    with pytest.raises(DataFormatError):
        two_sample_test([], [0.2])
    with pytest.raises(InvalidParameterError, match="method"):
        two_sample_test([0.1], [0.2], method="t-test")
    with pytest.raises(InvalidParameterError):
        two_sample_test([0.1], [0.2], n_resamples=0)


# --------------------------------------------------------------------------- paired sign-flip permutation test
def test_paired_permutation_test_matches_the_exact_sign_flip_distribution():
    from itertools import product

    from veil.metrics.stats import paired_permutation_test

    scores, baseline = np.array([3.0, 1.0, 2.0, 0.5]), np.array([1.0, 1.5, 0.0, 0.0])
    d = scores - baseline
    flips = [float(np.dot(s, d)) for s in product((-1, 1), repeat=4)]
    exact = sum(f >= d.sum() - 1e-12 for f in flips) / len(flips)
    v = paired_permutation_test(scores, baseline, n_resamples=40000, rng=0)
    assert v.statistic == pytest.approx(d.mean())
    assert v.p_value == pytest.approx(exact, abs=0.01)


def test_paired_permutation_test_is_calibrated_under_the_null_and_finds_a_shift():
    from veil.metrics.stats import paired_permutation_test

    gen = np.random.default_rng(1)
    rejections = 0
    for _ in range(200):
        a, b = gen.random(60), gen.random(60)
        rejections += paired_permutation_test(a, b, n_resamples=499, rng=gen).reject
    assert rejections / 200 <= 0.05 + 3 * (0.05 * 0.95 / 200) ** 0.5
    base = gen.random(60)
    assert paired_permutation_test(base + 0.1, base, n_resamples=999, rng=2).reject
    assert not paired_permutation_test(base - 0.1, base, n_resamples=999, rng=2).reject
    assert paired_permutation_test(base, base, rng=3).p_value == 1.0


def test_paired_permutation_test_rejects_unpaired_input():
    from veil.metrics.stats import paired_permutation_test

    with pytest.raises(DataFormatError, match="pair them"):
        paired_permutation_test([1.0, 2.0], [1.0])
    with pytest.raises(DataFormatError, match="NaN"):
        paired_permutation_test([1.0, float("nan")], [1.0, 2.0])
