"""veil.metrics.utility: task metrics and the collapsed-classifier check."""

from __future__ import annotations

import numpy as np
import pytest

from veil.errors import DataFormatError, InvalidParameterError
from veil.metrics.utility import collapsed_prediction, utility_metrics


def test_collapsed_prediction_flags_a_constant_classifier():
    y_true = np.array([0, 1, 1, 0, 1, 1])
    constant = np.ones(6, dtype=np.int64)
    assert collapsed_prediction("classification", constant)
    assert collapsed_prediction("classification", [2, 2])  # lists work too
    # what a collapsed model looks like through the usual metrics: majority-share accuracy, MCC 0
    m = utility_metrics("classification", y_true, constant)
    assert m["mcc"] == 0.0 and m["accuracy"] == pytest.approx(4 / 6)


def test_collapsed_prediction_is_false_for_two_classes_regression_and_one_example():
    assert not collapsed_prediction("classification", np.array([1, 1, 1, 0]))
    assert not collapsed_prediction("regression", np.full(5, 0.3))  # constant regression: not this test's business
    assert not collapsed_prediction("classification", np.array([3]))  # one prediction says nothing


def test_collapsed_prediction_validates():
    with pytest.raises(DataFormatError, match="no predictions"):
        collapsed_prediction("classification", np.array([], dtype=np.int64))
    with pytest.raises(DataFormatError, match="1-D"):
        collapsed_prediction("classification", np.zeros((3, 2)))
    with pytest.raises(InvalidParameterError, match="unknown task 'ranking'"):
        collapsed_prediction("ranking", np.array([0, 1]))


# --------------------------------------------------------------------------- bootstrap over documents
def test_weighted_macro_f1_equals_sklearn_on_the_expanded_sample():
    from veil.metrics.utility import macro_f1, macro_f1_of_weights

    rng = np.random.default_rng(3)
    for _ in range(30):
        n, classes = int(rng.integers(5, 40)), int(rng.integers(2, 6))
        y = rng.integers(0, classes, n)
        P = rng.integers(0, classes, (3, n))
        W = rng.integers(0, 3, (4, n)).astype(float)
        W[:, 0] += 1  # at least one document in each resample
        got = macro_f1_of_weights(y, P, W)
        for b in range(W.shape[0]):
            idx = np.repeat(np.arange(n), W[b].astype(int))
            for t in range(P.shape[0]):
                assert got[b, t] == pytest.approx(macro_f1(y[idx], P[t][idx]), abs=1e-12)


def test_bootstrap_interval_covers_the_estimate_and_separates_a_real_gap():
    from veil.metrics.utility import macro_f1_bootstrap

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 400)
    good = np.where(rng.random((5, 400)) < 0.9, y, rng.integers(0, 3, (5, 400)))
    noisy = np.where(rng.random((5, 400)) < 0.4, y, rng.integers(0, 3, (5, 400)))
    est, low, high = macro_f1_bootstrap(y, good, noisy, n_boot=500)
    assert low <= est <= high and low > 0.3  # a real gap: the interval clears 0 by far
    est, low, high = macro_f1_bootstrap(y, good, good, n_boot=200)
    assert est == low == high == 0.0  # paired: the same predictions differ by exactly 0 on every resample
    est, low, high = macro_f1_bootstrap(y, noisy, baseline=1 / 3, n_boot=500)
    assert low < est < high
    assert macro_f1_bootstrap(y, good, noisy, n_boot=300, seed=5) == macro_f1_bootstrap(y, good, noisy, n_boot=300,
                                                                                            seed=5)
