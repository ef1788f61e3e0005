"""A released model (plain training, DP-SGD): membership inference, and the released model's test accuracy.

One cell setting = one game and one target: from the corpus' train split the bench's seed draws ``members``
training examples, as many non-members and the attacker's public population
(:func:`~veil.attacks.membership.membership_game`); the defense (built by itself,
:meth:`~veil.defenses.base.Defense.bench_make`, lots and noise from the OS CSPRNG unless ``key_seed``) trains the
target on the members. The utility cell is the target's test accuracy (Wilson 95%); an attack cell runs the
membership attack on black-box access to it (:class:`~veil.attacks.membership.ModelAccess`) and scores AUC with a
stratified bootstrap interval, tested against 0.5 (random guessing) by a one-sided Mann-Whitney U test
(:func:`~veil.attacks.membership.scoring.membership_test`). Every attack on a model scores AUC over the same
candidates, so the AUCs are comparable with each other (``comparable``: the strongest is the highest AUC); AUC is
not a re-identification rate, and the report never compares it with another kind's success. The target is trained once per process for a setting's cells (cached on the corpus' bench data, as
representations cells are).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from veil.bench.cells.common import ALPHA, bench_block, finish, make_defense
from veil.errors import InvalidParameterError
from veil.results import Metric, ResultRecord

__all__ = ["membership_cell", "model_utility", "MembershipResources", "MEMBERS", "SHADOWS",
           "score_membership_attack", "target_config"]

#: the target's training examples (quick, full), at most a third of the train split
MEMBERS = (1000, 2000)
#: LiRA's shadow models (quick, full)
SHADOWS = (4, 16)


@dataclass(frozen=True)
class MembershipResources:
    """What a membership attack may use in a bench cell: the public population, its own seed, its shadow budget."""

    population: tuple[np.ndarray, np.ndarray]
    seed: int
    shadows: int


def _target(cell: Any, data: Any) -> dict[str, Any]:
    """The setting's game and trained target (cached per process on ``data``)."""
    import torch

    from veil.attacks.membership import membership_game

    key = ("model", cell.defense, cell.setting_json, cell.config.seed, cell.config.quick, cell.config.key_seed)
    if key in data._cache:
        return data._cache[key]
    pool = data.splits["train"]
    members = min(MEMBERS[0 if cell.config.quick else 1], (len(pool) - 1) // 3)
    if members < 2:
        raise InvalidParameterError(f"{data.name}'s train split ({len(pool)} examples) is too small for a "
                                    "membership game; give a larger limit")
    game = membership_game(pool, members=members, rng=cell.config.seed)
    defense = make_defense(cell, data, init_seed=cell.config.seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a small head: one thread
    try:
        model = defense.train((data.X[game.train], data.labels[game.train]))
    finally:
        torch.set_num_threads(threads)
    te = data.splits["test"]
    correct = model.evaluate(data.X[te], data.labels[te]).correct
    data._cache[key] = {"game": game, "defense": defense, "model": model, "correct": correct}
    return data._cache[key]


def _accuracy(correct: np.ndarray) -> Metric:
    from veil.metrics.leakage import wilson_interval

    lo, hi = wilson_interval(float(correct.sum()), len(correct), 0.95)
    return Metric(mean=float(correct.mean()), n=len(correct), ci_low=lo, ci_high=hi, ci_level=0.95)


def target_config(defense: Any, model: Any, n_train: int, candidates: int, population: int) -> dict[str, Any]:
    """What a membership record says of its target: the defense, its recipe, the game's sizes, the guarantee."""
    return {"defense": defense.config(), "recipe": defense.recipe(), "n_train": n_train, "candidates": candidates,
            "population": population, "guarantee": model.guarantee.to_dict(), "train_seconds": model.seconds}


def _config(t: dict[str, Any]) -> dict[str, Any]:
    g, model = t["game"], t["model"]
    return target_config(t["defense"], model, len(g.train), len(g.candidates), len(g.population))


def model_utility(cell: Any, data: Any) -> ResultRecord:
    """The released model's test accuracy (Wilson 95%); the majority rate is the test split's most frequent class."""
    start = time.perf_counter()
    t = _target(cell, data)
    te = data.splits["test"]
    metrics = {"accuracy": _accuracy(t["correct"])}
    rec = ResultRecord(method="bench", experiment=cell.id,
                       config={"utility": "the released model (MLP head on frozen MiniLM, trained on the game's "
                                          "members) on the test split", **_config(t), "n_test": len(te)},
                       metrics=metrics, wall_time_s=0.0)
    majority = float(np.bincount(data.labels[te]).max() / len(te))
    bench = bench_block(utility="accuracy", utility_metric=metrics["accuracy"].to_dict(), majority_rate=majority)
    return finish(rec, cell, data, start, bench)


def score_membership_attack(attacker: Any, access: Any, truth: Any, *, seed: int, config: dict[str, Any],
                            setting: str, extra_metrics: dict[str, Metric] | None = None
                            ) -> tuple[ResultRecord, dict[str, Any]]:
    """Run ``attacker`` (a built membership attack) on ``access`` (black-box access to the target and the
    candidates) and score it as the bench cell does: AUC [stratified bootstrap 95%], TPR at 1% / 0.1% FPR, tested
    against 0.5 by a one-sided Mann-Whitney U test; ``truth`` (which candidates are members) reaches the scorer
    only. Returns (the record, method ``bench``, experiment ``setting``; its ``extra["bench"]`` block). The bench
    cell and ``veil.attack`` on a model release both score through this."""
    from veil.attacks.membership import score_membership
    from veil.attacks.membership.scoring import membership_test

    result = attacker.run(access)
    scored = score_membership(result, truth, rng=seed)
    verdict = membership_test(result.scores, truth.members, alpha=ALPHA)
    metrics = {**scored.result.metrics, **(extra_metrics or {})}
    rec = ResultRecord(method="bench", experiment=setting, config={"attack": dict(scored.result.config), **config},
                       metrics=metrics, wall_time_s=0.0, extra={"roc_points": len(scored.roc.fpr)})
    auc = metrics["auc"]
    n = len(truth.members)
    bench = bench_block(success="auc", success_metric=auc.to_dict(), comparable=True, random_rate=0.5,
                        floor_success=Metric(mean=0.5).to_dict(), test=verdict.to_dict(), versus="random guessing",
                        measure=f"membership inference: AUC over {n} candidates (half trained on), "
                                f"TPR at 1% FPR {metrics['tpr@1%fpr'].mean:.3f}, at 0.1% FPR "
                                f"{metrics['tpr@0.1%fpr'].mean:.3f}; 0.5 is random guessing")
    return rec, bench


def membership_cell(cell: Any, data: Any) -> ResultRecord:
    """The cell's membership attack on the setting's target: AUC [bootstrap 95%], TPR at 1% / 0.1% FPR, tested
    against 0.5 (:func:`score_membership_attack`)."""
    from veil.attacks.base import get_attack
    from veil.attacks.membership import ModelAccess

    start = time.perf_counter()
    t = _target(cell, data)
    g = t["game"]
    access = ModelAccess.of(t["model"], t["defense"], data.X[g.candidates], data.labels[g.candidates])
    resources = MembershipResources(population=(data.X[g.population], data.labels[g.population]),
                                    seed=cell.config.seed, shadows=SHADOWS[0 if cell.config.quick else 1])
    attack = get_attack(cell.attack).for_bench(resources)
    rec, bench = score_membership_attack(attack, access, g.truth, seed=cell.config.seed, config=_config(t),
                                         setting=cell.id, extra_metrics={"test_accuracy": _accuracy(t["correct"])})
    return finish(rec, cell, data, start, bench)
