"""Membership inference against plain training and DP-SGD: how much does a released classifier say about who was
in its training set?

Setting: veil's MLP head on frozen MiniLM sentence embeddings (as :mod:`veil.experiments.dpsgd.utility`). From the
corpus' train split (the pool) the experiment's seed draws a game (:func:`~veil.attacks.membership.membership_game`):
``members`` examples the target trains on, as many non-members, and the rest as the attacker's public population.
For every defense setting (``plain``; ``texthide``: a head trained on (256, 4)-TextHide encodings and queried through
its pool, :class:`~veil.defenses.texthide.model.TextHideTraining`; ``dpsgd`` at each epsilon, delta = 1/(10 n)) one
target is trained (its lots, noise, pool and mixing from the OS CSPRNG, never the seed; the seed sets the game, the
initial weights and the attacker's own choices) and attacked by every method:

* ``loss``: :class:`~veil.attacks.membership.LossThreshold`;
* ``lira`` / ``lira-offline``: :class:`~veil.attacks.membership.LiRA` with ``shadows`` shadow models;
* ``rmia``: :class:`~veil.attacks.membership.RMIA` with 2 reference models.

One :class:`~veil.results.ResultRecord` per (defense setting, method): ``auc``, ``tpr@1%fpr``, ``tpr@0.1%fpr`` (95%
stratified bootstrap intervals over candidates), ``test_accuracy`` of the target (Wilson 95%) beside
``majority_rate`` (the test split's most common class: what a target that learnt nothing scores;
``extra["target"]["one_class"]`` says whether it predicted one class for every test input), and for DP-SGD its
accounted ``epsilon``; ``extra["roc"]``: the ROC curve for log-scale plots. A record is reused when its
configuration matches (:func:`veil.outputs.existing_record`), refused (:class:`~veil.errors.StaleResultError`)
when it does not, unless ``force``. The methods of one setting attack one target, trained once per call; a record
made in another call attacked another target (its ``target`` block says which: its test accuracy and seconds).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError, InvalidTypeError
from veil.results import Metric, ResultRecord

__all__ = ["METHOD", "METHODS", "DEFENSES", "MembershipRun", "planned_runs", "run_membership", "record_path"]

METHOD = "membership"
METHODS = ("loss", "lira", "lira-offline", "rmia")
DEFENSES = ("plain", "texthide", "dpsgd")
#: TextHide's (m, k) for the ``texthide`` target: the paper's
TEXTHIDE = (256, 4)
ATTACKS = {"loss": "membership-loss", "lira": "membership-lira", "lira-offline": "membership-lira",
           "rmia": "membership-rmia"}


@dataclass(frozen=True)
class MembershipRun:
    """One record's configuration: ``epsilon`` None with ``defense`` "plain" or "texthide"."""

    corpus: str
    defense: str
    epsilon: float | None
    method: str
    shadows: int
    members: int
    seed: int
    epochs: int
    batch_size: int
    lr: float
    clip: float
    hidden: tuple[int, ...]
    texthide_m: int = TEXTHIDE[0]
    texthide_k: int = TEXTHIDE[1]
    queries: int = 1  # each input queried this many times, logits averaged (a randomized target: TextHide's)
    model: str = "head"  # what is trained: the head on frozen embeddings, or MiniLM's top layers with it
    optimizer: str = "adam"  # on the (noisy) gradient: adam, or sgd (momentum 0.9)

    @property
    def setting(self) -> str:
        if self.defense == "texthide":
            return f"texthide-m{self.texthide_m}-k{self.texthide_k}"
        return "plain" if self.epsilon is None else f"dpsgd-eps{self.epsilon:g}"

    def identity(self) -> dict[str, Any]:
        out = asdict(self)
        out["hidden"] = list(self.hidden)
        if self.defense != "texthide":  # the records made before TextHide targets existed hold no such keys
            del out["texthide_m"], out["texthide_k"]
        if self.queries == 1:  # nor queries (one each)
            del out["queries"]
        if self.optimizer == "adam":  # nor the optimizer (Adam)
            del out["optimizer"]
        if self.model == "head":  # nor the model (the head)
            del out["model"]
        else:
            from veil.experiments.dpsgd.utility import MAX_LENGTH, TOP_LAYERS

            out.update(trained_layers=TOP_LAYERS, max_length=MAX_LENGTH)
        if self.epsilon is None:
            del out["clip"]
        if not self.method.startswith("lira"):
            del out["shadows"]
        return out


def record_path(root: str | Path, run: MembershipRun) -> Path:
    from veil.outputs import tag

    sizes = tag(m=run.members, sh=run.shadows if run.method.startswith("lira") else None,
                q=run.queries if run.queries != 1 else None, ep=run.epochs, bs=run.batch_size,
                opt=None if run.optimizer == "adam" else run.optimizer, lr=None if run.lr == 1e-3 else run.lr,
                seed=run.seed)
    model = "" if run.model == "head" else f"{run.model}-"
    return Path(root) / f"{run.corpus}-{model}{run.setting}-{run.method}-{sizes}.json"


def _seq(name: str, value: Any, example: str) -> tuple:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise InvalidTypeError(f"{name} must be a non-empty list, e.g. {name}={example}")
    return tuple(value)


def planned_runs(*, corpus: str, defenses: Sequence[str], epsilons: Sequence[float], methods: Sequence[str],
                 shadows: int, members: int, seed: int, epochs: int, batch_size: int, lr: float, clip: float,
                 hidden: Sequence[int], queries: int = 1, model: str = "head",
                 optimizer: str = "adam") -> list[MembershipRun]:
    """Every record of a sweep, validated (typed errors, nothing run): per setting (plain, then each epsilon), each
    method."""
    from veil.defenses.dpsgd.engine import OPTIMIZERS
    from veil.experiments.dpsgd.utility import check_head
    from veil.validation import check_choice, check_epsilon, check_int

    if not isinstance(corpus, str) or not corpus:
        raise InvalidTypeError("corpus must be a corpus name such as 'rt-polarity'")
    defenses = tuple(dict.fromkeys(check_choice("defense", d, DEFENSES) for d in _seq("defenses", defenses,
                                                                                        "('plain', 'dpsgd')")))
    methods = tuple(dict.fromkeys(check_choice("method", m, METHODS) for m in _seq("methods", methods,
                                                                                  "('loss', 'lira')")))
    eps = tuple(dict.fromkeys(check_epsilon(e, what="DP-SGD") for e in _seq("epsilons", epsilons, "(1, 3, 8)")))
    check_int("shadows", shadows, minimum=2, hint="; LiRA fits a Gaussian per candidate")
    check_int("queries", queries, minimum=1, hint="; 1 queries each input once")
    from veil.experiments.dpsgd.utility import SETTINGS as MODELS

    check_choice("model", model, MODELS)
    if model != "head" and "texthide" in defenses:
        raise InvalidParameterError("the TextHide target trains the head on TextHide encodings of frozen embeddings; "
                                    "use model='head' for it (the top-layers setting is plain and DP-SGD only)")
    check_int("members", members, minimum=2)
    check_int("seed", seed, minimum=0)
    check_int("epochs", epochs, minimum=1)
    check_int("batch_size", batch_size, minimum=1)
    if batch_size > members:  # the target (and every shadow) trains on `members` examples in lots of batch_size
        raise InvalidParameterError(f"members={members} is fewer than one training batch (batch_size={batch_size}): "
                                    f"the target and every shadow train on the {members} members in lots of "
                                    f"{batch_size}; use members >= {batch_size} (--members {batch_size}) or "
                                    f"batch_size <= {members} (--batch-size {members})")
    hidden = check_head(clip=clip, lr=lr, hidden=hidden)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    settings = ([("plain", None)] if "plain" in defenses else []) + \
        ([("texthide", None)] if "texthide" in defenses else []) + \
        ([("dpsgd", e) for e in eps] if "dpsgd" in defenses else [])
    base = dict(corpus=corpus, shadows=int(shadows), members=int(members), seed=int(seed), epochs=int(epochs),
                batch_size=int(batch_size), lr=float(lr), clip=float(clip), hidden=hidden, queries=int(queries),
                model=model, optimizer=optimizer)
    return [MembershipRun(defense=d, epsilon=e, method=m, **base) for d, e in settings for m in methods]


# --------------------------------------------------------------------------- one setting
def _defense(run: MembershipRun, num_classes: int) -> Any:
    from veil.defenses.dpsgd import DPSGD, PlainTraining

    common = dict(epochs=run.epochs, batch_size=run.batch_size, lr=run.lr, optimizer=run.optimizer,
                  hidden=run.hidden, num_classes=num_classes, init_seed=run.seed)
    if run.model == "top-layers":
        from veil.experiments.dpsgd.utility import MAX_LENGTH, TOP_LAYERS
        from veil.models.top_layers import build_top_layers

        common["model"] = build_top_layers(num_classes=num_classes, trained=TOP_LAYERS, max_length=MAX_LENGTH,
                                           hidden=run.hidden, init_seed=run.seed)
    if run.defense == "texthide":
        from veil.defenses.texthide.model import TextHideTraining

        return TextHideTraining(m=run.texthide_m, k=run.texthide_k, **common)  # pool, mixing, lots: OS CSPRNG
    if run.epsilon is None:
        return PlainTraining(**common)  # rng None: lots from the OS CSPRNG
    return DPSGD(epsilon=run.epsilon, clip=run.clip, **common)  # rng None: lots and noise from the OS CSPRNG


def make_attack(method: str, population: tuple[np.ndarray, np.ndarray], *, shadows: int, seed: int,
                queries: int = 1) -> Any:
    """The attack of ``method`` (:data:`METHODS`) with the attacker's population and its own seed."""
    from veil.attacks.membership import RMIA, LiRA, LossThreshold

    if method == "loss":
        return LossThreshold(queries=queries)
    if method in ("lira", "lira-offline"):
        return LiRA(population=population, shadows=shadows, online=method == "lira", queries=queries, rng=seed)
    if method == "rmia":
        return RMIA(population=population, references=2, queries=queries, rng=seed)
    raise InvalidParameterError(f"method must be one of {', '.join(METHODS)}, got {method!r}")


def _wilson(correct: np.ndarray) -> Metric:
    from veil.metrics.leakage import wilson_interval

    lo, hi = wilson_interval(int(correct.sum()), len(correct), 0.95)
    return Metric(mean=float(correct.mean()), n=len(correct), ci_low=lo, ci_high=hi, ci_level=0.95)


def log_roc(roc: Any, points: int = 200) -> dict[str, list[float]]:
    """The ROC curve on a log-spaced FPR grid from 1e-4 to 1 (the largest TPR at FPR <= each grid point), for
    log-scale plots without storing every threshold."""
    grid = np.unique(np.r_[0.0, np.logspace(-4, 0, points)])
    idx = np.searchsorted(roc.fpr, grid + 1e-12, side="right") - 1
    best = np.maximum.accumulate(roc.tpr)
    return {"fpr": [float(v) for v in grid], "tpr": [float(best[i]) for i in idx]}


def _records(runs: list[MembershipRun], data: dict[str, Any], say: Callable[[str], None]) -> dict[str, ResultRecord]:
    """Train the setting's target once and attack it with each run's method."""
    from veil.attacks.membership import ModelAccess, membership_game, score_membership
    from veil.experiments.dpsgd.utility import majority_rate

    run0 = runs[0]
    Xp, yp = data["X_train"], data["y_train"]
    game = membership_game(np.arange(len(Xp)), members=run0.members, rng=run0.seed)
    defense = _defense(run0, data["num_classes"])
    model = defense.train((Xp[game.train], yp[game.train]))
    predicted = model.predict(data["X_test"])  # one pass: a TextHide target answers with fresh masks each time
    correct = predicted == data["y_test"]
    majority = majority_rate(data["y_test"], data["num_classes"])
    one_class = bool(len(np.unique(predicted)) == 1)
    access = ModelAccess.of(model, defense, Xp[game.candidates], yp[game.candidates])
    population = (Xp[game.population], yp[game.population])
    target = {"test_accuracy": float(correct.mean()), "train_seconds": model.seconds,
              "guarantee": model.guarantee.to_dict(), "one_class": one_class}
    say(f"{run0.corpus} {run0.setting}: target trained on {len(game.train)} examples, test accuracy "
        f"{correct.mean():.4f} (the most common test class: {majority.mean:.4f}"
        + ("; it predicts that one class for everything)" if one_class else ")"))
    out = {}
    for run in runs:
        start = time.perf_counter()
        attack = make_attack(run.method, population, shadows=run.shadows, seed=run.seed, queries=run.queries)
        scored = score_membership(attack.run(access), game.truth, rng=run.seed)
        metrics = dict(scored.result.metrics)
        metrics["test_accuracy"] = _wilson(correct)
        metrics["majority_rate"] = majority
        if model.accounting is not None:
            metrics["epsilon"] = Metric(mean=model.accounting.epsilon)
            metrics["delta"] = Metric(mean=model.accounting.delta)
        config = {**run.identity(), "attack": ATTACKS[run.method], "attack_config": dict(scored.result.config),
                  "recipe": defense.recipe(), "candidates": len(game.candidates), "population": len(game.population),
                  "n_train": len(game.train), "n_test": data["n_test"], "encoder": data["encoder"],
                  "secret_randomness": "OS CSPRNG (the target's lots and noise, TextHide's pool and mixing); the "
                                       "seed sets the game, the initial weights and the attacker's shadows"}
        prefix = "" if run.model == "head" else f"{run.model}-"
        out[run.method] = ResultRecord(method=METHOD, experiment=f"{run.corpus}-{prefix}{run.setting}-{run.method}",
                                       config=config, metrics=metrics, wall_time_s=time.perf_counter() - start,
                                       extra={"roc": log_roc(scored.roc), "target": target})
    return out


# --------------------------------------------------------------------------- the sweep
def _check_pool(corpus: str, members: int, methods: Sequence[str]) -> None:
    """The corpus is labelled and its train split holds the game (members, as many non-members, and a population
    of at least ``members``, more for RMIA's z samples): read from the pulled corpus, before any encoding."""
    import veil.corpora as vc

    data = vc.load(corpus)  # an unknown or unpulled corpus is a typed error naming the fix
    if data.task != "classification" or data.labels is None:
        raise InvalidParameterError(f"corpus {corpus!r} has no classification labels; membership inference needs a "
                                    "labelled corpus such as rt-polarity")
    n_train = len(data.indices("train"))
    z = 1 if "rmia" in methods else 0  # RMIA's population holds its references' training sets and z samples
    if 3 * members + z > n_train:
        most = (n_train - z) // 3
        raise InvalidParameterError(f"members={members} needs {3 * members + z} training examples (members, as many "
                                    f"non-members, and an attacker's population at least as large"
                                    f"{', plus a z sample for RMIA' if z else ''}); {corpus} has {n_train}: use "
                                    f"members <= {most} (--members {most})")


def run_membership(results: str | Path, *, corpus: str = "rt-polarity", defenses: Sequence[str] = DEFENSES,
                   epsilons: Sequence[float] = (1.0, 3.0, 8.0), methods: Sequence[str] = METHODS, shadows: int = 16,
                   members: int = 2000, seed: int = 0, epochs: int = 10, batch_size: int = 256, lr: float = 1e-3,
                   clip: float = 1.0, hidden: Sequence[int] = (128,), queries: int = 1, model: str = "head",
                   optimizer: str = "adam", force: bool = False,
                   log: Callable[[str], None] | None = None) -> list[Path]:
    """Write (or reuse) one record per (defense setting, method) under ``results``; returns their paths in plan
    order. Module docstring: what is run and measured."""
    from veil.experiments.dpsgd.utility import ENCODER, ENCODER_TOP, _load
    from veil.outputs import check_output_dir, existing_record

    say = print if log is None else log
    runs = planned_runs(corpus=corpus, defenses=defenses, epsilons=epsilons, methods=methods, shadows=shadows,
                        members=members, seed=seed, epochs=epochs, batch_size=batch_size, lr=lr, clip=clip,
                        hidden=hidden, queries=queries, model=model, optimizer=optimizer)
    root = check_output_dir(results)
    paths = {r: record_path(root, r) for r in runs}
    kept = {r: existing_record(paths[r], r.identity(), force=force) for r in runs}  # checks all first
    if any(rec is None for rec in kept.values()):
        _check_pool(corpus, members, {r.method for r in runs})  # before any encoding or training
    data: dict[str, Any] | None = None
    for setting in dict.fromkeys(r.setting for r in runs):
        todo = [r for r in runs if r.setting == setting and kept[r] is None]
        if not todo:
            continue
        if data is None:
            data = {**_load(corpus, None, say, model), "encoder": ENCODER_TOP if model == "top-layers" else ENCODER}
            root.mkdir(parents=True, exist_ok=True)
        for run, record in zip(todo, _records(todo, data, say).values()):
            record.write(paths[run])
            m = record.metrics
            say(f"{run.corpus} {run.setting} {run.method}: AUC {m['auc']}, TPR@1%FPR {m['tpr@1%fpr']}, "
                f"TPR@0.1%FPR {m['tpr@0.1%fpr']}")
            say(f"wrote {paths[run]}")
    reused = sum(rec is not None for rec in kept.values())
    if reused:
        say(f"{corpus}: {reused} of {len(runs)} records existed under this configuration and were kept "
            "(--force recomputes)")
    return [paths[r] for r in runs]
