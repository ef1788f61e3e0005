"""veil.defenses.truncation: the clip-average-Laplace SentDP baseline (Meehan et al. 2022, App. A.3)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from veil.defenses import get_defense
from veil.defenses import truncation as truncation_module
from veil.defenses.truncation import Truncation, laplace_noise
from veil.errors import DataFormatError, InvalidParameterError, InvalidTypeError, PrivacyLeakWarning

ALPHA = 1e-6  # family-wise false-positive rate of every statistical test in this file
ULP = 2.0**-52


def _box(d=5, seed=0):
    rng = np.random.default_rng(seed)
    lower = rng.uniform(-2, 0, d)
    return lower, lower + 10.0 ** rng.uniform(-2, 1, d)  # widths from 0.01 to 10


def _mech(epsilon=2.0, d=5, **kw):
    lower, upper = _box(d)
    return Truncation(lower=lower, upper=upper, epsilon=epsilon, **kw)


# ------------------------------------------------------------ construction and fit
def test_fit_takes_the_central_interval_of_public_documents():
    X = np.random.default_rng(1).standard_normal((2001, 7)) * np.arange(1, 8)
    mech = Truncation.fit(X, epsilon=3.0)
    np.testing.assert_array_equal(mech.lower, np.quantile(X, 0.125, axis=0))
    np.testing.assert_array_equal(mech.upper, np.quantile(X, 0.875, axis=0))
    inside = ((X >= mech.lower) & (X <= mech.upper)).mean(axis=0)
    assert np.all(np.abs(inside - 0.75) <= 1.0 / 2001 + 1e-12)  # linear quantiles: off by at most one row
    assert mech.coverage == 0.75 and mech.dim == 7 and mech.epsilon == 3.0
    full = Truncation.fit(X.astype(np.float32), epsilon=1.0, coverage=1.0)
    np.testing.assert_array_equal(full.lower, X.astype(np.float32).min(axis=0))
    np.testing.assert_array_equal(full.upper, X.astype(np.float32).max(axis=0))


def test_constructor_copies_and_freezes_the_box():
    lower, upper = _box()
    mech = Truncation(lower=lower, upper=upper, epsilon=1.0)
    lower[0] = 99.0
    assert mech.lower[0] != 99.0 and not mech.lower.flags.writeable and not mech.width.flags.writeable
    np.testing.assert_array_equal(mech.width, mech.upper - mech.lower)


@pytest.mark.parametrize("epsilon", [0.0, -1.0, float("nan"), float("inf")])
def test_epsilon_must_be_finite_and_positive(epsilon):
    with pytest.raises(InvalidParameterError, match="epsilon"):
        _mech(epsilon)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        Truncation.fit(np.zeros((3, 2)), epsilon=epsilon)


@pytest.mark.parametrize("coverage", [0.0, -0.5, 1.5, float("nan")])
def test_coverage_must_be_in_0_1(coverage):
    with pytest.raises(InvalidParameterError, match="coverage"):
        Truncation.fit(np.zeros((3, 2)), epsilon=1.0, coverage=coverage)


def test_bad_types_and_boxes_are_refused():
    lower, upper = _box()
    with pytest.raises(InvalidTypeError):
        Truncation(lower=lower, upper=upper, epsilon="1")
    with pytest.raises(InvalidTypeError):
        Truncation(lower=list(lower), upper=upper, epsilon=1.0)
    with pytest.raises(InvalidTypeError):
        Truncation(lower=lower, upper=upper, epsilon=1.0, rng=1.5)
    with pytest.raises(InvalidParameterError, match="lower <= upper"):
        Truncation(lower=upper, upper=lower, epsilon=1.0)
    with pytest.raises(InvalidParameterError, match="same box"):
        Truncation(lower=lower[:3], upper=upper, epsilon=1.0)
    with pytest.raises(InvalidParameterError, match="finite"):
        Truncation(lower=np.array([0.0, np.nan]), upper=np.array([1.0, 1.0]), epsilon=1.0)
    with pytest.raises(TypeError):
        Truncation(lower, upper, 1.0)  # keyword-only
    with pytest.raises(InvalidTypeError):
        Truncation.fit([[0.0, 1.0]], epsilon=1.0)
    with pytest.raises(DataFormatError, match="NaN"):
        Truncation.fit(np.array([[0.0, np.nan]]), epsilon=1.0)
    with pytest.raises(DataFormatError, match="non-empty"):
        Truncation.fit(np.zeros((0, 3)), epsilon=1.0)


def test_bad_documents_are_refused():
    mech = _mech()
    with pytest.raises(DataFormatError, match="no sentences"):
        mech.privatize(np.zeros((0, 5)))
    with pytest.raises(DataFormatError, match="NaN"):
        mech.privatize(np.array([[0.0, 1.0, np.nan, 0.0, 0.0]]))
    with pytest.raises(DataFormatError, match="dimension 4 but the box has 5"):
        mech.truncated_mean(np.zeros((2, 4)))
    with pytest.raises(DataFormatError, match="2-D"):
        mech.clip(np.zeros(5))
    with pytest.raises(InvalidTypeError):
        mech.privatize([[0.0] * 5])
    with pytest.raises(InvalidTypeError, match="sequence"):
        mech.privatize_many(np.zeros((3, 2, 5)))
    with pytest.raises(DataFormatError, match=r"documents\[1\]"):
        mech.privatize_many([np.zeros((2, 5)), np.full((1, 5), np.inf)])
    with pytest.raises(InvalidParameterError):
        mech.noise_scale(0)
    with pytest.raises(InvalidTypeError):
        mech.noise_scale(2.0)


# ------------------------------------------------------------ invariants
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 8), st.integers(0, 2**32 - 1))
def test_clip_and_truncated_mean_stay_in_the_box(d, k, seed):
    rng = np.random.default_rng(seed)
    mech = _mech(d=d)
    S = rng.standard_normal((k, d)) * 10.0 ** rng.integers(-2, 4)
    C = mech.clip(S)
    assert np.all((C >= mech.lower) & (C <= mech.upper))
    inside = (S >= mech.lower) & (S <= mech.upper)
    np.testing.assert_array_equal(C[inside], S[inside])  # points inside are untouched
    m = mech.truncated_mean(S)
    np.testing.assert_allclose(m, C.mean(axis=0), rtol=4 * k * ULP, atol=4 * k * ULP * np.abs(C).max())
    slack = 4 * k * ULP * np.maximum(np.abs(mech.lower), np.abs(mech.upper))  # rounding of the mean of k numbers
    assert np.all((m >= mech.lower - slack) & (m <= mech.upper + slack))


def test_batched_calls_match_single_document_calls():
    rng = np.random.default_rng(3)
    mech = _mech()
    docs = [rng.standard_normal((int(k), 5)).astype(np.float32) for k in rng.integers(1, 9, 40)]
    M = mech.truncated_means(docs)
    for S, m in zip(docs, M):
        np.testing.assert_array_equal(m, mech.truncated_mean(S))
    Z = mech.privatize_many(docs)
    assert Z.shape == (40, 5) and Z.dtype == np.float64 and np.isfinite(Z).all()
    assert mech.privatize_many([]).shape == (0, 5)


def test_noise_scale_is_d_w_over_k_epsilon():
    mech = _mech(epsilon=4.0)
    np.testing.assert_allclose(mech.noise_scale(3), 5 * mech.width / (3 * 4.0), rtol=ULP)


def test_zero_width_dimensions_are_released_exactly():
    mech = Truncation(lower=np.array([0.0, 1.5]), upper=np.array([1.0, 1.5]), epsilon=1.0)
    S = np.array([[0.2, 9.0], [0.4, -3.0]])
    Z = mech.privatize_many([S] * 50)
    np.testing.assert_array_equal(Z[:, 1], 1.5)
    assert np.unique(Z[:, 0]).size == 50
    z = np.array([0.3, 1.5])
    assert np.isfinite(mech.log_density(z, S)) and mech.log_density(np.array([0.3, 1.6]), S) == -np.inf


def test_seeded_runs_reproduce_and_warn_default_draws_differ():
    S = np.random.default_rng(0).standard_normal((4, 5))
    with pytest.warns(PrivacyLeakWarning, match="seed"):
        a = _mech(rng=7)
    with pytest.warns(PrivacyLeakWarning):
        b = _mech(rng=7)
    with pytest.warns(PrivacyLeakWarning):
        c = Truncation.fit(np.random.default_rng(1).standard_normal((50, 5)), epsilon=1.0, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(a.privatize(S), b.privatize(S))
    assert c.config()["seeded"]
    fresh = _mech()
    z1, z2 = fresh.privatize(S), fresh.privatize(S)
    assert not np.array_equal(z1, z2) and not fresh.config()["seeded"]
    assert not np.array_equal(_mech().privatize(S), _mech().privatize(S))


# ------------------------------------------------------------ the guarantee
def test_guarantee_is_data_and_registered():
    mech = Truncation.fit(np.random.default_rng(1).standard_normal((20, 3)), epsilon=2.5)
    g = mech.guarantee
    assert g.kind == "sentdp" and g.epsilon == 2.5 and g.formal
    for phrase in ("w_j/k", "d*w_j/(k*epsilon)", "public data", "k is public"):
        assert phrase in g.statement
    cfg = json.loads(json.dumps(mech.config()))
    assert cfg["defense"] == "truncation" and cfg["epsilon"] == 2.5 and cfg["coverage"] == 0.75
    assert get_defense("truncation") is Truncation and Truncation.name == "truncation"


def _neighbours(rng, mech, k):
    """A k-sentence document and a neighbour (one sentence replaced), extreme sentences included."""
    d = mech.dim
    kinds = [lambda: rng.standard_normal(d) * 5,
             lambda: mech.lower - rng.exponential(100.0, d),  # far below the box: clipped to the lower corner
             lambda: mech.upper + rng.exponential(100.0, d),  # far above: the upper corner
             lambda: np.where(rng.random(d) < 0.5, mech.lower, mech.upper)]
    S = np.stack([kinds[rng.integers(4)]() for _ in range(k)])
    S2 = S.copy()
    S2[rng.integers(k)] = kinds[rng.integers(4)]()
    return S, S2


def test_log_density_ratio_of_neighbours_never_exceeds_epsilon():
    """Exact check (real arithmetic up to float64 round-off): |log p(z|S) - log p(z|S')| <= epsilon."""
    rng = np.random.default_rng(5)
    for trial in range(300):
        d, k = int(rng.integers(1, 40)), int(rng.integers(1, 12))
        eps = float(10.0 ** rng.uniform(-1, 1.5))
        lower, upper = _box(d, seed=trial)
        mech = Truncation(lower=lower, upper=upper, epsilon=eps)
        S, S2 = _neighbours(rng, mech, k)
        outputs = [mech.privatize(S), mech.privatize(S2), mech.upper + 50 * mech.width, mech.lower - 50 * mech.width,
                   (mech.lower + mech.upper) / 2]
        for z in outputs:
            gap = mech.log_density(z, S) - mech.log_density(z, S2)
            scale = mech.noise_scale(k)
            magnitude = np.sum(np.abs(z - mech.truncated_mean(S)) / scale) + np.sum(
                np.abs(z - mech.truncated_mean(S2)) / scale) + d * eps
            assert abs(gap) <= eps + 8 * d * ULP * magnitude, (trial, gap, eps)


def test_the_bound_is_attained_so_the_noise_is_not_overcalibrated():
    """Moving one sentence from the lower to the upper corner reaches exactly epsilon beyond the box."""
    lower, upper = _box(6)
    mech = Truncation(lower=lower, upper=upper, epsilon=1.7)
    S = np.stack([lower, (lower + upper) / 2, upper])
    S2 = S.copy()
    S2[0] = upper
    z = upper + 3 * mech.width
    gap = mech.log_density(z, S) - mech.log_density(z, S2)
    # every term is O(10) here, so float64 round-off is below 6 * 10 * 2**-52 ~ 1e-14; 1e-12 leaves headroom
    assert abs(abs(gap) - 1.7) <= 1e-12


# ------------------------------------------------------------ the noise
def test_laplace_transform_is_exactly_symmetric_and_finite(monkeypatch):
    m = np.random.default_rng(0).integers(0, 2**53, 10_000, dtype=np.int64)
    m = np.concatenate([[0, 2**52 - 1, 2**52, 2**53 - 1], m])
    u = m.astype(np.float64) * 2.0**-53
    mirror = (2**53 - 1 - m).astype(np.float64) * 2.0**-53
    monkeypatch.setattr(truncation_module, "uniform", lambda rng, size: u)
    x = laplace_noise(None, u.size)
    monkeypatch.setattr(truncation_module, "uniform", lambda rng, size: mirror)
    y = laplace_noise(None, u.size)
    np.testing.assert_array_equal(x, -y)
    assert np.isfinite(x).all() and x[0] == np.log(2.0**-53) and x[3] == -np.log(2.0**-53)
    assert x[1] < 0 < x[2]


@pytest.mark.parametrize("seeded", [False, True])
def test_noise_is_laplace_with_scale_d_w_over_k_epsilon(seeded):
    """KS per dimension against Laplace(d w_j / (k eps)), Bonferroni over dimensions (family-wise alpha 1e-6)."""
    d, k, eps, n = 5, 3, 0.8, 20_000
    if seeded:
        with pytest.warns(PrivacyLeakWarning):
            mech = _mech(eps, d, rng=11)
    else:
        mech = _mech(eps, d)
    S = np.random.default_rng(2).standard_normal((k, d))
    noise = mech.privatize_many([S] * n) - mech.truncated_mean(S)
    scale = d * mech.width / (k * eps)
    for j in range(d):
        p = stats.kstest(noise[:, j], stats.laplace(scale=scale[j]).cdf).pvalue
        assert p > ALPHA / d, f"dimension {j}: noise is not Laplace({scale[j]:.3g}) (p = {p:.3g})"
    # and the dimensions are independent: no correlation beyond chance (Fisher z, Bonferroni over pairs)
    corr = np.corrcoef(noise.T)[np.triu_indices(d, 1)]
    z = np.arctanh(corr) * np.sqrt(n - 3)
    assert np.all(2 * stats.norm.sf(np.abs(z)) > ALPHA / corr.size)
