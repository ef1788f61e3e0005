"""What DP-SGD costs a classifier: accuracy at each target epsilon against the non-private run of the same setting.

Setting ``head``: veil's MLP head (384-128-classes, no dropout) on frozen MiniLM sentence embeddings
(all-MiniLM-L6-v2, mean pooling, L2-normalised, torch backend, cached), trained on the corpus' train split (or an
evenly spaced, seed-free subset of ``max_train`` of it) for a fixed number of epochs (no early stopping: choosing
an epoch on private dev data would spend privacy nobody accounts for) and tested on its test split.

Setting ``top-layers``: MiniLM's last :data:`TOP_LAYERS` transformer layers are trained too, with the same head on
their mean-pooled, L2-normalised output (:mod:`veil.models.top_layers`); the embeddings and the first layers stay
frozen and are run once per text (:data:`MAX_LENGTH` tokens, longer texts truncated). Everything else as ``head``.

For every seed: ``none`` (:class:`~veil.defenses.dpsgd.PlainTraining`) and one DP-SGD run per epsilon
(:class:`~veil.defenses.dpsgd.DPSGD`, delta = 1/(10 n), n the training examples, PRV accountant with RDP beside
it), all with the same slice, epochs, expected lot size, learning rate, optimizer and initial weights (the seed
sets them and nothing else). Lots and noise come from the OS CSPRNG, never from the seed, so reruns differ.

One :class:`~veil.results.ResultRecord` per (epsilon or ``none``, seed), with metrics

* ``accuracy``: test accuracy, Wilson 95% interval over test examples;
* ``steps``, ``sample_rate``: the lots (q = batch_size / n as drawn: ``ceil(q 2^53) / 2^53``);
* ``majority_rate``: the test split's most common class (what a model that predicts one class scores), and
  ``extra["one_class"]``: whether this model did (every test prediction the same class);
* DP-SGD only: ``epsilon`` (the accountant's, at most the target), ``epsilon_prv``, ``epsilon_rdp``, ``delta``,
  ``sigma`` (the noise multiplier), and ``accuracy_change``: its accuracy minus that of the ``none`` run of the
  same seed, paired over test examples (normal 95% interval of the mean of per-example differences).

``extra`` holds the guarantee in words, the slice sizes and which test examples each run got right (``correct``,
a string of 0/1 in test order: the paired comparisons need it). A record is reused when its configuration matches
(:func:`veil.outputs.existing_record`), refused (:class:`~veil.errors.StaleResultError`) when it does not, unless
``force``; every check runs before any training, every record is written atomically and logged "wrote PATH" once
it exists. A DP-SGD record whose ``none`` run was made again gets its ``accuracy_change`` recomputed from the two
records (no training).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError, InvalidTypeError
from veil.results import Metric, ResultRecord

__all__ = ["METHOD", "EPSILONS", "SETTINGS", "DPSGDRun", "run_dpsgd", "record_path", "planned_runs"]

METHOD = "dpsgd"
EPSILONS = (1.0, 3.0, 8.0)
SETTINGS = ("head", "top-layers")
#: the top-layers setting: MiniLM's layers trained (of 6) and the tokens kept per text
TOP_LAYERS = 2
MAX_LENGTH = 48
LEVEL = 0.95
ENCODER = "minilm (all-MiniLM-L6-v2), mean pooling, L2-normalised, torch backend"
ENCODER_TOP = (f"minilm (all-MiniLM-L6-v2): embeddings and layers 1-{6 - TOP_LAYERS} frozen (run once per text, "
               f"{MAX_LENGTH} tokens), layers {7 - TOP_LAYERS}-6 trained with the head on their mean-pooled, "
               "L2-normalised output; torch, eager attention")


@dataclass(frozen=True)
class DPSGDRun:
    """One record's configuration: ``epsilon`` None is the non-private run."""

    corpus: str
    setting: str
    epsilon: float | None
    seed: int
    epochs: int
    batch_size: int
    clip: float
    lr: float
    hidden: tuple[int, ...]
    optimizer: str
    accountant: str
    max_train: int | None

    @property
    def label(self) -> str:
        return "none" if self.epsilon is None else f"eps{self.epsilon:g}"

    def identity(self) -> dict[str, Any]:
        """What the record's numbers depend on (compared before a record is reused); the non-private run does not
        depend on clip or the accountant."""
        out = asdict(self)
        out["hidden"] = list(self.hidden)
        if self.epsilon is None:
            del out["clip"], out["accountant"]
        if self.setting == "top-layers":
            out.update(trained_layers=TOP_LAYERS, max_length=MAX_LENGTH)
        return out


def record_path(root: str | Path, run: DPSGDRun) -> Path:
    from veil.outputs import tag

    sizes = tag(ep=run.epochs, bs=run.batch_size, clip=None if run.epsilon is None else run.clip,
                opt=None if run.optimizer == "adam" else run.optimizer, lr=run.lr, n=run.max_train, seed=run.seed)
    return Path(root) / f"{run.corpus}-{run.setting}-{run.label}-{sizes}.json"


def _seq(name: str, value: Any) -> tuple:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise InvalidTypeError(f"{name} must be a non-empty list, e.g. {name}=(1, 3, 8)" if name == "epsilons" else
                               f"{name} must be a non-empty list, e.g. {name}=(0, 1, 2)")
    return tuple(value)


def check_head(*, clip: float, lr: float, hidden: Any) -> tuple[int, ...]:
    """The checks every DP-SGD experiment makes of its head's recipe (typed errors): clip and lr finite and > 0,
    hidden a list of widths >= 1; returns ``hidden`` as a tuple."""
    from veil.validation import check_int, check_real

    check_real("clip", clip, low=0.0, high=math.inf, low_open=True, high_open=True)
    check_real("lr", lr, low=0.0, high=math.inf, low_open=True, high_open=True)
    if isinstance(hidden, (str, bytes)) or not isinstance(hidden, Sequence):
        raise InvalidTypeError("hidden must be a list of layer widths such as (128,)")
    return tuple(check_int("hidden width", h, minimum=1) for h in hidden)


def planned_runs(*, corpus: str, epsilons: Sequence[float], setting: str, epochs: int, batch_size: int, clip: float,
                 lr: float, hidden: Sequence[int], optimizer: str, accountant: str, seeds: Sequence[int],
                 max_train: int | None) -> list[DPSGDRun]:
    """Every run of a sweep, validated (typed errors, nothing run): per seed, ``none`` then each epsilon."""
    from veil.defenses.dpsgd import ACCOUNTANTS
    from veil.defenses.dpsgd.engine import OPTIMIZERS
    from veil.validation import check_choice, check_epsilon, check_int

    if not isinstance(corpus, str) or not corpus:
        raise InvalidTypeError("corpus must be a corpus name such as 'rt-polarity'")
    check_choice("setting", setting, SETTINGS)
    eps = tuple(dict.fromkeys(check_epsilon(e, what="DP-SGD") for e in _seq("epsilons", epsilons)))
    seeds = tuple(check_int("seed", s, minimum=0) for s in _seq("seeds", seeds))
    if len(set(seeds)) != len(seeds):
        raise InvalidParameterError(f"seeds repeat: {list(seeds)}; give each seed once")
    check_int("epochs", epochs, minimum=1)
    check_int("batch_size", batch_size, minimum=1)
    hidden = check_head(clip=clip, lr=lr, hidden=hidden)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    check_choice("accountant", accountant, ACCOUNTANTS)
    if max_train is not None:
        check_int("max_train", max_train, minimum=2)
    base = dict(corpus=corpus, setting=setting, epochs=int(epochs), batch_size=int(batch_size), clip=float(clip),
                lr=float(lr), hidden=hidden, optimizer=optimizer, accountant=accountant, max_train=max_train)
    return [DPSGDRun(epsilon=e, seed=s, **base) for s in seeds for e in (None, *eps)]


# --------------------------------------------------------------------------- statistics
def _wilson(correct: np.ndarray) -> Metric:
    from veil.metrics.leakage import wilson_interval

    n, k = len(correct), int(correct.sum())
    lo, hi = wilson_interval(k, n, LEVEL)
    return Metric(mean=k / n, n=n, ci_low=lo, ci_high=hi, ci_level=LEVEL)


def majority_rate(y_test: np.ndarray, num_classes: int) -> Metric:
    """The share of the test split's most common class: what a model that predicts one class for everything
    scores (``n``: the test examples)."""
    counts = np.bincount(y_test, minlength=num_classes)
    return Metric(mean=float(counts.max() / counts.sum()), n=int(counts.sum()))


def _paired_change(a: np.ndarray, b: np.ndarray) -> Metric:
    """Mean of a_i - b_i (per test example, each 0 or 1) with a normal 95% interval."""
    from scipy.stats import norm

    d = a.astype(np.float64) - b.astype(np.float64)
    n = len(d)
    mean = float(d.mean())
    half = float(norm.ppf(0.5 + LEVEL / 2)) * float(d.std(ddof=1)) / math.sqrt(n) if n > 1 else math.inf
    return Metric(mean=mean, n=n, ci_low=mean - half, ci_high=mean + half, ci_level=LEVEL)


def _bits(correct: np.ndarray) -> str:
    return "".join("1" if c else "0" for c in correct)


def _unbits(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8) == ord("1")


# --------------------------------------------------------------------------- data
def _subsample(idx: np.ndarray, limit: int | None) -> np.ndarray:
    """An evenly spaced, seed-free subset (every configuration shares it)."""
    if limit is None or len(idx) <= limit:
        return idx
    return idx[np.linspace(0, len(idx) - 1, limit).round().astype(int)]


def _load(corpus: str, max_train: int | None, say: Callable[[str], None], setting: str = "head") -> dict[str, Any]:
    """The train / test slices of the corpus as the setting's model reads them: frozen MiniLM embeddings (the whole
    corpus' cache entry) for ``head``; the inputs of MiniLM's trained top layers for ``top-layers``."""
    import veil.corpora as vc

    data = vc.load(corpus)
    if data.task != "classification" or data.labels is None:
        raise InvalidParameterError(f"corpus {corpus!r} has no classification labels; DP-SGD's utility needs a "
                                    "labelled corpus such as rt-polarity")
    train = _subsample(data.indices("train"), max_train)
    test = data.indices("test")
    y = np.asarray(data.labels, dtype=np.int64)
    if setting == "top-layers":
        from veil.models.top_layers import frozen_inputs, load_minilm

        say(f"{corpus}: running MiniLM's frozen layers over {len(train) + len(test):,} texts (train slice and test "
            f"split; about a minute per 5,000 texts on one core) ...")
        bert, tokenizer = load_minilm()
        texts = data.texts
        X_train = frozen_inputs([texts[i] for i in train], trained=TOP_LAYERS, max_length=MAX_LENGTH, bert=bert,
                                tokenizer=tokenizer)
        X_test = frozen_inputs([texts[i] for i in test], trained=TOP_LAYERS, max_length=MAX_LENGTH, bert=bert,
                               tokenizer=tokenizer)
    else:
        from veil.encoders import TextEncoder
        from veil.encoders.plan import announce_corpus

        encoder = TextEncoder("minilm", backend="torch")
        announce_corpus(encoder, data, what=f"texts of {corpus}", log=say)
        X = encoder.encode_corpus(data, None, progress=False)
        X_train, X_test = X[train], X[test]
    return {"X_train": X_train, "y_train": y[train], "X_test": X_test, "y_test": y[test],
            "num_classes": int(data.num_classes), "n_train": int(len(train)), "n_test": int(len(test)),
            "test_sha256": hashlib.sha256(np.ascontiguousarray(test).tobytes()).hexdigest()[:16]}


# --------------------------------------------------------------------------- one run
def _defense(run: DPSGDRun, num_classes: int) -> Any:
    from veil.defenses.dpsgd import DPSGD, PlainTraining

    common = dict(epochs=run.epochs, batch_size=run.batch_size, lr=run.lr, optimizer=run.optimizer,
                  hidden=run.hidden, num_classes=num_classes, init_seed=run.seed)
    if run.setting == "top-layers":
        from veil.models.top_layers import build_top_layers

        common["model"] = build_top_layers(num_classes=num_classes, trained=TOP_LAYERS, max_length=MAX_LENGTH,
                                           hidden=run.hidden, init_seed=run.seed)
    if run.epsilon is None:
        return PlainTraining(**common)
    return DPSGD(epsilon=run.epsilon, clip=run.clip, accountant=run.accountant, **common)  # rng None: OS CSPRNG


def _record(run: DPSGDRun, data: dict[str, Any], baseline: ResultRecord | None) -> ResultRecord:
    start = time.perf_counter()
    defense = _defense(run, data["num_classes"])
    model = defense.train((data["X_train"], data["y_train"]))
    correct = model.evaluate(data["X_test"], data["y_test"]).correct
    predicted = np.bincount(model.predict(data["X_test"]), minlength=data["num_classes"])
    metrics = {"accuracy": _wilson(correct), "steps": Metric(mean=float(model.steps)),
               "sample_rate": Metric(mean=model.sample_rate),
               "majority_rate": majority_rate(data["y_test"], data["num_classes"])}
    extra: dict[str, Any] = {"guarantee": model.guarantee.to_dict(), "n_train": data["n_train"],
                             "n_test": data["n_test"], "correct": _bits(correct), "train_seconds": model.seconds,
                             "one_class": bool((predicted > 0).sum() == 1)}
    acc = model.accounting
    if acc is not None:
        metrics.update(epsilon=Metric(mean=acc.epsilon), epsilon_prv=Metric(mean=acc.epsilon_prv),
                       epsilon_rdp=Metric(mean=acc.epsilon_rdp), delta=Metric(mean=acc.delta),
                       sigma=Metric(mean=acc.sigma))
    config = {**run.identity(), "encoder": ENCODER_TOP if run.setting == "top-layers" else ENCODER,
              "n_train": data["n_train"], "n_test": data["n_test"],
              "test_sha256": data["test_sha256"], "defense": defense.config(),
              "delta_rule": None if run.epsilon is None else "1/(10 n_train)",
              "secret_randomness": "OS CSPRNG (Poisson lots and noise); the seed sets the initial weights only"}
    record = ResultRecord(method=METHOD, experiment=f"{run.corpus}-{run.setting}-{run.label}", config=config,
                          metrics=metrics, wall_time_s=time.perf_counter() - start, extra=extra)
    return _with_change(record, baseline)


def _with_change(record: ResultRecord, baseline: ResultRecord | None) -> ResultRecord:
    """``record`` with ``accuracy_change`` against ``baseline`` (the none run of its seed); unchanged for none."""
    if baseline is None:
        return record
    if baseline.config.get("seed") != record.config.get("seed") or baseline.config.get("epsilon") is not None:
        raise InvalidParameterError("internal error: a DP-SGD record is compared with the non-private run of its "
                                    "own seed only")
    mine, theirs = _unbits(record.extra["correct"]), _unbits(baseline.extra["correct"])
    if len(mine) != len(theirs):
        raise InvalidParameterError("the DP-SGD and non-private records hold different test sets; re-run with --force")
    record.metrics["accuracy_change"] = _paired_change(mine, theirs)
    record.extra["baseline"] = {"created": baseline.created, "correct_sha256":
                                hashlib.sha256(baseline.extra["correct"].encode()).hexdigest()[:16]}
    return record


def _stale_change(record: ResultRecord, baseline: ResultRecord) -> bool:
    want = hashlib.sha256(baseline.extra["correct"].encode()).hexdigest()[:16]
    return (record.extra.get("baseline") or {}).get("correct_sha256") != want


# --------------------------------------------------------------------------- the sweep
def run_dpsgd(results: str | Path, *, corpus: str = "rt-polarity", epsilons: Sequence[float] = EPSILONS,
              setting: str = "head", epochs: int = 10, batch_size: int = 256, clip: float = 1.0, lr: float = 1e-3,
              hidden: Sequence[int] = (128,), optimizer: str = "adam", accountant: str = "prv",
              seeds: Sequence[int] = (0,), max_train: int | None = None, force: bool = False,
              log: Callable[[str], None] | None = None) -> list[Path]:
    """Write (or reuse) one record per (epsilon or ``none``, seed) under ``results``; returns their paths (per seed:
    ``none``, then the epsilons in order). Module docstring: what is run and measured."""
    from veil.outputs import check_output_dir, existing_record

    say = print if log is None else log
    runs = planned_runs(corpus=corpus, epsilons=epsilons, setting=setting, epochs=epochs, batch_size=batch_size,
                        clip=clip, lr=lr, hidden=hidden, optimizer=optimizer, accountant=accountant, seeds=seeds,
                        max_train=max_train)
    root = check_output_dir(results)
    paths = [record_path(root, r) for r in runs]
    kept = {p: existing_record(p, r.identity(), force=force) for r, p in zip(runs, paths)}  # checks all first
    data: dict[str, Any] | None = None
    baseline: ResultRecord | None = None
    for run, path in zip(runs, paths):
        record, fresh = kept[path], False
        if record is None:
            if data is None:
                data = _load(corpus, max_train, say, setting)
                if batch_size > data["n_train"]:
                    raise InvalidParameterError(f"batch_size={batch_size} is more than the {data['n_train']} "
                                                "training examples; lower the batch size or raise max_train")
                root.mkdir(parents=True, exist_ok=True)
            record, fresh = _record(run, data, None if run.epsilon is None else baseline), True
        elif run.epsilon is not None and _stale_change(record, baseline):
            record, fresh = _with_change(record, baseline), True  # its none run was made again: follow it
        if run.epsilon is None:
            baseline = record
        if fresh:
            record.write(path)
            say(f"{run.corpus} {run.setting} {run.label} seed {run.seed}: {_headline(record)}")
            say(f"wrote {path}")
    reused = sum(rec is not None for rec in kept.values())
    if reused:
        say(f"{corpus}: {reused} of {len(paths)} records existed under this configuration and were kept "
            "(--force recomputes)")
    return paths


def _headline(record: ResultRecord) -> str:
    m = record.metrics
    text = f"accuracy {m['accuracy']}"
    if "epsilon" in m:
        text += (f", epsilon {m['epsilon'].mean:.3f} (PRV {m['epsilon_prv'].mean:.3f}, RDP "
                 f"{m['epsilon_rdp'].mean:.3f}) at delta {m['delta'].mean:.3g}, sigma {m['sigma'].mean:.4g}, "
                 f"{int(m['steps'].mean)} steps")
    if "accuracy_change" in m:
        text += f"; change against none {m['accuracy_change']}"
    return text
