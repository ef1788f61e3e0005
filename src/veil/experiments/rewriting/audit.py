"""``veil audit dp-mlm``: DP-MLM's empirical epsilon lower bound, per word piece, and its negative control.

One record per (mechanism, claimed epsilon): the distinguishing game of :mod:`veil.attacks.audit.rewriting` on
``sentences`` public sentences of ``corpus`` (its train split, drawn with ``seed``), the clipping bounds calibrated
on ``calibration`` other public sentences of that split, the masked LM the strongest in VEIL_HOME unless named. The
mechanism draws from the OS CSPRNG; the seed chooses sentences and replacements only.

* ``dp-mlm`` must pass: its bound at or below its claim (``violation`` 0);
* ``--control greedy`` (:class:`veil.defenses.rewriting.controls.Greedy`) must fail: its bound above its
  claim.

The game's power falls as epsilon grows: a ratio of e^eps between two output probabilities is measurable only
while the rarer of them is not far below one in ``trials``. So the audit runs at small epsilons, where a broken
mechanism can be caught, and the record says what it certified.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import UnknownNameError
from veil.results import Metric, ResultRecord
from veil.validation import check_int

__all__ = ["CONTROLS", "METHOD", "run_dp_mlm_audit", "headline"]

METHOD = "rewriting-audit"
#: the negative controls the audit must catch: --control name -> registered defense
CONTROLS = {"greedy": "dp-mlm-broken-greedy"}


def _public(corpus: str, n: int, seed: int) -> list[str]:
    import veil.corpora as vc

    data = vc.load(corpus)
    texts = [data.texts[i] for i in data.indices("train")]
    order = np.random.default_rng(seed).permutation(len(texts))
    return [texts[i] for i in order[:n]]


def _mechanism(control: str | None, epsilon: float, mlm: Any, clip: tuple[float, float]) -> Any:
    if control is None:
        from veil.defenses.rewriting.dp_mlm import DPMLM

        return DPMLM(epsilon=epsilon, mlm=mlm, clip=clip)
    import warnings

    from veil.controls import make_control
    from veil.errors import PrivacyLeakWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # the record says it is a control
        return make_control(CONTROLS[control], epsilon=epsilon, mlm=mlm, clip=clip)


def headline(record: ResultRecord) -> str:
    m, c = record.metrics, record.config
    verdict = "VIOLATION" if m["violation"].mean > 0 else "within its claim"
    return (f"{c['mechanism']} claimed epsilon {c['epsilon']:g} per word piece: lower bound "
            f"{m['epsilon_lower_bound'].mean:.3f} at {c['confidence']:.0%} confidence ({verdict})")


def run_dp_mlm_audit(results: str | Path, *, corpus: str = "rt-polarity", epsilons: Sequence[float] = (2.0, 4.0),
                     control: str | None = None, sentences: int = 6, calibration: int = 200,
                     trials: int = 1_000_000, selection_trials: int = 200_000, replacements: int = 4, pairs: int = 3,
                     confidence: float = 0.95, mlm: str | None = None, seed: int = 0, force: bool = False,
                     log: Callable[[str], None] | None = None) -> list[Path]:
    """Write (or reuse) one record per claimed epsilon under ``results`` (module docstring); returns their paths."""
    import veil.corpora as vc
    from veil.attacks.audit.rewriting import audit_dp_mlm
    from veil.defenses.rewriting.dp_mlm import _check_epsilon, clip_bounds, strongest_mlm
    from veil.models.mlm import load_mlm
    from veil.outputs import check_output_dir, existing_record
    from veil.validation import check_real

    say = print if log is None else log
    if corpus not in vc.names():
        raise UnknownNameError("corpus", corpus, vc.names())
    if control is not None and control not in CONTROLS:
        raise UnknownNameError("control", control, sorted(CONTROLS))
    epsilons = [_check_epsilon(e) for e in epsilons]
    sentences, calibration = check_int("sentences", sentences, minimum=1), check_int("calibration", calibration,
                                                                                     minimum=1)
    trials, selection_trials = check_int("trials", trials, minimum=100), check_int("selection_trials",
                                                                                 selection_trials, minimum=100)
    confidence = check_real("confidence", confidence, low=0.0, high=1.0, low_open=True, high_open=True)
    name = mlm or strongest_mlm()
    mechanism_name = "dp-mlm" if control is None else CONTROLS[control]
    root = check_output_dir(results)
    base = {"corpus": corpus, "mechanism": mechanism_name, "sentences": sentences, "calibration": calibration,
            "trials": trials, "selection_trials": selection_trials, "replacements": replacements, "pairs": pairs,
            "confidence": confidence, "seed": seed}
    runs = [({**base, "epsilon": e}, root / f"audit-{corpus}-{mechanism_name}-eps{e:g}.json") for e in epsilons]
    kept = {p: existing_record(p, cfg, force=force) for cfg, p in runs}  # every check before any work
    todo = [(cfg, p) for cfg, p in runs if kept[p] is None]
    if todo:
        model = load_mlm(name)
        public = _public(corpus, sentences + calibration, seed)
        audited, calibrate = public[:sentences], public[sentences:]
        say(f"calibrating DP-MLM's clipping bounds on {len(calibrate)} public {corpus} sentences ...")
        clip = clip_bounds(model, calibrate)
        root.mkdir(parents=True, exist_ok=True)
        for cfg, path in todo:
            start = time.perf_counter()
            mech = _mechanism(control, cfg["epsilon"], model, clip)
            say(f"auditing {mechanism_name} at epsilon {cfg['epsilon']:g} per word piece ({trials:,} scoring runs "
                f"per input) ...")
            out = audit_dp_mlm(mech, audited, trials=trials, selection_trials=selection_trials,
                               replacements=replacements, keep=pairs, alpha=1 - confidence, rng=seed)
            metrics = {"epsilon_lower_bound": Metric(mean=out["epsilon_lower_bound"], n=trials),
                       "violation": Metric(mean=1.0 if out["violation"] else 0.0)}
            config = {**cfg, "mlm": model.identity(), "clip": list(clip), "unit": "word piece",
                      "secret_randomness": "the mechanism's draws from the OS CSPRNG; the seed chooses the audited "
                                           "sentences and the replacements only"}
            rec = ResultRecord(method=METHOD, experiment=path.stem, config=config, metrics=metrics,
                               wall_time_s=time.perf_counter() - start,
                               extra={"audit": out, "guarantee": mech.guarantee.to_dict(),
                                      "control": control is not None})
            rec.write(path)
            say(headline(rec))
            say(f"wrote {path}")
    reused = len(runs) - len(todo)
    if reused:
        say(f"{reused} of {len(runs)} audit records existed under this configuration and were kept (--force "
            "recomputes)")
    return [p for _, p in runs]
