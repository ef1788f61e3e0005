"""Utility metrics fitting the task: accuracy, macro-F1, MCC; Pearson, Spearman, MSE."""

from __future__ import annotations

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError

__all__ = ["TASK_METRICS", "macro_f1", "utility_metrics", "collapsed_prediction"]

TASK_METRICS = {
    "classification": ("accuracy", "macro_f1", "mcc"),
    "regression": ("pearson", "spearman", "mse"),
}


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Macro-F1 over the classes present in ``y_true`` or ``y_pred`` (0 for a class never predicted)."""
    from sklearn.metrics import f1_score

    return float(f1_score(y_true, y_pred, average="macro", zero_division=0))


def utility_metrics(task: str, y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """Metrics of predictions ``y_pred`` (class ids, or real values) against ``y_true``."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.shape != y_pred.shape:
        raise DataFormatError(f"y_true has shape {y_true.shape} but y_pred has {y_pred.shape}")
    if len(y_true) == 0:
        raise DataFormatError("no predictions to score")
    if task == "classification":
        from sklearn.metrics import accuracy_score, matthews_corrcoef

        return {"accuracy": float(accuracy_score(y_true, y_pred)),
                "macro_f1": macro_f1(y_true, y_pred),
                "mcc": float(matthews_corrcoef(y_true, y_pred))}
    if task == "regression":
        from scipy.stats import pearsonr, spearmanr

        constant = np.all(y_pred == y_pred[0]) or np.all(y_true == y_true[0])
        return {"pearson": 0.0 if constant else float(pearsonr(y_true, y_pred).statistic),
                "spearman": 0.0 if constant else float(spearmanr(y_true, y_pred).statistic),
                "mse": float(np.mean((y_true - y_pred) ** 2))}
    raise InvalidParameterError(f"unknown task {task!r}; use one of {', '.join(TASK_METRICS)}")


def collapsed_prediction(task: str, y_pred: np.ndarray) -> bool:
    """True when a classifier's predictions ``y_pred`` (class ids) are all one class: a collapsed model.

    A constant classifier scores MCC 0 and the majority share (or less) as
    accuracy, which can look like a weak but working model. Needs at least two
    predictions (one prediction is always "one class"); regression is never
    collapsed by this test (returns False). Raises DataFormatError for no
    predictions and InvalidParameterError for an unknown task.
    """
    if task not in TASK_METRICS:
        raise InvalidParameterError(f"unknown task {task!r}; use one of {', '.join(TASK_METRICS)}")
    y_pred = np.asarray(y_pred)
    if y_pred.ndim != 1:
        raise DataFormatError(f"y_pred must be one prediction per example (1-D), got shape {y_pred.shape}")
    if len(y_pred) == 0:
        raise DataFormatError("no predictions to check")
    if task != "classification" or len(y_pred) < 2:
        return False
    return bool(np.all(y_pred == y_pred[0]))
