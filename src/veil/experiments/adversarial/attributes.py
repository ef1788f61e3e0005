"""Coavoux et al. (2018) on veil's corpora: train the main model with a defense, then run every attacker.

One run = one (corpus, encoder, defense, width, seed): Phase 1 trains encoder + head with the defense (dev-selected
on main accuracy, as the paper), Phase 2 computes r(x) of every split with the frozen encoder, Phase 3 trains the
post-hoc attackers (``mlp`` = the paper's, ``mlp-wide``, ``linear``) on the train split's r(x) and scores them on
test; multidetasking and gradient reversal also score their training-time adversary on the test r(x). The run is
one :class:`~veil.results.ResultRecord` (``results/attributes/<name>.json``), written atomically; an existing file
is kept unless ``force`` (so a sweep resumes where it stopped).

The seed sets the encoder's and head's initialisation, the batch order, dropout, the adversaries' initialisation,
declustering's pairs and the attackers' own randomness; a ``max_train`` subset is drawn with a fixed seed (0), so
seeds vary the models, not the data.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from veil.errors import InvalidParameterError
from veil.results import Metric, ResultRecord

__all__ = ["AttributeRun", "AttributeOutcome", "train_attribute", "run_attribute", "result_path", "run_or_skip",
           "existing_result", "identity", "sweep", "ATTACKERS", "ENCODERS", "post_hoc_attackers",
           "strongest_attacker"]

ATTACKERS = ("mlp", "mlp-wide", "linear")
ENCODERS = ("lstm", "minilm")
METHOD = "attributes"


@dataclass(frozen=True)
class AttributeRun:
    corpus: str = "news-articles"
    defense: str = "none"
    width: int = 64
    seed: int = 0
    encoder: str = "lstm"
    epochs: int = 16
    attacker_epochs: int = 16
    batch_size: int = 32
    lr: float = 1e-3
    alpha: float | None = None  # multidetask/grl/generation: weight of -log P(y|x) (1); decluster: alpha (0.1)
    beta: float = 1.0
    reduction: str = "sum"
    max_chars: int = 300
    max_tokens: int = 100
    max_train: int | None = None
    top_k: int | None = None

    def __post_init__(self) -> None:
        from veil.corpora.attributes import attribute_names
        from veil.defenses.adversarial import defense_names
        from veil.validation import check_choice, check_int

        if not (isinstance(self.corpus, str) and self.corpus.startswith("file-")):  # a file of your own comes
            check_choice("corpus", self.corpus, attribute_names())  # with its data (veil bench --private-column)
        check_choice("defense", self.defense, defense_names())
        check_choice("encoder", self.encoder, ENCODERS)
        check_choice("reduction", self.reduction, ("sum", "mean"))
        for name in ("width", "epochs", "attacker_epochs", "batch_size", "max_chars", "max_tokens"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("seed", self.seed, minimum=0)
        if self.max_train is not None:
            check_int("max_train", self.max_train, minimum=2)
        if self.alpha is not None and not (np.isfinite(self.alpha) and self.alpha > 0):
            raise InvalidParameterError(f"alpha must be finite and > 0, got {self.alpha}")
        if not (np.isfinite(self.lr) and 0 < self.lr <= 1):
            raise InvalidParameterError(f"lr must be in (0, 1], got {self.lr}")
        if not (np.isfinite(self.beta) and self.beta > 0):
            raise InvalidParameterError(f"beta must be finite and > 0, got {self.beta}")

    @property
    def name(self) -> str:
        from veil.outputs import tag

        budget = tag(ep=self.epochs if self.epochs != 16 else None, n=self.max_train,
                     bs=self.batch_size if self.batch_size != 32 else None, lr=self.lr if self.lr != 1e-3 else None,
                     a=self.alpha, b=self.beta if self.beta != 1.0 else None,
                     red=self.reduction if self.reduction != "sum" else None)
        base = f"{self.corpus}-{self.encoder}-{self.defense}-w{self.width}-s{self.seed}"
        return f"{base}-{budget}" if budget else base

    def objective_params(self) -> dict[str, Any]:
        if self.defense in ("multidetask", "grl"):
            return {"alpha": self.alpha or 1.0, "beta": self.beta}
        if self.defense == "generation":
            return {"alpha": self.alpha or 1.0, "beta": self.beta, "reduction": self.reduction,
                    "max_chars": self.max_chars}
        if self.defense == "decluster":
            return {"alpha": self.alpha or 0.1}
        return {}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def result_path(cfg: AttributeRun, root: str | Path) -> Path:
    return Path(root) / f"{cfg.name}.json"


def _inputs(cfg: AttributeRun, data: Any) -> dict[str, Any]:
    from veil.models.lstm import TokenInputs, VectorInputs, Vocabulary

    texts = {s: [data.texts[i] for i in data.indices(s)] for s in ("train", "dev", "test")}
    if cfg.encoder == "lstm":
        vocab = Vocabulary(texts["train"], max_tokens=cfg.max_tokens)
        return {"vocab": vocab, **{s: TokenInputs(t, vocab) for s, t in texts.items()}}
    from veil.encoders import TextEncoder
    from veil.encoders.cache import encode_cached

    from veil.encoders.plan import announce_encoding

    enc = TextEncoder("minilm")
    for s, t in texts.items():
        announce_encoding(enc, t, what=f"{s} texts of {cfg.corpus} (the frozen encoder's inputs)",
                          cache_as=(f"attributes-{cfg.corpus}", s))
    return {s: VectorInputs(encode_cached(enc, t, f"attributes-{cfg.corpus}", s, progress=False))
            for s, t in texts.items()}


def _fit_head(R: dict[str, np.ndarray], y: dict[str, np.ndarray], n_classes: int, seed: int, epochs: int) -> Any:
    """A fresh main-task head on fixed (erased) representations, dev-selected (the LEACE baseline)."""
    import torch

    from veil.training.adversarial import MainConfig, train_main
    from veil.models.lstm import VectorInputs

    class Identity(torch.nn.Module):
        def __init__(self, width: int) -> None:
            super().__init__()
            self.width = width

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x

    model = train_main(Identity(R["train"].shape[1]), VectorInputs(R["train"]), y["train"], VectorInputs(R["dev"]),
                       y["dev"], n_classes=n_classes, objective=None,
                       config=MainConfig(epochs=epochs, seed=seed + 1000))
    return model.head


@dataclass(frozen=True)
class AttributeOutcome:
    """One configuration trained and attacked (:func:`train_attribute`): the record's metrics, every attacker's
    result, and per test example each post-hoc attacker's and the floor's scoring rows (``rows[arch]``,
    ``rows["floor"]``: correct variables / V for attributes, (TP, FP, FN) for entities), for paired tests."""

    run: AttributeRun
    metrics: dict[str, Metric]
    attacks: dict[str, Any]  # arch -> AttackResult (post-hoc attackers, and "adversary" when the defense has one)
    rows: dict[str, np.ndarray]
    kind: str
    n: dict[str, int]
    best_epoch: int
    dev_curve: list[float]
    train_seconds: float
    examples_per_second: float | None
    chars_truncated: Any
    defense_config: dict[str, Any]
    seconds: float
    #: the released encoder as an attacker who can query it sees it: the projection encoder's input vectors (n, d)
    #: -> r(x) (n, width), LEACE's erasure included; None for the LSTM encoder (its input is text)
    query: Callable[[np.ndarray], np.ndarray] | None = None
    #: the examples of each split (rows of the corpus), in the order of ``rows`` and of r(x)
    ids: dict[str, np.ndarray] | None = None

    def strongest(self) -> str:
        """The post-hoc attacker with the best score on its own dev split (ties: the first of :data:`ATTACKERS`)."""
        return strongest_attacker(self.attacks)


def strongest_attacker(attacks: Mapping[str, Any]) -> str:
    """The post-hoc attacker with the best score on its own dev split (ties: the first of :data:`ATTACKERS`)."""
    return max(ATTACKERS, key=lambda a: (attacks[a].config["dev_score"], -ATTACKERS.index(a)))


def post_hoc_attackers(R: Mapping[str, np.ndarray], private: Mapping[str, Any], *, ids: Mapping[str, Any],
                       seed: int, epochs: int, defense: Mapping[str, Any]) -> tuple[Any, Any, dict[str, Any],
                                                                                   dict[str, np.ndarray]]:
    """Phase 3: each of :data:`ATTACKERS` trained on the train split's r(x) (``R``) and private variables
    (``private``, :class:`~veil.corpora.attributes.PrivateVariables` per split), selected on dev, scored on test.
    Returns (splits, truth, attackers' results, per-test-example rows: each attacker's and the floor's, the best
    constant predictor on the training labels). The bench's representations cells and ``veil.attack`` on a
    ``representations`` release both attack through this."""
    from veil.attacks.attribute import (AttributeAttack, _per_example, evaluate_attribute, floor_predictions,
                                        observe_splits, predict_sets)

    splits, truth = observe_splits(R, private, ids=ids, defense=dict(defense))
    Z = np.asarray(truth.Z, dtype=np.float32)
    rows = {"floor": _per_example(floor_predictions(splits.z_train, splits.groups, splits.kind, len(Z)), Z,
                                  splits.groups, splits.kind)}
    attacks: dict[str, Any] = {}
    seeds = np.random.SeedSequence([seed, 2]).spawn(len(ATTACKERS))
    for arch, ss in zip(ATTACKERS, seeds):
        attack = AttributeAttack(architecture=arch, epochs=epochs, rng=np.random.default_rng(ss))
        attacks[arch] = evaluate_attribute(attack, splits, truth, rng=seed)
        hits = predict_sets(attack.predict_proba(splits.test), splits.groups, splits.kind, attack.threshold)
        rows[arch] = _per_example(hits, Z, splits.groups, splits.kind)
    return splits, truth, attacks, rows


def train_attribute(cfg: AttributeRun, data: Any, *, progress: bool = False,
                    vectors: Mapping[str, np.ndarray] | None = None) -> AttributeOutcome:
    """Phases 1-3 of one configuration on ``data`` (an AttributeCorpus, already limited): train the main model with
    the defense, compute r(x), train and score the post-hoc attackers (module docstring). ``vectors``: the
    projection encoder's inputs per split (train, dev, test: one row per example of that split) in place of the
    frozen MiniLM vectors of ``data.texts`` (a vector release, e.g. DeepCandidate's; ``encoder="minilm"`` only)."""
    import torch

    from veil.attacks.attribute import evaluate_attribute
    from veil.defenses.adversarial import make_objective
    from veil.training.adversarial import MainConfig, PlainObjective, representations, train_main
    from veil.metrics.leakage import wilson_interval
    from veil.models.lstm import LSTMEncoder, ProjectionEncoder
    from veil.progress import progress_bar

    start = time.perf_counter()
    idx = {s: data.indices(s) for s in ("train", "dev", "test")}
    empty = [s for s, i in idx.items() if len(i) == 0]
    if empty:
        raise InvalidParameterError(f"corpus {data.name!r} has no {', '.join(empty)} examples; every split is needed")
    y = {s: data.labels[i] for s, i in idx.items()}
    private = {s: data.private.select(i) for s, i in idx.items()}
    if vectors is None:
        inputs = _inputs(cfg, data)
    else:
        from veil.models.lstm import VectorInputs

        if cfg.encoder != "minilm" or set(vectors) != set(idx) or any(
                np.shape(vectors[s])[0] != len(i) for s, i in idx.items()):
            raise InvalidParameterError("vectors must map train, dev and test to one row per example of that split, "
                                        "with encoder='minilm' (the projection encoder reads vectors)")
        inputs = {s: VectorInputs(np.asarray(vectors[s], dtype=np.float32)) for s in idx}
    enc_gen = torch.Generator().manual_seed(int(np.random.SeedSequence([cfg.seed, 1]).generate_state(1)[0]))
    encoder = (LSTMEncoder(inputs["vocab"], width=cfg.width, rng=enc_gen) if cfg.encoder == "lstm"
               else ProjectionEncoder(inputs["train"].X.shape[1], width=cfg.width, rng=enc_gen))
    objective = make_objective(cfg.defense, **cfg.objective_params()) or PlainObjective()
    main_cfg = MainConfig(epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, seed=cfg.seed)
    with progress_bar(cfg.epochs, f"{cfg.name}: training", progress) as advance:
        model = train_main(encoder, inputs["train"], y["train"], inputs["dev"], y["dev"],
                           n_classes=len(data.label_names), objective=objective, config=main_cfg,
                           private_train=private["train"], texts_train=[data.texts[i] for i in idx["train"]],
                           progress=advance)
    R = {s: representations(model.encoder, inputs[s]) for s in idx}
    head = model.head
    eraser = None
    if cfg.defense == "leace":
        from veil.defenses.adversarial.leace import LeaceErasure

        eraser = LeaceErasure().fit(R["train"], private["train"])
        R = {s: eraser.protect(v) for s, v in R.items()}
        head = _fit_head(R, y, len(data.label_names), cfg.seed, cfg.epochs)

    def query(X: np.ndarray) -> np.ndarray:  # the released encoder on the projection's input vectors
        from veil.models.lstm import VectorInputs

        r = representations(model.encoder, VectorInputs(np.asarray(X, dtype=np.float32)))
        return r if eraser is None else np.asarray(eraser.protect(r), dtype=np.float32)
    with torch.no_grad():
        pred = head(torch.from_numpy(R["test"])).argmax(dim=1).numpy()
    correct = int((pred == y["test"]).sum())
    lo, hi = wilson_interval(correct, len(pred))
    majority = float(np.mean(y["test"] == np.bincount(y["train"]).argmax()))
    metrics: dict[str, Metric] = {
        "test_accuracy": Metric(correct / len(pred), n=len(pred), ci_low=lo, ci_high=hi, ci_level=0.95),
        "majority_accuracy": Metric(majority, n=len(pred)),
        "dev_accuracy": Metric(model.dev_accuracy[model.best_epoch], n=len(y["dev"])),
    }
    splits, truth, attacks, rows = post_hoc_attackers(
        R, private, ids=idx, seed=cfg.seed, epochs=cfg.attacker_epochs,
        defense={"defense": cfg.defense, **cfg.objective_params()})
    adversary = getattr(objective, "adversary", None)
    if adversary is not None:
        with torch.no_grad():
            P = torch.sigmoid(adversary(torch.from_numpy(R["test"]))).numpy()
        attacks["adversary"] = evaluate_attribute(None, splits, truth, probabilities=P, rng=cfg.seed)
    for who, res in attacks.items():
        for key in ("privacy", "score", "advantage", "paper_advantage"):
            if key in res.metrics:
                metrics[f"{key}[{who}]"] = res.metrics[key]
    first = attacks["mlp"].metrics
    metrics["floor_privacy"], metrics["floor_score"] = first["floor_privacy"], first["floor_score"]
    if "paper_floor_privacy" in first:
        metrics["paper_floor_privacy"] = first["paper_floor_privacy"]
    return AttributeOutcome(run=cfg, metrics=metrics, attacks=attacks, rows=rows, kind=splits.kind,
                            n={s: int(len(i)) for s, i in idx.items()}, best_epoch=int(model.best_epoch),
                            dev_curve=list(model.dev_accuracy), train_seconds=float(model.train_seconds),
                            examples_per_second=model.examples_per_second,
                            chars_truncated=getattr(objective, "truncated", None),
                            defense_config=objective.config() if cfg.defense != "leace" else {"defense": "leace"},
                            seconds=time.perf_counter() - start,
                            query=query if cfg.encoder == "minilm" else None,
                            ids={s: np.asarray(i) for s, i in idx.items()})


def run_attribute(cfg: AttributeRun, *, data: Any = None, progress: bool = False) -> ResultRecord:
    """Run one configuration (module docstring, :func:`train_attribute`) as a record; ``data`` overrides the
    built-in corpus (tests, user corpora)."""
    from veil.corpora.attributes import load_attributes

    start = time.perf_counter()
    data = load_attributes(cfg.corpus, top_k=cfg.top_k) if data is None else data
    data = data.limit(cfg.max_train, rng=0)
    out = train_attribute(cfg, data, progress=progress)
    extra = {
        "n": out.n, "label_names": list(data.label_names),
        "private": data.private.describe(), "corpus_notes": data.notes, "best_epoch": out.best_epoch,
        "dev_curve": out.dev_curve, "train_seconds": out.train_seconds,
        "train_examples_per_second": out.examples_per_second,
        "chars_truncated": out.chars_truncated,
        "attacks": {who: res.to_dict() for who, res in out.attacks.items()},
        "defense_config": out.defense_config,
    }
    config = {**identity(cfg), "name": cfg.name, "kind": data.private.kind, "main": _main_config(cfg),
              "objective": cfg.objective_params()}
    return ResultRecord(method=METHOD, experiment=cfg.name, config=config, metrics=out.metrics,
                        wall_time_s=time.perf_counter() - start, extra=extra)


def _main_config(cfg: AttributeRun) -> dict[str, Any]:
    from veil.training.adversarial import MainConfig

    return MainConfig(epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, seed=cfg.seed).to_dict()


def identity(cfg: AttributeRun) -> dict[str, Any]:
    """What a record is compared on before it is reused: the run's settings, and for ``encoder="minilm"`` the
    backend of its frozen MiniLM encodings when it is not torch (``encoder_backend``; absent from every torch
    record), resolved as the run's ``TextEncoder`` will resolve it."""
    from veil.encoders.backends import backend_identity

    return {**cfg.to_dict(), **(backend_identity(None) if cfg.encoder == "minilm" else {})}


def existing_result(cfg: AttributeRun, root: str | Path, *, force: bool = False) -> ResultRecord | None:
    """The record of ``cfg`` in ``root`` if it exists and was made under ``cfg`` (None if absent or ``force``)."""
    from veil.encoders.backends import with_stored_backend
    from veil.outputs import existing_record

    requested = identity(cfg)
    return existing_record(result_path(cfg, root), requested, force=force, view=with_stored_backend(requested))


def run_or_skip(cfg: AttributeRun, root: str | Path, *, force: bool = False, data: Any = None,
                progress: bool = False) -> tuple[Path, bool]:
    """(path, ran): run and write the record, or keep an existing one made under ``cfg`` (``force`` re-runs it).

    A damaged record, or one made under another configuration, is an error naming the file and the fix
    (:func:`existing_result`), never kept.
    """
    path = result_path(cfg, root)
    if existing_result(cfg, root, force=force) is not None:
        return path, False
    run_attribute(cfg, data=data, progress=progress).write(path)
    return path, True


def _cell_name(cfg: AttributeRun) -> str:
    return cfg.name


def _finished(cfg: AttributeRun, path: Path) -> bool:
    return existing_result(cfg, path.parent) is not None


def _run_cell(cfg: AttributeRun, *, data: Any = None) -> ResultRecord:
    """One sweep cell: in this process with the corpus already loaded (``data``), or in a worker (``data`` None:
    loaded from its cache) with one torch thread, the sweep's parallelism being across processes."""
    if data is None:
        import torch

        torch.set_num_threads(1)
    return run_attribute(cfg, data=data)


def _summary(rec: ResultRecord) -> str:
    shown = {k: v for k, v in rec.metrics.items() if k in ("test_accuracy", "privacy[mlp]")}
    return ", ".join(f"{k}={v}" for k, v in shown.items())


def sweep(corpus: str, root: str | Path, *, defenses: tuple[str, ...] | None = None, seeds: tuple[int, ...] = (0, 1, 2),
          width: int = 64, force: bool = False, progress: bool = True, log: Any = None, workers: int = 1,
          ray_address: str | None = None, **options: Any) -> list[Path]:
    """Every defense x seed on one corpus at width ``width`` (resumable, :mod:`veil.experiments._sweep`: existing
    records made under the same configuration are kept); ``defenses`` None: ``none`` and every registered
    representations defense.

    The runs are independent: ``workers`` > 1 runs that many at once as Ray tasks on a local cluster (each with one
    torch thread; on a 2-core machine ``workers=2`` halves the wall time), ``ray_address`` on an existing cluster.
    Records are written per run, so the result does not depend on ``workers``.
    """
    from functools import partial

    from veil.corpora.attributes import load_attributes
    from veil.experiments._sweep import Sweep, finished, run_records

    if defenses is None:
        from veil.defenses.adversarial import defense_names

        defenses = tuple(defense_names())
    cfgs = [AttributeRun(corpus=corpus, defense=d, width=width, seed=s, **options) for d in defenses for s in seeds]
    sequential = workers == 1 and ray_address is None
    plan = Sweep(name=f"attributes sweep on {corpus}", path=partial(result_path, root=root), finished=_finished,
                 cell_id=_cell_name, run=_run_cell, summary=_summary)
    todo = len(cfgs) - len(finished(plan, cfgs, force=force))  # a damaged or stale record stops the sweep here
    data = load_attributes(corpus, top_k=options.get("top_k")) if todo else None  # built (and cached) once
    if sequential:
        plan = replace(plan, run=partial(_run_cell, data=data))
    return run_records(plan, cfgs, root, workers=workers, ray_address=ray_address, force=force,
                       progress=progress, log=log)
