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
