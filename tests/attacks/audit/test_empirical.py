"""Empirical epsilon lower bounds (veil.attacks.audit.empirical): Clopper-Pearson limits and the distinguishing game.

Statistical assertions state their false-positive rate: a bound at confidence 1 - alpha exceeds
the true epsilon with probability at most alpha, and the tests that rely on that use
alpha = 1e-6 (seeded, so each is deterministic; the rate says how unlikely a failure would be
for another seed).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from veil.attacks.audit.empirical import (DistinguishingGame, GamePair, Statistic, clopper_pearson_lower,
                                         clopper_pearson_upper, epsilon_lower_bound, histogram_statistic,
                                         lookup_statistic, predicted_bounds, projection_statistic)
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError

ALPHA = 1e-6  # false-positive rate of every "bound <= true epsilon" assertion below


# ---------------------------------------------------------------- Clopper-Pearson
def _binom_cdf(k: int, n: int, p: float) -> float:
    """P[Binomial(n, p) <= k], summed term by term (a slow reference, independent of scipy's beta)."""
    return math.fsum(math.comb(n, i) * p ** i * (1.0 - p) ** (n - i) for i in range(k + 1))


def _upper_reference(k: int, n: int, alpha: float) -> float:
    """The p with P[Bin(n, p) <= k] = alpha, by bisection (1 when k = n)."""
    if k == n:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _binom_cdf(k, n, mid) > alpha else (lo, mid)
    return (lo + hi) / 2


@pytest.mark.parametrize("k,n", [(0, 1), (0, 10), (1, 10), (5, 10), (9, 10), (10, 10), (0, 200), (17, 200),
                                 (100, 200), (199, 200)])
@pytest.mark.parametrize("alpha", [0.05, 0.01, 1e-6])
def test_clopper_pearson_matches_references(k, n, alpha):
    upper = clopper_pearson_upper(k, n, alpha)
    lower = clopper_pearson_lower(k, n, alpha)
    assert upper == pytest.approx(_upper_reference(k, n, alpha), abs=1e-9)
    # lower limit: by symmetry, 1 - upper limit of the failures
    assert lower == pytest.approx(1.0 - _upper_reference(n - k, n, alpha), abs=1e-9)
    # scipy's two-sided exact interval at 1 - 2 alpha is the pair of one-sided limits at 1 - alpha
    ci = binomtest(k, n).proportion_ci(confidence_level=1 - 2 * alpha, method="exact")
    assert (lower, upper) == pytest.approx((ci.low, ci.high), abs=1e-9)
    assert 0.0 <= lower <= k / n <= upper <= 1.0


def test_clopper_pearson_vectorises_and_takes_fractional_counts():
    k = np.array([0, 3, 10])
    np.testing.assert_allclose(clopper_pearson_upper(k, 10, 0.05), [clopper_pearson_upper(int(x), 10, 0.05) for x in k])
    a, b, c = (clopper_pearson_upper(x, 100, 0.05) for x in (4.0, 4.5, 5.0))
    assert a < b < c


def test_epsilon_lower_bound_formula():
    b = epsilon_lower_bound(100, 1000, 300, 1000, alpha=0.05)
    fpr_hi, fnr_hi = clopper_pearson_upper(100, 1000, 0.025), clopper_pearson_upper(300, 1000, 0.025)
    expected = max(math.log((1 - fnr_hi) / fpr_hi), math.log((1 - fpr_hi) / fnr_hi))
    assert b.epsilon == pytest.approx(expected) and b.confidence == pytest.approx(0.95)
    assert b.fpr == 0.1 and b.fnr == 0.3 and b.fpr_upper == pytest.approx(fpr_hi)
    assert b.point_estimate == pytest.approx(max(math.log(0.7 / 0.1), math.log(0.9 / 0.3)))
    assert b.epsilon < b.point_estimate
    # swapping the roles of the two inputs gives the same bound
    assert epsilon_lower_bound(300, 1000, 100, 1000, alpha=0.05).epsilon == pytest.approx(b.epsilon)
    # a useless test: floored at 0; no errors at all: finite, grows with n
    assert epsilon_lower_bound(500, 1000, 500, 1000).epsilon == 0.0
    perfect = [epsilon_lower_bound(0, n, 0, n).epsilon for n in (100, 1000, 10000)]
    assert 0 < perfect[0] < perfect[1] < perfect[2] < math.log(10000)
    assert epsilon_lower_bound(0, 100, 0, 100).point_estimate is None
    b.to_dict()
    with pytest.raises(InvalidParameterError):
        epsilon_lower_bound(11, 10, 0, 10)
    with pytest.raises(InvalidParameterError, match="alpha"):
        epsilon_lower_bound(1, 10, 1, 10, alpha=0.0)
    with pytest.raises(InvalidTypeError):
        epsilon_lower_bound(1.5, 10, 1, 10)


def test_predicted_bounds_agree_with_the_bound_on_integer_counts():
    pred = predicted_bounds(np.array([0.1]), np.array([0.7]), 1000, 0.05)[0]
    assert pred == pytest.approx(epsilon_lower_bound(100, 1000, 300, 1000, alpha=0.05).epsilon)


# ---------------------------------------------------------------- games with known epsilon
def _randomized_response(bit: int, eps: float, rng: np.random.Generator):
    keep = math.exp(eps) / (1 + math.exp(eps))
    return lambda n: np.where(rng.random(n) < keep, bit, 1 - bit)


def _laplace(mu: float, eps: float, rng: np.random.Generator):
    return lambda n: mu + rng.laplace(0.0, 1.0 / eps, size=n)


VALUE = Statistic("value", score=lambda out: np.asarray(out, dtype=np.float64))


@pytest.mark.parametrize("make,stat", [(_randomized_response, histogram_statistic()), (_laplace, VALUE)])
def test_known_epsilon_is_bounded_and_nearly_reached(make, stat):
    """Epsilon = 1 exactly (randomized response; Laplace with sensitivity 1 and scale 1)."""
    rng = np.random.default_rng(0)
    pair = GamePair("eps=1", make(0, 1.0, rng), make(1, 1.0, rng), (stat,))
    res = DistinguishingGame([pair], trials=20000, alpha=ALPHA).run()
    assert res.epsilon_lower_bound <= 1.0
    assert res.epsilon_lower_bound > 0.6
    assert res.bound.confidence == 1 - ALPHA and res.trials == 20000 and res.statistic == stat.name
    out = res.to_dict()
    assert out["epsilon_lower_bound"] == res.epsilon_lower_bound and out["selection"]


def test_a_broken_mechanism_is_caught():
    """It claims epsilon = 1 but answers truthfully with probability e^3 / (1 + e^3): epsilon = 3."""
    rng = np.random.default_rng(1)
    pair = GamePair("claims 1", _randomized_response(0, 3.0, rng), _randomized_response(1, 3.0, rng),
                    (histogram_statistic(),))
    res = DistinguishingGame([pair], trials=5000, alpha=ALPHA).run()
    assert 1.0 < res.epsilon_lower_bound <= 3.0


def test_selection_on_separate_runs_does_not_overfit():
    """x = x' (epsilon 0): a histogram over 1000 outputs fitted and thresholded on selection runs finds nothing."""
    rng = np.random.default_rng(2)
    same = lambda n: rng.integers(0, 1000, size=n)  # noqa: E731
    pairs = [GamePair(f"null {i}", same, same, (histogram_statistic(), lookup_statistic("id", np.arange(1000))))
             for i in range(3)]
    res = DistinguishingGame(pairs, trials=2000, alpha=ALPHA).run()
    assert res.epsilon_lower_bound == 0.0
    assert res.fit_trials == 1000 and len(res.selection) == 3 * 2 * 2  # pairs x statistics x orientations
    # what the split prevents: the same histogram fitted, thresholded and scored on the same runs
    a, b = same(1000), same(1000)
    scorer = histogram_statistic().fit(a, b)
    s_a, s_b = scorer(a), scorer(b)
    in_sample = max(epsilon_lower_bound(int((s_a >= t).sum()), 1000, int((s_b < t).sum()), 1000,
                                        alpha=ALPHA).epsilon for t in np.unique(s_b))
    assert in_sample > 1.0  # a spurious "violation" of epsilon = 0


def test_the_game_picks_the_informative_pair_and_statistic():
    rng = np.random.default_rng(3)
    noise = Statistic("noise", score=lambda out: rng.random(len(out)))
    weak = GamePair("weak", _laplace(0, 0.2, rng), _laplace(1, 0.2, rng), (VALUE, noise))
    strong = GamePair("strong", _laplace(0, 2.0, rng), _laplace(1, 2.0, rng), (noise, VALUE))
    res = DistinguishingGame([weak, strong], trials=5000, selection_trials=2000, alpha=ALPHA).run()
    assert res.pair == "strong" and res.statistic == "value" and res.orientation == 1
    assert 1.2 < res.epsilon_lower_bound <= 2.0


def test_game_validation():
    rng = np.random.default_rng(4)
    ok = GamePair("p", _laplace(0, 1, rng), _laplace(1, 1, rng), (VALUE,))
    with pytest.raises(InvalidTypeError):
        DistinguishingGame(ok, trials=100)
    with pytest.raises(InvalidParameterError):
        DistinguishingGame([ok], trials=5)
    with pytest.raises(InvalidTypeError):
        GamePair("p", ok.sample_x, ok.sample_x2, ("value",))
    with pytest.raises(InvalidParameterError, match="exactly one"):
        Statistic("both", score=lambda o: o, fit=lambda a, b: (lambda o: o))
    short = GamePair("short", lambda n: np.zeros(max(n - 1, 0)), ok.sample_x2, (VALUE,))
    with pytest.raises(DataFormatError, match="returned"):
        DistinguishingGame([short], trials=100).run()
    with pytest.raises(InvalidParameterError, match="selection_trials"):
        DistinguishingGame([GamePair("h", ok.sample_x, ok.sample_x2, (histogram_statistic(),))], trials=100,
                           selection_trials=15).run()
    proj = projection_statistic("p", np.array([1.0, -1.0]))
    np.testing.assert_allclose(proj.score(np.array([[1.0, 2.0], [3.0, 1.0]])), [-1.0, 2.0])
