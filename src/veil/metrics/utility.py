"""Utility metrics fitting the task: accuracy, macro-F1, MCC; Pearson, Spearman, MSE."""

from __future__ import annotations

import numpy as np

from veil.errors import DataFormatError, InvalidParameterError

__all__ = ["TASK_METRICS", "macro_f1", "macro_f1_of_weights", "macro_f1_bootstrap", "utility_metrics",
           "collapsed_prediction"]

TASK_METRICS = {
    "classification": ("accuracy", "macro_f1", "mcc"),
    "regression": ("pearson", "spearman", "mse"),
}


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Macro-F1 over the classes present in ``y_true`` or ``y_pred`` (0 for a class never predicted)."""
    from sklearn.metrics import f1_score

    return float(f1_score(y_true, y_pred, average="macro", zero_division=0))


def macro_f1_of_weights(y_true: np.ndarray, preds: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Macro-F1 of every trial's predictions on every weighted resample of the documents, (B, T).

    ``y_true`` (n,) and ``preds`` (T, n) hold integer labels; ``weights`` (B, n) how often each document is in
    each resample (a bootstrap's multiplicities; a row of ones is the sample itself). The classes averaged are
    those present in the resample's labels or predictions, with F1 = 2 tp / (2 tp + fp + fn), as
    :func:`macro_f1` (scikit-learn, ``zero_division=0``) computes it on the expanded sample.
    """
    y = np.asarray(y_true, dtype=np.int64)
    P = np.atleast_2d(np.asarray(preds, dtype=np.int64))
    W = np.asarray(weights, dtype=np.float64)
    classes = int(max(y.max(initial=0), P.max(initial=0))) + 1
    f1_sum = np.zeros((W.shape[0], P.shape[0]))
    present = np.zeros((W.shape[0], P.shape[0]))
    for c in range(classes):
        is_true = (y == c).astype(np.float64)                       # (n,)
        is_pred = (P == c).astype(np.float64)                       # (T, n)
        tp = W @ (is_pred * is_true).T                              # (B, T)
        denom = (W @ is_true)[:, None] + W @ is_pred.T              # true + predicted counts = 2tp + fp + fn
        here = denom > 0
        f1_sum += np.where(here, 2.0 * tp / np.where(here, denom, 1.0), 0.0)
        present += here
    return f1_sum / np.maximum(present, 1)


def macro_f1_bootstrap(y_true: np.ndarray, preds_a: np.ndarray, preds_b: np.ndarray | None = None, *,
                       baseline: float = 0.0, n_boot: int = 2000, level: float = 0.95,
                       seed: int = 0) -> tuple[float, float, float]:
    """(estimate, low, high): mean-over-trials macro-F1 of ``preds_a`` minus that of ``preds_b`` (or ``baseline``),
    with a percentile bootstrap interval over the test documents (paired: both methods on the same resamples).

    ``preds_a``/``preds_b`` are (T, n) predictions of T trials on the same n documents as ``y_true``. Resampling
    documents is what makes the interval cover documents the split did not hold; the trials' spread is inside
    each resample's mean. ``seed`` fixes the resamples (the bootstrap is a statistic of the records, not secret
    randomness), so a page renders the same interval every time.
    """
    y = np.asarray(y_true, dtype=np.int64)
    n = len(y)
    if n == 0:
        raise InvalidParameterError("macro_f1_bootstrap needs at least one document")
    rng = np.random.default_rng(seed)
    W = np.zeros((n_boot, n))
    rows = np.repeat(np.arange(n_boot), n)
    np.add.at(W, (rows, rng.integers(0, n, size=n_boot * n)), 1.0)
    ones = np.ones((1, n))

    def score(weights: np.ndarray) -> np.ndarray:
        a = macro_f1_of_weights(y, preds_a, weights).mean(axis=1)
        b = macro_f1_of_weights(y, preds_b, weights).mean(axis=1) if preds_b is not None else baseline
        return a - b

    boot = score(W)
    tail = (1.0 - level) / 2.0
    return float(score(ones)[0]), float(np.quantile(boot, tail)), float(np.quantile(boot, 1.0 - tail))


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
