"""The one-run bound (Steinke, Nasr and Jagielski 2023): its p-value against direct sums, the epsilon it inverts to,
and the fixed guess counts with their Bonferroni share."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from veil.attacks.audit.one_run import GUESSES, best_bound, epsilon_lower_bound, p_value
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError


def _slow_p(m, r, v, eps, delta):
    """The theorem's bound written out term by term."""
    p = math.exp(eps) / (1 + math.exp(eps))
    tail = sum(binom.pmf(w, r, p) for w in range(v, r + 1))
    correction = max(sum(binom.pmf(w, r, p) for w in range(v - i, v)) / i for i in range(1, v + 1))
    return min(1.0, tail + 2 * m * delta * correction)


@pytest.mark.parametrize("m,r,v,eps,delta", [(100, 40, 30, 0.5, 0.0), (100, 40, 30, 0.5, 1e-4), (1000, 300, 250, 1.2,
                                                                                                    1e-5),
                                              (50, 10, 10, 2.0, 1e-3), (20, 20, 3, 0.0, 0.0)])
def test_p_value_is_the_theorem_term_by_term(m, r, v, eps, delta):
    assert p_value(m, r, v, eps, delta) == pytest.approx(_slow_p(m, r, v, eps, delta), rel=1e-9, abs=1e-15)


def test_perfect_guesses_without_delta_invert_in_closed_form():
    # all r guesses right and delta 0: p-value = p^r, so the bound solves (e^eps / (1 + e^eps))^r = alpha
    r, alpha = 100, 0.05
    want = math.log(alpha ** (1 / r) / (1 - alpha ** (1 / r)))
    assert epsilon_lower_bound(r, r, r, 0.0, alpha) == pytest.approx(want, abs=1e-5)


def test_chance_level_guesses_certify_nothing_and_the_bound_grows_with_accuracy():
    assert epsilon_lower_bound(1000, 500, 250, 1e-5) == 0.0
    bounds = [epsilon_lower_bound(1000, 500, v, 1e-5) for v in (300, 350, 400, 450)]
    assert bounds == sorted(bounds) and bounds[0] > 0
    # a bound really is where the p-value crosses alpha
    e = bounds[2]
    assert p_value(1000, 500, 400, e - 1e-3, 1e-5) < 0.05 <= p_value(1000, 500, 400, e + 1e-3, 1e-5)
    # delta makes it weaker, never stronger
    assert epsilon_lower_bound(1000, 500, 400, 1e-3) < epsilon_lower_bound(1000, 500, 400, 0.0)


def test_best_bound_spends_alpha_over_the_fixed_guess_counts():
    rng = np.random.default_rng(0)
    included = rng.random(2000) < 0.5
    scores = included * 2.0 + rng.normal(size=2000)
    b = best_bound(scores, included, delta=1e-5)
    assert b.tried == len([g for g in GUESSES if sum(g) <= 2000]) and (b.k_in, b.k_out) in GUESSES
    assert b.epsilon == pytest.approx(epsilon_lower_bound(2000, b.r, b.correct, 1e-5, 0.05 / b.tried), abs=1e-9)
    assert b.correct == included[np.argsort(-scores, kind="stable")[:b.k_in]].sum() + (
        (~included[np.argsort(-scores, kind="stable")[2000 - b.k_out:]]).sum() if b.k_out else 0)
    # scores that say nothing certify (almost surely) nothing
    assert best_bound(rng.normal(size=2000), included, delta=1e-5).epsilon == 0.0


def test_bad_input_is_refused():
    with pytest.raises(InvalidParameterError):
        p_value(10, 11, 3, 1.0, 0.0)
    with pytest.raises(InvalidTypeError):
        p_value(10, 5, 3.0, 1.0, 0.0)
    with pytest.raises(InvalidParameterError):
        epsilon_lower_bound(10, 5, 3, 0.0, alpha=0.0)
    with pytest.raises(DataFormatError):
        best_bound([1.0, 2.0], [True], delta=0.0)
    with pytest.raises(DataFormatError):
        best_bound([1.0, np.nan], [True, False], delta=0.0)
    with pytest.raises(InvalidParameterError, match="too few"):
        best_bound([1.0, 2.0], [True, False], delta=0.0)


def test_the_ideal_auditor_certifies_more_when_the_noise_is_smaller_and_never_beyond_the_truth():
    from veil.attacks.audit.one_run import ideal_bound

    loud = ideal_bound(4000, sigma=4.0, q=1.0, steps=1, delta=1e-5, rng=0).epsilon
    quiet = ideal_bound(4000, sigma=1.0, q=1.0, steps=1, delta=1e-5, rng=0).epsilon
    # the Gaussian mechanism with sigma 1 (in units of the sensitivity) is about (4.5, 1e-5)-DP: a valid bound stays
    # below that, and a much noisier mechanism certifies much less
    assert 0 <= loud < quiet < 4.5 and loud < 0.5
    assert ideal_bound(2000, sigma=1.0, q=0.3, steps=20, delta=1e-5, rng=1).m == 2000
