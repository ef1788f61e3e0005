"""The attack that observes ``document-embeddings`` themselves: the exact (white-box) audit of a SentDP mechanism.

Attacks that read document embeddings as vectors run in :mod:`veil.bench.cells.vectors`; the audit needs the
mechanism's output probabilities, so it is a cell of its own (:data:`veil.kinds.CONTAINS`).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from veil.bench.cells.common import bench_block, finish, make_defense
from veil.results import Metric, ResultRecord

__all__ = ["audit_cell"]


def audit_cell(cell: Any, data: Any) -> ResultRecord:
    """Check the SentDP bound exactly on test documents and their one-sentence neighbours."""
    from veil.attacks.audit import audit_sentdp

    start = time.perf_counter()
    mech = make_defense(cell, data)
    test = [int(i) for i in data.splits["test"] if len(data.documents[i]) >= 2]
    n_docs = 8 if cell.config.quick else 40
    gen = np.random.default_rng(cell.config.seed)
    picked = sorted(int(i) for i in gen.choice(test, size=min(n_docs, len(test)), replace=False))
    pool = np.concatenate([data.documents[i] for i in data.splits["train"]])
    sweep = audit_sentdp(mech, [data.documents[i] for i in picked], epsilons=(mech.epsilon,),
                         neighbours_per_document=10 if cell.config.quick else 35, pool=pool, document_ids=picked,
                         rng=gen)
    a = sweep.audits[0]
    metrics = {"passed": Metric(mean=float(sweep.passed), n=sweep.n_pairs),
               "max_ratio_over_epsilon": Metric(mean=a.max_abs_log_ratio / a.epsilon, n=a.n_pairs),
               "max_abs_log_ratio": Metric(mean=a.max_abs_log_ratio, n=a.n_pairs),
               "violation": Metric(mean=0.0 if sweep.passed else 1.0, n=sweep.n_pairs)}
    rec = ResultRecord(method="bench", experiment=cell.id,
                       config={"attack": {"attack": cell.attack}, "defense": mech.config(), "documents": len(picked),
                               "pairs": sweep.n_pairs, "tolerance": a.tolerance},
                       metrics=metrics, wall_time_s=0.0)
    bench = bench_block(success="violation", success_metric=metrics["violation"].to_dict(), comparable=False,
                        measure=f"exact audit: 1 if any of {sweep.n_pairs} neighbouring pairs breaks the "
                                f"e^epsilon bound (max |log ratio| / epsilon = {a.max_abs_log_ratio / a.epsilon:.4f})")
    return finish(rec, cell, data, start, bench)
