"""``veil audit dpsgd``: the one-run audit of DP-SGD (Steinke, Nasr and Jagielski 2023) on veil's head, and the
negative controls it must catch.

One run per (defense, claimed epsilon, setting, seed): m Dirac canaries (:mod:`veil.attacks.audit.canaries`), each
included with probability 1/2 (OS CSPRNG), are trained with the real examples (the corpus' train split, an evenly
spaced subset of ``max_train``: frozen MiniLM embeddings, torch backend) by the defense's own loop, at a sampling
rate and number of steps fixed by the public n = real + m/2 (not by how many canaries happened to be included).

Settings: ``one-step`` (the whole set in one lot, one step: q = 1, the Gaussian mechanism once; one-run audits
are tightest there) and ``recipe`` (``veil dpsgd train``'s default recipe: 10 epochs, expected lot 256).

Measured, per run:

* ``epsilon_lower_white``: the one-run lower bound (:func:`veil.attacks.audit.one_run.best_bound`, 95%
  confidence, Bonferroni over the fixed guess counts) from the white-box scores (every step's noisy gradients);
* ``epsilon_lower_black``: the same from the released model's log-probability of each canary's label;
* ``epsilon_lower_ideal``: what a perfect white-box auditor would certify from the claimed mechanism at the same
  size (:func:`veil.attacks.audit.one_run.ideal_bound`, a simulation): the ceiling of a one-run audit here;
* ``noise_variance_ratio`` and ``sensitivity_z``: the transcript checks of the noise and the clipping
  (:func:`veil.attacks.audit.canaries.mechanism_checks`, each at level 1e-6);
* ``passed``: 1 when neither bound exceeds the accounted epsilon and both checks pass, else 0.

A real defense must pass (``veil audit dpsgd`` exits 1 if it fails); a control (``--control half-noise`` or
``no-clip``: :mod:`veil.defenses.dpsgd.controls`) must fail (exit 1 if it passes). What each part can catch: a
one-run bound certifies far less than the true epsilon of Gaussian noise, so halved noise is caught by the noise
check, not by the bound; unbounded sensitivity (no clipping) is caught by both.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError, InvalidTypeError
from veil.experiments.dpsgd.utility import ENCODER
from veil.results import Metric, ResultRecord

__all__ = ["METHOD", "SETTINGS", "CONTROLS", "AuditRun", "planned_audits", "record_path", "run_audit", "audit_one"]

METHOD = "dpsgd-audit"
#: setting -> (epochs, expected lot size; None = the whole public n)
SETTINGS: dict[str, tuple[int, int | None]] = {"one-step": (1, None), "recipe": (10, 256)}
#: --control name -> registered control
CONTROLS = {"half-noise": "dpsgd-broken-half-noise", "no-clip": "dpsgd-broken-no-clip"}
ALPHA = 0.05


@dataclass(frozen=True)
class AuditRun:
    """One audit's configuration (``defense``: ``dpsgd`` or a registered control)."""

    corpus: str
    defense: str
    epsilon: float
    setting: str
    canaries: int
    max_train: int
    clip: float
    lr: float
    hidden: tuple[int, ...]
    accountant: str
    seed: int

    def identity(self) -> dict[str, Any]:
        out = asdict(self)
        out["hidden"] = list(self.hidden)
        return out


def record_path(root: str | Path, run: AuditRun) -> Path:
    from veil.outputs import tag

    name = tag(m=run.canaries, n=run.max_train, clip=run.clip, seed=run.seed)
    return Path(root) / f"{run.corpus}-{run.defense}-{run.setting}-eps{run.epsilon:g}-{name}.json"


def planned_audits(*, corpus: str, epsilons: Sequence[float], settings: Sequence[str], canaries: int,
                   max_train: int, control: str | None = None, clip: float = 1.0, lr: float = 1e-3,
                   hidden: Sequence[int] = (128,), accountant: str = "prv",
                   seeds: Sequence[int] = (0,)) -> list[AuditRun]:
    """Every audit of a sweep, validated (typed errors, nothing run)."""
    from veil.defenses.dpsgd import ACCOUNTANTS
    from veil.experiments.dpsgd.utility import check_head
    from veil.validation import check_choice, check_epsilon, check_int

    if not isinstance(corpus, str) or not corpus:
        raise InvalidTypeError("corpus must be a corpus name such as 'rt-polarity'")
    for name, value in (("epsilons", epsilons), ("settings", settings), ("seeds", seeds)):
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
            raise InvalidTypeError(f"{name} must be a non-empty list")
    eps = tuple(dict.fromkeys(check_epsilon(e, what="DP-SGD") for e in epsilons))
    sets = tuple(dict.fromkeys(check_choice("setting", s, tuple(SETTINGS)) for s in settings))
    seeds = tuple(check_int("seed", s, minimum=0) for s in seeds)
    if len(set(seeds)) != len(seeds):
        raise InvalidParameterError(f"seeds repeat: {list(seeds)}; give each seed once")
    check_int("canaries", canaries, minimum=20, hint="; the one-run bound needs at least 20 canaries")
    check_int("max_train", max_train, minimum=2)
    hidden = check_head(clip=clip, lr=lr, hidden=hidden)
    check_choice("accountant", accountant, ACCOUNTANTS)
    defense = "dpsgd" if control is None else CONTROLS[check_choice("control", control, tuple(CONTROLS))]
    for s in sets:
        lot = SETTINGS[s][1]
        if lot is not None and lot > max_train:
            raise InvalidParameterError(f"setting {s!r} draws lots of {lot} examples, more than max_train={max_train}"
                                        f"; raise max_train to at least {lot}")
    return [AuditRun(corpus=corpus, defense=defense, epsilon=e, setting=s, canaries=int(canaries),
                     max_train=int(max_train), clip=float(clip), lr=float(lr), hidden=hidden, accountant=accountant,
                     seed=s_) for s_ in seeds for s in sets for e in eps]


def audit_one(run: AuditRun, X: np.ndarray, y: np.ndarray, num_classes: int, *, rng: Any = None) -> dict[str, Any]:
    """Run one audit on real embeddings ``X`` (n, d) and labels ``y``; the measurements (module docstring).
    ``rng`` None: the canaries' inclusion and labels, and the defense's lots and noise, from the OS CSPRNG; a seed
    for tests only."""
    from veil.attacks.audit.canaries import DiracCanaries, WhiteBoxScorer, black_box_scores, mechanism_checks
    from veil.attacks.audit.one_run import best_bound, ideal_bound
    from veil.defenses.base import get_defense
    from veil.random import as_generator, uniform

    start = time.perf_counter()
    own, theirs = (None, None) if rng is None else as_generator(rng).spawn(2)
    m, d = run.canaries, X.shape[1]
    draws = uniform(own, 2 * m)
    included = draws[:m] < 0.5
    labels = np.minimum((draws[m:] * num_classes).astype(np.int64), num_classes - 1)
    canaries = DiracCanaries(m=m, d=d, labels=labels)
    n_public = len(X) + m // 2
    epochs, lot = SETTINGS[run.setting]
    batch = n_public if lot is None else lot
    defense = get_defense(run.defense)(epsilon=run.epsilon, clip=run.clip, epochs=epochs, batch_size=batch,
                                       lr=run.lr, hidden=run.hidden, num_classes=num_classes, init_seed=run.seed,
                                       accountant=run.accountant, rng=theirs)
    acc = defense.plan(n_public)
    scorer = WhiteBoxScorer(canaries, sigma=acc.sigma, clip=run.clip, q=acc.sample_rate,
                            expected=(batch / n_public) * n_public, scale=math.sqrt(canaries.dim))
    X_all = np.concatenate([canaries.pad(X), canaries.inputs(np.flatnonzero(included))])
    y_all = np.concatenate([np.asarray(y, dtype=np.int64), labels[included]])
    model = defense.train((X_all, y_all), public_n=n_public, transcript=scorer)
    del X_all
    white = best_bound(scorer.scores, included, delta=acc.delta, alpha=ALPHA)
    black = best_bound(black_box_scores(model, canaries), included, delta=acc.delta, alpha=ALPHA)
    checks = mechanism_checks(scorer, included)
    ideal = ideal_bound(m, sigma=acc.sigma, q=acc.sample_rate, steps=acc.steps, delta=acc.delta, alpha=ALPHA,
                        rng=None if rng is None else own.spawn(1)[0])
    claimed = float(acc.epsilon)
    passed = white.epsilon <= claimed and black.epsilon <= claimed and checks["noise"]["passed"] and \
        checks["sensitivity"]["passed"]
    return {"claimed": claimed, "accounting": acc, "white": white, "black": black, "ideal": ideal, "checks": checks,
            "passed": bool(passed), "included": int(included.sum()), "n_public": n_public, "batch": batch,
            "steps": acc.steps, "seconds": time.perf_counter() - start, "guarantee": model.guarantee.to_dict()}


def _record(run: AuditRun, out: dict[str, Any], data: dict[str, Any]) -> ResultRecord:
    acc = out["accounting"]
    checks = out["checks"]
    metrics = {"epsilon_claimed": Metric(mean=out["claimed"]),
               "epsilon_lower_white": Metric(mean=out["white"].epsilon, n=run.canaries),
               "epsilon_lower_black": Metric(mean=out["black"].epsilon, n=run.canaries),
               "epsilon_lower_ideal": Metric(mean=out["ideal"].epsilon, n=run.canaries),
               "noise_variance_ratio": Metric(mean=checks["noise"]["variance_ratio"], n=checks["noise"]["dof"]),
               "noise_p_value": Metric(mean=checks["noise"]["p_value"]),
               "sensitivity_z": Metric(mean=checks["sensitivity"]["z"]),
               "sensitivity_p_value": Metric(mean=checks["sensitivity"]["p_value"]),
               "sigma": Metric(mean=acc.sigma), "delta": Metric(mean=acc.delta),
               "steps": Metric(mean=float(out["steps"])), "sample_rate": Metric(mean=acc.sample_rate),
               "passed": Metric(mean=1.0 if out["passed"] else 0.0)}
    config = {**run.identity(), "encoder": ENCODER, "n_real": data["n_train"], "n_public": out["n_public"],
              "batch_size": out["batch"], "epochs": SETTINGS[run.setting][0], "alpha": ALPHA,
              "check_alpha": checks["alpha"], "canary_norm": 1.0,
              "secret_randomness": "OS CSPRNG (canary inclusion and labels, Poisson lots, noise); the seed sets "
                                   "the initial weights only"}
    extra = {"white": out["white"].to_dict(), "black": out["black"].to_dict(), "ideal": out["ideal"].to_dict(),
             "checks": checks,
             "included": out["included"], "guarantee": out["guarantee"], "audit_seconds": out["seconds"],
             "control": run.defense != "dpsgd"}
    return ResultRecord(method=METHOD, experiment=f"{run.corpus}-{run.defense}-{run.setting}-eps{run.epsilon:g}",
                        config=config, metrics=metrics, wall_time_s=out["seconds"], extra=extra)


def headline(record: ResultRecord) -> str:
    m, c = record.metrics, record.config
    verdict = "PASS" if m["passed"].mean == 1.0 else "FAIL"
    return (f"{c['defense']} {c['setting']} claimed epsilon {m['epsilon_claimed'].mean:.3f}: one-run lower bound "
            f"white-box {m['epsilon_lower_white'].mean:.3f}, black-box {m['epsilon_lower_black'].mean:.3f} (a perfect "
            f"auditor: {m['epsilon_lower_ideal'].mean:.3f}); noise "
            f"variance / accounted {m['noise_variance_ratio'].mean:.4f} (p {m['noise_p_value'].mean:.2g}), "
            f"sensitivity z {m['sensitivity_z'].mean:.2f} (p {m['sensitivity_p_value'].mean:.2g}); {verdict}")


def run_audit(results: str | Path, *, corpus: str = "rt-polarity", epsilons: Sequence[float] = (1.0, 2.0, 4.0),
              settings: Sequence[str] = ("one-step", "recipe"), canaries: int = 10000, max_train: int = 2000,
              control: str | None = None, clip: float = 1.0, lr: float = 1e-3, hidden: Sequence[int] = (128,),
              accountant: str = "prv", seeds: Sequence[int] = (0,), force: bool = False,
              log: Callable[[str], None] | None = None) -> list[Path]:
    """Write (or reuse) one record per planned audit under ``results``; returns their paths."""
    from veil.experiments.dpsgd.utility import _load
    from veil.outputs import check_output_dir, existing_record

    say = print if log is None else log
    runs = planned_audits(corpus=corpus, epsilons=epsilons, settings=settings, canaries=canaries,
                          max_train=max_train, control=control, clip=clip, lr=lr, hidden=hidden,
                          accountant=accountant, seeds=seeds)
    root = check_output_dir(results)
    paths = [record_path(root, r) for r in runs]
    kept = {p: existing_record(p, r.identity(), force=force) for r, p in zip(runs, paths)}  # checks all first
    data: dict[str, Any] | None = None
    for run, path in zip(runs, paths):
        if kept[path] is not None:
            continue
        if data is None:
            data = _load(corpus, max_train, say)
            root.mkdir(parents=True, exist_ok=True)
            say(f"{corpus}: {data['n_train']} real training embeddings, {canaries} canaries per audit")
        say(f"auditing {run.defense} at epsilon {run.epsilon:g}, setting {run.setting} ...")
        out = audit_one(run, data["X_train"], data["y_train"], data["num_classes"])
        record = _record(run, out, data)
        record.write(path)
        say(headline(record))
        say(f"wrote {path}")
    reused = sum(rec is not None for rec in kept.values())
    if reused:
        say(f"{reused} of {len(paths)} audit records existed under this configuration and were kept (--force "
            "recomputes)")
    return paths
