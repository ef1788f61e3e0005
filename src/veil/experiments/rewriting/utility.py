"""``veil rewrite utility``: what DP-MLM's rewritten text still serves, on a labelled corpus (rt-polarity by default).

One record per epsilon (per word piece), each with the same non-private reference:

* ``accuracy``: a logistic regression on MiniLM vectors of the corpus' clean public train split (the classifier the
  text's recipient already has), tested on the test split's texts rewritten by DP-MLM (Wilson 95% interval);
  ``accuracy_clean``: the same classifier on the clean test texts; ``majority_rate``: always the train split's most
  frequent label, and ``p_beats_majority`` the one-sided binomial test of the accuracy against it;
* ``cosine``: the mean cosine of each test text's MiniLM vector and its rewrite's (bootstrap interval over texts), the
  meaning kept; ``kept``: the share of word pieces drawn unchanged (pooled over every position);
* a few rewritten examples (the corpus' public test texts).

The masked LM's logits do not depend on epsilon, so they are computed once (the slow part: one forward pass per word
piece) and every epsilon draws from them. The clipping bounds are calibrated on ``calibration`` train sentences.
Each rewrite draws from the OS CSPRNG, so two runs give different rewrites; the seed chooses the calibration and
test subsample only.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError, UnknownNameError
from veil.results import Metric, ResultRecord
from veil.validation import check_int

__all__ = ["METHOD", "run_dp_mlm_utility", "headline"]

METHOD = "rewriting"
EXAMPLES = 5


def headline(record: ResultRecord) -> str:
    m, c = record.metrics, record.config
    a = m["accuracy"]
    return (f"dp-mlm at epsilon {c['epsilon']:g} per word piece on {c['corpus']}: accuracy {a.mean:.3f} "
            f"[{a.ci_low:.3f}, {a.ci_high:.3f}] (clean {m['accuracy_clean'].mean:.3f}, majority "
            f"{m['majority_rate'].mean:.3f}); cosine to the original {m['cosine'].mean:.3f}; "
            f"{m['kept'].mean:.1%} of word pieces kept")


def run_dp_mlm_utility(results: str | Path, *, corpus: str = "rt-polarity",
                       epsilons: Sequence[float] = (10.0, 25.0, 50.0, 100.0), n_test: int | None = None,
                       calibration: int = 200, mlm: str | None = None, seed: int = 0, force: bool = False,
                       log: Callable[[str], None] | None = None) -> list[Path]:
    """Write (or reuse) one record per epsilon under ``results`` (module docstring); returns their paths."""
    import veil.corpora as vc
    from veil.defenses.rewriting.dp_mlm import DPMLM, _check_epsilon, clip_bounds, strongest_mlm
    from veil.outputs import check_output_dir, existing_record

    say = print if log is None else log
    if corpus not in vc.names():
        raise UnknownNameError("corpus", corpus, vc.names())
    epsilons = [_check_epsilon(e) for e in epsilons]
    calibration = check_int("calibration", calibration, minimum=1)
    if n_test is not None:
        n_test = check_int("n_test", n_test, minimum=10)
    name = mlm or strongest_mlm()
    root = check_output_dir(results)
    base = {"corpus": corpus, "n_test": n_test, "calibration": calibration, "seed": seed, "mlm_name": name,
            "classifier": "logistic regression on MiniLM vectors of the clean train split", "unit": "word piece"}
    runs = [({**base, "epsilon": e}, root / f"{corpus}-dp-mlm-eps{e:g}.json") for e in epsilons]
    kept = {p: existing_record(p, cfg, force=force) for cfg, p in runs}  # every check before any work
    todo = [(cfg, p) for cfg, p in runs if kept[p] is None]
    if todo:
        data = vc.load(corpus)
        if data.task != "classification" or data.labels is None:
            raise InvalidParameterError(f"corpus {corpus!r} has no classification labels; DP-MLM's utility needs a "
                                        "labelled corpus such as rt-polarity")
        start = time.perf_counter()
        shared = _shared(data, n_test, calibration, name, seed, say)
        root.mkdir(parents=True, exist_ok=True)
        for cfg, path in todo:
            t0 = time.perf_counter()
            mech = DPMLM(epsilon=cfg["epsilon"], mlm=shared["model"], clip=shared["clip"])
            rec = _record(cfg, mech, shared, time.perf_counter() - t0 + shared["seconds"])
            rec.write(path)
            say(headline(rec))
            say(f"wrote {path}")
        say(f"done in {time.perf_counter() - start:.0f} s")
    reused = len(runs) - len(todo)
    if reused:
        say(f"{reused} of {len(runs)} records existed under this configuration and were kept (--force recomputes)")
    return [p for _, p in runs]


def _shared(data: Any, n_test: int | None, calibration: int, name: str, seed: int,
            say: Callable[[str], None]) -> dict[str, Any]:
    """What every epsilon shares: the classifier, the clean test vectors, the bounds and the logits."""
    from sklearn.linear_model import LogisticRegression

    from veil.defenses.rewriting.dp_mlm import DPMLM, clip_bounds
    from veil.encoders import TextEncoder
    from veil.models.mlm import load_mlm

    t0 = time.perf_counter()
    y = np.asarray(data.labels, dtype=np.int64)
    train, test = data.indices("train"), data.indices("test")
    gen = np.random.default_rng(seed)
    if n_test is not None and n_test < len(test):
        test = np.sort(gen.choice(test, size=n_test, replace=False))
    encoder = TextEncoder("minilm")
    say(f"{data.name}: MiniLM vectors of its {len(data.texts):,} texts (cached after the first run) ...")
    X = encoder.encode_corpus(data, None, progress=False).astype(np.float64)
    clf = LogisticRegression(max_iter=2000, random_state=seed).fit(X[train], y[train])
    texts = [data.texts[i] for i in test]
    model = load_mlm(name)
    public = [data.texts[i] for i in gen.permutation(train)[:calibration]]
    clip = clip_bounds(model, public)
    say(f"DP-MLM on {name}: clipping bounds [{clip[0]:.3f}, {clip[1]:.3f}] from {len(public)} public train texts; "
        f"the masked LM's logits at every word piece of {len(texts):,} test texts ...")
    probe = DPMLM(epsilon=1.0, mlm=model, clip=clip)
    logits: list[Any] = []
    step = 128
    for i in range(0, len(texts), step):
        logits += probe.logits(texts[i:i + step])
        say(f"  {min(i + step, len(texts)):,}/{len(texts):,} texts ({time.perf_counter() - t0:.0f} s)")
    values, counts = np.unique(y[train], return_counts=True)
    majority = int(values[np.argmax(counts)])
    return {"model": model, "clip": clip, "clf": clf, "encoder": encoder, "texts": texts, "y": y[test],
            "X": X[test], "logits": logits, "majority": majority, "n_train": int(len(train)),
            "test_sha256": hashlib.sha256(np.ascontiguousarray(test).tobytes()).hexdigest()[:16],
            "seconds": time.perf_counter() - t0}


def _record(cfg: dict[str, Any], mech: Any, shared: dict[str, Any], seconds: float) -> ResultRecord:
    from scipy import stats

    from veil.metrics.leakage import wilson_interval
    from veil.metrics.stats import bootstrap_mean

    texts, y = shared["texts"], shared["y"]
    rewritten = mech.rewrite_logits(texts, shared["logits"])
    E = shared["encoder"].encode(rewritten, progress=False).astype(np.float64)
    n = len(texts)
    right = int((shared["clf"].predict(E) == y).sum())
    clean = int((shared["clf"].predict(shared["X"]) == y).sum())
    majority = float(np.mean(y == shared["majority"]))
    low, high = wilson_interval(right, n)
    c_low, c_high = wilson_interval(clean, n)
    X = shared["X"]
    cos = (E * X).sum(1) / (np.linalg.norm(E, axis=1) * np.linalg.norm(X, axis=1))
    boot = bootstrap_mean(cos, seed=int(cfg["seed"]))  # a Metric
    pieces = [mech._ctx.pieces(o) for o in rewritten]
    same = [(a == b) for (ids, _), new in zip(shared["logits"], pieces) if len(ids) == len(new)
            for a, b in zip(ids, new)]
    p_major = float(stats.binomtest(right, n, majority, alternative="greater").pvalue)
    metrics = {"accuracy": Metric(mean=right / n, n=n, ci_low=low, ci_high=high),
               "accuracy_clean": Metric(mean=clean / n, n=n, ci_low=c_low, ci_high=c_high),
               "majority_rate": Metric(mean=majority, n=n),
               "p_beats_majority": Metric(mean=p_major),
               "cosine": Metric(mean=float(cos.mean()), n=n, ci_low=boot.ci_low, ci_high=boot.ci_high),
               "kept": Metric(mean=float(np.mean(same)) if same else float("nan"), n=len(same))}
    config = {**cfg, "mlm": mech.mlm.identity(), "clip": list(shared["clip"]), "n_train": shared["n_train"],
              "n_test_used": n, "test_sha256": shared["test_sha256"], "temperature": mech.temperature,
              "secret_randomness": "every rewrite's draws from the OS CSPRNG; the seed chooses the calibration "
                                   "texts and the test subsample only"}
    examples = [{"original": t, "rewritten": r} for t, r in zip(texts[:EXAMPLES], rewritten[:EXAMPLES])]
    return ResultRecord(method=METHOD, experiment=f"{cfg['corpus']}-dp-mlm-eps{cfg['epsilon']:g}", config=config,
                        metrics=metrics, wall_time_s=seconds,
                        extra={"guarantee": mech.guarantee.to_dict(), "examples": examples,
                               "same_length_share": float(np.mean([len(i) == len(p) for (i, _), p in
                                                                   zip(shared["logits"], pieces)]))})
