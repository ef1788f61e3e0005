"""The utility of a defense, dispatched on the corpus' task and the defense's release kind.

Sentence classification trains a head through the kind's one verb: a ``vectors`` defense's head trains and tests
on what ``protect`` releases; a ``training-encodings`` defense's head trains and tests through its
``hook(task, num_classes)`` (the same secret pool). Document classification (SentDP's setting) trains on the
public documents' embeddings and tests on the release of the private ones (read as vectors,
:func:`~veil.bench.cells.vectors.release_vectors`). A (task, kind) pair without a measure is refused with
:class:`~veil.errors.InvalidParameterError`, naming the pairs there are.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any, Callable

import numpy as np

from veil.bench.cells.common import finish, make_defense, release_kind
from veil.bench.cells.generative_model import lm_utility
from veil.bench.cells.model import model_utility
from veil.bench.cells.obfuscated_text import parsing_utility
from veil.bench.cells.representations import representations_utility
from veil.bench.cells.vectors import release_vectors
from veil.errors import InvalidParameterError
from veil.results import Metric, ResultRecord

__all__ = ["QUICK_BUDGET", "UTILITY_MEASURES", "UTILITY_CELLS", "utility_cell", "sentence_utility_cell",
           "document_utility_cell"]

#: (epochs, patience) of a quick sentence head; the full bench trains (300, 50)
QUICK_BUDGET = (60, 20)


def _accuracy_metric(y: np.ndarray, pred: np.ndarray) -> Metric:
    from veil.metrics.leakage import wilson_interval

    hits = float((np.asarray(y) == np.asarray(pred)).sum())
    lo, hi = wilson_interval(hits, len(y), 0.95)
    return Metric(mean=hits / len(y), n=len(y), ci_low=lo, ci_high=hi, ci_level=0.95)


# ---------------------------------------------------------------- sentence classification: a head through the verb
def _through_protect(cell: Any, data: Any) -> tuple[np.ndarray, Callable[[], Any]]:
    """``vectors``: the head trains and tests on what the defense releases (``protect``), with a plain hook; a
    defense that says how its owner trains the model reading its release (``training_hook``: TextHide's inference
    masking is read by a model trained with TextHide, a fresh pool mask per example and epoch) trains through that
    hook on the original vectors and is tested on the release through it."""
    from veil.training import PlainHook

    if cell.defense == "none":
        return data.X, lambda: PlainHook("classification", data.num_classes)
    defense = make_defense(cell, data)
    if hasattr(defense, "training_hook"):
        return data.X, lambda: defense.training_hook("classification", data.num_classes)
    return defense.protect(data.X), lambda: PlainHook("classification", data.num_classes)


def _through_hook(cell: Any, data: Any) -> tuple[np.ndarray, Callable[[], Any]]:
    """``training-encodings``: the head trains and tests through the defense's ``hook`` (a plain hook for the
    no-defense setting, (m, k) = (0, 1))."""
    from veil.defenses.none import is_no_defense
    from veil.training import PlainHook

    def factory() -> Any:
        if is_no_defense(cell.setting):
            return PlainHook("classification", data.num_classes)
        return make_defense(cell, data, scale=float(np.sqrt(data.dim))).hook("classification", data.num_classes)

    return data.X, factory


def _sentence_head(cell: Any, data: Any, inputs: Callable[[Any, Any], tuple[np.ndarray, Callable[[], Any]]]
                   ) -> ResultRecord:
    """Frozen-encoder task accuracy: an MLP head trained on the train split (early stopping on dev), tested on the
    test split, the inputs and the training hook given by the defense's kind (``inputs``)."""
    import torch

    from veil.metrics.utility import utility_metrics
    from veil.training import TrainConfig, train_head

    start = time.perf_counter()
    tr, dv, te = (data.splits[s] for s in ("train", "dev", "test"))
    y = data.labels
    X, make_hook = inputs(cell, data)
    hooks: list[Any] = []

    def factory() -> Any:
        hooks.append(make_hook())
        return hooks[-1]

    # masked heads sit on a plateau for tens of epochs before they learn: a patience under ~20 stops them there
    epochs, patience = QUICK_BUDGET if cell.config.quick else (300, 50)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a small head: one thread, so a seeded cell gives the same numbers on any worker
    try:
        res = train_head(X[tr], y[tr], X[dv], y[dv], task="classification", num_classes=data.num_classes,
                         hook_factory=factory, config=TrainConfig(epochs=epochs, patience=patience,
                                                                  seed=cell.config.seed, batch_size=64))
    finally:
        torch.set_num_threads(threads)
    pred = res.predict(X[te], hooks[-1])
    other = utility_metrics("classification", y[te], pred)
    metrics = {"accuracy": _accuracy_metric(y[te], pred), "macro_f1": Metric(mean=other["macro_f1"], n=len(te))}
    majority = float(np.bincount(y[te]).max() / len(te))
    rec = ResultRecord(method="bench", experiment=cell.id,
                       config={"utility": "frozen MiniLM encoder + MLP head through the defense's training hook",
                               "train": {"epochs": epochs, "patience": patience, "batch_size": 64,
                                         "best_epoch": res.best_epoch},
                               "n_train": len(tr), "n_dev": len(dv), "n_test": len(te)},
                       metrics=metrics, wall_time_s=0.0, extra={"collapsed": bool(res.collapsed)})
    bench = {"utility": "accuracy", "utility_metric": metrics["accuracy"].to_dict(), "majority_rate": majority}
    return finish(rec, cell, data, start, bench)


# ---------------------------------------------------------------- document classification: tested on the release
def _on_release(cell: Any, data: Any) -> ResultRecord:
    """Document classification as in SentDP (Meehan et al. 2022, Sec. 5): a classifier trained on the public
    train documents' non-private embeddings, tested on the private test documents' releases."""
    from sklearn.linear_model import LogisticRegression

    from veil.metrics.utility import utility_metrics

    start = time.perf_counter()
    tr, te = data.splits["train"], data.splits["test"]
    y = data.labels
    clf = LogisticRegression(max_iter=2000, random_state=cell.config.seed).fit(data.X[tr], y[tr])
    obs, _ = release_vectors(cell, data, te)
    pred = clf.predict(obs.vectors)
    other = utility_metrics("classification", y[te], pred)
    metrics = {"accuracy": _accuracy_metric(y[te], pred), "macro_f1": Metric(mean=other["macro_f1"], n=len(te))}
    majority = float(np.bincount(y[te]).max() / len(te))
    rec = ResultRecord(method="bench", experiment=cell.id,
                       config={"utility": "logistic regression on public (train) mean embeddings, tested on the "
                                          "private (test) documents' releases",
                               "n_train": len(tr), "n_test": len(te)},
                       metrics=metrics, wall_time_s=0.0)
    bench = {"utility": "accuracy", "utility_metric": metrics["accuracy"].to_dict(), "majority_rate": majority}
    return finish(rec, cell, data, start, bench)


#: (corpus task, release kind) -> the cell measuring the utility of a defense releasing that kind on that task
UTILITY_MEASURES: dict[tuple[str, str], Callable[[Any, Any], ResultRecord]] = {
    ("sentence-classification", "vectors"): partial(_sentence_head, inputs=_through_protect),
    ("sentence-classification", "training-encodings"): partial(_sentence_head, inputs=_through_hook),
    ("sentence-classification", "model"): model_utility,  # the released model itself, on the test split
    ("document-classification", "vectors"): _on_release,
    ("document-classification", "document-embeddings"): _on_release,
    ("document-classification", "text"): _on_release,  # tested on the rewritten documents' encodings
    ("dependency-parsing", "obfuscated-text"): parsing_utility,
    ("private-attributes", "representations"): representations_utility,
    ("language-modeling", "generative-model"): lm_utility,  # held-out next-token accuracy of the released LM
}


def utility_cell(cell: Any, data: Any, *, task: str | None = None) -> ResultRecord:
    """The utility of the cell's defense on ``task`` (default: the corpus' task), by the defense's release kind."""
    task = data.task if task is None else task
    kind = release_kind(cell)
    measure = UTILITY_MEASURES.get((task, kind))
    if measure is None:
        have = "; ".join(f"{t} x {k}" for t, k in UTILITY_MEASURES)
        raise InvalidParameterError(f"defense {cell.defense!r} releases {kind!r}: no {task} utility measure for "
                                    f"that kind yet (task x release kind measured: {have})")
    return measure(cell, data)


def sentence_utility_cell(cell: Any, data: Any) -> ResultRecord:
    """Sentence-classification utility (:func:`utility_cell` on that task)."""
    return utility_cell(cell, data, task="sentence-classification")


def document_utility_cell(cell: Any, data: Any) -> ResultRecord:
    """Document-classification utility (:func:`utility_cell` on that task)."""
    return utility_cell(cell, data, task="document-classification")


#: corpus task -> ``"module:function"`` measuring a defense's utility on it (the function dispatches on the
#: defense's release kind, :data:`UTILITY_MEASURES`)
UTILITY_CELLS: dict[str, str] = {task: "veil.bench.cells.utility:utility_cell" for task, _ in UTILITY_MEASURES}
