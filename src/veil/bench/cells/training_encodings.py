"""Attacks that observe ``training-encodings``: TextHide's mask recovery and unmixing on a whole training run.

The cell makes the run (every encoding of ``epochs`` passes over the train split, with the defense's one-time
keys); the attack gets the observation, the scorer the mixing truth (sources, coefficients, pool masks) only.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from veil.bench.cells.common import ALPHA, AttackResources, bench_block, cell_queries, finish, key_rng, make_defense
from veil.results import ResultRecord

__all__ = ["training_run", "mask_recovery_cell", "unmix_cell", "score_mask_recovery_run", "score_unmix_run"]


def training_run(cell: Any, data: Any) -> tuple[Any, Any, np.ndarray]:
    """The encodings of one training run on the train split: (Observation, truth for the scorer, train rows)."""
    from veil.attacks.texthide.observe import observe_training_run

    from veil.defenses.defaults import key_seeds

    tr = data.splits["train"]
    th = make_defense(cell, data, record_details=True)
    # the batch order: the third seed of the defense's key (its pool and mixing are the first two), as veil.protect
    order = key_seeds(key_rng(cell, "defense"), 3)[2]
    obs, truth = observe_training_run(data.X[tr], th, epochs=cell.config.n_epochs, rng=order)
    return obs, truth, tr


def score_mask_recovery_run(attacker: Any, obs: Any, truth: Any, setting: str) -> tuple[ResultRecord, dict[str, Any]]:
    """``attacker`` (a built mask recovery) on ``obs``, scored against ``truth`` (the pool) as the bench cell does:
    (the record, its ``extra["bench"]`` block). The bench cell and ``veil.attack`` both score through this."""
    from veil.attacks.texthide.mask_recovery import evaluate_mask_recovery

    res = evaluate_mask_recovery(attacker, obs, truth)
    rec = res.to_record("bench", setting)
    bench = bench_block(success="mask_bits", success_metric=res.metrics["mask_bits"].to_dict(), comparable=False,
                        random_rate=0.5, measure="share of the secret pool's bits recovered (sign-symmetric); "
                                                 "a step towards re-identification, not one itself")
    return rec, bench


def score_unmix_run(attacker: Any, seen: Any, true_sources: Any, recovery: Any, n_private: int,
                    setting: str) -> tuple[ResultRecord, dict[str, Any]]:
    """``attacker`` (a built unmixing) on the encodings ``seen``, scored against each one's private sources
    (``true_sources``: rows of the ``n_private`` private texts in the attacker's index) as the bench cell does, with
    the mask recovery it started from (``recovery``, scored) in the record; tested against 1 / ``n_private``."""
    from veil.attacks.texthide.unmix import evaluate_unmix
    from veil.metrics.stats import binomial_test

    res = evaluate_unmix(attacker, seen, true_sources)
    rec = res.to_record("bench", setting)
    rec.metrics.update({f"mask_{k}": v for k, v in recovery.metrics.items()})
    hits = int(round(res.metrics["all_sources"].mean * len(seen)))
    verdict = binomial_test(hits, len(seen), 1.0 / n_private, alpha=ALPHA)
    bench = bench_block(success="all_sources", success_metric=res.metrics["all_sources"].to_dict(), comparable=True,
                        random_rate=1.0 / n_private, test=verdict.to_dict(),
                        measure="re-identification of every private text mixed into an encoding (all k sources; "
                                "tested against 1/n, the rate of guessing even one of them)")
    return rec, bench


def mask_recovery_cell(cell: Any, data: Any) -> ResultRecord:
    """Recover the secret pool from every encoding of a training run (``epochs`` per example)."""
    from veil.attacks.base import get_attack

    start = time.perf_counter()
    obs, truth, tr = training_run(cell, data)
    resources = AttackResources(index=data.index, seed=cell.config.seed, data=data, cell=cell)
    rec, bench = score_mask_recovery_run(get_attack(cell.attack).for_bench(resources), obs, truth, cell.id)
    return finish(rec, cell, data, start, bench)


def unmix_cell(cell: Any, data: Any) -> ResultRecord:
    """Recover the pool (as mask-recovery), then split ``queries`` observed encodings into their k sources."""
    from veil.attacks.base import Observation, get_attack
    from veil.attacks.retrieval import SimilaritySearch
    from veil.attacks.texthide.mask_recovery import MaskRecovery, score_mask_recovery

    start = time.perf_counter()
    obs, truth, tr = training_run(cell, data)
    resources = AttackResources(index=data.index, seed=cell.config.seed, data=data, cell=cell)
    recovered = MaskRecovery.for_bench(resources).recover(obs)
    recovery = score_mask_recovery(recovered, truth, observation=obs)
    texts, vectors = list(data.texts), data.X
    if cell.setting.get("mode") == "inter":
        texts, vectors = texts + data.public_texts, np.concatenate([data.X, data.public_vectors])
    resources.index = SimilaritySearch(texts, vectors)
    resources.k = int(cell.setting["k"])
    resources._lazy["recovered_masks"] = lambda: recovered.masks
    n = cell_queries(cell, len(obs), "encodings")
    sel = np.sort(np.random.default_rng(cell.config.seed).choice(len(obs), size=n, replace=False))
    seen = Observation(obs.vectors[sel], defense=dict(obs.defense), source=obs.source)
    true_sources = tr[np.asarray(truth.sources)[sel]]
    rec, bench = score_unmix_run(get_attack(cell.attack).for_bench(resources), seen, true_sources, recovery,
                                 len(data.texts), cell.id)
    return finish(rec, cell, data, start, bench)
