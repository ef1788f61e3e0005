"""Exact sampling of DeepCandidate's exponential mechanism: bounds, decisions, goodness of fit, the old float path.

Oracles: :mod:`decimal` (``Decimal.exp`` is correctly rounded) at 300 digits
for e^{-gamma} and for the level CDF. Statistical tests: chi-square at
ALPHA = 1e-6 (each can fail by chance with probability 1e-6).
"""

from __future__ import annotations

import math
import warnings
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from veil.attacks.audit import audit_sentdp
from veil.defenses.sentdp import DEPTHS, DeepCandidate
from veil.defenses.sentdp.sampling import FIRST_BITS, ExactSampler, GeneratorBits, OSBits, exp_neg_bounds
from veil.errors import InvalidParameterError, PrivacyLeakWarning

ALPHA = 1e-6  # false-positive rate of every statistical test in this file
DIGITS = 300


def _dec(q: Fraction) -> Decimal:
    return Decimal(q.numerator) / Decimal(q.denominator)


def _exp_neg(gamma: Fraction) -> Decimal:
    return (-_dec(gamma)).exp()


# ---------------------------------------------------------------- e^{-gamma} bounds
gammas = st.one_of(
    st.just(Fraction(0)),
    st.integers(0, 300).map(Fraction),
    st.fractions(min_value=0, max_value=1, max_denominator=2**60),
    st.fractions(min_value=0, max_value=250, max_denominator=10**6),
    st.floats(min_value=0, max_value=200, allow_nan=False, allow_infinity=False).map(Fraction),
)


@settings(max_examples=300, deadline=None)
@given(gamma=gammas, precision=st.sampled_from([8, 64, 96, 160]))
def test_exp_neg_bounds_bracket_the_true_value(gamma, precision):
    lo, hi = exp_neg_bounds(gamma, precision)
    assert isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi <= 1 << precision
    with localcontext() as ctx:
        ctx.prec = DIGITS
        true = _exp_neg(gamma) * (Decimal(2) ** precision)
        slack = true * Decimal(10) ** (20 - DIGITS)  # the oracle's own rounding, far below one unit
        assert Decimal(lo) <= true + slack and Decimal(hi) >= true - slack
    assert hi - lo <= 3  # tight: a few units of 2^-precision
    if gamma == 0:
        assert lo == hi == 1 << precision


def test_exp_neg_bounds_refuses_bad_gamma():
    for bad in (Fraction(-1, 3), 0.5, 1):
        with pytest.raises(InvalidParameterError):
            exp_neg_bounds(bad, 64)


# ---------------------------------------------------------------- level decisions (oracle)
class ScriptedBits:
    """The first ``randbits`` call returns ``first``; later ones come from a seeded generator. Records every call."""

    def __init__(self, first: int, seed: int = 0) -> None:
        self.first, self.calls = first, []
        self.rest = GeneratorBits(np.random.default_rng(seed))

    def randbits(self, k: int) -> int:
        x = self.first if not self.calls else self.rest.randbits(k)
        self.calls.append((k, x))
        return x

    def randbelow(self, n: int) -> int:
        return self.rest.randbelow(n)

    def interval(self) -> tuple[Fraction, Fraction]:
        """The interval of V the bits read so far pin down."""
        v, nbits = 0, 0
        for k, x in self.calls:
            v, nbits = (v << k) | x, nbits + k
        return Fraction(v, 1 << nbits), Fraction(v + 1, 1 << nbits)


def _level_cdf(sampler: ExactSampler, counts, levels) -> list[Decimal]:
    """A_t / W for t = 0..T at 300 digits."""
    weights = [c * _exp_neg(sampler.gamma(level)) for c, level in zip(counts, levels)]
    total = sum(weights)
    out, acc = [Decimal(0)], Decimal(0)
    for w in weights:
        acc += w
        out.append(acc / total)
    return out


@st.composite
def level_cases(draw):
    eps = draw(st.sampled_from([1e-3, 0.1, 1.0, 2.5, 10.0, 30.0, 1 / 3]))
    u = np.asarray(draw(st.lists(st.integers(-30, 30).map(lambda x: x / 2), min_size=2, max_size=40)))
    return eps, u, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=150, deadline=None)
@given(case=level_cases())
def test_every_level_decision_is_the_exact_inverse_cdf(case):
    """For random and boundary-hugging first draws, the chosen level is the one the exact CDF gives for EVERY V
    that the bits read are consistent with (so the output is exactly the inverse CDF of a uniform V)."""
    eps, u, seed = case
    sampler = ExactSampler(eps)
    _, _, counts, levels = sampler.group(u)
    with localcontext() as ctx:
        ctx.prec = DIGITS
        cdf = _level_cdf(sampler, counts, levels)
        rng = np.random.default_rng(seed)
        firsts = [int(rng.integers(0, 2**63)) * 2 + int(rng.integers(0, 2)) for _ in range(5)]
        # draws whose first 64 bits straddle a boundary A_t / W: the sampler must read more bits
        hugging = [int(b * (Decimal(2) ** FIRST_BITS)) for b in cdf[1:-1]]
        for first in firsts + hugging:
            bits = ScriptedBits(first, seed)
            t = sampler.select_level(counts, levels, bits)
            low, high = bits.interval()
            assert cdf[t] <= _dec(low) and _dec(high) <= cdf[t + 1], (t, first)
        for first in hugging:
            bits = ScriptedBits(first, seed)
            sampler.select_level(counts, levels, bits)
            if len(counts) > 1:
                assert len(bits.calls) > 1  # the first 64 bits cannot decide: V's interval contains a boundary


def test_grouping_on_and_off_the_half_grid():
    s = ExactSampler(2.0)
    keys, present, counts, levels = s.group(np.array([3.0, 1.0, 3.0, 2.5, 1.0, 1.0]))
    assert counts == [2, 1, 3] and levels == [0, 1, 4]  # gaps 0, 1/2 and 2 in halves
    assert [s.gamma(x) for x in levels] == [0, Fraction(1, 2), 2]  # epsilon * gap / 2
    np.testing.assert_array_equal(keys == present[2], [False, True, False, False, True, True])
    keys, present, counts, levels = s.group(np.array([0.1, 0.3, 0.1]))  # not on the 1/2 grid: exact Fractions
    assert counts == [1, 2] and levels[0] == 0 and levels[1] == Fraction(2.0) * (Fraction(0.3) - Fraction(0.1)) / 2
    for bad in (np.array([]), np.array([1.0, np.nan]), np.ones((2, 2))):
        with pytest.raises(InvalidParameterError):
            s.draw(bad, OSBits())
    with pytest.raises(InvalidParameterError):
        ExactSampler(0.0)


# ---------------------------------------------------------------- goodness of fit
def _chisquare(counts: np.ndarray, p: np.ndarray) -> float:
    n = counts.sum()
    assert (n * p >= 5).all()  # the chi-square approximation holds on every cell
    return float(stats.chisquare(counts, n * p).pvalue)


def _exact_probabilities(u: np.ndarray, eps: float) -> np.ndarray:
    with localcontext() as ctx:
        ctx.prec = DIGITS
        w = [(_dec(Fraction(eps) * Fraction(float(x)) / 2)).exp() for x in u]
        total = sum(w)
        return np.asarray([float(x / total) for x in w])


@pytest.mark.parametrize("u", [np.array([0, 1, 2, 3, 3, 4, 5, 7.0]), np.array([-3.5, -2, -2, -1.5, -1, -0.5, 0, 0]),
                               np.array([0.1, 0.25, 0.7, 1.3, 2.2, 2.2, 3.9, 4.4])])
def test_exact_sampler_fits_the_exponential_mechanism_seeded(u):
    """Seeded path, 20 000 draws, m = 8 (integer, half-integer and off-grid utilities), chi-square at alpha 1e-6."""
    sampler, bits = ExactSampler(1.0), GeneratorBits(np.random.default_rng(20260))
    counts = np.bincount([sampler.draw(u, bits) for _ in range(20_000)], minlength=len(u))
    pvalue = _chisquare(counts, _exact_probabilities(u, 1.0))
    assert pvalue > ALPHA, f"exact sampler does not fit exp(eps u / 2) (p = {pvalue:.3g})"


def _real_ish():
    """m = 8 candidates on a ray out of a 2-D cloud of k = 11 sentences: depths spread over 4-5 levels.

    (tukey-min: 5, 4, 3, 3, 0, ...; appendix: half-integers, as k is odd.)
    """
    rng = np.random.default_rng(17)
    S = rng.standard_normal((11, 2))
    F = S.mean(axis=0) + np.column_stack([np.linspace(0, 2.2, 8), np.linspace(0, -0.8, 8)])
    V = np.random.default_rng(3).standard_normal((6, 2))
    return S, F, V


@pytest.mark.parametrize("depth", DEPTHS)
def test_deepcandidate_samples_fit_probabilities_seeded(depth):
    """DeepCandidate.sample / release (seeded) against probabilities, m = 8, chi-square at alpha 1e-6."""
    S, F, V = _real_ish()
    with pytest.warns(PrivacyLeakWarning):
        mech = DeepCandidate(candidates=F, epsilon=1.0, depth=depth, rng=4242)
    P = mech.projections(V)
    u = mech.utilities(S, P)
    assert len(np.unique(u)) >= 4  # the utilities are spread: the test has something to test
    p = mech.probabilities(S, P)
    np.testing.assert_allclose(p, _exact_probabilities(u, 1.0), rtol=1e-12)
    counts = np.bincount(mech.release([S] * 12_000, P).indices, minlength=len(F))
    counts += np.bincount([mech.sample(S, P).index for _ in range(3_000)], minlength=len(F))
    pvalue = _chisquare(counts, p)
    assert pvalue > ALPHA, f"samples do not follow probabilities (p = {pvalue:.3g})"


def test_deepcandidate_samples_fit_probabilities_os_entropy():
    """The default path (rng=None: ``secrets``), 15 000 releases, chi-square at alpha 1e-6.

    Unseeded, so this is a genuine statistical test: it fails by chance with
    probability 1e-6 (and with a different sample each run).
    """
    S, F, V = _real_ish()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rng=None must not warn
        mech = DeepCandidate(candidates=F, epsilon=1.0)
    assert isinstance(mech._bits, OSBits) and mech.config()["sampler"] == "exact" and not mech.config()["seeded"]
    P = mech.projections(V)
    p = mech.probabilities(S, P)
    counts = np.bincount(mech.release([S] * 15_000, P).indices, minlength=len(F))
    pvalue = _chisquare(counts, p)
    assert pvalue > ALPHA, f"OS-entropy samples do not follow probabilities (p = {pvalue:.3g})"


# ---------------------------------------------------------------- the old float64 path
def _old_float_draw(log_p: np.ndarray, uniform01: float) -> int:
    """DeepCandidate's sampler before the exact one (verbatim logic): float64 exp, cumsum, inverse CDF."""
    cdf = np.cumsum(np.exp(log_p))
    return int(min(np.searchsorted(cdf, uniform01 * cdf[-1], side="right"), len(cdf) - 1))


def _old_log_probs(u: np.ndarray, eps: float) -> np.ndarray:
    scores = eps * u / 2.0
    shifted = scores - scores.max()
    return shifted - np.log(np.exp(shifted).sum())


def _old_realised_probabilities(log_p: np.ndarray) -> list[Fraction]:
    """The old path's exact output distribution for a uniform ``j / 2^53``, j uniform in [0, 2^53) (veil's uniforms).

    The output is non-decreasing in j, so each candidate owns an interval of
    j, found by binary search.
    """
    m, grid = len(log_p), 1 << 53

    def first_j_reaching(i: int) -> int:
        lo, hi = 0, grid
        while lo < hi:
            mid = (lo + hi) // 2
            if _old_float_draw(log_p, mid / grid) >= i:
                hi = mid
            else:
                lo = mid + 1
        return lo

    edges = [0] + [first_j_reaching(i) for i in range(1, m)] + [grid]
    return [Fraction(edges[i + 1] - edges[i], grid) for i in range(m)]


def test_old_float_path_breaks_the_ratio_and_the_exact_sampler_does_not():
    """Sensitivity-1 neighbours u = (3, 0), u' = (2, 0) at epsilon = 25 (within veil's meaningful range).

    The float path computes e^{-37.5} ~ 5e-17 for candidate 1 under u, and
    1 + 5e-17 rounds to 1 in the cumsum: candidate 1's realised probability is
    EXACTLY 0 under u, and about 1.4e-11 under u' (e^{-25}): the realised
    ratio is infinite, not <= e^25. The exact mechanism's probabilities
    (300-digit decimals) are within e^epsilon, and the exact sampler does
    release candidate 1 under u (the all-ones first 64 bits, a positive-
    probability event, select it).
    """
    eps = 25.0
    u, u2 = np.array([3.0, 0.0]), np.array([2.0, 0.0])
    assert np.abs(u - u2).max() <= 1  # what one replaced sentence can do to a depth
    q = _old_realised_probabilities(_old_log_probs(u, eps))
    q2 = _old_realised_probabilities(_old_log_probs(u2, eps))
    assert sum(q) == 1 and sum(q2) == 1
    assert q[1] == 0 and q2[1] > 0  # realised ratio q2[1] / q[1] = infinity > e^25
    assert float(q2[1]) == pytest.approx(math.exp(-25), rel=0.05)

    with localcontext() as ctx:
        ctx.prec = DIGITS
        w = [[(_dec(Fraction(eps) * Fraction(x) / 2)).exp() for x in v] for v in (u, u2)]
        exact = [[x / sum(row) for x in row] for row in w]
        bound = Decimal(eps).exp()
        for i in range(2):
            ratio = exact[0][i] / exact[1][i]
            assert 1 / bound <= ratio <= bound
        assert exact[0][1] > 0

    sampler = ExactSampler(eps)
    assert sampler.draw(u, ScriptedBits((1 << FIRST_BITS) - 1)) == 1  # V >= 1 - 2^-64 > 1 / (1 + e^{-37.5})
    assert sampler.draw(u, ScriptedBits(0)) == 0


# ---------------------------------------------------------------- the exact audit with the new sampler
def test_exact_audit_passes_and_records_the_sampler():
    rng = np.random.default_rng(5)
    F = rng.standard_normal((60, 5))
    docs = [rng.standard_normal((int(rng.integers(2, 9)), 5)) for _ in range(4)]
    mech = DeepCandidate(candidates=F, epsilon=3.0, n_projections=8)
    sweep = audit_sentdp(mech, docs, epsilons=(1.0, 3.0), neighbours_per_document=12,
                         pool=rng.standard_normal((10, 5)), rng=1)
    assert sweep.passed and sweep.config["mechanism"]["sampler"] == "exact"
