"""DeepCandidate (epsilon-SentDP, Meehan et al. 2022): oracle, distribution, validation and statistical tests."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from veil.defenses.sentdp import DeepCandidate
from veil.defenses.sentdp.depth import DEPTHS, ProjectionSet, depth_fast, depth_reference
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, PrivacyLeakWarning

ALPHA = 1e-6  # false-positive rate of every statistical test in this file


def _mech(F, epsilon=1.0, **kw):
    return DeepCandidate(candidates=F, epsilon=epsilon, **kw)


@st.composite
def depth_cases(draw, integer: bool):
    """(S, F, vectors): small random sizes; rows duplicated and candidates copied from sentences.

    ``integer=True`` uses small integer coordinates and integer projection
    vectors, so every projection is exact in float64 and ties are exact ties
    (whatever the order of summation); ``integer=False`` uses floats.
    """
    k, m, p, d = (draw(st.integers(1, 7)), draw(st.integers(1, 9)), draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if integer:
        S = rng.integers(-2, 3, size=(k, d)).astype(np.float64)
        F = rng.integers(-2, 3, size=(m, d)).astype(np.float64)
        V = rng.integers(-2, 3, size=(p, d)).astype(np.float64)
        V[np.all(V == 0, axis=1), 0] = 1.0
    else:
        S, F = rng.standard_normal((k, d)), rng.standard_normal((m, d))
        V = rng.standard_normal((p, d))
        V /= np.linalg.norm(V, axis=1, keepdims=True)
    for _ in range(draw(st.integers(0, 3))):  # duplicated sentences
        S[rng.integers(k)] = S[rng.integers(k)]
    for _ in range(draw(st.integers(0, 3))):  # duplicated candidates
        F[rng.integers(m)] = F[rng.integers(m)]
    for _ in range(draw(st.integers(0, 3))):  # candidates equal to sentences
        F[rng.integers(m)] = S[rng.integers(k)]
    return S, F, V


@pytest.mark.parametrize("depth", DEPTHS)
@settings(max_examples=150, deadline=None)
@given(case=st.one_of(depth_cases(integer=True), depth_cases(integer=False)))
def test_depth_fast_matches_the_reference_loop(depth, case):
    S, F, V = case
    fast = depth_fast(S, ProjectionSet.build(V, F), depth)
    ref = depth_reference(S, F, V, depth)
    np.testing.assert_array_equal(fast, ref)
    mech = _mech(F, depth=depth)
    np.testing.assert_array_equal(mech.utilities(S, mech.projections(V)), ref)
    k = len(S)
    if depth == "tukey-min":
        assert ((0 <= ref) & (ref <= k)).all()
    else:
        assert ((-k / 2 <= ref) & (ref <= 0)).all()


def test_exact_ties_count_on_both_sides():
    # one projection e_1; sentences at 0, 1, 1, 2; candidates at 1 (tie with two sentences), 0, 2, 3
    S = np.array([[0.0], [1.0], [1.0], [2.0]])
    F = np.array([[1.0], [0.0], [2.0], [3.0]])
    V = np.array([[1.0]])
    # ge = #{s >= f}: 3, 4, 1, 0; le = #{s <= f}: 3, 1, 4, 4
    np.testing.assert_array_equal(depth_fast(S, ProjectionSet.build(V, F), "tukey-min"), [3, 1, 1, 0])
    np.testing.assert_array_equal(depth_fast(S, ProjectionSet.build(V, F), "appendix"), [-1, -2, -1, -2])
    for depth in DEPTHS:
        np.testing.assert_array_equal(depth_fast(S, ProjectionSet.build(V, F), depth),
                                      depth_reference(S, F, V, depth))


@pytest.mark.parametrize("k", [127, 128, 255, 256, 32767, 32768])
def test_depth_fast_at_count_type_boundaries(k):
    """Counts are stored in the smallest integer type that holds 0..k: check k on both sides of each limit."""
    rng = np.random.default_rng(k)
    S = rng.integers(-3, 4, size=(k, 2)).astype(np.float64)  # many exact ties
    F = np.vstack([S[:2], [[0.0, 0.0], [50.0, 50.0]]])
    V = np.array([[1.0, 0.0], [1.0, 1.0]])
    for depth in DEPTHS:
        np.testing.assert_array_equal(depth_fast(S, ProjectionSet.build(V, F), depth),
                                      depth_reference(S, F, V, depth))


@pytest.fixture()
def data():
    rng = np.random.default_rng(3)
    F = rng.standard_normal((40, 6))
    S = rng.standard_normal((9, 6))
    return F, S


@pytest.mark.filterwarnings("ignore:epsilon=.* is above:veil.errors.PrivacyLeakWarning")  # huge epsilon on purpose
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("epsilon", [1e-3, 0.5, 3.0, 30.0, 1e4])
def test_probabilities_sum_to_one(data, depth, epsilon):
    F, S = data
    mech = _mech(F, epsilon, depth=depth)
    P = mech.projections(np.random.default_rng(0).standard_normal((7, 6)))
    p = mech.probabilities(S, P)
    assert p.shape == (40,) and (p >= 0).all()
    # rounding: each log p is off by a few ulps of |top score| + log m, the sum by m more ulps
    top = epsilon * np.abs(mech.utilities(S, P)).max() / 2
    assert math.isclose(p.sum(), 1.0, rel_tol=0, abs_tol=4 * np.finfo(float).eps * (top + math.log(40) + 40))
    lp = mech.log_probabilities(S, P)
    assert np.isfinite(lp).all() and (lp <= 0).all()
    # the distribution as a function of the utilities, at this or another epsilon
    assert np.array_equal(mech.log_probabilities_of(mech.utilities(S, P)), lp)
    with pytest.raises(InvalidParameterError, match="finite epsilon > 0"):
        mech.log_probabilities_of(mech.utilities(S, P), 0.0)


@pytest.mark.parametrize("depth", DEPTHS)
def test_tiny_epsilon_gives_the_uniform_distribution(data, depth):
    F, S = data
    P = _mech(F).projections(np.random.default_rng(1).standard_normal((5, 6)))
    u = _mech(F, depth=depth).utilities(S, P)
    spread = u.max() - u.min()
    assert spread > 0  # otherwise the test says nothing
    for eps in (1e-2, 1e-6, 1e-12):
        p = _mech(F, eps, depth=depth).probabilities(S, P)
        # exact bounds of the exponential mechanism: every ratio p_i / p_j is within e^{+-eps * spread / 2}
        bound = math.exp(eps * spread / 2)
        assert (p * 40 <= bound * (1 + 1e-12)).all() and (p * 40 >= (1 - 1e-12) / bound).all()
    np.testing.assert_allclose(_mech(F, 1e-12, depth=depth).probabilities(S, P), 1 / 40, rtol=1e-10)


@pytest.mark.filterwarnings("ignore:epsilon=.* is above:veil.errors.PrivacyLeakWarning")  # huge epsilon on purpose
@pytest.mark.parametrize("depth", DEPTHS)
def test_large_epsilon_concentrates_on_the_deepest_candidates(data, depth):
    F, S = data
    P = _mech(F).projections(np.random.default_rng(2).standard_normal((5, 6)))
    eps = 400.0
    mech = _mech(F, eps, depth=depth)
    u = mech.utilities(S, P)
    p = mech.probabilities(S, P)
    top = u == u.max()
    # utilities live on a grid of step 1 (tukey-min) or 1/2 (appendix): every other candidate has
    # probability at most e^{-eps * step / 2} times a deepest one's
    step = 1.0 if depth == "tukey-min" else 0.5
    assert p[top].sum() >= 1 - len(F) * (math.exp(-eps * step / 2) + np.finfo(float).eps)
    np.testing.assert_allclose(p[top], p[top][0], rtol=1e-12)


@pytest.mark.filterwarnings("ignore:epsilon=.* is above:veil.errors.PrivacyLeakWarning")  # huge epsilon on purpose
def test_sampling_uses_the_deepest_at_huge_epsilon(data):
    F, S = data
    mech = _mech(F, 1e6)
    P = mech.projections()
    u = mech.utilities(S, P)
    for _ in range(20):
        assert u[mech.sample(S, P).index] == u.max()


# ---------------------------------------------------------------- validation
def test_bad_inputs_raise_typed_errors(data):
    F, S = data
    mech = _mech(F)
    with pytest.raises(DataFormatError, match="no sentences"):
        mech.utilities(np.empty((0, 6)))
    bad = S.copy()
    bad[2, 3] = np.nan
    with pytest.raises(DataFormatError, match="NaN"):
        mech.sample(bad)
    with pytest.raises(DataFormatError, match="dimension"):
        mech.probabilities(np.ones((3, 5)))
    with pytest.raises(DataFormatError, match="2-D"):
        mech.utilities(np.ones(6))
    with pytest.raises(InvalidTypeError):
        mech.utilities(S.tolist())
    for eps in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(InvalidParameterError, match="epsilon"):
            _mech(F, eps)
    for eps in ("1", None, True):
        with pytest.raises(InvalidTypeError, match="epsilon"):
            _mech(F, eps)
    with pytest.raises(InvalidParameterError, match="non-empty"):
        _mech(np.empty((0, 6)))
    with pytest.raises(InvalidParameterError, match="NaN"):
        _mech(np.full((3, 6), np.nan))
    with pytest.raises(InvalidTypeError):
        _mech(F.tolist())
    with pytest.raises(InvalidParameterError, match="depth"):
        _mech(F, depth="median")
    with pytest.raises(InvalidParameterError, match="n_projections"):
        _mech(F, n_projections=0)
    with pytest.raises(InvalidParameterError, match="projections"):
        mech.projections(np.ones((3, 5)))
    with pytest.raises(InvalidTypeError):
        mech.release(S)
    # a projection set built for other candidates
    other = _mech(np.random.default_rng(9).standard_normal((12, 6)))
    with pytest.raises(InvalidParameterError, match="other candidates"):
        mech.utilities(S, other.projections())
    other_dim = _mech(np.random.default_rng(9).standard_normal((40, 4)))
    with pytest.raises(InvalidParameterError, match="other candidates"):
        mech.utilities(S, other_dim.projections())


def test_projection_set_of_same_shape_but_other_candidates_is_refused(data):
    F, S = data
    other = _mech(np.random.default_rng(9).standard_normal(F.shape))
    with pytest.raises(InvalidParameterError):
        _mech(F).utilities(S, other.projections())


# ---------------------------------------------------------------- randomness
def test_seeded_construction_warns_and_reproduces(data):
    F, S = data
    with pytest.warns(PrivacyLeakWarning, match="seed"):
        a = _mech(F, 2.0, rng=7)
    with pytest.warns(PrivacyLeakWarning):
        b = _mech(F, 2.0, rng=7)
    pa, pb = a.projections(), b.projections()
    np.testing.assert_array_equal(pa.vectors, pb.vectors)
    assert [a.sample(S, pa).index for _ in range(30)] == [b.sample(S, pb).index for _ in range(30)]
    ra, rb = a.release([S, S[:3]]), b.release([S, S[:3]])
    np.testing.assert_array_equal(ra.indices, rb.indices)
    assert a.config()["seeded"] and ra.epsilon == 2.0


def test_default_rng_is_unseeded_and_draws_differ():
    F = np.random.default_rng(5).standard_normal((1000, 4))
    S = np.random.default_rng(6).standard_normal((5, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rng=None must not warn
        a, b = _mech(F, 1e-9), _mech(F, 1e-9)
    assert not a.config()["seeded"]
    assert not np.array_equal(a.projections().vectors, b.projections().vectors)
    P = a.projections()
    # nearly uniform over 1000 candidates: 40 equal draws in a row have probability ~1e-120
    assert [a.sample(S, P).index for _ in range(40)] != [b.sample(S, P).index for _ in range(40)]


@pytest.mark.parametrize("depth", DEPTHS)
def test_samples_follow_the_exact_distribution(depth):
    """Chi-square goodness of fit of ``sample`` against ``probabilities`` for a fixed projection set (alpha 1e-6)."""
    rng = np.random.default_rng(11)
    F = rng.standard_normal((12, 3))
    S = rng.standard_normal((8, 3))
    with pytest.warns(PrivacyLeakWarning):
        mech = _mech(F, 1.5, depth=depth, rng=12345)
    P = mech.projections()
    p = mech.probabilities(S, P)
    n = 20_000
    counts = np.bincount([mech.sample(S, P).index for _ in range(n)], minlength=len(F))
    # merge cells with expected count < 5 into one (the chi-square approximation needs it)
    small = n * p < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(n * p[~small], n * p[small].sum())
    if not small.any():
        obs, exp = obs[:-1], exp[:-1]
    assert len(obs) >= 3  # the test has something to test
    pvalue = stats.chisquare(obs, exp).pvalue
    assert pvalue > ALPHA, f"samples do not follow probabilities (p = {pvalue:.3g})"
    # release() (one projection set for the whole call) follows the same distribution
    rel = mech.release([S] * 5_000, P)
    counts = np.bincount(rel.indices, minlength=len(F))
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(5_000 * p[~small], 5_000 * p[small].sum())
    if not small.any():
        obs, exp = obs[:-1], exp[:-1]
    assert stats.chisquare(obs, exp).pvalue > ALPHA


def test_guarantee_is_data(data):
    F, _ = data
    mech = _mech(F, 3.0)
    assert mech.guarantee.kind == "sentdp" and mech.guarantee.epsilon == 3.0 and mech.guarantee.formal
    assert mech.config()["epsilon"] == 3.0 and mech.config()["m"] == 40


def test_complex_or_boolean_arrays_are_refused(data):
    F, S = data
    with pytest.raises(InvalidParameterError):
        _mech(F.astype(np.complex128))
    with pytest.raises(DataFormatError):
        _mech(F).utilities(S.astype(np.complex128))
    with pytest.raises(DataFormatError):
        _mech(F).utilities(S > 0)
