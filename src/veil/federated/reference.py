"""The in-process reference loop: the same client and server functions as the Flower apps, called in a plain
Python loop (all clients every round, in partition order), for unit tests and as the oracle that Flower runs
are checked against (Flower's global weights must equal these every round).

This is not a federated engine: nothing is sent anywhere. Real runs go
through Flower (:func:`veil.federated.run.run_federated`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from veil.errors import FederatedError, VeilError
from veil.federated.client import initial_state, local_evaluate, local_train
from veil.federated.config import FederatedConfig
from veil.federated.data import client_data
from veil.federated.server import Recorder, RoundSummary, aggregate, class_counts, tap_description, write_truth

__all__ = ["run_reference"]


def run_reference(cfg: FederatedConfig, *, pools: Mapping[int, Any] | None = None,
                  mixing_seed: int | None = None, recorder: Recorder | None = None,
                  evaluate: bool = True) -> tuple[dict[str, np.ndarray], list[RoundSummary], list[dict[str, np.ndarray]]]:
    """Run ``cfg`` in-process; returns (final global weights, one summary per round, global weights per round).

    ``pools``: each client's secret pool by partition id (default: a fresh OS-CSPRNG pool per client, as a
    Flower client without a key file draws). ``mixing_seed``: seeded mixing (tests only; warns).
    """
    data = [client_data(cfg, p) for p in range(cfg.clients)]
    dim, num_classes = data[0].dim, data[0].num_classes
    if pools is None:
        from veil.defenses.defaults import mask_pool

        pools = {p: mask_pool(cfg.m, dim) for p in range(cfg.clients)} if cfg.defended else {}
    state = initial_state(cfg, dim, num_classes)
    history: list[dict[str, np.ndarray]] = []
    summaries: list[RoundSummary] = []
    if recorder is not None:
        recorder.describe(tap_description(cfg, dim, num_classes))
    try:
        for r in range(1, cfg.rounds + 1):
            start = time.perf_counter()
            if recorder is not None:
                recorder.global_weights(r, state)
            replies, losses = [], []
            for p, d in enumerate(data):
                try:
                    res = local_train(state, d, cfg, pools.get(p), server_round=r,
                                      mixing_seed=mixing_seed,
                                      record_truth=recorder is not None and recorder.truth_partial is not None)
                except VeilError as exc:
                    raise FederatedError(f"client {p} failed in round {r}: {exc}", client=str(p)) from exc
                replies.append((res.arrays, float(res.num_examples)))
                losses.append((res.train_loss, res.num_examples))
                if recorder is not None:
                    recorder.reply(r, str(p), res.arrays, {"num-examples": res.num_examples,
                                                           "train_loss": res.train_loss, "partition-id": p})
                    if res.truth is not None and recorder.truth_partial is not None:
                        write_truth(recorder.truth_partial, r, str(p), res.truth)
            state = aggregate(replies)
            history.append({k: v.copy() for k, v in state.items()})
            total = sum(n for _, n in losses)
            summary = RoundSummary(r, sum(loss * n for loss, n in losses) / total,
                                   clients=[str(p) for p in range(cfg.clients)])
            if evaluate:
                evals = [local_evaluate(state, d, cfg, pools.get(p)) for p, d in enumerate(data)]
                n_test = int(sum(e["num-examples"] for e in evals))
                summary.test_accuracy = sum(e["correct"] for e in evals) / max(1, n_test)
                summary.test_examples = n_test
                summary.classes = class_counts(evals)
            summary.seconds = time.perf_counter() - start
            summaries.append(summary)
    except BaseException:
        if recorder is not None:
            recorder.abort()
        raise
    if recorder is not None:
        recorder.finish()
    return state, summaries, history
